//! The pipelined MMQ products `moe_mmq_pipe_<type>` and `moe_mmq_narrow_<type>` (either
//! product: gate/up or down): the numerics and output of the classic kernel
//! (gpu/src/moe/mmq/mod.rs), with the copies and the decode taken off the critical path, in two
//! shapes (`layout::MmqPipeShape`, gpu/src/layout/mmq_pipe.rs): wide (64 columns, the classic
//! kernel's tile and warp layout) and narrow (16 columns, each warp on 16 weight rows; three
//! CTAs per SM where the type's layout fits).
//!
//! - Copies (copy.rs): each K step's activation D4 blocks and raw weight stage (the weight
//!   rows' bytes of 128 or 256 K values, in 16-byte windows), `MmqPipeSmem::lead` K steps
//!   ahead, into rings of their own (a weight stage is free once decoded, activations once
//!   multiplied): the activations in bulk copies on transaction barriers on sm_90, 16-byte
//!   `cp.async` below; the weights in 16-byte `cp.async` pieces (on sm_90 the narrow kernel's
//!   warps each copy their own rows' and wait with a warp barrier only: regs.rs).
//! - Decode: two decoded tiles (int8 weights, weight scales, activation scales). While the
//!   warps multiply K step j from one, they decode step j + 1 into the other: one barrier per
//!   K step, and a warp's decode overlaps the other warps' `mma`s.
//! - Scales: each tile keeps the weight scales `[group][half][row]` and the activation scales
//!   `[group][column]`, both permuted (`MmqPipeShape::row_slot` / `col_slot`) so that a lane
//!   loads its row scales in one 16-byte (narrow: 8-byte) load and its column scales in two
//!   (narrow: one) 16-byte loads (the classic kernel issues 24 scalar loads per group).
//! - Columns: an 8-column `mma` tile with no live column is skipped (warp-uniform); at 10 rows
//!   per expert half the wide shape's warps have no work in the product at all.
//! - Decode into registers (regs.rs): the narrow shape decodes every type straight into each
//!   warp's A fragments in its products (`MmqPipeShape::in_registers`), with no decoded tiles:
//!   every warp owns its 16 rows, so nothing is decoded twice.
//! - Lookup tables: the grid types' grids (and IQ2_XXS / IQ2_XS / IQ3_XXS's sign table) are
//!   copied into shared memory in the prologue (`Cta::copy_tables`, `MmqPipeSmem::tables`) and
//!   every decode looks them up there (`formats::SharedTables`).
//!
//! - Resident form (resident.rs, sm_90, the narrow kernel without the epilogue, where the host
//!   sets `MmqParams::resident`): the tile's whole K copied once in the prologue by bulk copies,
//!   warp by warp, and a K loop without CTA barriers (the down product at the reference shape).
//!
//! - SwiGLU epilogue (`moe_mmq_(pipe|narrow)_swiglu_<type>`, gate/up only; swiglu.rs): the tile's
//!   rows are gate and up rows of the same 64 features, interleaved by 8 (`Cta::row_addr`), so
//!   each lane holds gate and up of its outputs and the CTA writes H = q8_1(swiglu(gate, up))
//!   instead of gate and up: the `moe_swiglu_quant` launch and the f32 round trip are gone.
//!
//! Numerics: MMQ's exactly (`gpu::quant::mmq_step_32_magic` / `mmq_step_16_magic` in ascending
//! K), so the bytes equal the classic kernel's and the CPU reference's; the epilogue is
//! `moe_swiglu_quant`'s (`gpu::quant::swiglu`, the q8_1 rule), so H's bytes are its bytes.
//! Launcher: host/src/moe/expert/split.rs (chosen where the device has the shared memory).

mod copy;
mod cta;
mod regs;
#[cfg(gpu_sm90)]
mod resident;
mod swiglu;

#[cfg(gpu_sm90)]
pub use resident::mmq_resident;

use cta::{Cta, weight_row};

use crate::formats::{SharedTables, WeightBlock};
use crate::layout::{
    MMQ_KSTEP, MMQ_ROWS, MMQ_SMEM_ROW, MMQ_SWIGLU_FEATURES, MMQ_THREADS, MmqParams, MmqPipeShape,
    MmqPipeSmem, MmqTile, fused_stage_row_bytes, fused_sub_steps,
};
use crate::ptx::{
    ctaid_x, ctaid_y, ld_shared_f32, ld_shared_v2_f32, ld_shared_v4_u32, ldmatrix_x4,
    mma_m16n8k16_s8, mma_m16n8k32_s8, smem_base, st_shared_u32, st_shared_v4, sync_threads, tid_x,
};
use crate::quant::{MAGIC, mmq_step_16_magic, mmq_step_32_magic};

const ROW: u32 = MMQ_SMEM_ROW as u32;

/// Decodes K step `j` from its raw stage into decoded tile `j % 2`: thread `tid` takes weight
/// row `tid / 2`, groups `2 (tid % 2)` and `+ 1`, and (the first `4 cols` threads) the
/// activation scale of group `tid / cols` of column `tid % cols`.
///
/// # Safety
/// The stage's copies are complete and visible; no warp still reads the decoded tile.
#[inline(always)]
unsafe fn decode<B: WeightBlock>(c: &Cta, j: u32) {
    let tid = tid_x();
    let sub = fused_sub_steps(B::WTYPE) as u32;
    let srb = fused_stage_row_bytes(B::WTYPE) as u64;
    let r = tid / 2;
    let row = c.stage_row(r, j, sub, srb);
    let dst = c.decoded(j);
    let bv = B::WTYPE.block_values() as u32;
    let sixteen = B::WTYPE.scale_values() == 16;
    let rs = c.shape.row_slot(r as usize) as u32;
    // Both groups' reads before any store: the loads are `pure`, so a block byte both groups
    // read (their shared `d`) is loaded and converted once.
    let read = |i: u32| {
        let g = 2 * (tid % 2) + i;
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
        let g = 2 * (tid % 2) + i;
        let a = dst + r * ROW + g * 32;
        let halves = if sixteen { 2 } else { 1 };
        let sa = dst + c.sm.wscales as u32 + (g * halves * MMQ_ROWS as u32 + rs) * 4;
        // SAFETY: r < 128, g < 4: inside the tile and its scale array.
        unsafe {
            st_shared_v4(a, [q[0], q[1], q[2], q[3]]);
            st_shared_v4(a + 16, [q[4], q[5], q[6], q[7]]);
            st_shared_u32(sa, s[0].to_bits());
            if sixteen {
                st_shared_u32(sa + 4 * MMQ_ROWS as u32, s[1].to_bits());
            }
        }
    };
    let (q0, s0) = read(0);
    let (q1, s1) = read(1);
    store(0, q0, s0);
    store(1, q1, s1);
    let cols = c.shape.cols() as u32;
    let (g, col) = (tid / cols, tid % cols);
    // (Every thread in the wide shape: 4 groups x 64 columns.)
    if c.shape.cols() * 4 >= MMQ_THREADS || g < 4 {
        // SAFETY: column < cols, group < 4: inside the stage's blocks and the scale array (a
        // column past the tile's count copies a stale scale that no stored output uses).
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

/// Loads 4 f32 from a 16-byte aligned shared address.
///
/// # Safety
/// As `ld_shared_v4_u32`.
#[inline(always)]
unsafe fn ld4(addr: u32) -> [f32; 4] {
    // SAFETY: forwarded contract.
    let v = unsafe { ld_shared_v4_u32(addr) };
    [
        f32::from_bits(v[0]),
        f32::from_bits(v[1]),
        f32::from_bits(v[2]),
        f32::from_bits(v[3]),
    ]
}

/// The warp's products of K step `j`: decoded tile `j % 2` against the step's activation
/// blocks, into `acc[mt][nt][i]` (tile row `16 MT wm + 16 mt + g + 8 (i / 2)`, column
/// `8 NT wn + 8 nt + 2 t + i % 2`, for the shape's MT fragments and NT tiles). 8-column tiles
/// without a live column are skipped: the warp runs the code for its count of live tiles.
///
/// # Safety
/// The decoded tile and the step's activation blocks are written and visible.
#[inline(always)]
unsafe fn product<B: WeightBlock>(c: &Cta, j: u32, acc: &mut [[[f32; 4]; 4]; 2]) {
    let nt = c.shape.nt() as u32;
    let wn = tid_x() / 32 / c.shape.warps_m() as u32;
    // The warp's live 8-column tiles (warp-uniform), each count its own code without per-tile
    // branches (whose convergence ptxas cannot prove: it fences every `mma` after one).
    let live = c
        .tile
        .n_cols
        .saturating_sub(wn * 8 * nt)
        .div_ceil(8)
        .min(nt);
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
    for g in 0..4u32 {
        // SAFETY: every address is inside the decoded tile or the step's activation blocks
        // (rows < 128, columns < cols, byte offsets < 144), 16-byte aligned where loaded 16 at
        // a time or by ldmatrix, 8-byte aligned where loaded 8 at a time.
        unsafe {
            let halves = if sixteen { 2 } else { 1 };
            let wsc = t
                + c.sm.wscales as u32
                + (g * halves * MMQ_ROWS as u32 + wm * 16 * mts + gr * 2 * mts) * 4;
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
                lds(wsc + 4 * MMQ_ROWS as u32)
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
                                let lo = mma_m16n8k16_s8([af[mt][0], af[mt][1]], bf[nt][0], MAGIC);
                                let hi = mma_m16n8k16_s8([af[mt][2], af[mt][3]], bf[nt][1], MAGIC);
                                unroll!(i in [0, 1, 2, 3] {
                                    let s = 2 * mt + i / 2;
                                    a[i] = mmq_step_16_magic(a[i], lo[i], hi[i], da0[s], da1[s], dbn[i % 2]);
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

/// The pipelined product for weight format `B`, narrow or wide shape (see the module doc);
/// with `SWIGLU` the gate/up product with the SwiGLU + q8_1 epilogue (swiglu.rs).
///
/// # Safety
/// Parameters and buffers as `layout::MmqParams` describes, with the weight buffers readable
/// 16 bytes past their ends; launched with `MMQ_THREADS` threads,
/// `MmqPipeSmem::of(B::WTYPE, shape).total` bytes of dynamic shared memory, one CTA per tile
/// (of at most `shape.cols()` columns) along x and `n / 128` along y; `k` a multiple of the
/// stage width (`128 sub`). With `SWIGLU`: as `swiglu::store` requires.
#[inline(always)]
pub unsafe fn mmq_pipe<B: WeightBlock, const NARROW: bool, const SWIGLU: bool>(p: &MmqParams) {
    let shape = if NARROW {
        MmqPipeShape::Narrow
    } else {
        MmqPipeShape::Wide
    };
    // SAFETY: one tile per CTA along x.
    let tile = unsafe { *(p.tiles as *const MmqTile).add(ctaid_x() as usize) };
    if tile.n_cols == 0 {
        return; // a padding tile of a device-built list
    }
    let row0 = ctaid_y() * MMQ_ROWS as u32;
    let (wbase, ubase) = if SWIGLU {
        // Gate rows f0.., up rows n / 2 + f0.. (gate and up halves of the product's rows).
        let f0 = ctaid_y() * MMQ_SWIGLU_FEATURES as u32;
        (
            weight_row(p, tile.expert, f0),
            weight_row(p, tile.expert, p.n / 2 + f0),
        )
    } else {
        let w = weight_row(p, tile.expert, row0);
        (w, w)
    };
    let c = Cta {
        tile,
        shape,
        wbase,
        ubase,
        swiglu: SWIGLU,
        row_bytes: p.row_bytes,
        sm: MmqPipeSmem::of(B::WTYPE, shape),
        base: smem_base(),
    };
    let nk = p.k / MMQ_KSTEP as u32;
    let lead = c.sm.lead as u32;
    if lead == 0 {
        // A type whose layout has no room for a lead (MmqPipeSmem::of): the host runs another
        // kernel for it and never launches this one.
        return;
    }
    // SAFETY: every thread, before any copy.
    unsafe { copy::setup(&c) };
    // SAFETY: every thread; the type's layout. Visible after the K loop's first barrier,
    // before any decode.
    unsafe { c.copy_tables(B::WTYPE) };
    let mut acc = [[[0.0f32; 4]; 4]; 2];
    if shape.in_registers() {
        // SAFETY: every thread, nothing issued; the narrow register-decoding layout (the loop
        // issues its lead itself).
        unsafe { regs::k_loop::<B>(p, &c, nk, &mut acc) };
    } else {
        // SAFETY: every thread, nothing issued; then steps 0..=lead issued, with the decoded
        // tiles of this layout.
        unsafe {
            issue_lead::<B>(p, &c, nk);
            k_loop::<B>(p, &c, nk, &mut acc);
        }
    }
    // SAFETY: the kernel's contract.
    unsafe {
        if SWIGLU {
            swiglu::store(p, &c, &acc)
        } else {
            super::store(p, &tile, row0, &acc, shape)
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
unsafe fn k_loop<B: WeightBlock>(p: &MmqParams, c: &Cta, nk: u32, acc: &mut [[[f32; 4]; 4]; 2]) {
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
