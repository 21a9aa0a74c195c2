//! The eight weight formats decoded to MMQ's int8 form: for each 32-value group of a block, the
//! 32 int8 values in natural K order (4 per u32, value k in byte k % 4 of word k / 4) and the f32
//! scale(s) MMQ's tile loader produces (docs/ggml-reference.md §2, §4). Every decoded weight is exactly
//! `q * scale` (§2, "exactness property"), so `dequant` below is exact too.
//!
//! One source for kernels and the CPU reference. Indices into a block are masked to their range
//! so that the GPU code has no bounds-check path.

use crate::layout::{
    BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockIq4Nl, BlockQ2_0, BlockQ8_0,
    WType,
};
use crate::quant::f16_to_f32;
use crate::tables::{
    IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS, KVALUES_IQ4NL,
};

/// THE list of weight formats: one row per type, as ggml's `mmq_type_traits` table - the
/// `WType` variant, its block struct (`gpu::layout`), and the names of its kernels: the MMQ
/// gate/up and down products (gpu/src/moe/mmq.rs) and the fused expert kernels with this type as
/// gate/up, 32- and 64-row tiles (gpu/src/moe/fused/). The kernels are stamped from it, and so are the host's kernel
/// table and its per-format dispatch (host/src/device.rs), whose exhaustive `match` on `WType`
/// stops the build when a type has no row.
///
/// `for_each_format!(m)` expands to
/// `m! { (Variant, Block, gate_up_mmq, down_mmq, fused, fused_wide, mmq_pipe, ws_c16, ws_c32,
/// ws_c64, ws_c16_fast, ws_c32_fast), ... }`.
#[macro_export]
macro_rules! for_each_format {
    ($m:ident) => {
        $m! {
            (Q8_0, BlockQ8_0, moe_gate_up_q8_0_mmq, moe_down_q8_0_mmq, moe_experts_q8_0_fused, moe_experts_q8_0_fused_wide, moe_mmq_pipe_q8_0, moe_ws_q8_0_c16, moe_ws_q8_0_c32, moe_ws_q8_0_c64, moe_ws_q8_0_c16_fast, moe_ws_q8_0_c32_fast),
            (Q2_0, BlockQ2_0, moe_gate_up_q2_0_mmq, moe_down_q2_0_mmq, moe_experts_q2_0_fused, moe_experts_q2_0_fused_wide, moe_mmq_pipe_q2_0, moe_ws_q2_0_c16, moe_ws_q2_0_c32, moe_ws_q2_0_c64, moe_ws_q2_0_c16_fast, moe_ws_q2_0_c32_fast),
            (Iq4Nl, BlockIq4Nl, moe_gate_up_iq4_nl_mmq, moe_down_iq4_nl_mmq, moe_experts_iq4_nl_fused, moe_experts_iq4_nl_fused_wide, moe_mmq_pipe_iq4_nl, moe_ws_iq4_nl_c16, moe_ws_iq4_nl_c32, moe_ws_iq4_nl_c64, moe_ws_iq4_nl_c16_fast, moe_ws_iq4_nl_c32_fast),
            (Iq2Xxs, BlockIq2Xxs, moe_gate_up_iq2_xxs_mmq, moe_down_iq2_xxs_mmq, moe_experts_iq2_xxs_fused, moe_experts_iq2_xxs_fused_wide, moe_mmq_pipe_iq2_xxs, moe_ws_iq2_xxs_c16, moe_ws_iq2_xxs_c32, moe_ws_iq2_xxs_c64, moe_ws_iq2_xxs_c16_fast, moe_ws_iq2_xxs_c32_fast),
            (Iq2Xs, BlockIq2Xs, moe_gate_up_iq2_xs_mmq, moe_down_iq2_xs_mmq, moe_experts_iq2_xs_fused, moe_experts_iq2_xs_fused_wide, moe_mmq_pipe_iq2_xs, moe_ws_iq2_xs_c16, moe_ws_iq2_xs_c32, moe_ws_iq2_xs_c64, moe_ws_iq2_xs_c16_fast, moe_ws_iq2_xs_c32_fast),
            (Iq2S, BlockIq2S, moe_gate_up_iq2_s_mmq, moe_down_iq2_s_mmq, moe_experts_iq2_s_fused, moe_experts_iq2_s_fused_wide, moe_mmq_pipe_iq2_s, moe_ws_iq2_s_c16, moe_ws_iq2_s_c32, moe_ws_iq2_s_c64, moe_ws_iq2_s_c16_fast, moe_ws_iq2_s_c32_fast),
            (Iq3Xxs, BlockIq3Xxs, moe_gate_up_iq3_xxs_mmq, moe_down_iq3_xxs_mmq, moe_experts_iq3_xxs_fused, moe_experts_iq3_xxs_fused_wide, moe_mmq_pipe_iq3_xxs, moe_ws_iq3_xxs_c16, moe_ws_iq3_xxs_c32, moe_ws_iq3_xxs_c64, moe_ws_iq3_xxs_c16_fast, moe_ws_iq3_xxs_c32_fast),
            (Iq3S, BlockIq3S, moe_gate_up_iq3_s_mmq, moe_down_iq3_s_mmq, moe_experts_iq3_s_fused, moe_experts_iq3_s_fused_wide, moe_mmq_pipe_iq3_s, moe_ws_iq3_s_c16, moe_ws_iq3_s_c32, moe_ws_iq3_s_c64, moe_ws_iq3_s_c16_fast, moe_ws_iq3_s_c32_fast),
        }
    };
}

/// A weight block of one of the eight formats.
pub trait WeightBlock: Copy {
    const WTYPE: WType;
    /// 32-value groups per block.
    const GROUPS: usize;
    /// The int8 values of group `g` (values `32 g .. 32 g + 31` of the block), natural order.
    fn group_q(&self, g: usize) -> [u32; 8];
    /// The scales of group `g`: `[s, s]` for types with one scale per 32 values, `[first 16,
    /// last 16]` for IQ2_XS / IQ2_S.
    fn group_scales(&self, g: usize) -> [f32; 2];
}

/// Per-byte `a - b` (mod 256 in each byte, no borrow between bytes): CUDA's `__vsub4`.
#[inline(always)]
pub fn vsub4(a: u32, b: u32) -> u32 {
    ((a | 0x8080_8080).wrapping_sub(b & 0x7f7f_7f7f)) ^ ((a ^ !b) & 0x8080_8080)
}

/// Spreads the low 4 bits of `s` to byte masks: byte m = 0xff if bit m is set, else 0.
#[inline(always)]
pub fn sign_mask4(s: u32) -> u32 {
    ((s & 0xf).wrapping_mul(0x0020_4081) & 0x0101_0101).wrapping_mul(0xff)
}

/// Applies 4 sign bits to 4 unsigned grid bytes: byte m negated where bit m of `s` is set.
#[inline(always)]
pub fn apply_signs4(v: u32, s: u32) -> u32 {
    let m = sign_mask4(s);
    vsub4(v ^ m, m)
}

#[inline(always)]
fn le_u32(b0: u8, b1: u8, b2: u8, b3: u8) -> u32 {
    u32::from_le_bytes([b0, b1, b2, b3])
}

/// IQ2-style group of 8 values: a u64 grid entry and 8 sign bits -> 2 words.
#[inline(always)]
fn grid8(entry: u64, signs: u32) -> [u32; 2] {
    [
        apply_signs4(entry as u32, signs),
        apply_signs4((entry >> 32) as u32, signs >> 4),
    ]
}

impl WeightBlock for BlockQ8_0 {
    const WTYPE: WType = WType::Q8_0;
    const GROUPS: usize = 1;
    #[inline(always)]
    fn group_q(&self, _g: usize) -> [u32; 8] {
        let q = &self.qs;
        let mut w = [0u32; 8];
        for (j, w) in w.iter_mut().enumerate() {
            *w = le_u32(
                q[4 * j] as u8,
                q[4 * j + 1] as u8,
                q[4 * j + 2] as u8,
                q[4 * j + 3] as u8,
            );
        }
        w
    }
    #[inline(always)]
    fn group_scales(&self, _g: usize) -> [f32; 2] {
        let d = f16_to_f32(self.d);
        [d, d]
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

/// Four Q2_0 bytes (little-endian in `x`) -> four words of int8 `c - 1`: word j is
/// [`q2_0_expand`] of byte j, computed on whole words: the codes of position i of every byte
/// (`(x >> 2i) & 0x03030303`), each byte moved to `c - 1` (`(c + 0x7f) ^ 0x80`, no carry
/// between bytes), then a 4 x 4 byte transpose in eight `prmt`s.
#[inline(always)]
pub fn q2_0_expand4(x: u32) -> [u32; 4] {
    let t = |i: u32| (((x >> (2 * i)) & 0x0303_0303) + 0x7f7f_7f7f) ^ 0x8080_8080;
    let (t0, t1, t2, t3) = (t(0), t(1), t(2), t(3));
    let a = byte_perm(t0, t1, 0x5140);
    let b = byte_perm(t2, t3, 0x5140);
    let c = byte_perm(t0, t1, 0x7362);
    let d = byte_perm(t2, t3, 0x7362);
    [
        byte_perm(a, b, 0x5410),
        byte_perm(a, b, 0x7632),
        byte_perm(c, d, 0x5410),
        byte_perm(c, d, 0x7632),
    ]
}

impl WeightBlock for BlockQ2_0 {
    const WTYPE: WType = WType::Q2_0;
    const GROUPS: usize = 2;
    #[inline(always)]
    fn group_q(&self, g: usize) -> [u32; 8] {
        let base = 8 * (g & 1);
        // Two 16-bit loads per word (qs starts 2 bytes into a 2-byte aligned block).
        let half = |k: usize| -> u32 {
            // SAFETY: k + 1 < 16 (k <= 14, even): inside qs; qs is 2-byte aligned (offset 2
            // of a `repr(C)` block whose alignment is 2).
            unsafe { (self.qs.as_ptr().add(k) as *const u16).read() as u32 }
        };
        let word = |k: usize| half(k) | half(k + 2) << 16;
        let lo = q2_0_expand4(word(base));
        let hi = q2_0_expand4(word(base + 4));
        [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]]
    }
    #[inline(always)]
    fn group_scales(&self, _g: usize) -> [f32; 2] {
        let d = f16_to_f32(self.d);
        [d, d]
    }
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
const fn iq4_nl_table() -> [u32; 4] {
    let k = KVALUES_IQ4NL;
    let mut w = [0u32; 4];
    let mut i = 0;
    while i < 16 {
        w[i / 4] |= (k[i] as u8 as u32) << (8 * (i % 4));
        i += 1;
    }
    w
}

impl WeightBlock for BlockIq4Nl {
    const WTYPE: WType = WType::Iq4Nl;
    const GROUPS: usize = 1;
    #[inline(always)]
    fn group_q(&self, _g: usize) -> [u32; 8] {
        const TABLE: [u32; 4] = iq4_nl_table();
        // Two 16-bit loads per word (qs starts 2 bytes into a 2-byte aligned block).
        let half = |k: usize| -> u32 {
            // SAFETY: k + 1 < 16 (k <= 14, even): inside qs; qs is 2-byte aligned (offset 2
            // of a `repr(C)` block whose alignment is 2).
            unsafe { (self.qs.as_ptr().add(k) as *const u16).read() as u32 }
        };
        let mut w = [0u32; 8];
        for j in 0..4 {
            let (lo, hi) = iq4_nl_values4(half(4 * j) | half(4 * j + 2) << 16, TABLE);
            w[j] = lo;
            w[j + 4] = hi;
        }
        w
    }
    #[inline(always)]
    fn group_scales(&self, _g: usize) -> [f32; 2] {
        let d = f16_to_f32(self.d);
        [d, d]
    }
}

impl WeightBlock for BlockIq2Xxs {
    const WTYPE: WType = WType::Iq2Xxs;
    const GROUPS: usize = 8;
    #[inline(always)]
    fn group_q(&self, g: usize) -> [u32; 8] {
        let o = 8 * (g & 7);
        let q = &self.qs;
        let aux = le_u32(q[o + 4], q[o + 5], q[o + 6], q[o + 7]);
        let mut w = [0u32; 8];
        for l in 0..4 {
            let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize] as u32;
            let [a, b] = grid8(IQ2XXS_GRID[q[o + l] as usize], signs);
            w[2 * l] = a;
            w[2 * l + 1] = b;
        }
        w
    }
    #[inline(always)]
    fn group_scales(&self, g: usize) -> [f32; 2] {
        let o = 8 * (g & 7);
        let s = (self.qs[o + 7] >> 4) as u32;
        // d * (0.5 + s) * 0.25 == d * (2 s + 1) / 8, exactly (16-bit product).
        let v = f16_to_f32(self.d) * (2 * s + 1) as f32 * 0.125;
        [v, v]
    }
}

/// `d * (0.5 + s) * 0.25` for a 4-bit scale `s`: IQ2_XS / IQ2_S sub-scales (exact).
#[inline(always)]
fn iq2_sub_scale(d: f32, s: u8) -> f32 {
    d * (2 * (s as u32 & 15) + 1) as f32 * 0.125
}

impl WeightBlock for BlockIq2Xs {
    const WTYPE: WType = WType::Iq2Xs;
    const GROUPS: usize = 8;
    #[inline(always)]
    fn group_q(&self, g: usize) -> [u32; 8] {
        let o = 4 * (g & 7);
        let mut w = [0u32; 8];
        for l in 0..4 {
            let q = self.qs[o + l] as u32;
            let signs = KSIGNS_IQ2XS[(q >> 9) as usize & 127] as u32;
            let [a, b] = grid8(IQ2XS_GRID[(q & 511) as usize], signs);
            w[2 * l] = a;
            w[2 * l + 1] = b;
        }
        w
    }
    #[inline(always)]
    fn group_scales(&self, g: usize) -> [f32; 2] {
        let d = f16_to_f32(self.d);
        let s = self.scales[g & 7];
        [iq2_sub_scale(d, s), iq2_sub_scale(d, s >> 4)]
    }
}

impl WeightBlock for BlockIq2S {
    const WTYPE: WType = WType::Iq2S;
    const GROUPS: usize = 8;
    #[inline(always)]
    fn group_q(&self, g: usize) -> [u32; 8] {
        let ib = g & 7;
        let qh = self.qh[ib] as usize;
        let mut w = [0u32; 8];
        for l in 0..4 {
            let idx = self.qs[4 * ib + l] as usize | ((qh >> (2 * l)) & 3) << 8;
            let signs = self.qs[32 + 4 * ib + l] as u32;
            let [a, b] = grid8(IQ2S_GRID[idx], signs);
            w[2 * l] = a;
            w[2 * l + 1] = b;
        }
        w
    }
    #[inline(always)]
    fn group_scales(&self, g: usize) -> [f32; 2] {
        let d = f16_to_f32(self.d);
        let s = self.scales[g & 7];
        [iq2_sub_scale(d, s), iq2_sub_scale(d, s >> 4)]
    }
}

impl WeightBlock for BlockIq3Xxs {
    const WTYPE: WType = WType::Iq3Xxs;
    const GROUPS: usize = 8;
    #[inline(always)]
    fn group_q(&self, g: usize) -> [u32; 8] {
        let ib = g & 7;
        let q = &self.qs;
        let o = 64 + 4 * ib;
        let aux = le_u32(q[o], q[o + 1], q[o + 2], q[o + 3]);
        let mut w = [0u32; 8];
        for l in 0..4 {
            let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize] as u32;
            w[2 * l] = apply_signs4(IQ3XXS_GRID[q[8 * ib + 2 * l] as usize], signs);
            w[2 * l + 1] = apply_signs4(IQ3XXS_GRID[q[8 * ib + 2 * l + 1] as usize], signs >> 4);
        }
        w
    }
    #[inline(always)]
    fn group_scales(&self, g: usize) -> [f32; 2] {
        let s = (self.qs[64 + 4 * (g & 7) + 3] >> 4) as u32;
        // d * (0.5 + s) * 0.5 == d * (2 s + 1) / 4, exactly.
        let v = f16_to_f32(self.d) * (2 * s + 1) as f32 * 0.25;
        [v, v]
    }
}

impl WeightBlock for BlockIq3S {
    const WTYPE: WType = WType::Iq3S;
    const GROUPS: usize = 8;
    #[inline(always)]
    fn group_q(&self, g: usize) -> [u32; 8] {
        let ib = g & 7;
        let qh = self.qh[ib] as usize;
        let mut w = [0u32; 8];
        for l in 0..4 {
            let i0 = self.qs[8 * ib + 2 * l] as usize | ((qh >> (2 * l)) & 1) << 8;
            let i1 = self.qs[8 * ib + 2 * l + 1] as usize | ((qh >> (2 * l + 1)) & 1) << 8;
            let signs = self.signs[4 * ib + l] as u32;
            w[2 * l] = apply_signs4(IQ3S_GRID[i0], signs);
            w[2 * l + 1] = apply_signs4(IQ3S_GRID[i1], signs >> 4);
        }
        w
    }
    #[inline(always)]
    fn group_scales(&self, g: usize) -> [f32; 2] {
        let ib = g & 7;
        let s = ((self.scales[ib / 2] >> (4 * (ib % 2))) & 15) as u32;
        let v = f16_to_f32(self.d) * (1 + 2 * s) as f32;
        [v, v]
    }
}

/// The int8 value at position `k` (0..32) of a decoded group.
#[inline(always)]
pub fn word_value(w: &[u32; 8], k: usize) -> i8 {
    (w[k / 4] >> (8 * (k % 4))) as u8 as i8
}

/// Dequantizes one block into `out` (`B::GROUPS * 32` values): `q * scale`, exact.
pub fn dequant<B: WeightBlock>(b: &B, out: &mut [f32]) {
    for g in 0..B::GROUPS {
        let w = b.group_q(g);
        let s = b.group_scales(g);
        for k in 0..32 {
            out[32 * g + k] = word_value(&w, k) as f32 * s[k / 16];
        }
    }
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
        for s in 0..16u32 {
            let v = 0x2b19_0843u32;
            let got = apply_signs4(v, s).to_le_bytes();
            for (m, (&g, &b)) in got.iter().zip(&v.to_le_bytes()).enumerate() {
                let b = b as i8;
                let want = if s >> m & 1 == 1 { -b } else { b };
                assert_eq!(g as i8, want);
            }
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
