//! SwiGLU + q8_1 D4 quantization between the gate/up and the down products, fused, plus the
//! two-kernel form it replaces (`moe_swiglu_f32`, then `moe_quantize_q8_1`).
//!
//! Grid: x = row (up to 2^31 - 1 rows). Block: W warps (`layout::quant_block_warps`: one per
//! 128-value data chunk, at most 8); warp w covers the D4 blocks (128-value chunks) kc = w,
//! w + W, ... of the padded row, lane l the values `128 kc + 4 l .. + 4`: one CTA sweeps one
//! row's gate and up contiguously. No shared memory.
//! Launchers: host/src/moe/swiglu_quant.rs.

use crate::layout::{
    BlockQ8_1Mmq, MMQ_BLOCK_VALUES, QUANT_VALUES_PER_THREAD, QuantizeParams, SwigluParams,
    SwigluQuantParams, padded_k,
};
use crate::moe::q8_1::{store_q8_1_x4, store_zero_x4};
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

/// Fused SwiGLU + q8_1 D4 quantization: `out` = q8_1(swiglu(gate, up)) of every row, padded
/// with zero blocks up to `padded_k(ffn)` values. Shapes: `gu` f32 `[n_rows, gu_stride]`,
/// `out` `[padded_k(ffn) / 128][n_cols]` blocks. H is never stored.
///
/// # Safety
/// Buffers as described in `layout::SwigluQuantParams`; launched with the grid above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_swiglu_quant(p: SwigluQuantParams) {
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
    let row = ctaid_x();
    if row >= p.n_rows {
        return;
    }
    // SAFETY: row < n_rows.
    let r = unsafe { (p.gu as *const f32).add(row as usize * p.gu_stride as usize) };
    let mut kc = tid_x() / 32;
    while kc < p.out_chunks {
        let k0 = chunk_k0(kc);
        let out = p.out as *mut BlockQ8_1Mmq;
        // SAFETY: ffn is a multiple of 128, so a chunk is wholly data (k0 + 4 <= ffn) or wholly
        // padding, the same for the whole warp; out holds out_chunks chunks of n_cols blocks
        // and row < n_rows <= n_cols.
        unsafe {
            if k0 < p.ffn {
                let [g, u] = load_gate_up(r, p.ffn, k0, INTERLEAVED);
                store_q8_1_x4(out, p.n_cols, row, k0, swiglu_x4(g, u));
            } else {
                store_zero_x4(out, p.n_cols, row, k0);
            }
        }
        kc += ntid_x() / 32;
    }
}

/// Two-kernel form, step 1: `h[row, k] = swiglu(gate, up)` as f32 `[n_rows, ffn]`.
/// Grid and block as `moe_swiglu_quant` (chunks up to ffn only).
///
/// # Safety
/// Buffers as described in `layout::SwigluParams`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_swiglu_f32(p: SwigluParams) {
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
