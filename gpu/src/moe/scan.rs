//! Prefix sums over a CTA (the scatter's expert bounds, the device-built tile list): each
//! thread gives one u32 and gets the sum of the values of the threads before it, and the CTA's
//! total. Warp scans by `shfl.sync.up`, then a scan of the warp totals by the first warp.

use crate::ptx::{lane_id, ld_shared_u32, ntid_x, shfl_up_u32, st_shared_u32, sync_threads, tid_x};

/// The inclusive sum of `v` over lanes `0..=lane` of the warp.
#[inline(always)]
fn warp_inclusive_scan(v: u32) -> u32 {
    let lane = lane_id();
    let mut x = v;
    let mut d = 1;
    while d < 32 {
        let y = shfl_up_u32(x, d);
        if lane >= d {
            x = x.wrapping_add(y);
        }
        d *= 2;
    }
    x
}

/// Returns (sum of `v` over the threads before this one, sum over the CTA), wrapping on
/// overflow (callers' sums fit in u32).
///
/// # Safety
/// Every thread of the CTA calls it (it has CTA barriers); the CTA has a multiple of 32
/// threads, at most 1,024; `scratch` is a shared address of `layout::CTA_SCAN_SMEM` bytes that no other
/// code uses during the call.
#[inline(always)]
pub unsafe fn cta_exclusive_scan(v: u32, scratch: u32) -> (u32, u32) {
    let lane = lane_id();
    let warp = tid_x() / 32;
    let n_warps = ntid_x() / 32;
    let x = warp_inclusive_scan(v);
    if lane == 31 {
        // SAFETY: warp < 32: inside the scratch.
        unsafe { st_shared_u32(scratch + 4 * warp, x) };
    }
    sync_threads();
    if warp == 0 {
        // SAFETY: lane < n_warps <= 32: inside the scratch.
        let w = if lane < n_warps {
            unsafe { ld_shared_u32(scratch + 4 * lane) }
        } else {
            0
        };
        let w = warp_inclusive_scan(w);
        if lane < n_warps {
            // SAFETY: as above.
            unsafe { st_shared_u32(scratch + 4 * lane, w) };
        }
    }
    sync_threads();
    // SAFETY: warp - 1 and n_warps - 1 are below 32: inside the scratch.
    let (before, total) = unsafe {
        (
            if warp > 0 {
                ld_shared_u32(scratch + 4 * (warp - 1))
            } else {
                0
            },
            ld_shared_u32(scratch + 4 * (n_warps - 1)),
        )
    };
    // The scratch may be written again by the next call.
    sync_threads();
    (before.wrapping_add(x).wrapping_sub(v), total)
}
