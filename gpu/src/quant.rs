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

/// 2^k as f32 for -126 <= k <= 127 (exact, built from its bits).
#[inline(always)]
fn pow2i(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

const SHIFTER: f32 = 12_582_912.0;

/// `e^xc = y * 2^n` for a clamped input `xc` (|xc| <= 105): returns `y = e^r` (|r| <= ln2/2 +
/// tiny) and `t = xc * log2(e) + 1.5 * 2^23`, whose bits are `0x4b40_0000 + n`: n is read from
/// them (the shifter trick) instead of converted with a float-to-int instruction.
#[inline(always)]
fn exp_reduced(xc: f32) -> (f32, f32) {
    const LOG2E: f32 = core::f32::consts::LOG2_E;
    // ln 2 split so that n * LN2_HI is exact for |n| <= 256 (LN2_HI has 9 significant bits).
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const P0: f32 = 1.987_569_1e-4;
    const P1: f32 = 1.398_199_9e-3;
    const P2: f32 = 8.333_452e-3;
    const P3: f32 = 4.166_579_6e-2;
    const P4: f32 = 1.666_666_5e-1;
    const P5: f32 = 5e-1;
    let t = xc * LOG2E + SHIFTER;
    let nf = t - SHIFTER;
    let r = fma(-nf, LN2_HI, xc);
    let r = fma(-nf, LN2_LO, r);
    let z = r * r;
    let p = fma(fma(fma(fma(fma(P0, r, P1), r, P2), r, P3), r, P4), r, P5);
    (fma(p, z, r) + 1.0, t)
}

/// `e^x` in f32, deterministic on both sides and branch-free: Cody-Waite reduction
/// `x = n ln2 + r` (n by the 1.5 * 2^23 shifter, ties to even) with two `fma`s, a degree-7
/// polynomial for `e^r` on |r| <= ln2/2 evaluated by Horner with `fma` (coefficients of Cephes'
/// `expf`), then scaling by 2^n as two multiplications by 2^(n/2): the first is exact, the second
/// rounds once, so overflow gives +inf and the subnormal range is rounded once. The input is
/// clamped to [-104, 89] first (e^-104 rounds to 0, e^89 overflows). Error under 2 ulp over the
/// whole range (checked against f64 in the tests); NaN returns NaN.
///
/// ggml's CUDA build uses `ex2.approx.ftz(x * log2 e)` instead (docs/ggml-reference.md §8.3).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // max/min skip NaN: a NaN input computes e^-104 here and is returned as itself at the end
    // (`clamp` would keep the NaN).
    #[allow(clippy::manual_clamp)]
    let xc = x.max(-104.0).min(89.0);
    let (y, t) = exp_reduced(xc);
    // n in [-151, 129] (xc is clamped): the low bits of t.
    let n = t.to_bits().wrapping_sub(SHIFTER.to_bits()) as i32;
    let n1 = n >> 1;
    let e = y * pow2i(n1) * pow2i(n - n1);
    if x.is_nan() { x } else { e }
}

/// SiLU(g) * u, ggml's SwiGLU element (`x / (1 + expf(-x)) * g`, docs/ggml-reference.md §8.3) in exact
/// IEEE arithmetic: true division, our `exp`. ggml's CUDA build computes `x * rcp(1 + ex2(..))`
/// with approximate `rcp`/`ex2`; README.md gives the measured difference.
#[inline(always)]
pub fn swiglu(gate: f32, up: f32) -> f32 {
    swiglu_div(gate, swiglu_den(gate), up)
}

/// The denominator of SiLU: `1 + exp(-gate)` (first half of [`swiglu`]).
#[inline(always)]
pub fn swiglu_den(gate: f32) -> f32 {
    1.0 + exp_for_den(-gate)
}

/// `e^x` on the range that matters to `1 + e^x`, so that `1 + exp_for_den(x)` has the bits of
/// `1 + exp(x)` for every non-NaN x (NaN x gives a finite value; SwiGLU's `gate / den` is NaN
/// anyway). The clamp's lower end is -86 instead of -104: below it `1 + e^x` is 1 either way.
/// Then n is in [-124, 128] and 2^(n-1) is a normal f32, so the scaling is one exact
/// multiplication by 2^(n-1) (built from t's bits in one integer operation) and one by 2 that
/// rounds once: the value `exp` computes by its two half-steps, whose first is exact.
#[inline(always)]
fn exp_for_den(x: f32) -> f32 {
    #[allow(clippy::manual_clamp)]
    let xc = x.max(-86.0).min(89.0);
    let (y, t) = exp_reduced(xc);
    // Bits of 2^(n-1): (n - 1 + 127) << 23 = (bits(t) + 126) << 23, since bits(t) = 0x4b40_0000
    // + n and 0x4b40_0000 << 23 wraps to 0.
    let s = f32::from_bits(t.to_bits().wrapping_add(126) << 23);
    y * s * 2.0
}

/// `gate / den * up` (second half of [`swiglu`]).
#[inline(always)]
pub fn swiglu_div(gate: f32, den: f32, up: f32) -> f32 {
    gate / den * up
}

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

/// The MAGIC constant: the bits of `1.5 * 2^23`. `MAGIC + c` (integer addition) read as an f32
/// is exactly `12582912 + c` for |c| < 2^22, so subtracting 12582912 gives `c as f32` exactly.
/// The kernels pass it as the C operand of their `mma`s, so the sums come out in this form
/// and need no integer-to-float conversion (docs/h200-ceilings.md: I2F vs MAGIC).
pub const MAGIC: i32 = 0x4b40_0000;

/// `c as f32` from the MAGIC form `m = MAGIC + c` of an integer sum with |c| < 2^22, exactly.
#[inline(always)]
pub fn magic_to_f32(m: i32) -> f32 {
    f32::from_bits(m as u32) - 12_582_912.0
}

/// `c as f32` for |c| < 2^22, exactly, without an int-to-float conversion instruction: the bits
/// of `1.5 * 2^23 + c` minus `1.5 * 2^23` (both steps exact). MMQ's integer sums are below
/// 32 * 127 * 128 < 2^20.
#[inline(always)]
pub fn small_i32_to_f32(c: i32) -> f32 {
    magic_to_f32(MAGIC.wrapping_add(c))
}

/// The offset that makes [`magic_mul`] one `fma`: `-(12582912 * dA)`, exact for every weight
/// scale our formats produce (an f16 times an odd integer below 32 times a power of two: at most
/// 16 significant bits, 18 once multiplied by 12582912 = 3 * 2^22, within f32's 24). Kernels
/// compute it once per weight scale and reuse it for every column the scale meets.
#[inline(always)]
pub fn magic_offset(da: f32) -> f32 {
    -(12_582_912.0 * da)
}

/// `C * dA` rounded once, from the MAGIC form `m = MAGIC + C` in one `fma`:
/// `fma(12582912 + C, dA, -(12582912 dA))`. Both addends are exact ([`MAGIC`], [`magic_offset`]),
/// so the fma's exact value is C dA and its result has the bits of `(C as f32) * dA` - MMQ's
/// product, which costs two instructions on the MAGIC form (subtract, multiply) - except in the
/// sign of a zero: a zero product (C = 0 or dA = 0) is +0, where the plain product's sign is
/// that of C dA (and a non-finite dA gives NaN). `tests::magic_mul_is_the_rounded_product` checks every finite f16 scale of every format.
#[inline(always)]
pub fn magic_mul(m: i32, da: f32, offset: f32) -> f32 {
    fma(f32::from_bits(m as u32), da, offset)
}

/// One step of MMQ's float epilogue for the "Q8_0-style" types (Q8_0, Q2_0, IQ4_NL, IQ2_XXS,
/// IQ3_XXS, IQ3_S; docs/ggml-reference.md §5.1) on a sum in MAGIC form (`m = MAGIC + C`, as the
/// kernels' `mma`s give it): `acc = fma(C * dA, dB, acc)`, where C is the exact int32 sum of
/// one 32-value group, dA its weight scale and dB its activation scale; `C * dA` by
/// [`magic_mul`] (two float instructions per step instead of three, once the offset is shared).
#[inline(always)]
pub fn mmq_step_32_magic(acc: f32, m: i32, da: f32, db: f32) -> f32 {
    fma(magic_mul(m, da, magic_offset(da)), db, acc)
}

/// One step of MMQ's float epilogue for the "Q8_0_16" types (IQ2_XS, IQ2_S; §5.1) on sums in
/// MAGIC form: the group's two 16-value sums C0, C1 with their scales: `p1 = C1 * dA1` (by
/// [`magic_mul`]); `inner = fma(C0, dA0, p1); acc = fma(dB, inner, acc)`.
#[inline(always)]
pub fn mmq_step_16_magic(acc: f32, m0: i32, m1: i32, da0: f32, da1: f32, db: f32) -> f32 {
    let p1 = magic_mul(m1, da1, magic_offset(da1));
    let inner = fma(magic_to_f32(m0), da0, p1);
    fma(db, inner, acc)
}

/// [`mmq_step_32_magic`] on a plain int32 sum `c` (the CPU reference's form): the same
/// operations on the same values.
#[inline(always)]
pub fn mmq_step_32(acc: f32, c: i32, da: f32, db: f32) -> f32 {
    mmq_step_32_magic(acc, MAGIC.wrapping_add(c), da, db)
}

/// [`mmq_step_16_magic`] on plain int32 sums.
#[inline(always)]
pub fn mmq_step_16(acc: f32, c0: i32, c1: i32, da0: f32, da1: f32, db: f32) -> f32 {
    mmq_step_16_magic(
        acc,
        MAGIC.wrapping_add(c0),
        MAGIC.wrapping_add(c1),
        da0,
        da1,
        db,
    )
}

/// The MoE weighted sum of one output value over a token's top-k slots, in slot order:
/// `acc = e_0 * w_0`, then `acc = fma(e_s, w_s, acc)` (ggml's fused CUDA reduction,
/// docs/ggml-reference.md §8.3).
#[inline(always)]
pub fn combine_step(acc: f32, e: f32, w: f32, first: bool) -> f32 {
    if first { e * w } else { fma(e, w, acc) }
}

/// IEEE binary16 bits to f32, exactly (subnormals, infinities and NaN payloads included). On
/// the GPU: `cvt.f32.f16` (exact for finite values and infinities, subnormals kept: PTX ISA,
/// cvt), a NaN then replaced by the quiet NaN with the payload kept, as [`f16_to_f32_soft`]
/// gives on the host (`ptx::cvt_f32_f16_exact`, one asm block, so that the compiler merges two
/// conversions of one value, such as the shared scale of a block's two groups).
#[inline(always)]
pub fn f16_to_f32(h: u16) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::ptx::cvt_f32_f16_exact(h)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    f16_to_f32_soft(h)
}

/// [`f16_to_f32`] in integer operations only (the host's form).
#[inline(always)]
pub fn f16_to_f32_soft(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    if exp == 0 {
        // 0 or subnormal: man * 2^-24, exact in f32.
        let v = man as f32 * (1.0 / 16_777_216.0);
        f32::from_bits(v.to_bits() | sign)
    } else if exp == 31 {
        // inf, or NaN made quiet (as x86's F16C conversion and the `half` crate do)
        let quiet = if man != 0 { 0x0040_0000 } else { 0 };
        f32::from_bits(sign | 0x7f80_0000 | quiet | (man << 13))
    } else {
        f32::from_bits(sign | ((exp + 112) << 23) | (man << 13))
    }
}

/// f32 to IEEE binary16 bits, round to nearest even (ggml's `GGML_FP32_TO_FP16` on the CPU);
/// overflow gives +-inf, NaN stays NaN. Used by the quantizers on the host.
pub fn f32_to_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x007f_ffff;
    if exp == 0xff {
        return sign
            | 0x7c00
            | if man != 0 {
                0x200 | (man >> 13) as u16
            } else {
                0
            };
    }
    let e = exp - 127 + 15;
    if e >= 31 {
        return sign | 0x7c00;
    }
    if e <= 0 {
        // Subnormal half (or zero): shift the full significand, round to nearest even.
        if e < -10 {
            return sign;
        }
        let m = man | 0x0080_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1u32 << shift) - 1);
        let mut r = m >> shift;
        if rest > half || (rest == half && (r & 1) == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && (r & 1) == 1) {
        r += 1; // may carry into the exponent, up to inf: correct
    }
    sign | r as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_half_away_matches_roundf() {
        for &(v, want) in &[
            (0.5f32, 1),
            (-0.5, -1),
            (1.5, 2),
            (2.5, 3),
            (-2.5, -3),
            (0.499_999_97, 0),
            (126.5, 127),
            (-0.0, 0),
            (f32::NAN, 0),
        ] {
            assert_eq!(round_half_away(v), want, "{v}");
        }
        let mut s = 0x1234_5678u64;
        for _ in 0..100_000 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 300.0;
            assert_eq!(round_half_away(v), v.round() as i32, "{v}");
        }
    }

    /// The three-operation rounding equals `round_half_away` (and Rust's `round`) on |v| <= 128:
    /// every f32 within 300 ulp of each half and each integer up to 128, and a stride through
    /// all the others (the full 2.2e9 values were checked once, off line).
    #[test]
    fn round_half_away_small_matches() {
        let check = |v: f32| {
            assert_eq!(round_half_away_small(v), round_half_away(v), "{v:e}");
            assert_eq!(round_half_away_small(-v), round_half_away(-v), "{:e}", -v);
            assert_eq!(round_half_away_small(v), v.round() as i32, "{v:e}");
        };
        for k in 0..=256u32 {
            let c = (k as f32 * 0.5).to_bits();
            for b in c.saturating_sub(300)..=c + 300 {
                check(f32::from_bits(b));
            }
        }
        for b in (0..=128f32.to_bits()).step_by(997) {
            check(f32::from_bits(b));
        }
        assert_eq!(round_half_away_small(f32::NAN), 0);
        assert_eq!(round_half_away_small(-f32::NAN), 0);
    }

    /// `swiglu_den`'s shortened exponential gives the bits of `1 + exp(-g)` for every non-NaN g:
    /// dense around the clamp ends and the overflow, and a stride through all f32.
    #[test]
    fn swiglu_den_is_one_plus_exp() {
        let check = |g: f32| {
            assert_eq!(
                swiglu_den(g).to_bits(),
                (1.0 + exp(-g)).to_bits(),
                "{g:e} ({:#x})",
                g.to_bits()
            );
        };
        for c in [86.0f32, -89.0, -88.72, -88.38, 17.0, 0.0] {
            let b = c.to_bits();
            for b in b.saturating_sub(20_000)..=b + 20_000 {
                check(f32::from_bits(b));
            }
        }
        for b in (0..=u32::MAX).step_by(4099) {
            let g = f32::from_bits(b);
            if !g.is_nan() {
                check(g);
            }
        }
        assert!(swiglu(f32::NAN, 1.0).is_nan());
    }

    /// `q8_1_quant` by its two cases equals the rule written out: `round_half_away(x * d_inv)`
    /// with NaN -> 0 and saturation to +-127.
    #[test]
    fn q8_1_quant_matches_the_rule() {
        let rule = |x: f32, d_inv: f32| -> i8 {
            let v = x * d_inv;
            let v = if v.is_nan() {
                0.0
            } else {
                v.clamp(-127.0, 127.0)
            };
            round_half_away(v) as i8
        };
        let mut s = 0x9e37_79b9u64;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 32) as u32
        };
        for _ in 0..200_000 {
            let x = f32::from_bits(next());
            let amax = f32::from_bits(next() & 0x7fff_ffff).max(abs(x));
            let amax = if amax.is_nan() { 0.0 } else { amax };
            for d_inv in [q8_1_inv_scale(amax), 0.0, f32::INFINITY] {
                assert_eq!(q8_1_quant(x, d_inv), rule(x, d_inv), "{x:e} {d_inv:e}");
            }
        }
    }

    #[test]
    fn exp_within_two_ulp_of_f64() {
        let mut worst = 0u32;
        let mut x = -103.9f32;
        while x < 88.7 {
            let got = exp(x);
            let want = (x as f64).exp() as f32;
            let ulp = (got.to_bits() as i64 - want.to_bits() as i64).unsigned_abs() as u32;
            worst = worst.max(ulp);
            x += 0.000_731;
        }
        assert!(worst <= 2, "worst {worst} ulp");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(100.0), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
    }

    #[test]
    fn f16_round_trip_all_values() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            let want = half::f16::from_bits(h).to_f32();
            assert_eq!(f.to_bits(), want.to_bits(), "{h:#06x}");
            if !f.is_nan() {
                assert_eq!(f32_to_f16(f), h, "{h:#06x}");
            }
        }
        let mut s = 99u64;
        for _ in 0..200_000 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let f = f32::from_bits((s >> 32) as u32);
            let want = half::f16::from_f32(f);
            if f.is_nan() {
                assert!(f16_to_f32(f32_to_f16(f)).is_nan());
            } else {
                assert_eq!(f32_to_f16(f), want.to_bits(), "{f:e}");
            }
        }
    }

    #[test]
    fn magic_steps_equal_the_plain_steps() {
        // Every sum a 32-value int8 group can give (|c| <= 32 * 128 * 128 < 2^19), against
        // random scales: the MAGIC form gives the same bits as the conversion.
        let mut s = 5u64;
        for c in -(1 << 19)..(1 << 19) {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let (da, db, acc) = (
                f32::from_bits(0x3000_0000 | (s >> 40) as u32),
                f32::from_bits(0x3800_0000 | (s >> 16) as u32 & 0x00ff_ffff),
                (s as u32 as i32) as f32 * 1e-6,
            );
            let m = MAGIC.wrapping_add(c);
            assert_eq!(magic_to_f32(m), c as f32);
            assert_eq!(
                mmq_step_32_magic(acc, m, da, db).to_bits(),
                mmq_step_32(acc, c, da, db).to_bits()
            );
            assert_eq!(
                mmq_step_16_magic(acc, m, MAGIC - c, da, db, acc).to_bits(),
                mmq_step_16(acc, c, -c, da, db, acc).to_bits()
            );
        }
    }

    #[test]
    fn small_int_conversion_is_exact() {
        for c in (-(1 << 22) + 1..(1 << 22))
            .step_by(7)
            .chain([-1, 0, 1, 516_128, -516_128])
        {
            assert_eq!(small_i32_to_f32(c), c as f32, "{c}");
        }
    }

    #[test]
    fn q8_1_group_rules() {
        // all zero: d = 0, q = 0
        let (d, q) = quantize_group_q8_1(&[0.0; 32]);
        assert_eq!(d.to_bits(), 0);
        assert_eq!(q, [0; 32]);
        // one huge value dominates, the rest round to 0
        let mut x = [1.0f32; 32];
        x[5] = 3.0e38;
        let (d, q) = quantize_group_q8_1(&x);
        assert_eq!(q[5], 127);
        assert_eq!(q[0], 0);
        assert_eq!(d, 1.0 / (127.0 / 3.0e38));
        // NaN is skipped by amax and quantizes to 0
        let mut x = [0.5f32; 32];
        x[0] = f32::NAN;
        x[1] = -1.0;
        let (_, q) = quantize_group_q8_1(&x);
        assert_eq!((q[0], q[1], q[2]), (0, -127, 64));
    }

    /// `magic_mul` against `(C as f32) * dA` for every finite f16 `d` (both signs, subnormals)
    /// times every multiplier the formats' scales use (odd integers below 32 times 1, 1/4, 1/8),
    /// at sums from both ends of MMQ's range: bit-equal, but for a zero product (+0 always).
    #[test]
    fn magic_mul_is_the_rounded_product() {
        let sums = [
            1,
            -1,
            2,
            3,
            -7,
            127,
            -4064,
            65_535,
            520_191,
            -520_192,
            (1 << 21) - 1,
        ];
        let mut checked = 0u64;
        for h in 0..=u16::MAX {
            let d = f16_to_f32_soft(h);
            if !d.is_finite() {
                continue;
            }
            for odd in (1..32).step_by(2) {
                for pow in [1.0f32, 0.25, 0.125] {
                    let da = d * odd as f32 * pow;
                    let off = magic_offset(da);
                    assert_eq!(off, -(12_582_912.0f64 * da as f64) as f32, "offset exact");
                    for c in sums {
                        let got = magic_mul(MAGIC.wrapping_add(c), da, off);
                        let want = c as f32 * da;
                        // A zero product (dA = 0) comes out +0, whatever the signs.
                        let want = if want == 0.0 { 0.0 } else { want };
                        assert_eq!(got.to_bits(), want.to_bits(), "c {c} da {da:e}");
                        checked += 1;
                    }
                    assert_eq!(magic_mul(MAGIC, da, off).to_bits(), 0, "C = 0 gives +0");
                }
            }
        }
        assert!(checked > 60_000 * 48 * sums.len() as u64);
    }
}

#[cfg(test)]
mod accuracy {
    use super::*;

    /// Our SwiGLU against SwiGLU in f64, x and g ~ N(0, 4^2) (the distribution of
    /// docs/ggml-reference.md §8.3's measurement of ggml's fast-math form): the ulp histogram is
    /// printed for README, and the error is bounded.
    #[test]
    fn swiglu_within_a_few_ulp_of_f64() {
        let mut s = 0x5eedu64;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut hist = [0usize; 5];
        let n = 1 << 20;
        for _ in 0..n {
            let (u1, u2, u3, u4) = (1.0 - next(), next(), 1.0 - next(), next());
            let g = (4.0 * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32;
            let u = (4.0 * (-2.0 * u3.ln()).sqrt() * (std::f64::consts::TAU * u4).cos()) as f32;
            let want = (g as f64 / (1.0 + (-(g as f64)).exp()) * u as f64) as f32;
            let got = swiglu(g, u);
            let ulp = (got.to_bits() as i64 - want.to_bits() as i64).unsigned_abs() as usize;
            hist[ulp.min(4)] += 1;
        }
        std::eprintln!(
            "swiglu vs f64 (correctly rounded): {:.1} % identical, {:.1} % 1 ulp, {:.1} % 2 ulp, {:.2} % 3 ulp, {:.3} % >= 4",
            100.0 * hist[0] as f64 / n as f64,
            100.0 * hist[1] as f64 / n as f64,
            100.0 * hist[2] as f64 / n as f64,
            100.0 * hist[3] as f64 / n as f64,
            100.0 * hist[4] as f64 / n as f64
        );
        assert_eq!(hist[4], 0, "an error of 4 ulp or more");
    }
}
