//! The weight-stationary K loop (ws/mod.rs has the design): the step's activations packed in
//! row pairs into shared memory ([`stage`]), each weight group decoded once and multiplied with
//! every pair ([`pair_step`]), the rows' MMQ epilogue in ascending K and the store ([`ws_body`]).

use crate::formats::WeightBlock;
use crate::layout::{MMQ_KSTEP, MmqParams, MmqTile, WS_ROWS, ws_scales_offset};
use crate::pairs::{pack_pair, split_pair};
use crate::ptx::{
    ctaid_y, ld_nc_v4_u32, ld_shared_f32, ld_shared_v2_f32, ld_shared_v4_u32, mad_wide_s32, prmt,
    smem_base, st_shared_u32, st_shared_v4, sync_threads, tid_x,
};
use crate::quant::{mmq_step_16, mmq_step_32};

/// Bytes of one pair's packed K step in shared memory.
const PAIR_BYTES: u32 = (MMQ_KSTEP * 4) as u32;

/// Byte `i` of `v` sign-extended to 32 bits (`prmt` with the sign-replicate selectors).
#[inline(always)]
fn sbyte(v: u32, i: u32) -> i32 {
    prmt(v, 0, i | (8 | i) << 4 | (8 | i) << 8 | (8 | i) << 12) as i32
}

/// Packs the tile's activations of K step `ks` into pair words, and their scales, in shared
/// memory; rows past the tile's count are zeros (their results are never stored).
///
/// # Safety
/// `x` holds `k / 128` chunks of `n_cols_x` D4 blocks; the tile's rows are below `n_cols_x`.
#[inline(always)]
unsafe fn stage<const COLS: usize>(
    fast: bool,
    x: u64,
    n_cols_x: u32,
    tile: &MmqTile,
    ks: u32,
    smem: u32,
) {
    let tid = tid_x();
    let block = |c: u32| x + (ks as u64 * n_cols_x as u64 + (tile.col_start + c) as u64) * 144;
    // (pair, 16-byte piece of the 128 values): COLS / 2 * 8 items.
    let mut idx = tid;
    while idx < (COLS as u32 / 2) * 8 {
        let (pair, piece) = (idx / 8, idx % 8);
        let (c0, c1) = (2 * pair, 2 * pair + 1);
        // SAFETY: rows below the tile's count are inside x; qs starts 16 bytes into a block.
        let a = if c0 < tile.n_cols {
            unsafe { ld_nc_v4_u32((block(c0) + 16 + 16 * piece as u64) as *const u32) }
        } else {
            [0; 4]
        };
        let b = if c1 < tile.n_cols {
            unsafe { ld_nc_v4_u32((block(c1) + 16 + 16 * piece as u64) as *const u32) }
        } else {
            [0; 4]
        };
        unroll!(j in [0, 1, 2, 3] {
            let mut wv = [0u32; 4];
            unroll!(i in [0, 1, 2, 3] {
                let x0 = sbyte(a[j], i as u32);
                let x1 = sbyte(b[j], i as u32);
                wv[i] = pack_pair(x0, x1) as u32;
            });
            // SAFETY: inside the pair area (pair < COLS / 2, 16 j + 64 piece < 512).
            unsafe { st_shared_v4(smem + pair * PAIR_BYTES + piece * 64 + 16 * j as u32, wv) };
        });
        idx += WS_ROWS as u32;
    }
    let mut idx = tid;
    while idx < COLS as u32 * 4 {
        let (c, g) = (idx / 4, idx % 4);
        let d = if c < tile.n_cols {
            // SAFETY: as above; d[g] is the block's first 16 bytes.
            unsafe { *((block(c) + 4 * g as u64) as *const f32) }
        } else {
            0.0
        };
        let slot = if fast { g * COLS as u32 + c } else { c * 4 + g };
        // SAFETY: inside the scale area.
        unsafe { st_shared_u32(smem + ws_scales_offset(COLS) as u32 + 4 * slot, d.to_bits()) };
        idx += WS_ROWS as u32;
    }
}

/// Runs `run(pr)` for pr = `$np` - 1 down to 0 (`$np` <= 16) by jumping into a fully unrolled
/// sequence (nested labelled blocks: `break 'pK` falls through pairs K .. 0), one branch per
/// call instead of a test per pair. `$np` outside 1..=16 runs nothing.
macro_rules! fall_through_16 {
    ($np:expr, |$pr:ident| $e:expr) => {{
        #[allow(clippy::unused_unit)]
        let mut run = |$pr: usize| $e;
        'none: {
            'p0: {
                'p1: {
                    'p2: {
                        'p3: {
                            'p4: {
                                'p5: {
                                    'p6: {
                                        'p7: {
                                            'p8: {
                                                'p9: {
                                                    'p10: {
                                                        'p11: {
                                                            'p12: {
                                                                'p13: {
                                                                    'p14: {
                                                                        'p15: {
                                                                            match $np {
                                                                                16 => break 'p15,
                                                                                15 => break 'p14,
                                                                                14 => break 'p13,
                                                                                13 => break 'p12,
                                                                                12 => break 'p11,
                                                                                11 => break 'p10,
                                                                                10 => break 'p9,
                                                                                9 => break 'p8,
                                                                                8 => break 'p7,
                                                                                7 => break 'p6,
                                                                                6 => break 'p5,
                                                                                5 => break 'p4,
                                                                                4 => break 'p3,
                                                                                3 => break 'p2,
                                                                                2 => break 'p1,
                                                                                1 => break 'p0,
                                                                                _ => break 'none,
                                                                            }
                                                                        }
                                                                        run(15);
                                                                    }
                                                                    run(14);
                                                                }
                                                                run(13);
                                                            }
                                                            run(12);
                                                        }
                                                        run(11);
                                                    }
                                                    run(10);
                                                }
                                                run(9);
                                            }
                                            run(8);
                                        }
                                        run(7);
                                    }
                                    run(6);
                                }
                                run(5);
                            }
                            run(4);
                        }
                        run(3);
                    }
                    run(2);
                }
                run(1);
            }
            run(0);
        }
    }};
}

/// One row pair's products for a 32-value group: the pair's 64-bit sum of `mad.wide.s32`s
/// (two for the 16-scale types), split into the rows' int32 sums, then MMQ's epilogue step for
/// each of the two rows (`acc[2 pr]`, `acc[2 pr + 1]`).
///
/// # Safety
/// `pr < COLS / 2`; `base` is the pair area of the current group, `scales` the scale area.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn pair_step<const COLS: usize>(
    acc: &mut [f32; COLS],
    pr: usize,
    base: u32,
    scales: u32,
    g: u32,
    fast: bool,
    sixteen: bool,
    wq: &[i32; 32],
    ds: [f32; 2],
) {
    let (mut s0, mut s1) = (0i64, 0i64);
    unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
        // SAFETY: inside pair pr's K step (g * 128 + 16 j < 512).
        let v = unsafe { ld_shared_v4_u32(base + pr as u32 * PAIR_BYTES + 16 * j as u32) };
        unroll!(i in [0, 1, 2, 3] {
            if j < 4 || !sixteen {
                s0 = mad_wide_s32(wq[4 * j + i], v[i] as i32, s0);
            } else {
                s1 = mad_wide_s32(wq[4 * j + i], v[i] as i32, s1);
            }
        });
    });
    let (c0, c1) = (2 * pr, 2 * pr + 1);
    // SAFETY: inside the scale area (c1 < COLS).
    let dx = unsafe {
        if fast {
            ld_shared_v2_f32(scales + 4 * (g * COLS as u32 + c0 as u32))
        } else {
            [
                ld_shared_f32(scales + 4 * (c0 as u32 * 4 + g)),
                ld_shared_f32(scales + 4 * (c1 as u32 * 4 + g)),
            ]
        }
    };
    let (a0, a1) = split_pair(s0);
    if sixteen {
        let (b0, b1) = split_pair(s1);
        acc[c0] = mmq_step_16(acc[c0], a0, b0, ds[0], ds[1], dx[0]);
        acc[c1] = mmq_step_16(acc[c1], a1, b1, ds[0], ds[1], dx[1]);
    } else {
        acc[c0] = mmq_step_32(acc[c0], a0, ds[0], dx[0]);
        acc[c1] = mmq_step_32(acc[c1], a1, ds[0], dx[1]);
    }
}

/// The product for weight format `B` with `COLS`-row tiles; `FAST` (at most 32 rows) jumps
/// into the unrolled pairs once per group instead of testing each pair.
///
/// # Safety
/// As [`ws`].
#[inline(always)]
pub(super) unsafe fn ws_body<B: WeightBlock, const COLS: usize, const FAST: bool>(
    p: &MmqParams,
    tile: &MmqTile,
) {
    let fast = FAST;
    let row0 = ctaid_y() * WS_ROWS as u32;
    let (w, wrow0) = if row0 < p.n_split {
        (p.w0, row0)
    } else {
        (p.w1, row0 - p.n_split)
    };
    let tid = tid_x();
    let rowp =
        w + tile.expert as u64 * p.w_expert_bytes + (wrow0 + tid) as u64 * p.row_bytes as u64;
    let smem = smem_base();
    let scales = smem + ws_scales_offset(COLS) as u32;
    let sixteen = B::WTYPE.scale_values() == 16;
    let gpb = B::GROUPS as u32;
    let mut acc = [0.0f32; COLS];
    for ks in 0..p.k / MMQ_KSTEP as u32 {
        if ks > 0 {
            sync_threads();
        }
        // SAFETY: the plan checked shapes and buffers against these reads.
        unsafe { stage::<COLS>(fast, p.x, p.n_cols_x, tile, ks, smem) };
        sync_threads();
        for g in 0..4u32 {
            let gk = ks * 4 + g;
            // SAFETY: block gk / gpb of the row lies inside it (k values per row).
            let blk = unsafe { &*((rowp + (gk / gpb) as u64 * size_of::<B>() as u64) as *const B) };
            let q = blk.group_q((gk % gpb) as usize);
            let ds = blk.group_scales((gk % gpb) as usize);
            let mut wq = [0i32; 32];
            unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                unroll!(i in [0, 1, 2, 3] {
                    wq[4 * j + i] = sbyte(q[j], i as u32);
                });
            });
            let base = smem + g * 128;
            let step = |acc: &mut [f32; COLS], pr: usize| {
                // SAFETY: pr < COLS / 2: inside the pair and scale areas.
                unsafe { pair_step::<COLS>(acc, pr, base, scales, g, fast, sixteen, &wq, ds) }
            };
            if fast {
                // Pairs past the tier's (np never exceeds COLS / 2) are removed at compile time.
                fall_through_16!(tile.n_cols.div_ceil(2), |pr| if pr < COLS / 2 {
                    step(&mut acc, pr)
                });
            } else {
                unroll!(pr in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                               16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
                    if pr < COLS / 2 && (2 * pr as u32) < tile.n_cols {
                        step(&mut acc, pr);
                    }
                });
            }
        }
    }
    let row = row0 + tid;
    unroll!(c in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                  16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
                  32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47,
                  48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63] {
        if c < COLS && (c as u32) < tile.n_cols {
            let col = tile.col_start + c as u32;
            // SAFETY: col is a row of the activation buffer; out_rows (when given) has one
            // entry per row; the output row holds n >= row0 + 128 values.
            unsafe {
                let orow = if p.out_rows != 0 { *(p.out_rows as *const u32).add(col as usize) } else { col };
                let o = orow as usize * p.out_stride as usize + row as usize;
                *(p.out as *mut f32).add(o) = acc[c];
            }
        }
    });
}
