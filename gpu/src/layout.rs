//! Memory layouts both sides share: ggml block formats, the q8_1 "D4" activation block of MMQ,
//! tile constants, and one `#[repr(C)]` parameter struct per kernel (the host passes it by value;
//! field order lives here only).
//!
//! Block formats: ggml's `ggml-common.h` (docs/ggml-reference.md §2, §3). Sizes are checked at compile
//! time below.

use core::mem::size_of;

#[cfg(not(target_arch = "nvptx64"))]
use bytemuck::{Pod, Zeroable};

/// Values per q8_1 group: one f32 scale per 32 activation values.
pub const QK8_1: usize = 32;
/// Values per `block_q8_1_mmq` (four q8_1 groups).
pub const MMQ_BLOCK_VALUES: usize = 128;
/// ggml's `MATRIX_ROW_PADDING`: activation rows are quantized to a multiple of this many values,
/// the tail being zeros (q = 0, d = 0).
pub const ROW_PADDING: usize = 512;
/// Threads of one `scatter_quantize` CUDA block (and the most a `swiglu_quant` / `quantize`
/// block has, see [`quant_block_warps`]): one block per row, 8 warps; warp w handles the
/// 128-value chunks w, w + 8, ... of the padded row, lane l the 4 values `4 l ..` of a chunk (so
/// a row is read in one contiguous sweep).
pub const QUANT_BLOCK_THREADS: usize = 256;
/// Warps of such a block.
pub const QUANT_WARPS: usize = QUANT_BLOCK_THREADS / 32;
/// Warps of a `swiglu_quant` / `swiglu_f32` / `quantize` block for rows of `k` values: one per
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
/// Register caps the builder writes into the PTX (`.maxnreg`), as rustc has no launch bounds.
/// `moe_swiglu_quant`: ptxas takes 42 registers, so 8 blocks of 160 threads fit on an SM; at 40
/// (no spill) 10 fit, and the kernel ran 4 % faster on the H200 (BENCHMARKS.md). At 32 it
/// spills and runs 40 % slower.
pub const MAX_REGISTERS: &[(&str, u32)] = &[("moe_swiglu_quant", 40)];
/// Values one thread loads and quantizes per chunk.
pub const QUANT_VALUES_PER_THREAD: usize = 4;

/// `K` rounded up to [`ROW_PADDING`]: the number of values a quantized activation row holds.
pub const fn padded_k(k: usize) -> usize {
    k.div_ceil(ROW_PADDING) * ROW_PADDING
}

macro_rules! host_pod {
    ($($t:ty),*) => {$(
        // SAFETY: every type listed is #[repr(C)], made only of integer/float arrays, and has no
        // padding (its size equals the sum of its fields, checked below).
        #[cfg(not(target_arch = "nvptx64"))]
        unsafe impl Zeroable for $t {}
        #[cfg(not(target_arch = "nvptx64"))]
        unsafe impl Pod for $t {}
    )*};
}

/// `block_q8_1_mmq` in the D4 layout (`cuda/mmq.cuh`): 128 consecutive values of one activation
/// row; `d[g]` is the f32 scale of values `32g .. 32g+31`. In a buffer, block `(kc, col)` sits at
/// index `kc * n_cols + col` (K-chunk major, row minor), as `quantize_mmq_q8_1` writes it.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ8_1Mmq {
    pub d: [f32; 4],
    pub qs: [i8; 128],
}

/// Q8_0: 32 values, `qs[j] * d`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ8_0 {
    pub d: u16,
    pub qs: [i8; 32],
}

/// Q2_0: 64 values, 2-bit codes c (element j in bits 2(j%4).. of byte j/4), value `(c - 1) * d`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ2_0 {
    pub d: u16,
    pub qs: [u8; 16],
}

/// IQ4_NL: 32 values; byte j: low nibble -> element j, high nibble -> element j + 16; value
/// `d * KVALUES_IQ4NL[nibble]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIq4Nl {
    pub d: u16,
    pub qs: [u8; 16],
}

/// IQ2_XXS: 256 values in 8 sub-blocks of 32; per sub-block 4 grid-index bytes, then a u32 of
/// four 7-bit sign indices and a 4-bit scale (bits 28..31).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIq2Xxs {
    pub d: u16,
    pub qs: [u8; 64],
}

/// IQ2_XS: 256 values; u16 `qs[4 ib + l]` = 9-bit grid index | 7-bit sign index << 9; one scale
/// byte per sub-block (low nibble: first 16 values, high nibble: last 16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIq2Xs {
    pub d: u16,
    pub qs: [u16; 32],
    pub scales: [u8; 8],
}

/// IQ2_S: 256 values; low 8 index bits (`qs[0..32]`), explicit sign bytes (`qs[32..64]`),
/// 2 high index bits per group (`qh`), scale nibbles per 16 values as IQ2_XS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIq2S {
    pub d: u16,
    pub qs: [u8; 64],
    pub qh: [u8; 8],
    pub scales: [u8; 8],
}

/// IQ3_XXS: 256 values; 64 grid-index bytes (one per 4 values), then 8 u32 of four 7-bit sign
/// indices and a 4-bit scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIq3Xxs {
    pub d: u16,
    pub qs: [u8; 96],
}

/// IQ3_S: 256 values; low 8 index bits, 9th bits (`qh`), explicit sign bytes, 4-bit scales.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIq3S {
    pub d: u16,
    pub qs: [u8; 64],
    pub qh: [u8; 8],
    pub signs: [u8; 32],
    pub scales: [u8; 4],
}

host_pod!(
    BlockQ8_1Mmq,
    BlockQ8_0,
    BlockQ2_0,
    BlockIq4Nl,
    BlockIq2Xxs,
    BlockIq2Xs,
    BlockIq2S,
    BlockIq3Xxs,
    BlockIq3S
);

const _: () = assert!(size_of::<BlockQ8_1Mmq>() == 144);
/// Bytes of one [`BlockQ8_1Mmq`] (128 values): the unit of every q8_1 activation buffer.
pub const Q8_1_MMQ_BYTES: usize = size_of::<BlockQ8_1Mmq>();
const _: () = assert!(size_of::<BlockQ8_0>() == 34);
const _: () = assert!(size_of::<BlockQ2_0>() == 18);
const _: () = assert!(size_of::<BlockIq4Nl>() == 18);
const _: () = assert!(size_of::<BlockIq2Xxs>() == 66);
const _: () = assert!(size_of::<BlockIq2Xs>() == 74);
const _: () = assert!(size_of::<BlockIq2S>() == 82);
const _: () = assert!(size_of::<BlockIq3Xxs>() == 98);
const _: () = assert!(size_of::<BlockIq3S>() == 110);

/// The eight weight formats this project runs, with their ggml/GGUF type ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum WType {
    Q8_0 = 8,
    Iq2Xxs = 16,
    Iq2Xs = 17,
    Iq3Xxs = 18,
    Iq4Nl = 20,
    Iq3S = 21,
    Iq2S = 22,
    Q2_0 = 42,
}

impl WType {
    /// All eight, in ggml id order.
    pub const ALL: [WType; 8] = [
        WType::Q8_0,
        WType::Iq2Xxs,
        WType::Iq2Xs,
        WType::Iq3Xxs,
        WType::Iq4Nl,
        WType::Iq3S,
        WType::Iq2S,
        WType::Q2_0,
    ];

    /// The ggml / GGUF type id.
    pub const fn id(self) -> u32 {
        self as u32
    }

    /// From a ggml / GGUF type id.
    pub const fn from_id(id: u32) -> Option<WType> {
        Some(match id {
            8 => WType::Q8_0,
            16 => WType::Iq2Xxs,
            17 => WType::Iq2Xs,
            18 => WType::Iq3Xxs,
            20 => WType::Iq4Nl,
            21 => WType::Iq3S,
            22 => WType::Iq2S,
            42 => WType::Q2_0,
            _ => return None,
        })
    }

    /// Values per block.
    pub const fn block_values(self) -> usize {
        match self {
            WType::Q8_0 | WType::Iq4Nl => 32,
            WType::Q2_0 => 64,
            _ => 256,
        }
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        match self {
            WType::Q8_0 => size_of::<BlockQ8_0>(),
            WType::Q2_0 => size_of::<BlockQ2_0>(),
            WType::Iq4Nl => size_of::<BlockIq4Nl>(),
            WType::Iq2Xxs => size_of::<BlockIq2Xxs>(),
            WType::Iq2Xs => size_of::<BlockIq2Xs>(),
            WType::Iq2S => size_of::<BlockIq2S>(),
            WType::Iq3Xxs => size_of::<BlockIq3Xxs>(),
            WType::Iq3S => size_of::<BlockIq3S>(),
        }
    }

    /// Values per weight scale inside MMQ's integer sums: 16 for IQ2_XS and IQ2_S (their "Q8_0_16"
    /// epilogue, docs/ggml-reference.md §5.1), 32 for the others.
    pub const fn scale_values(self) -> usize {
        match self {
            WType::Iq2Xs | WType::Iq2S => 16,
            _ => 32,
        }
    }

    /// The name as ggml spells it.
    pub const fn name(self) -> &'static str {
        match self {
            WType::Q8_0 => "q8_0",
            WType::Q2_0 => "q2_0",
            WType::Iq4Nl => "iq4_nl",
            WType::Iq2Xxs => "iq2_xxs",
            WType::Iq2Xs => "iq2_xs",
            WType::Iq2S => "iq2_s",
            WType::Iq3Xxs => "iq3_xxs",
            WType::Iq3S => "iq3_s",
        }
    }

    /// Bytes of one row of `k` values (`k` must be a multiple of [`Self::block_values`]).
    pub const fn row_bytes(self, k: usize) -> usize {
        k / self.block_values() * self.block_bytes()
    }
}

/// How MMQ lays out the q8_1 activations a weight type reads (`mmq_get_q8_1_ds_layout`,
/// docs/ggml-reference.md §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActLayout {
    /// Four f32 scales per 128 values, no sums. Every [`WType`] reads this.
    D4,
    /// Four (f16 scale, f16 sum) pairs: Q4_0, Q4_1, Q5_1, Q4_K, Q5_K, IQ1_S.
    Ds4,
    /// Two f16 scales and six f16 sums: Q2_K.
    D2s6,
}

/// The activation layout MMQ uses for ggml type `id`, for the types MMQ runs; `None` for types
/// MMQ does not run (f32, f16, bf16, ...) or ids ggml does not define.
pub const fn act_layout_of_ggml_type(id: u32) -> Option<ActLayout> {
    match id {
        // Q4_0, Q4_1, Q5_1, Q4_K, Q5_K, IQ1_S
        2 | 3 | 7 | 12 | 13 | 19 => Some(ActLayout::Ds4),
        // Q2_K
        10 => Some(ActLayout::D2s6),
        // Q5_0, Q8_0, Q3_K, Q6_K, IQ2_XXS, IQ2_XS, IQ3_XXS, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS, MXFP4,
        // Q1_0 (41), Q2_0 (42), NVFP4 (40)
        6 | 8 | 11 | 14 | 16 | 17 | 18 | 20 | 21 | 22 | 23 | 39 | 40 | 41 | 42 => {
            Some(ActLayout::D4)
        }
        _ => None,
    }
}

/// Parameters of `moe_swiglu_quant` (fused SwiGLU + q8_1 D4 quantization).
///
/// Input `gu`: f32 `[n_rows, gu_stride]`; row r holds gate and up of length `ffn` each, either
/// as two halves (`gate = row[0..ffn]`, `up = row[ffn..2 ffn]`) or interleaved
/// (`gate_j = row[2j]`, `up_j = row[2j + 1]`). Output `out`: `padded_k(ffn) / 128` chunks of
/// `n_cols` [`BlockQ8_1Mmq`], row r's chunk kc at `kc * n_cols + r`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct SwigluQuantParams {
    /// `*const f32`
    pub gu: u64,
    /// `*mut BlockQ8_1Mmq`
    pub out: u64,
    pub n_rows: u32,
    /// Multiple of 128.
    pub ffn: u32,
    /// Elements from one row of `gu` to the next; a multiple of 4, at least `2 * ffn`.
    pub gu_stride: u32,
    /// Rows of the output buffer (its column count in MMQ terms), at least `n_rows`.
    pub n_cols: u32,
    /// 0: halves, 1: interleaved.
    pub interleaved: u32,
    pub _pad: u32,
}

/// Parameters of `moe_swiglu_f32`, the first kernel of the two-kernel form: writes
/// `h = swiglu(gate, up)` as f32 `[n_rows, ffn]`. `gu` as in [`SwigluQuantParams`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct SwigluParams {
    /// `*const f32`
    pub gu: u64,
    /// `*mut f32`
    pub h: u64,
    pub n_rows: u32,
    pub ffn: u32,
    pub gu_stride: u32,
    pub interleaved: u32,
}

/// Parameters of `moe_quantize_q8_1`: quantizes f32 rows `x[n_rows, x_stride]` (first `k`
/// values of each) into D4 blocks laid out as in [`SwigluQuantParams`] (the second kernel of the
/// two-kernel form).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct QuantizeParams {
    /// `*const f32`
    pub x: u64,
    /// `*mut BlockQ8_1Mmq`
    pub out: u64,
    pub n_rows: u32,
    /// Values per row; a multiple of 4.
    pub k: u32,
    /// Elements from one row of `x` to the next; a multiple of 4, at least `k`.
    pub x_stride: u32,
    pub n_cols: u32,
}

host_pod!(SwigluQuantParams, SwigluParams, QuantizeParams);

const _: () = assert!(size_of::<SwigluQuantParams>() == 40);
const _: () = assert!(size_of::<SwigluParams>() == 32);
const _: () = assert!(size_of::<QuantizeParams>() == 32);

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

/// One CTA's column tile of an MMQ product: expert `expert`'s activation rows
/// `col_start .. col_start + n_cols` (compact order, `n_cols <= MMQ_COLS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct MmqTile {
    pub expert: u32,
    pub col_start: u32,
    pub n_cols: u32,
    pub _pad: u32,
}

/// Parameters of the MMQ products `moe_gate_up_<wtype>_mmq` / `moe_down_<wtype>_mmq`.
///
/// Output row `n` (0..`n`) of expert e uses weight row `n` of tensor `w0` when `n < n_split`,
/// else row `n - n_split` of `w1` (separate gate and up tensors); each tensor holds
/// `w_expert_bytes` per expert, `row_bytes` per row. Activations `x`: D4 blocks
/// `[k / 128][n_cols_x]`. The result of compact row c goes to
/// `out[out_row(c) * out_stride + n]`, `out_row(c) = out_rows[c]` or c when `out_rows` is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct MmqParams {
    pub w0: u64,
    pub w1: u64,
    pub w_expert_bytes: u64,
    /// `*const BlockQ8_1Mmq`
    pub x: u64,
    /// `*const MmqTile`, one per CTA along grid.x
    pub tiles: u64,
    /// `*mut f32`
    pub out: u64,
    /// `*const u32` or 0
    pub out_rows: u64,
    pub row_bytes: u32,
    pub n_split: u32,
    /// Output features; a multiple of MMQ_ROWS.
    pub n: u32,
    /// Values per row; a multiple of MMQ_KSTEP.
    pub k: u32,
    pub n_cols_x: u32,
    pub out_stride: u32,
}

/// Parameters of `moe_route`: softmax + top-k of router logits `[n_tokens][n_experts]` into
/// `ids` / `weights` `[n_tokens][top_k]` (rules: host/src/reference/route.rs).
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct RouteParams {
    /// `*const f32`
    pub logits: u64,
    /// `*mut u32`
    pub ids: u64,
    /// `*mut f32`
    pub weights: u64,
    pub n_tokens: u32,
    pub n_experts: u32,
    pub top_k: u32,
    /// 1: divide the weights by their sum.
    pub norm: u32,
    /// Multiplier of the weights (not applied when 0 or 1).
    pub scale: f32,
    pub _pad: u32,
}

/// Tokens per chunk of the scatter kernels (one CTA of `moe_scatter_count` each).
pub const SCATTER_CHUNK: usize = 256;
/// Threads of a `moe_scatter_count` CTA: one per token of its chunk.
pub const SCATTER_COUNT_THREADS: usize = SCATTER_CHUNK;
/// Threads of the single `moe_scatter_offsets` CTA (prefix sums over experts x chunks).
pub const SCATTER_OFFSETS_THREADS: usize = 1024;
/// Threads of a `moe_scatter_place` CTA: one warp walks its chunk's tokens in order.
pub const SCATTER_PLACE_THREADS: usize = 32;
/// Output values (threads) of one `moe_combine` CTA along the hidden size.
pub const COMBINE_THREADS: usize = 256;
/// Largest expert count the scatter and route kernels support.
pub const MAX_EXPERTS: usize = 2048;

/// Parameters of the scatter kernels (`moe_scatter_count`, `_offsets`, `_place`,
/// `_quantize`): expert-sorted row order of a routing and the q8_1 activations placed in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct ScatterParams {
    /// `*const u32` `[n_tokens][top_k]`
    pub ids: u64,
    /// `*mut u32` `[n_chunks][n_experts]`: per-chunk counts, then per-chunk offsets
    pub chunk_counts: u64,
    /// `*mut u32` `[n_experts + 1]`
    pub expert_bounds: u64,
    /// `*mut u32` `[n_rows]`: compact row -> token
    pub row_token: u64,
    /// `*mut u32` `[n_rows]`: compact row -> token * top_k + slot
    pub row_dst: u64,
    /// `*mut u32` `[n_tokens * top_k]`: token * top_k + slot -> compact row
    pub row_of: u64,
    /// `*const f32` `[n_tokens][hidden]`
    pub x: u64,
    /// `*mut BlockQ8_1Mmq` `[padded_k(hidden) / 128][n_tokens * top_k]`
    pub xq: u64,
    pub n_tokens: u32,
    pub top_k: u32,
    pub n_experts: u32,
    pub hidden: u32,
}

/// Parameters of `moe_combine`: `out[t][h]` = weighted sum over slots of `dm[t * top_k + s][h]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct CombineParams {
    /// `*const f32` `[n_tokens * top_k][hidden]`
    pub dm: u64,
    /// `*const f32` `[n_tokens][top_k]`
    pub weights: u64,
    /// `*mut f32` `[n_tokens][hidden]`
    pub out: u64,
    pub n_tokens: u32,
    pub top_k: u32,
    pub hidden: u32,
    pub _pad: u32,
}

host_pod!(
    MmqTile,
    MmqParams,
    RouteParams,
    ScatterParams,
    CombineParams
);

const _: () = assert!(size_of::<MmqTile>() == 16);
const _: () = assert!(size_of::<MmqParams>() == 80);
const _: () = assert!(size_of::<RouteParams>() == 48);
const _: () = assert!(size_of::<ScatterParams>() == 80);
const _: () = assert!(size_of::<CombineParams>() == 40);
const _: () = assert!(MMQ_SMEM_BYTES <= 48 * 1024);

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
        // An odd number of 16-byte pieces per row: the rows' words then fall on 8 different
        // bank offsets, so the decoder's reads (16 rows per warp) conflict at most 2-way instead
        // of up to 8-way (a 64-byte stride maps every other row onto the same banks).
        let slot = if (widest / 16) % 2 == 0 {
            widest + 16
        } else {
            widest
        };
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

/// Parameters of the fused expert kernels `moe_experts_<gate_up>_fused`: per CTA one
/// [`MmqTile`] (expert, up to `FUSED_COL_UNIT * nt` compact rows), gate/up product -> SwiGLU -> q8_1 H
/// in shared memory -> down product, each row's result to `dm[row_dst[c]][..hidden]`.
///
/// Gate row j of expert e: `gate + e * gu_expert_bytes + j * gu_row_bytes`; up row j: the same
/// from `up` (for a merged gate_up tensor, `up = gate + ffn * gu_row_bytes`). Down row n:
/// `down + e * down_expert_bytes + n * down_row_bytes`. Activations `x`: D4 blocks
/// `[hidden / 128][n_cols_x]`. Every weight buffer is readable 16 bytes past its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct FusedParams {
    pub gate: u64,
    pub up: u64,
    pub gu_expert_bytes: u64,
    pub down: u64,
    pub down_expert_bytes: u64,
    /// `*const BlockQ8_1Mmq`
    pub x: u64,
    /// `*const MmqTile`, one per CTA
    pub tiles: u64,
    /// `*mut f32` `[n_tokens * top_k][hidden]`
    pub dm: u64,
    /// `*const u32` `[n_rows]`: compact row -> token * top_k + slot
    pub row_dst: u64,
    pub gu_row_bytes: u32,
    pub down_row_bytes: u32,
    /// A multiple of 128 (and of 256 for 256-value gate/up blocks).
    pub hidden: u32,
    /// A multiple of 128.
    pub ffn: u32,
    pub n_cols_x: u32,
    /// Raw stages of the copy pipeline (`FUSED_MIN_STAGES ..= FUSED_MAX_STAGES`).
    pub stages: u32,
    /// ggml type id of the down tensor: Q2_0, IQ4_NL or Q8_0.
    pub down_type: u32,
    /// n-tiles per warp, one of [`FUSED_NT`]: the CTA covers `FUSED_COL_UNIT * nt` rows.
    pub nt: u32,
}

host_pod!(FusedParams);
const _: () = assert!(size_of::<FusedParams>() == 104);
