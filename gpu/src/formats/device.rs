//! Q2_0's device layout ([`BlockQ2_0Dev`]): the file's blocks with the codes of each 16-bit
//! word of `qs` reordered once on the host ([`to_device_layout`]), so that a kernel turns a
//! word of 8 codes into its two int8 words with two masks, one shift and two `prmt` lookups,
//! where the file's order (each byte's 4 codes spread to nibbles first) takes twice that.
//! The values, their scales and every sum are the file's: only the bits move.

use super::words::Q2_0_LEVELS;
use super::{BlockBytes, QS, WeightBlock, byte_perm, d_of};
use crate::layout::{BlockQ2_0Dev, WType};

/// The file's order -> the device order in each of the four 16-bit words of `x`: code i =
/// 4 w + m (bits `2 i ..`) moves to position 2 m + w, i.e. the codes 0..7 become 0, 4, 1, 5,
/// 2, 6, 3, 7. Two delta swaps: codes 2, 3 with 4, 5, then 1 with 4's new place (and 5 with 6).
#[inline(always)]
pub const fn q2_0_shuffle(x: u64) -> u64 {
    let t = ((x >> 4) ^ x) & 0x00f0_00f0_00f0_00f0;
    let x = x ^ t ^ (t << 4);
    let t = ((x >> 2) ^ x) & 0x0c0c_0c0c_0c0c_0c0c;
    x ^ t ^ (t << 2)
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

/// Rewrites `bytes`, whole blocks of type `w` in file order, into the kernels' layout in place:
/// Q2_0 into [`BlockQ2_0Dev`]'s order; every other type is read as the file has it. A partial
/// block at the end is left as it is.
pub fn to_device_layout(w: WType, bytes: &mut [u8]) {
    if w != WType::Q2_0 {
        return;
    }
    for blk in bytes.chunks_exact_mut(size_of::<BlockQ2_0Dev>()) {
        for half in blk[QS..].chunks_exact_mut(8) {
            let mut x = [0u8; 8];
            x.copy_from_slice(half);
            half.copy_from_slice(&q2_0_shuffle(u64::from_le_bytes(x)).to_le_bytes());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::{Mem, q2_0_expand};
    use crate::layout::BlockQ2_0;

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
        to_device_layout(WType::Iq4Nl, &mut other);
        assert_eq!(other, file);
        to_device_layout(WType::Q2_0, &mut bytes);
        assert_eq!(bytes[18 * 37..], file[18 * 37..], "the partial block moved");
        for i in 0..37 {
            let at = |x: &[u8]| x[18 * i..18 * (i + 1)].to_vec();
            let f: BlockQ2_0 = bytemuck::pod_read_unaligned(&at(&file));
            let d: BlockQ2_0Dev = bytemuck::pod_read_unaligned(&at(&bytes));
            assert_eq!(d.d, f.d);
            for g in 0..2 {
                assert_eq!(d.group_q(g), f.group_q(g), "block {i} group {g}");
                assert_eq!(d.group_scales(g), f.group_scales(g));
                for t in 0..4 {
                    assert_eq!(
                        BlockQ2_0Dev::frag_q_in(Mem::of(&d), g, t),
                        BlockQ2_0::frag_q_in(Mem::of(&f), g, t),
                        "block {i} group {g} lane {t}"
                    );
                }
            }
        }
    }
}
