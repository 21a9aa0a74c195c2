//! The fused path's warp product and its two epilogues.
//!
//! Warp w: rows `64 (w % 2) ..` of the 128-row tile (four 16-row `m16n8` fragments) x columns
//! `8 NT (w / 2) ..` (NT 8-column fragments): 16 NT f32 accumulators per lane, `acc[mt][nt][i]`
//! at tile row `64 wm + 16 mt + g + 8 (i / 2)`, column `8 (NT wn + nt) + 2 t + i % 2`
//! (g = lane / 4, t = lane % 4). A fragment whose 8 columns all lie past the tile's row count is
//! skipped (a warp-uniform branch): at 10 rows per expert most of the columns are empty.
//! The float epilogue is MMQ's (`gpu::quant::mmq_step_32` / `mmq_step_16`) in ascending K, so
//! every sum is the MMQ path's to the bit; in the kernels of the Q2_0 shared-d numerics a Q2_0
//! product takes `gpu::quant::q2_0_shared_d_step` per 64-value block instead (the reference's
//! variant to the bit).

use crate::formats::WeightBlock;
use crate::layout::{
    FUSED_COL_UNIT, FUSED_FFN_PASS, FUSED_ROWS, MMQ_BLOCK_VALUES, MMQ_SMEM_ROW, MmqTile, WType,
};
use crate::moe::q8_1::quantize_group_x4;
use crate::ptx::{
    ld_shared_f32, ld_shared_u32, ldmatrix_x4, mma_m16n8k16_s8, mma_m16n8k32_s8, st_shared_u8,
    st_shared_u32, tid_x,
};
use crate::quant::{
    MAGIC, mmq_step_16_magic, mmq_step_32_magic, q2_0_shared_d_step_magic, swiglu_den, swiglu_div,
};

const ROW: u32 = MMQ_SMEM_ROW as u32;

/// Accumulators of one lane (see the module doc).
pub type Acc<const NT: usize> = [[[f32; 4]; NT]; 4];

/// Whether n-tile `nt` of this warp has a column below `n_cols` (the same for the whole warp).
#[inline(always)]
pub fn tile_live<const NT: usize>(nt: usize, n_cols: u32) -> bool {
    let wn = tid_x() / 64;
    8 * (NT as u32 * wn + nt as u32) < n_cols
}

/// This lane's warp coordinates: (wm, wn, g, t).
#[inline(always)]
fn coords() -> (u32, u32, u32, u32) {
    let tid = tid_x();
    let (warp, lane) = (tid / 32, tid % 32);
    (warp % 2, warp / 2, lane / 4, lane % 4)
}

/// The B fragments and activation scales of 32-value group `g` for this warp's n-tiles, and
/// which of them are live (have a column below `n_cols`); dead ones are left zero.
///
/// # Safety
/// The activation blocks at `acts` are written and visible.
#[inline(always)]
unsafe fn b_frags<const NT: usize>(
    acts: u32,
    g: u32,
    n_cols: u32,
) -> ([[u32; 2]; NT], [[f32; 2]; NT], [bool; NT]) {
    let (_, wn, gr, tc) = coords();
    let mut b = [[0u32; 2]; NT];
    let mut db = [[0.0f32; 2]; NT];
    let mut live = [false; NT];
    unroll!(nt in [0, 1] {
        if nt < NT {
            live[nt] = tile_live::<NT>(nt, n_cols);
            if live[nt] {
                let c8 = 8 * (NT as u32 * wn + nt as u32);
                let col = acts + (c8 + gr) * ROW;
                let c0 = acts + (c8 + 2 * tc) * ROW;
                // SAFETY: columns < 32 NT, byte offsets < 144 (the caller's blocks).
                unsafe {
                    b[nt] = [
                        ld_shared_u32(col + 16 + g * 32 + 4 * tc),
                        ld_shared_u32(col + 32 + g * 32 + 4 * tc),
                    ];
                    db[nt] = [ld_shared_f32(c0 + g * 4), ld_shared_f32(c0 + ROW + g * 4)];
                }
            }
        }
    });
    (b, db, live)
}

/// One 128-value K step: the int8 weight tile at `tile` (rows 144 bytes apart), its scales at
/// `scales` (`[128][8] f32`), the activation D4 blocks at `acts` (column c at `acts + 144 c`);
/// n-tiles with no column below `n_cols` are skipped. With `SHARED_D` a Q2_0 product takes the
/// Q2_0 shared-d step ([`mma_step_shared_d`]); other types ignore it.
///
/// # Safety
/// The tile, scales and blocks are written and visible (behind a barrier); all lanes call it.
#[inline(always)]
pub unsafe fn mma_step<B: WeightBlock, const NT: usize, const SHARED_D: bool>(
    acc: &mut Acc<NT>,
    tile: u32,
    scales: u32,
    acts: u32,
    n_cols: u32,
) {
    let lane = tid_x() % 32;
    let (wm, _, gr, _) = coords();
    let sixteen = B::WTYPE.scale_values() == 16;
    if !tile_live::<NT>(0, n_cols) {
        // No column of this warp is a row of the tile (n-tile 0 is the warp's first).
        return;
    }
    if SHARED_D && B::WTYPE == WType::Q2_0 {
        // SAFETY: forwarded contract.
        unsafe { mma_step_shared_d::<NT>(acc, tile, scales, acts, n_cols) };
        return;
    }
    for g in 0..4u32 {
        // SAFETY: every address is inside the tile, its scales or the activation blocks
        // (rows < 128, columns < 32 NT, byte offsets < 144), 16-byte aligned for ldmatrix.
        unsafe {
            // B fragments and activation scales of the live n-tiles first, then one 16-row A
            // fragment at a time against all of them (few registers live at once).
            let (b, db, live) = b_frags::<NT>(acts, g, n_cols);
            unroll!(mt in [0, 1, 2, 3] {
                let r = wm * 64 + mt as u32 * 16;
                let af = ldmatrix_x4(tile + (r + lane % 16) * ROW + g * 32 + (lane / 16) * 16);
                let sa0 = scales + (r + gr) * 32 + g * 8;
                let sa1 = sa0 + 8 * 32;
                let d = [
                    [ld_shared_f32(sa0), ld_shared_f32(sa0 + 4)],
                    [ld_shared_f32(sa1), ld_shared_f32(sa1 + 4)],
                ];
                unroll!(nt in [0, 1] {
                    if nt < NT && live[nt] {
                        let a = &mut acc[mt][nt];
                        if sixteen {
                            let lo = mma_m16n8k16_s8([af[0], af[1]], b[nt][0], MAGIC);
                            let hi = mma_m16n8k16_s8([af[2], af[3]], b[nt][1], MAGIC);
                            unroll!(i in [0, 1, 2, 3] {
                                let d = d[i / 2];
                                a[i] = mmq_step_16_magic(a[i], lo[i], hi[i], d[0], d[1], db[nt][i % 2]);
                            });
                        } else {
                            let c = mma_m16n8k32_s8(af, b[nt], MAGIC);
                            unroll!(i in [0, 1, 2, 3] {
                                a[i] = mmq_step_32_magic(a[i], c[i], d[i / 2][0], db[nt][i % 2]);
                            });
                        }
                    }
                });
            });
        }
    }
}

/// [`mma_step`] of a Q2_0 product in the Q2_0 shared-d numerics: the K step's two 64-value
/// blocks in turn, each one `mma` per 32-value group and one `q2_0_shared_d_step` per output
/// on the two sums, with the block's scale d (its first 16-value slot of the scales: Q2_0's
/// are equal over the block).
///
/// # Safety
/// As [`mma_step`], for a Q2_0 tile.
#[inline(always)]
unsafe fn mma_step_shared_d<const NT: usize>(
    acc: &mut Acc<NT>,
    tile: u32,
    scales: u32,
    acts: u32,
    n_cols: u32,
) {
    let lane = tid_x() % 32;
    let (wm, _, gr, _) = coords();
    for blk in 0..2u32 {
        let g0 = 2 * blk;
        // SAFETY: as mma_step's (groups g0 and g0 + 1 < 4).
        unsafe {
            let (b0, db0, live) = b_frags::<NT>(acts, g0, n_cols);
            let (b1, db1, _) = b_frags::<NT>(acts, g0 + 1, n_cols);
            unroll!(mt in [0, 1, 2, 3] {
                let r = wm * 64 + mt as u32 * 16;
                let a_row = tile + (r + lane % 16) * ROW + g0 * 32 + (lane / 16) * 16;
                let af0 = ldmatrix_x4(a_row);
                let af1 = ldmatrix_x4(a_row + 32);
                let sa = scales + (r + gr) * 32 + g0 * 8;
                let d = [ld_shared_f32(sa), ld_shared_f32(sa + 8 * 32)];
                unroll!(nt in [0, 1] {
                    if nt < NT && live[nt] {
                        let a = &mut acc[mt][nt];
                        let c0 = mma_m16n8k32_s8(af0, b0[nt], MAGIC);
                        let c1 = mma_m16n8k32_s8(af1, b1[nt], MAGIC);
                        unroll!(i in [0, 1, 2, 3] {
                            let j = i % 2;
                            a[i] = q2_0_shared_d_step_magic(
                                a[i], c0[i], c1[i], db0[nt][j], db1[nt][j], d[i / 2],
                            );
                        });
                    }
                });
            });
        }
    }
}

/// Quantizes one column's 4 SwiGLU values of this lane with the 7 other lanes of its 32-feature
/// group (lanes of equal `t`: shuffle masks 4, 8, 16): q8_1's rule exactly as swiglu_quant's.
#[inline(always)]
fn quantize_col(h: [f32; 4]) -> ([i32; 4], f32) {
    quantize_group_x4(h, [4, 8, 16])
}

/// The gate/up pass's epilogue: `acc[mt][nt][0..2]` are gate, `acc[mt][nt][2..4]` up of
/// feature `64 pass + 32 wm + 8 mt + g` (columns 2t, 2t + 1 of n-tile nt); writes
/// q8_1(swiglu(gate, up)) into H (`[ffn / 128][32 NT]` D4 blocks at `h_base`). A warp's 32
/// features are one q8_1 group. Skipped n-tiles write nothing (their columns are never read).
///
/// # Safety
/// H holds the blocks; all lanes call it.
#[inline(always)]
pub unsafe fn swiglu_to_h<const NT: usize>(acc: &Acc<NT>, h_base: u32, pass: u32, n_cols: u32) {
    let (wm, wn, gr, tc) = coords();
    let f0 = pass * FUSED_FFN_PASS as u32 + 32 * wm;
    let (kc, within) = (f0 / MMQ_BLOCK_VALUES as u32, f0 % MMQ_BLOCK_VALUES as u32);
    let cols = (FUSED_COL_UNIT * NT) as u32;
    unroll!(nt in [0, 1] {
        if nt < NT && tile_live::<NT>(nt, n_cols) {
            let a = [acc[0][nt], acc[1][nt], acc[2][nt], acc[3][nt]];
            // The eight denominators first, then the divisions (see swiglu_quant's swiglu_x4).
            let den = [
                [swiglu_den(a[0][0]), swiglu_den(a[0][1])],
                [swiglu_den(a[1][0]), swiglu_den(a[1][1])],
                [swiglu_den(a[2][0]), swiglu_den(a[2][1])],
                [swiglu_den(a[3][0]), swiglu_den(a[3][1])],
            ];
            unroll!(c in [0, 1] {
                let h = [
                    swiglu_div(a[0][c], den[0][c], a[0][c + 2]),
                    swiglu_div(a[1][c], den[1][c], a[1][c + 2]),
                    swiglu_div(a[2][c], den[2][c], a[2][c + 2]),
                    swiglu_div(a[3][c], den[3][c], a[3][c + 2]),
                ];
                let (q, d) = quantize_col(h);
                let col = 8 * (NT as u32 * wn + nt as u32) + 2 * tc + c as u32;
                let blk = h_base + (kc * cols + col) * ROW;
                // SAFETY: block (kc, col) is inside H; byte 16 + within + 8 mt + g < 144.
                unsafe {
                    unroll!(mt in [0, 1, 2, 3] {
                        st_shared_u8(blk + 16 + within + 8 * mt as u32 + gr, q[mt] as u32);
                    });
                    if gr == 0 {
                        st_shared_u32(blk + 4 * (within / 32), d.to_bits());
                    }
                }
            });
        }
    });
}

/// The down pass's epilogue: output rows `128 pass + tile row` of the tile's columns go to
/// `dm[row_dst[col_start + col]][..]`; columns past the tile's count are not stored.
///
/// # Safety
/// `row_dst` has an entry per compact row; `dm` rows hold `hidden` values.
#[inline(always)]
pub unsafe fn store_down<const NT: usize>(
    acc: &Acc<NT>,
    tile: &MmqTile,
    pass: u32,
    dm: u64,
    row_dst: u64,
    hidden: u32,
) {
    let (wm, wn, gr, tc) = coords();
    unroll!(nt in [0, 1] {
        if nt < NT {
            unroll!(c in [0, 1] {
                let col = 8 * (NT as u32 * wn + nt as u32) + 2 * tc + c as u32;
                if col < tile.n_cols {
                    // SAFETY: a compact row of the tile; its destination row is inside dm.
                    unsafe {
                        let orow = *(row_dst as *const u32).add((tile.col_start + col) as usize);
                        let out = (dm as *mut f32).add(orow as usize * hidden as usize);
                        unroll!(mt in [0, 1, 2, 3] {
                            let r = pass * FUSED_ROWS as u32 + 64 * wm + 16 * mt as u32 + gr;
                            *out.add(r as usize) = acc[mt][nt][c];
                            *out.add(r as usize + 8) = acc[mt][nt][c + 2];
                        });
                    }
                }
            });
        }
    });
}
