//! CPU reference of `combine`: `out[t][h] = sum over slots s of Dm[t, s][h] * w[t][s]` in slot
//! order, `e_0 * w_0` then `fma(e_s, w_s, acc)` (`gpu::quant::combine_step`).

use gpu::quant::combine_step;

use crate::par::par_chunks_mut;
use crate::problem::Routing;

pub fn combine(dm: &[f32], r: &Routing, hidden: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; r.n_tokens * hidden];
    par_chunks_mut(&mut out, hidden.max(1), |t, o| {
        for (h, v) in o.iter_mut().enumerate() {
            let mut acc = 0.0f32;
            for s in 0..r.top_k {
                acc = combine_step(
                    acc,
                    dm[(t * r.top_k + s) * hidden + h],
                    r.weights[t * r.top_k + s],
                    s == 0,
                );
            }
            *v = acc;
        }
    });
    out
}
