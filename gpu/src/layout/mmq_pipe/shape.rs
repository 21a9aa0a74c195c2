//! The pipelined MMQ kernels' tile shapes ([`MmqPipeShape`]): rows, columns, warps, stages
//! and the fragments' slots of each (the shared-memory layout is mmq_pipe.rs's).

use super::super::{MMQ_COLS, MMQ_KSTEP, MMQ_ROWS, Q8_1_MMQ_BYTES, WType, fused_sub_steps};
#[cfg(doc)]
use super::MMQ_SWIGLU_FEATURES;
use super::{
    MMQ_FLAT_COLS, MMQ_FLAT_ROWS, MMQ_NARROW_COLS, MMQ_NARROW_SMEM_BUDGET, MMQ_PIPE_SMEM_BUDGET,
};

/// The tile shapes of the pipelined MMQ kernel. All have 8 warps and 128 weight rows but
/// `Flat`'s 64.
/// - `Wide`: 64 columns; warps 4 along the rows x 2 along the columns, each 32 rows (two
///   16-row fragments) x 32 columns (four 8-column tiles).
/// - `Narrow`: 16 columns; warps 8 along the rows, each 16 rows (one fragment) x 16 columns
///   (two 8-column tiles). At about 10 rows per expert every warp has a product (the wide
///   shape leaves its second warp column idle), and its accumulators and shared memory are a
///   quarter of the wide one's, which leaves room for three CTAs per SM.
/// - `Tall`: 64 columns; warps 8 along the rows, each 16 rows x 64 columns (eight 8-column
///   tiles): the narrow shape's warps over the wide shape's columns, so that it decodes into
///   registers too ([`MmqPipeShape::in_registers`]); the 64-column kernel of the types that
///   [`MmqPipeShape::wide_of`] names.
/// - `Flat`: 64 weight rows x 128 columns; warps 2 along the rows x 4 along the columns, each
///   the wide shape's 32 rows x 32 columns. Each weight row's decode and copy serve twice the
///   wide shape's columns, at the wide shape's registers and CTAs per SM; each activation
///   block is copied for 64 weight rows instead of 128.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmqPipeShape {
    Wide,
    Narrow,
    Tall,
    Flat,
}

impl MmqPipeShape {
    /// The shape of weight type `w`'s 64-column pipelined kernel `moe_mmq_pipe[_swiglu]_<type>`,
    /// by measurement (H200, BENCHMARKS.md): tall for the types whose decode is the dearest
    /// (IQ3_S, IQ3_XXS: grid lookups; Q8_0: 34-byte blocks), whose products it made 3-15 %
    /// faster at T = 2,048 and 16,384; wide for the others, which it made slower (Q2_0 gate/up
    /// +12 % and down +6 %, IQ2_XXS gate/up +11 %, IQ4_NL down +4 % at T = 16,384) or, with
    /// two scales per group (IQ2_XS, IQ2_S), made spill.
    pub const fn wide_of(w: WType) -> MmqPipeShape {
        match w {
            WType::Iq3S | WType::Iq3Xxs | WType::Q8_0 => MmqPipeShape::Tall,
            _ => MmqPipeShape::Wide,
        }
    }

    /// Whether the decoded-tile kernels (wide and flat shapes) of type `w` give their count of
    /// live 8-column tiles to ptxas as warp-uniform (`ptx::warp_uniform`, pipe/tiles.rs
    /// `product`), by measurement (H100, BENCHMARKS.md, forty-fourth section): ptxas then moves
    /// the count's address arithmetic to the uniform datapath and drops the `WARPSYNC` + `NOP`
    /// of each group trip; the IQ2_XXS gate/up product ran 5-6 % faster at T = 8,192 and 16,384
    /// (its flat kernel's spill gone, K step 638 -> 603 instructions), IQ3_S's flat one 2 %,
    /// while Q2_0's products ran 2-4 % slower (K step 539 -> 528) and IQ2_S's gate/up 0.7 %
    /// (IQ4_NL's down product within 0.4 %: left as it was). The forty-fifth session's:
    /// IQ3_XXS / Q2_0 -4 to -5 % at T = 8,192 and 16,384 (K step 647 -> 620), IQ2_XS / Q2_0
    /// -0.8 %; Q8_0's gate/up +0.3 % and down -0.2 % (left as it was).
    pub const fn uniform_live_tiles(w: WType) -> bool {
        matches!(
            w,
            WType::Iq2Xxs | WType::Iq2Xs | WType::Iq3Xxs | WType::Iq3S
        )
    }

    /// 128-value K steps per raw weight stage of type `w` (whole blocks): a stage's weight rows
    /// are copied once, when its first step is issued. The narrow shape takes 512 values of
    /// Q2_0 (the gate/up product at T = 512), so that its warps issue their weight copies every
    /// fourth K step, and each row's bytes of a stage (144) are a whole number of 16-byte
    /// pieces: a row's place in its 16-byte window is then the same in every stage, and no
    /// piece is copied for a neighbour's bytes. The other shapes and types take
    /// [`fused_sub_steps`] (256-value blocks: 2).
    pub const fn stage_steps(self, w: WType) -> usize {
        match (self, w) {
            (MmqPipeShape::Narrow, WType::Q2_0) => 4,
            _ => fused_sub_steps(w),
        }
    }

    /// Bytes of one weight row per 128-value K step (a whole number for every type: the
    /// 256-value blocks have an even number of bytes). A stage's last steps may lie past the
    /// row's end when `k` is not a whole number of stages.
    pub const fn step_row_bytes(w: WType) -> usize {
        MMQ_KSTEP * w.block_bytes() / w.block_values()
    }

    /// Bytes of one weight row's raw stage ([`MmqPipeShape::stage_steps`] K steps).
    pub const fn stage_row_bytes(self, w: WType) -> usize {
        self.stage_steps(w) * Self::step_row_bytes(w)
    }

    /// Shared-memory bytes for one weight row of a raw stage: the 16-byte aligned window around
    /// the row's bytes (they start anywhere 2-byte aligned), so the copies are 16-byte
    /// `cp.async`.
    pub const fn stage_window(self, w: WType) -> usize {
        (self.stage_row_bytes(w) + 15).div_ceil(16) * 16
    }

    /// Activation rows (columns) of a tile.
    pub const fn cols(self) -> usize {
        match self {
            MmqPipeShape::Wide | MmqPipeShape::Tall => MMQ_COLS,
            MmqPipeShape::Narrow => MMQ_NARROW_COLS,
            MmqPipeShape::Flat => MMQ_FLAT_COLS,
        }
    }

    /// Weight rows of a tile (a CTA's row tile).
    pub const fn rows(self) -> usize {
        match self {
            MmqPipeShape::Flat => MMQ_FLAT_ROWS,
            _ => MMQ_ROWS,
        }
    }

    /// Features of H a CTA of the gate/up kernel with the SwiGLU epilogue makes: its rows are
    /// gate and up rows of the same features, half each ([`MMQ_SWIGLU_FEATURES`] for 128 rows).
    pub const fn swiglu_features(self) -> usize {
        self.rows() / 2
    }

    /// Warps along the weight rows (the other warps of the 8 go along the columns).
    pub const fn warps_m(self) -> usize {
        match self {
            MmqPipeShape::Wide => 4,
            MmqPipeShape::Flat => 2,
            MmqPipeShape::Narrow | MmqPipeShape::Tall => 8,
        }
    }

    /// 16-row `mma` fragments of a warp.
    pub const fn mt(self) -> usize {
        self.rows() / self.warps_m() / 16
    }

    /// 8-column `mma` tiles of a warp.
    pub const fn nt(self) -> usize {
        self.cols() / (8 / self.warps_m()) / 8
    }

    /// Where a warp's fragment (16-row fragment `mt`, 8-column tile `nt`) sits in the kernels'
    /// accumulators `[[[f32; 4]; 4]; 2]`: eight fragments, the `f = mt * nt() + nt`-th at
    /// `[f / 4][f % 4]` (the wide shape's `[mt][nt]`).
    pub const fn acc_slot(self, mt: usize, nt: usize) -> (usize, usize) {
        let f = mt * self.nt() + nt;
        (f / 4, f % 4)
    }

    /// The fragment `(mt, nt)` whose accumulators are at `[a][b]`: [`MmqPipeShape::acc_slot`]'s
    /// inverse for the warp's fragments (`mt < mt()`, `nt < nt()`); a slot no fragment uses
    /// gives an `mt` or `nt` out of those bounds.
    pub const fn slot_frag(self, a: usize, b: usize) -> (usize, usize) {
        let f = 4 * a + b;
        (f / self.nt(), f % self.nt())
    }

    /// Whether this shape decodes its weights straight into each warp's `mma` A fragments
    /// (`WeightBlock::frag_q_in`, gpu/src/moe/mmq/pipe/regs.rs) instead of into a shared decoded
    /// tile: the narrow and tall ones, every type. A narrow warp owns its 16 weight rows, so each value is
    /// still decoded once per CTA; the decoded tiles, their stores and the A fragments'
    /// `ldmatrix` drop out. Measured on the H200 (gate/up at T = 512, BENCHMARKS.md), against
    /// the decoded tile: Q8_0 -36 %, Q2_0 -22 %, IQ4_NL and IQ3_S -10 %, IQ3_XXS -4 %; the IQ2
    /// types since their lanes each hold one grid entry (`WeightBlock::FRAG_PAIRS`), against
    /// the wide kernel, both with the tables in shared memory (`MmqPipeSmem::tables`): IQ2_XXS
    /// -9 %, IQ2_XS -14 %, IQ2_S -6 % (IQ3_S -25 %).
    pub const fn in_registers(self) -> bool {
        matches!(self, MmqPipeShape::Narrow | MmqPipeShape::Tall)
    }

    /// `mbarrier`s per activation buffer: its transaction barrier (the step's bulk copy on
    /// sm_90), and for a shape that decodes into registers also an empty barrier, on which
    /// every thread arrives once past the step's product (the narrow kernel's K loop on sm_90
    /// has no CTA barrier: gpu/src/moe/mmq/pipe/regs.rs).
    pub const fn bars_per_buffer(self) -> usize {
        if self.in_registers() { 2 } else { 1 }
    }

    /// Shared-memory budget of one CTA.
    pub const fn budget(self) -> usize {
        match self {
            MmqPipeShape::Wide | MmqPipeShape::Tall | MmqPipeShape::Flat => MMQ_PIPE_SMEM_BUDGET,
            MmqPipeShape::Narrow => MMQ_NARROW_SMEM_BUDGET,
        }
    }

    /// Bytes of one activation buffer (one K step's D4 blocks of the tile's columns).
    pub const fn acts_bytes(self) -> usize {
        self.cols() * Q8_1_MMQ_BYTES
    }

    /// Where tile row `r` keeps its scale: a lane of warp row `wm` needs rows
    /// `16 MT wm + 16 mt + 8 h + g` (mt < MT, h in 0..2), so they sit side by side at
    /// `16 MT wm + 2 MT g + 2 mt + h` (one 16-byte load when MT = 2, 8-byte when MT = 1).
    pub const fn row_slot(self, r: usize) -> usize {
        let mt = self.mt();
        let warp_rows = 16 * mt;
        let (wm, m, h, g) = (r / warp_rows, (r / 16) % mt, (r / 8) % 2, r % 8);
        warp_rows * wm + 2 * mt * g + 2 * m + h
    }

    /// Where tile column `c` keeps its activation scale: a lane of warp column `wn` needs
    /// columns `8 NT wn + 8 nt + 2 t + j` (nt < NT, j in 0..2), kept at
    /// `8 NT wn + 2 NT t + 2 nt + j` (16-byte loads).
    pub const fn col_slot(self, c: usize) -> usize {
        let nt = self.nt();
        let warp_cols = 8 * nt;
        let (wn, n, t, j) = (c / warp_cols, (c / 8) % nt, (c / 2) % 4, c % 2);
        warp_cols * wn + 2 * nt * t + 2 * n + j
    }
}
