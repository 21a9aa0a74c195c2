//! The warp-private form of the pipelined MMQ kernel's copies (copy/mod.rs's module doc), for
//! the shapes that decode into registers (narrow, tall: regs.rs's K loop): on sm_90 each warp
//! copies its own rows (pieces, or a box in `moe_mmq_narrow_tma_<type>`) and waits for
//! them with a warp barrier; the activations' buffers are freed by an empty barrier every
//! thread arrives on. Below sm_90 the CTA-shared form (copy/mod.rs's `issue`).

use super::super::Cta;
#[cfg(not(gpu_sm90))]
use super::issue;
use super::wait;
#[cfg(gpu_sm90)]
use super::{bar, empty, stage_len, wbar};
use crate::formats::WeightBlock;
use crate::layout::MmqParams;
#[cfg(gpu_sm90)]
use crate::layout::{MMQ_THREADS, MmqTmaMap, Q8_1_MMQ_BYTES, mmq_tma_narrow_box_rows};
#[cfg(not(gpu_sm90))]
use crate::ptx::sync_threads;
#[cfg(gpu_sm90)]
use crate::ptx::{
    bulk_copy, cp_async_16_hint, mbar_arrive, mbar_arrive_expect_tx, mbar_wait, sync_warp, tid_x,
    tma_load_3d_hint, warp_uniform,
};

/// Issues this thread's share of K step `j`'s copies in the warp-private form
/// (sm_90; regs.rs's K loop): the warp's lanes copy the pieces of its own 16 weight rows
/// (when `j` starts a stage; a lane's row is the same one every stage), and the first lane
/// of warp `j % 8` copies the step's activation blocks in one bulk copy, once every thread has
/// arrived on the buffer's empty barrier past the product of the step it last held.
///
/// # Safety
/// `j < k / 128`, steps issued in order by every thread; the warp's part of the step's weight
/// buffer is free (no lane of the warp still reads it); the weight buffer is readable 16 bytes
/// past its end; `x` holds the tile's columns.
#[cfg(gpu_sm90)]
#[inline(always)]
pub(in crate::moe::mmq::pipe) unsafe fn issue_warp<B: WeightBlock>(p: &MmqParams, c: &Cta, j: u32) {
    const WARP_ROWS: u32 = 16;
    let tid = tid_x();
    let (warp, lane) = (tid / 32, tid % 32);
    let sub = c.shape.stage_steps(B::WTYPE) as u32;
    let policy = c.policy;
    if j % sub == 0 && c.tma {
        // The boxes' operands from warp-uniform values (`warp_uniform`), so that ptxas keeps
        // them in uniform registers rather than looping over the lanes' values.
        let warp = warp_uniform(warp);
        let expert = warp_uniform(c.tile.expert);
        if lane == 0 {
            // The warp's 16 rows as boxes of `layout::mmq_tma_narrow_box_rows` rows (one or two):
            // tile rows 16 warp .., weight rows `first_row + 16 warp ..`
            // (`moe_mmq_narrow_tma_<type>` has no SwiGLU epilogue: its rows are the product's in
            // order).
            let bx = const {
                let b = mmq_tma_narrow_box_rows(B::WTYPE) as u32;
                assert!(WARP_ROWS.is_multiple_of(b) && 32 % b == 0 && b >= 8);
                b
            };
            let (x, _) = MmqTmaMap::stage_box_of(B::WTYPE, c.shape, j / sub);
            let slot = c.sm.slot as u32;
            let b = wbar(c, warp, j / sub);
            let dst = c.raw(j, sub) + WARP_ROWS * warp * slot;
            // SAFETY: the layout's weight barrier of this warp and buffer, whose previous
            // phase this warp waited for before its products of that stage ([`wait_in_regs`]);
            // the warp's rows of the stage buffer are free (the contract); the maps describe w0
            // and w1 (`tma_here`), each box's rows lie in one of them (their row counts are
            // multiples of 32, the boxes start at multiples of the box's rows, which divide
            // 32); the boxes land at multiples of 128 bytes (at least 8 rows of a 16-byte
            // multiple `slot`, from a 128-aligned buffer).
            unsafe {
                mbar_arrive_expect_tx(b, WARP_ROWS * slot);
                for h in 0..WARP_ROWS / bx {
                    let r = c.first_row + WARP_ROWS * warp + bx * h;
                    let (map, y) = if r < p.n_split {
                        (p.wmap0, r)
                    } else {
                        (p.wmap1, r - p.n_split)
                    };
                    tma_load_3d_hint(dst + bx * h * slot, map, x, y, expert, b, policy);
                }
            }
        }
    } else if j % sub == 0 {
        // Two lanes a row: lane `2 r + h` copies pieces h, h + 2, ... of the warp's row r, so a
        // lane keeps one row address.
        let t = WARP_ROWS * warp + lane / 2;
        let srb = c.shape.stage_row_bytes(B::WTYPE) as u32;
        let chunks = (c.shape.stage_window(B::WTYPE) / 16) as u32;
        let src = c.stage_src(t, j, sub, srb as u64);
        let (a0, start) = (src & !15, src as u32 & 15);
        let dst = c.raw(j, sub) + t * c.sm.slot as u32;
        let len = stage_len::<B>(p, c, j);
        for i in 0..chunks.div_ceil(2) {
            let k = lane % 2 + 2 * i;
            // The piece lies in the row's 16-byte window (its bytes start at `start`); then
            // also k < chunks.
            if 16 * k < start + len {
                // SAFETY: the piece lies in the row's window, inside the weight buffer or its
                // readable 16 bytes past the end; the slot holds `chunks` pieces.
                unsafe { cp_async_16_hint(dst + 16 * k, a0 + 16 * k as u64, policy) };
            }
        }
    }
    if lane == 0 && warp == j % (MMQ_THREADS / 32) as u32 {
        let na = c.sm.na as u32;
        let i = j % na;
        let first = j as u64 * p.n_cols_x as u64 + c.tile.col_start as u64;
        let bytes = c.tile.n_cols * Q8_1_MMQ_BYTES as u32;
        // SAFETY: the buffer's previous step (j - na) is past every thread's product once its
        // empty phase completes (every thread arrives after its product: `release`); the tile's
        // columns are consecutive blocks of x (144 bytes each, 16-byte aligned) and fit the
        // buffer (at most its shape's columns); the full barrier's phase expects this thread's
        // arrival.
        unsafe {
            if j >= na {
                mbar_wait(empty(c, i), (j / na - 1) % 2);
            }
            mbar_arrive_expect_tx(bar(c, i), bytes);
            bulk_copy(
                c.acts(j),
                p.x + first * Q8_1_MMQ_BYTES as u64,
                bytes,
                bar(c, i),
            );
        }
    }
}

/// The copies of K step `j` in regs.rs's K loop (narrow and tall shapes): warp-private on sm_90
/// ([`issue_warp`]), shared by the CTA's threads below ([`issue`]).
///
/// # Safety
/// As [`issue_warp`] on sm_90 and [`issue`] below.
#[inline(always)]
pub(in crate::moe::mmq::pipe) unsafe fn issue_in_regs<B: WeightBlock>(
    p: &MmqParams,
    c: &Cta,
    j: u32,
) {
    // SAFETY: forwarded contract.
    #[cfg(gpu_sm90)]
    unsafe {
        issue_warp::<B>(p, c, j)
    };
    // SAFETY: forwarded contract.
    #[cfg(not(gpu_sm90))]
    unsafe {
        issue::<B>(p, c, j)
    };
}

/// The barrier after [`wait`] in regs.rs's K loop: the warp's on sm_90 (a warp reads only the
/// pieces its own lanes copied), the CTA's below.
#[inline(always)]
pub(in crate::moe::mmq::pipe) fn in_regs_barrier() {
    #[cfg(gpu_sm90)]
    sync_warp();
    #[cfg(not(gpu_sm90))]
    sync_threads();
}

/// [`wait`] for regs.rs's K loop: with tensor copies (sm_90) also, where `j` starts a stage,
/// the warp's weight barrier of the stage's buffer (its boxes; `issue_warp`).
///
/// # Safety
/// As [`wait`].
#[inline(always)]
pub(in crate::moe::mmq::pipe) unsafe fn wait_in_regs<B: WeightBlock>(c: &Cta, j: u32, ahead: u32) {
    // SAFETY: forwarded contract.
    unsafe { wait(c, j, ahead) };
    #[cfg(gpu_sm90)]
    {
        let sub = c.shape.stage_steps(B::WTYPE) as u32;
        if c.tma && j % sub == 0 {
            let st = j / sub;
            // SAFETY: the warp's first lane armed this phase when it issued the stage (every
            // thread issued step j: the contract).
            unsafe { mbar_wait(wbar(c, tid_x() / 32, st), (st / c.sm.nw as u32) % 2) };
        }
    }
}

/// Every thread's arrival on K step `j`'s activation buffer's empty barrier, past its product
/// of the step (sm_90, regs.rs's warp-private form; nothing below sm_90, where the
/// next step's CTA barrier frees the buffer).
///
/// # Safety
/// The calling thread no longer reads step j's activation buffer; called once per step by
/// every thread, in order.
#[inline(always)]
pub(in crate::moe::mmq::pipe) unsafe fn release(c: &Cta, j: u32) {
    // SAFETY: the layout's empty barrier, initialized for every thread's arrival.
    #[cfg(gpu_sm90)]
    unsafe {
        mbar_arrive(empty(c, j % c.sm.na as u32))
    };
    #[cfg(not(gpu_sm90))]
    let _ = (c, j);
}
