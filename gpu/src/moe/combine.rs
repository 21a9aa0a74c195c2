//! `moe_combine`: the weighted sum of each token's top-k down-product rows, in slot order,
//! `e_0 * w_0` then `fma(e_s, w_s, acc)` (`gpu::quant::combine_step`), no atomics.
//! Grid: (token, ceil(hidden / (COMBINE_THREADS * COMBINE_VALUES))); `COMBINE_THREADS`
//! threads, each over `COMBINE_VALUES` consecutive output values: one 16-byte load per slot,
//! `COMBINE_SLOTS_AHEAD` slots' loads issued before their sums, so that they are in flight
//! together (the sums stay in slot order).
//! Launcher: host/src/moe/combine.rs.

use crate::layout::{COMBINE_SLOTS_AHEAD, COMBINE_THREADS, COMBINE_VALUES, CombineParams};
use crate::ptx::{ctaid_x, ctaid_y, ld_nc_v4_f32, st_v4_f32, tid_x};
use crate::quant::combine_step;

const _: () = assert!(COMBINE_VALUES == 4 && COMBINE_SLOTS_AHEAD == 10);

/// See the module doc.
///
/// # Safety
/// Buffers as `layout::CombineParams`, 16-byte aligned; `hidden` a multiple of
/// `COMBINE_VALUES`; `dm` not written while the kernel runs.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_combine(p: CombineParams) {
    crate::ptx::grid_dependency_sync();
    let t = ctaid_x();
    let h = (ctaid_y() * COMBINE_THREADS as u32 + tid_x()) * COMBINE_VALUES as u32;
    if h >= p.hidden {
        return;
    }
    let mut acc = [0.0f32; 4];
    let mut s0 = 0;
    while s0 < p.top_k {
        let mut e = [[0.0f32; 4]; COMBINE_SLOTS_AHEAD];
        let mut w = [0.0f32; COMBINE_SLOTS_AHEAD];
        // Every load unconditional (a slot past top-k reloads the last one, whose sum is
        // skipped below), so that all of them issue before the first sum waits.
        unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] {
            let s = (s0 + i as u32).min(p.top_k - 1);
            let row = t as usize * p.top_k as usize + s as usize;
            // SAFETY: row < n_tokens * top_k, h + 3 < hidden (a multiple of 4): 16 aligned
            // bytes inside dm, not written during the kernel.
            unsafe {
                e[i] = ld_nc_v4_f32((p.dm as *const f32).add(row * p.hidden as usize + h as usize));
                w[i] = *(p.weights as *const f32).add(row);
            }
        });
        unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] {
            let s = s0 + i as u32;
            if s < p.top_k {
                unroll!(v in [0, 1, 2, 3] {
                    acc[v] = combine_step(acc[v], e[i][v], w[i], s == 0);
                });
            }
        });
        s0 += COMBINE_SLOTS_AHEAD as u32;
    }
    // SAFETY: t < n_tokens, h + 3 < hidden: 16 aligned bytes inside out.
    unsafe {
        st_v4_f32(
            (p.out as *mut f32).add(t as usize * p.hidden as usize + h as usize),
            acc,
        )
    };
}
