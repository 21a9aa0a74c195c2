//! The `wgmma` form of the group loop (`probe_wgmma`, sm_90a): m64n64k32 into two
//! accumulator sets, each group's epilogue beside the next group's `wgmma`.

use crate::ep::epilogue;
use crate::wg::{wgmma_64x64x32, wgmma_fence, wgmma_wait};
use crate::{ctaid, smem_base, tid, zero_smem};

/// A shared-memory matrix descriptor (no swizzle): start, leading 128 B, stride 256 B.
#[inline(always)]
fn desc(addr: u32) -> u64 {
    ((addr as u64 & 0x3_ffff) >> 4) | ((128u64 >> 4) << 16) | ((256u64 >> 4) << 32)
}

/// Two warpgroups, each 64 rows x 64 columns (the CTA 64 x 128, as the flat tile), `wgmma`
/// m64n64k32 a group with D = A * B into one of two accumulator sets while the other's
/// epilogue runs; 4 groups a step, `iters` steps. Each step starts with no `wgmma` pending and
/// ends with `wait_group 0` before its last epilogue: with a `wgmma` still pending across the
/// loop's back edge, ptxas 12.9 serialized every `wgmma` (note C7514) and put both sets in the
/// same registers.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_wgmma(out: *mut f32, iters: u32) {
    zero_smem();
    let tid = tid();
    let (lane, wg, w) = (tid % 32, tid / 128, (tid % 128) / 32);
    let base = smem_base();
    let a_at = |g: u32| base + g * 2048;
    let b_at = |g: u32| base + 8192 + g * 4096 + wg * 2048;
    let wsc = |g: u32| base + 24576 + (g * 64 + 16 * w + 2 * (lane / 4)) * 4;
    let xsc = |g: u32| base + 25600 + (g * 128 + wg * 64 + (lane % 4) * 16) * 4;
    let mut acc = [0f32; 32];
    let mut d0 = [0u32; 32];
    let mut d1 = [0u32; 32];
    unsafe {
        for _ in 0..iters {
            d0 = wgmma_fence(d0);
            d0 = wgmma_64x64x32(d0, desc(a_at(0)), desc(b_at(0)));
            d1 = wgmma_fence(d1);
            d1 = wgmma_64x64x32(d1, desc(a_at(1)), desc(b_at(1)));
            d0 = wgmma_wait::<1>(d0);
            acc = epilogue(d0, acc, wsc(0), xsc(0));
            d0 = wgmma_fence(d0);
            d0 = wgmma_64x64x32(d0, desc(a_at(2)), desc(b_at(2)));
            d1 = wgmma_wait::<1>(d1);
            acc = epilogue(d1, acc, wsc(1), xsc(1));
            d1 = wgmma_fence(d1);
            d1 = wgmma_64x64x32(d1, desc(a_at(3)), desc(b_at(3)));
            d0 = wgmma_wait::<1>(d0);
            acc = epilogue(d0, acc, wsc(2), xsc(2));
            d1 = wgmma_wait::<0>(d1);
            acc = epilogue(d1, acc, wsc(3), xsc(3));
        }
    }
    let mut s = 0.0f32;
    for i in 0..32 {
        s += acc[i];
    }
    unsafe { *out.add((ctaid() * 256 + tid) as usize) = s };
}
