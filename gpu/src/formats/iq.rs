//! The decoders of the five IQ formats (the grid formats: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
//! IQ3_S) to MMQ's int8 form; the trait and the other formats are in mod.rs.

use super::{BlockBytes, QS, WeightBlock, apply_signs4, d_of};
use crate::layout::{BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, WType};
use crate::tables::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID};

/// Byte `i` (0..4) of `w`.
#[inline(always)]
fn byte(w: u32, i: usize) -> u32 {
    (w >> (8 * i)) & 0xff
}

impl WeightBlock for BlockIq2Xxs {
    const WTYPE: WType = WType::Iq2Xxs;
    const GROUPS: usize = 8;
    #[inline(always)]
    fn group_q_in<R: BlockBytes>(b: R, g: usize) -> [u32; 8] {
        let o = QS + 8 * (g & 7);
        let idx = b.u32_at(o);
        let aux = b.u32_at(o + 4);
        let mut w = [0u32; 8];
        for l in 0..4 {
            let signs = b.signs(aux >> (7 * l));
            let [a, c] = b.grid8_signed(&IQ2XXS_GRID, byte(idx, l), signs);
            w[2 * l] = a;
            w[2 * l + 1] = c;
        }
        w
    }
    /// Lane `t` holds grid entry `t` of the group (values `8 t .. 8 t + 7`): one index byte,
    /// one sign lookup, one grid lookup.
    const FRAG_PAIRS: bool = true;
    #[inline(always)]
    fn frag_q_in<R: BlockBytes>(b: R, g: usize, t: u32) -> [u32; 2] {
        let o = QS + 8 * (g & 7);
        let l = (t & 3) as usize;
        let aux = b.u32_at(o + 4);
        let signs = b.signs(aux >> (7 * l));
        b.grid8_signed(&IQ2XXS_GRID, b.u8(o + l), signs)
    }
    #[inline(always)]
    fn group_scales_in<R: BlockBytes>(b: R, g: usize) -> [f32; 2] {
        // The top nibble of the group's sign word, from the 16-bit load of it that the
        // fragment's signs already make.
        let s = b.u16(QS + 8 * (g & 7) + 6) >> 12;
        // d * (0.5 + s) * 0.25 == d / 8 * (2 s + 1), exactly (16-bit product); d / 8 is the
        // same for every group of the block.
        let v = d_of(b) * 0.125 * (2 * s + 1) as f32;
        [v, v]
    }
}

/// `d * (0.5 + s) * 0.25` for a 4-bit scale `s`: IQ2_XS / IQ2_S sub-scales (exact).
#[inline(always)]
fn iq2_sub_scale(d: f32, s: u32) -> f32 {
    d * 0.125 * (2 * (s & 15) + 1) as f32
}

/// The two sub-scales of an IQ2_XS / IQ2_S group from its scale byte at `off` (low nibble:
/// first 16 values, high nibble: last 16).
#[inline(always)]
fn iq2_group_scales<R: BlockBytes>(b: R, off: usize) -> [f32; 2] {
    let (d, s) = (d_of(b), b.u8(off));
    [iq2_sub_scale(d, s), iq2_sub_scale(d, s >> 4)]
}

/// Offsets of IQ2_XS's scale bytes, IQ2_S's `qh` and scales, IQ3_S's `qh`, signs and scales.
const IQ2XS_SCALES: usize = QS + 64;
const IQ2S_QH: usize = QS + 64;
const IQ2S_SCALES: usize = IQ2S_QH + 8;
const IQ3S_QH: usize = QS + 64;
const IQ3S_SIGNS: usize = IQ3S_QH + 8;
const IQ3S_SCALES: usize = IQ3S_SIGNS + 32;
const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(BlockIq2Xxs, qs) == QS);
    assert!(offset_of!(BlockIq2Xs, qs) == QS && offset_of!(BlockIq2Xs, scales) == IQ2XS_SCALES);
    assert!(offset_of!(BlockIq2S, qs) == QS && offset_of!(BlockIq2S, qh) == IQ2S_QH);
    assert!(offset_of!(BlockIq2S, scales) == IQ2S_SCALES && offset_of!(BlockIq3Xxs, qs) == QS);
    assert!(offset_of!(BlockIq3S, qs) == QS && offset_of!(BlockIq3S, qh) == IQ3S_QH);
    assert!(offset_of!(BlockIq3S, signs) == IQ3S_SIGNS);
    assert!(offset_of!(BlockIq3S, scales) == IQ3S_SCALES);
};

impl WeightBlock for BlockIq2Xs {
    const WTYPE: WType = WType::Iq2Xs;
    const GROUPS: usize = 8;
    #[inline(always)]
    fn group_q_in<R: BlockBytes>(b: R, g: usize) -> [u32; 8] {
        let o = QS + 8 * (g & 7);
        let mut w = [0u32; 8];
        for l in 0..4 {
            let q = b.u16(o + 2 * l);
            let signs = b.signs(q >> 9);
            let [a, c] = b.grid8_signed(&IQ2XS_GRID, q & 511, signs);
            w[2 * l] = a;
            w[2 * l + 1] = c;
        }
        w
    }
    /// Lane `t` holds grid entry `t` (values `8 t .. 8 t + 7`): lanes 0 and 1 the first 16
    /// values (the first scale), lanes 2 and 3 the last 16.
    const FRAG_PAIRS: bool = true;
    #[inline(always)]
    fn frag_q_in<R: BlockBytes>(b: R, g: usize, t: u32) -> [u32; 2] {
        let q = b.u16(QS + 8 * (g & 7) + 2 * (t & 3) as usize);
        let signs = b.signs(q >> 9);
        b.grid8_signed(&IQ2XS_GRID, q & 511, signs)
    }
    #[inline(always)]
    fn group_scales_in<R: BlockBytes>(b: R, g: usize) -> [f32; 2] {
        iq2_group_scales(b, IQ2XS_SCALES + (g & 7))
    }
}

impl WeightBlock for BlockIq2S {
    const WTYPE: WType = WType::Iq2S;
    const GROUPS: usize = 8;
    #[inline(always)]
    fn group_q_in<R: BlockBytes>(b: R, g: usize) -> [u32; 8] {
        let ib = g & 7;
        let qh = b.u8(IQ2S_QH + ib);
        let idx = b.u32_at(QS + 4 * ib);
        let signs = b.u32_at(QS + 32 + 4 * ib);
        let mut w = [0u32; 8];
        for l in 0..4 {
            let i = byte(idx, l) | ((qh >> (2 * l)) & 3) << 8;
            let [a, c] = b.grid8_signed(&IQ2S_GRID, i, byte(signs, l));
            w[2 * l] = a;
            w[2 * l + 1] = c;
        }
        w
    }
    /// Lane `t` holds grid entry `t` (values `8 t .. 8 t + 7`), as IQ2_XS.
    const FRAG_PAIRS: bool = true;
    #[inline(always)]
    fn frag_q_in<R: BlockBytes>(b: R, g: usize, t: u32) -> [u32; 2] {
        let (ib, l) = (g & 7, (t & 3) as usize);
        let qh = b.u8(IQ2S_QH + ib);
        let i = b.u8(QS + 4 * ib + l) | ((qh >> (2 * l)) & 3) << 8;
        b.grid8_signed(&IQ2S_GRID, i, b.u8(QS + 32 + 4 * ib + l))
    }
    #[inline(always)]
    fn group_scales_in<R: BlockBytes>(b: R, g: usize) -> [f32; 2] {
        iq2_group_scales(b, IQ2S_SCALES + (g & 7))
    }
}

impl WeightBlock for BlockIq3Xxs {
    const WTYPE: WType = WType::Iq3Xxs;
    const GROUPS: usize = 8;
    #[inline(always)]
    fn group_q_in<R: BlockBytes>(b: R, g: usize) -> [u32; 8] {
        let ib = g & 7;
        let aux = b.u32_at(QS + 64 + 4 * ib);
        let idx = [b.u32_at(QS + 8 * ib), b.u32_at(QS + 8 * ib + 4)];
        let mut w = [0u32; 8];
        for l in 0..4 {
            let signs = b.signs(aux >> (7 * l));
            let (i0, i1) = (
                byte(idx[l / 2], 2 * (l % 2)),
                byte(idx[l / 2], 2 * (l % 2) + 1),
            );
            w[2 * l] = apply_signs4(b.grid4(&IQ3XXS_GRID, i0), signs);
            w[2 * l + 1] = apply_signs4(b.grid4(&IQ3XXS_GRID, i1), signs >> 4);
        }
        w
    }
    const FRAG_PAIRS: bool = true;
    #[inline(always)]
    fn frag_q_in<R: BlockBytes>(b: R, g: usize, t: u32) -> [u32; 2] {
        // Words 2 t and 2 t + 1: grid index bytes 2 t and 2 t + 1 of the group's 8 (one 16-bit
        // load) and the two halves of sign entry t (one sign-table lookup).
        let (ib, t) = (g & 7, (t & 3) as usize);
        let signs = b.signs(b.u32_at(QS + 64 + 4 * ib) >> (7 * t));
        let q = b.u16(QS + 8 * ib + 2 * t);
        [
            apply_signs4(b.grid4(&IQ3XXS_GRID, q & 0xff), signs),
            apply_signs4(b.grid4(&IQ3XXS_GRID, q >> 8), signs >> 4),
        ]
    }
    #[inline(always)]
    fn group_scales_in<R: BlockBytes>(b: R, g: usize) -> [f32; 2] {
        let s = b.u8(QS + 64 + 4 * (g & 7) + 3) >> 4;
        // d * (0.5 + s) * 0.5 == d / 4 * (2 s + 1), exactly.
        let v = d_of(b) * 0.25 * (2 * s + 1) as f32;
        [v, v]
    }
}

impl WeightBlock for BlockIq3S {
    const WTYPE: WType = WType::Iq3S;
    const GROUPS: usize = 8;
    #[inline(always)]
    fn group_q_in<R: BlockBytes>(b: R, g: usize) -> [u32; 8] {
        let ib = g & 7;
        let qh = b.u8(IQ3S_QH + ib);
        let signs = b.u32_at(IQ3S_SIGNS + 4 * ib);
        let mut w = [0u32; 8];
        for l in 0..4 {
            let q = b.u16(QS + 8 * ib + 2 * l);
            let i0 = (q & 0xff) | ((qh >> (2 * l)) & 1) << 8;
            let i1 = ((q >> 8) & 0xff) | ((qh >> (2 * l + 1)) & 1) << 8;
            let s = byte(signs, l);
            w[2 * l] = apply_signs4(b.grid4(&IQ3S_GRID, i0), s);
            w[2 * l + 1] = apply_signs4(b.grid4(&IQ3S_GRID, i1), s >> 4);
        }
        w
    }
    const FRAG_PAIRS: bool = true;
    #[inline(always)]
    fn frag_q_in<R: BlockBytes>(b: R, g: usize, t: u32) -> [u32; 2] {
        // Words 2 t and 2 t + 1: grid index bytes 2 t and 2 t + 1 of the group's 8 (one 16-bit
        // load) with bits 2 t and 2 t + 1 of qh, and the two halves of sign byte t.
        let (ib, t) = (g & 7, (t & 3) as usize);
        let q = b.u16(QS + 8 * ib + 2 * t);
        let qh = b.u8(IQ3S_QH + ib) >> (2 * t);
        let s = b.u8(IQ3S_SIGNS + 4 * ib + t);
        let (i0, i1) = ((q & 0xff) | (qh & 1) << 8, (q >> 8) | (qh & 2) << 7);
        [
            apply_signs4(b.grid4(&IQ3S_GRID, i0), s),
            apply_signs4(b.grid4(&IQ3S_GRID, i1), s >> 4),
        ]
    }
    #[inline(always)]
    fn group_scales_in<R: BlockBytes>(b: R, g: usize) -> [f32; 2] {
        let ib = g & 7;
        let s = (b.u8(IQ3S_SCALES + ib / 2) >> (4 * (ib % 2))) & 15;
        let v = d_of(b) * (1 + 2 * s) as f32;
        [v, v]
    }
}
