//! Seeded random valid blocks of every format: random bytes for the codes, grid indices, signs
//! and sub-scales (every bit pattern of those is valid), and an f16 scale `d` drawn uniformly in
//! log scale from a chosen range (a raw random f16 could be inf or NaN).

use gpu::layout::WType;
use gpu::quant::f32_to_f16;

use crate::rng::Rng;

/// Range and sign of the generated block scales `d`.
#[derive(Clone, Copy, Debug)]
pub struct ScaleRange {
    pub lo: f32,
    pub hi: f32,
    /// Draw negative scales too (valid, if unusual).
    pub signed: bool,
}

impl ScaleRange {
    pub const fn new(lo: f32, hi: f32) -> Self {
        ScaleRange {
            lo,
            hi,
            signed: false,
        }
    }
}

/// One random f16 scale in the range (log-uniform).
pub fn random_scale(rng: &mut Rng, r: ScaleRange) -> u16 {
    let (l, h) = (r.lo.ln() as f64, r.hi.ln() as f64);
    let v = (l + (h - l) * rng.f64()).exp() as f32;
    let v = if r.signed && rng.next_u32() & 1 == 1 {
        -v
    } else {
        v
    };
    f32_to_f16(v)
}

/// Fills `out` (a whole number of `w` blocks) with random valid blocks.
pub fn fill_random_blocks(w: WType, rng: &mut Rng, r: ScaleRange, out: &mut [u8]) {
    let bs = w.block_bytes();
    assert_eq!(out.len() % bs, 0, "whole blocks");
    rng.fill_bytes(out);
    for b in out.chunks_exact_mut(bs) {
        // every format keeps its f16 scale in bytes 0..2
        b[..2].copy_from_slice(&random_scale(rng, r).to_le_bytes());
    }
}

/// `n_blocks` random valid blocks of `w`.
pub fn random_blocks(w: WType, n_blocks: usize, rng: &mut Rng, r: ScaleRange) -> Vec<u8> {
    let mut v = vec![0u8; n_blocks * w.block_bytes()];
    fill_random_blocks(w, rng, r, &mut v);
    v
}
