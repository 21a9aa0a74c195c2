//! The MMQ products (gate/up and down): int8 `mma` over expert-sorted activation rows, exact
//! integer sums per 32 (or 16) values, MMQ's float epilogue in ascending K
//! (`gpu::quant::mmq_step_32` / `mmq_step_16`, docs/ggml-reference.md §5.1).
//!
//! Grid: x = one `MmqTile` (expert, up to 64 activation rows) per CTA, built by the host from
//! the expert bounds so that no CTA is launched without rows; y = 128-row tile of the output
//! features. Block: 256 threads = 8 warps, 4 along the rows x 2 along the columns, each warp a
//! 32 x 32 tile of 2 x 4 `m16n8` fragments (32 f32 accumulators per lane).
//! K loop: steps of 128 values (one D4 activation block): every thread decodes two 32-value
//! weight groups with the shared decoders (`gpu::formats`) into shared memory, the activation
//! blocks are copied in 16-byte pieces, then each warp runs `ldmatrix` + `mma` per group.
//! Shared memory: `layout::MMQ_SMEM_BYTES` (31,744 bytes): weight tile `[128][144 B]`, weight
//! scales `[128][8] f32`, activation tile `[64][144 B]` (whole D4 blocks).
//! Launcher: host/src/moe/expert/split/launch.rs. The pipelined form of this kernel (the same bytes,
//! copies and decode overlapped with the products; a wide and a narrow shape) is in pipe/
//! (mod.rs; its copies in copy/).

mod pipe;

use crate::formats::WeightBlock;
use crate::layout::{
    BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockIq4NlDev, BlockQ2_0Dev,
    BlockQ8_0,
};
use crate::layout::{
    MMQ_KSTEP, MMQ_ROWS, MMQ_SMEM_A, MMQ_SMEM_ROW, MMQ_SMEM_SCALES, MMQ_THREADS, MmqParams,
    MmqPipeShape, MmqTile,
};
use crate::ptx::{
    ctaid_x, ctaid_y, ld_nc_v4_u32, ld_shared_f32, ldmatrix_x4, mma_m16n8k16_s8, mma_m16n8k32_s8,
    smem_base, st_shared_u32, st_shared_v4, sync_threads, tid_x,
};
use crate::quant::{MAGIC, mmq_step_16_magic, mmq_step_32_magic};

const ROW: u32 = MMQ_SMEM_ROW as u32;
const S_OFF: u32 = MMQ_SMEM_A as u32;
const B_OFF: u32 = (MMQ_SMEM_A + MMQ_SMEM_SCALES) as u32;
/// 16-byte pieces of one activation column's D4 block.
const B_PIECES: u32 = (MMQ_SMEM_ROW / 16) as u32;

/// Decodes this thread's two weight groups of K step `ks` into shared memory.
///
/// # Safety
/// `wbase` points to the CTA's first weight row; rows are `row_bytes` apart and hold at least
/// `(ks + 1) * 128` values.
#[inline(always)]
unsafe fn load_weights<B: WeightBlock>(wbase: u64, row_bytes: u32, ks: u32, smem: u32) {
    let tid = tid_x();
    let r = tid / 2;
    let rowp = wbase + r as u64 * row_bytes as u64;
    let gpb = B::GROUPS as u32;
    for j in 0..2u32 {
        let g = 2 * (tid % 2) + j;
        let gk = ks * 4 + g;
        // SAFETY: block gk / gpb of the row lies inside it (caller's contract).
        let blk = unsafe { &*((rowp + (gk / gpb) as u64 * size_of::<B>() as u64) as *const B) };
        let q = blk.group_q((gk % gpb) as usize);
        let s = blk.group_scales((gk % gpb) as usize);
        let a = smem + r * ROW + g * 32;
        let sa = smem + S_OFF + r * 32 + g * 8;
        // SAFETY: r < 128 and g < 4: inside the weight tile and the scale array.
        unsafe {
            st_shared_v4(a, [q[0], q[1], q[2], q[3]]);
            st_shared_v4(a + 16, [q[4], q[5], q[6], q[7]]);
            st_shared_u32(sa, s[0].to_bits());
            st_shared_u32(sa + 4, s[1].to_bits());
        }
    }
}

/// Copies the tile's activation blocks of K step `ks` into shared memory (columns past the
/// tile's count are left as they are; their results are never stored).
///
/// # Safety
/// `x` holds `k / 128` chunks of `n_cols_x` D4 blocks; the tile's columns are below n_cols_x.
#[inline(always)]
unsafe fn load_acts(x: u64, n_cols_x: u32, tile: &MmqTile, ks: u32, smem: u32) {
    let tid = tid_x();
    for i in 0..3u32 {
        let idx = tid + MMQ_THREADS as u32 * i;
        let col = idx / B_PIECES;
        if idx < 64 * B_PIECES && col < tile.n_cols {
            let piece = idx % B_PIECES;
            let blk = ks as u64 * n_cols_x as u64 + (tile.col_start + col) as u64;
            // SAFETY: the block is inside x (caller's contract); blocks are 144 bytes, so every
            // 16-byte piece is 16-byte aligned; the destination is inside the activation tile.
            unsafe {
                let v = ld_nc_v4_u32((x + blk * 144 + piece as u64 * 16) as *const u32);
                st_shared_v4(smem + B_OFF + col * ROW + piece * 16, v);
            }
        }
    }
}

/// The product for weight format `B` (see the module doc).
///
/// # Safety
/// Parameters and buffers as `layout::MmqParams` describes; launched with `MMQ_THREADS`
/// threads, `MMQ_SMEM_BYTES` of dynamic shared memory, one CTA per tile along x and
/// `n / 128` along y.
#[inline(always)]
unsafe fn mmq<B: WeightBlock>(p: &MmqParams) {
    // SAFETY: one tile per CTA along x.
    let tile = unsafe { *(p.tiles as *const MmqTile).add(ctaid_x() as usize) };
    if tile.n_cols == 0 {
        return; // a padding tile of a device-built list
    }
    let row0 = ctaid_y() * MMQ_ROWS as u32;
    let (w, wrow0) = if row0 < p.n_split {
        (p.w0, row0)
    } else {
        (p.w1, row0 - p.n_split)
    };
    let wbase = w + tile.expert as u64 * p.w_expert_bytes + wrow0 as u64 * p.row_bytes as u64;
    let tid = tid_x();
    let lane = tid % 32;
    let warp = tid / 32;
    let (wm, wn) = (warp % 4, warp / 4);
    let (gr, tc) = (lane / 4, lane % 4);
    let smem = smem_base();
    let sixteen = B::WTYPE.scale_values() == 16;
    let mut acc = [[[0.0f32; 4]; 4]; 2];
    for ks in 0..p.k / MMQ_KSTEP as u32 {
        // SAFETY: the plan checked shapes and buffers against these reads.
        unsafe {
            load_weights::<B>(wbase, p.row_bytes, ks, smem);
            load_acts(p.x, p.n_cols_x, &tile, ks, smem);
        }
        sync_threads();
        for g in 0..4u32 {
            // SAFETY: all addresses below are inside the tiles (rows < 128, columns < 64,
            // byte offsets < 144) and 16-byte aligned where ldmatrix needs it.
            unsafe {
                let mut af = [[0u32; 4]; 2];
                unroll!(mt in [0, 1] {
                    let r = wm * 32 + mt as u32 * 16 + lane % 16;
                    af[mt] = ldmatrix_x4(smem + r * ROW + g * 32 + (lane / 16) * 16);
                });
                let mut bf = [[0u32; 2]; 4];
                unroll!(np in [0, 1] {
                    let c = wn * 32 + np as u32 * 16 + lane % 8 + 8 * (lane / 16);
                    let v = ldmatrix_x4(smem + B_OFF + c * ROW + 16 + g * 32 + ((lane / 8) % 2) * 16);
                    bf[2 * np] = [v[0], v[1]];
                    bf[2 * np + 1] = [v[2], v[3]];
                });
                unroll!(mt in [0, 1] {
                    let r0 = wm * 32 + mt as u32 * 16 + gr;
                    let sa0 = smem + S_OFF + r0 * 32 + g * 8;
                    let sa1 = sa0 + 8 * 32;
                    let da = [
                        [ld_shared_f32(sa0), ld_shared_f32(sa0 + 4)],
                        [ld_shared_f32(sa1), ld_shared_f32(sa1 + 4)],
                    ];
                    unroll!(nt in [0, 1, 2, 3] {
                        let c0 = wn * 32 + nt as u32 * 8 + 2 * tc;
                        let db = [
                            ld_shared_f32(smem + B_OFF + c0 * ROW + g * 4),
                            ld_shared_f32(smem + B_OFF + (c0 + 1) * ROW + g * 4),
                        ];
                        let a = &mut acc[mt][nt];
                        if sixteen {
                            let lo = mma_m16n8k16_s8([af[mt][0], af[mt][1]], bf[nt][0], MAGIC);
                            let hi = mma_m16n8k16_s8([af[mt][2], af[mt][3]], bf[nt][1], MAGIC);
                            unroll!(i in [0, 1, 2, 3] {
                                let d = da[i / 2];
                                a[i] = mmq_step_16_magic(a[i], lo[i], hi[i], d[0], d[1], db[i % 2]);
                            });
                        } else {
                            let c = mma_m16n8k32_s8(af[mt], bf[nt], MAGIC);
                            unroll!(i in [0, 1, 2, 3] {
                                a[i] = mmq_step_32_magic(a[i], c[i], da[i / 2][0], db[i % 2]);
                            });
                        }
                    });
                });
            }
        }
        sync_threads();
    }
    // SAFETY: the kernel's contract.
    unsafe { store(p, &tile, row0, &acc, MmqPipeShape::Wide) };
}

/// Writes a CTA's accumulators (fragment (mt, nt) at `MmqPipeShape::acc_slot`, its value `i` at
/// tile row `16 MT wm + 16 mt + g + 8 (i / 2)`,
/// column `8 NT wn + 8 nt + 2 t + i % 2`, MT and NT the shape's; the classic kernel's shape is
/// the wide one) to the output rows of the tile's live columns.
///
/// The lane's columns' output rows are read first, all of them before any store: read beside
/// each value, as before, the compiler reloaded a column's row for each of its values (a store
/// through `out` may alias `out_rows` for it), and each value cost about 23 instructions
/// (a dependent load, 64-bit address arithmetic, a branch); now a column costs one load and
/// its values one store each, at an immediate offset from the column's address. (Plain
/// stores: with `st.global` in inline asm here, LLVM compiled the tall kernels' K loops
/// differently, 9 to 14 instructions longer, and the IQ3_S gate/up product ran 6 % slower.)
///
/// # Safety
/// `p.out` (through `p.out_rows` when given) has a row of `n >= row0 + 128` values for every
/// column of the tile.
#[inline(always)]
unsafe fn store(
    p: &MmqParams,
    tile: &MmqTile,
    row0: u32,
    acc: &[[[f32; 4]; 4]; 2],
    shape: MmqPipeShape,
) {
    let lane = tid_x() % 32;
    let warp = tid_x() / 32;
    let warps_m = shape.warps_m() as u32;
    let (wm, wn) = (warp % warps_m, warp / warps_m);
    let (mts, nts) = (shape.mt() as u32, shape.nt() as u32);
    let (gr, tc) = (lane / 4, lane % 4);
    // The address of tile row `16 MT wm` in the output row of the lane's column
    // `8 NT wn + 8 nt + 2 t + k` (`[nt][k]`, at most the tall shape's 8 tiles), or 0 where the
    // column is not live.
    let mut base = [[0u64; 2]; 8];
    unroll!(nt in [0, 1, 2, 3, 4, 5, 6, 7] {
        unroll!(k in [0, 1] {
            let col = wn * 8 * nts + nt as u32 * 8 + 2 * tc + k as u32;
            if (nt as u32) < nts && col < tile.n_cols {
                let c = tile.col_start + col;
                // SAFETY: c is a row of the activation buffer; out_rows (when given) has one
                // entry per row.
                let orow = if p.out_rows != 0 {
                    unsafe { *(p.out_rows as *const u32).add(c as usize) }
                } else {
                    c
                };
                let o = orow as u64 * p.out_stride as u64 + (row0 + wm * 16 * mts) as u64;
                base[nt][k] = p.out + 4 * o;
            }
        });
    });
    // Each accumulator slot `acc[a][b]` and its fragment (`MmqPipeShape::slot_frag`).
    unroll!(a in [0, 1] {
        unroll!(b in [0, 1, 2, 3] {
            let (mt, nt) = shape.slot_frag(a, b);
            if (mt as u32) < mts && (nt as u32) < nts {
                unroll!(i in [0, 1, 2, 3] {
                    let at = base[nt][i % 2];
                    if at != 0 {
                        let row = mt as u32 * 16 + gr + 8 * (i as u32 / 2);
                        // SAFETY: the column is live (above); the output row holds
                        // n >= row0 + 128 values.
                        unsafe { *((at + 4 * row as u64) as *mut f32) = acc[a][b][i] };
                    }
                });
            }
        });
    });
}

macro_rules! mmq_kernels {
    ($(($w:ident, $b:ident, $gate_up:ident, $down:ident, $fused:ident, $wide:ident,
        $pipe:ident, $narrow:ident, $pipe_sw:ident, $narrow_sw:ident, $flat:ident,
        $flat_sw:ident, $c16:ident, $c32:ident, $c64:ident, $fast16:ident, $fast32:ident, $resident:ident,
        $narrow_tma:ident, $fused_sd:ident, $wide_sd:ident, $flat_ws:ident)),* $(,)?) => {$(
        /// MMQ gate/up product for one weight format; see the module doc.
        ///
        /// # Safety
        /// As `mmq`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $gate_up(p: MmqParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { mmq::<$b>(&p) }
        }

        /// MMQ down product for one weight format; see the module doc.
        ///
        /// # Safety
        /// As `mmq`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $down(p: MmqParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { mmq::<$b>(&p) }
        }

        /// The pipelined MMQ product (either product) for one weight format; see
        /// gpu/src/moe/mmq/pipe/mod.rs.
        ///
        /// # Safety
        /// As `pipe::mmq_pipe`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $pipe(p: MmqParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { pipe::mmq_pipe::<$b, false, false, false, false>(&p) }
        }

        /// The narrow pipelined MMQ product (16-row tiles; either product) for one weight
        /// format; see gpu/src/moe/mmq/pipe/mod.rs.
        ///
        /// # Safety
        /// As `pipe::mmq_pipe`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $narrow(p: MmqParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { pipe::mmq_pipe::<$b, true, false, false, false>(&p) }
        }

        /// The narrow MMQ product's resident form (sm_90 modules: the tile's whole K
        /// bulk-copied, `p.resident` row tiles a CTA) for one weight format; see
        /// gpu/src/moe/mmq/pipe/resident.rs.
        ///
        /// # Safety
        /// As `pipe::mmq_resident`.
        #[cfg(gpu_sm90)]
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $resident(p: MmqParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { pipe::mmq_resident::<$b>(&p) }
        }

        /// The flat MMQ product (either product, no epilogue) warp specialized (sm_90 modules:
        /// 8 warps multiply, `MMQ_WS_PRODUCER_WARPS` more copy and decode) for one weight
        /// format; see gpu/src/moe/mmq/pipe/ws.rs.
        ///
        /// # Safety
        /// As `pipe::mmq_flat_ws`.
        #[cfg(gpu_sm90)]
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $flat_ws(p: MmqParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { pipe::mmq_flat_ws::<$b>(&p) }
        }

        /// The narrow pipelined MMQ product built with tensor copies only (sm_90 modules: each
        /// warp's weight rows by `cp.async.bulk.tensor`, no `cp.async` pieces) for one weight
        /// format; the host launches it in place of the narrow kernel where the layer has the
        /// weight tensors' narrow maps; see gpu/src/moe/mmq/pipe/copy/warp.rs.
        ///
        /// # Safety
        /// As `pipe::mmq_pipe`, with `p.wmap0` (and `p.wmap1` where some row lies in `w1`) the
        /// maps `layout::MmqTmaMap::of` gives for the narrow shape.
        #[cfg(gpu_sm90)]
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $narrow_tma(p: MmqParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { pipe::mmq_pipe::<$b, true, false, false, true>(&p) }
        }

        /// The pipelined gate/up product with the SwiGLU + q8_1 epilogue (its output is H's
        /// D4 blocks, not gate and up) for one weight format; see gpu/src/moe/mmq/pipe/mod.rs.
        ///
        /// # Safety
        /// As `pipe::mmq_pipe`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $pipe_sw(p: MmqParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { pipe::mmq_pipe::<$b, false, false, true, true>(&p) }
        }

        /// The narrow form of the gate/up product with the SwiGLU + q8_1 epilogue; see
        /// gpu/src/moe/mmq/pipe/mod.rs.
        ///
        /// # Safety
        /// As `pipe::mmq_pipe`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $narrow_sw(p: MmqParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { pipe::mmq_pipe::<$b, true, false, true, false>(&p) }
        }

        /// The flat pipelined MMQ product (64 weight rows x 128 columns a CTA; either product)
        /// for one weight format; see gpu/src/moe/mmq/pipe/mod.rs.
        ///
        /// # Safety
        /// As `pipe::mmq_pipe`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $flat(p: MmqParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { pipe::mmq_pipe::<$b, false, true, false, false>(&p) }
        }

        /// The flat form of the gate/up product with the SwiGLU + q8_1 epilogue; see
        /// gpu/src/moe/mmq/pipe/mod.rs.
        ///
        /// # Safety
        /// As `pipe::mmq_pipe`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $flat_sw(p: MmqParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { pipe::mmq_pipe::<$b, false, true, true, true>(&p) }
        }
    )*};
}

crate::for_each_format!(mmq_kernels);
