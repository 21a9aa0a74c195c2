//! Scatter: the expert-sorted row order of a routing and the q8_1 activations placed in it.
//! Four kernels, in order (launcher: host/src/moe/scatter.rs):
//! 1. `moe_scatter_count`: CTA per chunk of 256 tokens (`SCATTER_CHUNK`), 256 threads; counts
//!    the chunk's rows per expert in shared memory (`4 * n_experts` bytes) ->
//!    `chunk_counts[chunk][e]`.
//! 2. `moe_scatter_offsets`: one CTA of 1024 threads; `expert_bounds` = exclusive scan of the
//!    per-expert totals; `chunk_counts` becomes the first compact row of each (chunk, expert).
//! 3. `moe_scatter_place`: CTA (one warp) per chunk; the chunk's expert ids are first copied
//!    into shared memory (coalesced), then tokens in order, lane s places slot s: within an
//!    expert, rows follow token order (as ggml's `mm_ids_helper`). Writes `row_token`,
//!    `row_dst` (token * top_k + slot) and `row_of` (its inverse). The walk is serial (256 steps
//!    per chunk), so each step touches only shared memory before its stores.
//! 4. `moe_scatter_quantize`: CTA per token, 8 warps over the 128-value chunks of its row:
//!    quantizes the token's activations to q8_1 D4 once and writes them to every row the token
//!    was routed to.

use crate::layout::{
    BlockQ8_1Mmq, MMQ_BLOCK_VALUES, QUANT_WARPS, SCATTER_CHUNK, SCATTER_COUNT_THREADS,
    SCATTER_OFFSETS_THREADS, ScatterParams, padded_k,
};
use crate::moe::q8_1::{quantize_x4, store_x4};
use crate::ptx::{
    atomic_add_shared_u32, ctaid_x, ctaid_y, lane_id, ld_nc_v4_f32, ld_shared_u32, smem_base,
    st_shared_u32, sync_threads, sync_warp, tid_x,
};

/// See the module doc (step 1).
///
/// # Safety
/// Buffers as `layout::ScatterParams`; ids below n_experts; `4 * n_experts` bytes of dynamic
/// shared memory; grid `ceil(n_tokens / 256)` CTAs of 256 threads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_scatter_count(p: ScatterParams) {
    let smem = smem_base();
    let tid = tid_x();
    let mut e = tid;
    while e < p.n_experts {
        // SAFETY: e < n_experts: inside the shared counts.
        unsafe { st_shared_u32(smem + 4 * e, 0) };
        e += SCATTER_COUNT_THREADS as u32;
    }
    sync_threads();
    let t = ctaid_x() * SCATTER_CHUNK as u32 + tid;
    if t < p.n_tokens {
        for s in 0..p.top_k {
            // SAFETY: (t, s) is inside ids; ids are below n_experts (launcher's contract).
            unsafe {
                let e = *(p.ids as *const u32).add((t * p.top_k + s) as usize);
                atomic_add_shared_u32(smem + 4 * e, 1);
            }
        }
    }
    sync_threads();
    let mut e = tid;
    while e < p.n_experts {
        // SAFETY: chunk_counts has n_chunks * n_experts entries.
        unsafe {
            *(p.chunk_counts as *mut u32).add((ctaid_x() * p.n_experts + e) as usize) =
                ld_shared_u32(smem + 4 * e);
        }
        e += SCATTER_COUNT_THREADS as u32;
    }
}

/// See the module doc (step 2).
///
/// # Safety
/// Buffers as `layout::ScatterParams`; `4 * n_experts` bytes of dynamic shared memory; one CTA
/// of 1024 threads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_scatter_offsets(p: ScatterParams) {
    let smem = smem_base();
    let n_chunks = p.n_tokens.div_ceil(SCATTER_CHUNK as u32);
    let counts = p.chunk_counts as *mut u32;
    let tid = tid_x();
    let mut e = tid;
    while e < p.n_experts {
        let mut total = 0u32;
        for c in 0..n_chunks {
            // SAFETY: (c, e) is inside chunk_counts.
            total += unsafe { *counts.add((c * p.n_experts + e) as usize) };
        }
        // SAFETY: e < n_experts.
        unsafe { st_shared_u32(smem + 4 * e, total) };
        e += SCATTER_OFFSETS_THREADS as u32;
    }
    sync_threads();
    if tid == 0 {
        let mut run = 0u32;
        for e in 0..p.n_experts {
            // SAFETY: e < n_experts; expert_bounds has n_experts + 1 entries.
            unsafe {
                let v = ld_shared_u32(smem + 4 * e);
                st_shared_u32(smem + 4 * e, run);
                *(p.expert_bounds as *mut u32).add(e as usize) = run;
                run += v;
            }
        }
        // SAFETY: the last entry of expert_bounds.
        unsafe { *(p.expert_bounds as *mut u32).add(p.n_experts as usize) = run };
    }
    sync_threads();
    let mut e = tid;
    while e < p.n_experts {
        // SAFETY: as above.
        let mut run = unsafe { ld_shared_u32(smem + 4 * e) };
        for c in 0..n_chunks {
            // SAFETY: (c, e) is inside chunk_counts.
            unsafe {
                let q = counts.add((c * p.n_experts + e) as usize);
                let v = *q;
                *q = run;
                run += v;
            }
        }
        e += SCATTER_OFFSETS_THREADS as u32;
    }
}

/// See the module doc (step 3).
///
/// # Safety
/// Buffers as `layout::ScatterParams`, after steps 1-2; each token's ids distinct and below
/// n_experts, top_k <= 32; `layout::scatter_place_smem(n_experts, top_k)` bytes of dynamic
/// shared memory; grid `ceil(n_tokens / 256)` CTAs of 32 threads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_scatter_place(p: ScatterParams) {
    let smem = smem_base();
    let lane = lane_id();
    let chunk = ctaid_x();
    let ids_s = smem + 4 * p.n_experts;
    let mut e = lane;
    while e < p.n_experts {
        // SAFETY: (chunk, e) is inside chunk_counts; e < n_experts.
        unsafe {
            st_shared_u32(
                smem + 4 * e,
                *(p.chunk_counts as *const u32).add((chunk * p.n_experts + e) as usize),
            )
        };
        e += 32;
    }
    let t0 = chunk * SCATTER_CHUNK as u32;
    let t1 = (t0 + SCATTER_CHUNK as u32).min(p.n_tokens);
    let first = t0 * p.top_k;
    let mut i = lane;
    while i < (t1 - t0) * p.top_k {
        // SAFETY: slot first + i is inside ids (token < t1 <= n_tokens); i < 256 top_k, inside
        // the ids area of shared memory.
        unsafe {
            st_shared_u32(
                ids_s + 4 * i,
                *(p.ids as *const u32).add((first + i) as usize),
            )
        };
        i += 32;
    }
    sync_warp();
    for t in t0..t1 {
        if lane < p.top_k {
            let src = t * p.top_k + lane;
            // SAFETY: src is inside row_of and its id was staged above; the expert's next row
            // is inside the row arrays (the offsets count exactly the rows placed); distinct
            // experts per token, so no two lanes touch the same counter.
            unsafe {
                let e = ld_shared_u32(ids_s + 4 * (src - first));
                let c = ld_shared_u32(smem + 4 * e);
                st_shared_u32(smem + 4 * e, c + 1);
                *(p.row_token as *mut u32).add(c as usize) = t;
                *(p.row_dst as *mut u32).add(c as usize) = src;
                *(p.row_of as *mut u32).add(src as usize) = c;
            }
        }
        sync_warp();
    }
}

/// See the module doc (step 4).
///
/// # Safety
/// Buffers as `layout::ScatterParams`, after step 3; x rows 16-byte aligned (hidden a multiple
/// of 4); grid n_tokens CTAs of 256 threads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_scatter_quantize(p: ScatterParams) {
    let t = ctaid_x();
    let n_rows = p.n_tokens * p.top_k;
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
        for s in 0..p.top_k {
            // SAFETY: row_of maps (t, s) to a compact row < n_rows; xq holds padded_k(hidden) /
            // 128 chunks of n_rows blocks.
            unsafe {
                let row = *(p.row_of as *const u32).add((t * p.top_k + s) as usize);
                store_x4(p.xq as *mut BlockQ8_1Mmq, n_rows, row, k0, q, d);
            }
        }
        kc += QUANT_WARPS as u32;
    }
}
