//! Launcher of `moe_combine` (gpu/src/moe/combine.rs). CPU twin: host/src/reference/combine.rs.

use cudarc::driver::{CudaSlice, LaunchConfig};
use gpu::layout::{COMBINE_THREADS, COMBINE_VALUES, CombineParams};

use crate::device::{Gpu, KArg, MAX_GRID_X, dptr};
use crate::error::{DriverOp, Error, Result, shape};

/// Whether the combine takes `n_tokens` tokens of `hidden` values: `hidden` a multiple of
/// `COMBINE_VALUES`, and the grid's token count (x) and column blocks (y) within CUDA's grid
/// limits. The pipeline checks it for its token capacity when it is made.
pub fn check(n_tokens: usize, hidden: usize) -> Result<()> {
    if !hidden.is_multiple_of(COMBINE_VALUES) {
        return Err(shape(
            "moe_combine: hidden",
            hidden,
            format!("a multiple of {COMBINE_VALUES}"),
        ));
    }
    if n_tokens > MAX_GRID_X {
        return Err(shape(
            "moe_combine: tokens",
            n_tokens,
            format!("at most {MAX_GRID_X} (a CUDA grid's x dimension)"),
        ));
    }
    Ok(())
}

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
    check(n_tokens, hidden)?;
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
    unsafe { gpu.launch(&gpu.stream, &gpu.kernels.moe_combine, cfg, &p) }
        .op("launch moe_combine")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn check_takes_whole_vectors_and_the_grid_limit() {
        let most = i32::MAX as usize;
        assert!(check(0, 2560).is_ok());
        assert!(check(16_384, 2560).is_ok());
        // Past 2^32 output values (the kernel's indices are 64-bit).
        assert!(check(u32::MAX as usize / 2560 + 1, 2560).is_ok());
        assert!(check(most, 2560).is_ok());
        assert!(check(most + 1, 2560).is_err());
        assert!(check(usize::MAX, 2560).is_err());
        assert!(check(1, 2562).is_err());
    }
}
