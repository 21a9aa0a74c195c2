//! CPU reference of the down product: `Dm[t * top_k + s][h]` (f32, `[n_tokens * top_k][hidden]`)
//! for the row of token t, slot s, from the q8_1 rows `Hq` (compact order), MMQ numerics.

use gpu::layout::BlockQ8_1Mmq;

use crate::par::par_items;
use crate::problem::{LayerWeights, MoeShape, RowOrder};
use crate::reference::mmq::{ActRow, DecodedExpert, expert_outputs};

const ITEM_ROWS: usize = 256;

pub fn down(
    hq: &[BlockQ8_1Mmq],
    order: &RowOrder,
    w: &LayerWeights,
    s: &MoeShape,
    top_k: usize,
) -> Vec<f32> {
    let n_rows = order.n_rows();
    let mut items = Vec::new();
    for e in 0..s.n_experts {
        let rows = order.rows_of(e);
        let mut c = rows.start;
        while c < rows.end {
            let end = (c + ITEM_ROWS).min(rows.end);
            items.push((e, c..end));
            c = end;
        }
    }
    // Each item computes its rows, then they are placed at (token, slot).
    let results = std::sync::Mutex::new(Vec::new());
    par_items(items, |(e, rows)| {
        let dec = DecodedExpert::new(s.down_type, s.numerics, s.hidden, s.ffn, |n| {
            w.down.row(e, n)
        });
        let mut out = vec![0.0f32; rows.len() * s.hidden];
        for (j, c) in rows.clone().enumerate() {
            let a = ActRow::from_d4(hq, n_rows, c, s.ffn);
            expert_outputs(&dec, &a, &mut out[j * s.hidden..(j + 1) * s.hidden]);
        }
        results
            .lock()
            .expect("no thread panicked")
            .push((rows, out));
    });
    let mut dm = vec![0.0f32; n_rows * s.hidden];
    for (rows, out) in results.into_inner().expect("no thread panicked") {
        for (j, c) in rows.enumerate() {
            let dst = order.row_token[c] as usize * top_k + order.row_slot[c] as usize;
            dm[dst * s.hidden..(dst + 1) * s.hidden]
                .copy_from_slice(&out[j * s.hidden..(j + 1) * s.hidden]);
        }
    }
    dm
}
