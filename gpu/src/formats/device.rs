//! The device layouts: formats whose blocks the host rewrites once, as it uploads a tensor
//! ([`to_device_layout`]), into an order the kernels decode in fewer instructions. The values,
//! their scales and every sum are the file's: only the bits move, inside each block.
//! - Q2_0 ([`BlockQ2_0Dev`]): the codes of each 16-bit word of `qs` reordered, so that a kernel
//!   turns a word of 8 codes into its two int8 words with two masks, one shift and two `prmt`
//!   lookups, where the file's order (each byte's 4 codes spread to nibbles first) takes twice
//!   that.
//! - IQ4_NL ([`BlockIq4NlDev`]): the nibbles of each 32-bit word of `qs` reordered so that its
//!   low 16 bits are the 4 values of one int8 word and its high 16 bits those of the word 4
//!   later: each word is 3 `prmt`s from its 16 bits, with no `prmt` pair to separate low and
//!   high nibbles afterwards.

use super::words::{Q2_0_LEVELS, iq4_nl_table};
use super::{BlockBytes, QS, WeightBlock, byte_perm, d_of};
use crate::layout::{BlockIq4NlDev, BlockQ2_0Dev, WType};

/// The bits of `x` under `m` swapped with those `s` bits above them (a delta swap).
const fn delta_swap(x: u64, m: u64, s: u32) -> u64 {
    let t = ((x >> s) ^ x) & m;
    x ^ t ^ (t << s)
}

/// The file's order -> the device order in each of the four 16-bit words of `x`: code i =
/// 4 w + m (bits `2 i ..`) moves to position 2 m + w, i.e. the codes 0..7 become 0, 4, 1, 5,
/// 2, 6, 3, 7. Two delta swaps: codes 2, 3 with 4, 5, then 1 with 4's new place (and 5 with 6).
pub const fn q2_0_shuffle(x: u64) -> u64 {
    delta_swap(
        delta_swap(x, 0x00f0_00f0_00f0_00f0, 4),
        0x0c0c_0c0c_0c0c_0c0c,
        2,
    )
}

/// The two int8 words (values `8 p ..` and `8 p + 4 ..`, each `c - 1`) of a device-layout word
/// `u` (its low 16 bits): word w's byte m is the code in bits `4 m + 2 w ..`, masked to one per
/// nibble and looked up by `prmt`.
#[inline(always)]
pub fn q2_0_dev_expand2(u: u32) -> [u32; 2] {
    [
        byte_perm(Q2_0_LEVELS, 0, u & 0x3333),
        byte_perm(Q2_0_LEVELS, 0, (u >> 2) & 0x3333),
    ]
}

/// The file's order -> the device order in each of the two 32-bit words of `x`: nibble
/// 2 j + h (byte j's low or high nibble, value j or j + 16 of the block's 4 j-th) moves to
/// position 4 h + j. Two delta swaps: nibbles 1 with 2 (and 5 with 6), then 2, 3 with 4, 5.
pub const fn iq4_nl_unshuffle(x: u64) -> u64 {
    delta_swap(
        delta_swap(x, 0x00f0_00f0_00f0_00f0, 4),
        0x0000_ff00_0000_ff00,
        8,
    )
}

/// The int8 word of the 4 IQ4_NL values whose nibbles are the low 16 bits of `u` (nibble k
/// value k): the low 3 bits of each nibble look up both halves of the table, its top bit
/// picks the half.
#[inline(always)]
pub fn iq4_nl_dev_word(u: u32) -> u32 {
    const TABLE: [u32; 4] = iq4_nl_table();
    let m = u & 0x7777;
    let lo = byte_perm(TABLE[0], TABLE[1], m);
    let hi = byte_perm(TABLE[2], TABLE[3], m);
    byte_perm(lo, hi, ((u >> 1) & 0x4444) | 0x3210)
}

/// [`iq4_nl_dev_word`] of both halves of `x`, the masks made once for the two.
#[inline(always)]
pub fn iq4_nl_dev_words(x: u32) -> [u32; 2] {
    const TABLE: [u32; 4] = iq4_nl_table();
    let m = x & 0x7777_7777;
    let half = ((x >> 1) & 0x4444_4444) | 0x3210_3210;
    core::array::from_fn(|i| {
        let sh = 16 * i as u32;
        let lo = byte_perm(TABLE[0], TABLE[1], (m >> sh) & 0xffff);
        let hi = byte_perm(TABLE[2], TABLE[3], (m >> sh) & 0xffff);
        byte_perm(lo, hi, (half >> sh) & 0xffff)
    })
}

/// Rewrites `bytes`, whole blocks of type `w` in file order, into the kernels' layout in place:
/// Q2_0 into [`BlockQ2_0Dev`]'s order, IQ4_NL into [`BlockIq4NlDev`]'s; every other type is
/// read as the file has it. A partial block at the end is left as it is.
pub fn to_device_layout(w: WType, bytes: &mut [u8]) {
    let words: fn(u64) -> u64 = match w {
        WType::Q2_0 => q2_0_shuffle,
        WType::Iq4Nl => iq4_nl_unshuffle,
        _ => return,
    };
    const _: () = assert!(size_of::<BlockQ2_0Dev>() == size_of::<BlockIq4NlDev>());
    for blk in bytes.chunks_exact_mut(size_of::<BlockQ2_0Dev>()) {
        for half in blk[QS..].chunks_exact_mut(8) {
            let mut x = [0u8; 8];
            x.copy_from_slice(half);
            half.copy_from_slice(&words(u64::from_le_bytes(x)).to_le_bytes());
        }
    }
}

impl WeightBlock for BlockQ2_0Dev {
    const WTYPE: WType = WType::Q2_0;
    const GROUPS: usize = 2;
    #[inline(always)]
    fn group_q_in<R: BlockBytes>(b: R, g: usize) -> [u32; 8] {
        let base = QS + 8 * (g & 1);
        let w: [[u32; 2]; 4] = core::array::from_fn(|p| q2_0_dev_expand2(b.u16(base + 2 * p)));
        [
            w[0][0], w[0][1], w[1][0], w[1][1], w[2][0], w[2][1], w[3][0], w[3][1],
        ]
    }
    /// Words `2 t` and `2 t + 1` of a group are its 16-bit word t.
    const FRAG_PAIRS: bool = true;
    #[inline(always)]
    fn frag_q_in<R: BlockBytes>(b: R, g: usize, t: u32) -> [u32; 2] {
        q2_0_dev_expand2(b.u16(QS + 8 * (g & 1) + 2 * (t & 3) as usize))
    }
    #[inline(always)]
    fn group_scales_in<R: BlockBytes>(b: R, _g: usize) -> [f32; 2] {
        let d = d_of(b);
        [d, d]
    }
}

impl WeightBlock for BlockIq4NlDev {
    const WTYPE: WType = WType::Iq4Nl;
    const GROUPS: usize = 1;
    #[inline(always)]
    fn group_q_in<R: BlockBytes>(b: R, _g: usize) -> [u32; 8] {
        // Word j (j < 4) from the low half of 32-bit word j, word j + 4 from its high half.
        let mut w = [0u32; 8];
        for j in 0..4 {
            [w[j], w[j + 4]] = iq4_nl_dev_words(b.u32_at(QS + 4 * j));
        }
        w
    }
    #[inline(always)]
    fn frag_q_in<R: BlockBytes>(b: R, _g: usize, t: u32) -> [u32; 2] {
        let o = QS + 4 * (t & 3) as usize;
        [iq4_nl_dev_word(b.u16(o)), iq4_nl_dev_word(b.u16(o + 2))]
    }
    #[inline(always)]
    fn group_scales_in<R: BlockBytes>(b: R, _g: usize) -> [f32; 2] {
        let d = d_of(b);
        [d, d]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::{Mem, q2_0_expand};
    use crate::layout::{BlockIq4Nl, BlockQ2_0};

    /// Every 16-bit word: the device form's two words are the file form's two bytes decoded
    /// (each code on its own, `q2_0_expand`), and bits above the 16 are ignored.
    #[test]
    fn every_word_decodes_as_the_file() {
        for v in 0..65_536u64 {
            let want = [q2_0_expand(v as u8), q2_0_expand((v >> 8) as u8)];
            let d = q2_0_shuffle(v) as u32;
            assert!(d <= 0xffff, "{v:#x}: bits left the word");
            assert_eq!(q2_0_dev_expand2(d), want, "{v:#x}");
            assert_eq!(q2_0_dev_expand2(d | 0xabcd_0000), want, "{v:#x} high bits");
            // The shuffle works on each 16-bit word of a u64 alone.
            let x = v << 48 | 0x1b2d_e4c6_a593 & !(0xffff << 48) | v << 16;
            let y = q2_0_shuffle(x);
            for (i, sh) in [0, 16, 32, 48].into_iter().enumerate() {
                assert_eq!(
                    (y >> sh) & 0xffff,
                    q2_0_shuffle((x >> sh) & 0xffff),
                    "{x:#x} word {i}"
                );
            }
        }
    }

    /// Every 16 bits of a device-layout IQ4_NL word: byte k of its int8 word is the table's
    /// value of nibble k; and the two halves of a converted word are the file word's two.
    #[test]
    fn iq4_nl_words_decode_as_the_file() {
        use crate::formats::iq4_nl_values4;
        use crate::tables::KVALUES_IQ4NL;
        for u in 0..65_536u32 {
            let want = u32::from_le_bytes(core::array::from_fn(|k| {
                KVALUES_IQ4NL[((u >> (4 * k)) & 15) as usize] as u8
            }));
            assert_eq!(iq4_nl_dev_word(u), want, "{u:#x}");
            assert_eq!(iq4_nl_dev_word(u | 0xabcd_0000), want, "{u:#x} high bits");
        }
        let mut s = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..100_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let d = iq4_nl_unshuffle(s);
            assert_eq!(
                iq4_nl_dev_words(s as u32),
                [iq4_nl_dev_word(s as u32), iq4_nl_dev_word((s as u32) >> 16)]
            );
            for (i, sh) in [0, 32].into_iter().enumerate() {
                let (x, y) = ((s >> sh) as u32, (d >> sh) as u32);
                assert_eq!(
                    (iq4_nl_dev_word(y), iq4_nl_dev_word(y >> 16)),
                    iq4_nl_values4(x, crate::formats::words::iq4_nl_table()),
                    "{s:#x} word {i}"
                );
            }
        }
    }

    /// Random blocks converted: every group and every lane's fragment as the file's block
    /// decodes it, the scale unchanged; other types' bytes untouched.
    #[test]
    fn converted_blocks_decode_as_the_file() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut bytes = [0u8; 18 * 37 + 5];
        for b in bytes.iter_mut() {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            *b = s as u8;
        }
        let file = bytes;
        let mut other = bytes;
        to_device_layout(WType::Q8_0, &mut other);
        assert_eq!(other, file);
        same_blocks::<BlockQ2_0, BlockQ2_0Dev>(&file);
        same_blocks::<BlockIq4Nl, BlockIq4NlDev>(&file);
    }

    fn same_blocks<F: WeightBlock + bytemuck::Pod, D: WeightBlock + bytemuck::Pod>(file: &[u8]) {
        assert_eq!(F::WTYPE, D::WTYPE);
        let w = F::WTYPE;
        let bs = size_of::<F>();
        let n = file.len() / bs;
        let mut bytes = file.to_vec();
        to_device_layout(w, &mut bytes);
        assert_eq!(
            bytes[bs * n..],
            file[bs * n..],
            "{w:?}: the partial block moved"
        );
        for i in 0..n {
            let f: F = bytemuck::pod_read_unaligned(&file[bs * i..bs * (i + 1)]);
            let d: D = bytemuck::pod_read_unaligned(&bytes[bs * i..bs * (i + 1)]);
            assert_eq!(
                bytes[bs * i..bs * i + QS],
                file[bs * i..bs * i + QS],
                "{w:?} d"
            );
            for g in 0..F::GROUPS {
                assert_eq!(d.group_q(g), f.group_q(g), "{w:?} block {i} group {g}");
                assert_eq!(d.group_scales(g), f.group_scales(g));
                for t in 0..4 {
                    assert_eq!(
                        D::frag_q_in(Mem::of(&d), g, t),
                        F::frag_q_in(Mem::of(&f), g, t),
                        "{w:?} block {i} group {g} lane {t}"
                    );
                }
            }
        }
    }
}
