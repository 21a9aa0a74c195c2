//! `e^x` and SwiGLU in exact IEEE arithmetic, the same bits on both sides.

use super::fma;

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
