//! `moe_hold`: a kernel that keeps the stream busy for a given time, so that the host can queue
//! the work after it before the GPU reaches it. The timing harnesses (the CLI, the benches)
//! queue it before a timed layer, so the layer's events measure the GPU's time and not the
//! host's launch latency (host/src/device.rs: `Gpu::hold`).

use crate::ptx::globaltimer;

/// Spins one thread until `ns` nanoseconds of `%globaltimer` have passed. Reads and writes no
/// memory.
///
/// # Safety
/// None beyond a launch of one thread (a larger grid only spins longer on more SMs).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_hold(ns: u64) {
    let t0 = globaltimer();
    while globaltimer().wrapping_sub(t0) < ns {}
}
