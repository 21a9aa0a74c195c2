//! One `#[repr(C)]` parameter struct per kernel: the host passes it by value, and the field
//! order lives here only. Sizes are checked at compile time below.

use core::mem::size_of;

#[cfg(not(target_arch = "nvptx64"))]
use bytemuck::{Pod, Zeroable};

/// Parameters of `moe_swiglu_quant` (fused SwiGLU + q8_1 D4 quantization).
///
/// Input `gu`: f32 `[n_rows, gu_stride]`; row r holds gate and up of length `ffn` each, either
/// as two halves (`gate = row[0..ffn]`, `up = row[ffn..2 ffn]`) or interleaved
/// (`gate_j = row[2j]`, `up_j = row[2j + 1]`). Output `out`: `out_chunks` chunks of `n_cols`
/// [`BlockQ8_1Mmq`](crate::layout::BlockQ8_1Mmq), row r's chunk kc at `kc * n_cols + r`.
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
    /// 128-value chunks written per row: `padded_k(ffn) / 128` (ggml's padded rows, zero chunks
    /// past `ffn`), or `ffn / 128` where the reader takes no K past `ffn` (the layer's down
    /// product).
    pub out_chunks: u32,
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

/// One CTA's column tile of an MMQ product: expert `expert`'s activation rows
/// `col_start .. col_start + n_cols` (compact order, `n_cols <= MMQ_COLS`). A tile of no rows
/// (`n_cols == 0`: the padding of a device-built list, `ExpertTilesParams`) does nothing.
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
/// With the SwiGLU epilogue (`moe_mmq_*_swiglu_*`) `out` is H's D4 blocks
/// `[out_stride][n_cols_x]` instead: `out_stride` is H's chunk count (at least `n / 2 / 128`;
/// the chunks past that are written as zero blocks).
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
    /// The weight tensors' tensor maps (`CUtensorMap`, 128 bytes each in global memory), or 0:
    /// [`MmqTmaMap`](crate::layout::MmqTmaMap) describes them. Where both of the rows' maps are
    /// there (`wmap1` only where some row lies in `w1`), the 128-row and flat pipelined kernels
    /// with the SwiGLU epilogue (`moe_mmq_(pipe|flat)_swiglu_<type>`) on sm_90 copy their raw
    /// weight stages by tensor copies; `moe_mmq_narrow_tma_<type>` requires them (the narrow
    /// shape's maps); every other kernel ignores them.
    pub wmap0: u64,
    pub wmap1: u64,
    pub row_bytes: u32,
    pub n_split: u32,
    /// Output features; a multiple of MMQ_ROWS.
    pub n: u32,
    /// Values per row; a multiple of MMQ_KSTEP.
    pub k: u32,
    pub n_cols_x: u32,
    pub out_stride: u32,
    /// The resident form of the narrow kernel, `moe_mmq_resident_<wtype>` (at least 1;
    /// [`MmqResidentSmem`](crate::layout::MmqResidentSmem), sm_90 modules only): each CTA over
    /// this many row tiles of 128 from row `128 resident ctaid.y`, or those of the `n / 128`
    /// that are left (the grid's y is `ceil(n / (128 resident))`,
    /// [`resident_row_tiles`](crate::layout::resident_row_tiles)); the
    /// layout exists for the type and `k`, the CTA has its `total` bytes of shared memory, and
    /// each tile's 128 rows are consecutive bytes of one tensor, 16-byte aligned. 0 where
    /// another kernel runs: every other kernel ignores it.
    pub resident: u32,
    /// The order in which the pipelined kernels (`moe_mmq_pipe_*`, `moe_mmq_narrow_*`,
    /// `moe_mmq_resident_*`) take their CTAs' work: [`MMQ_ORDER_ROWS`], CTA `l = y nctaid.x + x`
    /// of the launch order takes tile `l / nctaid.y` and row tile (resident form: group of row
    /// tiles) `l % nctaid.y`, so the CTAs the hardware starts together run every row tile of a
    /// few tiles and read those tiles' activations while the L2 holds them;
    /// [`MMQ_ORDER_TILES`], CTA (x, y) takes tile x and row tile y (every tile of row tile 0
    /// first: each row tile reads all the activations again). Every other kernel ignores it.
    pub order: u32,
    /// The L2 priority of the weights' lines in the narrow, tall and resident kernels' warp-private
    /// copies on sm_90 modules (tensor copies, bulk copies and `cp.async` pieces, with
    /// `.L2::cache_hint`): [`MMQ_WEIGHT_L2_NORMAL`] or [`MMQ_WEIGHT_L2_FIRST`] (evicted first, so
    /// that the lines read again stay: the activations, and the product's output that the next
    /// kernel reads). Every other kernel and module ignores it. Both give the same bytes.
    pub weight_l2: u32,
    pub _pad: u32,
}

/// [`MmqParams::order`]: the row tiles of a tile together (the default).
pub const MMQ_ORDER_ROWS: u32 = 1;
/// [`MmqParams::order`]: the grid's own order, the tiles of a row tile together.
pub const MMQ_ORDER_TILES: u32 = 0;
/// [`MmqParams::weight_l2`]: the weights' lines at the L2's normal priority (the default).
pub const MMQ_WEIGHT_L2_NORMAL: u32 = 0;
/// [`MmqParams::weight_l2`]: the weights' lines evicted from the L2 first.
pub const MMQ_WEIGHT_L2_FIRST: u32 = 1;

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
    /// `*mut BlockQ8_1Mmq` `[padded_k(hidden) / 128][n_tokens]`: each token's q8_1 blocks,
    /// which the gather copies to the token's rows of `xq`; or 0: the quantizer writes the rows
    /// (below `SCATTER_GATHER_MIN_ROWS` rows)
    pub xt: u64,
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

/// Parameters of `moe_expert_tiles`: the work list of an expert-row product built on the
/// device from the expert bounds - for each expert in id order, its rows in tiles of at most
/// `width` ([`MmqTile`]; those [`super::expert_tile_range`] keeps, by `tail` and `part`), then tiles
/// of no rows up to `n_slots` (the launch's grid.x), which the products skip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct ExpertTilesParams {
    /// `*const u32` `[n_experts + 1]`: the scatter's expert bounds
    pub bounds: u64,
    /// `*mut MmqTile` `[n_slots]`
    pub tiles: u64,
    pub n_experts: u32,
    pub width: u32,
    pub n_slots: u32,
    /// 0: every tile; else the most rows of a tail ([`super::expert_tile_range`])
    pub tail: u32,
    /// With `tail > 0`: [`super::TILES_BODY`] or [`super::TILES_TAILS`]
    pub part: u32,
    pub _pad: u32,
}

host_pod!(
    ExpertTilesParams,
    MmqTile,
    MmqParams,
    RouteParams,
    ScatterParams,
    CombineParams
);

const _: () = assert!(size_of::<MmqTile>() == 16);
const _: () = assert!(size_of::<ExpertTilesParams>() == 40);
const _: () = assert!(size_of::<MmqParams>() == 112);
const _: () = assert!(size_of::<RouteParams>() == 48);
const _: () = assert!(size_of::<ScatterParams>() == 88);
const _: () = assert!(size_of::<CombineParams>() == 40);

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
    /// n-tiles per warp, one of [`FUSED_NT`](crate::layout::FUSED_NT): the CTA covers `FUSED_COL_UNIT * nt` rows.
    pub nt: u32,
    /// Non-zero: when the CTA issues the copies of a stage, it also brings the weight rows of the
    /// stage after it into the L2 (`prefetch.global.L2`, one per 128-byte line of a row's
    /// bytes). The same bytes either way.
    pub prefetch: u32,
    pub _pad: u32,
}

host_pod!(FusedParams);
const _: () = assert!(size_of::<FusedParams>() == 112);
