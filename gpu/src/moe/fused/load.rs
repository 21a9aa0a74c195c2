//! The fused path's copies and weight decode: raw weight bytes (and, for the gate/up product,
//! the activation blocks) of one stage copied global -> shared with 16-byte `cp.async`, then
//! each 128-value K step decoded from shared memory into the int8 tile MMQ's `mma` reads.
//!
//! A weight row's stage bytes start anywhere 2-byte aligned, so a row's slot holds the 16-byte
//! aligned window around them (`layout::fused_slot_bytes`); the decoder reads the blocks at the
//! row's offset inside its window.

use crate::formats::{Shared, WeightBlock};
use crate::layout::{
    FUSED_COL_UNIT, FUSED_FFN_PASS, FUSED_ROWS, FUSED_THREADS, FusedParams, FusedSmem, MMQ_KSTEP,
    MMQ_SMEM_ROW, MmqTile, Q8_1_MMQ_BYTES, Q8_1_MMQ_PIECES, fused_slot_bytes,
    fused_stage_row_bytes, fused_sub_steps,
};
use crate::ptx::{cp_async_16, prefetch_l2, st_shared_u32, st_shared_v4, tid_x};

/// 16-byte pieces of one q8_1 D4 block.
const PIECES: u32 = Q8_1_MMQ_PIECES as u32;

/// Which product a stage belongs to, and where in it.
#[derive(Clone, Copy)]
pub struct Stage {
    /// false: gate/up, true: down.
    pub down: bool,
    /// Gate/up: the pass's first feature is `pass * FUSED_FFN_PASS`; down: its first output row
    /// is `pass * FUSED_ROWS`.
    pub pass: u32,
    /// Raw stage within the pass (K order).
    pub k_stage: u32,
}

/// The global address of tile row `t`'s bytes of stage `st`.
///
/// Gate/up tile rows: 16-row groups M = t / 16 hold the gate rows of features
/// `pass * 64 + 8 M .. + 8` (t % 16 < 8) and the up rows of the same features (t % 16 >= 8), so
/// that an `mma` fragment's rows g and g + 8 are the gate and up of one feature.
#[inline(always)]
pub fn row_src<G: WeightBlock, D: WeightBlock>(
    p: &FusedParams,
    expert: u32,
    st: Stage,
    t: u32,
) -> u64 {
    if st.down {
        let n = st.pass * FUSED_ROWS as u32 + t;
        p.down
            + expert as u64 * p.down_expert_bytes
            + n as u64 * p.down_row_bytes as u64
            + (st.k_stage as usize * fused_stage_row_bytes(D::WTYPE)) as u64
    } else {
        let j = st.pass * FUSED_FFN_PASS as u32 + (t / 16) * 8 + t % 8;
        let w = if t % 16 < 8 { p.gate } else { p.up };
        w + expert as u64 * p.gu_expert_bytes
            + j as u64 * p.gu_row_bytes as u64
            + (st.k_stage as usize * fused_stage_row_bytes(G::WTYPE)) as u64
    }
}

/// Issues this thread's share of stage `st`'s copies into the stage buffer at `buf`.
///
/// # Safety
/// `buf` is a stage buffer of layout `sm`; the weight buffers are readable 16 bytes past their
/// end; `x` holds the tile's columns (FusedParams' contract).
#[inline(always)]
pub unsafe fn issue_stage<G: WeightBlock, D: WeightBlock, const NT: usize>(
    p: &FusedParams,
    tile: &MmqTile,
    sm: &FusedSmem,
    buf: u32,
    st: Stage,
) {
    let tid = tid_x();
    let (row_bytes, chunks) = if st.down {
        (
            fused_stage_row_bytes(D::WTYPE) as u64,
            (fused_slot_bytes(D::WTYPE) / 16) as u32,
        )
    } else {
        (
            fused_stage_row_bytes(G::WTYPE) as u64,
            (fused_slot_bytes(G::WTYPE) / 16) as u32,
        )
    };
    let mut idx = tid;
    while idx < FUSED_ROWS as u32 * chunks {
        let (t, c) = (idx / chunks, idx % chunks);
        let src = row_src::<G, D>(p, tile.expert, st, t);
        let a0 = src & !15;
        if a0 + 16 * (c as u64) < src + row_bytes {
            // SAFETY: the chunk lies in the row's 16-byte window, inside the weight buffer or
            // its 16 readable bytes past the end; the slot holds `chunks` pieces.
            unsafe { cp_async_16(buf + t * sm.slot as u32 + 16 * c, a0 + 16 * c as u64) };
        }
        idx += FUSED_THREADS as u32;
    }
    if !st.down {
        let sub = fused_sub_steps(G::WTYPE) as u32;
        let cols = (FUSED_COL_UNIT * NT) as u32;
        let per_h = cols * PIECES;
        let mut idx = tid;
        while idx < sub * per_h {
            let (h, rem) = (idx / per_h, idx % per_h);
            let (col, piece) = (rem / PIECES, rem % PIECES);
            if col < tile.n_cols {
                let kc = st.k_stage * sub + h;
                let blk = kc as u64 * p.n_cols_x as u64 + (tile.col_start + col) as u64;
                let dst = buf + sm.stage_acts as u32 + (h * cols + col) * PIECES * 16;
                // SAFETY: block (kc, column) is inside x; 144-byte blocks keep every piece
                // 16-byte aligned on both sides.
                unsafe {
                    cp_async_16(
                        dst + 16 * piece,
                        p.x + blk * Q8_1_MMQ_BYTES as u64 + 16 * piece as u64,
                    )
                };
            }
            idx += FUSED_THREADS as u32;
        }
    }
}

/// Brings the weight rows of stage `st` into the L2 (`FusedParams::prefetch`): thread t < 128
/// takes tile row t, one `prefetch.global.L2` per 128-byte line its stage bytes touch.
///
/// # Safety
/// `st` is a stage of the tile's expert (its rows lie inside the weight buffers).
#[inline(always)]
pub unsafe fn prefetch_stage<G: WeightBlock, D: WeightBlock>(
    p: &FusedParams,
    tile: &MmqTile,
    st: Stage,
) {
    let t = tid_x();
    if t < FUSED_ROWS as u32 {
        let bytes = if st.down {
            fused_stage_row_bytes(D::WTYPE)
        } else {
            fused_stage_row_bytes(G::WTYPE)
        } as u64;
        let src = row_src::<G, D>(p, tile.expert, st, t);
        let mut line = src & !127;
        while line < src + bytes {
            // SAFETY: a line holding bytes of this row's stage, inside the weight buffer; the
            // first line is addressed at the row's first byte, so no address lies before it.
            unsafe { prefetch_l2(line.max(src)) };
            line += 128;
        }
    }
}

/// Decodes 128-value K step `h` of the raw stage at `buf` (weight type `B`) into the int8 tile
/// and its scales: thread `tid` takes row `tid / 2`, groups `2 (tid % 2)` and `+ 1`.
///
/// # Safety
/// The stage's copies are complete and visible (waited and behind a barrier); `src_row` is the
/// global address this thread's row was copied from (its offset in the 16-byte window).
#[inline(always)]
pub unsafe fn decode_step<B: WeightBlock>(
    sm: &FusedSmem,
    base: u32,
    buf: u32,
    src_row: u64,
    h: u32,
) {
    let tid = tid_x();
    let r = tid / 2;
    let row = buf + r * sm.slot as u32 + (src_row & 15) as u32;
    let bv = B::WTYPE.block_values() as u32;
    for j in 0..2u32 {
        let g = 2 * (tid % 2) + j;
        let v = h * MMQ_KSTEP as u32 + g * 32;
        let addr = row + (v / bv) * size_of::<B>() as u32;
        // SAFETY: the block was copied into this row's slot (whole blocks per stage), 2-byte
        // aligned as B needs; read by explicit shared loads (formats::BlockBytes).
        let blk = unsafe { Shared::at(addr) };
        let gi = ((v % bv) / 32) as usize;
        let q = B::group_q_in(blk, gi);
        let s = B::group_scales_in(blk, gi);
        let a = base + sm.tile as u32 + r * MMQ_SMEM_ROW as u32 + g * 32;
        let sa = base + sm.scales as u32 + r * 32 + g * 8;
        // SAFETY: r < 128 and g < 4: inside the tile and the scale array.
        unsafe {
            st_shared_v4(a, [q[0], q[1], q[2], q[3]]);
            st_shared_v4(a + 16, [q[4], q[5], q[6], q[7]]);
            st_shared_u32(sa, s[0].to_bits());
            st_shared_u32(sa + 4, s[1].to_bits());
        }
    }
}
