//! SwiGLU + q8_1 D4 quantization between the gate/up and the down products, fused, plus the
//! two-kernel form it replaces (`moe_swiglu_f32`, then `moe_quantize_q8_1`).
//!
//! `moe_swiglu_quant`: a CTA per 128-value chunk of 16 rows (`layout::SWIGLU_QUANT_ROWS`), a
//! half warp a row, 8 values a lane (see the kernel): per value, half the shuffles and scale
//! divisions of 4 values a lane, and per CTA a row group's chunk rather than a row.
//! The two-kernel form: grid x = row (up to 2^31 - 1 rows). Block: W warps
//! (`layout::quant_block_warps`: one per 128-value data chunk, at most 8); warp w covers the D4
//! blocks (128-value chunks) kc = w, w + W, ... of the padded row, lane l the values
//! `128 kc + 4 l .. + 4`: one CTA sweeps one row's gate and up contiguously. No shared memory.
//! Launchers: host/src/moe/swiglu_quant.rs.

use crate::layout::{
    BlockQ8_1Mmq, MMQ_BLOCK_VALUES, QUANT_VALUES_PER_THREAD, QuantizeParams,
    SWIGLU_QUANT_LANE_VALUES, SWIGLU_QUANT_ROWS, SwigluParams, SwigluQuantParams, padded_k,
};
use crate::moe::q8_1::{quantize_group_x8, store_q8_1_x4, store_x8, store_zero_x4};
use crate::ptx::{ctaid_x, ld_nc_v4_f32, ntid_x, st_v4_f32, tid_x};
use crate::quant::{swiglu_den, swiglu_div};

/// Loads gate and up values `k0 .. k0 + 4` of one row (`k0 + 4 <= ffn`).
///
/// # Safety
/// `row` must point to a row of at least `2 * ffn` f32, 16-byte aligned.
#[inline(always)]
unsafe fn load_gate_up(row: *const f32, ffn: u32, k0: u32, interleaved: bool) -> [[f32; 4]; 2] {
    // SAFETY: in bounds by the caller's contract; offsets are multiples of 4 f32.
    unsafe {
        if interleaved {
            let a = ld_nc_v4_f32(row.add(2 * k0 as usize));
            let b = ld_nc_v4_f32(row.add(2 * k0 as usize + 4));
            [[a[0], a[2], b[0], b[2]], [a[1], a[3], b[1], b[3]]]
        } else {
            let g = ld_nc_v4_f32(row.add(k0 as usize));
            let u = ld_nc_v4_f32(row.add((ffn + k0) as usize));
            [g, u]
        }
    }
}

/// Four SwiGLU values, written out (constant indices only: no local memory). The four
/// `1 + exp(-g)` are computed before any division: each IEEE division becomes a branchy
/// sequence in SASS that ptxas does not overlap with its neighbours, so the independent
/// exponentials come first and run interleaved. Same operations as `quant::swiglu`.
#[inline(always)]
fn swiglu_x4(g: [f32; 4], u: [f32; 4]) -> [f32; 4] {
    let d = [
        swiglu_den(g[0]),
        swiglu_den(g[1]),
        swiglu_den(g[2]),
        swiglu_den(g[3]),
    ];
    [
        swiglu_div(g[0], d[0], u[0]),
        swiglu_div(g[1], d[1], u[1]),
        swiglu_div(g[2], d[2], u[2]),
        swiglu_div(g[3], d[3], u[3]),
    ]
}

/// The 128-value chunks of a padded row of `k` values this warp covers, and this lane's first
/// K position in chunk `kc`.
#[inline(always)]
fn chunk_k0(kc: u32) -> u32 {
    kc * MMQ_BLOCK_VALUES as u32 + (tid_x() % 32) * QUANT_VALUES_PER_THREAD as u32
}

/// Loads gate and up values `k0 .. k0 + 8` of one row (`k0 + 8 <= ffn`, `k0` a multiple of 8).
///
/// # Safety
/// As [`load_gate_up`].
#[inline(always)]
unsafe fn load_gate_up_x8(row: *const f32, ffn: u32, k0: u32, interleaved: bool) -> [[f32; 8]; 2] {
    // SAFETY: in bounds by the caller's contract; offsets are multiples of 4 f32.
    unsafe {
        let [g0, u0] = load_gate_up(row, ffn, k0, interleaved);
        let [g1, u1] = load_gate_up(row, ffn, k0 + 4, interleaved);
        [
            [g0[0], g0[1], g0[2], g0[3], g1[0], g1[1], g1[2], g1[3]],
            [u0[0], u0[1], u0[2], u0[3], u1[0], u1[1], u1[2], u1[3]],
        ]
    }
}

/// Eight SwiGLU values: the eight `1 + exp(-g)` first, then the divisions (as [`swiglu_x4`]).
#[inline(always)]
fn swiglu_x8(g: [f32; 8], u: [f32; 8]) -> [f32; 8] {
    let mut d = [0.0f32; 8];
    unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
        d[i] = swiglu_den(g[i]);
    });
    let mut h = [0.0f32; 8];
    unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
        h[i] = swiglu_div(g[i], d[i], u[i]);
    });
    h
}

/// Fused SwiGLU + q8_1 D4 quantization: `out` = q8_1(swiglu(gate, up)) of every row, its
/// `out_chunks` chunks (past `ffn`: zero blocks, ggml's padding). Shapes: `gu` f32
/// `[n_rows, gu_stride]`, `out` `[out_chunks][n_cols]` blocks. H is never stored.
///
/// Grid: x = `ceil(n_rows / SWIGLU_QUANT_ROWS) * out_chunks`; `SWIGLU_QUANT_THREADS` threads.
/// CTA x makes chunk `kc = x % out_chunks` of the `SWIGLU_QUANT_ROWS` rows from
/// `SWIGLU_QUANT_ROWS (x / out_chunks)`: a half warp a row, lane l of it the 8 values
/// `128 kc + 8 l ..` (two 16-byte loads of gate, two of up), 4 lanes a q8_1 group; the CTA's
/// blocks are consecutive in `out`, and consecutive CTAs sweep a row group's chunks. No shared
/// memory.
///
/// # Safety
/// Buffers as described in `layout::SwigluQuantParams`; launched with the grid above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_swiglu_quant(p: SwigluQuantParams) {
    crate::ptx::grid_dependency_sync();
    // One uniform branch, then a body with the layout fixed: the loads and the lane's value
    // order are not selected per chunk.
    // SAFETY: forwarded contract.
    unsafe {
        if p.interleaved != 0 {
            swiglu_quant_rows::<true>(&p)
        } else {
            swiglu_quant_rows::<false>(&p)
        }
    }
}

/// The body of `moe_swiglu_quant` for one gate/up layout.
///
/// # Safety
/// As `moe_swiglu_quant`.
#[inline(always)]
unsafe fn swiglu_quant_rows<const INTERLEAVED: bool>(p: &SwigluQuantParams) {
    const LANES: u32 = (MMQ_BLOCK_VALUES / SWIGLU_QUANT_LANE_VALUES) as u32;
    // CTA x: chunk x % out_chunks of row group x / out_chunks (the CTAs of a row group's
    // chunks run together: the rows are read in one sweep).
    // (Clamped to 1, which the host always passes at least: no division-by-zero trap.)
    let chunks = p.out_chunks.max(1);
    let (group, kc) = (ctaid_x() / chunks, ctaid_x() % chunks);
    let row = group * SWIGLU_QUANT_ROWS as u32 + tid_x() / LANES;
    // A half warp past the last row redoes the last row and stores nothing: every lane takes
    // part in the group's shuffles. (n_rows > 0: the host launches nothing for no rows.)
    let live = row < p.n_rows;
    let row = row.min(p.n_rows - 1);
    let k0 = kc * MMQ_BLOCK_VALUES as u32 + (tid_x() % LANES) * SWIGLU_QUANT_LANE_VALUES as u32;
    let mut h = [0.0f32; 8];
    // ffn is a multiple of 128: a chunk is wholly data or wholly padding, the same for the CTA.
    if k0 < p.ffn {
        // SAFETY: row < n_rows, k0 + 8 <= ffn.
        unsafe {
            let r = (p.gu as *const f32).add(row as usize * p.gu_stride as usize);
            let [g, u] = load_gate_up_x8(r, p.ffn, k0, INTERLEAVED);
            h = swiglu_x8(g, u);
        }
    }
    // Lanes 4i .. 4i + 3 of a half warp form group i: shuffle masks 1, 2.
    let (q, d) = quantize_group_x8(h, [1, 2]);
    if live {
        // SAFETY: out holds out_chunks chunks of n_cols blocks, chunk kc < out_chunks, row <
        // n_rows <= n_cols.
        unsafe { store_x8(p.out as *mut BlockQ8_1Mmq, p.n_cols, row, k0, q, d) };
    }
}

/// Two-kernel form, step 1: `h[row, k] = swiglu(gate, up)` as f32 `[n_rows, ffn]`.
/// Grid and block as `moe_swiglu_quant` (chunks up to ffn only).
///
/// # Safety
/// Buffers as described in `layout::SwigluParams`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_swiglu_f32(p: SwigluParams) {
    crate::ptx::grid_dependency_sync();
    // SAFETY: forwarded contract.
    unsafe {
        if p.interleaved != 0 {
            swiglu_f32_rows::<true>(&p)
        } else {
            swiglu_f32_rows::<false>(&p)
        }
    }
}

/// The body of `moe_swiglu_f32` for one gate/up layout.
///
/// # Safety
/// As `moe_swiglu_f32`.
#[inline(always)]
unsafe fn swiglu_f32_rows<const INTERLEAVED: bool>(p: &SwigluParams) {
    let row = ctaid_x();
    if row >= p.n_rows {
        return;
    }
    // SAFETY: row < n_rows.
    let r = unsafe { (p.gu as *const f32).add(row as usize * p.gu_stride as usize) };
    let mut kc = tid_x() / 32;
    while kc * (MMQ_BLOCK_VALUES as u32) < p.ffn {
        let k0 = chunk_k0(kc);
        // SAFETY: k0 + 4 <= ffn; h has n_rows * ffn f32 (ffn a multiple of 128).
        unsafe {
            let [g, u] = load_gate_up(r, p.ffn, k0, INTERLEAVED);
            let out = (p.h as *mut f32).add(row as usize * p.ffn as usize + k0 as usize);
            st_v4_f32(out, swiglu_x4(g, u));
        }
        kc += ntid_x() / 32;
    }
}

/// Two-kernel form, step 2 (and the plain activation quantizer): q8_1 D4 of f32 rows
/// `x[n_rows, x_stride]`, `k` values each, zero-padded to `padded_k(k)`. Grid and block as
/// `moe_swiglu_quant`.
///
/// # Safety
/// Buffers as described in `layout::QuantizeParams`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_quantize_q8_1(p: QuantizeParams) {
    crate::ptx::grid_dependency_sync();
    let row = ctaid_x();
    if row >= p.n_rows {
        return;
    }
    let n_chunks = (padded_k(p.k as usize) / MMQ_BLOCK_VALUES) as u32;
    let mut kc = tid_x() / 32;
    while kc < n_chunks {
        let k0 = chunk_k0(kc);
        let out = p.out as *mut BlockQ8_1Mmq;
        // SAFETY: k is a multiple of 4, so k0 + 4 <= k when loading; rows are 16-byte aligned;
        // out holds padded_k(k) / 128 chunks of n_cols blocks and row < n_rows <= n_cols. The
        // outer branch is the same for the whole warp.
        unsafe {
            if kc * (MMQ_BLOCK_VALUES as u32) < p.k {
                let mut v = [0.0f32; 4];
                if k0 < p.k {
                    v = ld_nc_v4_f32(
                        (p.x as *const f32).add(row as usize * p.x_stride as usize + k0 as usize),
                    );
                }
                store_q8_1_x4(out, p.n_cols, row, k0, v);
            } else {
                store_zero_x4(out, p.n_cols, row, k0);
            }
        }
        kc += ntid_x() / 32;
    }
}
