//! Work lists of the expert-row paths (`gpu::layout::MmqTile`: an expert and up to `width` of
//! its compact rows per CTA): built on the host from the expert bounds read back and uploaded,
//! or built on the device by `moe_expert_tiles` (gpu/src/moe/tiles.rs) with no read-back, into
//! the list the host builds in expert order, padded with tiles of no rows.

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use gpu::layout::{CTA_SCAN_SMEM, EXPERT_TILES_THREADS, ExpertTilesParams, MmqTile};

use crate::device::{Gpu, KArg, dptr};
use crate::error::{DriverOp, Result, shape};

/// The work list of an expert-row path: for each expert, its rows `bounds[e] .. bounds[e + 1]`
/// in pieces of at most `width`; with `largest_first`, experts with more rows come first (ties
/// by expert id), so that the longest CTAs start first and the tail is short.
pub fn tiles_from_bounds(bounds: &[u32], width: usize, largest_first: bool) -> Vec<MmqTile> {
    let n_experts = bounds.len().saturating_sub(1);
    let mut order: Vec<usize> = (0..n_experts).collect();
    if largest_first {
        order.sort_by_key(|&e| std::cmp::Reverse(bounds[e + 1].saturating_sub(bounds[e])));
    }
    let mut t = Vec::new();
    for e in order {
        let (mut c, end) = (bounds[e], bounds[e + 1]);
        while c < end {
            let n = (end - c).min(width as u32);
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

/// Uploads a work list into `buf` (`MmqTile` as 4 u32 each); returns its length.
pub fn upload_tiles(
    gpu: &Gpu,
    list: &[MmqTile],
    buf: &mut cudarc::driver::CudaSlice<[u32; 4]>,
) -> Result<usize> {
    if !list.is_empty() {
        let raw: Vec<[u32; 4]> = list.iter().map(tile_repr).collect();
        gpu.stream.memcpy_htod(&raw, buf).op("cuMemcpyHtoD tiles")?;
    }
    Ok(list.len())
}

/// Upper bound of the tile count for `n_rows` rows over `n_experts` experts, `width` per tile.
pub fn max_tiles(n_rows: usize, n_experts: usize, width: usize) -> usize {
    n_rows.div_ceil(width) + n_experts
}

/// Queues `moe_expert_tiles`: the list `tiles_from_bounds(bounds, width, false)` of the bounds
/// at device address `bounds` (`[n_experts + 1]`, e.g. the scatter's) into the first slots of
/// `buf`, and tiles of no rows in the rest of its first `n_slots`; the products launched over
/// `n_slots` CTAs skip those. `n_slots` must be at least the list's length (`max_tiles` of the
/// run's rows is).
///
/// # Safety
/// `bounds` is a live device buffer of `n_experts + 1` non-decreasing u32, written before this
/// launch on the same stream.
pub unsafe fn build_on_device(
    gpu: &Gpu,
    bounds: u64,
    n_experts: usize,
    width: usize,
    buf: &mut CudaSlice<[u32; 4]>,
    n_slots: usize,
) -> Result<()> {
    if width == 0 || width > u32::MAX as usize {
        return Err(shape("moe_expert_tiles: tile width", width, "positive"));
    }
    if n_slots > buf.len() || n_slots > u32::MAX as usize || n_experts > u32::MAX as usize {
        return Err(shape(
            "moe_expert_tiles: slots",
            n_slots,
            format!("at most the buffer's {}", buf.len()),
        ));
    }
    let arg = KArg(ExpertTilesParams {
        bounds,
        tiles: dptr(buf, &gpu.stream),
        n_experts: n_experts as u32,
        width: width as u32,
        n_slots: n_slots as u32,
        _pad: 0,
    });
    let cfg = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (EXPERT_TILES_THREADS as u32, 1, 1),
        shared_mem_bytes: CTA_SCAN_SMEM as u32,
    };
    // SAFETY: bounds per the caller; the tile buffer holds n_slots tiles; one CTA of
    // EXPERT_TILES_THREADS threads with the scan's shared memory.
    unsafe {
        gpu.stream
            .launch_builder(&gpu.kernels.moe_expert_tiles)
            .arg(&arg)
            .launch(cfg)
    }
    .op("launch moe_expert_tiles")?;
    Ok(())
}

/// `MmqTile` as the 4 u32 of the cudarc tile buffers.
pub type TileRepr = [u32; 4];

/// A tile as the 4 u32 of the buffers.
pub fn tile_repr(t: &MmqTile) -> TileRepr {
    [t.expert, t.col_start, t.n_cols, t._pad]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_cover_rows_and_skip_empty_experts() {
        let bounds = [0u32, 0, 130, 130, 131, 200];
        let t = tiles_from_bounds(&bounds, 64, false);
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
        assert!(t.len() <= max_tiles(200, 5, 64));
        let big = tiles_from_bounds(&bounds, 32, true);
        let order: Vec<u32> = big.iter().map(|t| t.expert).collect();
        assert_eq!(order, [1, 1, 1, 1, 1, 4, 4, 4, 3]);
        assert_eq!(big.iter().map(|t| t.n_cols).sum::<u32>(), 200);
    }

    #[test]
    fn max_tiles_bounds_every_list() {
        // Worst cases: every expert one row past a multiple of the width, or all rows in one.
        for (n_experts, width) in [(1usize, 64usize), (5, 64), (512, 64), (37, 32)] {
            for rows_each in [0u32, 1, 63, 64, 65, 129] {
                let bounds: Vec<u32> = (0..=n_experts as u32).map(|e| e * rows_each).collect();
                let n_rows = *bounds.last().unwrap() as usize;
                let n = tiles_from_bounds(&bounds, width, false).len();
                assert!(
                    n <= max_tiles(n_rows, n_experts, width),
                    "{n_experts} {rows_each}"
                );
            }
        }
    }
}
