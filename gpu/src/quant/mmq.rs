//! MMQ's float epilogue: one scale step per 32 (or 16) K values, on integer sums in MAGIC form.

use super::fma;

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

/// [`mmq_step_16_magic`] with the first half's sum as a plain int32 (`c0`, from an `mma` with a
/// zero C operand) converted by `cvt.rn.f32.s32` (`I2FP` on sm_90) instead of the MAGIC
/// subtraction: the same value (exact for |c0| < 2^24), so the same bytes, at the same
/// instruction count, with a quarter of the step's instructions off the FP32 pipe (the second
/// half keeps [`magic_mul`]'s one `fma`). The pipelined MMQ kernels' form: measured on an H100
/// (BENCHMARKS.md, forty-fifth session), the IQ2_S / IQ4_NL layer 0.3-1.4 % faster at
/// T = 512-16,384 and IQ2_XS / Q2_0 0.6 %, their K steps' FP32 instructions 531 -> 403.
#[inline(always)]
pub fn mmq_step_16_cvt(acc: f32, c0: i32, m1: i32, da0: f32, da1: f32, db: f32) -> f32 {
    let p1 = magic_mul(m1, da1, magic_offset(da1));
    let inner = fma(c0 as f32, da0, p1);
    fma(db, inner, acc)
}

/// One step of the Q2_0 shared-d numerics (an opt-in variant, `Numerics::Q2_0SharedD` on the
/// host; not ggml's): a Q2_0 block's two 32-value groups share its scale `d`, so the step of a
/// 64-value block is `d (C0 dB0 + C1 dB1)` in the order `p1 = C1 * dB1` (rounded);
/// `inner = fma(C0, dB0, p1); acc = fma(d, inner, acc)` - [`mmq_step_16_magic`]'s form with the
/// scales' roles swapped. The sums come in MAGIC form; the activation scales dB are full f32
/// values, so the conversions stay (`magic_to_f32`): 5 float instructions per 64 values, where
/// the default takes 4 (two [`mmq_step_32_magic`]s); what it saves is a weight-scale load and
/// a step per block. Its bytes differ from the default's: a layer computed with it is compared
/// with the reference computed with it.
#[inline(always)]
pub fn q2_0_shared_d_step_magic(acc: f32, m0: i32, m1: i32, db0: f32, db1: f32, d: f32) -> f32 {
    let p1 = magic_to_f32(m1) * db1;
    let inner = fma(magic_to_f32(m0), db0, p1);
    fma(d, inner, acc)
}

/// [`q2_0_shared_d_step_magic`] on plain int32 sums (the CPU reference's form).
#[inline(always)]
pub fn q2_0_shared_d_step(acc: f32, c0: i32, c1: i32, db0: f32, db1: f32, d: f32) -> f32 {
    q2_0_shared_d_step_magic(
        acc,
        MAGIC.wrapping_add(c0),
        MAGIC.wrapping_add(c1),
        db0,
        db1,
        d,
    )
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

/// The GPU probe `probe_f16_scale_step`'s inputs for weight-scale pattern `h` (the host's check,
/// tests/tests/probe.rs, computes them with this same function): two integer sums (|c| < 2^19,
/// as a 32-value group's may be), an activation scale and an accumulator.
#[inline(always)]
pub fn scale_probe_inputs(h: u32) -> (i32, i32, f32, f32) {
    let x = h.wrapping_mul(0x9e37_79b9) ^ (h >> 7);
    let c0 = (x & 0x7_ffff) as i32 - 0x4_0000;
    let c1 = ((x >> 13) & 0x7_ffff) as i32 - 0x4_0000;
    let db = f32::from_bits(0x3a00_0000 | (x & 0x007f_ffff)); // about 2^-11 .. 2^-10
    let acc = f32::from_bits(0x4000_0000 | ((x >> 3) & 0x007f_ffff)) - 3.0;
    (c0, c1, db, acc)
}
