//! The chain's activations (module doc, steps 4-5): quantize, gather.

use crate::layout::{
    BlockQ8_1Mmq, MMQ_BLOCK_VALUES, Q8_1_MMQ_BYTES, Q8_1_MMQ_PIECES, QUANT_WARPS,
    SCATTER_GATHER_PIECES, SCATTER_GATHER_THREADS, ScatterParams, padded_k,
};
use crate::moe::q8_1::{quantize_x4, store_x4};
use crate::ptx::{ctaid_x, ctaid_y, lane_id, ld_nc_v4_f32, ld_nc_v4_u32, st_v4_u32, tid_x};

/// See the module doc in mod.rs (step 4).
///
/// # Safety
/// Buffers as `layout::ScatterParams` (after step 3 when `xt` is 0); x rows 16-byte aligned
/// (hidden a multiple of 4); grid n_tokens CTAs of 256 threads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_scatter_quantize(p: ScatterParams) {
    crate::ptx::grid_dependency_sync();
    let t = ctaid_x();
    let n_chunks = (padded_k(p.hidden as usize) / MMQ_BLOCK_VALUES) as u32;
    let mut kc = tid_x() / 32;
    while kc < n_chunks {
        let k0 = kc * MMQ_BLOCK_VALUES as u32 + lane_id() * 4;
        let mut v = [0.0f32; 4];
        if k0 < p.hidden {
            // SAFETY: k0 + 4 <= hidden (a multiple of 4); row t of x.
            v = unsafe { ld_nc_v4_f32((p.x as *const f32).add((t * p.hidden + k0) as usize)) };
        }
        let (q, d) = quantize_x4(v);
        if p.xt != 0 {
            // SAFETY: xt holds padded_k(hidden) / 128 chunks of n_tokens blocks; t < n_tokens.
            unsafe { store_x4(p.xt as *mut BlockQ8_1Mmq, p.n_tokens, t, k0, q, d) };
        } else {
            let n_rows = p.n_tokens * p.top_k;
            for s in 0..p.top_k {
                // SAFETY: row_of maps (t, s) to a compact row < n_rows; xq holds
                // padded_k(hidden) / 128 chunks of n_rows blocks.
                unsafe {
                    let row = *(p.row_of as *const u32).add((t * p.top_k + s) as usize);
                    store_x4(p.xq as *mut BlockQ8_1Mmq, n_rows, row, k0, q, d);
                }
            }
        }
        kc += QUANT_WARPS as u32;
    }
}

/// See the module doc in mod.rs (step 5).
///
/// # Safety
/// Buffers as `layout::ScatterParams`, after steps 3 and 4; grid `(ceil(9 n_rows / (256 * 4)),
/// padded_k(hidden) / 128)` CTAs of `SCATTER_GATHER_THREADS` threads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_scatter_gather(p: ScatterParams) {
    crate::ptx::grid_dependency_sync();
    const THREADS: u32 = SCATTER_GATHER_THREADS as u32;
    const PIECES: u32 = Q8_1_MMQ_PIECES as u32;
    let n_rows = p.n_tokens * p.top_k;
    let total = n_rows * PIECES;
    let kc = ctaid_y() as u64;
    let first = ctaid_x() * THREADS * SCATTER_GATHER_PIECES as u32 + tid_x();
    // Block (kc, row) of xq is piece `9 row + i` of the chunk's run; of xt, token row_token[row].
    let dst = p.xq + kc * n_rows as u64 * Q8_1_MMQ_BYTES as u64;
    let src = p.xt + kc * p.n_tokens as u64 * Q8_1_MMQ_BYTES as u64;
    let mut v = [[0u32; 4]; SCATTER_GATHER_PIECES];
    unroll!(j in [0, 1, 2, 3] {
        let idx = first + j as u32 * THREADS;
        if idx < total {
            let (row, piece) = (idx / PIECES, idx % PIECES);
            // SAFETY: row < n_rows: inside row_token, whose entries are tokens < n_tokens; the
            // piece is inside that token's block of chunk kc in xt (144-byte blocks: 16-byte
            // aligned pieces).
            unsafe {
                let t = *(p.row_token as *const u32).add(row as usize);
                let a = src + t as u64 * Q8_1_MMQ_BYTES as u64 + 16 * piece as u64;
                v[j] = ld_nc_v4_u32(a as *const u32);
            }
        }
    });
    unroll!(j in [0, 1, 2, 3] {
        let idx = first + j as u32 * THREADS;
        if idx < total {
            // SAFETY: piece idx of chunk kc's n_rows blocks: inside xq, 16-byte aligned.
            unsafe { st_v4_u32((dst + 16 * idx as u64) as *mut u32, v[j]) };
        }
    });
}
const _: () = assert!(SCATTER_GATHER_PIECES == 4, "the unrolled lists above");
