//! The resident form of the narrow kernel (sm_90, cfg `gpu_sm90`; chosen by the host through
//! `MmqParams::resident`; layout `layout::MmqResidentSmem`). Where the streamed form (regs.rs)
//! copies each K step's weights in 16-byte `cp.async` pieces spread over the CTA's threads
//! (about 30 instructions a piece, and a CTA barrier every K step), here the tile's whole K is
//! copied in the prologue by bulk copies, each on a transaction barrier of its own that the
//! lane issuing it initializes and arms (so no copy waits for another warp):
//! - warp `w`'s 16 weight rows (`16 row_bytes` consecutive bytes of the expert's tensor) to
//!   `16 w row_bytes`, by the warp's first lane;
//! - K step `j`'s activation blocks of the tile's columns (consecutive blocks of `x`) to
//!   `acts + j acts_bytes`, by the first lane of warp `j % 8`.
//!
//! After one CTA barrier (the barriers' initialization and the lookup tables visible), each
//! warp waits for its own rows, then for each step's activations as it reaches the step, and
//! runs regs.rs's products with no further CTA barrier: a warp reads only its own rows. The
//! products and their order are regs.rs's, so the bytes are the streamed form's.

use super::regs::{Resident, product};
use super::{Cta, weight_row};
use crate::formats::WeightBlock;
use crate::layout::{
    MMQ_KSTEP, MMQ_RESIDENT_WARPS, MMQ_ROWS, MmqParams, MmqPipeShape, MmqPipeSmem, MmqResidentSmem,
    MmqTile, Q8_1_MMQ_BYTES,
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
    let (warp, lane) = (tid / 32, tid % 32);
    let warp_bytes = sm.warp_bytes() as u32;
    let acts = c.base + sm.acts as u32;
    let acts_bytes = sm.acts_bytes as u32;
    let wbar = c.base + sm.warp_bar(warp as usize) as u32;
    let abar = |j: u32| c.base + sm.acts_bar(j as usize) as u32;
    // Every copy's barrier is initialized, armed and handed to its copy by the lane that issues
    // it, so the copies start at once, spread over the warps: each warp's first lane its own
    // rows, and step j's activations (consecutive blocks of x, 144 bytes a column).
    if lane == 0 {
        let cols = c.tile.n_cols * Q8_1_MMQ_BYTES as u32;
        // SAFETY: the barriers lie in the layout's barrier array, 8-byte aligned, each
        // initialized by this lane only; the warp's rows (16-byte aligned, a multiple of 16
        // bytes: the contract and the layout) land in its part of the weight region, step j's
        // blocks (at most 16 columns) in its activation buffer.
        unsafe {
            mbar_init(wbar, 1);
            let mut j = warp;
            while j < nk {
                mbar_init(abar(j), 1);
                j += MMQ_RESIDENT_WARPS as u32;
            }
            fence_mbar_init();
            mbar_arrive_expect_tx(wbar, warp_bytes);
            bulk_copy(
                c.base + warp * warp_bytes,
                c.wbase + (warp * warp_bytes) as u64,
                warp_bytes,
                wbar,
            );
            let mut j = warp;
            while j < nk {
                let first = j as u64 * p.n_cols_x as u64 + c.tile.col_start as u64;
                mbar_arrive_expect_tx(abar(j), cols);
                bulk_copy(
                    acts + j * acts_bytes,
                    p.x + first * Q8_1_MMQ_BYTES as u64,
                    cols,
                    abar(j),
                );
                j += MMQ_RESIDENT_WARPS as u32;
            }
        }
    }
    // SAFETY: every thread; the type's layout (the tables where the narrow layout has them).
    unsafe { c.copy_tables(B::WTYPE) };
    // The barriers' initialization and the tables visible to every thread.
    sync_threads();
    // SAFETY: initialized above; the warp's first lane arrived with its bytes.
    unsafe { mbar_wait(wbar, 0) };
    let res = Resident {
        rows: c.base,
        row_bytes: sm.row_bytes as u32,
        acts,
        acts_bytes,
    };
    for j in 0..nk {
        // SAFETY: initialized above, the issuing lane arrived with the step's bytes; then the
        // warp's rows and the step's activations have landed.
        unsafe {
            mbar_wait(abar(j), 0);
            product::<B, true>(c, j, res, acc);
        }
    }
}
