//! Scalar numeric rules that kernels and the CPU reference must apply identically.
//!
//! Every function here is plain IEEE f32 arithmetic (round to nearest even, subnormals kept, no
//! contraction: rustc emits `mul.rn`/`add.rn`/`div.rn` on the GPU and SSE scalar ops on the host)
//! with `fma` only where it is written. Compiled once for each side from this one source, so the
//! GPU and the CPU produce the same bits.
//!
//! Where ggml's CUDA build differs (it is compiled with `-use_fast_math`: approximate reciprocal
//! and `ex2`, flush-to-zero; docs/ggml-reference.md §3.3, §8.3, §11) this is noted at the function;
//! README.md gives the measured size of the difference.
//!
//! By role: the roundings and `fma` here; `exp` and SwiGLU (exp.rs); the q8_1 quantization rule
//! (q8_1.rs); MMQ's float epilogue on MAGIC-form sums (mmq.rs); binary16 conversions (f16.rs).

mod exp;
mod f16;
mod mmq;
mod q8_1;

pub use exp::{exp, swiglu, swiglu_den, swiglu_div};
pub use f16::{f16_scale_to_f32, f16_to_f32, f16_to_f32_soft, f32_to_f16};
pub use mmq::{
    MAGIC, magic_mul, magic_offset, magic_to_f32, mmq_step_16, mmq_step_16_cvt, mmq_step_16_magic,
    mmq_step_32, mmq_step_32_magic, q2_0_shared_d_step, q2_0_shared_d_step_magic,
    scale_probe_inputs, small_i32_to_f32,
};
pub use q8_1::{
    amax_merge, amax_step, q8_1_inv_scale, q8_1_quant, q8_1_quant_finite, q8_1_quant_tiny,
    q8_1_scale, quantize_group_q8_1,
};

/// `a * b + c` with a single rounding (`fma.rn.f32` on the GPU, libm's exact `fmaf` on the host).
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        core::f32::math::mul_add(a, b, c)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        a.mul_add(b, c)
    }
}

/// |x|, by clearing the sign bit (NaN stays NaN).
#[inline(always)]
pub fn abs(x: f32) -> f32 {
    f32::from_bits(x.to_bits() & 0x7fff_ffff)
}

/// Rounds to the nearest integer, halves away from zero (C's `roundf`), for |v| <= 2^23 (larger
/// magnitudes are clamped to 2^23 first); NaN gives 0 (as CUDA's float-to-int conversion does).
///
/// `v - trunc(v)` is exact for |v| < 2^23, so the comparison with 0.5 decides ties exactly.
/// Branch-free: the GPU evaluates it with selects, no divergence.
#[inline(always)]
pub fn round_half_away(v: f32) -> i32 {
    let v = if v.is_nan() { 0.0 } else { v };
    let v = v.clamp(-8_388_608.0, 8_388_608.0);
    // SAFETY: v is finite and |v| <= 2^23, so it converts (toward zero) without overflow.
    let t = unsafe { v.to_int_unchecked::<i32>() };
    let frac = v - t as f32;
    t + (frac >= 0.5) as i32 - (frac <= -0.5) as i32
}

/// `v as i32` rounded toward zero, NaN giving 0 and out-of-range values saturating: the same on
/// both sides (`cvt.rzi.s32.f32` on the GPU, Rust's saturating cast on the host).
#[inline(always)]
pub fn trunc_i32(v: f32) -> i32 {
    // On the GPU `as i32` would add three compares and selects around the `cvt`, which already
    // saturates and maps NaN to 0.
    #[cfg(target_arch = "nvptx64")]
    {
        crate::ptx::cvt_rzi_s32_f32(v)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        v as i32
    }
}

/// 0.5 - 2^-25, the largest f32 below one half.
const JUST_BELOW_HALF: f32 = 0.499_999_97;

/// [`round_half_away`] for |v| <= 128, in three operations and no int-to-float conversion:
/// truncation of `v + copysign(0.5 - 2^-25, v)`. Adding the largest f32 below one half (not 0.5)
/// keeps `0.49999997 + 0.5` from rounding up to 1; a tie `k + 0.5` still reaches `k + 1` (the
/// sum rounds up). Equal to `round_half_away` for every f32 with |v| <= 128 (checked over all
/// 2.2e9 of them when it was written; the tests check a dense subset). NaN gives 0.
#[inline(always)]
pub fn round_half_away_small(v: f32) -> i32 {
    let h = f32::from_bits(JUST_BELOW_HALF.to_bits() | (v.to_bits() & 0x8000_0000));
    trunc_i32(v + h)
}

/// The MoE weighted sum of one output value over a token's top-k slots, in slot order:
/// `acc = e_0 * w_0`, then `acc = fma(e_s, w_s, acc)` (ggml's fused CUDA reduction,
/// docs/ggml-reference.md §8.3).
#[inline(always)]
pub fn combine_step(acc: f32, e: f32, w: f32, first: bool) -> f32 {
    if first { e * w } else { fma(e, w, acc) }
}

#[cfg(test)]
mod tests;
