//! The eight weight formats decoded to MMQ's int8 form: for each 32-value group of a block, the
//! 32 int8 values in natural K order (4 per u32, value k in byte k % 4 of word k / 4) and the f32
//! scale(s) MMQ's tile loader produces (docs/ggml-reference.md §2, §4). Every decoded weight is exactly
//! `q * scale` (§2, "exactness property"), so `dequant` below is exact too.
//!
//! One source for kernels and the CPU reference. Indices into a block are masked to their range
//! so that the GPU code has no bounds-check path. The trait, the block readers and Q8_0, Q2_0,
//! IQ4_NL here; the five grid formats in iq.rs; word-level helpers in words.rs.

use crate::layout::{BlockIq4Nl, BlockQ2_0, BlockQ8_0, WType};
use crate::quant::f16_scale_to_f32;
use crate::tables::KSIGNS_IQ2XS;

mod device;
mod iq;
mod lookup;
mod words;
pub use device::to_device_layout;
#[cfg(target_arch = "nvptx64")]
pub use lookup::SharedTables;
pub use lookup::lookup_table_word;
use words::iq4_nl_table;
pub use words::{
    apply_signs4, byte_perm, iq2_signed_values, iq4_nl_values4, q2_0_expand, q2_0_expand2_u16,
    q2_0_expand4, sign_mask4, vsub4,
};

/// THE list of weight formats: one row per type, as ggml's `mmq_type_traits` table - the
/// `WType` variant, the block struct its kernels decode (`gpu::layout`: the file's, or its
/// device layout where the host converts the tensor on upload, [`to_device_layout`]), and the
/// names of its kernels: the MMQ gate/up and down products and the pipelined MMQ products,
/// wide and narrow, each also as a gate/up product with the SwiGLU + q8_1 epilogue
/// (gpu/src/moe/mmq/), the fused expert kernels with this type as gate/up, 32- and 64-row
/// tiles (gpu/src/moe/fused/), in MMQ's numerics and (last in the row) in the Q2_0 shared-d
/// variant, the weight-stationary tiers (gpu/src/moe/ws/), and the
/// narrow MMQ product's resident form, its form built with tensor copies only and the flat
/// product warp specialized (all three in sm_90 modules only). The kernels are stamped from it, and so are the
/// host's kernel table and its per-format dispatch (host/src/device.rs), whose exhaustive
/// `match` on `WType` stops the build when a type has no row.
///
/// `for_each_format!(m)` expands to
/// `m! { (Variant, Block, gate_up_mmq, down_mmq, fused, fused_wide, mmq_pipe, mmq_narrow,
/// mmq_pipe_swiglu, mmq_narrow_swiglu, mmq_flat, mmq_flat_swiglu, ws_c16, ws_c32, ws_c64,
/// ws_c16_fast, ws_c32_fast, mmq_resident, mmq_narrow_tma, fused_sd, fused_wide_sd,
/// mmq_flat_ws), ... }`.
#[macro_export]
macro_rules! for_each_format {
    ($m:ident) => {
        $m! {
            (Q8_0, BlockQ8_0, moe_gate_up_q8_0_mmq, moe_down_q8_0_mmq, moe_experts_q8_0_fused, moe_experts_q8_0_fused_wide, moe_mmq_pipe_q8_0, moe_mmq_narrow_q8_0, moe_mmq_pipe_swiglu_q8_0, moe_mmq_narrow_swiglu_q8_0, moe_mmq_flat_q8_0, moe_mmq_flat_swiglu_q8_0, moe_ws_q8_0_c16, moe_ws_q8_0_c32, moe_ws_q8_0_c64, moe_ws_q8_0_c16_fast, moe_ws_q8_0_c32_fast, moe_mmq_resident_q8_0, moe_mmq_narrow_tma_q8_0, moe_experts_q8_0_fused_sd, moe_experts_q8_0_fused_wide_sd, moe_mmq_flat_ws_q8_0),
            (Q2_0, BlockQ2_0Dev, moe_gate_up_q2_0_mmq, moe_down_q2_0_mmq, moe_experts_q2_0_fused, moe_experts_q2_0_fused_wide, moe_mmq_pipe_q2_0, moe_mmq_narrow_q2_0, moe_mmq_pipe_swiglu_q2_0, moe_mmq_narrow_swiglu_q2_0, moe_mmq_flat_q2_0, moe_mmq_flat_swiglu_q2_0, moe_ws_q2_0_c16, moe_ws_q2_0_c32, moe_ws_q2_0_c64, moe_ws_q2_0_c16_fast, moe_ws_q2_0_c32_fast, moe_mmq_resident_q2_0, moe_mmq_narrow_tma_q2_0, moe_experts_q2_0_fused_sd, moe_experts_q2_0_fused_wide_sd, moe_mmq_flat_ws_q2_0),
            (Iq4Nl, BlockIq4NlDev, moe_gate_up_iq4_nl_mmq, moe_down_iq4_nl_mmq, moe_experts_iq4_nl_fused, moe_experts_iq4_nl_fused_wide, moe_mmq_pipe_iq4_nl, moe_mmq_narrow_iq4_nl, moe_mmq_pipe_swiglu_iq4_nl, moe_mmq_narrow_swiglu_iq4_nl, moe_mmq_flat_iq4_nl, moe_mmq_flat_swiglu_iq4_nl, moe_ws_iq4_nl_c16, moe_ws_iq4_nl_c32, moe_ws_iq4_nl_c64, moe_ws_iq4_nl_c16_fast, moe_ws_iq4_nl_c32_fast, moe_mmq_resident_iq4_nl, moe_mmq_narrow_tma_iq4_nl, moe_experts_iq4_nl_fused_sd, moe_experts_iq4_nl_fused_wide_sd, moe_mmq_flat_ws_iq4_nl),
            (Iq2Xxs, BlockIq2Xxs, moe_gate_up_iq2_xxs_mmq, moe_down_iq2_xxs_mmq, moe_experts_iq2_xxs_fused, moe_experts_iq2_xxs_fused_wide, moe_mmq_pipe_iq2_xxs, moe_mmq_narrow_iq2_xxs, moe_mmq_pipe_swiglu_iq2_xxs, moe_mmq_narrow_swiglu_iq2_xxs, moe_mmq_flat_iq2_xxs, moe_mmq_flat_swiglu_iq2_xxs, moe_ws_iq2_xxs_c16, moe_ws_iq2_xxs_c32, moe_ws_iq2_xxs_c64, moe_ws_iq2_xxs_c16_fast, moe_ws_iq2_xxs_c32_fast, moe_mmq_resident_iq2_xxs, moe_mmq_narrow_tma_iq2_xxs, moe_experts_iq2_xxs_fused_sd, moe_experts_iq2_xxs_fused_wide_sd, moe_mmq_flat_ws_iq2_xxs),
            (Iq2Xs, BlockIq2Xs, moe_gate_up_iq2_xs_mmq, moe_down_iq2_xs_mmq, moe_experts_iq2_xs_fused, moe_experts_iq2_xs_fused_wide, moe_mmq_pipe_iq2_xs, moe_mmq_narrow_iq2_xs, moe_mmq_pipe_swiglu_iq2_xs, moe_mmq_narrow_swiglu_iq2_xs, moe_mmq_flat_iq2_xs, moe_mmq_flat_swiglu_iq2_xs, moe_ws_iq2_xs_c16, moe_ws_iq2_xs_c32, moe_ws_iq2_xs_c64, moe_ws_iq2_xs_c16_fast, moe_ws_iq2_xs_c32_fast, moe_mmq_resident_iq2_xs, moe_mmq_narrow_tma_iq2_xs, moe_experts_iq2_xs_fused_sd, moe_experts_iq2_xs_fused_wide_sd, moe_mmq_flat_ws_iq2_xs),
            (Iq2S, BlockIq2S, moe_gate_up_iq2_s_mmq, moe_down_iq2_s_mmq, moe_experts_iq2_s_fused, moe_experts_iq2_s_fused_wide, moe_mmq_pipe_iq2_s, moe_mmq_narrow_iq2_s, moe_mmq_pipe_swiglu_iq2_s, moe_mmq_narrow_swiglu_iq2_s, moe_mmq_flat_iq2_s, moe_mmq_flat_swiglu_iq2_s, moe_ws_iq2_s_c16, moe_ws_iq2_s_c32, moe_ws_iq2_s_c64, moe_ws_iq2_s_c16_fast, moe_ws_iq2_s_c32_fast, moe_mmq_resident_iq2_s, moe_mmq_narrow_tma_iq2_s, moe_experts_iq2_s_fused_sd, moe_experts_iq2_s_fused_wide_sd, moe_mmq_flat_ws_iq2_s),
            (Iq3Xxs, BlockIq3Xxs, moe_gate_up_iq3_xxs_mmq, moe_down_iq3_xxs_mmq, moe_experts_iq3_xxs_fused, moe_experts_iq3_xxs_fused_wide, moe_mmq_pipe_iq3_xxs, moe_mmq_narrow_iq3_xxs, moe_mmq_pipe_swiglu_iq3_xxs, moe_mmq_narrow_swiglu_iq3_xxs, moe_mmq_flat_iq3_xxs, moe_mmq_flat_swiglu_iq3_xxs, moe_ws_iq3_xxs_c16, moe_ws_iq3_xxs_c32, moe_ws_iq3_xxs_c64, moe_ws_iq3_xxs_c16_fast, moe_ws_iq3_xxs_c32_fast, moe_mmq_resident_iq3_xxs, moe_mmq_narrow_tma_iq3_xxs, moe_experts_iq3_xxs_fused_sd, moe_experts_iq3_xxs_fused_wide_sd, moe_mmq_flat_ws_iq3_xxs),
            (Iq3S, BlockIq3S, moe_gate_up_iq3_s_mmq, moe_down_iq3_s_mmq, moe_experts_iq3_s_fused, moe_experts_iq3_s_fused_wide, moe_mmq_pipe_iq3_s, moe_mmq_narrow_iq3_s, moe_mmq_pipe_swiglu_iq3_s, moe_mmq_narrow_swiglu_iq3_s, moe_mmq_flat_iq3_s, moe_mmq_flat_swiglu_iq3_s, moe_ws_iq3_s_c16, moe_ws_iq3_s_c32, moe_ws_iq3_s_c64, moe_ws_iq3_s_c16_fast, moe_ws_iq3_s_c32_fast, moe_mmq_resident_iq3_s, moe_mmq_narrow_tma_iq3_s, moe_experts_iq3_s_fused_sd, moe_experts_iq3_s_fused_wide_sd, moe_mmq_flat_ws_iq3_s),
        }
    };
}

/// Where a decoder reads a block's bytes (every block is 2-byte aligned, its `d` at offset 0):
/// [`Mem`], the block in memory the code holds a reference to (the host; kernels reading their
/// global buffers), or on the GPU `Shared`, a block staged in shared memory, read by explicit
/// `ld.shared` - a load through a generic pointer into shared memory waits on the long
/// scoreboard like a global one (measured on the H200: BENCHMARKS.md). One decoder per format
/// serves both.
pub trait BlockBytes: Copy {
    /// Byte `off` of the block, zero-extended.
    fn u8(self, off: usize) -> u32;
    /// Bytes `off`, `off + 1` (little-endian); `off` even.
    fn u16(self, off: usize) -> u32;
    /// Bytes `off .. off + 4` (little-endian) in two 16-bit loads; `off` even.
    #[inline(always)]
    fn u32_at(self, off: usize) -> u32 {
        self.u16(off) | self.u16(off + 2) << 16
    }
    /// Entry `i` (masked to 0..128) of ggml's sign table `ksigns_iq2xs`: the static table, or
    /// a kernel's shared copy (`SharedTables`).
    #[inline(always)]
    fn signs(self, i: u32) -> u32 {
        KSIGNS_IQ2XS[(i & 127) as usize] as u32
    }
    /// The 8 signed values of entry `i` (masked to the table) of an IQ2 grid, `table` the
    /// decoded type's own, byte j negated where bit j of `signs` is set: two words.
    #[inline(always)]
    fn grid8_signed(self, table: &'static [u64], i: u32, signs: u32) -> [u32; 2] {
        let entry = table[i as usize & (table.len() - 1)];
        [
            apply_signs4(entry as u32, signs),
            apply_signs4((entry >> 32) as u32, signs >> 4),
        ]
    }
    /// Entry `i` (masked to the table) of an IQ3 grid, `table` the decoded type's own.
    #[inline(always)]
    fn grid4(self, table: &'static [u32], i: u32) -> u32 {
        table[i as usize & (table.len() - 1)]
    }
}

/// A block read through a reference (see [`BlockBytes`]).
#[derive(Clone, Copy)]
pub struct Mem(*const u8);

impl Mem {
    #[inline(always)]
    pub fn of<B: WeightBlock>(b: &B) -> Mem {
        Mem(b as *const B as *const u8)
    }
}

impl BlockBytes for Mem {
    #[inline(always)]
    fn u8(self, off: usize) -> u32 {
        // SAFETY: `Mem::of` points at a whole block; the decoders' offsets lie inside their
        // block type (masked group indices).
        unsafe { *self.0.add(off) as u32 }
    }
    #[inline(always)]
    fn u16(self, off: usize) -> u32 {
        // SAFETY: as `u8`; `off` even and the block 2-byte aligned.
        unsafe { (self.0.add(off) as *const u16).read() as u32 }
    }
}

/// A block staged in shared memory at a 2-byte aligned address (see [`BlockBytes`]).
#[cfg(target_arch = "nvptx64")]
#[derive(Clone, Copy)]
pub struct Shared(u32);

#[cfg(target_arch = "nvptx64")]
impl Shared {
    /// # Safety
    /// `addr` is a 2-byte aligned shared address holding a whole block of the type decoded.
    #[inline(always)]
    pub unsafe fn at(addr: u32) -> Shared {
        Shared(addr)
    }
}

#[cfg(target_arch = "nvptx64")]
impl BlockBytes for Shared {
    #[inline(always)]
    fn u8(self, off: usize) -> u32 {
        // SAFETY: `Shared::at`'s contract; offsets inside the block as for `Mem`.
        unsafe { crate::ptx::ld_shared_u8(self.0 + off as u32) }
    }
    #[inline(always)]
    fn u16(self, off: usize) -> u32 {
        // SAFETY: as `u8`; `off` even.
        unsafe { crate::ptx::ld_shared_u16(self.0 + off as u32) }
    }
}

/// A weight block of one of the eight formats. Each decoder reads the block's bytes through a
/// [`BlockBytes`]; `group_q` / `group_scales` read a block in memory.
pub trait WeightBlock: Copy {
    const WTYPE: WType;
    /// 32-value groups per block.
    const GROUPS: usize;
    /// The int8 values of group `g` (values `32 g .. 32 g + 31` of the block), natural order.
    fn group_q_in<R: BlockBytes>(b: R, g: usize) -> [u32; 8];
    /// The scales of group `g`: `[s, s]` for types with one scale per 32 values, `[first 16,
    /// last 16]` for IQ2_XS / IQ2_S.
    fn group_scales_in<R: BlockBytes>(b: R, g: usize) -> [f32; 2];
    /// Whether lane `t`'s two A-fragment words ([`Self::frag_q_in`]) are the group's words `2 t`
    /// and `2 t + 1` (values `8 t .. 8 t + 7`) instead of `t` and `t + 4` (values `4 t ..` and
    /// `16 + 4 t ..`, the `m16n8k32` fragment's own order). An `mma` sums over K in any order
    /// that its A and B fragments share, so the narrow kernel then loads each column's
    /// activations in the same order (one 8-byte load at byte `8 t` of the group, regs.rs).
    /// For types whose two words are adjacent bytes (Q2_0: one 16-bit load), one grid entry
    /// (the IQ2 types: one lookup per lane, where two lanes would each look an entry up), or
    /// share their index bytes and signs (the IQ3 types: one 16-bit load of two grid indices,
    /// one sign byte or sign-table entry, where the other order takes two of each).
    const FRAG_PAIRS: bool = false;
    /// The two words of [`Self::group_q_in`] lane `t` (`t` < 4) holds of group `g` of one row in
    /// the narrow MMQ kernel's decode into registers (gpu/src/moe/mmq/pipe/regs.rs): words `t`
    /// and `t + 4`, or `2 t` and `2 t + 1` with [`Self::FRAG_PAIRS`], reading only the bytes of
    /// those two words.
    fn frag_q_in<R: BlockBytes>(b: R, g: usize, t: u32) -> [u32; 2];
    #[inline(always)]
    fn group_q(&self, g: usize) -> [u32; 8] {
        Self::group_q_in(Mem::of(self), g)
    }
    #[inline(always)]
    fn group_scales(&self, g: usize) -> [f32; 2] {
        Self::group_scales_in(Mem::of(self), g)
    }
}

/// `d` (offset 0) as f32 (`quant::f16_scale_to_f32`: it only feeds f32 arithmetic).
#[inline(always)]
pub(crate) fn d_of<R: BlockBytes>(b: R) -> f32 {
    f16_scale_to_f32(b.u16(0) as u16)
}

/// Offset of `qs` in every block type (after the f16 `d`).
pub(crate) const QS: usize = 2;
const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(BlockQ8_0, qs) == QS && offset_of!(BlockQ2_0, qs) == QS);
    assert!(offset_of!(BlockIq4Nl, qs) == QS);
};

impl WeightBlock for BlockQ8_0 {
    const WTYPE: WType = WType::Q8_0;
    const GROUPS: usize = 1;
    #[inline(always)]
    fn group_q_in<R: BlockBytes>(b: R, _g: usize) -> [u32; 8] {
        core::array::from_fn(|j| b.u32_at(QS + 4 * j))
    }
    #[inline(always)]
    fn frag_q_in<R: BlockBytes>(b: R, _g: usize, t: u32) -> [u32; 2] {
        let t = (t & 3) as usize;
        [b.u32_at(QS + 4 * t), b.u32_at(QS + 16 + 4 * t)]
    }
    #[inline(always)]
    fn group_scales_in<R: BlockBytes>(b: R, _g: usize) -> [f32; 2] {
        let d = d_of(b);
        [d, d]
    }
}

impl WeightBlock for BlockQ2_0 {
    const WTYPE: WType = WType::Q2_0;
    const GROUPS: usize = 2;
    #[inline(always)]
    fn group_q_in<R: BlockBytes>(b: R, g: usize) -> [u32; 8] {
        let base = QS + 8 * (g & 1);
        let lo = q2_0_expand4(b.u32_at(base));
        let hi = q2_0_expand4(b.u32_at(base + 4));
        [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]]
    }
    /// Word i of a group is byte i of its 8 (sequential packing, 4 codes a byte), so words
    /// `2 t` and `2 t + 1` are one 16-bit read.
    const FRAG_PAIRS: bool = true;
    #[inline(always)]
    fn frag_q_in<R: BlockBytes>(b: R, g: usize, t: u32) -> [u32; 2] {
        q2_0_expand2_u16(b.u16(QS + 8 * (g & 1) + 2 * (t & 3) as usize))
    }
    #[inline(always)]
    fn group_scales_in<R: BlockBytes>(b: R, _g: usize) -> [f32; 2] {
        let d = d_of(b);
        [d, d]
    }
}

impl WeightBlock for BlockIq4Nl {
    const WTYPE: WType = WType::Iq4Nl;
    const GROUPS: usize = 1;
    #[inline(always)]
    fn group_q_in<R: BlockBytes>(b: R, _g: usize) -> [u32; 8] {
        const TABLE: [u32; 4] = iq4_nl_table();
        let mut w = [0u32; 8];
        for j in 0..4 {
            let (lo, hi) = iq4_nl_values4(b.u32_at(QS + 4 * j), TABLE);
            w[j] = lo;
            w[j + 4] = hi;
        }
        w
    }
    #[inline(always)]
    fn frag_q_in<R: BlockBytes>(b: R, _g: usize, t: u32) -> [u32; 2] {
        const TABLE: [u32; 4] = iq4_nl_table();
        // Byte j's low nibble is value j, its high nibble value j + 16.
        let (lo, hi) = iq4_nl_values4(b.u32_at(QS + 4 * (t & 3) as usize), TABLE);
        [lo, hi]
    }
    #[inline(always)]
    fn group_scales_in<R: BlockBytes>(b: R, _g: usize) -> [f32; 2] {
        let d = d_of(b);
        [d, d]
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
