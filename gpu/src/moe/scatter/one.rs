//! `moe_scatter_one`: the whole scatter of a run of few rows in one kernel (the module doc's
//! "one kernel"; the chain's bytes).

use crate::layout::{
    BlockQ8_1Mmq, CTA_SCAN_SMEM, MMQ_BLOCK_VALUES, QUANT_BLOCK_THREADS, QUANT_WARPS,
    SCATTER_ONE_IDS_AHEAD, ScatterParams, padded_k,
};
use crate::moe::q8_1::{quantize_x4, store_x4};
use crate::moe::scan::cta_exclusive_scan;
use crate::ptx::{
    atomic_add_shared_u32, ctaid_x, lane_id, ld_nc_v4_f32, ld_shared_u32, smem_base, st_shared_u32,
    sync_threads, tid_x,
};

const THREADS: u32 = QUANT_BLOCK_THREADS as u32;

/// The lane's first K position in chunk `kc` and token `t`'s 4 activations there (zeros past
/// the hidden size).
///
/// # Safety
/// `t < n_tokens`; `x` as `ScatterParams` (rows 16-byte aligned: hidden a multiple of 4).
#[inline(always)]
unsafe fn lane_x4(p: &ScatterParams, t: u32, kc: u32) -> (u32, [f32; 4]) {
    let k0 = kc * MMQ_BLOCK_VALUES as u32 + lane_id() * 4;
    let mut v = [0.0f32; 4];
    if k0 < p.hidden {
        // SAFETY: k0 + 4 <= hidden (a multiple of 4); row t of x.
        v = unsafe { ld_nc_v4_f32((p.x as *const f32).add((t * p.hidden + k0) as usize)) };
    }
    (k0, v)
}

/// A CTA per token `t`, in four steps:
/// 1. it counts every row's expert into two shared counters per expert, the rows of the tokens
///    before `t` and the others (each thread `SCATTER_ONE_IDS_AHEAD` ids in flight); its first
///    chunk's activations load meanwhile;
/// 2. a CTA prefix sum of the experts' totals gives the expert bounds (CTA 0 writes them);
/// 3. the row of `t`'s slot of expert `e` is `bounds[e]` plus the rows of `e` before `t`
///    (distinct experts per token): `row_token`, `row_dst`, `row_of`, as the chain's place;
/// 4. the quantizer of the chain's step 4 writes the token's q8_1 blocks to those rows.
///
/// # Safety
/// Buffers as `layout::ScatterParams` (`chunk_counts` and `xt` unused); each token's ids
/// distinct and below n_experts, top_k <= 32; `layout::scatter_one_smem(n_experts, top_k)`
/// bytes of dynamic shared memory; grid n_tokens CTAs of `QUANT_BLOCK_THREADS` threads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_scatter_one(p: ScatterParams) {
    crate::ptx::grid_dependency_sync();
    let t = ctaid_x();
    let tid = tid_x();
    let n_e = p.n_experts;
    // Shared: [n_experts] rows before t; [n_experts] rows from t on, then the bounds; the prefix
    // sum's scratch; [top_k] the token's rows.
    let before = smem_base();
    let rest = before + 4 * n_e;
    let scratch = rest + 4 * n_e;
    let rows_s = scratch + CTA_SCAN_SMEM as u32;
    let n_chunks = (padded_k(p.hidden as usize) / MMQ_BLOCK_VALUES) as u32;
    let mut kc = tid / 32;
    // SAFETY: t < n_tokens (grid).
    let mut next = unsafe { lane_x4(&p, t, kc.min(n_chunks - 1)) };
    let mut e = tid;
    while e < n_e {
        // SAFETY: e < n_experts: inside both counter arrays.
        unsafe {
            st_shared_u32(before + 4 * e, 0);
            st_shared_u32(rest + 4 * e, 0);
        }
        e += THREADS;
    }
    sync_threads();
    // 1. The counts.
    let ids = p.ids as *const u32;
    let n_ids = p.n_tokens * p.top_k;
    let mine = t * p.top_k;
    let mut i = tid;
    while i < n_ids {
        let mut v = [0u32; SCATTER_ONE_IDS_AHEAD];
        unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
            let ij = i + j as u32 * THREADS;
            if ij < n_ids {
                // SAFETY: ij < n_tokens * top_k: inside ids.
                v[j] = unsafe { *ids.add(ij as usize) };
            }
        });
        unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
            let ij = i + j as u32 * THREADS;
            if ij < n_ids {
                let at = if ij < mine { before } else { rest };
                // SAFETY: v[j] < n_experts: inside the counters.
                unsafe { atomic_add_shared_u32(at + 4 * v[j], 1) };
            }
        });
        i += SCATTER_ONE_IDS_AHEAD as u32 * THREADS;
    }
    sync_threads();
    // 2. The bounds: each thread a run of consecutive experts (at most MAX_EXPERTS / 256 = 8).
    let per = n_e.div_ceil(THREADS);
    let e0 = (tid * per).min(n_e);
    let e1 = (e0 + per).min(n_e);
    // SAFETY (the shared loads and stores below): e0 <= e < e1 <= n_experts.
    let total_of = |e: u32| unsafe { ld_shared_u32(before + 4 * e) + ld_shared_u32(rest + 4 * e) };
    let mut sum = 0u32;
    for e in e0..e1 {
        sum += total_of(e);
    }
    // SAFETY: every thread calls it; the scratch is CTA_SCAN_SMEM bytes no other code uses.
    let (mut run, total) = unsafe { cta_exclusive_scan(sum, scratch) };
    let bounds = p.expert_bounds as *mut u32;
    for e in e0..e1 {
        let n = total_of(e);
        // SAFETY: this thread's own experts: no other thread reads or writes them in this step.
        unsafe { st_shared_u32(rest + 4 * e, run) };
        if t == 0 {
            // SAFETY: e < n_experts: inside expert_bounds.
            unsafe { *bounds.add(e as usize) = run };
        }
        run += n;
    }
    if t == 0 && tid == 0 {
        // SAFETY: the last entry of expert_bounds.
        unsafe { *bounds.add(n_e as usize) = total };
    }
    sync_threads();
    // 3. The token's rows.
    if tid < p.top_k {
        let src = mine + tid;
        // SAFETY: src < n_tokens * top_k: inside ids and row_of; the expert's row is inside the
        // row arrays (the bounds count every row); tid < top_k <= 32: inside rows_s.
        unsafe {
            let e = *ids.add(src as usize);
            let row = ld_shared_u32(rest + 4 * e) + ld_shared_u32(before + 4 * e);
            *(p.row_token as *mut u32).add(row as usize) = t;
            *(p.row_dst as *mut u32).add(row as usize) = src;
            *(p.row_of as *mut u32).add(src as usize) = row;
            st_shared_u32(rows_s + 4 * tid, row);
        }
    }
    sync_threads();
    // 4. The token's q8_1 blocks to its rows.
    while kc < n_chunks {
        let (k0, v) = next;
        if kc + (QUANT_WARPS as u32) < n_chunks {
            // SAFETY: as above.
            next = unsafe { lane_x4(&p, t, kc + QUANT_WARPS as u32) };
        }
        let (q, d) = quantize_x4(v);
        for s in 0..p.top_k {
            // SAFETY: s < top_k: inside rows_s; the row is below n_ids; xq holds
            // padded_k(hidden) / 128 chunks of n_ids blocks.
            unsafe {
                let row = ld_shared_u32(rows_s + 4 * s);
                store_x4(p.xq as *mut BlockQ8_1Mmq, n_ids, row, k0, q, d);
            }
        }
        kc += QUANT_WARPS as u32;
    }
}
const _: () = assert!(SCATTER_ONE_IDS_AHEAD == 8, "the unrolled lists above");
