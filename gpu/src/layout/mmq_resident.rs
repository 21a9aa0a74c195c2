//! The resident form of the narrow MMQ kernel (sm_90; gpu/src/moe/mmq/pipe/resident.rs): where
//! a product's whole K of a 128-row tile fits the narrow layout's shared memory (the down
//! product at the reference shape: K = 640), the CTA copies every weight byte and every
//! activation block it needs with bulk copies (`cp.async.bulk`) that complete on transaction
//! barriers, and then multiplies with no CTA barrier in its K loop.
//!
//! A CTA runs up to `MmqParams::resident` row tiles of its column tile, one after the other
//! ([`resident_row_tiles`]): the activations are copied once, and the weight rows of each row
//! tile go to one of [`MmqResidentSmem::wbufs`] buffers, so that with two buffers the next row
//! tile's rows land while the warp multiplies the current one.
//!
//! A tile's 128 weight rows are `128 row_bytes` consecutive bytes of the expert's tensor, laid
//! in a weight buffer as they are (row `t` at `t * row_bytes`): warp `w`'s 16 rows are one bulk
//! copy of `16 row_bytes` bytes on the warp's own barrier of that buffer, which only that warp
//! waits for. The activations of K step `j` (the tile's columns' D4 blocks) go to `acts + j *
//! acts_bytes`, on the step's own barrier.

use super::{MMQ_KSTEP, MMQ_ROWS, MmqPipeShape, MmqPipeSmem, WType};
use super::{MMQ_NARROW_SMEM_BUDGET, MMQ_PIPE_BAR_BYTES, fused_sub_steps};

/// Warps of a narrow CTA, each with a transaction barrier for its 16 weight rows.
pub const MMQ_RESIDENT_WARPS: usize = MMQ_ROWS / 16;

/// The most row tiles of 128 one resident CTA runs (`MmqParams::resident`). Measured on the
/// H200 (the Q2_0 down product at the reference shape, ms at T = 512 / 2,048): 1 tile 0.170 /
/// 0.500, 2 tiles 0.156 / 0.451, 4 tiles 0.150 / 0.421, 5 tiles 0.152 / 0.419, 10 tiles
/// 0.159 / 0.417.
pub const MMQ_RESIDENT_ROW_TILES: usize = 4;

/// Row tiles per resident CTA for a product of `n` output features (a multiple of 128):
/// [`MMQ_RESIDENT_ROW_TILES`], or all of them where there are fewer. The last CTA of a row
/// runs what is left (`MmqParams::resident`).
pub const fn resident_row_tiles(n: usize) -> usize {
    let tiles = n / MMQ_ROWS;
    if tiles < MMQ_RESIDENT_ROW_TILES {
        tiles
    } else {
        MMQ_RESIDENT_ROW_TILES
    }
}

/// Shared-memory layout of a resident narrow CTA (byte offsets): `wbufs` weight buffers of 128
/// rows from 0 (`wbuf_bytes` apart), the activations of every K step at `acts` (`acts_bytes`
/// each), the transaction barriers at `bars` (one per warp and weight buffer, then one per K
/// step), the lookup tables at `tables`; the CTA is launched with `total` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmqResidentSmem {
    pub row_bytes: usize,
    /// Weight buffers: 2 where they fit the narrow budget (`MMQ_NARROW_SMEM_BUDGET`), else 1.
    pub wbufs: usize,
    pub wbuf_bytes: usize,
    pub acts: usize,
    pub acts_bytes: usize,
    pub bars: usize,
    /// End of the barriers.
    pub end: usize,
    pub tables: usize,
    pub total: usize,
}

impl MmqResidentSmem {
    /// The resident layout of weight type `w` for a product of `k` values per row, or `None`
    /// when `k` is not a whole number of the type's stages (`128 fused_sub_steps(w)` values)
    /// or one buffer of rows and the activations do not fit below the narrow layout's tables.
    /// Two weight buffers where the layout then fits `MMQ_NARROW_SMEM_BUDGET` (three CTAs per
    /// SM), else one.
    pub const fn of(w: WType, k: usize) -> Option<MmqResidentSmem> {
        let stage = MMQ_KSTEP * fused_sub_steps(w);
        if k == 0 || !k.is_multiple_of(stage) {
            return None;
        }
        let one = Self::with_buffers(w, k, 1);
        if one.end > MmqPipeSmem::of(w, MmqPipeShape::Narrow).tables {
            return None;
        }
        let two = Self::with_buffers(w, k, 2);
        Some(if two.total <= MMQ_NARROW_SMEM_BUDGET {
            two
        } else {
            one
        })
    }

    const fn with_buffers(w: WType, k: usize, wbufs: usize) -> MmqResidentSmem {
        let row_bytes = k / w.block_values() * w.block_bytes();
        let acts_bytes = MmqPipeShape::Narrow.acts_bytes();
        let wbuf_bytes = (MMQ_ROWS * row_bytes).next_multiple_of(16);
        let acts = wbufs * wbuf_bytes;
        let bars = acts + k / MMQ_KSTEP * acts_bytes;
        let end = bars + (wbufs * MMQ_RESIDENT_WARPS + k / MMQ_KSTEP) * MMQ_PIPE_BAR_BYTES;
        let tables = end.next_multiple_of(16);
        MmqResidentSmem {
            row_bytes,
            wbufs,
            wbuf_bytes,
            acts,
            acts_bytes,
            bars,
            end,
            tables,
            total: tables + w.lookup_table_bytes(),
        }
    }

    /// Bytes of one warp's weight copy (16 rows).
    pub const fn warp_bytes(&self) -> usize {
        16 * self.row_bytes
    }

    /// Offset of the transaction barrier of warp `w`'s rows in weight buffer `b`.
    pub const fn warp_bar(&self, w: usize, b: usize) -> usize {
        self.bars + (b * MMQ_RESIDENT_WARPS + w) * MMQ_PIPE_BAR_BYTES
    }

    /// Offset of the transaction barrier of K step `j`'s activations.
    pub const fn acts_bar(&self, j: usize) -> usize {
        self.bars + (self.wbufs * MMQ_RESIDENT_WARPS + j) * MMQ_PIPE_BAR_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_layouts_fit_below_the_tables() {
        for w in WType::ALL {
            let narrow = MmqPipeSmem::of(w, MmqPipeShape::Narrow);
            for k in (128..=8192).step_by(128) {
                let Some(r) = MmqResidentSmem::of(w, k) else {
                    continue;
                };
                assert!(k.is_multiple_of(w.block_values()), "{w:?} {k}");
                assert_eq!(r.row_bytes, k / w.block_values() * w.block_bytes());
                assert!(r.row_bytes.is_multiple_of(2) && r.warp_bytes().is_multiple_of(16));
                assert!(r.wbuf_bytes >= MMQ_ROWS * r.row_bytes && r.wbuf_bytes.is_multiple_of(16));
                assert_eq!(r.acts, r.wbufs * r.wbuf_bytes);
                assert_eq!(r.bars, r.acts + k / MMQ_KSTEP * r.acts_bytes);
                assert!(r.bars.is_multiple_of(MMQ_PIPE_BAR_BYTES));
                let nk = k / MMQ_KSTEP;
                assert_eq!(r.warp_bar(0, 0), r.bars);
                assert_eq!(r.warp_bar(0, 1), r.warp_bar(MMQ_RESIDENT_WARPS - 1, 0) + 8);
                assert_eq!(
                    r.acts_bar(0),
                    r.warp_bar(MMQ_RESIDENT_WARPS - 1, r.wbufs - 1) + 8
                );
                assert_eq!(r.end, r.acts_bar(nk - 1) + MMQ_PIPE_BAR_BYTES);
                assert!(r.tables >= r.end && r.tables.is_multiple_of(16));
                assert_eq!(r.total, r.tables + w.lookup_table_bytes());
                // One buffer fits below the narrow layout's tables; two only in the budget.
                let one = MmqResidentSmem::with_buffers(w, k, 1);
                assert!(one.end <= narrow.tables, "{w:?} {k}");
                match r.wbufs {
                    1 => assert!(
                        MmqResidentSmem::with_buffers(w, k, 2).total > MMQ_NARROW_SMEM_BUDGET
                    ),
                    2 => assert!(r.total <= MMQ_NARROW_SMEM_BUDGET),
                    b => panic!("{b} buffers"),
                }
            }
        }
        let k = |w, k| MmqResidentSmem::of(w, k).is_some();
        // The reference shape's down product (K = 640) for its down types, but Q8_0's 87 KB.
        assert!(k(WType::Q2_0, 640) && k(WType::Iq4Nl, 640) && !k(WType::Q8_0, 640));
        // Its gate/up product (K = 2560) never; 256-value blocks need K a multiple of 256.
        for w in WType::ALL {
            assert!(!k(w, 2560), "{w:?}");
        }
        assert!(!k(WType::Iq3S, 640) && k(WType::Iq3S, 512));
        assert!(!k(WType::Q2_0, 0) && !k(WType::Q2_0, 100));
        // The reference shape's down products: Q2_0 double-buffered (58 KB), IQ4_NL not.
        let b = |w| MmqResidentSmem::of(w, 640).map(|r| r.wbufs);
        assert_eq!((b(WType::Q2_0), b(WType::Iq4Nl)), (Some(2), Some(1)));
    }

    #[test]
    fn resident_row_tiles_cover_the_tiles() {
        for n in (128..=8192).step_by(128) {
            let r = resident_row_tiles(n);
            let tiles = n / MMQ_ROWS;
            assert!(
                (1..=MMQ_RESIDENT_ROW_TILES).contains(&r) && r <= tiles,
                "{n}"
            );
            // The CTAs of a column tile: all of them run r tiles but the last.
            let ctas = tiles.div_ceil(r);
            assert!(ctas * r >= tiles && (ctas - 1) * r < tiles, "{n}");
        }
        // The reference shape: down 2,560 features (20 tiles: 5 CTAs of 4), gate/up 1,280 (10:
        // 4, 4, 2).
        assert_eq!(resident_row_tiles(2560), 4);
        assert_eq!(resident_row_tiles(1280), 4);
        assert_eq!(resident_row_tiles(384), 3);
        assert_eq!(resident_row_tiles(128), 1);
    }
}
