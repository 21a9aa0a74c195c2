//! The resident form of the narrow kernel (sm_90, cfg `gpu_sm90`; chosen by the host through
//! `MmqParams::resident`; layout `layout::MmqResidentSmem`). Where the streamed form (regs.rs)
//! copies each K step's weights in 16-byte `cp.async` pieces spread over the CTA's threads
//! (about 30 instructions a piece, and a CTA barrier every K step), here the tile's whole K is
//! copied in the prologue by 9 bulk copies from one thread:
//! - warp `w`'s 16 weight rows (`16 row_bytes` consecutive bytes of the expert's tensor) to
//!   `16 w row_bytes`, completing on the warp's barrier;
//! - every K step's activation blocks of the tile's columns (consecutive blocks of `x`) to
//!   `acts + j acts_bytes`, completing on the last barrier.
//!
//! Then each warp waits for its own rows and the activations, and runs the K loop of regs.rs's
//! products with no CTA barrier: a warp reads only its own rows. The products and their order
//! are regs.rs's, so the bytes are the streamed form's.

use super::regs::{Resident, product};
use super::{Cta, weight_row};
use crate::formats::WeightBlock;
use crate::layout::{
    MMQ_KSTEP, MMQ_PIPE_BAR_BYTES, MMQ_RESIDENT_WARPS, MMQ_ROWS, MmqParams, MmqPipeShape,
    MmqPipeSmem, MmqResidentSmem, MmqTile, Q8_1_MMQ_BYTES,
};
use crate::ptx::{
    bulk_copy, ctaid_x, ctaid_y, fence_mbar_init, mbar_arrive_expect_tx, mbar_init, mbar_wait,
    smem_base, sync_threads, tid_x,
};

/// The narrow kernel's resident form for weight format `B` (see the module doc): the kernel
/// `moe_mmq_narrow_<type>` runs it when `p.resident` is set.
///
/// # Safety
/// As `mmq_pipe` for the narrow shape without the epilogue, and: `MmqResidentSmem::of(B::WTYPE,
/// p.k)` exists; each tile's 128 weight rows are consecutive bytes of one tensor, 16-byte
/// aligned, not written during the kernel; `x`'s blocks 16-byte aligned.
#[inline(always)]
pub unsafe fn mmq_resident<B: WeightBlock>(p: &MmqParams) {
    // SAFETY: one tile per CTA along x.
    let tile = unsafe { *(p.tiles as *const MmqTile).add(ctaid_x() as usize) };
    if tile.n_cols == 0 {
        return; // a padding tile of a device-built list
    }
    let Some(sm) = MmqResidentSmem::of(B::WTYPE, p.k as usize) else {
        return; // the host sets `resident` only where the layout exists
    };
    let row0 = ctaid_y() * MMQ_ROWS as u32;
    let wbase = weight_row(p, tile.expert, row0);
    let shape = MmqPipeShape::Narrow;
    let c = Cta {
        tile,
        shape,
        wbase,
        ubase: wbase,
        swiglu: false,
        row_bytes: p.row_bytes,
        sm: MmqPipeSmem::of(B::WTYPE, shape),
        base: smem_base(),
    };
    let mut acc = [[[0.0f32; 4]; 4]; 2];
    // SAFETY: every thread, nothing copied yet; the contract.
    unsafe {
        k_loop::<B>(p, &c, &sm, p.k / MMQ_KSTEP as u32, &mut acc);
        super::super::store(p, &tile, row0, &acc, shape);
    }
}

/// The resident K loop over `nk` steps into `acc` (regs.rs's fragment order), its copies
/// included.
///
/// # Safety
/// Every thread of the CTA, nothing copied yet; `sm` the layout of `B` and `p.k`; `c.wbase` the
/// tile's first row, as [`mmq_resident`] requires.
#[inline(always)]
unsafe fn k_loop<B: WeightBlock>(
    p: &MmqParams,
    c: &Cta,
    sm: &MmqResidentSmem,
    nk: u32,
    acc: &mut [[[f32; 4]; 4]; 2],
) {
    let tid = tid_x();
    let warp = tid / 32;
    let row_bytes = sm.row_bytes as u32;
    let warp_bytes = sm.warp_bytes() as u32;
    let bar = |i: u32| c.base + sm.bars as u32 + MMQ_PIPE_BAR_BYTES as u32 * i;
    let acts_bar = bar(MMQ_RESIDENT_WARPS as u32);
    let acts = c.base + sm.acts as u32;
    let acts_bytes = sm.acts_bytes as u32;
    if tid == 0 {
        let col_bytes = c.tile.n_cols * Q8_1_MMQ_BYTES as u32;
        // SAFETY: the barriers lie in the layout's barrier array, 8-byte aligned, unused; each
        // warp's rows (16-byte aligned, a multiple of 16 bytes: the contract and the layout)
        // land in its part of the weight region; each step's blocks (at most 16 columns of 144
        // bytes, consecutive in x) in its activation buffer.
        unsafe {
            for i in 0..=MMQ_RESIDENT_WARPS as u32 {
                mbar_init(bar(i), 1);
            }
            fence_mbar_init();
            for w in 0..MMQ_RESIDENT_WARPS as u32 {
                mbar_arrive_expect_tx(bar(w), warp_bytes);
                bulk_copy(
                    c.base + w * warp_bytes,
                    c.wbase + (w * warp_bytes) as u64,
                    warp_bytes,
                    bar(w),
                );
            }
            mbar_arrive_expect_tx(acts_bar, nk * col_bytes);
            for j in 0..nk {
                let first = j as u64 * p.n_cols_x as u64 + c.tile.col_start as u64;
                bulk_copy(
                    acts + j * acts_bytes,
                    p.x + first * Q8_1_MMQ_BYTES as u64,
                    col_bytes,
                    acts_bar,
                );
            }
        }
    }
    // SAFETY: every thread; the type's layout (the tables where the narrow layout has them).
    unsafe { c.copy_tables(B::WTYPE) };
    // The barriers' initialization and the tables visible to every thread.
    sync_threads();
    // SAFETY: initialized above; thread 0 arrived on both with their bytes.
    unsafe {
        mbar_wait(bar(warp), 0);
        mbar_wait(acts_bar, 0);
    }
    let res = Resident {
        rows: c.base,
        row_bytes,
        acts,
        acts_bytes,
    };
    for j in 0..nk {
        // SAFETY: the warp's rows and every step's activations landed (waited for above).
        unsafe { product::<B, true>(c, j, res, acc) };
    }
}
