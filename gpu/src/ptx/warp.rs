//! Warp-level wrappers: lane index, warp barrier, shuffles (see the module doc of `ptx`).

use core::arch::asm;

/// `shfl.sync.bfly.b32 d, v, lane_mask, 0x1f, 0xffffffff` [9.7.9.6]: the value of lane
/// `lane ^ lane_mask`. All 32 lanes must take part. Not `pure` (as `shfl_up_u32`): LLVM moves a
/// pure asm into the branch that uses its result, and a shuffle that only some lanes reach
/// never completes - the gate/up SwiGLU epilogue's shuffles were sunk under its `if g == 0`
/// store, and the kernel hung on the H200.
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
            options(nomem, nostack)
        );
    }
    r
}

/// `%laneid`.
#[inline(always)]
pub fn lane_id() -> u32 {
    let r: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {r}, %laneid;", r = out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// `bar.warp.sync 0xffffffff` [9.7.13.5]: all lanes of the warp reconverge and see each other's
/// shared-memory writes.
#[inline(always)]
pub fn sync_warp() {
    // SAFETY: a warp barrier; all lanes call it.
    unsafe { asm!("bar.warp.sync 0xffffffff;", options(nostack)) };
}

/// `shfl.sync.up.b32 d, v, delta, 0, 0xffffffff` [9.7.9.6]: the value of lane `lane - delta`
/// (a lane below `delta` gets its own). All 32 lanes must take part.
///
/// Not `pure`: a pure asm block may be sunk into the branch that uses its result (a scan's
/// `if lane >= delta`), where the lanes outside the branch would not take part and the warp
/// hangs (seen: LLVM did so).
#[inline(always)]
pub fn shfl_up_u32(v: u32, delta: u32) -> u32 {
    let r: u32;
    // SAFETY: register-only warp shuffle; callers call it from converged, full warps.
    unsafe {
        asm!(
            "shfl.sync.up.b32 {r}, {v}, {d}, 0, 0xffffffff;",
            r = out(reg32) r,
            v = in(reg32) v,
            d = in(reg32) delta,
            options(nostack)
        );
    }
    r
}

/// `shfl.sync.idx.b32 d, v, 0, 0x1f, 0xffffffff` [9.7.9.6]: lane 0's `v` in every lane. ptxas
/// knows the result is the same in every lane of the warp, so it can keep it in a uniform
/// register: an operand of a tensor copy (`cp.async.bulk.tensor`, which takes uniform operands)
/// computed from it needs no loop over the lanes' values. All 32 lanes must take part.
#[inline(always)]
pub fn warp_uniform(v: u32) -> u32 {
    let r: u32;
    // SAFETY: register-only warp shuffle; callers call it from converged, full warps. (Not
    // `pure`, as `shfl_up_u32`.)
    unsafe {
        asm!(
            "shfl.sync.idx.b32 {r}, {v}, 0, 0x1f, 0xffffffff;",
            r = out(reg32) r,
            v = in(reg32) v,
            options(nostack)
        );
    }
    r
}

/// `shfl.sync.bfly.b32` on a u32.
#[inline(always)]
pub fn shfl_xor_u32(v: u32, lane_mask: u32) -> u32 {
    shfl_xor_f32(f32::from_bits(v), lane_mask).to_bits()
}
