//! The resident form of the narrow kernel, `moe_mmq_resident_<type>` (sm_90, cfg `gpu_sm90`;
//! the host launches it in place of `moe_mmq_narrow_<type>` where the layout
//! `layout::MmqResidentSmem` exists, with `MmqParams::resident` row tiles a CTA). Where the streamed form (regs.rs)
//! copies each K step's weights in 16-byte `cp.async` pieces spread over the CTA's threads
//! (about 30 instructions a piece, and a CTA barrier every K step), here the tile's whole K is
//! copied by bulk copies, each on a transaction barrier of its own that the lane issuing it
//! initializes and arms (so no copy waits for another warp):
//! - warp `w`'s 16 weight rows of each row tile (`16 row_bytes` consecutive bytes of the
//!   expert's tensor) to `16 w row_bytes` in the tile's weight buffer, by the warp's first lane;
//! - K step `j`'s activation blocks of the tile's columns (consecutive blocks of `x`) to
//!   `acts + j acts_bytes`, once for all row tiles, by the first lane of warp `j % 8`.
//!
//! A CTA runs up to `p.resident` row tiles of 128 (`layout::resident_row_tiles`) over the same
//! columns, so its prologue (the tile's entry, the barriers, the activations) serves them all.
//! With two weight buffers the first two row tiles' rows are copied in the prologue, and a
//! warp that has stored row tile `r` copies its rows of tile `r + 2` into the buffer it freed:
//! they land while it multiplies tile `r + 1`. With one buffer, tile `r + 1`'s rows are copied
//! once tile `r` is stored.
//!
//! After one CTA barrier (the barriers' initialization and the lookup tables visible), each
//! warp waits for its own rows, then for each step's activations as it reaches the step, and
//! runs regs.rs's products with no further CTA barrier: a warp reads only its own rows. The
//! products and their order are regs.rs's, so the bytes are the streamed form's.

use super::copy::weight_policy;
use super::regs::{Resident, product};
use super::{Cta, weight_row};
use crate::formats::WeightBlock;
use crate::layout::{
    MMQ_KSTEP, MMQ_RESIDENT_WARPS, MMQ_ROWS, MmqParams, MmqPipeShape, MmqPipeSmem, MmqResidentSmem,
    MmqTile, Q8_1_MMQ_BYTES,
};
use crate::ptx::{
    bulk_copy, bulk_copy_hint, fence_mbar_init, mbar_arrive_expect_tx, mbar_init, mbar_wait,
    smem_base, sync_threads, sync_warp, tid_x,
};

/// The narrow kernel's resident form for weight format `B` (see the module doc), the kernel
/// `moe_mmq_resident_<type>`: each CTA over `p.resident` row tiles of 128 from `128 p.resident
/// ctaid.y` (fewer in the last CTA where `n / 128` ends first).
///
/// # Safety
/// As `mmq_pipe` for the narrow shape without the epilogue, and: `MmqResidentSmem::of(B::WTYPE,
/// p.k)` exists and the CTA has its `total` bytes of shared memory; each tile's 128 weight
/// rows are consecutive bytes of one tensor, 16-byte aligned, not written during the kernel;
/// `x`'s blocks 16-byte aligned; `ctaid.y < ceil(p.n / (128 p.resident))`.
#[inline(always)]
pub unsafe fn mmq_resident<B: WeightBlock>(p: &MmqParams) {
    let (tx, ty) = super::cta::grid_coords(p);
    // SAFETY: one tile per CTA along x (tx < nctaid.x).
    let tile = unsafe { *(p.tiles as *const MmqTile).add(tx as usize) };
    if tile.n_cols == 0 {
        return; // a padding tile of a device-built list
    }
    let Some(sm) = MmqResidentSmem::of(B::WTYPE, p.k as usize) else {
        return; // the host runs this kernel only where the layout exists
    };
    if p.resident == 0 {
        return; // no row tiles (the host sets at least one)
    }
    let tile0 = ty * p.resident;
    // This CTA's row tiles: `p.resident`, or those left in the last CTA of the column tile.
    let n_tiles = p.resident.min(p.n / MMQ_ROWS as u32 - tile0);
    let shape = MmqPipeShape::Narrow;
    // The lookup tables where the resident layout keeps them.
    let mut psm = MmqPipeSmem::of(B::WTYPE, shape);
    psm.tables = sm.tables;
    let c = Cta {
        tile,
        row_tile: ty,
        shape,
        wbase: weight_row(p, tile.expert, tile0 * MMQ_ROWS as u32),
        ubase: 0,
        swiglu: false,
        row_bytes: p.row_bytes,
        first_row: tile0 * MMQ_ROWS as u32,
        tma: false,
        sm: psm,
        base: smem_base(),
        // Every lane of every warp here (`weight_policy`'s contract).
        policy: weight_policy(p),
    };
    // SAFETY: every thread, nothing copied yet; the contract.
    unsafe { k_loop::<B>(p, &c, &sm, tile0, n_tiles, p.k / MMQ_KSTEP as u32) };
}

/// The resident K loops over `nk` steps of row tiles `tile0 .. tile0 + n_tiles`, each stored
/// once multiplied (regs.rs's fragment order), their copies included.
///
/// # Safety
/// Every thread of the CTA, nothing copied yet; `sm` the layout of `B` and `p.k`, as
/// [`mmq_resident`] requires.
#[inline(always)]
unsafe fn k_loop<B: WeightBlock>(
    p: &MmqParams,
    c: &Cta,
    sm: &MmqResidentSmem,
    tile0: u32,
    n_tiles: u32,
    nk: u32,
) {
    let tid = tid_x();
    let (warp, lane) = (tid / 32, tid % 32);
    let warp_bytes = sm.warp_bytes() as u32;
    let acts = c.base + sm.acts as u32;
    let acts_bytes = sm.acts_bytes as u32;
    let wbufs = sm.wbufs as u32;
    // Row tile r's buffer and the parity of its phase there (`wbufs` is 1 or 2).
    let two = wbufs == 2;
    let buf = |r: u32| if two { r % 2 } else { 0 };
    let phase = |r: u32| if two { (r / 2) % 2 } else { r % 2 };
    let wbar = |b: u32| c.base + sm.warp_bar(warp as usize, b as usize) as u32;
    let abar = |j: u32| c.base + sm.acts_bar(j as usize) as u32;
    let policy = c.policy;
    // The warp's rows of row tile `r` into weight buffer `r % wbufs`, on its barrier there.
    let copy_rows = |r: u32| {
        let b = buf(r);
        let src = weight_row(p, c.tile.expert, (tile0 + r) * MMQ_ROWS as u32);
        // SAFETY: the barrier is initialized, its previous phase (tile r - wbufs) completed and
        // waited for by this warp, whose lanes have stored that tile (no read of the buffer is
        // left); the warp's rows (16-byte aligned, a multiple of 16 bytes: the contract and the
        // layout) land in its part of the buffer.
        unsafe {
            mbar_arrive_expect_tx(wbar(b), warp_bytes);
            bulk_copy_hint(
                c.base + b * sm.wbuf_bytes as u32 + warp * warp_bytes,
                src + (warp * warp_bytes) as u64,
                warp_bytes,
                wbar(b),
                policy,
            );
        }
    };
    // Every copy's barrier is initialized, armed and handed to its copy by the lane that issues
    // it, so the copies start at once, spread over the warps: each warp's first lane its own
    // rows of the first row tiles, and step j's activations (consecutive blocks of x, 144 bytes
    // a column).
    if lane == 0 {
        let cols = c.tile.n_cols * Q8_1_MMQ_BYTES as u32;
        // SAFETY: the barriers lie in the layout's barrier array, 8-byte aligned, each
        // initialized by this lane only; step j's blocks (at most 16 columns) land in its
        // activation buffer.
        unsafe {
            for b in 0..wbufs {
                mbar_init(wbar(b), 1);
            }
            let mut j = warp;
            while j < nk {
                mbar_init(abar(j), 1);
                j += MMQ_RESIDENT_WARPS as u32;
            }
            fence_mbar_init();
            for r in 0..wbufs.min(n_tiles) {
                copy_rows(r);
            }
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
    // SAFETY: every thread; the tables' region of the resident layout (`c.sm.tables`).
    unsafe { c.copy_tables(B::WTYPE) };
    // The barriers' initialization and the tables visible to every thread.
    sync_threads();
    for r in 0..n_tiles {
        let b = buf(r);
        // SAFETY: initialized above; the warp's first lane armed phase `r / wbufs` of the
        // buffer's barrier with the tile's bytes. Then the warp's rows of tile r have landed.
        unsafe { mbar_wait(wbar(b), phase(r)) };
        let res = Resident {
            rows: c.base + b * sm.wbuf_bytes as u32,
            row_bytes: sm.row_bytes as u32,
            acts,
            acts_bytes,
        };
        let mut acc = [[[0.0f32; 4]; 4]; 2];
        for j in 0..nk {
            // SAFETY: initialized above, the issuing lane arrived with the step's bytes; this
            // warp waits for them in the first row tile, after which they stay; the warp's
            // rows have landed (above).
            unsafe {
                if r == 0 {
                    mbar_wait(abar(j), 0);
                }
                product::<B, true>(c, j, res, &mut acc);
            }
        }
        // SAFETY: the kernel's contract (the row tile lies in `p.n`).
        unsafe { super::super::store(p, &c.tile, (tile0 + r) * MMQ_ROWS as u32, &acc, c.shape) };
        if r + wbufs < n_tiles {
            // Every lane of the warp past its last read of buffer b (its products are stored).
            sync_warp();
            if lane == 0 {
                copy_rows(r + wbufs);
            }
        }
    }
}
