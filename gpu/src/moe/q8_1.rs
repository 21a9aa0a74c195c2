//! The q8_1 D4 store every quantizing kernel shares: 8 consecutive lanes hold one 32-value group
//! (4 values each), reduce |x| by butterfly shuffles, and write their int8 values and the group's
//! f32 scale into a `block_q8_1_mmq` (layout::BlockQ8_1Mmq). Rules: `gpu::quant`.

use crate::layout::{BlockQ8_1Mmq, MMQ_BLOCK_VALUES};
use crate::ptx::{prmt, shfl_xor_f32, st_f32, st_u32, st_v2_u32};
use crate::quant::{
    amax_merge, amax_step, q8_1_inv_scale, q8_1_quant_finite, q8_1_quant_tiny, q8_1_scale,
};

/// The q8_1 values and scale of a group spread over 8 lanes of a warp, 4 values each: the
/// group's maximum |x| by butterfly shuffles over the lanes `lane ^ m` for `m` in `masks` (the
/// three lane bits that tell the group's lanes apart), then `d_inv = 127 / amax`, one branch per
/// group for groups of tiny values (d_inv = +inf), and the rounding rule of `gpu::quant`.
/// Returns this lane's 4 int8 values (as i32) and the group's f32 scale d.
///
/// Must be called by all 32 lanes of a warp together.
#[inline(always)]
pub fn quantize_group_x4(h: [f32; 4], masks: [u32; 3]) -> ([i32; 4], f32) {
    // Written out: a loop over `h` may stay rolled and put `h` in local memory.
    let mut amax = amax_step(0.0, h[0]);
    amax = amax_step(amax, h[1]);
    amax = amax_step(amax, h[2]);
    amax = amax_step(amax, h[3]);
    amax = amax_merge(amax, shfl_xor_f32(amax, masks[0]));
    amax = amax_merge(amax, shfl_xor_f32(amax, masks[1]));
    amax = amax_merge(amax, shfl_xor_f32(amax, masks[2]));
    let d_inv = q8_1_inv_scale(amax);
    // One branch per group (d_inv = +inf only for groups of tiny values), not a select per value.
    let q = if d_inv == f32::INFINITY {
        [
            q8_1_quant_tiny(h[0]),
            q8_1_quant_tiny(h[1]),
            q8_1_quant_tiny(h[2]),
            q8_1_quant_tiny(h[3]),
        ]
    } else {
        [
            q8_1_quant_finite(h[0], d_inv),
            q8_1_quant_finite(h[1], d_inv),
            q8_1_quant_finite(h[2], d_inv),
            q8_1_quant_finite(h[3], d_inv),
        ]
    };
    (q, q8_1_scale(d_inv))
}

/// [`quantize_group_x4`] for a group spread over 4 lanes of a warp, 8 values each: shuffles over
/// the two lane bits in `masks`. Returns this lane's 8 int8 values packed in two u32 (K order,
/// the lowest byte first) and the group's f32 scale d.
///
/// Must be called by all 32 lanes of a warp together.
#[inline(always)]
pub fn quantize_group_x8(h: [f32; 8], masks: [u32; 2]) -> ([u32; 2], f32) {
    let mut amax = 0.0f32;
    unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
        amax = amax_step(amax, h[i]);
    });
    amax = amax_merge(amax, shfl_xor_f32(amax, masks[0]));
    amax = amax_merge(amax, shfl_xor_f32(amax, masks[1]));
    let d_inv = q8_1_inv_scale(amax);
    let mut q = [0i32; 8];
    // One branch per group (d_inv = +inf only for groups of tiny values), not a select per value.
    if d_inv == f32::INFINITY {
        unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
            q[i] = q8_1_quant_tiny(h[i]);
        });
    } else {
        unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
            q[i] = q8_1_quant_finite(h[i], d_inv);
        });
    }
    (
        [
            pack_x4([q[0], q[1], q[2], q[3]]),
            pack_x4([q[4], q[5], q[6], q[7]]),
        ],
        q8_1_scale(d_inv),
    )
}

/// Quantizes the 4 values `h` a lane holds for K positions `4 * lane + 128 i ..` of one
/// activation row (lanes 8i .. 8i+7 form group i: shuffle masks 1, 2, 4) and returns the 4 int8
/// values packed in a u32 and the group's f32 scale d.
///
/// Must be called by all 32 lanes of a warp together.
#[inline(always)]
pub fn quantize_x4(h: [f32; 4]) -> (u32, f32) {
    let (q, d) = quantize_group_x4(h, [1, 2, 4]);
    (pack_x4(q), d)
}

/// Four int8 values (as i32, in -127..=127) packed into a u32, the first in the lowest byte.
#[inline(always)]
fn pack_x4(q: [i32; 4]) -> u32 {
    let lo = prmt(q[0] as u32, q[1] as u32, 0x0040);
    let hi = prmt(q[2] as u32, q[3] as u32, 0x0040);
    prmt(lo, hi, 0x5410)
}

/// The D4 block of row `row` holding K position `k0` in the buffer `out` of `n_cols` rows, and
/// `k0`'s position inside it.
///
/// # Safety
/// `out` must hold at least `(k0 / 128 + 1) * n_cols` blocks, row < n_cols.
#[inline(always)]
unsafe fn lane_block(
    out: *mut BlockQ8_1Mmq,
    n_cols: u32,
    row: u32,
    k0: u32,
) -> (*mut BlockQ8_1Mmq, usize) {
    let kc = (k0 / MMQ_BLOCK_VALUES as u32) as usize;
    let within = (k0 % MMQ_BLOCK_VALUES as u32) as usize;
    // SAFETY: the caller guarantees the block index is inside `out`.
    (
        unsafe { out.add(kc * n_cols as usize + row as usize) },
        within,
    )
}

/// Stores a lane's quantized values (from [`quantize_x4`]) of row `row`, K positions
/// `k0 .. k0 + 4`, into the D4 buffer `out` of `n_cols` rows; the lane holding the first value
/// of a 32-group also stores the group's scale.
///
/// # Safety
/// `out` must hold at least `(k0 / 128 + 1) * n_cols` blocks, row < n_cols.
#[inline(always)]
pub unsafe fn store_x4(out: *mut BlockQ8_1Mmq, n_cols: u32, row: u32, k0: u32, q: u32, d: f32) {
    // SAFETY: the caller guarantees the block index is inside `out`; `within` < 128 and is a
    // multiple of 4, so both stores are aligned and inside the block.
    unsafe {
        let (blk, within) = lane_block(out, n_cols, row, k0);
        let qs = core::ptr::addr_of_mut!((*blk).qs) as *mut i8;
        st_u32(qs.add(within) as *mut u32, q);
        if within % 32 == 0 {
            let dp = core::ptr::addr_of_mut!((*blk).d) as *mut f32;
            st_f32(dp.add(within / 32), d);
        }
    }
}

/// Stores a lane's 8 quantized values (from [`quantize_group_x8`]) of row `row`, K positions
/// `k0 .. k0 + 8`, into the D4 buffer `out` of `n_cols` rows; the lane holding the first value
/// of a 32-group also stores the group's scale.
///
/// # Safety
/// `out` must hold at least `(k0 / 128 + 1) * n_cols` blocks, row < n_cols; `k0` a multiple
/// of 8.
#[inline(always)]
pub unsafe fn store_x8(
    out: *mut BlockQ8_1Mmq,
    n_cols: u32,
    row: u32,
    k0: u32,
    q: [u32; 2],
    d: f32,
) {
    // SAFETY: the caller guarantees the block index is inside `out`; `within` < 128 is a
    // multiple of 8 and the values start 16 bytes into a 144-byte block, so the 8-byte store is
    // aligned and inside the block, as is the scale's.
    unsafe {
        let (blk, within) = lane_block(out, n_cols, row, k0);
        let qs = core::ptr::addr_of_mut!((*blk).qs) as *mut i8;
        st_v2_u32(qs.add(within) as *mut u32, q);
        if within % 32 == 0 {
            let dp = core::ptr::addr_of_mut!((*blk).d) as *mut f32;
            st_f32(dp.add(within / 32), d);
        }
    }
}

/// Stores an all-zero group's D4 bytes (scale +0.0, values 0) for lane positions `k0 .. k0 + 4`:
/// what [`store_q8_1_x4`] writes for zeros (127 / 0 = inf, 0 * inf -> 0, 1 / inf = +0), without
/// the arithmetic. For the padding chunks of a row.
///
/// # Safety
/// As [`store_x4`].
#[inline(always)]
pub unsafe fn store_zero_x4(out: *mut BlockQ8_1Mmq, n_cols: u32, row: u32, k0: u32) {
    // SAFETY: forwarded contract.
    unsafe { store_x4(out, n_cols, row, k0, 0, 0.0) }
}

/// [`quantize_x4`] then [`store_x4`].
///
/// # Safety
/// As [`store_x4`]; all 32 lanes of the warp call it together.
#[inline(always)]
pub unsafe fn store_q8_1_x4(out: *mut BlockQ8_1Mmq, n_cols: u32, row: u32, k0: u32, h: [f32; 4]) {
    let (q, d) = quantize_x4(h);
    // SAFETY: forwarded contract.
    unsafe { store_x4(out, n_cols, row, k0, q, d) }
}
