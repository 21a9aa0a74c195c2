//! Synthetic inputs (deterministic from a seed, generated on all cores).

use crate::par::par_chunks_mut;
use crate::rng::Rng;

/// `n` values ~ N(0, sigma^2) as f32.
pub fn normal_f32(seed: u64, n: usize, sigma: f64) -> Vec<f32> {
    let mut v = vec![0.0f32; n];
    const CHUNK: usize = 1 << 16;
    par_chunks_mut(&mut v, CHUNK, |i, c| {
        let mut rng = Rng::fork(seed, i as u64);
        for x in c {
            *x = (rng.normal() * sigma) as f32;
        }
    });
    v
}

use gpu::layout::WType;

use crate::formats::random::{ScaleRange, fill_random_blocks};
use crate::formats::{ExpertTensor, dequant_row};
use crate::problem::{GateUp, LayerWeights, MoeShape, Routing};

/// RMS of the values of random blocks of `w` whose scale is exactly 1.
fn unit_scale_rms(w: WType) -> f64 {
    let mut rng = Rng::new(0x0005_ca1e);
    let n = 64;
    let mut b = vec![0u8; n * w.block_bytes()];
    fill_random_blocks(w, &mut rng, ScaleRange::new(1.0, 1.0), &mut b);
    let mut y = vec![0.0f32; n * w.block_values()];
    dequant_row(w, &b, &mut y);
    (y.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / y.len() as f64).sqrt()
}

/// Random valid blocks for `n_rows` rows of `k` values, scaled so that values have RMS about
/// `1 / sqrt(k)` (a product over K of N(0,1) activations then has RMS about 1).
pub fn random_rows(w: WType, n_rows: usize, k: usize, seed: u64) -> Vec<u8> {
    let target = 1.0 / (k as f64).sqrt() / unit_scale_rms(w);
    let r = ScaleRange::new((0.5 * target) as f32, (1.5 * target) as f32);
    let row_bytes = w.row_bytes(k);
    let mut v = vec![0u8; n_rows * row_bytes];
    let rows_per_chunk = (1 << 20) / row_bytes.max(1) + 1;
    par_chunks_mut(&mut v, rows_per_chunk * row_bytes, |i, c| {
        let mut rng = Rng::fork(seed, i as u64);
        fill_random_blocks(w, &mut rng, r, c);
    });
    v
}

/// A synthetic MoE layer, deterministic from a seed: random valid expert weights of the chosen
/// formats and an f32 router `[n_experts][hidden]` ~ N(0, 1/hidden).
pub struct SyntheticLayer {
    pub shape: MoeShape,
    pub merged: bool,
    /// gate then up (two tensors), or the merged tensor in `gate`.
    pub gate: Vec<u8>,
    pub up: Vec<u8>,
    pub down: Vec<u8>,
    pub router: Vec<f32>,
}

impl SyntheticLayer {
    pub fn new(shape: MoeShape, merged: bool, seed: u64) -> crate::Result<Self> {
        shape.check()?;
        let (e, h, f) = (shape.n_experts, shape.hidden, shape.ffn);
        let (gate, up) = if merged {
            (
                random_rows(shape.gate_up_type, e * 2 * f, h, seed ^ 1),
                Vec::new(),
            )
        } else {
            (
                random_rows(shape.gate_up_type, e * f, h, seed ^ 1),
                random_rows(shape.gate_up_type, e * f, h, seed ^ 2),
            )
        };
        let down = random_rows(shape.down_type, e * h, f, seed ^ 3);
        let router = normal_f32(seed ^ 4, e * h, 1.0 / (h as f64).sqrt());
        Ok(SyntheticLayer {
            shape,
            merged,
            gate,
            up,
            down,
            router,
        })
    }

    /// The weights as views.
    pub fn weights(&self) -> LayerWeights<'_> {
        let s = &self.shape;
        fn t(w: WType, e: usize, n: usize, k: usize, d: &[u8]) -> ExpertTensor<'_> {
            ExpertTensor {
                wtype: w,
                n_experts: e,
                n_rows: n,
                k,
                data: d,
            }
        }
        let e = s.n_experts;
        let gate_up = if self.merged {
            GateUp::Merged(t(s.gate_up_type, e, 2 * s.ffn, s.hidden, &self.gate))
        } else {
            GateUp::Separate {
                gate: t(s.gate_up_type, e, s.ffn, s.hidden, &self.gate),
                up: t(s.gate_up_type, e, s.ffn, s.hidden, &self.up),
            }
        };
        LayerWeights {
            gate_up,
            down: t(s.down_type, e, s.hidden, s.ffn, &self.down),
        }
    }
}

/// Expert popularity for synthetic routings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Popularity {
    /// Every expert equally likely.
    Uniform,
    /// Popularity `exp(sigma * z_e)`, z_e ~ N(0, 1) per expert (lognormal).
    Skewed { sigma: f64 },
    /// No chance at all: slot j of token i on expert `(top_k * i + j) mod n_experts`, so every
    /// expert gets the same number of rows to within one (T = 32 E / top_k gives 32 each).
    Flat,
}

impl Popularity {
    /// A short name for ids and tables: `uniform`, `skewed<sigma>`, `flat`.
    pub fn name(self) -> String {
        match self {
            Popularity::Uniform => "uniform".into(),
            Popularity::Skewed { sigma } => format!("skewed{sigma}"),
            Popularity::Flat => "flat".into(),
        }
    }
}

/// A synthetic routing: each token picks `top_k` distinct experts with probability proportional
/// to their popularity; its weights are a softmax of N(0, 1) scores over the chosen experts.
pub fn routing(
    n_tokens: usize,
    n_experts: usize,
    top_k: usize,
    pop: Popularity,
    seed: u64,
) -> Routing {
    let mut rng = Rng::new(seed);
    let p: Vec<f64> = match pop {
        Popularity::Uniform => vec![1.0; n_experts],
        Popularity::Skewed { sigma } => (0..n_experts)
            .map(|_| (sigma * rng.normal()).exp())
            .collect(),
        Popularity::Flat => {
            let mut r = routing(n_tokens, n_experts, top_k, Popularity::Uniform, seed);
            for (i, id) in r.ids.iter_mut().enumerate() {
                *id = ((top_k * (i / top_k) + i % top_k) % n_experts) as u32;
            }
            return r;
        }
    };
    let mut cdf = Vec::with_capacity(n_experts);
    let mut acc = 0.0;
    for v in &p {
        acc += v;
        cdf.push(acc);
    }
    let mut ids = Vec::with_capacity(n_tokens * top_k);
    let mut weights = Vec::with_capacity(n_tokens * top_k);
    for _ in 0..n_tokens {
        let start = ids.len();
        while ids.len() - start < top_k {
            let u = rng.f64() * acc;
            let e = cdf.partition_point(|&c| c <= u).min(n_experts - 1) as u32;
            if !ids[start..].contains(&e) {
                ids.push(e);
            }
        }
        let z: Vec<f64> = (0..top_k).map(|_| rng.normal().exp()).collect();
        let sum: f64 = z.iter().sum();
        weights.extend(z.iter().map(|v| (v / sum) as f32));
    }
    Routing {
        n_tokens,
        top_k,
        ids,
        weights,
    }
}
