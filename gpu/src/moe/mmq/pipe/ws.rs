//! The flat product warp specialized (`moe_mmq_flat_ws_<type>`, sm_90; `pipe::mmq_flat_ws`):
//! the flat kernel's 8 warps only multiply (the consumers: `tiles::product`, as in the flat
//! kernel), `MMQ_WS_PRODUCER_WARPS` more warps copy and decode (the producers: `copy::issue_by`,
//! the weight part of `tiles::decode` and the activation scales, each thread `GROUPS` of the flat
//! kernel's threads' share: 8 with one producer warp, 4 with two, 2 with four). The decoded
//! tiles pass between them on `mbarrier`s (`MmqPipeSmem::ws_bars`): `full[b]`, one arrival a
//! producer thread once tile b is decoded; `empty[b]`, 256 consumer arrivals once tile b and
//! its step's activation blocks are read; b = j % 2 for K step j. No CTA barrier in the K loop:
//! the consumers never wait on a decode of their own or on a slower warp's, and the copies' code
//! runs in the producer warps instead of eight. The producers sync among themselves only
//! (`sync_producers`: their warp, or named barrier 1 for several warps).
//!
//! Schedule (the flat layout's lead, buffers and stages, `MmqPipeSmem::of`): the producers
//! issue steps `0..lead`, then in iteration j wait for step j - 2's product (`empty`), issue
//! step j + lead into the buffers step j - 2 held (`lead + 2` activation buffers; a weight stage
//! is free once decoded, as in the flat kernel), wait for step j's copies, decode it into tile
//! j % 2 and arrive on `full`. A consumer in iteration j waits on `full` and on step j's
//! activation barrier (their bulk copy's bytes), multiplies, and arrives on `empty`.
//!
//! Numerics and output: the flat kernel's (the same product and store), so the bytes are its
//! bytes and the reference's.
//!
//! Static counts (ptxas 12.9, sm_90, `scripts/sass_kstep.py`), one producer warp at 112
//! registers (`layout::MMQ_WS_MAX_REGISTERS`): a consumer's K step 431 SASS instructions
//! against the flat kernel's 539 for Q2_0 (658 -> 431 IQ3_S, 940 -> 723 IQ2_S); the producer
//! thread's about 700 for Q2_0 (four decode batches of two groups, 16 activation scales, 6
//! weight pieces); no kernel spills but IQ2_XS's (8 bytes). Two producer warps at 96 registers:
//! a consumer's K step 441-447 (Q2_0 447, IQ2_S 733), the producer thread's about 420 (Q2_0);
//! 16 to 20 bytes of spills in every kernel, none in a K loop. Measured on an H100 at T = 16,384
//! (BENCHMARKS.md): with two producer warps the layer takes 1.03x (Q2_0 / Q2_0) and 1.06x
//! (IQ2_S / IQ4_NL) the flat kernels' time, with one 1.7x and 1.9x. The producer thread's
//! dependent K step bounds the loop. Four producer warps (80 registers; a consumer's K step
//! 450 with 3 local loads for Q2_0, 785 with 21 for IQ2_S): 1.035x two warps' time for Q2_0 /
//! Q2_0 and 0.98x for IQ2_S / IQ4_NL, still 1.07x and 1.05x the flat kernels'. So the host runs
//! this kernel only on request (`MOE_MMQ_FLAT_WS=on`).

use super::{Cta, copy, cta, tiles, weight_row};
use crate::formats::WeightBlock;
use crate::layout::{
    MMQ_KSTEP, MMQ_PIPE_BAR_BYTES, MMQ_THREADS, MMQ_WS_PRODUCER_WARPS, MMQ_WS_THREADS, MmqParams,
    MmqPipeShape, MmqPipeSmem, MmqTile,
};
use crate::ptx::{
    fence_mbar_init, ld_shared_u32, mbar_arrive, mbar_init, mbar_wait, smem_base, st_shared_u32,
    sync_named, sync_threads, sync_warp, tid_x,
};

/// The flat product without the epilogue, warp specialized (`moe_mmq_flat_ws_<type>`): the
/// numerics, tiles and output of `mmq_pipe::<B, false, true, false, false>` (the flat kernel),
/// with [`MMQ_WS_THREADS`] threads a CTA. (Its prologue is the flat kernel's, written out here
/// so that `mmq_pipe`'s code, and with it every other kernel's, stays as it was.)
///
/// # Safety
/// As `mmq_pipe` for the flat shape without the epilogue, launched with [`MMQ_WS_THREADS`]
/// threads and `MmqPipeSmem::ws_total` bytes of dynamic shared memory.
#[inline(always)]
pub unsafe fn mmq_flat_ws<B: WeightBlock>(p: &MmqParams) {
    let shape = MmqPipeShape::Flat;
    let (tx, ty) = cta::grid_coords(p);
    // SAFETY: one tile per CTA along x (tx < nctaid.x).
    let tile = unsafe { *(p.tiles as *const MmqTile).add(tx as usize) };
    if tile.n_cols == 0 {
        return; // a padding tile of a device-built list
    }
    let row0 = ty * shape.rows() as u32;
    let w = weight_row(p, tile.expert, row0);
    let c = Cta {
        tile,
        row_tile: ty,
        shape,
        wbase: w,
        ubase: w,
        swiglu: false,
        row_bytes: p.row_bytes,
        first_row: row0,
        tma: false,
        sm: MmqPipeSmem::of(B::WTYPE, shape),
        base: smem_base(),
        // Every lane of every warp here (`weight_policy`'s contract).
        policy: copy::weight_policy(p),
    };
    if c.sm.lead == 0 {
        return; // no layout without a lead today (`MmqPipeSmem::of`); the host never launches it
    }
    // SAFETY: every thread, before any copy.
    unsafe { copy::setup(&c) };
    // The consumers' threads copy the tables, as the flat kernel's threads (`copy_tables`
    // strides by `MMQ_THREADS`: with the producer's lanes too, two threads would write a word).
    if tid_x() < MMQ_THREADS as u32 {
        // SAFETY: the flat kernel's threads; the type's layout. Visible after the K loop's
        // first barrier.
        unsafe { c.copy_tables(B::WTYPE) };
    }
    let nk = p.k / MMQ_KSTEP as u32;
    let mut acc = [[[0.0f32; 4]; 4]; 2];
    // SAFETY: every thread, nothing issued; the flat layout with its barriers past it.
    if unsafe { k_loop::<B>(p, &c, nk, &mut acc) } {
        // SAFETY: the kernel's contract (the consumers hold the outputs).
        unsafe { super::super::store(p, &c.tile, row0, &acc, shape) }
    }
}

/// Consumer threads (the kernel's 8 multiplying warps).
const CONSUMERS: u32 = MMQ_THREADS as u32;
/// Producer threads (`MMQ_WS_PRODUCER_WARPS` warps after the consumers).
const PRODUCERS: u32 = 32 * MMQ_WS_PRODUCER_WARPS as u32;
/// Decoded groups a producer thread stores each K step (the flat kernel's threads' one each).
const GROUPS: u32 = CONSUMERS / PRODUCERS;
const _: () = assert!(MMQ_WS_THREADS == (CONSUMERS + PRODUCERS) as usize && GROUPS % 2 == 0);
/// Activation scales a producer thread copies in one batch (loads before stores): 8, or fewer
/// where the producers are too many for 8 each (4 a column, every column of a tile).
const XS_BATCH: u32 = {
    let per_thread = (4 * MmqPipeShape::Flat.cols()) as u32 / PRODUCERS;
    if per_thread < 8 { per_thread } else { 8 }
};
const _: () =
    assert!(XS_BATCH > 0 && 4 * MmqPipeShape::Flat.cols() % (XS_BATCH * PRODUCERS) as usize == 0);

/// The producers' barrier: their warp's when there is one (`bar.warp.sync`), else named
/// barrier 1 for their threads (the consumers never use a CTA barrier in the K loop).
///
/// # Safety
/// Every producer thread, in each use.
#[inline(always)]
unsafe fn sync_producers() {
    if PRODUCERS == 32 {
        sync_warp();
    } else {
        // SAFETY: the producers only (the contract), whole warps; nothing else uses barrier 1.
        unsafe { sync_named::<1, PRODUCERS>() };
    }
}

/// Decoded tile `b`'s full barrier (`MmqPipeSmem::ws_bars`).
fn full(c: &Cta, b: u32) -> u32 {
    c.base + (c.sm.ws_bars() + MMQ_PIPE_BAR_BYTES * b as usize) as u32
}

/// Decoded tile `b`'s empty barrier.
fn empty(c: &Cta, b: u32) -> u32 {
    c.base + (c.sm.ws_bars() + MMQ_PIPE_BAR_BYTES * (2 + b as usize)) as u32
}

/// The warp-specialized K loop. Returns `true` in the consumers (which hold the outputs).
///
/// # Safety
/// Every one of the CTA's `MMQ_WS_THREADS` threads, after `copy::setup`, nothing issued; the
/// launch gave `MmqPipeSmem::ws_total` bytes of shared memory.
#[inline(always)]
unsafe fn k_loop<B: WeightBlock>(
    p: &MmqParams,
    c: &Cta,
    nk: u32,
    acc: &mut [[[f32; 4]; 4]; 2],
) -> bool {
    let tid = tid_x();
    if tid == 0 {
        // SAFETY: four 8-byte barriers past the layout (the contract), not in use yet.
        unsafe {
            for b in 0..2 {
                mbar_init(full(c, b), PRODUCERS);
                mbar_init(empty(c, b), CONSUMERS);
            }
        }
        fence_mbar_init();
    }
    sync_threads();
    let lead = c.sm.lead as u32;
    if tid >= CONSUMERS {
        // The producer thread (0 .. PRODUCERS).
        let pt = tid - CONSUMERS;
        for s in 0..lead {
            if s < nk {
                // SAFETY: step s into buffers nothing has used yet.
                unsafe { copy::issue_by::<B, PRODUCERS, 0>(p, c, s, pt) };
            }
            copy::close();
        }
        for j in 0..nk {
            if j >= 2 {
                // Step j - 2's product done: tile j % 2 and step j - 2's activation buffer
                // (which step j + lead takes: lead + 2 buffers) free.
                // SAFETY: 256 consumer arrivals complete each phase.
                unsafe { mbar_wait(empty(c, j % 2), ((j - 2) / 2) % 2) };
            }
            let s = j + lead;
            // Every producer's decode of step j - 1 is done before the stage buffers are reused.
            // SAFETY: every producer thread.
            unsafe { sync_producers() };
            if s < nk {
                // SAFETY: its buffers free (above; the weight stages as in tiles::k_loop).
                unsafe { copy::issue_by::<B, PRODUCERS, 0>(p, c, s, pt) };
            }
            copy::close();
            // SAFETY: step j issued by the producers; `lead` groups closed after it. Then every
            // producer's pieces are visible to all of them.
            unsafe {
                copy::wait(c, j, lead);
                sync_producers();
            }
            // SAFETY: step j's bytes visible to the producers; tile j % 2 free (above). The
            // loads of two groups (eight activation scales) before their stores, so that their
            // latencies overlap. (A column past the tile's count copies a stale scale, as in
            // `decode`.)
            unsafe {
                for h in 0..GROUPS / 2 {
                    let mut qs = [([0u32; 8], [0.0f32; 2]); 2];
                    unroll!(v in [0, 1] {
                        qs[v] = tiles::decode_read::<B>(c, j, pt + PRODUCERS * (2 * h + v as u32));
                    });
                    unroll!(v in [0, 1] {
                        tiles::decode_store::<B>(c, j, pt + PRODUCERS * (2 * h + v as u32), qs[v].0, qs[v].1);
                    });
                }
                let items = 4 * c.shape.cols() as u32;
                let mut i0 = 0;
                while i0 < items {
                    let mut d = [0u32; 8];
                    unroll!(v in [0, 1, 2, 3, 4, 5, 6, 7] {
                        if (v as u32) < XS_BATCH {
                            let (src, _) = tiles::xscale_at(c, j, i0 + pt + PRODUCERS * v as u32);
                            d[v] = ld_shared_u32(src);
                        }
                    });
                    unroll!(v in [0, 1, 2, 3, 4, 5, 6, 7] {
                        if (v as u32) < XS_BATCH {
                            let (_, dst) = tiles::xscale_at(c, j, i0 + pt + PRODUCERS * v as u32);
                            st_shared_u32(dst, d[v]);
                        }
                    });
                    i0 += XS_BATCH * PRODUCERS;
                }
            }
            // SAFETY: the phase of step j expects the producer threads.
            unsafe { mbar_arrive(full(c, j % 2)) };
        }
        false
    } else {
        for j in 0..nk {
            // SAFETY: the producer completes each phase.
            unsafe {
                mbar_wait(full(c, j % 2), (j / 2) % 2);
                copy::wait_acts(c, j);
                tiles::product::<B>(c, j, acc);
                mbar_arrive(empty(c, j % 2));
            }
        }
        true
    }
}
