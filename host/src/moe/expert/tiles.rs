//! Work lists of the expert-row paths (`gpu::layout::MmqTile`: an expert and up to `width` of
//! its compact rows per CTA): built on the host from the expert bounds read back and uploaded,
//! or built on the device by `moe_expert_tiles` (gpu/src/moe/tiles.rs) with no read-back, into
//! the list the host builds in expert order, padded with tiles of no rows.

use cudarc::driver::{CudaSlice, LaunchConfig};
use gpu::layout::{
    CTA_SCAN_SMEM, EXPERT_TILES_THREADS, ExpertTilesParams, MmqTile, TILES_BODY, TILES_TAILS,
    expert_tile_range,
};

use crate::device::{Gpu, KArg, dptr};
use crate::error::{DriverOp, Result, shape};

/// Which of each expert's tiles a work list holds (`gpu::layout::expert_tile_range`): every
/// one, or with the expert's last tile a *tail* where it has at most `tail` rows, the list
/// without the tails or the tails alone (a product whose last tiles are mostly empty runs them
/// on a narrower kernel: `MmqTails`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TilePart {
    All,
    Body { tail: u32 },
    Tails { tail: u32 },
}

impl TilePart {
    /// `ExpertTilesParams`' `tail` and `part`.
    fn params(self) -> (u32, u32) {
        match self {
            TilePart::All => (0, TILES_BODY),
            TilePart::Body { tail } => (tail, TILES_BODY),
            TilePart::Tails { tail } => (tail, TILES_TAILS),
        }
    }

    /// The most tiles of this part for `n_rows` rows over `n_experts` experts, `width` a tile:
    /// [`max_tiles`], or one an expert for the tails.
    pub fn max_tiles(self, n_rows: usize, n_experts: usize, width: usize) -> usize {
        match self {
            TilePart::Tails { .. } => n_experts,
            _ => max_tiles(n_rows, n_experts, width),
        }
    }
}

/// The work list of an expert-row path: for each expert, its rows `bounds[e] .. bounds[e + 1]`
/// in pieces of at most `width`; with `largest_first`, experts with more rows come first (ties
/// by expert id), so that the longest CTAs start first and the tail is short.
pub fn tiles_from_bounds(bounds: &[u32], width: usize, largest_first: bool) -> Vec<MmqTile> {
    part_from_bounds(bounds, width, TilePart::All, largest_first)
}

/// [`tiles_from_bounds`] holding the tiles of `part` only.
pub fn part_from_bounds(
    bounds: &[u32],
    width: usize,
    part: TilePart,
    largest_first: bool,
) -> Vec<MmqTile> {
    let n_experts = bounds.len().saturating_sub(1);
    let mut order: Vec<usize> = (0..n_experts).collect();
    if largest_first {
        order.sort_by_key(|&e| std::cmp::Reverse(bounds[e + 1].saturating_sub(bounds[e])));
    }
    let (tail, which) = part.params();
    let w = width as u32;
    let mut t = Vec::new();
    for e in order {
        let (start, end) = (bounds[e], bounds[e + 1]);
        let rows = end.saturating_sub(start);
        let (first, n) = expert_tile_range(rows, w, tail, which);
        for j in first..first + n {
            t.push(MmqTile {
                expert: e as u32,
                col_start: start + j * w,
                n_cols: (rows - j * w).min(w),
                _pad: 0,
            });
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

/// Queues `moe_expert_tiles`: the list `part_from_bounds(bounds, width, part, false)` of the
/// bounds at device address `bounds` (`[n_experts + 1]`, e.g. the scatter's) into the first
/// slots of `buf`, and tiles of no rows in the rest of its first `n_slots`; the products
/// launched over `n_slots` CTAs skip those. `n_slots` must be at least the list's length
/// (`part.max_tiles` of the run's rows is).
///
/// # Safety
/// `bounds` is a live device buffer of `n_experts + 1` non-decreasing u32, written before this
/// launch on the same stream.
pub unsafe fn build_on_device(
    gpu: &Gpu,
    bounds: u64,
    n_experts: usize,
    width: usize,
    part: TilePart,
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
    let (tail, which) = part.params();
    let arg = KArg(ExpertTilesParams {
        bounds,
        tiles: dptr(buf, &gpu.stream),
        n_experts: n_experts as u32,
        width: width as u32,
        n_slots: n_slots as u32,
        tail,
        part: which,
        _pad: 0,
    });
    let cfg = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (EXPERT_TILES_THREADS as u32, 1, 1),
        shared_mem_bytes: CTA_SCAN_SMEM as u32,
    };
    // SAFETY: bounds per the caller; the tile buffer holds n_slots tiles; one CTA of
    // EXPERT_TILES_THREADS threads with the scan's shared memory.
    unsafe { gpu.launch(&gpu.stream, &gpu.kernels.moe_expert_tiles, cfg, &arg) }
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
    fn body_and_tails_split_each_experts_list() {
        // Rows 0, 130 (last tile 2: a tail), 1 (a tail alone), 69 (one tile past the tail
        // bound), 128 (one full tile), 200 (128 + 72: the last tile past the bound), 64 (one
        // tile at the bound: a tail).
        let bounds = [0u32, 0, 130, 131, 200, 328, 528, 592];
        let tail = 64;
        let all = tiles_from_bounds(&bounds, 128, false);
        let body = part_from_bounds(&bounds, 128, TilePart::Body { tail }, false);
        let tails = part_from_bounds(&bounds, 128, TilePart::Tails { tail }, false);
        let cols = |l: &[MmqTile]| -> Vec<(u32, u32, u32)> {
            l.iter()
                .map(|t| (t.expert, t.col_start, t.n_cols))
                .collect()
        };
        assert_eq!(
            cols(&body),
            [
                (1, 0, 128),
                (3, 131, 69),
                (4, 200, 128),
                (5, 328, 128),
                (5, 456, 72)
            ]
        );
        assert_eq!(cols(&tails), [(1, 128, 2), (2, 130, 1), (6, 528, 64)]);
        // Together they are the whole list, each tile once.
        let mut both = cols(&body);
        both.extend(cols(&tails));
        both.sort();
        assert_eq!(both, cols(&all));
        assert!(tails.len() <= TilePart::Tails { tail }.max_tiles(592, 7, 128));
        // A tail bound of 0 keeps every tile in the body.
        assert_eq!(
            cols(&part_from_bounds(
                &bounds,
                128,
                TilePart::Body { tail: 0 },
                false
            )),
            cols(&all)
        );
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
