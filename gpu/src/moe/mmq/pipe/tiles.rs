//! The wide pipelined MMQ kernel's K loop (`moe_mmq_pipe_<type>`, pipe/mod.rs: every shape
//! that does not decode into registers): each K step's raw weight stage decoded into one of two
//! shared int8 tiles (weights, weight scales, activation scales) while the warps multiply the
//! other, one CTA barrier per K step.

use super::{Cta, ROW, copy, ld4};
use crate::formats::{SharedTables, WeightBlock};
use crate::layout::{MMQ_KSTEP, MMQ_THREADS, MmqParams, MmqPipeShape, MmqTmaMap};
use crate::ptx::{
    ld_shared_f32, ld_shared_v2_f32, ldmatrix_x4, mma_m16n8k16_s8, mma_m16n8k32_s8, st_shared_u32,
    st_shared_v4, sync_threads, tid_x, warp_uniform,
};
use crate::quant::{MAGIC, mmq_step_16_cvt, mmq_step_32_magic};

/// Decodes K step `j` from its raw stage into decoded tile `j % 2`: with `tpr` threads a row
/// (`256 / rows`: 2, or the flat shape's 4) thread `tid` takes weight row `tid / tpr` and its
/// `4 / tpr` groups from `(4 / tpr) (tid % tpr)`; and the activation scales of group
/// `i / cols` of column `i % cols` for `i = tid, tid + 256, ..` below `4 cols`.
///
/// # Safety
/// The stage's copies are complete and visible; no warp still reads the decoded tile.
#[inline(always)]
unsafe fn decode<B: WeightBlock>(c: &Cta, j: u32) {
    let tid = tid_x();
    let sub = c.shape.stage_steps(B::WTYPE) as u32;
    let srb = c.shape.stage_row_bytes(B::WTYPE) as u64;
    let rows = c.shape.rows() as u32;
    let tpr = MMQ_THREADS as u32 / rows;
    let gpt = 4 / tpr;
    let r = tid / tpr;
    let row = c.stage_row(r, j, sub, srb, MmqTmaMap::box_bytes(B::WTYPE) as u32);
    let dst = c.decoded(j);
    let bv = B::WTYPE.block_values() as u32;
    let sixteen = B::WTYPE.scale_values() == 16;
    let rs = c.shape.row_slot(r as usize) as u32;
    // Both groups' reads before any store: the loads are `pure`, so a block byte both groups
    // read (their shared `d`) is loaded and converted once.
    let read = |i: u32| {
        let g = gpt * (tid % tpr) + i;
        let v = (j % sub) * MMQ_KSTEP as u32 + g * 32;
        // SAFETY: the block was copied into this row's slot (whole blocks per stage), 2-byte
        // aligned as B needs; read by explicit shared loads (docs: formats::BlockBytes); the
        // type's tables copied in the prologue, visible since the first barrier.
        let blk = unsafe {
            SharedTables::at(row + (v / bv) * size_of::<B>() as u32, c.tables(), B::WTYPE)
        };
        let gi = ((v % bv) / 32) as usize;
        (B::group_q_in(blk, gi), B::group_scales_in(blk, gi))
    };
    let store = |i: u32, q: [u32; 8], s: [f32; 2]| {
        let g = gpt * (tid % tpr) + i;
        let a = dst + r * ROW + g * 32;
        let halves = if sixteen { 2 } else { 1 };
        let sa = dst + c.sm.wscales as u32 + (g * halves * rows + rs) * 4;
        // SAFETY: r < rows, g < 4: inside the tile and its scale array.
        unsafe {
            st_shared_v4(a, [q[0], q[1], q[2], q[3]]);
            st_shared_v4(a + 16, [q[4], q[5], q[6], q[7]]);
            st_shared_u32(sa, s[0].to_bits());
            if sixteen {
                st_shared_u32(sa + 4 * rows, s[1].to_bits());
            }
        }
    };
    let (q0, s0) = read(0);
    if gpt == 2 {
        let (q1, s1) = read(1);
        store(0, q0, s0);
        store(1, q1, s1);
    } else {
        store(0, q0, s0);
    }
    let cols = c.shape.cols() as u32;
    // Passes over the threads (wide: one, every thread, 4 groups x 64 columns; flat: two).
    let passes = (4 * c.shape.cols()).div_ceil(MMQ_THREADS);
    for pass in 0..passes {
        let i = tid + (pass * MMQ_THREADS) as u32;
        let (g, col) = (i / cols, i % cols);
        if c.shape.cols() * 4 >= MMQ_THREADS * (pass + 1) || g < 4 {
            // SAFETY: column < cols, group < 4: inside the stage's blocks and the scale array
            // (a column past the tile's count copies a stale scale that no stored output uses).
            unsafe {
                let d = ld_shared_f32(c.acts(j) + col * ROW + g * 4);
                let slot = c.shape.col_slot(col as usize) as u32;
                st_shared_u32(
                    dst + c.sm.xscales as u32 + (g * cols + slot) * 4,
                    d.to_bits(),
                );
            }
        }
    }
}

/// The warp's products of K step `j`: decoded tile `j % 2` against the step's activation
/// blocks, into `acc[mt][nt][i]` (tile row `16 MT wm + 16 mt + g + 8 (i / 2)`, column
/// `8 NT wn + 8 nt + 2 t + i % 2`, for the shape's MT fragments and NT tiles). 8-column tiles
/// without a live column are skipped: the warp runs the code for its count of live tiles.
///
/// # Safety
/// The decoded tile and the step's activation blocks are written and visible.
#[inline(always)]
pub(super) unsafe fn product<B: WeightBlock>(c: &Cta, j: u32, acc: &mut [[[f32; 4]; 4]; 2]) {
    let nt = c.shape.nt() as u32;
    let wn = tid_x() / 32 / c.shape.warps_m() as u32;
    // The warp's live 8-column tiles (warp-uniform), each count its own code without per-tile
    // branches (whose convergence ptxas cannot prove: it fences every `mma` after one). For
    // some types through `warp_uniform`, so that ptxas knows the count is the warp's
    // (`MmqPipeShape::uniform_live_tiles`, measured per type).
    let live = c
        .tile
        .n_cols
        .saturating_sub(wn * 8 * nt)
        .div_ceil(8)
        .min(nt);
    let live = if MmqPipeShape::uniform_live_tiles(B::WTYPE) {
        warp_uniform(live)
    } else {
        live
    };
    // SAFETY: forwarded contract.
    unsafe {
        match live {
            0 => {}
            1 => product_nt::<B, 1>(c, j, acc),
            2 => product_nt::<B, 2>(c, j, acc),
            3 => product_nt::<B, 3>(c, j, acc),
            _ => product_nt::<B, 4>(c, j, acc),
        }
    }
}

/// [`product`] for a warp with `NT` live 8-column tiles (1 to the shape's count).
///
/// # Safety
/// As [`product`].
#[inline(always)]
unsafe fn product_nt<B: WeightBlock, const NT: u32>(c: &Cta, j: u32, acc: &mut [[[f32; 4]; 4]; 2]) {
    let lane = tid_x() % 32;
    let warp = tid_x() / 32;
    let warps_m = c.shape.warps_m() as u32;
    let (wm, wn) = (warp % warps_m, warp / warps_m);
    let (mts, nts) = (c.shape.mt() as u32, c.shape.nt() as u32);
    let cols = c.shape.cols() as u32;
    let (gr, tc) = (lane / 4, lane % 4);
    let live = |nt: u32| nt < NT;
    let sixteen = B::WTYPE.scale_values() == 16;
    let t = c.decoded(j);
    let acts = c.acts(j);
    // A loop on purpose: unrolled (75c67a0), the K step took 7 % fewer SASS instructions but
    // the layer ran 1-2 % slower at T = 8,192 and 16,384 on the H200 (BENCHMARKS.md,
    // thirty-first session). Unrolled by two, and pipelined by half a group (the next tiles'
    // `mma`s before these tiles' `FFMA`s), with as many or fewer instructions, it ran 1-8 %
    // slower on an H100: more dispatch stalls (forty-second session).
    for g in 0..4u32 {
        // SAFETY: every address is inside the decoded tile or the step's activation blocks
        // (rows < 128, columns < cols, byte offsets < 144), 16-byte aligned where loaded 16 at
        // a time or by ldmatrix, 8-byte aligned where loaded 8 at a time.
        unsafe {
            let halves = if sixteen { 2 } else { 1 };
            let wsc = t
                + c.sm.wscales as u32
                + (g * halves * c.shape.rows() as u32 + wm * 16 * mts + gr * 2 * mts) * 4;
            let lds = |a: u32| {
                if mts == 2 {
                    ld4(a)
                } else {
                    let v = ld_shared_v2_f32(a);
                    [v[0], v[1], 0.0, 0.0]
                }
            };
            let da0 = lds(wsc);
            let da1 = if sixteen {
                lds(wsc + 4 * c.shape.rows() as u32)
            } else {
                da0
            };
            let xsc = t + c.sm.xscales as u32 + (g * cols + wn * 8 * nts + tc * 2 * nts) * 4;
            let db = [ld4(xsc), if NT > 2 { ld4(xsc + 16) } else { [0.0; 4] }];
            let mut af = [[0u32; 4]; 2];
            unroll!(mt in [0, 1] {
                if (mt as u32) < mts {
                    let r = wm * 16 * mts + mt as u32 * 16 + lane % 16;
                    af[mt] = ldmatrix_x4(t + r * ROW + g * 32 + (lane / 16) * 16);
                }
            });
            let mut bf = [[0u32; 2]; 4];
            unroll!(np in [0, 1] {
                if live(2 * np as u32) {
                    let col = wn * 8 * nts + np as u32 * 16 + lane % 8 + 8 * (lane / 16);
                    let v = ldmatrix_x4(acts + col * ROW + 16 + g * 32 + ((lane / 8) % 2) * 16);
                    bf[2 * np] = [v[0], v[1]];
                    bf[2 * np + 1] = [v[2], v[3]];
                }
            });
            unroll!(nt in [0, 1, 2, 3] {
                if live(nt as u32) {
                    let dbn = [db[nt / 2][2 * (nt % 2)], db[nt / 2][2 * (nt % 2) + 1]];
                    unroll!(mt in [0, 1] {
                        if (mt as u32) < mts {
                            let a = &mut acc[mt][nt];
                            if sixteen {
                                let lo = mma_m16n8k16_s8([af[mt][0], af[mt][1]], bf[nt][0], 0);
                                let hi = mma_m16n8k16_s8([af[mt][2], af[mt][3]], bf[nt][1], MAGIC);
                                unroll!(i in [0, 1, 2, 3] {
                                    let s = 2 * mt + i / 2;
                                    a[i] = mmq_step_16_cvt(a[i], lo[i], hi[i], da0[s], da1[s], dbn[i % 2]);
                                });
                            } else {
                                let m = mma_m16n8k32_s8(af[mt], bf[nt], MAGIC);
                                unroll!(i in [0, 1, 2, 3] {
                                    a[i] = mmq_step_32_magic(a[i], m[i], da0[2 * mt + i / 2], dbn[i % 2]);
                                });
                            }
                        }
                    });
                }
            });
        }
    }
}

/// Issues steps `0..=lead` (each closed as one commit group, issued or not): step j + 1 + lead
/// is issued in iteration j of the decoded tiles' K loop.
///
/// # Safety
/// Every thread, after `copy::setup`, nothing issued yet.
#[inline(always)]
unsafe fn issue_lead<B: WeightBlock>(p: &MmqParams, c: &Cta, nk: u32) {
    for s in 0..=c.sm.lead as u32 {
        if s < nk {
            // SAFETY: step s < nk into buffers nothing has used yet (`MmqPipeSmem::buffers`:
            // lead + 2 activation buffers and their barriers, a weight buffer per stage).
            unsafe { copy::issue::<B>(p, c, s) };
        }
        copy::close();
    }
}

/// The K loop through the decoded tiles (every shape and type but those decoded into
/// registers, regs.rs), steps `0..=lead` already issued.
///
/// # Safety
/// Every thread, after the prologue's copies, with `c.sm` a layout with decoded tiles.
#[inline(always)]
pub(super) unsafe fn k_loop<B: WeightBlock>(
    p: &MmqParams,
    c: &Cta,
    nk: u32,
    acc: &mut [[[f32; 4]; 4]; 2],
) {
    // SAFETY: every thread, nothing issued yet.
    unsafe { issue_lead::<B>(p, c, nk) };
    let lead = c.sm.lead as u32;
    if nk > 0 {
        // SAFETY: step 0 was issued by every thread.
        unsafe { copy::wait(c, 0, lead) };
        sync_threads();
        // SAFETY: step 0's copies complete and visible; the decoded tiles are unused.
        unsafe { decode::<B>(c, 0) };
    }
    for j in 0..nk {
        let jn = j + 1;
        if jn < nk {
            // Step jn: lead + 1 + j steps are closed, lead - 1 of them younger.
            // SAFETY: step jn < nk was issued by every thread.
            unsafe { copy::wait(c, jn, lead - 1) };
        }
        // Tile j % 2 (decoded last iteration) and step jn's copies visible; every warp is past
        // step j - 1's product (tile jn % 2 and the activations of step j - 1 free) and step
        // j's decode.
        sync_threads();
        let s = jn + lead;
        if s < nk {
            // SAFETY: step s's activation buffer (and its barrier) last held step s - lead - 2
            // (multiplied in iteration j - 1, waited for in iteration j - 2); its weight buffer
            // a stage whose last decode was before step j's (MmqPipeSmem's doc).
            unsafe { copy::issue::<B>(p, c, s) };
        }
        copy::close();
        // SAFETY: tile j % 2 and step j's activations are visible (above).
        unsafe { product::<B>(c, j, acc) };
        if jn < nk {
            // SAFETY: step jn's copies visible; tile jn % 2 free (above).
            unsafe { decode::<B>(c, jn) };
        }
    }
}

/// The warp-specialized kernel's decode (ws.rs): [`decode`]'s weight part for a shape of one
/// group a thread (flat), split into its reads ...
///
/// # Safety
/// As [`decode`].
#[inline(always)]
pub(super) unsafe fn decode_read<B: WeightBlock>(
    c: &Cta,
    j: u32,
    tid: u32,
) -> ([u32; 8], [f32; 2]) {
    let sub = c.shape.stage_steps(B::WTYPE) as u32;
    let srb = c.shape.stage_row_bytes(B::WTYPE) as u64;
    let tpr = MMQ_THREADS as u32 / c.shape.rows() as u32;
    let r = tid / tpr;
    let row = c.stage_row(r, j, sub, srb, MmqTmaMap::box_bytes(B::WTYPE) as u32);
    let bv = B::WTYPE.block_values() as u32;
    let g = tid % tpr;
    let v = (j % sub) * MMQ_KSTEP as u32 + g * 32;
    // SAFETY: as in `decode`.
    let blk =
        unsafe { SharedTables::at(row + (v / bv) * size_of::<B>() as u32, c.tables(), B::WTYPE) };
    let gi = ((v % bv) / 32) as usize;
    (B::group_q_in(blk, gi), B::group_scales_in(blk, gi))
}

/// ... and its stores.
///
/// # Safety
/// As [`decode`].
#[inline(always)]
pub(super) unsafe fn decode_store<B: WeightBlock>(
    c: &Cta,
    j: u32,
    tid: u32,
    q: [u32; 8],
    s: [f32; 2],
) {
    let tpr = MMQ_THREADS as u32 / c.shape.rows() as u32;
    let r = tid / tpr;
    let rs = c.shape.row_slot(r as usize) as u32;
    // SAFETY: r < rows, g < 4 (the contract).
    unsafe { store_group::<B>(c, c.decoded(j), r, rs, tid % tpr, q, s) }
}

/// Stores group `g` of tile row `r` (its scale slot `rs`, `MmqPipeShape::row_slot`) into the
/// decoded tile at `dst`: its 32 int8 values and its scale (two, 16-value scale types).
/// ([`decode`] keeps its own closures for the reads, the stores and the activation scales:
/// written through this function, [`decode_read`] and [`xscale_at`], the pipelined and flat
/// kernels' K steps move by -19 to +12 SASS instructions on sm_90 (ptxas 12.9, the
/// thirty-fourth session; the reads alone move them, and so did the stores alone), which no
/// GPU has measured.)
///
/// # Safety
/// `r` < the shape's rows, `g` < 4, `dst` a decoded tile no warp reads.
#[inline(always)]
unsafe fn store_group<B: WeightBlock>(
    c: &Cta,
    dst: u32,
    r: u32,
    rs: u32,
    g: u32,
    q: [u32; 8],
    s: [f32; 2],
) {
    let rows = c.shape.rows() as u32;
    let sixteen = B::WTYPE.scale_values() == 16;
    let a = dst + r * ROW + g * 32;
    let halves = if sixteen { 2 } else { 1 };
    let sa = dst + c.sm.wscales as u32 + (g * halves * rows + rs) * 4;
    // SAFETY: r < rows, g < 4: inside the tile and its scale array (the contract).
    unsafe {
        st_shared_v4(a, [q[0], q[1], q[2], q[3]]);
        st_shared_v4(a + 16, [q[4], q[5], q[6], q[7]]);
        st_shared_u32(sa, s[0].to_bits());
        if sixteen {
            st_shared_u32(sa + 4 * rows, s[1].to_bits());
        }
    }
}

/// The warp-specialized kernel's decode (ws.rs): the source and destination of [`decode`]'s
/// activation scale `i` (`i < 4 cols`).
#[inline(always)]
pub(super) fn xscale_at(c: &Cta, j: u32, i: u32) -> (u32, u32) {
    let cols = c.shape.cols() as u32;
    let (g, col) = (i / cols, i % cols);
    let slot = c.shape.col_slot(col as usize) as u32;
    (
        c.acts(j) + col * ROW + g * 4,
        c.decoded(j) + c.sm.xscales as u32 + (g * cols + slot) * 4,
    )
}
