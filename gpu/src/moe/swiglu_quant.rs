//! SwiGLU + q8_1 D4 quantization between the gate/up and the down products, fused, plus the
//! two-kernel form it replaces (`moe_swiglu_f32`, then `moe_quantize_q8_1`).
//!
//! Grid: x = row (up to 2^31 - 1 rows), y = 512-value chunk of the padded row
//! (`layout::padded_k(ffn) / 512`). Block: 128 threads; thread t covers K positions
//! `512 y + 4 t .. + 4`; warp w covers D4 block `kc = 4 y + w`. No shared memory.
//! Launchers: host/src/moe/swiglu_quant.rs.

use crate::layout::{
    BlockQ8_1Mmq, QUANT_BLOCK_VALUES, QUANT_VALUES_PER_THREAD, QuantizeParams, SwigluParams,
    SwigluQuantParams,
};
use crate::moe::q8_1::store_q8_1_x4;
use crate::ptx::{ctaid_x, ctaid_y, ld_nc_v4_f32, rcp_approx, st_v4_f32, tid_x};
use crate::quant::{fma, swiglu_den};

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

/// `x / d` correctly rounded (the same bits as IEEE division, `div.rn.f32`), for operands in
/// the range where the division needs no special handling: `1 <= d <= 2^60` and
/// `2^-60 <= |x| <= 2^60` (then every intermediate is a normal number and the quotient is at
/// least 2^-120). It is the fast path `div.rn.f32` itself runs when its `FCHK` finds nothing
/// unusual: an approximate reciprocal, one Newton step, the quotient, its exact residual by
/// `fma` and one correction (Markstein). Written out, it has no branch, so four of them
/// interleave; the caller falls back to `/` when an operand is outside the range.
#[inline(always)]
fn div_rn_in_range(x: f32, d: f32) -> f32 {
    let r0 = rcp_approx(d);
    let e = fma(-d, r0, 1.0);
    let r1 = fma(r0, e, r0);
    let q0 = fma(x, r1, 0.0);
    let rem = fma(-d, q0, x);
    fma(rem, r1, q0)
}

/// Whether `div_rn_in_range(x, d)` applies (NaN: no).
#[inline(always)]
fn div_in_range(x: f32, d: f32) -> bool {
    const LO: f32 = 8.673_617e-19; // 2^-60
    const HI: f32 = 1.152_921_5e18; // 2^60
    let ax = crate::quant::abs(x);
    (d >= 1.0) & (d <= HI) & (ax >= LO) & (ax <= HI)
}

/// Four SwiGLU values, written out (constant indices only: no local memory): the same
/// operations as `quant::swiglu` - `1 + exp(-g)`, then `g / den` (IEEE), then `* u` - with the
/// four divisions branch-free in the usual range (`div_rn_in_range`, same bits) so that the
/// four values run interleaved; any operand outside the range sends the thread through plain
/// `/` (rare: gate below -41 or |gate| below 2^-60).
#[inline(always)]
fn swiglu_x4(g: [f32; 4], u: [f32; 4]) -> [f32; 4] {
    let d = [
        swiglu_den(g[0]),
        swiglu_den(g[1]),
        swiglu_den(g[2]),
        swiglu_den(g[3]),
    ];
    let ok = div_in_range(g[0], d[0])
        & div_in_range(g[1], d[1])
        & div_in_range(g[2], d[2])
        & div_in_range(g[3], d[3]);
    let q = if ok {
        [
            div_rn_in_range(g[0], d[0]),
            div_rn_in_range(g[1], d[1]),
            div_rn_in_range(g[2], d[2]),
            div_rn_in_range(g[3], d[3]),
        ]
    } else {
        [g[0] / d[0], g[1] / d[1], g[2] / d[2], g[3] / d[3]]
    };
    [q[0] * u[0], q[1] * u[1], q[2] * u[2], q[3] * u[3]]
}

/// Fused SwiGLU + q8_1 D4 quantization: `out` = q8_1(swiglu(gate, up)) of every row, padded
/// with zero blocks up to `padded_k(ffn)` values. Shapes: `gu` f32 `[n_rows, gu_stride]`,
/// `out` `[padded_k(ffn) / 128][n_cols]` blocks. H is never stored.
///
/// # Safety
/// Buffers as described in `layout::SwigluQuantParams`; launched with the grid above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_swiglu_quant(p: SwigluQuantParams) {
    let row = ctaid_x();
    if row >= p.n_rows {
        return;
    }
    let k0 = ctaid_y() * QUANT_BLOCK_VALUES as u32 + tid_x() * QUANT_VALUES_PER_THREAD as u32;
    let mut h = [0.0f32; 4];
    if k0 < p.ffn {
        // SAFETY: row < n_rows and k0 + 4 <= ffn (ffn is a multiple of 128).
        let [g, u] = unsafe {
            let r = (p.gu as *const f32).add(row as usize * p.gu_stride as usize);
            load_gate_up(r, p.ffn, k0, p.interleaved != 0)
        };
        h = swiglu_x4(g, u);
    }
    // SAFETY: out holds padded_k(ffn) / 128 chunks of n_cols blocks and row < n_rows <= n_cols.
    unsafe { store_q8_1_x4(p.out as *mut BlockQ8_1Mmq, p.n_cols, row, k0, h) };
}

/// `moe_swiglu_quant` with two rows per CTA (rows `2 x`, `2 x + 1`; grid.x = rows / 2 rounded
/// up): both rows' loads are issued before any arithmetic, twice the bytes in flight per thread.
/// Same results.
///
/// # Safety
/// As `moe_swiglu_quant`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_swiglu_quant_x2(p: SwigluQuantParams) {
    let row0 = 2 * ctaid_x();
    if row0 >= p.n_rows {
        return;
    }
    let two = row0 + 1 < p.n_rows;
    let k0 = ctaid_y() * QUANT_BLOCK_VALUES as u32 + tid_x() * QUANT_VALUES_PER_THREAD as u32;
    let (mut h0, mut h1) = ([0.0f32; 4], [0.0f32; 4]);
    if k0 < p.ffn {
        let il = p.interleaved != 0;
        // SAFETY: rows below n_rows, k0 + 4 <= ffn (ffn is a multiple of 128).
        let (a, b) = unsafe {
            let r = (p.gu as *const f32).add(row0 as usize * p.gu_stride as usize);
            let a = load_gate_up(r, p.ffn, k0, il);
            let b = if two {
                load_gate_up(r.add(p.gu_stride as usize), p.ffn, k0, il)
            } else {
                [[0.0; 4]; 2]
            };
            (a, b)
        };
        h0 = swiglu_x4(a[0], a[1]);
        if two {
            h1 = swiglu_x4(b[0], b[1]);
        }
    }
    // SAFETY: out holds padded_k(ffn) / 128 chunks of n_cols blocks and rows < n_rows <= n_cols.
    unsafe {
        store_q8_1_x4(p.out as *mut BlockQ8_1Mmq, p.n_cols, row0, k0, h0);
        if two {
            store_q8_1_x4(p.out as *mut BlockQ8_1Mmq, p.n_cols, row0 + 1, k0, h1);
        }
    }
}

/// Two-kernel form, step 1: `h[row, k] = swiglu(gate, up)` as f32 `[n_rows, ffn]`.
/// Grid: x = row, y = `ffn / 512` rounded up; 128 threads of 4 values.
///
/// # Safety
/// Buffers as described in `layout::SwigluParams`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_swiglu_f32(p: SwigluParams) {
    let row = ctaid_x();
    let k0 = ctaid_y() * QUANT_BLOCK_VALUES as u32 + tid_x() * QUANT_VALUES_PER_THREAD as u32;
    if row >= p.n_rows || k0 >= p.ffn {
        return;
    }
    // SAFETY: row < n_rows, k0 + 4 <= ffn; h has n_rows * ffn f32 (ffn a multiple of 4).
    unsafe {
        let r = (p.gu as *const f32).add(row as usize * p.gu_stride as usize);
        let [g, u] = load_gate_up(r, p.ffn, k0, p.interleaved != 0);
        let h = swiglu_x4(g, u);
        let out = (p.h as *mut f32).add(row as usize * p.ffn as usize + k0 as usize);
        st_v4_f32(out, h);
    }
}

/// Two-kernel form, step 2 (and the plain activation quantizer): q8_1 D4 of f32 rows
/// `x[n_rows, x_stride]`, `k` values each, zero-padded to `padded_k(k)`.
/// Grid: x = row, y = `padded_k(k) / 512`; 128 threads of 4 values.
///
/// # Safety
/// Buffers as described in `layout::QuantizeParams`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_quantize_q8_1(p: QuantizeParams) {
    let row = ctaid_x();
    if row >= p.n_rows {
        return;
    }
    let k0 = ctaid_y() * QUANT_BLOCK_VALUES as u32 + tid_x() * QUANT_VALUES_PER_THREAD as u32;
    let mut v = [0.0f32; 4];
    if k0 < p.k {
        // SAFETY: k is a multiple of 4, so k0 + 4 <= k; rows are 16-byte aligned.
        v = unsafe {
            ld_nc_v4_f32((p.x as *const f32).add(row as usize * p.x_stride as usize + k0 as usize))
        };
    }
    // SAFETY: out holds padded_k(k) / 128 chunks of n_cols blocks and row < n_rows <= n_cols.
    unsafe { store_q8_1_x4(p.out as *mut BlockQ8_1Mmq, p.n_cols, row, k0, v) };
}
