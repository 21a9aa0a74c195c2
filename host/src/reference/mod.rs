//! The CPU reference: the bytes every GPU path must give. Plain loops over rows, experts and K,
//! integer sums as ggml MMQ defines them, the float epilogue in the kernels' fixed K order,
//! every rounding rule taken from `gpu::quant`. It shares rules and formats with the kernels,
//! never their tiling. Work is spread over all cores (`crate::par`).

pub mod combine;
pub mod down;
pub mod exact;
pub mod gate_up;
pub mod mmq;
pub mod route;
pub mod scatter;
pub mod swiglu_quant;

use gpu::layout::BlockQ8_1Mmq;

use crate::problem::SwigluQuantShape;
use crate::problem::{LayerWeights, MoeShape, Routing, RowOrder};

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
    // H without ggml's padding chunks past ffn: the down product reads no K past ffn.
    let sq = SwigluQuantShape::layer(n_rows, s.ffn);
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
