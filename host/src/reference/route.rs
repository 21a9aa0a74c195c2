//! CPU reference of `route`: router logits -> softmax -> top-k -> weights, as llama.cpp's
//! `build_moe_ffn` does for softmax gating (docs/ggml-reference.md §8.2), in our exact numerics and in
//! the fixed reduction order the GPU kernel uses (gpu/src/moe/route.rs):
//! - max over all logits (order-free), `e_i = exp(l_i - max)`;
//! - sum: 32 partial sums, partial `l` = e_l + e_{l+32} + ... in ascending index from +0, then
//!   combined pairwise `p_l + p_{l^16}`, `^8`, `^4`, `^2`, `^1` (a warp's butterfly);
//! - `prob_i = e_i / sum` (IEEE division; ggml multiplies by an approximate reciprocal);
//! - top-k by repeated argmax over probs, ties to the lower expert id (as ggml's `topk_moe`),
//!   NaN probs ranked below every number;
//! - weights = the selected probs; with `norm`, divided by their sum (slot order, clamped below
//!   at 6.103515625e-5); then multiplied by `scale` unless it is 0 or 1.

use crate::problem::{RouteRule, Routing};

/// The butterfly sum of 32 partials (see module doc).
pub fn butterfly_sum(mut p: [f32; 32]) -> f32 {
    for off in [16, 8, 4, 2, 1] {
        let q = p;
        for l in 0..32 {
            p[l] = q[l] + q[l ^ off];
        }
    }
    p[0]
}

/// Softmax probabilities of one token's logits in the fixed order.
pub fn softmax(logits: &[f32]) -> Vec<f32> {
    let mut m = f32::NEG_INFINITY;
    for &l in logits {
        if l > m {
            m = l;
        }
    }
    let e: Vec<f32> = logits.iter().map(|&l| gpu::quant::exp(l - m)).collect();
    let mut p = [0.0f32; 32];
    for (i, &v) in e.iter().enumerate() {
        p[i % 32] += v;
    }
    let sum = butterfly_sum(p);
    e.iter().map(|&v| v / sum).collect()
}

/// Selection key of a probability: NaN ranks below every number.
pub fn key(p: f32) -> f32 {
    if p.is_nan() { -1.0 } else { p }
}

/// Routes `n_tokens` tokens from logits `[n_tokens][n_experts]`.
pub fn route(logits: &[f32], n_tokens: usize, rp: &RouteRule) -> Routing {
    let (e, k) = (rp.n_experts, rp.top_k);
    let mut ids = vec![0u32; n_tokens * k];
    let mut weights = vec![0.0f32; n_tokens * k];
    for t in 0..n_tokens {
        let probs = softmax(&logits[t * e..(t + 1) * e]);
        let mut keys: Vec<f32> = probs.iter().map(|&p| key(p)).collect();
        for s in 0..k {
            let mut best = 0usize;
            for i in 1..e {
                if keys[i] > keys[best] {
                    best = i;
                }
            }
            ids[t * k + s] = best as u32;
            weights[t * k + s] = probs[best];
            keys[best] = f32::NEG_INFINITY;
        }
        let w = &mut weights[t * k..(t + 1) * k];
        if rp.norm {
            let mut sum = 0.0f32;
            for &v in w.iter() {
                sum += v;
            }
            let sum = sum.max(6.103_515_6e-5);
            for v in w.iter_mut() {
                *v /= sum;
            }
        }
        if rp.scale != 0.0 && rp.scale != 1.0 {
            for v in w.iter_mut() {
                *v *= rp.scale;
            }
        }
    }
    Routing {
        n_tokens,
        top_k: k,
        ids,
        weights,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_go_to_the_lower_expert() {
        let logits = [0.0f32, 1.0, 1.0, 0.5, 1.0];
        let rp = RouteRule {
            n_experts: 5,
            top_k: 3,
            norm: false,
            scale: 1.0,
        };
        let r = route(&logits, 1, &rp);
        assert_eq!(r.ids, vec![1, 2, 4]);
        assert_eq!(r.weights[0], r.weights[1]);
        let rp = RouteRule { norm: true, ..rp };
        let r = route(&logits, 1, &rp);
        assert!((r.weights.iter().sum::<f32>() - 1.0).abs() < 1e-6);
    }

    #[test]
    fn nan_and_infinite_logits() {
        // -inf logits get probability 0 and rank after every finite one.
        let rp = RouteRule {
            n_experts: 3,
            top_k: 2,
            norm: false,
            scale: 2.0,
        };
        let r = route(&[f32::NEG_INFINITY, 0.0, 1.0], 1, &rp);
        assert_eq!(r.ids, vec![2, 1]);
        // A NaN logit makes the sum, hence every probability, NaN (as in ggml): all keys tie and
        // the lowest ids are chosen, deterministically; the weights are NaN.
        let r = route(&[1.0, f32::NAN, 0.0], 1, &rp);
        assert_eq!(r.ids, vec![0, 1]);
        assert!(r.weights.iter().all(|w| w.is_nan()));
    }
}
