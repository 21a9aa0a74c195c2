//! The q8_1 D4 store every quantizing kernel shares: 8 consecutive lanes hold one 32-value group
//! (4 values each), reduce |x| by butterfly shuffles, and write their int8 values and the group's
//! f32 scale into a `block_q8_1_mmq` (layout::BlockQ8_1Mmq). Rules: `gpu::quant`.

use crate::layout::{BlockQ8_1Mmq, MMQ_BLOCK_VALUES};
use crate::ptx::{shfl_xor_f32, st_f32, st_u32};
use crate::quant::{amax_merge, amax_step, q8_1_inv_scale, q8_1_quant, q8_1_scale};

/// Quantizes the 4 values `h` of activation row `row` at K positions `k0 .. k0 + 4` (k0 a
/// multiple of 4) and stores them into the D4 buffer `out` of `n_cols` rows.
///
/// Must be called by all 32 lanes of a warp with `k0 = 4 * lane + (multiple of 128)` for the
/// same row: lanes 8i .. 8i+7 form group i of one 128-value block.
///
/// # Safety
/// `out` must point to a buffer of at least `(k0 / 128 + 1) * n_cols` blocks, row < n_cols.
#[inline(always)]
pub unsafe fn store_q8_1_x4(out: *mut BlockQ8_1Mmq, n_cols: u32, row: u32, k0: u32, h: [f32; 4]) {
    // Written out: a loop over `h` may stay rolled and put `h` in local memory.
    let mut amax = amax_step(0.0, h[0]);
    amax = amax_step(amax, h[1]);
    amax = amax_step(amax, h[2]);
    amax = amax_step(amax, h[3]);
    amax = amax_merge(amax, shfl_xor_f32(amax, 1));
    amax = amax_merge(amax, shfl_xor_f32(amax, 2));
    amax = amax_merge(amax, shfl_xor_f32(amax, 4));
    let d_inv = q8_1_inv_scale(amax);
    let q = u32::from_le_bytes([
        q8_1_quant(h[0], d_inv) as u8,
        q8_1_quant(h[1], d_inv) as u8,
        q8_1_quant(h[2], d_inv) as u8,
        q8_1_quant(h[3], d_inv) as u8,
    ]);
    let kc = (k0 / MMQ_BLOCK_VALUES as u32) as usize;
    let within = (k0 % MMQ_BLOCK_VALUES as u32) as usize;
    // SAFETY: the caller guarantees the block index is inside `out`; `within` < 128 and is a
    // multiple of 4, so both stores are aligned and inside the block.
    unsafe {
        let blk = out.add(kc * n_cols as usize + row as usize);
        let qs = core::ptr::addr_of_mut!((*blk).qs) as *mut i8;
        st_u32(qs.add(within) as *mut u32, q);
        if within % 32 == 0 {
            let d = core::ptr::addr_of_mut!((*blk).d) as *mut f32;
            st_f32(d.add(within / 32), q8_1_scale(d_inv));
        }
    }
}
