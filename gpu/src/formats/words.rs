//! Word-level helpers of the decoders (gpu/src/formats/mod.rs): byte-wise arithmetic on u32
//! words and the `prmt`-based expansions of Q2_0 codes and IQ4_NL nibbles. Shared by the host
//! and the kernels, so both sides compute the same bytes; the tests compare each word form with
//! its byte-by-byte definition.

use crate::tables::KVALUES_IQ4NL;

/// Per-byte `a - b` (mod 256 in each byte, no borrow between bytes): CUDA's `__vsub4`.
#[inline(always)]
pub fn vsub4(a: u32, b: u32) -> u32 {
    ((a | 0x8080_8080).wrapping_sub(b & 0x7f7f_7f7f)) ^ ((a ^ !b) & 0x8080_8080)
}

/// Spreads the low 4 bits of `s` to byte masks: byte m = 0xff if bit m is set, else 0. The
/// multiply moves bit m to bit 8m + 7 (the four partial products land on distinct bits: no
/// carry), then one `prmt` in sign mode replicates each byte's top bit over the byte.
#[inline(always)]
pub fn sign_mask4(s: u32) -> u32 {
    byte_signs((s & 0xf).wrapping_mul(0x1020_4080))
}

/// Applies 4 sign bits to 4 grid bytes, each in 1..=127 (every IQ2/IQ3 grid's are: the test
/// `grid_bytes_are_small_and_nonzero`): byte m negated where bit m of `s` is set, as
/// `(v ^ m) + (m & 0x01)` per byte - `!v + 1` is at most 255 for v >= 1, so no carry crosses
/// into the next byte and one 32-bit add does all four.
#[inline(always)]
pub fn apply_signs4(v: u32, s: u32) -> u32 {
    let m = sign_mask4(s);
    (v ^ m).wrapping_add(m & 0x0101_0101)
}

/// Each byte of `x` replaced by its top bit replicated (0xff or 0): PTX `prmt` with the sign
/// flag in every selector nibble (`0xba98`). One instruction on the GPU.
#[inline(always)]
pub fn byte_signs(x: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::ptx::prmt(x, 0, 0xba98)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        u32::from_le_bytes(
            x.to_le_bytes()
                .map(|b| if b & 0x80 != 0 { 0xff } else { 0 }),
        )
    }
}

/// Four 2-bit codes of one Q2_0 byte -> four int8 `c - 1`.
#[inline(always)]
pub fn q2_0_expand(b: u8) -> u32 {
    let b = b as u32;
    let w = (b & 3) | ((b >> 2) & 3) << 8 | ((b >> 4) & 3) << 16 | ((b >> 6) & 3) << 24;
    vsub4(w, 0x0101_0101)
}

/// PTX `prmt.b32` (default mode) with selector nibbles below 8: byte i of the result is byte
/// `(sel >> 4i) & 7` of the 8 bytes `b:a` (a first). One `prmt` on the GPU, the same bytes
/// computed on the host. Only the low 16 bits of `sel` count; each of their nibbles must have
/// its top bit clear (with it set, `prmt` replicates the byte's sign instead).
#[inline(always)]
pub fn byte_perm(a: u32, b: u32, sel: u32) -> u32 {
    debug_assert!(
        sel & 0x8888 == 0,
        "prmt selector {sel:#x} has a sign-mode nibble"
    );
    #[cfg(target_arch = "nvptx64")]
    {
        crate::ptx::prmt(a, b, sel)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let v = a as u64 | (b as u64) << 32;
        (0..4).fold(0, |r, i| {
            let s = (sel >> (4 * i)) & 7;
            r | (((v >> (8 * s)) & 0xff) as u32) << (8 * i)
        })
    }
}

/// The Q2_0 levels as a `prmt` table: byte c is c - 1.
pub(super) const Q2_0_LEVELS: u32 = 0x0201_00ff;

/// Four Q2_0 bytes (little-endian in `x`) -> four words of int8 `c - 1`: word j is
/// [`q2_0_expand`] of byte j. The codes are spread to one per nibble (two bytes at a time: the
/// bytes moved 16 bits apart, then nibble and bit-pair shifts under masks), and each word is one
/// `prmt` table lookup of the levels -1, 0, 1, 2 by 4 nibbles: 16 instructions, where the
/// shift-and-transpose form took 23.
#[inline(always)]
pub fn q2_0_expand4(x: u32) -> [u32; 4] {
    // y = [b, 0, b', 0] -> the codes of b in nibbles 0..3, of b' in nibbles 4..7.
    let spread = |y: u32| {
        let z = (y | (y << 4)) & 0x0f0f_0f0f;
        (z | (z << 2)) & 0x3333_3333
    };
    let lo = spread(byte_perm(x, 0, 0x4140));
    let hi = spread(byte_perm(x, 0, 0x4342));
    // prmt reads the selector's low 16 bits.
    [
        byte_perm(Q2_0_LEVELS, 0, lo),
        byte_perm(Q2_0_LEVELS, 0, lo >> 16),
        byte_perm(Q2_0_LEVELS, 0, hi),
        byte_perm(Q2_0_LEVELS, 0, hi >> 16),
    ]
}

/// The [`q2_0_expand`] words of the two bytes of a 16-bit word (low byte first), as
/// [`q2_0_expand4`] spreads and looks up a pair: the bytes moved 16 bits apart by one `prmt`,
/// their codes one per nibble, one `prmt` lookup per byte.
#[inline(always)]
pub fn q2_0_expand2_u16(v: u32) -> [u32; 2] {
    q2_0_expand_spaced(byte_perm(v, 0, 0x4140))
}

/// The [`q2_0_expand`] words of bytes 0 and 2 of `y` (bytes 1 and 3 zero).
#[inline(always)]
fn q2_0_expand_spaced(y: u32) -> [u32; 2] {
    let z = (y | (y << 4)) & 0x0f0f_0f0f;
    let s = (z | (z << 2)) & 0x3333_3333;
    [
        byte_perm(Q2_0_LEVELS, 0, s),
        byte_perm(Q2_0_LEVELS, 0, s >> 16),
    ]
}

/// The IQ2 grids' three levels as a `prmt` table of 8 bytes: bytes 0, 1, 2 the levels 8, 25,
/// 43 (codes 0, 1, 2), bytes 4, 5, 6 their negations (every byte of IQ2_XXS's, IQ2_XS's and
/// IQ2_S's grids is a level: the test `iq2_grids_are_level_codes`).
const IQ2_LEVELS: [u32; 2] = [0x002b_1908, 0x00d5_e7f8];

/// An IQ2 grid entry (8 level bytes, `IQ2_LEVELS`) as 8 code nibbles: nibble j the code of
/// byte j (0, 1, 2 for 8, 25, 43; 3 for a byte that is no level, which no grid has).
pub const fn iq2_entry_codes(entry: u64) -> u32 {
    let mut codes = 0;
    let mut j = 0;
    while j < 8 {
        let c = match (entry >> (8 * j)) as u8 {
            8 => 0,
            25 => 1,
            43 => 2,
            _ => 3,
        };
        codes |= c << (4 * j);
        j += 1;
    }
    codes
}

/// Bit j of the sign byte `s` (bits above 8 ignored) moved to bit 4 j + 2, j < 8: the bits
/// spread apart three times (to 16, then 8, then 4 apart), each a multiply whose partial
/// products land on distinct bits (no carry) and a mask.
#[inline(always)]
fn iq2_sign_nibbles(s: u32) -> u32 {
    let x = (s & 0xff).wrapping_mul(0x1001) & 0x000f_000f;
    let x = x.wrapping_mul(0x41) & 0x0303_0303;
    x.wrapping_mul(9 << 2) & 0x4444_4444
}

/// The 8 signed int8 values of an IQ2 grid entry given as `iq2_entry_codes` and its 8 sign
/// bits (byte j negated where bit j of `signs` is set), as two words: each byte a `prmt`
/// lookup in `IQ2_LEVELS` whose selector nibble is the code with the sign as its bit 2. The
/// same words as [`apply_signs4`] on the entry's bytes.
#[inline(always)]
pub fn iq2_signed_values(codes: u32, signs: u32) -> [u32; 2] {
    let sel = codes | iq2_sign_nibbles(signs);
    // prmt reads the selector's low 16 bits.
    [
        byte_perm(IQ2_LEVELS[0], IQ2_LEVELS[1], sel),
        byte_perm(IQ2_LEVELS[0], IQ2_LEVELS[1], sel >> 16),
    ]
}

/// The IQ4_NL values of the 8 nibbles of 4 bytes (little-endian in `x`), from a 16-entry
/// table of int8 held as 4 words: (the low nibbles' values, the high nibbles'), byte j of each
/// from byte j of `x`. The table lookup is done in `prmt`s, 8 values at a time: the low 3 bits
/// of each nibble select within both table halves, its top bit picks the half, then two
/// `prmt`s separate low and high nibbles.
#[inline(always)]
pub fn iq4_nl_values4(x: u32, table: [u32; 4]) -> (u32, u32) {
    let m = x & 0x7777_7777;
    let half = ((x & 0x8888_8888) >> 1) | 0x3210_3210;
    let mut t = [0u32; 2];
    for (i, t) in t.iter_mut().enumerate() {
        let sh = 16 * i as u32;
        let lo = byte_perm(table[0], table[1], (m >> sh) & 0xffff);
        let hi = byte_perm(table[2], table[3], (m >> sh) & 0xffff);
        *t = byte_perm(lo, hi, (half >> sh) & 0xffff);
    }
    (byte_perm(t[0], t[1], 0x6420), byte_perm(t[0], t[1], 0x7531))
}

/// `KVALUES_IQ4NL` as 4 little-endian words (for [`iq4_nl_values4`]).
pub(crate) const fn iq4_nl_table() -> [u32; 4] {
    let k = KVALUES_IQ4NL;
    let mut w = [0u32; 4];
    let mut i = 0;
    while i < 16 {
        w[i / 4] |= (k[i] as u8 as u32) << (8 * (i % 4));
        i += 1;
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vsub4_is_bytewise() {
        let mut s = 7u64;
        for _ in 0..100_000 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let (a, b) = ((s >> 32) as u32, s as u32);
            let want = u32::from_le_bytes(core::array::from_fn(|i| {
                a.to_le_bytes()[i].wrapping_sub(b.to_le_bytes()[i])
            }));
            assert_eq!(vsub4(a, b), want);
        }
    }

    #[test]
    fn signs_negate_bytes() {
        let mut r = 11u64;
        for i in 0..200_000u32 {
            r = r
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Grid-like bytes (1..=127), every pair of byte values at the edges, and every s
            // below 256 (callers pass a whole sign byte or its upper half).
            let v = u32::from_le_bytes(((r >> 8) as u32).to_le_bytes().map(|b| 1 + b % 127));
            let v = if i < 4 {
                [0x0101_0101, 0x7f7f_7f7f, 0x017f_017f, 0x7f01_7f01][i as usize]
            } else {
                v
            };
            let s = (r >> 40) as u32 & 0xff;
            let got = apply_signs4(v, s).to_le_bytes();
            for (m, (&g, &b)) in got.iter().zip(&v.to_le_bytes()).enumerate() {
                let b = b as i8;
                let want = if s >> m & 1 == 1 { -b } else { b };
                assert_eq!(g as i8, want, "v {v:#x} s {s:#x} byte {m}");
            }
            let mask = sign_mask4(s).to_le_bytes();
            for (m, &x) in mask.iter().enumerate() {
                assert_eq!(x, if s >> m & 1 == 1 { 0xff } else { 0 });
            }
        }
    }

    #[test]
    fn byte_signs_replicates_top_bits() {
        for x in [
            0u32,
            0x8000_0000,
            0x7f80_0180,
            0xffff_ffff,
            0x1234_5678,
            0x89ab_cdef,
        ] {
            let want = u32::from_le_bytes(x.to_le_bytes().map(|b| ((b as i8) >> 7) as u8));
            assert_eq!(byte_signs(x), want, "{x:#x}");
        }
    }

    /// `apply_signs4`'s precondition: every byte of every IQ2/IQ3 grid is in 1..=127.
    #[test]
    fn grid_bytes_are_small_and_nonzero() {
        use crate::tables::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID};
        let ok = |b: u8| (1..=127).contains(&b);
        for g in IQ2XXS_GRID.iter().chain(&IQ2XS_GRID).chain(&IQ2S_GRID) {
            assert!(g.to_le_bytes().into_iter().all(ok), "{g:#x}");
        }
        for g in IQ3XXS_GRID.iter().chain(&IQ3S_GRID) {
            assert!(g.to_le_bytes().into_iter().all(ok), "{g:#x}");
        }
    }

    /// Every IQ2 grid entry is 8 level codes, and its `prmt` lookup with every sign byte gives
    /// the bytes of `apply_signs4` on the entry.
    #[test]
    fn iq2_grids_are_level_codes() {
        use crate::tables::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID};
        for &e in IQ2XXS_GRID.iter().chain(&IQ2XS_GRID).chain(&IQ2S_GRID) {
            let codes = iq2_entry_codes(e);
            assert_eq!(codes & 0x3333_3333, codes, "{e:#x}");
            assert_eq!(
                (0..8)
                    .map(|j| (codes >> (4 * j)) & 3)
                    .filter(|&c| c == 3)
                    .count(),
                0,
                "{e:#x} has a byte that is no level"
            );
            for s in 0..256u32 {
                let want = [
                    apply_signs4(e as u32, s),
                    apply_signs4((e >> 32) as u32, s >> 4),
                ];
                assert_eq!(iq2_signed_values(codes, s), want, "{e:#x} signs {s:#x}");
            }
        }
        for s in 0..256u32 {
            let want = (0..8).fold(0, |r, j| r | ((s >> j) & 1) << (4 * j + 2));
            assert_eq!(iq2_sign_nibbles(s), want, "{s:#x}");
            assert_eq!(
                iq2_sign_nibbles(s | 0xabcd_e700),
                want,
                "{s:#x} with high bits"
            );
        }
    }

    #[test]
    fn q2_0_pairs_expand_as_single_bytes() {
        for b in 0..65_536u32 {
            let want = [q2_0_expand(b as u8), q2_0_expand((b >> 8) as u8)];
            assert_eq!(q2_0_expand2_u16(b), want, "{b:#x}");
            // Bits above the 16 are ignored.
            assert_eq!(q2_0_expand2_u16(b | 0xabcd_0000), want, "{b:#x}");
        }
    }

    #[test]
    fn q2_0_codes() {
        // codes 0,1,2,3 -> -1,0,1,2 ; element 0 in the low bits
        assert_eq!(q2_0_expand(0b11_10_01_00).to_le_bytes(), [0xff, 0, 1, 2]);
        // The word-level form equals the byte form for every byte in every position.
        for b in 0..=255u8 {
            for pos in 0..4 {
                let x = (b as u32) << (8 * pos) | 0x1b1b_1b1b & !(0xff << (8 * pos));
                let w = q2_0_expand4(x);
                for (j, w) in w.iter().enumerate() {
                    assert_eq!(*w, q2_0_expand((x >> (8 * j)) as u8), "{b:#x} at {pos}");
                }
            }
        }
        // IQ4_NL: the prmt lookup equals the table for every byte in every position.
        let kv = |n: u32| KVALUES_IQ4NL[(n & 15) as usize] as u8 as u32;
        let scalar = |x: u32| {
            (0..4).fold((0u32, 0u32), |(lo, hi), j| {
                let b = x >> (8 * j);
                (lo | kv(b) << (8 * j), hi | kv(b >> 4) << (8 * j))
            })
        };
        for b in 0..=255u32 {
            for pos in 0..4 {
                let x = b << (8 * pos) | 0x5a3c_e187 & !(0xff << (8 * pos));
                assert_eq!(
                    iq4_nl_values4(x, iq4_nl_table()),
                    scalar(x),
                    "{b:#x} at {pos}"
                );
            }
        }
        let mut s = 0x9e37_79b9u32;
        for _ in 0..100_000 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            assert_eq!(iq4_nl_values4(s, iq4_nl_table()), scalar(s));
        }
        let mut s = 0x9e37_79b9u32;
        for _ in 0..100_000 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            let w = q2_0_expand4(s);
            for (j, w) in w.iter().enumerate() {
                assert_eq!(*w, q2_0_expand((s >> (8 * j)) as u8));
            }
        }
    }
}
