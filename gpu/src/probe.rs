//! Probe kernels: tiny kernels that check one mechanism on the GPU (an asm wrapper, the ABI of a
//! parameter struct) or emulate ggml's fast-math arithmetic for the README's comparison figures.
//! Driven by tests/tests/probe.rs.

use crate::layout::SwigluQuantParams;
use crate::ptx::{ctaid_x, max_ftz, mul_ftz, rcp_approx_ftz, tid_x};
use crate::quant::round_half_away;

/// Writes its parameter struct back to `out`, so the host can see that field order and padding
/// are the same on both sides. One thread.
///
/// # Safety
/// `out` must point to one writable `SwigluQuantParams`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_params_echo(
    p: SwigluQuantParams,
    out: *mut SwigluQuantParams,
) {
    // SAFETY: the caller provides room for one struct.
    unsafe { out.write(p) };
}

/// ggml's `quantize_mmq_q8_1` D4 arithmetic under `-use_fast_math` (docs/ggml-reference.md §3.3):
/// `d_inv = 127 * rcp.approx(amax)`, `q = roundf(x * d_inv)`, `d = rcp.approx(d_inv)`, all FTZ.
/// One thread per 32-value group; writes the group's d and 32 int8.
///
/// # Safety
/// `x` holds `n_groups * 32` f32, `d` `n_groups` f32, `q` `n_groups * 32` i8.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_ggml_q8_1(
    x: *const f32,
    n_groups: u32,
    d: *mut f32,
    q: *mut i8,
) {
    let g = ctaid_x() * 128 + tid_x();
    if g >= n_groups {
        return;
    }
    // SAFETY: g < n_groups; the buffers hold n_groups groups.
    unsafe {
        let x = x.add(32 * g as usize);
        let mut amax = 0.0f32;
        for k in 0..32 {
            amax = max_ftz(amax, crate::quant::abs(*x.add(k)));
        }
        let d_inv = mul_ftz(127.0, rcp_approx_ftz(amax));
        for k in 0..32 {
            let v = mul_ftz(*x.add(k), d_inv);
            let r = if v > 127.0 {
                127.0
            } else if v < -127.0 {
                -127.0
            } else {
                v
            };
            *q.add(32 * g as usize + k) = round_half_away(r) as i8;
        }
        *d.add(g as usize) = rcp_approx_ftz(d_inv);
    }
}

/// The read-only bandwidth ceiling: every thread reads 16-byte chunks `i, i + stride, ...` of
/// `src` (`n16` chunks) with `ld.global.nc.v4` and folds them by XOR; a thread writes its fold
/// only when it equals `never` (the host passes a value the data cannot give), so the loads
/// cannot be optimised away and nothing is written. The weight-read floor's rate.
///
/// # Safety
/// `src` holds `n16` 16-byte aligned chunks; `out` one writable u32.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_read_bandwidth(
    src: *const u32,
    n16: u64,
    never: u32,
    out: *mut u32,
) {
    let stride = crate::ptx::ntid_x() as u64 * crate::ptx::nctaid_x() as u64;
    let mut i = ctaid_x() as u64 * crate::ptx::ntid_x() as u64 + tid_x() as u64;
    let mut acc = 0u32;
    while i < n16 {
        // SAFETY: chunk i < n16 is inside src.
        let v = unsafe { crate::ptx::ld_nc_v4_u32(src.add(4 * i as usize)) };
        acc ^= v[0] ^ v[1] ^ v[2] ^ v[3];
        i += stride;
    }
    if acc == never {
        // SAFETY: one u32 (never reached for the host's data).
        unsafe { out.write(acc) };
    }
}

/// `quant::f16_to_f32` on the GPU (the `cvt.f32.f16` path for finite values) for every one of
/// the 65,536 binary16 patterns: `out[h]` is the f32 bits of pattern h. The host compares them
/// with its integer-only conversion.
///
/// # Safety
/// `out` holds 65,536 u32; launched with 65,536 threads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_f16_to_f32(out: *mut u32) {
    let h = ctaid_x() * crate::ptx::ntid_x() + tid_x();
    if h < 65_536 {
        // SAFETY: h < 65,536.
        unsafe {
            out.add(h as usize)
                .write(crate::quant::f16_to_f32(h as u16).to_bits())
        };
    }
}

/// MMQ's scale steps on a weight scale read by `quant::f16_scale_to_f32` (the decoders' plain
/// `cvt.f32.f16`) and by `quant::f16_to_f32` (NaN payload kept), for every binary16 pattern h
/// as the weight scale: `out[4 h ..]` holds the bits of `mmq_step_32_magic` with the plain and
/// with the exact scale, then those of `mmq_step_16_magic` (the pattern as its second scale).
/// The integer sums, activation scale and accumulator vary with h. The host checks that each
/// pair is equal: the plain conversion changes no result, NaN scales included.
///
/// # Safety
/// `out` holds 4 x 65,536 u32; launched with 65,536 threads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_f16_scale_step(out: *mut u32) {
    use crate::quant::{MAGIC, f16_scale_to_f32, f16_to_f32, mmq_step_16_magic, mmq_step_32_magic};
    let h = ctaid_x() * crate::ptx::ntid_x() + tid_x();
    if h < 65_536 {
        let (c0, c1, db, acc) = crate::quant::scale_probe_inputs(h);
        let m0 = MAGIC.wrapping_add(c0);
        let m1 = MAGIC.wrapping_add(c1);
        let (plain, exact) = (f16_scale_to_f32(h as u16), f16_to_f32(h as u16));
        let other = f16_to_f32(0x3c00 ^ (h as u16 & 0x03ff)); // a finite first scale
        let r = [
            mmq_step_32_magic(acc, m0, plain, db),
            mmq_step_32_magic(acc, m0, exact, db),
            mmq_step_16_magic(acc, m0, m1, other, plain, db),
            mmq_step_16_magic(acc, m0, m1, other, exact, db),
        ];
        for (i, v) in r.iter().enumerate() {
            // SAFETY: 4 h + i < 4 x 65,536.
            unsafe { out.add(4 * h as usize + i).write(v.to_bits()) };
        }
    }
}
