//! `moe_combine`: the weighted sum of each token's top-k down-product rows, in slot order,
//! `e_0 * w_0` then `fma(e_s, w_s, acc)` (`gpu::quant::combine_step`), no atomics.
//! Grid: (token, ceil(hidden / COMBINE_THREADS)); `COMBINE_THREADS` threads, one output value
//! each.
//! Launcher: host/src/moe/combine.rs.

use crate::layout::{COMBINE_THREADS, CombineParams};
use crate::ptx::{ctaid_x, ctaid_y, tid_x};
use crate::quant::combine_step;

/// See the module doc.
///
/// # Safety
/// Buffers as `layout::CombineParams`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_combine(p: CombineParams) {
    let t = ctaid_x();
    let h = ctaid_y() * COMBINE_THREADS as u32 + tid_x();
    if h >= p.hidden {
        return;
    }
    let mut acc = 0.0f32;
    for s in 0..p.top_k {
        let row = t * p.top_k + s;
        // SAFETY: row < n_tokens * top_k, h < hidden.
        unsafe {
            let e = *(p.dm as *const f32).add(row as usize * p.hidden as usize + h as usize);
            let w = *(p.weights as *const f32).add(row as usize);
            acc = combine_step(acc, e, w, s == 0);
        }
    }
    // SAFETY: t < n_tokens, h < hidden.
    unsafe { *(p.out as *mut f32).add(t as usize * p.hidden as usize + h as usize) = acc };
}
