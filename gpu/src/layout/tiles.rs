//! Every tile size, thread count and shared-memory layout the kernels and their launchers share:
//! quantization blocks, the MMQ products, scatter and combine, the fused expert path.

use super::{MMQ_BLOCK_VALUES, MMQ_WS_MAX_REGISTERS, Q8_1_MMQ_BYTES, WType};

/// Threads of one `scatter_quantize` CUDA block (and the most a `swiglu_f32` / `quantize`
/// block has, see [`quant_block_warps`]): one block per row, 8 warps; warp w handles the
/// 128-value chunks w, w + 8, ... of the padded row, lane l the 4 values `4 l ..` of a chunk (so
/// a row is read in one contiguous sweep).
pub const QUANT_BLOCK_THREADS: usize = 256;
/// Warps of such a block.
pub const QUANT_WARPS: usize = QUANT_BLOCK_THREADS / 32;
/// Warps of a `swiglu_f32` / `quantize` block (the two-kernel form of `swiglu_quant`) for rows
/// of `k` values: one per
/// 128-value data chunk, at most [`QUANT_WARPS`] (the kernels stride by the block's warp count,
/// so the padding chunks go to the first warps). With n_ff 640, 5 warps: no warp holds
/// registers only to write zeros, and more rows fit on an SM.
pub const fn quant_block_warps(k: usize) -> usize {
    let chunks = k.div_ceil(MMQ_BLOCK_VALUES);
    if chunks == 0 {
        1
    } else if chunks > QUANT_WARPS {
        QUANT_WARPS
    } else {
        chunks
    }
}
/// Values a `moe_swiglu_quant` lane covers: two 16-byte loads of gate and two of up, so that a
/// q8_1 group (32 values) is 4 lanes and a 128-value chunk a half warp.
pub const SWIGLU_QUANT_LANE_VALUES: usize = 8;
/// Threads of a `moe_swiglu_quant` CTA: one 128-value chunk of [`SWIGLU_QUANT_ROWS`]
/// consecutive rows, a half warp a row.
pub const SWIGLU_QUANT_THREADS: usize = 256;
/// Rows of a `moe_swiglu_quant` CTA.
pub const SWIGLU_QUANT_ROWS: usize =
    SWIGLU_QUANT_THREADS * SWIGLU_QUANT_LANE_VALUES / MMQ_BLOCK_VALUES;
const _: () = assert!(MMQ_BLOCK_VALUES == 16 * SWIGLU_QUANT_LANE_VALUES);

/// Register caps the builder writes into the PTX (`.maxnreg`), as rustc has no launch bounds.
/// `moe_swiglu_quant`: at 40 registers (no spill in ptxas, sm_75 to sm_90) 6 CTAs of 256 threads
/// fit on an SM. (Its earlier form of 160-thread CTAs, a row each, took 42 without the cap; at
/// 40 it ran 4 % faster on the H200, at 32 it spilled and ran 40 % slower: BENCHMARKS.md.)
pub const MAX_REGISTERS: &[(&str, u32)] = &[SWIGLU_QUANT_CAP];
const SWIGLU_QUANT_CAP: (&str, u32) = ("moe_swiglu_quant", 40);

/// The register cap of the pipelined MMQ kernels: two CTAs of [`MMQ_THREADS`] per SM (their
/// 110-113 KB of shared memory allow two) need at most 128. ptxas takes 139 for the IQ2_XS and
/// IQ2_S kernels without it (and moves by 10 or more with small source changes); at 128 none
/// spills (ptxas -v, sm_75 to sm_90).
pub const MMQ_PIPE_MAX_REGISTERS: u32 = 128;
/// The register cap of the narrow pipelined MMQ kernels: three CTAs of [`MMQ_THREADS`] per SM
/// (where their shared memory, `MMQ_NARROW_SMEM_BUDGET`, allows three) need at most 85, and
/// registers are allocated 8 at a time per thread. At 80 none spills (ptxas -v, sm_90).
pub const MMQ_NARROW_MAX_REGISTERS: u32 = 80;

macro_rules! mma_register_caps {
    ($(($w:ident, $b:ident, $gu:ident, $dn:ident, $f:ident, $fw:ident, $pipe:ident,
        $narrow:ident, $pipe_sw:ident, $narrow_sw:ident, $flat:ident, $flat_sw:ident,
        $c16:ident, $c32:ident, $c64:ident,
        $fast16:ident, $fast32:ident, $resident:ident,
        $narrow_tma:ident, $fused_sd:ident, $wide_sd:ident, $flat_ws:ident)),* $(,)?) => {
        (
            &[
                SWIGLU_QUANT_CAP,
                $((stringify!($pipe), MMQ_PIPE_MAX_REGISTERS),
                (stringify!($narrow), MMQ_NARROW_MAX_REGISTERS),
                (stringify!($pipe_sw), MMQ_PIPE_MAX_REGISTERS),
                (stringify!($flat), MMQ_PIPE_MAX_REGISTERS),
                (stringify!($flat_sw), MMQ_PIPE_MAX_REGISTERS),
                (stringify!($narrow_sw), MMQ_NARROW_MAX_REGISTERS)),*
            ],
            &[$((stringify!($resident), MMQ_NARROW_MAX_REGISTERS),
                (stringify!($flat_ws), MMQ_WS_MAX_REGISTERS)),*],
        )
    };
}

type Caps = &'static [(&'static str, u32)];
const MMA_CAPS: (Caps, Caps) = crate::for_each_format!(mma_register_caps);

/// [`MAX_REGISTERS`] and the caps of kernels that only the tensor-core modules hold (every
/// module but sm_60's): the builder's caps for those modules.
pub const MAX_REGISTERS_MMA: &[(&str, u32)] = MMA_CAPS.0;
/// The caps of the kernels that only the modules with bulk copies hold (sm_90: the narrow MMQ
/// kernel's resident form, three CTAs per SM as the narrow one; the warp-specialized flat
/// kernel, two CTAs of `MMQ_WS_THREADS` per SM), besides
/// [`MAX_REGISTERS_MMA`].
pub const MAX_REGISTERS_RESIDENT: &[(&str, u32)] = MMA_CAPS.1;
/// Values one thread loads and quantizes per chunk.
pub const QUANT_VALUES_PER_THREAD: usize = 4;

/// Weight rows (output features) per CTA of the MMQ products.
pub const MMQ_ROWS: usize = 128;
/// Activation rows (columns in MMQ terms) per CTA of the MMQ products.
pub const MMQ_COLS: usize = 64;
/// K values per step of the MMQ K loop: one D4 block, four 32-value groups.
pub const MMQ_KSTEP: usize = 128;
/// Threads of an MMQ CTA: 8 warps, 4 along the rows x 2 along the columns, 32 x 32 each.
pub const MMQ_THREADS: usize = 256;
/// Bytes from one row of an int8 tile in shared memory to the next: 128 values + 16 bytes,
/// which staggers the rows over the banks (conflict-free `ldmatrix`) and, for the activation
/// tile, is exactly one `block_q8_1_mmq` (scales, then values).
pub const MMQ_SMEM_ROW: usize = 144;
/// Shared memory of an MMQ CTA: weight tile (int8), weight scales (8 f32 per row: one per 16
/// values), activation tile (D4 blocks).
pub const MMQ_SMEM_A: usize = MMQ_ROWS * MMQ_SMEM_ROW;
pub const MMQ_SMEM_SCALES: usize = MMQ_ROWS * 8 * 4;
pub const MMQ_SMEM_B: usize = MMQ_COLS * MMQ_SMEM_ROW;
pub const MMQ_SMEM_BYTES: usize = MMQ_SMEM_A + MMQ_SMEM_SCALES + MMQ_SMEM_B;
const _: () = assert!(MMQ_SMEM_BYTES <= 48 * 1024);

/// `bytes` (a multiple of 16) rounded up to an odd number of 16-byte pieces: rows that far
/// apart fall on 8 different bank offsets, so a decoder reading 16 rows per warp conflicts at
/// most 2-way instead of up to 8-way (a 64-byte stride maps every other row onto the same
/// banks).
pub const fn odd_slot_bytes(bytes: usize) -> usize {
    if (bytes / 16).is_multiple_of(2) {
        bytes + 16
    } else {
        bytes
    }
}

/// Tokens per chunk of the scatter kernels (one CTA of `moe_scatter_count` each).
pub const SCATTER_CHUNK: usize = 256;
/// Threads of a `moe_scatter_count` CTA: one per token of its chunk.
pub const SCATTER_COUNT_THREADS: usize = SCATTER_CHUNK;
/// Threads of the single `moe_scatter_offsets` CTA (prefix sums over experts x chunks).
pub const SCATTER_OFFSETS_THREADS: usize = 1024;
/// Tokens of one `moe_scatter_place` CTA: one warp's group, a lane per token.
pub const SCATTER_PLACE_TOKENS: usize = 32;
/// Threads of a `moe_scatter_place` CTA: all stage its counters (its chunk's, advanced past the
/// chunk's earlier tokens) and ids, then one warp places its group's rows.
pub const SCATTER_PLACE_THREADS: usize = 256;
/// Threads of a `moe_scatter_gather` CTA, and the 16-byte pieces each copies (loads first):
/// a CTA copies `SCATTER_GATHER_THREADS * SCATTER_GATHER_PIECES` consecutive pieces of one
/// K chunk's blocks.
pub const SCATTER_GATHER_THREADS: usize = 256;
pub const SCATTER_GATHER_PIECES: usize = 4;
/// Rows (tokens x top-k) from which the scatter quantizes each token into a token buffer and
/// gathers the rows from it (`moe_scatter_gather`) instead of writing every row from the
/// quantizer. Measured on the H200 (BENCHMARKS.md, reference shape): scatter 0.336 -> 0.238
/// ms at 163,840 rows, 0.0565 -> 0.055 at 20,480, 0.033 -> 0.037 at 5,120 with the five kernels
/// in one stream; with the quantizer and the gather on a stream of their own beside the row
/// order (host/src/moe/scatter.rs) the bare layer -0.003 ms at 5,120 rows and -0.009 at 10,240.
/// (The small-layer tests, top-4, keep the direct writes up to T = 512.)
pub const SCATTER_GATHER_MIN_ROWS: usize = 4_096;
/// Rows (tokens x top-k) up to which the scatter runs as one kernel (`moe_scatter_one`: a CTA per
/// token counts every row itself, so its work grows with the square of the rows) instead of the
/// chain of count, offsets, place and quantize (and gather). Measured on the H200 (BENCHMARKS.md,
/// reference shape): the bare layer -0.007 ms at 5,120 rows, -0.004 at 6,400, -0.002 at 7,680,
/// alike at 8,960 and 10,240, +0.02 at 15,360 and 20,480.
pub const SCATTER_ONE_MAX_ROWS: usize = 8_192;
/// Ids a `moe_scatter_one` thread loads before it counts them.
pub const SCATTER_ONE_IDS_AHEAD: usize = 8;
/// Dynamic shared memory of a `moe_scatter_one` CTA: two row counters per expert (the rows of
/// the tokens before the CTA's, the others; then the bounds), the prefix sum's scratch, the
/// token's rows (at most 16.6 KB: 2,048 experts, top-32).
pub const fn scatter_one_smem(n_experts: usize, top_k: usize) -> usize {
    8 * n_experts + CTA_SCAN_SMEM + 4 * top_k
}
const _: () = assert!(scatter_one_smem(MAX_EXPERTS, 32) <= 48 * 1024);
/// Shared memory of a CTA prefix sum (`moe_scatter_offsets`, `moe_expert_tiles`): one u32 per
/// warp of up to 1,024 threads.
pub const CTA_SCAN_SMEM: usize = 4 * 32;
/// Threads of the single `moe_expert_tiles` CTA (the device-built tile list).
pub const EXPERT_TILES_THREADS: usize = 1024;

/// `ExpertTilesParams::part`: the list without its tails (with `tail > 0`).
pub const TILES_BODY: u32 = 0;
/// `ExpertTilesParams::part`: the tails alone (with `tail > 0`).
pub const TILES_TAILS: u32 = 1;

/// The tiles of one expert's `rows` rows, `width` at most each, that a work list holds: the
/// first one's index among the expert's tiles and how many follow it (the tile `i` starts at the
/// expert's row `i * width`). With `tail == 0`, every tile. Else the expert's last tile is a
/// *tail* where it has at most `tail` rows (an expert of at most `tail` rows is one), and `part`
/// picks the list: [`TILES_BODY`] every tile but the tail, [`TILES_TAILS`] the tail alone. The
/// one rule of the host's lists and `moe_expert_tiles`.
pub const fn expert_tile_range(rows: u32, width: u32, tail: u32, part: u32) -> (u32, u32) {
    let n = rows.div_ceil(width);
    if tail == 0 || n == 0 {
        return (0, n);
    }
    let is_tail = (rows - (n - 1) * width <= tail) as u32;
    if part == TILES_TAILS {
        (n - is_tail, is_tail)
    } else {
        (0, n - is_tail)
    }
}

/// Dynamic shared memory of a `moe_scatter_place` CTA: its per-expert row counters, the
/// per-expert masks of its group, then the expert ids of its `SCATTER_PLACE_TOKENS x top_k`
/// slots (at most 20 KB: 2,048 experts, top-32).
pub const fn scatter_place_smem(n_experts: usize, top_k: usize) -> usize {
    8 * n_experts + 4 * SCATTER_PLACE_TOKENS * top_k
}
// Within the 48 KB a kernel gets without opting in, for every shape the scatter accepts; a
// chunk is a whole number of groups.
const _: () = assert!(scatter_place_smem(MAX_EXPERTS, 32) <= 48 * 1024);
const _: () = assert!(SCATTER_CHUNK.is_multiple_of(SCATTER_PLACE_TOKENS));
// A group's tokens are one warp's lanes (a bit each in a u32 mask).
const _: () = assert!(SCATTER_PLACE_TOKENS <= 32);
/// Threads of one `moe_combine` CTA along the hidden size, each over [`COMBINE_VALUES`]
/// consecutive output values.
pub const COMBINE_THREADS: usize = 128;
/// Consecutive output values a `moe_combine` thread sums: one 16-byte load per slot (the
/// hidden size is a multiple of 128, so of this).
pub const COMBINE_VALUES: usize = 4;
/// Slots whose loads a `moe_combine` thread issues before it sums them: their rows' loads are in
/// flight together, where one slot at a time waited a memory latency per slot. 10: a top-8 or
/// top-10 token's rows in one round (8 took two rounds at top-10).
pub const COMBINE_SLOTS_AHEAD: usize = 10;
/// Largest expert count the scatter and route kernels support.
pub const MAX_EXPERTS: usize = 2048;
/// Weight rows of a fused-path pass (one `mma` tile of the CTA): 128, the warps 2 along the
/// rows (64 each) x 4 along the columns.
pub const FUSED_ROWS: usize = 128;
/// Activation rows (columns) of one fused-path CTA per 8-column `mma` tile of a warp: the CTA
/// has 4 warp columns, each of `nt` tiles, so `FUSED_COL_UNIT * nt` columns.
pub const FUSED_COL_UNIT: usize = 32;
/// The tile widths the fused kernels are built for, in n-tiles per warp (`FusedParams::nt`).
pub const FUSED_NT: [usize; 2] = [1, 2];
/// Threads of a fused-path CTA: 8 warps.
pub const FUSED_THREADS: usize = 256;
/// Gate (and up) features of one gate/up pass: the pass's 128 tile rows hold 64 gate rows and
/// the 64 up rows of the same features, interleaved by 8 (see gpu/src/moe/fused/mod.rs).
pub const FUSED_FFN_PASS: usize = FUSED_ROWS / 2;
/// The fewest and most raw-weight stages of the fused path's copy pipeline (one stage: each
/// stage is copied, waited for and used in turn - the form for GPUs without `cp.async`).
pub const FUSED_MIN_STAGES: usize = 1;
pub const FUSED_MAX_STAGES: usize = 8;

/// 128-value K steps per raw stage of weight type `w`: 2 for 256-value blocks (a stage holds
/// whole blocks), else 1.
pub const fn fused_sub_steps(w: WType) -> usize {
    if w.block_values() > MMQ_KSTEP {
        w.block_values() / MMQ_KSTEP
    } else {
        1
    }
}

/// Bytes of one weight row's raw stage (whole blocks of `fused_sub_steps(w) * 128` values).
pub const fn fused_stage_row_bytes(w: WType) -> usize {
    fused_sub_steps(w) * MMQ_KSTEP / w.block_values() * w.block_bytes()
}

/// Shared-memory bytes for one weight row of a raw stage: the 16-byte aligned window around the
/// row's bytes (they start anywhere 2-byte aligned), so the copies are 16-byte `cp.async`.
pub const fn fused_slot_bytes(w: WType) -> usize {
    (fused_stage_row_bytes(w) + 15).div_ceil(16) * 16
}

/// The shared-memory layout of a fused-path CTA for gate/up type `g`, down type `d`, FFN width
/// `ffn` and `stages` raw stages (byte offsets from the dynamic shared memory's start):
/// `stages` x [weights `FUSED_ROWS` x slot][activations `sub(g)` x `cols` x 144], the decoded
/// int8 weight tile `[FUSED_ROWS][144]`, its scales `[FUSED_ROWS][8] f32`, and H, the q8_1
/// SwiGLU output `[ffn / 128][cols]` D4 blocks (`cols = FUSED_COL_UNIT * nt`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FusedSmem {
    pub slot: usize,
    pub stage_bytes: usize,
    /// Offset of a stage's activation part.
    pub stage_acts: usize,
    pub tile: usize,
    pub scales: usize,
    pub h: usize,
    pub total: usize,
}

impl FusedSmem {
    pub const fn new(g: WType, d: WType, ffn: usize, stages: usize, nt: usize) -> FusedSmem {
        let cols = FUSED_COL_UNIT * nt;
        let sg = fused_slot_bytes(g);
        let sd = fused_slot_bytes(d);
        let widest = if sg > sd { sg } else { sd };
        let slot = odd_slot_bytes(widest);
        let stage_acts = FUSED_ROWS * slot;
        let stage_bytes = stage_acts + fused_sub_steps(g) * cols * Q8_1_MMQ_BYTES;
        let tile = stages * stage_bytes;
        let scales = tile + FUSED_ROWS * MMQ_SMEM_ROW;
        let h = scales + FUSED_ROWS * 8 * 4;
        let total = h + ffn / MMQ_BLOCK_VALUES * cols * Q8_1_MMQ_BYTES;
        FusedSmem {
            slot,
            stage_bytes,
            stage_acts,
            tile,
            scales,
            h,
            total,
        }
    }
}

/// Weight rows of a weight-stationary CTA, one per thread: each thread decodes its row's
/// weight blocks once per pass over K and keeps them in registers (gpu/src/moe/ws/).
pub const WS_ROWS: usize = 128;
/// Threads of a weight-stationary CTA (one per weight row).
pub const WS_THREADS: usize = WS_ROWS;
/// The activation-row tiers of the weight-stationary kernels (`moe_ws_<type>_c<cols>`): the most
/// rows of one expert a CTA runs against its weight rows in one pass. The path picks the tier
/// from the run's rows per routed expert (host/src/moe/expert/ws.rs).
pub const WS_COLS: [usize; 3] = [16, 32, 64];
/// The tiers with a `_fast` variant (WS_FAST: unrolled row pairs entered by a jump table),
/// `moe_ws_<type>_c<cols>_fast`.
pub const WS_FAST_COLS: [usize; 2] = [16, 32];
/// Bit position of a pair's second activation in a packed word: `x0 + x1 * 2^20`. One
/// `mad.wide.s32` of a weight with it adds `w x0 + 2^20 w x1` to a 64-bit sum; over at most 32
/// values `|sum of w x0| <= 32 * 128 * 127 < 2^19`, so the low 20 bits, sign-extended, are that
/// sum exactly and the rest, shifted down, is the other token's.
pub const WS_PAIR_SHIFT: u32 = 20;

/// Dynamic shared memory of a weight-stationary CTA with `cols` activation rows: one K step's
/// packed activation pairs `[cols / 2][128]` u32, then the activation scales `[cols][4]` f32
/// (`[4][cols]` in the `_fast` variants).
pub const fn ws_smem_bytes(cols: usize) -> usize {
    ws_scales_offset(cols) + cols * 4 * 4
}

/// Offset of the activation scales in a weight-stationary CTA's shared memory.
pub const fn ws_scales_offset(cols: usize) -> usize {
    cols / 2 * MMQ_KSTEP * 4
}
