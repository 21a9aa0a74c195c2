//! `moe_route`: router logits -> softmax -> top-k ids and weights. One warp per token, 4 tokens
//! per 128-thread CTA; each warp keeps its token's probabilities in shared memory
//! (`16 * n_experts` bytes per CTA), computed once, then scanned `top_k` times. Reduction orders are fixed and written out in
//! host/src/reference/route.rs (lane l sums experts l, l + 32, ... in order; partials combined
//! by the xor butterfly 16, 8, 4, 2, 1); top-k is repeated argmax, ties to the lower expert id.
//! Launcher: host/src/moe/route.rs.

use crate::layout::RouteParams;
use crate::ptx::{
    ctaid_x, lane_id, ld_shared_f32, shfl_xor_f32, shfl_xor_u32, smem_base, st_shared_u32,
    sync_warp, tid_x,
};
use crate::quant::exp;

/// Selection key of a probability (NaN ranks below every number): as the reference's `key`.
#[inline(always)]
fn key(p: f32) -> f32 {
    if p.is_nan() { -1.0 } else { p }
}

/// See the module doc.
///
/// # Safety
/// Buffers as `layout::RouteParams` describes; `n_experts <= MAX_EXPERTS`, `top_k <=
/// n_experts`; grid `ceil(n_tokens / 4)` CTAs of 128 threads, `16 * n_experts` bytes of
/// dynamic shared memory.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_route(p: RouteParams) {
    crate::ptx::grid_dependency_sync();
    let t = ctaid_x() * 4 + tid_x() / 32;
    if t >= p.n_tokens {
        return; // the whole warp
    }
    let lane = lane_id();
    let e = p.n_experts;
    // SAFETY: row t of the logits has n_experts values.
    let logit = |i: u32| unsafe { *(p.logits as *const f32).add((t * e + i) as usize) };
    let mut m = f32::NEG_INFINITY;
    let mut i = lane;
    while i < e {
        let v = logit(i);
        if v > m {
            m = v;
        }
        i += 32;
    }
    let mut off = 16;
    while off > 0 {
        let o = shfl_xor_f32(m, off);
        if o > m {
            m = o;
        }
        off /= 2;
    }
    let mut sum = 0.0f32;
    let mut i = lane;
    while i < e {
        sum += exp(logit(i) - m);
        i += 32;
    }
    let mut off = 16;
    while off > 0 {
        sum += shfl_xor_f32(sum, off);
        off /= 2;
    }
    // This warp's probabilities in shared memory, each computed once.
    let probs = smem_base() + (tid_x() / 32) * 4 * e;
    let mut i = lane;
    while i < e {
        // SAFETY: i < n_experts; the CTA has 16 * n_experts bytes of shared memory.
        unsafe { st_shared_u32(probs + 4 * i, (exp(logit(i) - m) / sum).to_bits()) };
        i += 32;
    }
    sync_warp();
    // SAFETY: as above.
    let prob = |i: u32| unsafe { ld_shared_f32(probs + 4 * i) };
    // Bit j of `taken`: expert lane + 32 j was selected (n_experts <= 2048).
    let mut taken = 0u64;
    let out = (t * p.top_k) as usize;
    for s in 0..p.top_k {
        let (mut bk, mut bi) = (f32::NEG_INFINITY, u32::MAX);
        let mut i = lane;
        let mut j = 0;
        while i < e {
            if taken >> j & 1 == 0 {
                let k = key(prob(i));
                if k > bk {
                    bk = k;
                    bi = i;
                }
            }
            i += 32;
            j += 1;
        }
        let mut off = 16;
        while off > 0 {
            let ok = shfl_xor_f32(bk, off);
            let oi = shfl_xor_u32(bi, off);
            if ok > bk || (ok == bk && oi < bi) {
                bk = ok;
                bi = oi;
            }
            off /= 2;
        }
        if bi % 32 == lane {
            taken |= 1 << (bi / 32);
        }
        if lane == 0 {
            // SAFETY: slot s of token t is inside ids and weights.
            unsafe {
                *(p.ids as *mut u32).add(out + s as usize) = bi;
                *(p.weights as *mut f32).add(out + s as usize) = prob(bi);
            }
        }
    }
    if lane == 0 && (p.norm != 0 || (p.scale != 0.0 && p.scale != 1.0)) {
        // SAFETY: this lane wrote these top_k weights above.
        let w = unsafe {
            core::slice::from_raw_parts_mut((p.weights as *mut f32).add(out), p.top_k as usize)
        };
        if p.norm != 0 {
            let mut sum = 0.0f32;
            for v in w.iter() {
                sum += *v;
            }
            let sum = sum.max(6.103_515_6e-5);
            for v in w.iter_mut() {
                *v /= sum;
            }
        }
        if p.scale != 0.0 && p.scale != 1.0 {
            for v in w.iter_mut() {
                *v *= p.scale;
            }
        }
    }
}
