//! The CPU reference: the bytes every GPU path must give. Plain loops over rows, experts and K,
//! integer sums as ggml MMQ defines them, the float epilogue in the kernels' fixed K order,
//! every rounding rule taken from `gpu::quant`. It shares rules and formats with the kernels,
//! never their tiling. Work is spread over all cores with `std::thread::scope`.

pub mod combine;
pub mod down;
pub mod exact;
pub mod gate_up;
pub mod mmq;
pub mod route;
pub mod scatter;
pub mod swiglu_quant;

use gpu::layout::BlockQ8_1Mmq;

use crate::moe::shape::{LayerWeights, MoeShape, Routing, RowOrder};
use crate::moe::swiglu_quant::SwigluQuantShape;

/// Number of worker threads: all cores.
pub fn threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Calls `f(i, &mut out[i * chunk .. (i + 1) * chunk])` for every chunk of `out`, on all cores.
pub fn par_chunks_mut<T: Send>(out: &mut [T], chunk: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    par_items(
        out.chunks_mut(chunk.max(1)).enumerate().collect(),
        |(i, c)| f(i, c),
    );
}

/// `(0..n).map(f)` computed on all cores, in order.
pub fn par_map<T: Send + Default>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let mut out: Vec<T> = (0..n).map(|_| T::default()).collect();
    let chunk = n.div_ceil(threads() * 8).max(1);
    par_chunks_mut(&mut out, chunk, |ci, part| {
        for (j, o) in part.iter_mut().enumerate() {
            *o = f(ci * chunk + j);
        }
    });
    out
}

/// Runs `f` on every item, on all cores (items taken in order from a shared queue).
pub fn par_items<T: Send>(items: Vec<T>, f: impl Fn(T) + Sync) {
    let n = items.len();
    let queue = std::sync::Mutex::new(items.into_iter());
    std::thread::scope(|s| {
        for _ in 0..threads().min(n) {
            s.spawn(|| {
                loop {
                    let item = queue.lock().ok().and_then(|mut q| q.next());
                    match item {
                        Some(it) => f(it),
                        None => break,
                    }
                }
            });
        }
    });
}

/// Every stage's output of one layer's prefill, for stage-by-stage comparison.
pub struct Stages {
    pub order: RowOrder,
    /// Quantized activations, `[hidden_padded / 128][n_rows]` D4 blocks, compact order.
    pub xq: Vec<BlockQ8_1Mmq>,
    /// Gate/up product, `[n_rows][2 ffn]` f32, compact order.
    pub gu: Vec<f32>,
    /// SwiGLU quantized, `[padded(ffn) / 128][n_rows]` D4 blocks, compact order.
    pub hq: Vec<BlockQ8_1Mmq>,
    /// Down product, `[n_tokens * top_k][hidden]` f32, (token, slot) order.
    pub dm: Vec<f32>,
    /// Layer output, `[n_tokens][hidden]` f32.
    pub out: Vec<f32>,
}

/// The whole expert path on the CPU, MMQ numerics: scatter, gate/up, swiglu_quant, down,
/// combine. `x` is `[n_tokens][hidden]` f32.
pub fn prefill(x: &[f32], routing: &Routing, w: &LayerWeights, s: &MoeShape) -> Stages {
    let order = scatter::row_order(routing, s.n_experts);
    let xq = scatter::quantize_scatter(x, s.hidden, &order);
    let gu = gate_up::gate_up(&xq, &order, w, s);
    let n_rows = order.n_rows();
    let sq = SwigluQuantShape::dense(n_rows, s.ffn, false);
    let mut hq = vec![
        BlockQ8_1Mmq {
            d: [0.0; 4],
            qs: [0; 128]
        };
        sq.out_blocks()
    ];
    swiglu_quant::swiglu_quant(&gu, &sq, &mut hq);
    let dm = down::down(&hq, &order, w, s, routing.top_k);
    let out = combine::combine(&dm, routing, s.hidden);
    Stages {
        order,
        xq,
        gu,
        hq,
        dm,
        out,
    }
}
