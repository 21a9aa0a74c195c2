//! Launcher of `moe_route` (gpu/src/moe/route.rs): softmax + top-k of router logits.
//! CPU twin: host/src/reference/route.rs.

use cudarc::driver::{CudaSlice, LaunchConfig};
use gpu::layout::{MAX_EXPERTS, RouteParams};

use crate::device::{Gpu, KArg, dptr};
use crate::error::{DriverOp, Error, Result, shape};
use crate::problem::RouteRule as Rule;

/// Checks the routing rule against the kernel's limits.
pub fn check(rule: &Rule) -> Result<()> {
    if rule.n_experts == 0 || rule.n_experts > MAX_EXPERTS {
        return Err(shape(
            "moe_route: experts",
            rule.n_experts,
            format!("1 to {MAX_EXPERTS}"),
        ));
    }
    if rule.top_k == 0 || rule.top_k > rule.n_experts.min(32) {
        return Err(shape(
            "moe_route: top-k",
            rule.top_k,
            "1 to min(32, experts)",
        ));
    }
    Ok(())
}

const _: () = assert!(4 * 4 * MAX_EXPERTS <= 48 * 1024);

/// Dynamic shared memory of `moe_route`: four warps x n_experts f32.
pub fn smem_bytes(n_experts: usize) -> u32 {
    (4 * 4 * n_experts) as u32
}

/// Queues the routing of `n_tokens` tokens: `logits [n_tokens][n_experts]` -> `ids`,
/// `weights` `[n_tokens][top_k]`.
pub fn launch(
    gpu: &Gpu,
    rule: &Rule,
    n_tokens: usize,
    logits: &CudaSlice<f32>,
    ids: &mut CudaSlice<u32>,
    weights: &mut CudaSlice<f32>,
) -> Result<()> {
    check(rule)?;
    let n = n_tokens * rule.top_k;
    if logits.len() < n_tokens * rule.n_experts || ids.len() < n || weights.len() < n {
        return Err(Error::Buffer {
            what: "route logits/ids/weights",
            got: ids.len().min(weights.len()),
            want: n,
        });
    }
    if n_tokens == 0 {
        return Ok(());
    }
    let p = KArg(RouteParams {
        logits: dptr(logits, &gpu.stream),
        ids: dptr(ids, &gpu.stream),
        weights: dptr(weights, &gpu.stream),
        n_tokens: n_tokens as u32,
        n_experts: rule.n_experts as u32,
        top_k: rule.top_k as u32,
        norm: rule.norm as u32,
        scale: rule.scale,
        _pad: 0,
    });
    // Four warps, each with its token's probabilities in shared memory (n_experts <= 2048:
    // at most 32 KiB, under the 48 KiB every device gives without opting in).
    let cfg = LaunchConfig {
        grid_dim: (n_tokens.div_ceil(4) as u32, 1, 1),
        block_dim: (128, 1, 1),
        shared_mem_bytes: smem_bytes(rule.n_experts),
    };
    // SAFETY: sizes checked above; the kernel reads n_tokens rows of logits and writes n entries
    // of ids and weights.
    unsafe { gpu.launch(&gpu.stream, &gpu.kernels.moe_route, cfg, &p) }.op("launch moe_route")?;
    Ok(())
}
