//! Weight formats on the host: views of expert tensors, row decoding to MMQ's int8 form (through
//! the decoders the kernels use, `gpu::formats`), exact dequantization, ggml's quantizers for
//! Q8_0, Q2_0 and IQ4_NL, and seeded generators of random valid blocks for all eight formats.

pub mod quantize;
pub mod random;

use gpu::formats::{WeightBlock, dequant, word_value};
use gpu::layout::{
    BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockIq4Nl, BlockQ2_0, BlockQ8_0,
    WType,
};

use crate::error::{Result, shape};

/// A 3-D expert tensor as GGUF stores it: `n_experts` matrices of `n_rows` rows of `k` values,
/// expert e's row r at byte `(e * n_rows + r) * row_bytes` (docs/ggml-reference.md §8.1).
#[derive(Clone, Copy, Debug)]
pub struct ExpertTensor<'a> {
    pub wtype: WType,
    pub n_experts: usize,
    /// Rows per expert (output features).
    pub n_rows: usize,
    /// Values per row (the product's K).
    pub k: usize,
    pub data: &'a [u8],
}

impl<'a> ExpertTensor<'a> {
    /// Checks that `data` holds exactly the tensor and that `k` fits the block size.
    pub fn new(
        wtype: WType,
        n_experts: usize,
        n_rows: usize,
        k: usize,
        data: &'a [u8],
    ) -> Result<Self> {
        if k == 0 || !k.is_multiple_of(wtype.block_values()) {
            return Err(shape(
                format!("{} tensor row length", wtype.name()),
                k,
                format!("it must be a positive multiple of {}", wtype.block_values()),
            ));
        }
        let t = ExpertTensor {
            wtype,
            n_experts,
            n_rows,
            k,
            data,
        };
        let want = n_experts
            .checked_mul(n_rows)
            .and_then(|x| x.checked_mul(t.row_bytes()))
            .ok_or_else(|| shape("expert tensor size", u64::MAX, "overflows"))?;
        if data.len() != want {
            return Err(shape(
                format!("{} expert tensor bytes", wtype.name()),
                data.len(),
                format!("{n_experts} x {n_rows} x {k} values need {want}"),
            ));
        }
        Ok(t)
    }

    pub fn row_bytes(&self) -> usize {
        self.wtype.row_bytes(self.k)
    }

    pub fn expert_bytes(&self) -> usize {
        self.n_rows * self.row_bytes()
    }

    /// The bytes of row `r` of expert `e`.
    pub fn row(&self, e: usize, r: usize) -> &'a [u8] {
        let rb = self.row_bytes();
        let o = (e * self.n_rows + r) * rb;
        &self.data[o..o + rb]
    }

    /// Decodes row `r` of expert `e` to int8 values (`q`, length k) and one scale per 16
    /// values (`s16`, length k / 16; for types with one scale per 32 both halves repeat it).
    pub fn decode_row(&self, e: usize, r: usize, q: &mut [i8], s16: &mut [f32]) {
        decode_row(self.wtype, self.row(e, r), q, s16)
    }

    /// Dequantizes row `r` of expert `e` (exact).
    pub fn dequant_row(&self, e: usize, r: usize, out: &mut [f32]) {
        dequant_row(self.wtype, self.row(e, r), out)
    }
}

fn decode_blocks<B: WeightBlock + bytemuck::Pod>(bytes: &[u8], q: &mut [i8], s16: &mut [f32]) {
    let bs = size_of::<B>();
    let per = B::GROUPS * 32;
    for (i, chunk) in bytes.chunks_exact(bs).enumerate() {
        let b: B = bytemuck::pod_read_unaligned(chunk);
        for g in 0..B::GROUPS {
            let w = b.group_q(g);
            let s = b.group_scales(g);
            let base = i * per + 32 * g;
            for k in 0..32 {
                q[base + k] = word_value(&w, k);
            }
            s16[base / 16] = s[0];
            s16[base / 16 + 1] = s[1];
        }
    }
}

fn dequant_blocks<B: WeightBlock + bytemuck::Pod>(bytes: &[u8], out: &mut [f32]) {
    let bs = size_of::<B>();
    let per = B::GROUPS * 32;
    for (i, chunk) in bytes.chunks_exact(bs).enumerate() {
        let b: B = bytemuck::pod_read_unaligned(chunk);
        dequant(&b, &mut out[i * per..(i + 1) * per]);
    }
}

macro_rules! by_type {
    ($w:expr, $f:ident, $($args:expr),*) => {
        match $w {
            WType::Q8_0 => $f::<BlockQ8_0>($($args),*),
            WType::Q2_0 => $f::<BlockQ2_0>($($args),*),
            WType::Iq4Nl => $f::<BlockIq4Nl>($($args),*),
            WType::Iq2Xxs => $f::<BlockIq2Xxs>($($args),*),
            WType::Iq2Xs => $f::<BlockIq2Xs>($($args),*),
            WType::Iq2S => $f::<BlockIq2S>($($args),*),
            WType::Iq3Xxs => $f::<BlockIq3Xxs>($($args),*),
            WType::Iq3S => $f::<BlockIq3S>($($args),*),
        }
    };
}

/// Decodes a run of whole blocks (`bytes`) to int8 values and per-16 scales.
pub fn decode_row(w: WType, bytes: &[u8], q: &mut [i8], s16: &mut [f32]) {
    by_type!(w, decode_blocks, bytes, q, s16)
}

/// Dequantizes a run of whole blocks (exact: every value is `q * scale`).
pub fn dequant_row(w: WType, bytes: &[u8], out: &mut [f32]) {
    by_type!(w, dequant_blocks, bytes, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use gpu::formats::Mem;

    /// `frag_q_in` (a lane's two words of a group, as the narrow MMQ kernel decodes them into
    /// registers) against the words of `group_q_in`, every group and lane of random blocks.
    fn frag_words<B: WeightBlock + bytemuck::Pod>(bytes: &[u8]) {
        for (i, chunk) in bytes.chunks_exact(size_of::<B>()).enumerate() {
            let b: B = bytemuck::pod_read_unaligned(chunk);
            for g in 0..B::GROUPS {
                let q = b.group_q(g);
                for t in 0..4usize {
                    let f = B::frag_q_in(Mem::of(&b), g, t as u32);
                    let want = if B::FRAG_PAIRS {
                        [q[2 * t], q[2 * t + 1]]
                    } else {
                        [q[t], q[t + 4]]
                    };
                    assert_eq!(f, want, "{:?} block {i} group {g} lane {t}", B::WTYPE);
                }
            }
        }
    }

    #[test]
    fn fragment_words_are_the_groups_words() {
        let mut rng = Rng::new(0xf7a9_0001);
        let r = random::ScaleRange {
            lo: 1e-3,
            hi: 10.0,
            signed: true,
        };
        for w in WType::ALL {
            let bytes = random::random_blocks(w, 2048, &mut rng, r);
            by_type!(w, frag_words, &bytes);
        }
    }
}
