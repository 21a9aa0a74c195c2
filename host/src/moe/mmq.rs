//! What the two MMQ products share on the host: the tile list (one CTA per up to 64 rows of one
//! expert, none for an expert without rows) and the checked launch of `moe_*_mmq`
//! (gpu/src/moe/mmq.rs). Family launchers: moe/gate_up.rs, moe/down.rs.

use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};
use gpu::layout::{MMQ_COLS, MMQ_KSTEP, MMQ_ROWS, MMQ_SMEM_BYTES, MMQ_THREADS, MmqParams, MmqTile};

use crate::device::{Gpu, KArg};
use crate::error::{DriverOp, Result, shape};

/// The tiles of a row order: for each expert, its rows `bounds[e] .. bounds[e + 1]` in pieces of
/// at most `MMQ_COLS`.
pub fn tiles_from_bounds(bounds: &[u32]) -> Vec<MmqTile> {
    let mut t = Vec::new();
    for e in 0..bounds.len().saturating_sub(1) {
        let (mut c, end) = (bounds[e], bounds[e + 1]);
        while c < end {
            let n = (end - c).min(MMQ_COLS as u32);
            t.push(MmqTile {
                expert: e as u32,
                col_start: c,
                n_cols: n,
                _pad: 0,
            });
            c += n;
        }
    }
    t
}

/// Upper bound of the tile count for `n_rows` rows over `n_experts` experts.
pub fn max_tiles(n_rows: usize, n_experts: usize) -> usize {
    n_rows.div_ceil(MMQ_COLS) + n_experts
}

/// Checks a product's shape against the kernel's limits; `what` names the kernel.
pub fn check_product(what: &str, n: usize, k: usize) -> Result<()> {
    if n == 0 || !n.is_multiple_of(MMQ_ROWS) || n / MMQ_ROWS > 65_535 {
        return Err(shape(
            format!("{what}: output features"),
            n,
            "a positive multiple of 128, at most 8,388,480",
        ));
    }
    if k == 0 || !k.is_multiple_of(MMQ_KSTEP) || k > u32::MAX as usize {
        return Err(shape(format!("{what}: K"), k, "a positive multiple of 128"));
    }
    Ok(())
}

/// Queues one MMQ product over `n_tiles` tiles (the plan's buffers were checked by the caller).
///
/// # Safety
/// `p` must describe live device buffers as `gpu::layout::MmqParams` requires, its `tiles` must
/// hold `n_tiles` valid tiles, and `func` must be an MMQ kernel.
pub unsafe fn launch(
    gpu: &Gpu,
    func: &CudaFunction,
    name: &'static str,
    p: MmqParams,
    n_tiles: usize,
) -> Result<()> {
    if n_tiles == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig {
        grid_dim: (n_tiles as u32, p.n / MMQ_ROWS as u32, 1),
        block_dim: (MMQ_THREADS as u32, 1, 1),
        shared_mem_bytes: MMQ_SMEM_BYTES as u32,
    };
    let arg = KArg(p);
    // SAFETY: forwarded from the caller.
    unsafe { gpu.stream.launch_builder(func).arg(&arg).launch(cfg) }.op(name)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_cover_rows_and_skip_empty_experts() {
        let bounds = [0u32, 0, 130, 130, 131, 200];
        let t = tiles_from_bounds(&bounds);
        let want = [
            (1, 0, 64),
            (1, 64, 64),
            (1, 128, 2),
            (3, 130, 1),
            (4, 131, 64),
            (4, 195, 5),
        ];
        assert_eq!(t.len(), want.len());
        for (t, w) in t.iter().zip(want) {
            assert_eq!((t.expert, t.col_start, t.n_cols), w);
        }
        assert!(t.len() <= max_tiles(200, 5));
        assert!(check_product("x", 1280, 2560).is_ok());
        assert!(check_product("x", 1000, 2560).is_err());
        assert!(check_product("x", 1280, 100).is_err());
    }
}
