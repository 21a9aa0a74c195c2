//! The resident form of the narrow MMQ kernel (sm_90; gpu/src/moe/mmq/pipe/resident.rs): where
//! a product's whole K of a 128-row tile fits the narrow layout's shared memory (the down
//! product at the reference shape: K = 640), the CTA copies every weight byte and every
//! activation block it needs once, in the prologue, with bulk copies (`cp.async.bulk`) that
//! complete on transaction barriers, and then multiplies with no CTA barrier in its K loop.
//!
//! A tile's 128 weight rows are `128 row_bytes` consecutive bytes of the expert's tensor, laid
//! in shared memory as they are (row `t` at `t * row_bytes`): warp `w`'s 16 rows are one bulk
//! copy of `16 row_bytes` bytes on the warp's own barrier, which only that warp waits for. The
//! activations of K step `j` (the tile's columns' D4 blocks) go to `acts + j * acts_bytes`, on
//! the step's own barrier.

use super::{MMQ_KSTEP, MMQ_ROWS, MmqPipeShape, MmqPipeSmem, WType};
use super::{MMQ_PIPE_BAR_BYTES, fused_sub_steps};

/// Warps of a narrow CTA, each with a transaction barrier for its 16 weight rows.
pub const MMQ_RESIDENT_WARPS: usize = MMQ_ROWS / 16;

/// Shared-memory layout of a resident narrow CTA (byte offsets): the weight rows from 0, the
/// activations of every K step at `acts` (`acts_bytes` each), the transaction barriers at
/// `bars` (one per warp, then one per K step); the lookup tables stay where the narrow layout
/// keeps them (`MmqPipeSmem::tables`), past `end`, and the CTA is launched with the narrow
/// layout's shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmqResidentSmem {
    pub row_bytes: usize,
    pub acts: usize,
    pub acts_bytes: usize,
    pub bars: usize,
    /// End of the barriers: at most the narrow layout's `tables`.
    pub end: usize,
}

impl MmqResidentSmem {
    /// The resident layout of weight type `w` for a product of `k` values per row, or `None`
    /// when `k` is not a whole number of the type's stages (`128 fused_sub_steps(w)` values)
    /// or its rows and activations do not fit below the narrow layout's tables.
    pub const fn of(w: WType, k: usize) -> Option<MmqResidentSmem> {
        let stage = MMQ_KSTEP * fused_sub_steps(w);
        if k == 0 || !k.is_multiple_of(stage) {
            return None;
        }
        let row_bytes = k / w.block_values() * w.block_bytes();
        let shape = MmqPipeShape::Narrow;
        let acts_bytes = shape.acts_bytes();
        let acts = (MMQ_ROWS * row_bytes).next_multiple_of(16);
        let bars = acts + k / MMQ_KSTEP * acts_bytes;
        let end = bars + (MMQ_RESIDENT_WARPS + k / MMQ_KSTEP) * MMQ_PIPE_BAR_BYTES;
        if end <= MmqPipeSmem::of(w, shape).tables {
            Some(MmqResidentSmem {
                row_bytes,
                acts,
                acts_bytes,
                bars,
                end,
            })
        } else {
            None
        }
    }

    /// Bytes of one warp's weight copy (16 rows).
    pub const fn warp_bytes(&self) -> usize {
        16 * self.row_bytes
    }

    /// Offset of the transaction barrier of warp `w`'s rows.
    pub const fn warp_bar(&self, w: usize) -> usize {
        self.bars + w * MMQ_PIPE_BAR_BYTES
    }

    /// Offset of the transaction barrier of K step `j`'s activations.
    pub const fn acts_bar(&self, j: usize) -> usize {
        self.bars + (MMQ_RESIDENT_WARPS + j) * MMQ_PIPE_BAR_BYTES
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
                assert!(r.acts >= MMQ_ROWS * r.row_bytes && r.acts.is_multiple_of(16));
                assert_eq!(r.bars, r.acts + k / MMQ_KSTEP * r.acts_bytes);
                assert!(r.bars.is_multiple_of(MMQ_PIPE_BAR_BYTES));
                let nk = k / MMQ_KSTEP;
                assert_eq!(r.warp_bar(0), r.bars);
                assert_eq!(r.acts_bar(0), r.warp_bar(MMQ_RESIDENT_WARPS - 1) + 8);
                assert_eq!(r.end, r.acts_bar(nk - 1) + MMQ_PIPE_BAR_BYTES);
                assert!(
                    r.end <= narrow.tables && narrow.tables <= narrow.total,
                    "{w:?} {k}"
                );
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
    }
}
