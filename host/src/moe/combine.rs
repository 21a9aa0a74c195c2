//! Launcher of `moe_combine` (gpu/src/moe/combine.rs). CPU twin: host/src/reference/combine.rs.

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use gpu::layout::{COMBINE_THREADS, COMBINE_VALUES, CombineParams};

use crate::device::{Gpu, KArg, dptr};
use crate::error::{DriverOp, Error, Result};

/// Queues `out[t][h] = sum_s dm[t * top_k + s][h] * weights[t][s]` (slot order, fma chain).
pub fn launch(
    gpu: &Gpu,
    n_tokens: usize,
    top_k: usize,
    hidden: usize,
    dm: &CudaSlice<f32>,
    weights: &CudaSlice<f32>,
    out: &mut CudaSlice<f32>,
) -> Result<()> {
    if dm.len() < n_tokens * top_k * hidden
        || weights.len() < n_tokens * top_k
        || out.len() < n_tokens * hidden
    {
        return Err(Error::Buffer {
            what: "combine dm/weights/out",
            got: out.len(),
            want: n_tokens * hidden,
        });
    }
    if !hidden.is_multiple_of(COMBINE_VALUES) {
        return Err(Error::Unsupported(format!(
            "combine: hidden {hidden} is not a multiple of {COMBINE_VALUES}"
        )));
    }
    if n_tokens == 0 {
        return Ok(());
    }
    let p = KArg(CombineParams {
        dm: dptr(dm, &gpu.stream),
        weights: dptr(weights, &gpu.stream),
        out: dptr(out, &gpu.stream),
        n_tokens: n_tokens as u32,
        top_k: top_k as u32,
        hidden: hidden as u32,
        _pad: 0,
    });
    let cfg = LaunchConfig {
        grid_dim: (
            n_tokens as u32,
            hidden.div_ceil(COMBINE_THREADS * COMBINE_VALUES) as u32,
            1,
        ),
        block_dim: (COMBINE_THREADS as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: sizes checked above.
    unsafe {
        gpu.stream
            .launch_builder(&gpu.kernels.moe_combine)
            .arg(&p)
            .launch(cfg)
    }
    .op("launch moe_combine")?;
    Ok(())
}
