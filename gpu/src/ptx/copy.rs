//! Asynchronous global -> shared copies (`cp.async`, sm_80+, with a plain-copy form for sm_75),
//! the generic address of a shared location, and byte stores to shared memory.

use core::arch::asm;

/// `cp.async.cg.shared.global [dst], [src], 16` [9.7.9.25.3]: a 16-byte copy that bypasses L1
/// and completes in the background (sm_80+). On sm_75 the same 16 bytes are loaded and stored
/// at once (the barriers around the copies stay; only the overlap is lost).
///
/// # Safety
/// `dst` must be a 16-byte aligned shared address inside the dynamic shared memory, `src` a
/// 16-byte aligned global address of 16 readable bytes not written during the kernel.
#[inline(always)]
pub unsafe fn cp_async_16(dst: u32, src: u64) {
    #[cfg(gpu_sm80)]
    // SAFETY: the caller guarantees both addresses.
    unsafe {
        asm!("cp.async.cg.shared.global [{d}], [{s}], 16;", d = in(reg32) dst, s = in(reg64) src,
             options(nostack));
    }
    #[cfg(not(gpu_sm80))]
    // SAFETY: as above.
    unsafe {
        let v = super::ld_nc_v4_u32(src as *const u32);
        super::st_shared_v4(dst, v);
    }
}

/// `prefetch.global.L2 [addr]` (PTX ISA: "prefetch, prefetchu"): brings the cache line holding
/// `addr` into the L2. A hint: nothing waits for it, and no result depends on it.
///
/// # Safety
/// `addr` must be a global address inside an allocation.
#[inline(always)]
pub unsafe fn prefetch_l2(addr: u64) {
    // SAFETY: the caller guarantees the address; a prefetch writes nothing.
    unsafe { asm!("prefetch.global.L2 [{a}];", a = in(reg64) addr, options(nostack, readonly)) }
}

/// [`cp_async_16`] with the L2 cache policy `policy` (`.L2::cache_hint`; sm_90 modules:
/// `ptx::l2_evict_first`, `ptx::l2_evict_normal`).
///
/// # Safety
/// As [`cp_async_16`]; `policy` made by `createpolicy`.
#[cfg(gpu_sm90)]
#[inline(always)]
pub unsafe fn cp_async_16_hint(dst: u32, src: u64, policy: u64) {
    // SAFETY: the caller guarantees both addresses.
    unsafe {
        asm!("cp.async.cg.shared.global.L2::cache_hint [{d}], [{s}], 16, {p};", d = in(reg32) dst,
             s = in(reg64) src, p = in(reg64) policy, options(nostack));
    }
}

/// `cp.async.commit_group` [9.7.9.25.4]: closes the group of this thread's copies issued since
/// the last commit (an empty group is allowed). Nothing on sm_75.
#[inline(always)]
pub fn cp_async_commit() {
    #[cfg(gpu_sm80)]
    // SAFETY: no operands.
    unsafe {
        asm!("cp.async.commit_group;", options(nostack))
    };
}

/// `cp.async.wait_group N` [9.7.9.25.5] for a run-time `n` (0..=7, larger waits for all): waits
/// until at most `n` of this thread's committed groups are pending. The copies are visible to
/// other threads only after a barrier. Nothing on sm_75.
#[inline(always)]
pub fn cp_async_wait(n: u32) {
    #[cfg(gpu_sm80)]
    // SAFETY: waits only; each immediate is a constant.
    unsafe {
        match n {
            0 => asm!("cp.async.wait_group 0;", options(nostack)),
            1 => asm!("cp.async.wait_group 1;", options(nostack)),
            2 => asm!("cp.async.wait_group 2;", options(nostack)),
            3 => asm!("cp.async.wait_group 3;", options(nostack)),
            4 => asm!("cp.async.wait_group 4;", options(nostack)),
            5 => asm!("cp.async.wait_group 5;", options(nostack)),
            6 => asm!("cp.async.wait_group 6;", options(nostack)),
            7 => asm!("cp.async.wait_group 7;", options(nostack)),
            _ => asm!("cp.async.wait_all;", options(nostack)),
        }
    }
    #[cfg(not(gpu_sm80))]
    let _ = n;
}

/// `cvta.shared.u64` [9.7.9.18]: the generic address of shared address `addr`, so that Rust
/// references (the format decoders') can read shared memory.
#[inline(always)]
pub fn shared_generic(addr: u32) -> u64 {
    let r: u64;
    // SAFETY: address arithmetic only.
    unsafe {
        asm!("cvta.shared.u64 {r}, {a};", r = out(reg64) r, a = in(reg64) addr as u64,
             options(pure, nomem, nostack));
    }
    r
}

/// `st.shared.b8`.
///
/// # Safety
/// `addr` must be a shared address inside the dynamic shared memory.
#[inline(always)]
pub unsafe fn st_shared_u8(addr: u32, v: u32) {
    // SAFETY: the caller guarantees the address.
    unsafe {
        asm!("st.shared.b8 [{a}], {v};", a = in(reg32) addr, v = in(reg16) v as u16, options(nostack))
    };
}
