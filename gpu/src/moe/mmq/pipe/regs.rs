//! The K loop of the shapes that decode into registers (`MmqPipeShape::in_registers`): the
//! narrow kernel (every type) and the tall 64-column one (`MmqPipeShape::wide_of`). A warp owns
//! 16 weight rows, so each lane decodes what its `m16n8k32` A fragment holds of its two rows
//! (`g` and `g + 8`, values `4 t ..` and `16 + 4 t ..` of each 32-value group, or `8 t .. 8 t +
//! 7` for Q2_0, the IQ2 and the IQ3 types, with the activations loaded in that order:
//! `WeightBlock::frag_q_in`, `FRAG_PAIRS`) straight from the raw stage, and their scales from
//! the blocks: no decoded tile, no stores of it, no `ldmatrix` of it, and its 41 KB of shared
//! memory go to a longer copy lead. An IQ2_XS / IQ2_S lane then holds values of one scale half
//! only (lanes 0 and 1 the first 16 of a group), so each half's sum is an `m16n8k32` with the
//! other half's lanes' A words zeroed.
//!
//! The loop: iteration j waits for step j's copies (`lead` younger steps closed), then a barrier
//! (the pieces visible; past step j - 1's product, whose buffers the copies issued next reuse),
//! issues step `j + 1 + lead`, multiplies step j. A raw stage is read in the products of its
//! steps, one iteration later than the decode read it, which `MmqPipeSmem::buffers` allows for.
//! Below sm_90 the CTA's threads share every copy and the barrier is the CTA's. On sm_90 the
//! loop is warp-private: each warp copies its own rows' pieces, so the barrier is the warp's;
//! the activations (one bulk copy a step, on the step's transaction barrier) are the only bytes
//! the warps share, and a buffer of them is reused once every thread has arrived on its empty
//! barrier (`copy::issue_warp`, `copy::release`).
//!
//! The tall shape's warp multiplies its 16 rows by all 64 columns (`product_tall`): it decodes
//! the step's four groups first, then runs each live 8-column tile over them in ascending K,
//! so that one tile's activation scales are live at a time. Two tiles at a time (one
//! `ldmatrix` for both) wanted 150-190 registers uncapped: at the cap of 128 Q8_0 and IQ4_NL
//! spilled 250 bytes, and Q2_0's gate/up ran 9 % slower at T = 2,048 (H200).
//!
//! Numerics: the pipelined kernel's (`mmq_step_32_magic` / `mmq_step_16_cvt` in ascending K, the
//! same integer sums and scales), so the bytes are the same.

use super::{Cta, ROW, copy, ld4};
use crate::formats::{SharedTables, WeightBlock};
use crate::layout::{MMQ_KSTEP, MmqParams};
#[cfg(gpu_sm90)]
use crate::ptx::sync_threads;
use crate::ptx::{ld_shared_v2_u32, ldmatrix_x2, ldmatrix_x4, mma_m16n8k32_s8, tid_x};
use crate::quant::{MAGIC, mmq_step_16_cvt, mmq_step_32_magic};

/// The K loop over `nk` steps, its copies included (`copy::issue_in_regs`). On sm_90 it is
/// warp-private (the warps share only the activations): each warp copies its own 16 rows'
/// pieces, so it waits only for its own lanes' commit groups and the step's activations (the
/// full barrier), and a warp barrier makes its lanes' pieces visible to each other; a step's
/// activation buffer is reused once every thread has arrived on its empty barrier past the
/// step's product (`copy::release`). No CTA barrier in the loop: a warp that is ahead goes on
/// while another multiplies. Below sm_90 the copies are shared by the CTA's threads and the
/// barrier is the CTA's.
///
/// # Safety
/// Every thread, after `copy::setup` and `Cta::copy_tables`, nothing issued; a shape that
/// decodes into registers, with `c.sm` its layout for `B`; `TALL` exactly when it is the tall
/// shape.
#[inline(always)]
pub(super) unsafe fn k_loop<B: WeightBlock, const TALL: bool>(
    p: &MmqParams,
    c: &Cta,
    nk: u32,
    acc: &mut [[[f32; 4]; 4]; 2],
) {
    let lead = c.sm.lead as u32;
    // The tables visible to every warp: on sm_90 the loop's one CTA barrier after the
    // prologue's (below sm_90 the first iteration's barrier is the CTA's).
    #[cfg(gpu_sm90)]
    sync_threads();
    for s in 0..=lead {
        if s < nk {
            // SAFETY: step s < nk into buffers nothing has used yet.
            unsafe { copy::issue_in_regs::<B>(p, c, s) };
        }
        copy::close();
    }
    for j in 0..nk {
        // SAFETY: step j was issued by every thread; steps j + 1 ..= j + lead closed after it.
        unsafe { copy::wait_in_regs::<B>(c, j, lead) };
        // Step j's pieces visible to the threads that read them; every one of those past step
        // j - 1's product.
        copy::in_regs_barrier();
        let s = j + 1 + lead;
        if s < nk {
            // SAFETY: step s's weight buffer held a stage whose last step was multiplied before
            // the barrier above (MmqPipeSmem::buffers); its activation buffer last held step
            // s - lead - 2 = j - 1, past every thread's product after the barrier (below sm_90)
            // or its empty barrier (sm_90, issue_warp).
            unsafe { copy::issue_in_regs::<B>(p, c, s) };
        }
        copy::close();
        // SAFETY: step j's weight stage and activations are visible (above).
        unsafe {
            if TALL {
                product_tall::<B>(c, j, acc);
            } else {
                product::<B, false>(c, j, Resident::STREAMED, acc);
            }
            copy::release(c, j);
        }
    }
}

/// Where the resident form (resident.rs) keeps a tile's weights and activations: row `r` at
/// `rows + r * row_bytes`, K step `j`'s activation blocks at `acts + j * acts_bytes`.
/// `Resident::STREAMED` for the streamed form (regs.rs's ring), which ignores it. (A const
/// flag and a plain value rather than a row-address closure: a closure built in `k_loop`
/// changed LLVM's unrolling of the wide kernels, which then spilled; this form leaves every
/// other kernel's SASS as it was.)
#[derive(Clone, Copy)]
pub(super) struct Resident {
    pub(super) rows: u32,
    pub(super) row_bytes: u32,
    pub(super) acts: u32,
    pub(super) acts_bytes: u32,
}

impl Resident {
    const STREAMED: Resident = Resident {
        rows: 0,
        row_bytes: 0,
        acts: 0,
        acts_bytes: 0,
    };
}

/// The warp's products of K step `j` (narrow shape: rows `16 warp ..`, columns `8 nt + 2 t +
/// i % 2`), for its count of live 8-column tiles: from the step's raw stage and activation
/// buffer in the ring, or with `RESIDENT` from where `res` says. (The tall shape's:
/// [`product_tall`].)
///
/// # Safety
/// Step j's weight bytes and activation blocks are written and visible there.
#[inline(always)]
pub(super) unsafe fn product<B: WeightBlock, const RESIDENT: bool>(
    c: &Cta,
    j: u32,
    res: Resident,
    acc: &mut [[[f32; 4]; 4]; 2],
) {
    // SAFETY: forwarded contract.
    unsafe {
        match c.tile.n_cols.div_ceil(8) {
            0 => {}
            1 => product_nt::<B, 1, RESIDENT>(c, j, res, acc),
            _ => product_nt::<B, 2, RESIDENT>(c, j, res, acc),
        }
    }
}

/// Where the lane's two rows (`16 warp + g` and `+ 8`) of K step `j` start in shared memory:
/// in the step's raw stage (each row's window starts 16-byte aligned: `Cta::stage_row`,
/// written out with `raw` hoisted out of the two rows; calling it moves address arithmetic in
/// the narrow kernels' PTX, and this form is the measured one), or with `RESIDENT` the row's
/// bytes from its start at `res`, the stage `j / sub` of them.
#[inline(always)]
fn lane_rows<B: WeightBlock, const RESIDENT: bool>(c: &Cta, j: u32, res: Resident) -> [u32; 2] {
    let lane = tid_x() % 32;
    let warp = tid_x() / 32;
    let sub = c.shape.stage_steps(B::WTYPE) as u32;
    let srb = c.shape.stage_row_bytes(B::WTYPE) as u64;
    let raw = c.raw(j, sub);
    let row = |r: u32| {
        if RESIDENT {
            res.rows + r * res.row_bytes + (j / sub) * srb as u32
        } else {
            let src = c.row_addr(r) + (j / sub) as u64 * srb;
            raw + r * c.sm.slot as u32 + (src & 15) as u32
        }
    };
    let r0 = 16 * warp + lane / 4;
    [row(r0), row(r0 + 8)]
}

/// The lane's A fragment of group `g` of K step `j` (rows `r0` and `r0 + 8` of its warp, at
/// `rows` in the stage: `[q0[0], q1[0], q0[1], q1[1]]`) and the two rows' weight scales
/// `[half][row]` (one half for the 32-value scale types).
///
/// # Safety
/// The rows' blocks of the step are copied into their slots (whole blocks per stage), 2-byte
/// aligned as B needs, and visible; the type's tables copied in the prologue, visible since the
/// first barrier.
#[inline(always)]
unsafe fn group_frag<B: WeightBlock>(
    c: &Cta,
    rows: [u32; 2],
    j: u32,
    g: u32,
    tc: u32,
) -> ([u32; 4], [[f32; 2]; 2]) {
    let sub = c.shape.stage_steps(B::WTYPE) as u32;
    let bv = B::WTYPE.block_values() as u32;
    let v = (j % sub) * MMQ_KSTEP as u32 + g * 32;
    let off = (v / bv) * size_of::<B>() as u32;
    let gi = ((v % bv) / 32) as usize;
    // SAFETY: the contract; read by explicit shared loads.
    let blk = |i: usize| unsafe { SharedTables::at(rows[i] + off, c.tables(), B::WTYPE) };
    let (q0, s0) = (B::frag_q_in(blk(0), gi, tc), B::group_scales_in(blk(0), gi));
    let (q1, s1) = (B::frag_q_in(blk(1), gi, tc), B::group_scales_in(blk(1), gi));
    (
        [q0[0], q1[0], q0[1], q1[1]],
        [[s0[0], s1[0]], [s0[1], s1[1]]],
    )
}

/// The tall shape's products of K step `j` (streamed: rows `16 warp ..`, all 64 columns of
/// the tile, fragment `nt` at `acc[nt / 4][nt % 4]`): the lane's A fragments and weight scales
/// of the step's four groups first, then each live block of 16 columns (two 8-column tiles)
/// over the four groups in ascending K, so that one block's activation scales (one 16-byte
/// load per column: the four groups') are live at a time.
///
/// # Safety
/// As [`product`].
#[inline(always)]
unsafe fn product_tall<B: WeightBlock>(c: &Cta, j: u32, acc: &mut [[[f32; 4]; 4]; 2]) {
    let lane = tid_x() % 32;
    let (gr, tc) = (lane / 4, lane % 4);
    let sixteen = B::WTYPE.scale_values() == 16;
    const { assert!(B::FRAG_PAIRS || B::WTYPE.scale_values() != 16) };
    let first_half = if tc < 2 { u32::MAX } else { 0 };
    let acts = c.acts(j);
    let rows = lane_rows::<B, false>(c, j, Resident::STREAMED);
    // The four groups' A fragments and scales `[group][half][row]`.
    let mut af = [[0u32; 4]; 4];
    let mut da = [[[0.0f32; 2]; 2]; 4];
    unroll!(gs in [0, 1, 2, 3] {
        // SAFETY: the step's stage (the contract).
        (af[gs], da[gs]) = unsafe { group_frag::<B>(c, rows, j, gs as u32, tc) };
    });
    let live = c.tile.n_cols.div_ceil(8);
    unroll!(nt in [0, 1, 2, 3, 4, 5, 6, 7] {
        if (nt as u32) < live {
            let c0 = 8 * nt as u32;
            // The activation scales of the lane's columns c0 + 2 t + k, the four groups' in
            // one 16-byte load per column.
            let db = [0, 1].map(|k| {
                // SAFETY: column < 64 inside the step's activation buffer, 16-byte aligned.
                unsafe { ld4(acts + (c0 + 2 * tc + k) * ROW) }
            });
            let a = &mut acc[nt / 4][nt % 4];
            unroll!(gs in [0, 1, 2, 3] {
                let g = gs as u32;
                let bf = if B::FRAG_PAIRS {
                    // SAFETY: column < 64 of the step's activation blocks, 8-byte aligned.
                    unsafe { ld_shared_v2_u32(acts + (c0 + gr) * ROW + 16 + g * 32 + 8 * tc) }
                } else {
                    // SAFETY: column < 64 of the step's activation blocks, 16-byte aligned.
                    unsafe {
                        ldmatrix_x2(acts + (c0 + lane % 8) * ROW + 16 + g * 32 + ((lane / 8) % 2) * 16)
                    }
                };
                let dbn = [db[0][gs], db[1][gs]];
                if sixteen {
                    let lo = mma_m16n8k32_s8(af[gs].map(|a| a & first_half), bf, 0);
                    let hi = mma_m16n8k32_s8(af[gs].map(|a| a & !first_half), bf, MAGIC);
                    unroll!(i in [0, 1, 2, 3] {
                        a[i] = mmq_step_16_cvt(a[i], lo[i], hi[i], da[gs][0][i / 2], da[gs][1][i / 2], dbn[i % 2]);
                    });
                } else {
                    let m = mma_m16n8k32_s8(af[gs], bf, MAGIC);
                    unroll!(i in [0, 1, 2, 3] {
                        a[i] = mmq_step_32_magic(a[i], m[i], da[gs][0][i / 2], dbn[i % 2]);
                    });
                }
            });
        }
    });
}

/// [`product`] for `NT` live 8-column tiles (1 or 2).
///
/// # Safety
/// As [`product`].
#[inline(always)]
unsafe fn product_nt<B: WeightBlock, const NT: usize, const RESIDENT: bool>(
    c: &Cta,
    j: u32,
    res: Resident,
    acc: &mut [[[f32; 4]; 4]; 2],
) {
    let lane = tid_x() % 32;
    let (gr, tc) = (lane / 4, lane % 4);
    let sixteen = B::WTYPE.scale_values() == 16;
    // A 16-value scale's halves in K pairs: lanes 0 and 1 hold values 0..16, lanes 2 and 3
    // values 16..32, so each half's sum is an `m16n8k32` with the other lanes' A words zeroed.
    const { assert!(B::FRAG_PAIRS || B::WTYPE.scale_values() != 16) };
    let first_half = if tc < 2 { u32::MAX } else { 0 };
    let acts = if RESIDENT {
        res.acts + j * res.acts_bytes
    } else {
        c.acts(j)
    };
    let rows = lane_rows::<B, RESIDENT>(c, j, res);
    // The activation scales of the lane's columns 8 nt + 2 t + h, all four groups' in one
    // 16-byte load per column (a D4 block's first 16 bytes).
    let mut db = [[0.0f32; 4]; 4];
    unroll!(q in [0, 1, 2, 3] {
        if q / 2 < NT {
            let col = 8 * (q / 2) as u32 + 2 * tc + (q % 2) as u32;
            // SAFETY: column < 16 inside the step's activation buffer, 16-byte aligned.
            db[q] = unsafe { ld4(acts + col * ROW) };
        }
    });
    // Unrolled: `db` is indexed by the group (a loop would index it at run time, in local
    // memory).
    unroll!(gs in [0, 1, 2, 3] {
        let g = gs as u32;
        // SAFETY: the step's stage (the contract).
        let (af, das) = unsafe { group_frag::<B>(c, rows, j, g, tc) };
        let bf = if B::FRAG_PAIRS {
            // The A fragment's K order (values 8 t .. 8 t + 7 of the group in lane t): each
            // live tile's column 8 nt + gr, its 8 bytes at 8 t of the group.
            let mut bf = [[0u32; 2]; 2];
            unroll!(nt in [0, 1] {
                if nt < NT {
                    let col = 8 * nt as u32 + gr;
                    // SAFETY: column < 16 of the step's activation blocks, 8-byte aligned.
                    bf[nt] = unsafe { ld_shared_v2_u32(acts + col * ROW + 16 + g * 32 + 8 * tc) };
                }
            });
            bf
        } else {
            // SAFETY: columns < 16 of the step's activation blocks, 16-byte aligned rows.
            let v = unsafe {
                let col = lane % 8 + 8 * (lane / 16);
                ldmatrix_x4(acts + col * ROW + 16 + g * 32 + ((lane / 8) % 2) * 16)
            };
            [[v[0], v[1]], [v[2], v[3]]]
        };
        unroll!(nt in [0, 1] {
            if nt < NT {
                let dbn = [db[2 * nt][gs], db[2 * nt + 1][gs]];
                let a = &mut acc[0][nt];
                if sixteen {
                    let lo = mma_m16n8k32_s8(af.map(|a| a & first_half), bf[nt], 0);
                    let hi = mma_m16n8k32_s8(af.map(|a| a & !first_half), bf[nt], MAGIC);
                    let (da0, da1) = (das[0], das[1]);
                    unroll!(i in [0, 1, 2, 3] {
                        a[i] = mmq_step_16_cvt(a[i], lo[i], hi[i], da0[i / 2], da1[i / 2], dbn[i % 2]);
                    });
                } else {
                    let m = mma_m16n8k32_s8(af, bf[nt], MAGIC);
                    let da = das[0];
                    unroll!(i in [0, 1, 2, 3] {
                        a[i] = mmq_step_32_magic(a[i], m[i], da[i / 2], dbn[i % 2]);
                    });
                }
            }
        });
    });
}
