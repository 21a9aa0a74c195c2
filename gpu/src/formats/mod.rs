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

mod words;
use crate::tables::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS};
pub use words::{
    apply_signs4, byte_perm, iq4_nl_values4, q2_0_expand, q2_0_expand4, sign_mask4, vsub4,
};
use words::{iq4_nl_table, le_u32, qs_word};

/// THE list of weight formats: one row per type, as ggml's `mmq_type_traits` table - the
/// `WType` variant, its block struct (`gpu::layout`), and the names of its kernels: the MMQ
/// gate/up and down products and the pipelined MMQ product (gpu/src/moe/mmq/), the fused expert
/// kernels with this type as gate/up, 32- and 64-row tiles (gpu/src/moe/fused/), and the
/// weight-stationary tiers (gpu/src/moe/ws.rs). The kernels are stamped from it, and so are the
/// host's kernel table and its per-format dispatch (host/src/device.rs), whose exhaustive
/// `match` on `WType` stops the build when a type has no row.
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

impl WeightBlock for BlockQ2_0 {
    const WTYPE: WType = WType::Q2_0;
    const GROUPS: usize = 2;
    #[inline(always)]
    fn group_q(&self, g: usize) -> [u32; 8] {
        let base = 8 * (g & 1);
        let word = |k: usize| qs_word(&self.qs, k);
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

impl WeightBlock for BlockIq4Nl {
    const WTYPE: WType = WType::Iq4Nl;
    const GROUPS: usize = 1;
    #[inline(always)]
    fn group_q(&self, _g: usize) -> [u32; 8] {
        const TABLE: [u32; 4] = iq4_nl_table();
        let mut w = [0u32; 8];
        for j in 0..4 {
            let (lo, hi) = iq4_nl_values4(qs_word(&self.qs, 4 * j), TABLE);
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
