//! Synthetic inputs (deterministic from a seed, generated on all cores).

use crate::reference::par_chunks_mut;
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
