//! The f64 reference for accuracy figures: the same layer on the dequantized weights (exact in
//! f32) and unquantized activations, every sum and the SwiGLU in f64. Not a parity target: the
//! MMQ-numerics paths are compared with it by relative RMS.

use crate::formats::ExpertTensor;
use crate::par::par_items;
use crate::problem::{LayerWeights, MoeShape, Routing};

fn dequant_expert(rows: usize, k: usize, row: impl Fn(usize, &mut [f32])) -> Vec<f32> {
    let mut m = vec![0.0f32; rows * k];
    for r in 0..rows {
        row(r, &mut m[r * k..(r + 1) * k]);
    }
    m
}

fn dot(w: &[f32], x: &[f64]) -> f64 {
    w.iter().zip(x).map(|(&a, &b)| a as f64 * b).sum()
}

/// Layer output `[n_tokens][hidden]` in f64.
pub fn prefill_f64(x: &[f32], r: &Routing, w: &LayerWeights, s: &MoeShape) -> Vec<f64> {
    let (h, f, k) = (s.hidden, s.ffn, r.top_k);
    // Per expert, the (token, slot) pairs routed to it.
    let mut per_expert: Vec<Vec<(usize, usize)>> = vec![Vec::new(); s.n_experts];
    for t in 0..r.n_tokens {
        for sl in 0..k {
            per_expert[r.ids[t * k + sl] as usize].push((t, sl));
        }
    }
    let dm = std::sync::Mutex::new(vec![0.0f64; r.n_tokens * k * h]);
    let items: Vec<usize> = (0..s.n_experts)
        .filter(|&e| !per_expert[e].is_empty())
        .collect();
    par_items(items, |e| {
        let gu = dequant_expert(2 * f, h, |n, out| {
            let b = w.gate_up.row(e, n);
            crate::formats::dequant_row(w.gate_up.wtype(), b, out)
        });
        let down: &ExpertTensor = &w.down;
        let dn = dequant_expert(h, f, |n, out| down.dequant_row(e, n, out));
        let mut local = Vec::new();
        for &(t, sl) in &per_expert[e] {
            let xt: Vec<f64> = x[t * h..(t + 1) * h].iter().map(|&v| v as f64).collect();
            let act: Vec<f64> = (0..f)
                .map(|j| {
                    let g = dot(&gu[j * h..(j + 1) * h], &xt);
                    let u = dot(&gu[(f + j) * h..(f + j + 1) * h], &xt);
                    g / (1.0 + (-g).exp()) * u
                })
                .collect();
            let y: Vec<f64> = (0..h).map(|o| dot(&dn[o * f..(o + 1) * f], &act)).collect();
            local.push((t * k + sl, y));
        }
        let mut dm = dm.lock().expect("no thread panicked");
        for (row, y) in local {
            dm[row * h..(row + 1) * h].copy_from_slice(&y);
        }
    });
    let dm = dm.into_inner().expect("no thread panicked");
    let mut out = vec![0.0f64; r.n_tokens * h];
    for t in 0..r.n_tokens {
        for sl in 0..k {
            let wgt = r.weights[t * k + sl] as f64;
            for o in 0..h {
                out[t * h + o] += wgt * dm[(t * k + sl) * h + o];
            }
        }
    }
    out
}

/// `||a - b|| / ||b||`.
pub fn relative_rms(a: &[f32], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(&x, &y)| (x as f64 - y).powi(2)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}
