//! CPU reference of `swiglu_quant` (fused SwiGLU + q8_1 D4) and of its two-kernel form.
//! Same inputs and outputs as host/src/moe/swiglu_quant.rs; rules from `gpu::quant`.

use gpu::layout::{BlockQ8_1Mmq, MMQ_BLOCK_VALUES, QK8_1, padded_k};
use gpu::quant::{quantize_group_q8_1, swiglu};

use crate::par::{par_chunks_mut, par_map};
use crate::problem::SwigluQuantShape;

/// Gate and up value `j` of a row of the gate/up product.
fn gate_up(row: &[f32], ffn: usize, j: usize, interleaved: bool) -> (f32, f32) {
    if interleaved {
        (row[2 * j], row[2 * j + 1])
    } else {
        (row[j], row[ffn + j])
    }
}

/// Quantizes one row of `k` values (zero-padded to `padded_k(k)`) into its D4 blocks.
pub fn quantize_row(x: &[f32]) -> Vec<BlockQ8_1Mmq> {
    let kp = padded_k(x.len());
    let mut blocks = vec![
        BlockQ8_1Mmq {
            d: [0.0; 4],
            qs: [0; 128]
        };
        kp / MMQ_BLOCK_VALUES
    ];
    for (g, grp) in (0..kp / QK8_1).map(|g| (g, g * QK8_1)) {
        let vals: [f32; 32] = std::array::from_fn(|i| x.get(grp + i).copied().unwrap_or(0.0));
        let (d, q) = quantize_group_q8_1(&vals);
        let b = &mut blocks[g / 4];
        b.d[g % 4] = d;
        b.qs[(g % 4) * 32..(g % 4) * 32 + 32].copy_from_slice(&q);
    }
    blocks
}

/// Writes per-row blocks into the K-chunk-major buffer `out` (`[n_chunks][n_cols]`).
fn scatter_rows(rows: &[Vec<BlockQ8_1Mmq>], n_cols: usize, out: &mut [BlockQ8_1Mmq]) {
    for (r, blocks) in rows.iter().enumerate() {
        for (kc, b) in blocks.iter().enumerate() {
            out[kc * n_cols + r] = *b;
        }
    }
}

/// Fused form: row r of `out` = q8_1(swiglu(gate_r, up_r)), its `s.out_chunks()` chunks (with
/// or without the padding chunks). Only rows `< n_rows` are written.
pub fn swiglu_quant(gu: &[f32], s: &SwigluQuantShape, out: &mut [BlockQ8_1Mmq]) {
    let rows = par_map(s.n_rows, |r| {
        let row = &gu[r * s.gu_stride..];
        let h: Vec<f32> = (0..s.ffn)
            .map(|j| {
                let (g, u) = gate_up(row, s.ffn, j, s.interleaved);
                swiglu(g, u)
            })
            .collect();
        let mut blocks = quantize_row(&h);
        blocks.truncate(s.out_chunks());
        blocks
    });
    scatter_rows(&rows, s.n_cols, out);
}

/// Two-kernel form, step 1: H = swiglu(gate, up), f32 `[n_rows, ffn]`.
pub fn swiglu_f32(gu: &[f32], s: &SwigluQuantShape) -> Vec<f32> {
    let mut h = vec![0.0f32; s.n_rows * s.ffn];
    par_chunks_mut(&mut h, s.ffn.max(1), |r, out| {
        let row = &gu[r * s.gu_stride..];
        for (j, o) in out.iter_mut().enumerate() {
            let (g, u) = gate_up(row, s.ffn, j, s.interleaved);
            *o = swiglu(g, u);
        }
    });
    h
}

/// Two-kernel form, step 2: q8_1 D4 of f32 rows `x[n_rows, x_stride]` (first `k` values each)
/// into `out` (`[padded_k(k) / 128][n_cols]`). Only rows `< n_rows` are written.
pub fn quantize_q8_1(
    x: &[f32],
    n_rows: usize,
    k: usize,
    x_stride: usize,
    n_cols: usize,
    out: &mut [BlockQ8_1Mmq],
) {
    let rows = par_map(n_rows, |r| quantize_row(&x[r * x_stride..r * x_stride + k]));
    scatter_rows(&rows, n_cols, out);
}
