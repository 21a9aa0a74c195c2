//! The SwiGLU + q8_1 epilogue of the gate/up kernels `moe_mmq_(pipe|narrow)_swiglu_<type>`:
//! the CTA's tile rows are the gate and up rows of 64 features (`layout::MMQ_SWIGLU_FEATURES`;
//! the flat shape's 64 rows: 32; `Cta::row_addr`), so lane `(g, t)` of a warp holds gate
//! (`acc[..][..][0..2]`, fragment row `g`) and up (`[2..4]`, row `g + 8`) of the same feature
//! and columns. It writes H = q8_1(swiglu(gate, up)) of those features - half of each column's
//! D4 block of K chunk `y / 2` (flat: a quarter, of chunk `y / 4`) - and, spread over the CTAs
//! along y, the zero blocks of H's chunks past `ffn` up to `p.out_stride` chunks (ggml's padding,
//! `padded_k`; the layer passes `ffn / 128`: its down product reads no K past `ffn`).
//! `moe_swiglu_quant` (gpu/src/moe/swiglu_quant.rs) does the same from the f32 gate/up rows; the
//! rules are the same functions (`gpu::quant`), so the bytes are its bytes.
//!
//! 1. SwiGLU of each lane's values (`acc` -> `h`, 2 x (2 NT) per lane).
//! 2. The maximum |h| per column of each warp's `8 MT` features (shuffles over the lanes' `g`
//!    bits), into shared memory; a q8_1 group (32 features) spans `32 / (8 MT)` warps.
//! 3. Each lane merges its group's partial maxima (a maximum does not depend on the order),
//!    quantizes its values into the int8 staging `[column][feature]`, one lane per group and
//!    column stores the scale.
//! 4. The CTA copies each live column's 64 values (four 16-byte pieces) and two scales out.

use core::mem::offset_of;

use super::Cta;
use crate::layout::{
    BlockQ8_1Mmq, MMQ_KSTEP, MMQ_SWIGLU_D, MMQ_SWIGLU_QS, MMQ_SWIGLU_QS_ROW, MMQ_THREADS,
    MmqParams, Q8_1_MMQ_BYTES, Q8_1_MMQ_PIECES,
};
use crate::ptx::{
    ld_shared_f32, ld_shared_u32, ld_shared_v4_u32, shfl_xor_f32, st_shared_u8, st_shared_u32,
    st_u32, st_v4_u32, sync_threads, tid_x,
};
use crate::quant::{
    amax_merge, amax_step, q8_1_inv_scale, q8_1_quant, q8_1_scale, swiglu_den, swiglu_div,
};

const THREADS: u32 = MMQ_THREADS as u32;
const QS_ROW: u32 = MMQ_SWIGLU_QS_ROW as u32;
/// Byte offset of the values in a D4 block.
const QS_OFF: u64 = offset_of!(BlockQ8_1Mmq, qs) as u64;

/// Writes the CTA's H values (see the module doc) to `p.out`, the D4 blocks
/// `[p.out_stride][n_cols_x]` of H, and the zero blocks of its chunks past `ffn`.
///
/// # Safety
/// Called by every thread after the K loop (no copy in flight); `p.n / 2` (ffn) a multiple of
/// 128; `p.out` holds `p.out_stride >= ffn / 128` chunks of `n_cols_x` blocks; the tile's
/// columns are below `n_cols_x`.
#[inline(always)]
pub(super) unsafe fn store(p: &MmqParams, c: &Cta, acc: &[[[f32; 4]; 4]; 2]) {
    let tid = tid_x();
    let (lane, warp) = (tid % 32, tid / 32);
    let shape = c.shape;
    let warps_m = shape.warps_m() as u32;
    let (wm, wn) = (warp % warps_m, warp / warps_m);
    let (mts, nts) = (shape.mt() as u32, shape.nt() as u32);
    let (gr, tc) = (lane / 4, lane % 4);
    let cols = shape.cols() as u32;
    // Warps per 32-feature group, and the first of this warp's group.
    let wpg = 32 / (8 * mts);
    let w0 = wm / wpg * wpg;
    let part = c.base + c.sm.epilogue() as u32;
    let qs = part + MMQ_SWIGLU_QS as u32;
    let ds = part + MMQ_SWIGLU_D as u32;
    let col_of = |nt: u32, c2: u32| wn * 8 * nts + nt * 8 + 2 * tc + c2;
    // Every warp is past its last product: the decoded tiles (or raw stages) are free.
    sync_threads();
    // 1. SwiGLU: both denominators before the divisions (moe_swiglu_quant's order of work).
    // `h[4 a + b]` of the fragment whose accumulators are `acc[a][b]` (`MmqPipeShape::acc_slot`).
    let frag = |mt: usize, nt: usize| {
        let (a, b) = shape.acc_slot(mt, nt);
        4 * a + b
    };
    let mut h = [[0.0f32; 2]; 8];
    unroll!(f in [0, 1, 2, 3, 4, 5, 6, 7] {
        if (f as u32) < mts * nts {
            let a = &acc[f / 4][f % 4];
            let den = [swiglu_den(a[0]), swiglu_den(a[1])];
            h[f] = [swiglu_div(a[0], den[0], a[2]), swiglu_div(a[1], den[1], a[3])];
        }
    });
    // 2. Each warp's maximum |h| per column: every shuffle before the one branch that stores
    // (all 32 lanes must reach each shuffle).
    let mut mx = [[0.0f32; 2]; 8];
    unroll!(nt in [0, 1, 2, 3, 4, 5, 6, 7] {
        unroll!(c2 in [0, 1] {
            if (nt as u32) < nts {
                let mut m = amax_step(0.0, h[frag(0, nt)][c2]);
                if mts == 2 {
                    m = amax_step(m, h[frag(1, nt)][c2]);
                }
                m = amax_merge(m, shfl_xor_f32(m, 4));
                m = amax_merge(m, shfl_xor_f32(m, 8));
                mx[nt][c2] = amax_merge(m, shfl_xor_f32(m, 16));
            }
        });
    });
    if gr == 0 {
        unroll!(nt in [0, 1, 2, 3, 4, 5, 6, 7] {
            unroll!(c2 in [0, 1] {
                if (nt as u32) < nts {
                    let a = part + (wm * cols + col_of(nt as u32, c2 as u32)) * 4;
                    // SAFETY: wm * cols + column < 8 * 64 (8 x 64 or 2 x 128): inside the
                    // partial maxima.
                    unsafe { st_shared_u32(a, mx[nt][c2].to_bits()) };
                }
            });
        });
    }
    sync_threads();
    // 3. The group's maximum, the lane's int8 values and the group's scale.
    unroll!(nt in [0, 1, 2, 3, 4, 5, 6, 7] {
        unroll!(c2 in [0, 1] {
            if (nt as u32) < nts {
                let col = col_of(nt as u32, c2 as u32);
                let mut m = 0.0f32;
                for k in 0..wpg {
                    // SAFETY: written above by the group's warps (w0 + k < 8).
                    m = amax_merge(m, unsafe { ld_shared_f32(part + ((w0 + k) * cols + col) * 4) });
                }
                let d_inv = q8_1_inv_scale(m);
                unroll!(mt in [0, 1] {
                    if (mt as u32) < mts {
                        let f = wm * 8 * mts + mt as u32 * 8 + gr;
                        let q = q8_1_quant(h[frag(mt, nt)][c2], d_inv);
                        // SAFETY: column < 128, feature < 64: inside the staging.
                        unsafe { st_shared_u8(qs + col * QS_ROW + f, q as u8 as u32) };
                    }
                });
                if gr == 0 && wm == w0 {
                    // SAFETY: column < 128, group < 2: inside the scales.
                    unsafe { st_shared_u32(ds + (col * 2 + wm / wpg) * 4, q8_1_scale(d_inv).to_bits()) };
                }
            }
        });
    });
    sync_threads();
    // 4. Out: with `feats` features a CTA (64, or the flat shape's 32), `per = 128 / feats` CTAs
    // along y make a chunk: chunk y / per, values feats (y % per) .., scales
    // (feats / 32) (y % per) ...
    let y = c.row_tile;
    let feats = shape.swiglu_features() as u32;
    let per = MMQ_KSTEP as u32 / feats;
    let units = feats / 16 + 1;
    let scales = feats / 32;
    let part_of = (y % per) as u64;
    let stride = p.n_cols_x as u64;
    let first = c.tile.col_start as u64;
    let block = |kc: u32, col: u32| {
        p.out + ((kc as u64) * stride + first + col as u64) * Q8_1_MMQ_BYTES as u64
    };
    let mut idx = tid;
    while idx < c.tile.n_cols * units {
        let (col, u) = (idx / units, idx % units);
        let blk = block(y / per, col);
        // SAFETY: the block is inside `out` (column < n_cols_x, chunk < ffn / 128); the values'
        // pieces are 16-byte aligned (144-byte blocks, values at 16 + feats part), the scales 4.
        unsafe {
            if u + 1 < units {
                let v = ld_shared_v4_u32(qs + col * QS_ROW + u * 16);
                let dst = blk + QS_OFF + part_of * feats as u64 + 16 * u as u64;
                st_v4_u32(dst as *mut u32, v);
            } else {
                let d = blk + 4 * scales as u64 * part_of;
                st_u32(d as *mut u32, ld_shared_u32(ds + col * 8));
                if scales == 2 {
                    st_u32((d + 4) as *mut u32, ld_shared_u32(ds + col * 8 + 4));
                }
            }
        }
        idx += THREADS;
    }
    // H's chunks past ffn (ggml's padding, if the caller asks for it): zero blocks (what
    // moe_swiglu_quant writes there), chunk ffn / 128 + y and every `n / rows` after it, up to
    // out_stride chunks.
    let ffn = p.n / 2;
    let n_chunks = p.out_stride;
    let mut kz = ffn / MMQ_KSTEP as u32 + y;
    while kz < n_chunks {
        let pieces = Q8_1_MMQ_PIECES as u32;
        let mut idx = tid;
        while idx < c.tile.n_cols * pieces {
            let (col, piece) = (idx / pieces, idx % pieces);
            // SAFETY: chunk kz < out_stride of `out`, column < n_cols_x; 16-byte pieces
            // of a 144-byte block.
            unsafe { st_v4_u32((block(kz, col) + 16 * piece as u64) as *mut u32, [0; 4]) };
            idx += THREADS;
        }
        kz += p.n / shape.rows() as u32;
    }
}
