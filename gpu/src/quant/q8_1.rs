//! The q8_1 quantization rule of one 32-value group: its maximum, scale and int8 values.

use super::{abs, round_half_away_small};

/// The running maximum of |x| for a q8_1 group: NaN inputs are skipped (as `fmaxf` does;
/// `f32::max` is IEEE maxNum on both sides: `max.f32` on the GPU).
#[inline(always)]
pub fn amax_step(acc: f32, x: f32) -> f32 {
    acc.max(abs(x))
}

/// Combines two partial maxima of |x| (used by the GPU's shuffle reduction; the order in which
/// partial maxima are combined cannot change a maximum).
#[inline(always)]
pub fn amax_merge(a: f32, b: f32) -> f32 {
    a.max(b)
}

/// The q8_1 inverse scale of a group with maximum |x| `amax`: `127 / amax` (IEEE division; +inf
/// when amax is 0). ggml: `127 * rcp.approx(amax)`.
#[inline(always)]
pub fn q8_1_inv_scale(amax: f32) -> f32 {
    127.0 / amax
}

/// The stored q8_1 scale `d = 1 / d_inv` (IEEE; 0 when amax was 0). ggml: `rcp.approx(d_inv)`.
#[inline(always)]
pub fn q8_1_scale(d_inv: f32) -> f32 {
    1.0 / d_inv
}

/// One quantized value: `round_half_away(x * d_inv)` saturated to [-127, 127]; NaN (including the
/// 0 * inf of an all-zero group) gives 0. Saturation only acts when `d_inv` overflowed to +inf
/// (amax < 127 / f32::MAX), where the stored scale is 0 and the value contributes nothing: that
/// case is [`q8_1_quant_tiny`], every other [`q8_1_quant_finite`].
#[inline(always)]
pub fn q8_1_quant(x: f32, d_inv: f32) -> i8 {
    (if d_inv == f32::INFINITY {
        q8_1_quant_tiny(x)
    } else {
        q8_1_quant_finite(x, d_inv)
    }) as i8
}

/// [`q8_1_quant`] for a finite `d_inv` (`127 / amax` with amax >= |x| or x NaN): |x * d_inv| <=
/// 127 * (1 + 2^-23), so no saturation is needed (rounding gives at most 127), and NaN (x NaN,
/// or an infinite x times d_inv = 0) converts to 0. In [-127, 127], as an i32.
#[inline(always)]
pub fn q8_1_quant_finite(x: f32, d_inv: f32) -> i32 {
    round_half_away_small(x * d_inv)
}

/// [`q8_1_quant`] for `d_inv` = +inf: `x * inf` is +-inf (saturating to +-127) or NaN for x = 0
/// (giving 0); NaN x gives 0. As an i32.
#[inline(always)]
pub fn q8_1_quant_tiny(x: f32) -> i32 {
    if x > 0.0 {
        127
    } else if x < 0.0 {
        -127
    } else {
        0
    }
}

/// Quantizes one group of 32 values to q8_1: returns the f32 scale and the int8 values. The GPU
/// kernels apply the same three rules per lane with the maximum reduced across lanes.
pub fn quantize_group_q8_1(x: &[f32; 32]) -> (f32, [i8; 32]) {
    let mut amax = 0.0f32;
    for &v in x {
        amax = amax_step(amax, v);
    }
    let d_inv = q8_1_inv_scale(amax);
    let mut q = [0i8; 32];
    for (q, &v) in q.iter_mut().zip(x) {
        *q = q8_1_quant(v, d_inv);
    }
    (q8_1_scale(d_inv), q)
}
