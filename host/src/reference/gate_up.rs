//! CPU reference of the gate/up product: `GU[c][n]` (f32, `[n_rows][2 ffn]`, compact row
//! order; n < ffn gate, n >= ffn up) for every routed row c of every expert, MMQ numerics
//! (reference/mmq.rs).

use gpu::layout::BlockQ8_1Mmq;

use crate::par::par_items;
use crate::problem::{LayerWeights, MoeShape, RowOrder};
use crate::reference::mmq::{ActRow, DecodedExpert, expert_outputs};

/// Rows of one work item (an expert's rows are split into items of at most this many).
const ITEM_ROWS: usize = 256;

pub fn gate_up(xq: &[BlockQ8_1Mmq], order: &RowOrder, w: &LayerWeights, s: &MoeShape) -> Vec<f32> {
    let n_rows = order.n_rows();
    let width = 2 * s.ffn;
    let mut gu = vec![0.0f32; n_rows * width];
    // Split GU into per-expert row ranges (contiguous in compact order), then into items.
    let mut items = Vec::new();
    let mut rest: &mut [f32] = &mut gu;
    for e in 0..s.n_experts {
        let rows = order.rows_of(e);
        let (mine, tail) = rest.split_at_mut(rows.len() * width);
        rest = tail;
        for (i, part) in mine.chunks_mut(ITEM_ROWS * width).enumerate() {
            items.push((e, rows.start + i * ITEM_ROWS, part));
        }
    }
    par_items(items, |(e, first, part)| {
        let dec = DecodedExpert::new(s.gate_up_type, s.numerics, width, s.hidden, |n| {
            w.gate_up.row(e, n)
        });
        for (j, out) in part.chunks_mut(width).enumerate() {
            let a = ActRow::from_d4(xq, n_rows, first + j, s.hidden);
            expert_outputs(&dec, &a, out);
        }
    });
    gu
}
