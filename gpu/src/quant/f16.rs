//! IEEE binary16 <-> f32 conversions, exact where they can be.

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

/// A weight block's f16 scale as f32, for scales that only feed f32 arithmetic (every
/// decoder's `d`, `formats::d_of`). On the GPU one `cvt.f32.f16`: the same bits as
/// [`f16_to_f32`] for every pattern but NaN, whose payload PTX leaves unspecified. Nothing
/// observes that payload: a scale only enters `fma` / `mul`, and PTX's f32 arithmetic returns
/// the canonical NaN from any NaN operand (`probe_f16_scale_step`, tests/tests/probe.rs, checks
/// MMQ's scale step on all 65,536 patterns against [`f16_to_f32`]'s). It saves the NaN
/// fix-up's seven instructions per scale, which the narrow MMQ kernel repeated on every lane
/// of a row for every block. On the host: [`f16_to_f32_soft`].
#[inline(always)]
pub fn f16_scale_to_f32(h: u16) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::ptx::cvt_f32_f16(h)
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
