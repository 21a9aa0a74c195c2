//! The pipelined MMQ kernels' shapes and shared-memory layout (gpu/src/moe/mmq/pipe/): the
//! 64-column kernel `moe_mmq_pipe_<type>` (64 activation rows per CTA; wide or tall warps by
//! type, [`MmqPipeShape::wide_of`]) and the narrow one `moe_mmq_narrow_<type>` (16 rows, for
//! layers with few rows per expert).

use super::{MMQ_COLS, MMQ_KSTEP, MMQ_ROWS, MMQ_SMEM_ROW, MMQ_THREADS, Q8_1_MMQ_BYTES, WType};
use super::{fused_sub_steps, odd_slot_bytes};

mod shape;
pub use shape::MmqPipeShape;

/// Shared-memory budget of one wide pipelined CTA: two CTAs per SM on sm_90 (228 KB per SM, of
/// which the driver reserves 1 KB per CTA). The copy lead of each weight type is the longest
/// that fits it ([`MmqPipeSmem`]).
pub const MMQ_PIPE_SMEM_BUDGET: usize = 113 * 1024;
/// Activation rows (MMQ columns) of a flat CTA (`MmqPipeShape::Flat`).
pub const MMQ_FLAT_COLS: usize = 128;
/// Weight rows of a flat CTA.
pub const MMQ_FLAT_ROWS: usize = 64;
/// Shared-memory budget of one narrow pipelined CTA: three CTAs per SM on sm_90.
pub const MMQ_NARROW_SMEM_BUDGET: usize = 75 * 1024;
/// The longest copy lead of the pipelined MMQ kernel, in K steps.
pub const MMQ_PIPE_MAX_LEAD: usize = 4;
/// The copy lead, in K steps, of a layout whose stages are longer than its type's blocks need
/// ([`MmqPipeShape::stage_steps`]): with 4-step stages, a stage is issued 3 steps before its
/// first is multiplied and the ring holds 2 stages and 4 activation buffers (54 KB for Q2_0).
/// Measured on the H200 (the Q2_0 gate/up product, narrow, T = 512; BENCHMARKS.md): 0.311 ms
/// at a lead of 2, 0.313-0.316 at 3, 0.320-0.321 at 4 (whose even 160-byte slot conflicts 2-way
/// in the banks), against 0.314-0.315 with 128-value stages.
pub const MMQ_LONG_STAGE_LEAD: usize = 2;
/// Bytes of one `mbarrier` (the pipelined kernel's per-step transaction barrier on sm_90).
pub const MMQ_PIPE_BAR_BYTES: usize = 8;
/// Threads that arrive on a pipelined K step's barrier (sm_90): the one that copies the step's
/// activation blocks.
pub const MMQ_PIPE_BAR_ARRIVALS: usize = 1;
/// Producer warps of a warp-specialized flat CTA (`moe_mmq_flat_ws_<type>`, sm_90): they copy
/// and decode, each thread `MMQ_THREADS / (32 x this)` of the flat kernel's threads' groups.
/// Two: measured on an H100 at T = 16,384 (BENCHMARKS.md), the flat products with one producer
/// warp took 1.7x (Q2_0 / Q2_0) and 1.9x (IQ2_S / IQ4_NL) the flat kernels' layer time, with
/// two 1.03x and 1.06x: the producers' decode bounds the K loop. Four (80 registers, the
/// consumers' K step with 3 local loads for Q2_0, 21 for IQ2_S) measured the same way: 1.035x
/// two warps' time for Q2_0 / Q2_0, 0.98x for IQ2_S / IQ4_NL, and 1.07x and 1.05x the flat
/// kernels': halving the producer's chain again no longer pays.
pub const MMQ_WS_PRODUCER_WARPS: usize = 2;
/// Threads of a warp-specialized flat CTA: the flat kernel's [`MMQ_THREADS`] as consumers (they
/// multiply) and [`MMQ_WS_PRODUCER_WARPS`] producer warps.
pub const MMQ_WS_THREADS: usize = MMQ_THREADS + 32 * MMQ_WS_PRODUCER_WARPS;
/// Registers of one SM (sm_60 to sm_90).
pub const SM_REGISTERS: usize = 65_536;
/// The register cap of the warp-specialized flat kernels: two CTAs of [`MMQ_WS_THREADS`] per
/// SM, allocated 8 at a time: 112 with one producer warp (none spills in ptxas 12.9 but IQ2_XS's
/// kernel, 8 bytes outside its K loop), 96 with two (16 to 20 bytes each, outside the K loops),
/// 80 with four (40 to 100 bytes; 3 local loads in Q2_0's consumer K step, 21 in IQ2_S's).
pub const MMQ_WS_MAX_REGISTERS: u32 = (SM_REGISTERS / (2 * MMQ_WS_THREADS) / 8 * 8) as u32;
const _: () = assert!(MMQ_THREADS.is_multiple_of(64 * MMQ_WS_PRODUCER_WARPS));
/// Activation rows (MMQ columns) of a narrow CTA.
pub const MMQ_NARROW_COLS: usize = 16;

/// The shared-memory layout of a pipelined MMQ CTA for weight type `w` and a shape (byte
/// offsets).
///
/// The copies run `lead` K steps ahead: K step s (its activation blocks, and its raw weight
/// stage when s starts one) is issued in iteration `s - 1 - lead`, and waited for at the top of
/// iteration `s - 1`, whose end decodes it. Its buffers are free by the time it is issued with
/// `lead + 2` activation buffers (a step's blocks are read by its decode and, one iteration
/// later, by its product) and `ceil(lead / sub) + 1` weight buffers (a stage is read only by
/// its decodes; `sub` = [`MmqPipeShape::stage_steps`]):
/// - `nw` raw weight stages of `MMQ_ROWS` x `slot` bytes (the rows' 16-byte windows, `sub`
///   K steps each), from offset 0;
/// - `na` activation buffers of [`MmqPipeShape::acts_bytes`] at `acts`;
/// - two decoded tiles of `tile_bytes` at `tiles`, each the int8 weights `[128][144]`, the
///   weight scales `[4 groups][halves][128]` f32 (rows permuted by
///   [`MmqPipeShape::row_slot`]; two halves for the 16-value scale types) at `wscales`, and the
///   activation scales `[4 groups][cols]` f32 (columns permuted by [`MmqPipeShape::col_slot`])
///   at `xscales`;
/// - `na` transaction barriers (8 bytes each) at `bars`, one per activation buffer: on sm_90
///   a K step's activation blocks are one bulk copy that completes on its buffer's barrier
///   (gpu/src/moe/mmq/pipe/copy/mod.rs); a shape that decodes into registers has `na` empty
///   barriers after them ([`MmqPipeSmem::empty_bar`], [`MmqPipeShape::bars_per_buffer`]).
///
/// A shape that decodes into registers ([`MmqPipeShape::in_registers`]) has no decoded tiles
/// (`tile_bytes` 0): its warps read the raw stage in the product of each K step, one iteration
/// later than a decode would, so it keeps `ceil((lead + 1) / sub) + 1` weight buffers and waits
/// for step j itself at the top of iteration j (gpu/src/moe/mmq/pipe/regs.rs).
///
/// - the type's lookup tables ([`WType::lookup_table_bytes`]: sign table and grid, none for
///   the types without a grid) at `tables`, copied from the kernel's constants in its prologue:
///   the decoders' table lookups then read shared memory, where a warp's 32 random entries
///   cost a few bank-conflict wavefronts instead of one L1 tag lookup per cache line touched.
///
/// `lead` is 0 when not even a one-step lead fits the budget (no type today): the host then
/// runs another kernel (the wide one for a narrow layout, the classic one for a wide layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmqPipeSmem {
    pub slot: usize,
    pub lead: usize,
    pub nw: usize,
    pub na: usize,
    pub acts: usize,
    /// Bytes of one activation buffer.
    pub acts_bytes: usize,
    pub tiles: usize,
    pub tile_bytes: usize,
    /// Offsets inside a decoded tile.
    pub wscales: usize,
    pub xscales: usize,
    pub bars: usize,
    /// The narrow shape: `nw` x 8 warps weight barriers (8 bytes each) after the activation
    /// buffers' ones, on which each warp's tensor copies of its rows complete
    /// ([`MmqPipeSmem::weight_bar`]; `moe_mmq_narrow_tma_<type>`). The 128-row and flat shapes'
    /// tensor copies complete on the activations' barriers; the tall shape has none.
    pub wbars: usize,
    pub tables: usize,
    pub total: usize,
}

impl MmqPipeSmem {
    /// The layout of `w`'s 64-column kernel (its shape: [`MmqPipeShape::wide_of`]).
    pub const fn new(w: WType) -> MmqPipeSmem {
        Self::of(w, MmqPipeShape::wide_of(w))
    }

    /// The layout in the shape's budget; a narrow layout that does not fit three CTAs per SM
    /// takes the wide budget (two per SM) instead.
    pub const fn of(w: WType, shape: MmqPipeShape) -> MmqPipeSmem {
        let sm = Self::in_budget(w, shape, shape.budget());
        if sm.lead == 0 && shape.budget() < MMQ_PIPE_SMEM_BUDGET {
            Self::in_budget(w, shape, MMQ_PIPE_SMEM_BUDGET)
        } else {
            sm
        }
    }

    const fn in_budget(w: WType, shape: MmqPipeShape, budget: usize) -> MmqPipeSmem {
        let halves = if w.scale_values() == 16 { 2 } else { 1 };
        let rows = shape.rows();
        let wscales = rows * MMQ_SMEM_ROW;
        let xscales = wscales + 4 * halves * rows * 4;
        let tile_bytes = if shape.in_registers() {
            0
        } else {
            xscales + 4 * shape.cols() * 4
        };
        let acts_bytes = shape.acts_bytes();
        let window = shape.stage_window(w);
        let odd = odd_slot_bytes(window);
        // The odd slot (fewer bank conflicts in the decode) unless it shortens the lead.
        // A stage longer than the type's blocks need (`MmqPipeShape::stage_steps`) takes the
        // odd slot and a lead of `MMQ_LONG_STAGE_LEAD`; otherwise the odd slot unless it shortens
        // the lead.
        let long = shape.stage_steps(w) > fused_sub_steps(w);
        let slot = if long
            || Self::lead_for(w, shape, odd, tile_bytes, acts_bytes, budget)
                >= Self::lead_for(w, shape, window, tile_bytes, acts_bytes, budget)
        {
            odd
        } else {
            window
        };
        let mut lead = Self::lead_for(w, shape, slot, tile_bytes, acts_bytes, budget);
        if long && lead > MMQ_LONG_STAGE_LEAD {
            lead = MMQ_LONG_STAGE_LEAD;
        }
        let (nw, na) = Self::buffers(w, shape, lead);
        let acts = nw * rows * slot;
        let tiles = acts + na * acts_bytes;
        let bars = tiles + 2 * tile_bytes;
        let wbars = bars + na * shape.bars_per_buffer() * MMQ_PIPE_BAR_BYTES;
        let tables = (wbars + Self::weight_bar_bytes(shape, nw)).next_multiple_of(16);
        MmqPipeSmem {
            slot,
            lead,
            nw,
            na,
            acts,
            acts_bytes,
            tiles,
            tile_bytes,
            wscales,
            xscales,
            bars,
            wbars,
            tables,
            total: tables + w.lookup_table_bytes(),
        }
    }

    /// Where the SwiGLU epilogue's arrays ([`MMQ_SWIGLU_SMEM`] bytes) lie once the K loop is
    /// done: over the decoded tiles, or, decoding into registers (no tiles), over the raw
    /// weight stages.
    pub const fn epilogue(&self) -> usize {
        if self.tile_bytes == 0 { 0 } else { self.tiles }
    }

    /// The warp-specialized flat kernel's barriers (`moe_mmq_flat_ws_<type>`): after the
    /// layout, 8-byte aligned, `full[0]`, `full[1]`, `empty[0]`, `empty[1]` (8 bytes each;
    /// gpu/src/moe/mmq/pipe/ws.rs).
    pub const fn ws_bars(&self) -> usize {
        self.total.next_multiple_of(MMQ_PIPE_BAR_BYTES)
    }

    /// Shared-memory bytes of the warp-specialized flat kernel: the layout and its barriers.
    pub const fn ws_total(&self) -> usize {
        self.ws_bars() + 4 * MMQ_PIPE_BAR_BYTES
    }

    /// Offset of activation buffer `i`'s empty barrier (a shape that decodes into registers).
    pub const fn empty_bar(&self, i: usize) -> usize {
        self.bars + (self.na + i) * MMQ_PIPE_BAR_BYTES
    }

    /// Offset of warp `warp`'s barrier for weight buffer `i` (the narrow shape;
    /// `MmqPipeSmem::wbars`).
    pub const fn weight_bar(&self, warp: usize, i: usize) -> usize {
        self.wbars + (i * (MMQ_THREADS / 32) + warp) * MMQ_PIPE_BAR_BYTES
    }

    /// Bytes of the weight barriers of `nw` weight buffers ([`MmqPipeSmem::wbars`]).
    const fn weight_bar_bytes(shape: MmqPipeShape, nw: usize) -> usize {
        if matches!(shape, MmqPipeShape::Narrow) {
            nw * (MMQ_THREADS / 32) * MMQ_PIPE_BAR_BYTES
        } else {
            0
        }
    }

    /// Weight and activation buffers for a lead of `lead` K steps (see the type's doc).
    pub const fn buffers(w: WType, shape: MmqPipeShape, lead: usize) -> (usize, usize) {
        let held = if shape.in_registers() { lead + 1 } else { lead };
        (held.div_ceil(shape.stage_steps(w)) + 1, lead + 2)
    }

    const fn lead_for(
        w: WType,
        shape: MmqPipeShape,
        slot: usize,
        tile_bytes: usize,
        acts_bytes: usize,
        budget: usize,
    ) -> usize {
        let mut lead = MMQ_PIPE_MAX_LEAD;
        while lead > 0 {
            let (nw, na) = Self::buffers(w, shape, lead);
            let bars = na * shape.bars_per_buffer() * MMQ_PIPE_BAR_BYTES
                + Self::weight_bar_bytes(shape, nw);
            let end = nw * shape.rows() * slot + na * acts_bytes + 2 * tile_bytes + bars;
            // The tables 16-byte aligned after the barriers, as `in_budget` lays them.
            if end.next_multiple_of(16) + w.lookup_table_bytes() <= budget {
                return lead;
            }
            lead -= 1;
        }
        0
    }
}

/// The SwiGLU + q8_1 epilogue of the gate/up kernels `moe_mmq_(pipe|narrow)_swiglu_<type>`
/// (gpu/src/moe/mmq/pipe/swiglu.rs). Their 128 tile rows are 64 gate rows and the 64 up rows of
/// the same features (rows `16 i .. 16 i + 7` gate features `8 i ..`, the next 8 up), so a CTA
/// makes 64 values of H (half a D4 block) per column. The epilogue's shared memory, laid over
/// the decoded tiles once the K loop is done: the warps' partial maxima `[warp][column]` f32,
/// the int8 H values `[column][MMQ_SWIGLU_QS_ROW]`, the two group scales `[column][2]` f32.
pub const MMQ_SWIGLU_FEATURES: usize = MMQ_ROWS / 2;
/// Bytes per column of the epilogue's int8 staging (64 values, 16-byte aligned rows).
pub const MMQ_SWIGLU_QS_ROW: usize = MMQ_SWIGLU_FEATURES + 16;
/// Offsets of the epilogue's three arrays and its total (see [`MMQ_SWIGLU_FEATURES`]).
/// (Laid out for the most columns of a shape, [`MMQ_FLAT_COLS`]; the partial maxima for
/// `warps_m` x columns, at most 8 x 64 or 2 x 128.)
pub const MMQ_SWIGLU_QS: usize = 8 * MMQ_COLS * 4;
pub const MMQ_SWIGLU_D: usize = MMQ_SWIGLU_QS + MMQ_FLAT_COLS * MMQ_SWIGLU_QS_ROW;
pub const MMQ_SWIGLU_SMEM: usize = MMQ_SWIGLU_D + MMQ_FLAT_COLS * 2 * 4;
// The epilogue fits the two decoded tiles it overlays (each at least the int8 tile).
const _: () = assert!(MMQ_SWIGLU_SMEM <= 2 * MMQ_ROWS * MMQ_SMEM_ROW);
// Half a D4 block per CTA: two 32-value groups, 16-byte aligned in the block's values.
const _: () =
    assert!(2 * MMQ_SWIGLU_FEATURES == MMQ_KSTEP && MMQ_SWIGLU_FEATURES.is_multiple_of(32));

// A K step is one D4 block per column: the tile rows' stride is one block.
const _: () = assert!(MMQ_SMEM_ROW == Q8_1_MMQ_BYTES && MMQ_KSTEP == 128);

#[cfg(test)]
mod tests;
