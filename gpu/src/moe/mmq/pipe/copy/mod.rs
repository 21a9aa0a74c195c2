//! The copies of the pipelined MMQ kernel (pipe/mod.rs): K step `j`'s activation D4 blocks of
//! the tile's live columns, and its raw weight stage when `j` starts one (each weight row's
//! bytes in the 16-byte aligned window around them, at `Cta::raw(j) + row * slot`).
//!
//! - Weights: 16-byte `cp.async` pieces spread over the CTA's threads (sm_75: `cp_async_16`'s
//!   plain form), one commit group per K step, waited for with `cp.async.wait_group`. (A bulk
//!   copy per row is no cheaper: `cp.async.bulk` takes uniform operands, so 32 lanes' copies
//!   become a 32-round loop per warp.)
//! - Weights by tensor copies (sm_90, the kernels with the SwiGLU epilogue, where the host gives
//!   the weight tensors' maps: [`tma_here`]): the activations' thread copies the stage as
//!   boxes of `layout::MMQ_TMA_BOX_ROWS` rows (`layout::MmqTmaMap`; gate rows, then up rows:
//!   `Cta::tma_row`) that complete on the step's transaction barrier with its activations, in
//!   place of the pieces: the other threads issue no copy at all. H200, Q2_0 / Q2_0 at
//!   T = 8,192: the gate/up kernel 2.435 -> 2.308 ms (BENCHMARKS.md).
//! - Weights by tensor copies in the narrow kernel built with them (`moe_mmq_narrow_tma_<type>`,
//!   sm_90, launched where the host gives the narrow maps): each warp's first lane copies the
//!   warp's 16 rows as boxes of `layout::mmq_tma_narrow_box_rows` rows (one or two), each row its
//!   stage slot wide (the pieces' layout), onto a weight barrier of the warp's own
//!   (`MmqPipeSmem::weight_bar`). H200, Q2_0 / Q2_0 at T = 512: the gate/up kernel 0.310 ->
//!   0.291 ms (BENCHMARKS.md).
//! - Activations on sm_90 (cfg `gpu_sm90`): the tile's columns are consecutive blocks of `x`, so
//!   one thread copies the step's blocks in one bulk copy (`cp.async.bulk`) that completes on
//!   the step's transaction barrier (`MmqPipeSmem::bars`, one per activation buffer, one
//!   arrival with the bytes), in place of 9 16-byte pieces per column spread over the threads.
//!   Below sm_90: `cp.async` pieces in the weights' commit groups.
//! - The shapes that decode into registers (narrow and tall) on sm_90 ([`warp::issue_warp`], regs.rs's
//!   K loop): each warp copies its own 16 rows' pieces, the first lane of warp `j % 8` step j's
//!   activations once every thread has arrived on the buffer's empty barrier ([`release`];
//!   warp.rs).
//!
//! A step's bytes are visible to every thread after [`wait`] and the CTA barrier after it (those
//! shapes on sm_90: a warp's own pieces after [`wait`] and the warp barrier).

mod warp;
pub(super) use warp::{in_regs_barrier, issue_in_regs, release, wait_in_regs};

use super::Cta;
use crate::formats::WeightBlock;
use crate::layout::{
    MMQ_KSTEP, MMQ_THREADS, MmqParams, MmqPipeShape, Q8_1_MMQ_BYTES, fused_sub_steps,
};
#[cfg(gpu_sm90)]
use crate::layout::{
    MMQ_PIPE_BAR_ARRIVALS, MMQ_PIPE_BAR_BYTES, MMQ_TMA_BOX_ROWS, MMQ_WEIGHT_L2_FIRST, MmqTmaMap,
};
#[cfg(not(gpu_sm90))]
use crate::layout::{MMQ_SMEM_ROW, Q8_1_MMQ_PIECES};
#[cfg(gpu_sm90)]
use crate::ptx::{
    bulk_copy, fence_mbar_init, l2_evict_first, l2_evict_normal, mbar_arrive_expect_tx, mbar_init,
    mbar_wait, tma_load_3d, warp_uniform,
};
use crate::ptx::{cp_async_16, cp_async_commit, cp_async_wait, sync_threads, tid_x};

/// The thread that issues the activations' bulk copy (sm_90): the first of the second half.
#[cfg(gpu_sm90)]
const ACTS_THREAD: u32 = (MMQ_THREADS / 2) as u32;
/// [`ACTS_THREAD`] where every thread copies ([`issue`]); below sm_90 no thread copies them so.
#[cfg(gpu_sm90)]
const ACTS_THREAD_ALL: u32 = ACTS_THREAD;
#[cfg(not(gpu_sm90))]
const ACTS_THREAD_ALL: u32 = u32::MAX;

/// The L2 cache policy of the weights' copies (sm_90, `MmqParams::weight_l2`): their lines
/// evicted first, or at the normal priority. Through `ptx::warp_uniform`, so that ptxas keeps it
/// in uniform registers: the copies that take it need no loop over the lanes' values. Every
/// lane of the warp must call it together.
#[cfg(gpu_sm90)]
#[inline(always)]
pub(super) fn weight_policy(p: &MmqParams) -> u64 {
    let policy = if p.weight_l2 == MMQ_WEIGHT_L2_FIRST {
        l2_evict_first()
    } else {
        l2_evict_normal()
    };
    let lo = warp_uniform(policy as u32) as u64;
    let hi = warp_uniform((policy >> 32) as u32) as u64;
    lo | hi << 32
}

/// The bytes of each weight row in the raw stage that K step `j` starts (`j` a multiple of the
/// stage's steps): the whole stage, or where `k` ends inside it (the narrow shape's longer
/// stages, `MmqPipeShape::stage_steps`), the rows' remaining steps.
#[inline(always)]
fn stage_len<B: WeightBlock>(p: &MmqParams, c: &Cta, j: u32) -> u32 {
    let sub = c.shape.stage_steps(B::WTYPE) as u32;
    let srb = c.shape.stage_row_bytes(B::WTYPE) as u32;
    if sub as usize > fused_sub_steps(B::WTYPE) {
        let left = p.k / MMQ_KSTEP as u32 - j;
        if left < sub {
            return left * MmqPipeShape::step_row_bytes(B::WTYPE) as u32;
        }
    }
    srb
}

/// Whether a CTA of `shape` copies its raw weight stages by tensor copies, in a kernel built
/// with them (`built`), on sm_90:
/// - 128-row and flat shapes (decoded tiles): where the host gave the maps of the product's
///   weight tensors ([`maps_given`]). Built so: the kernels with the SwiGLU epilogue. The ones
///   without it are built without them: on the H200 the flat Q2_0 kernel built with them
///   (their test in its decode) was 6 % slower at T = 16,384 with them off and as slow with
///   them on (BENCHMARKS.md).
/// - Narrow shape: always, a constant (`moe_mmq_narrow_tma_<type>`, launched only with the
///   maps): each warp's first lane copies the warp's rows as one box (IQ4_NL: two,
///   `layout::mmq_tma_narrow_box_rows`) that completes on the warp's weight barrier
///   ([`issue_warp`], [`wait_in_regs`]), in the pieces' layout (a row's window at `slot`
///   bytes), so the products read it as before. Built with a runtime test instead, its pieces
///   ran 9 % slower (BENCHMARKS.md).
/// - Tall shape: never.
#[inline(always)]
pub(super) fn tma_here(p: &MmqParams, shape: MmqPipeShape, built: bool) -> bool {
    cfg!(gpu_sm90)
        && built
        && match shape {
            MmqPipeShape::Narrow => true,
            MmqPipeShape::Wide | MmqPipeShape::Flat => maps_given(p),
            MmqPipeShape::Tall => false,
        }
}

/// Whether the host gave the maps of the product's weight tensors: `MmqParams::wmap0`, and
/// `wmap1` where some row lies in `w1`.
#[inline(always)]
pub(super) fn maps_given(p: &MmqParams) -> bool {
    p.wmap0 != 0 && (p.n_split >= p.n || p.wmap1 != 0)
}

/// Prepares the copies (sm_90: initializes the step barriers) and ends with a CTA barrier.
///
/// # Safety
/// Called once by every thread of the CTA before any copy.
#[inline(always)]
pub(super) unsafe fn setup(c: &Cta) {
    #[cfg(gpu_sm90)]
    if tid_x() == 0 {
        for i in 0..c.sm.na as u32 {
            // SAFETY: the barrier array of the layout, 8-byte aligned, not in use yet.
            unsafe { mbar_init(bar(c, i), MMQ_PIPE_BAR_ARRIVALS as u32) };
            if c.shape.in_registers() {
                // SAFETY: as above (the layout's empty barriers: `MmqPipeSmem::empty_bar`).
                unsafe { mbar_init(empty(c, i), MMQ_THREADS as u32) };
            }
        }
        if c.tma && matches!(c.shape, MmqPipeShape::Narrow) {
            for s in 0..c.sm.nw as u32 {
                for warp in 0..(MMQ_THREADS / 32) as u32 {
                    // SAFETY: as above (the layout's weight barriers, `MmqPipeSmem::wbars`): one
                    // arrival a phase, the warp's first lane's with its boxes' bytes.
                    unsafe { mbar_init(wbar(c, warp, s), 1) };
                }
            }
        }
        fence_mbar_init();
    }
    #[cfg(not(gpu_sm90))]
    let _ = c;
    sync_threads();
}

/// The barrier of activation buffer `i` (sm_90).
#[cfg(gpu_sm90)]
#[inline(always)]
fn bar(c: &Cta, i: u32) -> u32 {
    c.base + (c.sm.bars + MMQ_PIPE_BAR_BYTES * i as usize) as u32
}

/// Warp `warp`'s weight barrier for the weight buffer of stage `s` (sm_90, the narrow shape
/// with tensor copies: `MmqPipeSmem::weight_bar`).
#[cfg(gpu_sm90)]
#[inline(always)]
fn wbar(c: &Cta, warp: u32, s: u32) -> u32 {
    c.base
        + c.sm
            .weight_bar(warp as usize, (s % c.sm.nw as u32) as usize) as u32
}

/// The empty barrier of activation buffer `i` (sm_90, a shape that decodes into registers).
#[cfg(gpu_sm90)]
#[inline(always)]
fn empty(c: &Cta, i: u32) -> u32 {
    c.base + c.sm.empty_bar(i as usize) as u32
}

/// Issues this thread's share of K step `j`'s copies (see the module doc).
///
/// # Safety
/// `j < k / 128`; the step's buffers (and on sm_90 its barrier's previous phase) are free: no
/// thread still reads them or waits on it; the weight buffer is readable 16 bytes past its end;
/// `x` holds the tile's columns.
#[inline(always)]
pub(super) unsafe fn issue<B: WeightBlock>(p: &MmqParams, c: &Cta, j: u32) {
    // SAFETY: forwarded contract.
    unsafe { issue_by::<B, { MMQ_THREADS as u32 }, ACTS_THREAD_ALL>(p, c, j, tid_x()) }
}

/// [`issue`] by `THREADS` threads of which this is `tid`, `ACTS` the one that copies the
/// activations (sm_90): the CTA's threads, or the warp-specialized kernel's producer warp
/// (ws.rs). Const parameters, so that the CTA's form compiles as it did before the other.
///
/// # Safety
/// As [`issue`], every one of the `THREADS` threads calling it.
#[inline(always)]
pub(super) unsafe fn issue_by<B: WeightBlock, const THREADS: u32, const ACTS: u32>(
    p: &MmqParams,
    c: &Cta,
    j: u32,
    tid: u32,
) {
    let sub = c.shape.stage_steps(B::WTYPE) as u32;
    if j % sub == 0 && !c.tma {
        let buf = c.raw(j, sub);
        let srb = c.shape.stage_row_bytes(B::WTYPE) as u64;
        let chunks = (c.shape.stage_window(B::WTYPE) / 16) as u32;
        let len = stage_len::<B>(p, c, j) as u64;
        let mut idx = tid;
        while idx < c.shape.rows() as u32 * chunks {
            let (t, k) = (idx / chunks, idx % chunks);
            let src = c.stage_src(t, j, sub, srb);
            let a0 = src & !15;
            if a0 + 16 * (k as u64) < src + len {
                // SAFETY: the piece lies in the row's 16-byte window, inside the weight buffer
                // or its readable 16 bytes past the end; the slot holds `chunks` pieces.
                unsafe { cp_async_16(buf + t * c.sm.slot as u32 + 16 * k, a0 + 16 * k as u64) };
            }
            idx += THREADS;
        }
    }
    #[cfg(gpu_sm90)]
    if tid == ACTS {
        let b = bar(c, j % c.sm.na as u32);
        let first = j as u64 * p.n_cols_x as u64 + c.tile.col_start as u64;
        let bytes = c.tile.n_cols * Q8_1_MMQ_BYTES as u32;
        // The stage's boxes (with tensor copies, where j starts a stage).
        let stage = c.tma && j % sub == 0;
        let boxes = if stage {
            (c.shape.rows() / MMQ_TMA_BOX_ROWS) as u32
        } else {
            0
        };
        let box_bytes = MmqTmaMap::box_bytes(B::WTYPE) as u32;
        let box_total = box_bytes * MMQ_TMA_BOX_ROWS as u32;
        // SAFETY: the tile's columns are consecutive blocks of x (144 bytes each, 16-byte
        // aligned) and fit the activation buffer (at most its shape's columns); the barrier's
        // phase expects this thread's arrival, with the boxes' bytes and the blocks'.
        unsafe {
            mbar_arrive_expect_tx(b, bytes + boxes * box_total);
            let (x, _) = MmqTmaMap::stage_box(B::WTYPE, j / sub);
            for i in 0..boxes {
                let r = c.tma_box_row(i, p.n);
                let (map, y) = if r < p.n_split {
                    (p.wmap0, r)
                } else {
                    (p.wmap1, r - p.n_split)
                };
                // SAFETY (with the above): the maps describe w0 and w1 (`tma_here`), the box's
                // rows lie in one of them (their row counts multiples of the box's rows); the
                // stage buffer holds the CTA's rows at `box_bytes` (at most its slot) apart, at
                // a multiple of 1,024 bytes from the 128-byte aligned shared memory.
                tma_load_3d(c.raw(j, sub) + i * box_total, map, x, y, c.tile.expert, b);
            }
            bulk_copy(c.acts(j), p.x + first * Q8_1_MMQ_BYTES as u64, bytes, b);
        }
    }
    #[cfg(not(gpu_sm90))]
    {
        const ROW: u32 = MMQ_SMEM_ROW as u32;
        const PIECES: u32 = Q8_1_MMQ_PIECES as u32;
        let buf = c.acts(j);
        let mut idx = tid;
        // Only the tile's live columns (10 of 64 at 10 rows per expert).
        while idx < c.tile.n_cols * PIECES {
            let (col, piece) = (idx / PIECES, idx % PIECES);
            let blk = j as u64 * p.n_cols_x as u64 + (c.tile.col_start + col) as u64;
            // SAFETY: block (j, column) is inside x (col < n_cols); 144-byte blocks keep every
            // piece 16-byte aligned on both sides.
            unsafe {
                cp_async_16(
                    buf + col * ROW + 16 * piece,
                    p.x + blk * Q8_1_MMQ_BYTES as u64 + 16 * piece as u64,
                )
            };
            idx += THREADS;
        }
    }
}

/// Closes the `cp.async` copies issued since the last call as one commit group. Called once
/// per step slot, issued or not.
#[inline(always)]
pub(super) fn close() {
    cp_async_commit();
}

/// Waits until K step `j`'s copies have landed, `ahead` commit groups having been closed after
/// its own (`cp.async.wait_group ahead`; on sm_90 also `j`'s barrier phase, the activations).
/// A CTA barrier must follow before other threads' bytes are read.
///
/// # Safety
/// Step `j` was issued by every thread.
#[inline(always)]
pub(super) unsafe fn wait(c: &Cta, j: u32, ahead: u32) {
    cp_async_wait(ahead);
    #[cfg(gpu_sm90)]
    {
        let na = c.sm.na as u32;
        // SAFETY: the activation thread issued step j (the caller's contract).
        unsafe { mbar_wait(bar(c, j % na), (j / na) % 2) };
    }
    #[cfg(not(gpu_sm90))]
    let _ = (c, j);
}

/// Waits for K step `j`'s activation barrier phase only (sm_90): its bulk-copied blocks are
/// then visible to this thread.
///
/// # Safety
/// Step `j` was issued and its phase is the barrier's current or last completed one.
#[cfg(gpu_sm90)]
#[inline(always)]
pub(super) unsafe fn wait_acts(c: &Cta, j: u32) {
    let na = c.sm.na as u32;
    // SAFETY: the caller's contract.
    unsafe { mbar_wait(bar(c, j % na), (j / na) % 2) };
}
