//! ggml's reference quantizers (ggml-quants.c) for the formats a model file is made from here:
//! `quantize_row_q8_0_ref`, `quantize_row_q2_0_ref`, and IQ4_NL's `quantize_row_iq4_nl_impl`
//! (`ntry = 7` as `quantize_iq4_nl` uses for model files, `-1` as `quantize_row_iq4_nl_ref`).
//! Same operations in the same order, in IEEE f32 without contraction (ggml built without FMA
//! contraction gives the same bytes; a build that contracts may differ in rare scales).

use gpu::layout::{BlockIq4Nl, BlockQ2_0, BlockQ8_0};
use gpu::quant::{f32_to_f16, round_half_away};
use gpu::tables::KVALUES_IQ4NL;

/// Q8_0: `d = amax / 127`, `q = roundf(x / d)` (as `x * (1 / d)`), d stored as f16.
pub fn quantize_q8_0(x: &[f32]) -> Vec<BlockQ8_0> {
    assert_eq!(x.len() % 32, 0, "Q8_0 rows are whole blocks of 32");
    x.chunks_exact(32)
        .map(|b| {
            let amax = b.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            let mut qs = [0i8; 32];
            for (q, &v) in qs.iter_mut().zip(b) {
                *q = round_half_away(v * id) as i8;
            }
            BlockQ8_0 {
                d: f32_to_f16(d),
                qs,
            }
        })
        .collect()
}

/// Q2_0: `d = amax` (f16), code `clamp(roundf(w / d) + 1, 0, 3)` (so code 3 is never chosen by
/// this quantizer; the format allows it).
pub fn quantize_q2_0(x: &[f32]) -> Vec<BlockQ2_0> {
    assert_eq!(x.len() % 64, 0, "Q2_0 rows are whole blocks of 64");
    x.chunks_exact(64)
        .map(|b| {
            let mut amax = 0.0f32;
            for v in b {
                let a = v.abs();
                if a > amax {
                    amax = a;
                }
            }
            let d = amax;
            let id = if d > 0.0 { 1.0 / d } else { 0.0 };
            let mut qs = [0u8; 16];
            for (j, &w) in b.iter().enumerate() {
                let q = (round_half_away(w * id) + 1).clamp(0, 3);
                qs[j / 4] |= (q as u8) << (2 * (j % 4));
            }
            BlockQ2_0 {
                d: f32_to_f16(d),
                qs,
            }
        })
        .collect()
}

/// ggml's `best_index_int8`: the index of the table value nearest to `x` (ties to the upper).
fn best_index_int8(val: &[i8; 16], x: f32) -> usize {
    if x <= val[0] as f32 {
        return 0;
    }
    if x >= val[15] as f32 {
        return 15;
    }
    let (mut ml, mut mu) = (0usize, 15usize);
    while mu - ml > 1 {
        let mav = (ml + mu) / 2;
        if x < val[mav] as f32 {
            mu = mav;
        } else {
            ml = mav;
        }
    }
    if x - (val[mu - 1] as f32) < (val[mu] as f32) - x {
        mu - 1
    } else {
        mu
    }
}

/// IQ4_NL, one 32-value block per call of ggml's `quantize_row_iq4_nl_impl(32, 32, ..)` with no
/// importance weights: weights `x^2`, an initial scale from the signed maximum, then `2 ntry + 1`
/// trial scales (none for `ntry < 0`), keeping the best weighted fit.
pub fn quantize_iq4_nl(x: &[f32], ntry: i32) -> Vec<BlockIq4Nl> {
    assert_eq!(x.len() % 32, 0, "IQ4_NL rows are whole blocks of 32");
    const GROUP_MAX_EPS: f32 = 1e-15;
    let values = &KVALUES_IQ4NL;
    x.chunks_exact(32)
        .map(|xb| {
            let mut l = [0usize; 32];
            let weight: [f32; 32] = std::array::from_fn(|j| xb[j] * xb[j]);
            let (mut amax, mut max) = (0.0f32, 0.0f32);
            for &v in xb {
                let ax = v.abs();
                if ax > amax {
                    amax = ax;
                    max = v;
                }
            }
            let mut scale = 0.0f32;
            if amax >= GROUP_MAX_EPS {
                let mut d = if ntry > 0 {
                    -max / values[0] as f32
                } else {
                    max / values[0] as f32
                };
                let mut id = 1.0 / d;
                let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
                for j in 0..32 {
                    let al = id * xb[j];
                    l[j] = best_index_int8(values, al);
                    let q = values[l[j]] as f32;
                    let w = weight[j];
                    sumqx += w * q * xb[j];
                    sumq2 += w * q * q;
                }
                d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
                let mut best = d * sumqx;
                for itry in -ntry..=ntry {
                    id = (itry as f32 + values[0] as f32) / max;
                    sumqx = 0.0;
                    sumq2 = 0.0;
                    for j in 0..32 {
                        let al = id * xb[j];
                        let q = values[best_index_int8(values, al)] as f32;
                        let w = weight[j];
                        sumqx += w * q * xb[j];
                        sumq2 += w * q * q;
                    }
                    if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                        d = sumqx / sumq2;
                        best = d * sumqx;
                    }
                }
                scale = d;
            }
            if ntry > 0 {
                let id = if scale != 0.0 { 1.0 / scale } else { 0.0 };
                for j in 0..32 {
                    l[j] = best_index_int8(values, id * xb[j]);
                }
            }
            let mut qs = [0u8; 16];
            for j in 0..16 {
                qs[j] = (l[j] | (l[16 + j] << 4)) as u8;
            }
            BlockIq4Nl {
                d: f32_to_f16(scale),
                qs,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::dequant_row;
    use gpu::layout::WType;

    #[test]
    fn q8_0_hand_made() {
        let mut x = [0.0f32; 32];
        x[0] = 127.0;
        x[1] = -63.5;
        x[2] = 0.5;
        let b = quantize_q8_0(&x)[0];
        assert_eq!(b.d, 0x3c00); // 1.0
        assert_eq!(&b.qs[..4], &[127, -64, 1, 0]);
        assert_eq!(quantize_q8_0(&[0.0; 32])[0].qs, [0; 32]);
    }

    #[test]
    fn q2_0_hand_made() {
        let mut x = [0.0f32; 64];
        x[0] = -2.0;
        x[1] = 2.0;
        x[2] = 0.9;
        x[3] = -0.9;
        let b = quantize_q2_0(&x)[0];
        assert_eq!(b.d, 0x4000); // 2.0
        // codes: -2/2 -> -1 -> 0; 1 -> 2; 0.45 -> 0 -> 1; -0.45 -> 0 -> 1
        assert_eq!(b.qs[0], 0b01_01_10_00);
        let mut out = [0.0f32; 64];
        dequant_row(WType::Q2_0, bytemuck::bytes_of(&b), &mut out);
        assert_eq!(&out[..4], &[-2.0, 2.0, 0.0, 0.0]);
    }

    #[test]
    fn iq4_nl_round_trips_table_values() {
        // A block made of table values times 0.5 is represented exactly.
        let x: Vec<f32> = (0..32)
            .map(|j| KVALUES_IQ4NL[j % 16] as f32 * 0.5)
            .collect();
        for ntry in [-1, 7] {
            let b = quantize_iq4_nl(&x, ntry)[0];
            let mut out = [0.0f32; 32];
            dequant_row(WType::Iq4Nl, bytemuck::bytes_of(&b), &mut out);
            let err: f32 = out.iter().zip(&x).map(|(a, b)| (a - b).abs()).sum();
            assert!(err < 1e-3, "ntry {ntry}: {out:?}");
        }
    }
}
