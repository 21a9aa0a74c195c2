//! Launchers of the scatter kernels (gpu/src/moe/scatter.rs): count, offsets, place, quantize.
//! CPU twin: host/src/reference/scatter.rs.

use cudarc::driver::{LaunchConfig, PushKernelArg};
use gpu::layout::{
    CTA_SCAN_SMEM, MAX_EXPERTS, QUANT_BLOCK_THREADS, SCATTER_CHUNK, SCATTER_COUNT_THREADS,
    SCATTER_OFFSETS_THREADS, SCATTER_PLACE_THREADS, SCATTER_PLACE_TOKENS, ScatterParams,
    scatter_place_smem,
};

use crate::device::{Gpu, KArg};
use crate::error::{DriverOp, Result, shape};

/// Checks the scatter kernels' limits.
pub fn check(n_tokens: usize, top_k: usize, n_experts: usize, hidden: usize) -> Result<()> {
    if n_experts == 0 || n_experts > MAX_EXPERTS {
        return Err(shape(
            "moe_scatter: experts",
            n_experts,
            format!("1 to {MAX_EXPERTS}"),
        ));
    }
    if top_k == 0 || top_k > 32 {
        return Err(shape("moe_scatter: top-k", top_k, "1 to 32"));
    }
    if !hidden.is_multiple_of(4) || hidden == 0 {
        return Err(shape(
            "moe_scatter: hidden",
            hidden,
            "a positive multiple of 4",
        ));
    }
    if n_tokens * top_k > u32::MAX as usize / 2 || n_tokens > i32::MAX as usize {
        return Err(shape(
            "moe_scatter: rows (tokens x top-k)",
            n_tokens * top_k,
            "below 2^31",
        ));
    }
    Ok(())
}

/// Entries of the per-chunk count buffer.
pub fn chunk_counts_len(n_tokens: usize, n_experts: usize) -> usize {
    n_tokens.div_ceil(SCATTER_CHUNK).max(1) * n_experts
}

/// Queues the four scatter kernels. `p` holds the device addresses of every buffer; the caller
/// (moe::prefill) sized them for `n_tokens`.
///
/// # Safety
/// Every pointer in `p` must be a live device buffer of the size `gpu::layout::ScatterParams`
/// describes for `p.n_tokens`, `p.top_k`, `p.n_experts`, `p.hidden`; ids valid (below
/// n_experts, distinct per token).
pub unsafe fn launch(gpu: &Gpu, p: ScatterParams) -> Result<()> {
    check(
        p.n_tokens as usize,
        p.top_k as usize,
        p.n_experts as usize,
        p.hidden as usize,
    )?;
    let n_chunks = (p.n_tokens as usize).div_ceil(SCATTER_CHUNK);
    let smem = 4 * p.n_experts;
    let arg = KArg(p);
    let k = &gpu.kernels;
    let s = &gpu.stream;
    if p.n_tokens == 0 {
        // Only the (all-zero) expert bounds.
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (SCATTER_OFFSETS_THREADS as u32, 1, 1),
            shared_mem_bytes: CTA_SCAN_SMEM as u32,
        };
        // SAFETY: with no tokens the kernel only writes n_experts + 1 bounds.
        unsafe {
            s.launch_builder(&k.moe_scatter_offsets)
                .arg(&arg)
                .launch(cfg)
        }
        .op("launch moe_scatter_offsets")?;
        return Ok(());
    }
    let cfg = |grid: (u32, u32, u32), threads: u32, smem: u32| LaunchConfig {
        grid_dim: grid,
        block_dim: (threads, 1, 1),
        shared_mem_bytes: smem,
    };
    // SAFETY (all four): buffers sized by the caller per ScatterParams; grids as the kernels'
    // docs require.
    unsafe {
        s.launch_builder(&k.moe_scatter_count)
            .arg(&arg)
            .launch(cfg(
                (n_chunks as u32, 1, 1),
                SCATTER_COUNT_THREADS as u32,
                smem,
            ))
            .op("launch moe_scatter_count")?;
        s.launch_builder(&k.moe_scatter_offsets)
            .arg(&arg)
            .launch(cfg(
                (1, 1, 1),
                SCATTER_OFFSETS_THREADS as u32,
                CTA_SCAN_SMEM as u32,
            ))
            .op("launch moe_scatter_offsets")?;
        s.launch_builder(&k.moe_scatter_place)
            .arg(&arg)
            .launch(cfg(
                (
                    (p.n_tokens as usize).div_ceil(SCATTER_PLACE_TOKENS) as u32,
                    1,
                    1,
                ),
                SCATTER_PLACE_THREADS as u32,
                scatter_place_smem(p.n_experts as usize, p.top_k as usize) as u32,
            ))
            .op("launch moe_scatter_place")?;
        s.launch_builder(&k.moe_scatter_quantize)
            .arg(&arg)
            .launch(cfg((p.n_tokens, 1, 1), QUANT_BLOCK_THREADS as u32, 0))
            .op("launch moe_scatter_quantize")?;
    }
    Ok(())
}
