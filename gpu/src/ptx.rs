//! The only file with inline PTX. One instruction (or one fixed sequence) per function; each
//! names its PTX instruction (PTX ISA 8.x section in brackets).

use core::arch::asm;

/// `%tid.x` [10.13 special registers].
#[inline(always)]
pub fn tid_x() -> u32 {
    // SAFETY: reads a special register.
    unsafe { core::arch::nvptx::_thread_idx_x() as u32 }
}

/// `%ctaid.x`.
#[inline(always)]
pub fn ctaid_x() -> u32 {
    // SAFETY: reads a special register.
    unsafe { core::arch::nvptx::_block_idx_x() as u32 }
}

/// `%ctaid.y`.
#[inline(always)]
pub fn ctaid_y() -> u32 {
    // SAFETY: reads a special register.
    unsafe { core::arch::nvptx::_block_idx_y() as u32 }
}

/// `%nctaid.x`.
#[inline(always)]
pub fn nctaid_x() -> u32 {
    // SAFETY: reads a special register.
    unsafe { core::arch::nvptx::_grid_dim_x() as u32 }
}

/// `bar.sync 0` [9.7.13.4]: block-wide barrier.
#[inline(always)]
pub fn sync_threads() {
    // SAFETY: a barrier; every thread of the block reaches the call sites that use it.
    unsafe { core::arch::nvptx::_syncthreads() }
}

/// `shfl.sync.bfly.b32 d, v, lane_mask, 0x1f, 0xffffffff` [9.7.9.6]: the value of lane
/// `lane ^ lane_mask`. All 32 lanes must take part.
#[inline(always)]
pub fn shfl_xor_f32(v: f32, lane_mask: u32) -> f32 {
    let r: f32;
    // SAFETY: register-only warp shuffle; callers call it from converged, full warps.
    unsafe {
        asm!(
            "shfl.sync.bfly.b32 {r}, {v}, {m}, 0x1f, 0xffffffff;",
            r = out(reg32) r,
            v = in(reg32) v,
            m = in(reg32) lane_mask,
            options(pure, nomem, nostack)
        );
    }
    r
}

/// `ld.global.nc.v4.f32` [9.7.9.8]: 16 bytes through the read-only path.
///
/// # Safety
/// `p` must be a 16-byte aligned global address of 4 readable f32 not written during the kernel.
#[inline(always)]
pub unsafe fn ld_nc_v4_f32(p: *const f32) -> [f32; 4] {
    let (a, b, c, d): (f32, f32, f32, f32);
    // SAFETY: the caller guarantees alignment and validity.
    unsafe {
        asm!(
            "ld.global.nc.v4.f32 {{{a}, {b}, {c}, {d}}}, [{p}];",
            a = out(reg32) a,
            b = out(reg32) b,
            c = out(reg32) c,
            d = out(reg32) d,
            p = in(reg64) p,
            options(pure, readonly, nostack)
        );
    }
    [a, b, c, d]
}

/// `st.global.b32` [9.7.9.9].
///
/// # Safety
/// `p` must be a 4-byte aligned global address this thread may write.
#[inline(always)]
pub unsafe fn st_u32(p: *mut u32, v: u32) {
    // SAFETY: the caller guarantees alignment and validity.
    unsafe {
        asm!("st.global.b32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack));
    }
}

/// `st.global.f32` [9.7.9.9].
///
/// # Safety
/// `p` must be a 4-byte aligned global address this thread may write.
#[inline(always)]
pub unsafe fn st_f32(p: *mut f32, v: f32) {
    // SAFETY: the caller guarantees alignment and validity.
    unsafe {
        asm!("st.global.f32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack));
    }
}

/// `st.global.v4.f32` [9.7.9.9].
///
/// # Safety
/// `p` must be a 16-byte aligned global address this thread may write.
#[inline(always)]
pub unsafe fn st_v4_f32(p: *mut f32, v: [f32; 4]) {
    // SAFETY: the caller guarantees alignment and validity.
    unsafe {
        asm!(
            "st.global.v4.f32 [{p}], {{{a}, {b}, {c}, {d}}};",
            p = in(reg64) p,
            a = in(reg32) v[0],
            b = in(reg32) v[1],
            c = in(reg32) v[2],
            d = in(reg32) v[3],
            options(nostack)
        );
    }
}

/// `rcp.approx.ftz.f32` [9.7.3.13]: the hardware reciprocal ggml's fast-math build uses for
/// `1/x` (MUFU.RCP). Only the ggml-emulation probes use it; our own numerics never do.
#[inline(always)]
pub fn rcp_approx_ftz(x: f32) -> f32 {
    let r: f32;
    // SAFETY: register-only arithmetic.
    unsafe {
        asm!("rcp.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x,
             options(pure, nomem, nostack));
    }
    r
}

/// `mul.ftz.f32` [9.7.3.5]: rounded multiply with subnormal inputs and results flushed to zero,
/// as ggml's fast-math build multiplies. Only the ggml-emulation probes use it.
#[inline(always)]
pub fn mul_ftz(a: f32, b: f32) -> f32 {
    let r: f32;
    // SAFETY: register-only arithmetic.
    unsafe {
        asm!("mul.rn.ftz.f32 {r}, {a}, {b};", r = out(reg32) r, a = in(reg32) a, b = in(reg32) b,
             options(pure, nomem, nostack));
    }
    r
}

/// `max.ftz.f32` [9.7.3.11]: ggml's `fmaxf` under fast math (NaN operands ignored, subnormals
/// flushed). Only the ggml-emulation probes use it.
#[inline(always)]
pub fn max_ftz(a: f32, b: f32) -> f32 {
    let r: f32;
    // SAFETY: register-only arithmetic.
    unsafe {
        asm!("max.ftz.f32 {r}, {a}, {b};", r = out(reg32) r, a = in(reg32) a, b = in(reg32) b,
             options(pure, nomem, nostack));
    }
    r
}
