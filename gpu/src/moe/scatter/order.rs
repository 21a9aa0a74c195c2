//! The chain's row order (module doc, steps 1-3): count, offsets, place.

use crate::layout::{
    SCATTER_CHUNK, SCATTER_COUNT_THREADS, SCATTER_OFFSETS_THREADS, SCATTER_PLACE_THREADS,
    SCATTER_PLACE_TOKENS, ScatterParams,
};
use crate::moe::scan::cta_exclusive_scan;
use crate::ptx::{
    atomic_add_shared_u32, ctaid_x, ld_shared_u32, red_or_shared_u32, smem_base, st_shared_u32,
    sync_threads, sync_warp, tid_x,
};

/// See the module doc in mod.rs (step 1).
///
/// # Safety
/// Buffers as `layout::ScatterParams`; ids below n_experts; `4 * n_experts` bytes of dynamic
/// shared memory; grid `ceil(n_tokens / 256)` CTAs of 256 threads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_scatter_count(p: ScatterParams) {
    crate::ptx::grid_dependency_sync();
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

/// Entries `c .. c + 8` (those below `n_chunks`) of expert `e`'s column of the chunk counts,
/// as 8 independent loads.
///
/// # Safety
/// `counts` is `[n_chunks][n_experts]`; `e < n_experts`.
#[inline(always)]
unsafe fn chunk_batch(
    counts: *const u32,
    e: u32,
    n_experts: u32,
    c: u32,
    n_chunks: u32,
) -> [u32; 8] {
    let mut v = [0u32; 8];
    unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
        let cj = c + j as u32;
        if cj < n_chunks {
            // SAFETY: (cj, e) is inside the counts.
            v[j] = unsafe { *counts.add((cj * n_experts + e) as usize) };
        }
    });
    v
}

/// See the module doc in mod.rs (step 2).
///
/// # Safety
/// Buffers as `layout::ScatterParams`; `layout::CTA_SCAN_SMEM` bytes of dynamic shared memory;
/// one CTA of `SCATTER_OFFSETS_THREADS` threads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_scatter_offsets(p: ScatterParams) {
    crate::ptx::grid_dependency_sync();
    let n_chunks = p.n_tokens.div_ceil(SCATTER_CHUNK as u32);
    let counts = p.chunk_counts as *mut u32;
    let bounds = p.expert_bounds as *mut u32;
    // Each thread takes a run of consecutive experts (at most 2: MAX_EXPERTS / 1,024).
    let per = p.n_experts.div_ceil(SCATTER_OFFSETS_THREADS as u32);
    let e0 = (tid_x() * per).min(p.n_experts);
    let e1 = (e0 + per).min(p.n_experts);
    let mut mine = 0u32;
    for e in e0..e1 {
        let mut c = 0;
        while c < n_chunks {
            // SAFETY: e < n_experts.
            let v = unsafe { chunk_batch(counts, e, p.n_experts, c, n_chunks) };
            mine += v.iter().sum::<u32>();
            c += 8;
        }
    }
    // SAFETY: every thread calls it; the dynamic shared memory is its scratch.
    let (mut run, total) = unsafe { cta_exclusive_scan(mine, smem_base()) };
    for e in e0..e1 {
        // SAFETY: e < n_experts; expert_bounds has n_experts + 1 entries.
        unsafe { *bounds.add(e as usize) = run };
        let mut c = 0;
        while c < n_chunks {
            // SAFETY: e < n_experts.
            let v = unsafe { chunk_batch(counts, e, p.n_experts, c, n_chunks) };
            unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                let cj = c + j as u32;
                if cj < n_chunks {
                    // SAFETY: (cj, e) is inside chunk_counts.
                    unsafe { *counts.add((cj * p.n_experts + e) as usize) = run };
                    run += v[j];
                }
            });
            c += 8;
        }
    }
    if tid_x() == 0 {
        // SAFETY: the last entry of expert_bounds.
        unsafe { *bounds.add(p.n_experts as usize) = total };
    }
}

/// See the module doc in mod.rs (step 3).
///
/// # Safety
/// Buffers as `layout::ScatterParams`, after steps 1-2; each token's ids distinct and below
/// n_experts, top_k <= 32; `layout::scatter_place_smem(n_experts, top_k)` bytes of dynamic
/// shared memory; grid `ceil(n_tokens / SCATTER_PLACE_TOKENS)` CTAs of `SCATTER_PLACE_THREADS`
/// threads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_scatter_place(p: ScatterParams) {
    crate::ptx::grid_dependency_sync();
    let counters = smem_base();
    let masks = counters + 4 * p.n_experts;
    let ids_s = masks + 4 * p.n_experts;
    let tid = tid_x();
    let t0 = ctaid_x() * SCATTER_PLACE_TOKENS as u32;
    let t1 = (t0 + SCATTER_PLACE_TOKENS as u32).min(p.n_tokens);
    let chunk = t0 / SCATTER_CHUNK as u32;
    let ids = p.ids as *const u32;
    let mut e = tid;
    while e < p.n_experts {
        // SAFETY: (chunk, e) is inside chunk_counts; e < n_experts.
        unsafe {
            st_shared_u32(
                counters + 4 * e,
                *(p.chunk_counts as *const u32).add((chunk * p.n_experts + e) as usize),
            );
            st_shared_u32(masks + 4 * e, 0);
        }
        e += SCATTER_PLACE_THREADS as u32;
    }
    sync_threads();
    // The counters advance past the chunk's tokens before this group (their order does not
    // matter: counts), 8 loads in flight per thread.
    let before0 = chunk * SCATTER_CHUNK as u32 * p.top_k;
    let before1 = t0 * p.top_k;
    let mut i = before0 + tid;
    while i < before1 {
        let mut v = [0u32; 8];
        unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
            let ij = i + (j * SCATTER_PLACE_THREADS) as u32;
            if ij < before1 {
                // SAFETY: slot ij is inside ids (its token is below t0 < n_tokens).
                v[j] = unsafe { *ids.add(ij as usize) };
            }
        });
        unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
            if i + ((j * SCATTER_PLACE_THREADS) as u32) < before1 {
                // SAFETY: v[j] < n_experts: inside the counters.
                unsafe { atomic_add_shared_u32(counters + 4 * v[j], 1) };
            }
        });
        i += 8 * SCATTER_PLACE_THREADS as u32;
    }
    // The group's ids (at most 32 * 32: 4 per thread).
    let n_ids = (t1 - t0) * p.top_k;
    let mut i = tid;
    while i < n_ids {
        // SAFETY: slot before1 + i is inside ids (token < t1 <= n_tokens); i < 32 top_k: inside
        // the ids area of shared memory.
        unsafe { st_shared_u32(ids_s + 4 * i, *ids.add((before1 + i) as usize)) };
        i += SCATTER_PLACE_THREADS as u32;
    }
    sync_threads();
    // One warp places the group's rows.
    if tid >= 32 {
        return;
    }
    // Lane l takes token t0 + l: its rows follow those of the group's earlier tokens of the
    // same expert (distinct experts per token: a token is one bit of an expert's mask). A CTA
    // holds one group, so no counter advances past it.
    let lane = tid;
    let below = (1u32 << lane) - 1;
    let t = t0 + lane;
    let live = t < t1;
    let id = |s: u32| {
        // SAFETY: token t < t1 of the group, s < top_k: staged above.
        unsafe { ld_shared_u32(ids_s + 4 * ((t - t0) * p.top_k + s)) }
    };
    if live {
        for s in 0..p.top_k {
            // SAFETY: id(s) < n_experts: inside the masks.
            unsafe { red_or_shared_u32(masks + 4 * id(s), 1 << lane) };
        }
    }
    sync_warp();
    if live {
        for s in 0..p.top_k {
            let e = id(s);
            let src = t * p.top_k + s;
            // SAFETY: e < n_experts; the expert's row is inside the row arrays (the offsets
            // count exactly the rows placed); src is inside row_of.
            unsafe {
                let m = ld_shared_u32(masks + 4 * e);
                let c = ld_shared_u32(counters + 4 * e) + (m & below).count_ones();
                *(p.row_token as *mut u32).add(c as usize) = t;
                *(p.row_dst as *mut u32).add(c as usize) = src;
                *(p.row_of as *mut u32).add(src as usize) = c;
            }
        }
    }
}
