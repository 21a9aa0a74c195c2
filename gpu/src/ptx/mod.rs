//! The only module with inline PTX (this file, `shared.rs`, `warp.rs`, `mma.rs`, `copy.rs` and
//! `bulk.rs`). One instruction (or one fixed sequence) per function; each names its PTX
//! instruction (PTX ISA 8.x section in brackets).
//!
//! Under cfg `gpu_ws_only` (the sm_60 module, compiled as sm_70: builder/src/lib.rs) the
//! wrappers of instructions newer than sm_60 - `mma.rs` (`ldmatrix`, `mma`) and `copy.rs`
//! (`cp.async`) - do not exist, so a kernel of that module cannot use them.

use core::arch::asm;

#[cfg(not(gpu_ws_only))]
mod copy;
#[cfg(not(gpu_ws_only))]
pub use copy::*;
#[cfg(not(gpu_ws_only))]
mod mma;
#[cfg(not(gpu_ws_only))]
pub use mma::*;
mod shared;
pub use shared::*;
mod warp;
pub use warp::*;
#[cfg(gpu_sm90)]
mod bulk;
#[cfg(gpu_sm90)]
pub use bulk::*;

/// `griddepcontrol.launch_dependents; griddepcontrol.wait;` [9.7.13.x, sm_90]: at a kernel's
/// entry, lets the stream's next kernel be scheduled once every CTA of this one has started,
/// then waits until the kernel this one follows has completed and its writes are visible. A
/// kernel launched with the programmatic-serialization attribute (host: `Gpu::launch`) so
/// has its CTAs scheduled during its predecessor's last wave; launched without it, both
/// instructions do nothing. Compiled to nothing below sm_90. A memory clobber: no load or
/// store of the kernel moves above it.
#[inline(always)]
pub fn grid_dependency_sync() {
    #[cfg(gpu_sm90)]
    // SAFETY: no operands; ordering only.
    unsafe {
        asm!(
            "griddepcontrol.launch_dependents;",
            "griddepcontrol.wait;",
            options(nostack)
        );
    }
}

/// `%tid.x` [10.13 special registers].
#[inline(always)]
pub fn tid_x() -> u32 {
    // SAFETY: reads a special register.
    unsafe { core::arch::nvptx::_thread_idx_x() as u32 }
}

/// `%ntid.x`: threads per block along x.
#[inline(always)]
pub fn ntid_x() -> u32 {
    // SAFETY: reads a special register.
    unsafe { core::arch::nvptx::_block_dim_x() as u32 }
}

/// `%nctaid.x`: blocks in the grid along x.
#[inline(always)]
pub fn nctaid_x() -> u32 {
    // SAFETY: reads a special register.
    unsafe { core::arch::nvptx::_grid_dim_x() as u32 }
}

/// `%nctaid.y`: blocks in the grid along y.
#[inline(always)]
pub fn nctaid_y() -> u32 {
    // SAFETY: reads a special register.
    unsafe { core::arch::nvptx::_grid_dim_y() as u32 }
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

/// `mov.u64 d, %globaltimer` (special registers): the GPU's nanosecond timer.
#[inline(always)]
pub fn globaltimer() -> u64 {
    let t: u64;
    // SAFETY: reads a special register; no memory access.
    unsafe {
        core::arch::asm!("mov.u64 {t}, %globaltimer;", t = out(reg64) t, options(nomem, nostack))
    };
    t
}

/// `bar.sync 0` [9.7.13.4]: block-wide barrier.
#[inline(always)]
pub fn sync_threads() {
    // SAFETY: a barrier; every thread of the block reaches the call sites that use it.
    unsafe { core::arch::nvptx::_syncthreads() }
}

/// `bar.sync ID, THREADS` [9.7.13.4]: named barrier `ID` (1 to 15; 0 is [`sync_threads`]'s)
/// for `THREADS` threads (a multiple of 32), whole warps; they see each other's shared-memory
/// writes.
///
/// # Safety
/// Exactly `THREADS` threads of the CTA, whole warps, reach it in each use, and no other
/// barrier of the CTA uses `ID` meanwhile.
#[inline(always)]
pub unsafe fn sync_named<const ID: u32, const THREADS: u32>() {
    const { assert!(ID >= 1 && ID < 16 && THREADS % 32 == 0) };
    // SAFETY: the caller's contract.
    unsafe { asm!("bar.sync {i}, {n};", i = const ID, n = const THREADS, options(nostack)) };
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

/// `st.global.v4.b32` [9.7.9.9].
///
/// # Safety
/// `p` must be a 16-byte aligned global address this thread may write.
#[inline(always)]
pub unsafe fn st_v4_u32(p: *mut u32, v: [u32; 4]) {
    // SAFETY: the caller guarantees alignment and validity.
    unsafe {
        asm!(
            "st.global.v4.b32 [{p}], {{{a}, {b}, {c}, {d}}};",
            p = in(reg64) p,
            a = in(reg32) v[0],
            b = in(reg32) v[1],
            c = in(reg32) v[2],
            d = in(reg32) v[3],
            options(nostack)
        );
    }
}

/// `st.global.v2.b32` [9.7.9.9].
///
/// # Safety
/// `p` must be an 8-byte aligned global address this thread may write.
#[inline(always)]
pub unsafe fn st_v2_u32(p: *mut u32, v: [u32; 2]) {
    // SAFETY: the caller guarantees alignment and validity.
    unsafe {
        asm!(
            "st.global.v2.b32 [{p}], {{{a}, {b}}};",
            p = in(reg64) p,
            a = in(reg32) v[0],
            b = in(reg32) v[1],
            options(nostack)
        );
    }
}

/// `st.global.v4.f32` [9.7.9.9] (as [`st_v4_u32`] on the values' bits).
///
/// # Safety
/// `p` must be a 16-byte aligned global address this thread may write.
#[inline(always)]
pub unsafe fn st_v4_f32(p: *mut f32, v: [f32; 4]) {
    // SAFETY: forwarded contract.
    unsafe { st_v4_u32(p as *mut u32, v.map(f32::to_bits)) }
}

/// `prmt.b32 d, a, b, sel`: byte i of d is byte `sel >> 4i & 7` of the 8 bytes `b:a` (a
/// first).
#[inline(always)]
pub fn prmt(a: u32, b: u32, sel: u32) -> u32 {
    let r: u32;
    // SAFETY: register-only byte permute.
    unsafe {
        asm!("prmt.b32 {r}, {a}, {b}, {s};", r = out(reg32) r, a = in(reg32) a, b = in(reg32) b,
             s = in(reg32) sel, options(pure, nomem, nostack));
    }
    r
}

/// `cvt.f32.f16` (PTX ISA, cvt): binary16 bits to f32, exact (subnormals are kept: no
/// `.ftz`).
#[inline(always)]
pub fn cvt_f32_f16(h: u16) -> f32 {
    let r: f32;
    // SAFETY: register-only conversion.
    unsafe {
        asm!("cvt.f32.f16 {r}, {h};", r = out(reg32) r, h = in(reg16) h,
             options(pure, nomem, nostack));
    }
    r
}

/// `cvt.f32.f16`, then a NaN input replaced by the quiet NaN with its payload kept (sign,
/// `0x7fc00000`, the 10 payload bits shifted up by 13: `quant::f16_to_f32_soft`'s bits; the
/// PTX ISA leaves a converted NaN's payload unspecified). One `pure` asm block, so two
/// conversions of one value are merged.
#[inline(always)]
pub fn cvt_f32_f16_exact(h: u16) -> f32 {
    let r: f32;
    // SAFETY: register-only conversion and bit operations.
    unsafe {
        asm!("{{",
             ".reg .pred %p;",
             ".reg .b32 %t, %n;",
             "cvt.f32.f16 {r}, {h};",
             "and.b32 %t, {w}, 32767;",
             "setp.gt.u32 %p, %t, 31744;",
             "and.b32 %n, {w}, 1023;",
             "shl.b32 %n, %n, 13;",
             "and.b32 %t, {w}, 32768;",
             "shl.b32 %t, %t, 16;",
             "or.b32 %n, %n, %t;",
             "or.b32 %n, %n, 2143289344;",
             "selp.b32 {r}, %n, {r}, %p;",
             "}}",
             r = out(reg32) r, h = in(reg16) h, w = in(reg32) h as u32,
             options(pure, nomem, nostack));
    }
    r
}

/// `cvt.rzi.s32.f32` (PTX ISA, cvt): f32 to i32 toward zero, NaN -> 0, saturating (Rust's `as i32`).
#[inline(always)]
pub fn cvt_rzi_s32_f32(v: f32) -> i32 {
    let r: i32;
    // SAFETY: register-only conversion.
    unsafe {
        asm!("cvt.rzi.s32.f32 {r}, {v};", r = out(reg32) r, v = in(reg32) v,
             options(pure, nomem, nostack));
    }
    r
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

// The dynamic shared memory, 128-byte aligned: the tensor copies' destinations
// (`tma_load_3d`) need 128 bytes. No kernel has static shared memory, so it starts at 0.
core::arch::global_asm!(".extern .shared .align 128 .b8 SMEM[];");

/// The 32-bit shared-window address of the dynamic shared memory array `SMEM` [5.1.5].
#[inline(always)]
pub fn smem_base() -> u32 {
    let r: u32;
    // SAFETY: reads a symbol address.
    unsafe { asm!("mov.u32 {r}, SMEM;", r = out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// `mad.wide.s32` [9.7.1.4]: `a * b + c` with a 64-bit product and sum (exact).
#[inline(always)]
pub fn mad_wide_s32(a: i32, b: i32, c: i64) -> i64 {
    let r: i64;
    // SAFETY: register-only integer arithmetic.
    unsafe {
        asm!("mad.wide.s32 {r}, {a}, {b}, {c};", r = out(reg64) r, a = in(reg32) a,
             b = in(reg32) b, c = in(reg64) c, options(pure, nomem, nostack));
    }
    r
}

/// `ld.global.nc.v4.b32`: 16 bytes through the read-only path.
///
/// # Safety
/// `p` must be a 16-byte aligned global address of 16 readable bytes not written during the
/// kernel.
#[inline(always)]
pub unsafe fn ld_nc_v4_u32(p: *const u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller guarantees alignment and validity.
    unsafe {
        asm!("ld.global.nc.v4.b32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b,
             c = out(reg32) c, d = out(reg32) d, p = in(reg64) p, options(pure, readonly, nostack));
    }
    [a, b, c, d]
}
