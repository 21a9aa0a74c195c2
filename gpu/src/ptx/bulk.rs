//! Bulk copies completing on transaction barriers (sm_90, PTX ISA 8.0; cfg `gpu_sm90`): one
//! thread's `cp.async.bulk` moves a contiguous run of 16-byte pieces from global to shared
//! memory and counts its bytes down on an `mbarrier` whose phase completes once every expected
//! thread has arrived and every expected byte has landed.

use core::arch::asm;

/// `mbarrier.init.shared::cta.b64 [bar], count` [9.7.13.15.9]: a barrier whose phases complete
/// after `count` arrivals (and their expected bytes).
///
/// # Safety
/// `bar` must be an 8-byte aligned shared address no thread uses as a barrier yet.
#[inline(always)]
pub unsafe fn mbar_init(bar: u32, count: u32) {
    // SAFETY: the caller guarantees the address.
    unsafe {
        asm!("mbarrier.init.shared::cta.b64 [{b}], {c};", b = in(reg32) bar, c = in(reg32) count,
             options(nostack))
    };
}

/// `fence.mbarrier_init.release.cluster` [9.7.13.4]: makes this thread's `mbarrier.init`s
/// visible to the bulk copies (the async proxy) before a barrier lets others use them.
#[inline(always)]
pub fn fence_mbar_init() {
    // SAFETY: a fence.
    unsafe { asm!("fence.mbarrier_init.release.cluster;", options(nostack)) };
}

/// `mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], bytes` [9.7.13.15.11]: this thread's
/// arrival on the current phase, which then also waits for `bytes` more bytes.
///
/// # Safety
/// `bar` must be an initialized barrier in shared memory.
#[inline(always)]
pub unsafe fn mbar_arrive_expect_tx(bar: u32, bytes: u32) {
    // SAFETY: the caller guarantees the barrier.
    unsafe {
        asm!("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{b}], {n};", b = in(reg32) bar,
             n = in(reg32) bytes, options(nostack))
    };
}

/// `mbarrier.arrive.shared::cta.b64 _, [bar]` [9.7.13.15.13]: this thread's arrival on the
/// current phase; its earlier memory accesses are ordered before the phase's completion
/// (release semantics), so a thread that waits for the phase may overwrite what they read.
///
/// # Safety
/// `bar` must be an initialized barrier in shared memory whose current phase expects this
/// arrival.
#[inline(always)]
pub unsafe fn mbar_arrive(bar: u32) {
    // SAFETY: the caller guarantees the barrier.
    unsafe {
        asm!("mbarrier.arrive.shared::cta.b64 _, [{b}];", b = in(reg32) bar, options(nostack))
    };
}

/// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [src], bytes,
/// [bar]` [9.7.9.25.4.1]: copies `bytes` from global `src` to shared `dst` in the background and
/// counts them down on `bar`.
///
/// # Safety
/// `dst` and `src` 16-byte aligned, `bytes` a multiple of 16, both ranges inside their buffers;
/// the source not written during the kernel; `bar` an initialized barrier whose current phase
/// expects these bytes (from [`mbar_arrive_expect_tx`] by this thread, before this call).
#[inline(always)]
pub unsafe fn bulk_copy(dst: u32, src: u64, bytes: u32, bar: u32) {
    // SAFETY: the caller guarantees the addresses and the barrier.
    unsafe {
        asm!("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{s}], {n}, [{b}];",
             d = in(reg32) dst, s = in(reg64) src, n = in(reg32) bytes, b = in(reg32) bar,
             options(nostack))
    };
}

/// `cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [dst],
/// [map, {x, y, z}], [bar]` [9.7.9.25.5.1]: copies the box of the tensor map `map` at element
/// coordinates (x, y, z) from global to shared `dst` in the background (elements outside the
/// tensor read as zero) and counts the box's bytes down on `bar`.
///
/// # Safety
/// `map` the generic address of a valid `CUtensorMap` in global memory, 64-byte aligned, not
/// written during the kernel; `dst` 128-byte aligned with room for the box; the tensor not
/// written during the kernel; `bar` an initialized barrier whose current phase expects the
/// box's bytes (as [`bulk_copy`]).
#[inline(always)]
pub unsafe fn tma_load_3d(dst: u32, map: u64, x: u32, y: u32, z: u32, bar: u32) {
    // SAFETY: the caller guarantees the map, the addresses and the barrier.
    unsafe {
        asm!("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{x}, {y}, {z}}}], [{b}];",
             d = in(reg32) dst, m = in(reg64) map, x = in(reg32) x, y = in(reg32) y,
             z = in(reg32) z, b = in(reg32) bar, options(nostack))
    };
}

/// `createpolicy.fractional.L2::evict_first.b64 policy, 1.0` [9.7.9.18]: a cache policy
/// under which the lines an access brings into the L2 are the first evicted, for data read once
/// (a product's weights), so that what is read again (the activations, a product's output that
/// the next kernel reads) stays in the L2.
#[inline(always)]
pub fn l2_evict_first() -> u64 {
    let p: u64;
    // SAFETY: creates a value in a register; no memory access.
    unsafe {
        asm!("createpolicy.fractional.L2::evict_first.b64 {p}, 1.0;", p = out(reg64) p,
             options(nostack, pure, nomem))
    };
    p
}

/// `createpolicy.fractional.L2::evict_normal.b64 policy, 1.0` [9.7.9.18]: the L2's normal
/// priority, as an access without a cache hint.
#[inline(always)]
pub fn l2_evict_normal() -> u64 {
    let p: u64;
    // SAFETY: creates a value in a register; no memory access.
    unsafe {
        asm!("createpolicy.fractional.L2::evict_normal.b64 {p}, 1.0;", p = out(reg64) p,
             options(nostack, pure, nomem))
    };
    p
}

/// [`bulk_copy`] with the L2 cache policy `policy` ([`l2_evict_first`], [`l2_evict_normal`])
/// for the lines it reads (`.L2::cache_hint`).
///
/// # Safety
/// As [`bulk_copy`]; `policy` made by `createpolicy`.
#[inline(always)]
pub unsafe fn bulk_copy_hint(dst: u32, src: u64, bytes: u32, bar: u32, policy: u64) {
    // SAFETY: the caller guarantees the addresses and the barrier.
    unsafe {
        asm!("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [{d}], [{s}], {n}, [{b}], {p};",
             d = in(reg32) dst, s = in(reg64) src, n = in(reg32) bytes, b = in(reg32) bar,
             p = in(reg64) policy, options(nostack))
    };
}

/// [`tma_load_3d`] with the L2 cache policy `policy` ([`l2_evict_first`], [`l2_evict_normal`])
/// for the lines it reads (`.L2::cache_hint`).
///
/// # Safety
/// As [`tma_load_3d`]; `policy` made by `createpolicy`.
#[inline(always)]
pub unsafe fn tma_load_3d_hint(dst: u32, map: u64, x: u32, y: u32, z: u32, bar: u32, policy: u64) {
    // SAFETY: the caller guarantees the map, the addresses and the barrier.
    unsafe {
        asm!("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [{d}], [{m}, {{{x}, {y}, {z}}}], [{b}], {p};",
             d = in(reg32) dst, m = in(reg64) map, x = in(reg32) x, y = in(reg32) y,
             z = in(reg32) z, b = in(reg32) bar, p = in(reg64) policy, options(nostack))
    };
}

/// Waits until the phase of `bar` with parity `parity` has completed
/// (`mbarrier.try_wait.parity.shared::cta.b64` [9.7.13.15.16] until it succeeds); the bytes
/// that phase counted are then visible to this thread.
///
/// # Safety
/// As [`mbar_arrive_expect_tx`]; the phase must complete (every expected arrival happens).
#[inline(always)]
pub unsafe fn mbar_wait(bar: u32, parity: u32) {
    loop {
        let done: u32;
        // SAFETY: the caller guarantees the barrier.
        unsafe {
            asm!("{{",
                 ".reg .pred %p;",
                 "mbarrier.try_wait.parity.shared::cta.b64 %p, [{b}], {ph};",
                 "selp.u32 {r}, 1, 0, %p;",
                 "}}",
                 r = out(reg32) done, b = in(reg32) bar, ph = in(reg32) parity, options(nostack));
        }
        if done != 0 {
            break;
        }
    }
}
