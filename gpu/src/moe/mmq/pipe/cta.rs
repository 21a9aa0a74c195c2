//! What one CTA of the pipelined MMQ kernel (pipe/mod.rs) works on: its tile, shape, weight rows
//! and shared-memory layout, and where its buffers and weight rows are.

use crate::formats::lookup_table_word;
use crate::layout::{
    MMQ_ORDER_TILES, MMQ_THREADS, MMQ_TMA_BOX_ROWS, MmqParams, MmqPipeShape, MmqPipeSmem, MmqTile,
    WType,
};
use crate::ptx::{ctaid_x, ctaid_y, nctaid_x, nctaid_y, st_shared_u32, tid_x};

/// What one CTA works on: its weight rows, tile, shape and shared-memory layout.
pub(super) struct Cta {
    pub(super) tile: MmqTile,
    /// The CTA's row tile (the resident form: its group of row tiles), from [`grid_coords`].
    pub(super) row_tile: u32,
    pub(super) shape: MmqPipeShape,
    /// Global address of the CTA's first weight row (SwiGLU epilogue: first gate row).
    pub(super) wbase: u64,
    /// SwiGLU epilogue: global address of the CTA's first up row.
    pub(super) ubase: u64,
    /// Tile rows interleave gate and up rows (the SwiGLU epilogue's kernels).
    pub(super) swiglu: bool,
    pub(super) row_bytes: u32,
    /// The CTA's first weight row of the product (SwiGLU epilogue: its first gate row, the
    /// first of its features).
    pub(super) first_row: u32,
    /// The raw weight stages come by tensor copies (sm_90, `MmqParams::wmap0`; copy/mod.rs):
    /// row `t`'s bytes at [`Cta::tma_row`] `* box_bytes` in the stage buffer.
    pub(super) tma: bool,
    pub(super) sm: MmqPipeSmem,
    pub(super) base: u32,
    /// The L2 cache policy of the warp-private weight copies (sm_90, copy/mod.rs's
    /// `weight_policy`), made once where the CTA starts.
    #[cfg(gpu_sm90)]
    pub(super) policy: u64,
}

impl Cta {
    /// Global address of tile row `t`'s weights: row `t` from `wbase`, or with the SwiGLU
    /// epilogue gate row (`t` mod 16 < 8) or up row of feature `8 (t / 16) + t % 8`.
    #[inline(always)]
    pub(super) fn row_addr(&self, t: u32) -> u64 {
        if self.swiglu {
            let base = if t & 8 != 0 { self.ubase } else { self.wbase };
            base + ((t >> 4) * 8 + (t & 7)) as u64 * self.row_bytes as u64
        } else {
            self.wbase + t as u64 * self.row_bytes as u64
        }
    }

    /// Global address of tile row `t`'s bytes in K step `j`'s raw stage (`sub` K steps and
    /// `srb` bytes a row per stage).
    #[inline(always)]
    pub(super) fn stage_src(&self, t: u32, j: u32, sub: u32, srb: u64) -> u64 {
        self.row_addr(t) + (j / sub) as u64 * srb
    }

    /// Shared address of tile row `t`'s first block in K step `j`'s raw stage: its slot, plus
    /// where the bytes start in their 16-byte aligned window (as copy/ copies them); with
    /// tensor copies its row of the boxes ([`Cta::tma_row`], `box_bytes` apart), plus where the
    /// stage starts in its box (`layout::MmqTmaMap::stage_box`).
    #[inline(always)]
    pub(super) fn stage_row(&self, t: u32, j: u32, sub: u32, srb: u64, box_bytes: u32) -> u32 {
        if self.tma {
            return self.raw(j, sub)
                + self.tma_row(t) * box_bytes
                + (((j / sub) * srb as u32) & 15);
        }
        let src = self.stage_src(t, j, sub, srb);
        self.raw(j, sub) + t * self.sm.slot as u32 + (src & 15) as u32
    }

    /// Where tile row `t` lies in a stage's tensor-copy boxes (`layout::MMQ_TMA_BOX_ROWS` rows
    /// each, in order): row `t`, or with the SwiGLU epilogue the gate rows of the CTA's
    /// features first, then their up rows (tile row `t` is feature `8 (t / 16) + t % 8`'s gate
    /// row when `t` mod 16 < 8, else its up row: [`Cta::row_addr`]).
    #[inline(always)]
    pub(super) fn tma_row(&self, t: u32) -> u32 {
        if self.swiglu {
            let up = if t & 8 != 0 {
                self.shape.rows() as u32 / 2
            } else {
                0
            };
            up + (t >> 4) * 8 + (t & 7)
        } else {
            t
        }
    }

    /// The weight row of the product that box `i` of a stage starts at (its rows are the next
    /// `layout::MMQ_TMA_BOX_ROWS` rows): [`Cta::tma_row`]'s order; `n` the product's rows.
    #[inline(always)]
    pub(super) fn tma_box_row(&self, i: u32, n: u32) -> u32 {
        let box_rows = MMQ_TMA_BOX_ROWS as u32;
        if self.swiglu {
            let half = self.shape.rows() as u32 / 2 / box_rows;
            if i < half {
                self.first_row + box_rows * i
            } else {
                n / 2 + self.first_row + box_rows * (i - half)
            }
        } else {
            self.first_row + box_rows * i
        }
    }

    /// The raw weight stage buffer of K step `j` (`sub` K steps per stage).
    pub(super) fn raw(&self, j: u32, sub: u32) -> u32 {
        let stage = j / sub;
        self.base + (stage % self.sm.nw as u32) * (self.shape.rows() * self.sm.slot) as u32
    }

    /// The activation blocks of K step `j`.
    pub(super) fn acts(&self, j: u32) -> u32 {
        self.base + self.sm.acts as u32 + (j % self.sm.na as u32) * self.sm.acts_bytes as u32
    }

    /// The type's lookup tables (`MmqPipeSmem::tables`), copied by [`Cta::copy_tables`].
    pub(super) fn tables(&self) -> u32 {
        self.base + self.sm.tables as u32
    }

    /// Copies weight type `w`'s lookup tables (`formats::lookup_table_word`) into
    /// [`Cta::tables`]: every thread a word in turn; visible after the next barrier.
    ///
    /// # Safety
    /// Every thread, `self.sm` the layout of `w` (room for its tables at `tables`).
    #[inline(always)]
    pub(super) unsafe fn copy_tables(&self, w: WType) {
        let words = (w.lookup_table_bytes() / 4) as u32;
        let mut i = tid_x();
        while i < words {
            // SAFETY: word i < words of the tables' region (the contract).
            unsafe { st_shared_u32(self.tables() + 4 * i, lookup_table_word(w, i as usize)) };
            i += MMQ_THREADS as u32;
        }
    }

    pub(super) fn decoded(&self, step: u32) -> u32 {
        self.base + self.sm.tiles as u32 + (step % 2) * self.sm.tile_bytes as u32
    }
}

/// Global address of weight row `row` (of the product's `n`) of expert `e`: `w0`'s rows below
/// `n_split`, `w1`'s from there.
#[inline(always)]
pub(super) fn weight_row(p: &MmqParams, e: u32, row: u32) -> u64 {
    let (w, r) = if row < p.n_split {
        (p.w0, row)
    } else {
        (p.w1, row - p.n_split)
    };
    w + e as u64 * p.w_expert_bytes + r as u64 * p.row_bytes as u64
}

/// The CTA's tile (an index into `p.tiles`) and row tile (the resident form: its group of row
/// tiles), in the order `p.order` names (`MmqParams::order`).
#[inline(always)]
pub(super) fn grid_coords(p: &MmqParams) -> (u32, u32) {
    if p.order == MMQ_ORDER_TILES {
        (ctaid_x(), ctaid_y())
    } else {
        // The CTA's place in the launch order (x fastest). The grids have fewer than 2^32 CTAs:
        // a tile takes at least one of the product's rows, so 2^32 / (n / 128) tiles would need
        // hundreds of millions of rows of q8_1 activations, more than a GPU holds.
        let ny = nctaid_y();
        let l = ctaid_y() * nctaid_x() + ctaid_x();
        (l / ny, l % ny)
    }
}
