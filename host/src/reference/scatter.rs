//! CPU reference of `scatter`: the expert-sorted row order and the activations quantized to q8_1
//! D4 once per token, placed in every row the token was routed to.

use gpu::layout::{BlockQ8_1Mmq, MMQ_BLOCK_VALUES};

use crate::par::par_map;
use crate::problem::{Routing, RowOrder};
use crate::reference::swiglu_quant::quantize_row;

/// Quantized activations `[hidden_padded / 128][n_rows]` in compact row order, from
/// `x[n_tokens][hidden]`.
pub fn quantize_scatter(x: &[f32], hidden: usize, order: &RowOrder) -> Vec<BlockQ8_1Mmq> {
    let n_tokens = x.len() / hidden;
    let per_token = par_map(n_tokens, |t| quantize_row(&x[t * hidden..(t + 1) * hidden]));
    let n_rows = order.n_rows();
    let n_chunks = gpu::layout::padded_k(hidden) / MMQ_BLOCK_VALUES;
    let mut out = vec![
        BlockQ8_1Mmq {
            d: [0.0; 4],
            qs: [0; 128]
        };
        n_chunks * n_rows
    ];
    for c in 0..n_rows {
        let blocks = &per_token[order.row_token[c] as usize];
        for (kc, b) in blocks.iter().enumerate() {
            out[kc * n_rows + c] = *b;
        }
    }
    out
}

/// The row order of a routing (expert-sorted, tokens ascending within an expert).
pub fn row_order(r: &Routing, n_experts: usize) -> RowOrder {
    RowOrder::from_routing(r, n_experts)
}
