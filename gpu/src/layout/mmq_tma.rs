//! The tensor copies of the pipelined MMQ kernels' raw weight stages (sm_90): the shapes with
//! decoded tiles (`MmqPipeShape::Wide`, `Flat`; gpu/src/moe/mmq/pipe/copy/mod.rs) copy each stage
//! as boxes of [`MMQ_TMA_BOX_ROWS`] weight rows by one thread's `cp.async.bulk.tensor`, where
//! the host gives them the weight tensors' maps ([`MmqTmaMap`], `MmqParams::wmap0` / `wmap1`),
//! in place of 16-byte `cp.async` pieces spread over the CTA's threads.
//!
//! A box lands in shared memory as its rows' bytes side by side, [`MmqTmaMap::box_bytes`] apart
//! (the stage's bytes rounded up to 16, the least a box row may be; a row's bytes start at 0,
//! where a 16-byte piece's start where its row does in its window).

use super::{MmqPipeShape, MmqPipeSmem, WType};

/// Weight rows of one tensor-copy box: a stage of a 128-row tile is 4 boxes, of the flat
/// shape's 64 rows 2. A multiple of 8, so that a SwiGLU tile's 8-row gate and up groups fall
/// in whole boxes (gpu/src/moe/mmq/pipe/cta.rs).
pub const MMQ_TMA_BOX_ROWS: usize = 32;

/// Weight rows of one narrow box of type `w` (`moe_mmq_narrow_tma_<type>`, without the SwiGLU
/// epilogue): a warp's 16 rows in one box a stage (two boxes of 8 cost each warp 18-23 more
/// instructions a stage, ptxas 12.9), IQ4_NL's in two of 8 (with one, ptxas moved its lookup
/// table out of the registers: each K step's product took 33 more instructions).
pub const fn mmq_tma_narrow_box_rows(w: WType) -> usize {
    match w {
        WType::Iq4Nl => 8,
        _ => 16,
    }
}

/// The largest box row the tensor copies take (256 elements of one byte).
pub const MMQ_TMA_MAX_BOX_BYTES: usize = 256;

/// One weight tensor as a 3-dimensional tensor map (`CUtensorMap`, encoded by the host with
/// `cuTensorMapEncodeTiled`): bytes (`u8` elements) of a row, rows of an expert, experts; the
/// box one stage of [`MMQ_TMA_BOX_ROWS`] rows of one expert, at coordinates (stage's first
/// byte in the row, row, expert).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmqTmaMap {
    pub row_bytes: usize,
    /// Rows of one expert in this tensor.
    pub rows: usize,
    pub experts: usize,
    /// Bytes from one expert's first row to the next's.
    pub expert_bytes: usize,
    /// Bytes of one box row ([`MmqTmaMap::box_of`]).
    pub box_bytes: usize,
    /// Rows of one box.
    pub box_rows: usize,
}

impl MmqTmaMap {
    /// Bytes of one box row for weight type `w`: the stage of the shapes that copy by tensor
    /// copies (`MmqPipeShape::Wide` and `Flat`, [`MmqPipeShape::stage_row_bytes`]) from the
    /// 16-byte boundary at or before its start (a box's first byte must be 16-byte aligned in
    /// its row, and rows start 16-byte aligned: the stage starts [`MmqTmaMap::stage_box`]'s
    /// bytes into the box), rounded up to 16 bytes.
    pub const fn box_bytes(w: WType) -> usize {
        Self::window(w, MmqPipeShape::Wide).next_multiple_of(16)
    }

    /// The bytes a box row must cover for `shape`'s stages of type `w`: a stage's bytes plus the
    /// most its start lies past a 16-byte boundary (stages start at multiples of their bytes
    /// from a 16-byte aligned row: 16 less the greatest power of two, at most 16, dividing
    /// them).
    const fn window(w: WType, shape: MmqPipeShape) -> usize {
        let srb = shape.stage_row_bytes(w);
        let step = 1 << srb.trailing_zeros();
        srb + 16_usize.saturating_sub(step)
    }

    /// Where stage `s` of a row starts (the wide and flat shapes' stages): the box's first byte
    /// in the row (16-byte aligned), and the stage's first byte in the box.
    pub const fn stage_box(w: WType, s: u32) -> (u32, u32) {
        Self::stage_box_of(w, MmqPipeShape::Wide, s)
    }

    /// [`MmqTmaMap::stage_box`] for `shape`'s stages.
    pub const fn stage_box_of(w: WType, shape: MmqPipeShape, s: u32) -> (u32, u32) {
        let start = s * shape.stage_row_bytes(w) as u32;
        (start & !15, start & 15)
    }

    /// The box of `shape`'s kernels for weight type `w`, (bytes of a row, rows): the wide and
    /// flat shapes' [`MmqTmaMap::box_bytes`] and [`MMQ_TMA_BOX_ROWS`]; the narrow shape's slot
    /// (`MmqPipeSmem::slot`, the pitch its products read) and [`mmq_tma_narrow_box_rows`];
    /// none for the tall shape.
    pub const fn box_of(w: WType, shape: MmqPipeShape) -> Option<(usize, usize)> {
        match shape {
            MmqPipeShape::Wide | MmqPipeShape::Flat => Some((Self::box_bytes(w), MMQ_TMA_BOX_ROWS)),
            MmqPipeShape::Narrow => {
                Some((MmqPipeSmem::of(w, shape).slot, mmq_tma_narrow_box_rows(w)))
            }
            MmqPipeShape::Tall => None,
        }
    }

    /// The map of a tensor of `experts` x `rows` rows of `row_bytes`, `expert_bytes` from one
    /// expert to the next, of type `w`, for `shape`'s kernels; `None` where a tensor copy cannot
    /// take it: a stride not a multiple of 16 bytes (the row, the expert), a row count not a
    /// multiple of [`MMQ_TMA_BOX_ROWS`] (a box would straddle two tensors' rows), a box row past
    /// [`MMQ_TMA_MAX_BOX_BYTES`] or short of a stage's window, an expert's rows overlapping the
    /// next expert's, a dimension past `u32`, the tall shape.
    pub const fn of(
        w: WType,
        shape: MmqPipeShape,
        row_bytes: usize,
        rows: usize,
        experts: usize,
        expert_bytes: usize,
    ) -> Option<MmqTmaMap> {
        let Some((box_bytes, box_rows)) = Self::box_of(w, shape) else {
            return None;
        };
        let window = Self::window(w, shape);
        let ok = row_bytes.is_multiple_of(16)
            && expert_bytes.is_multiple_of(16)
            && rows > 0
            && experts > 0
            && rows.is_multiple_of(MMQ_TMA_BOX_ROWS)
            && rows * row_bytes <= expert_bytes
            && box_bytes <= MMQ_TMA_MAX_BOX_BYTES
            && box_bytes.is_multiple_of(16)
            && window <= box_bytes
            && box_bytes <= MmqPipeSmem::of(w, shape).slot
            && row_bytes <= u32::MAX as usize
            && rows <= u32::MAX as usize
            && experts <= u32::MAX as usize;
        if ok {
            Some(MmqTmaMap {
                row_bytes,
                rows,
                experts,
                expert_bytes,
                box_bytes,
                box_rows,
            })
        } else {
            None
        }
    }

    /// The tensor's sizes, innermost first: bytes of a row, rows, experts.
    pub const fn dims(&self) -> [u64; 3] {
        [self.row_bytes as u64, self.rows as u64, self.experts as u64]
    }

    /// The strides of the outer two dimensions in bytes: a row, an expert.
    pub const fn strides(&self) -> [u64; 2] {
        [self.row_bytes as u64, self.expert_bytes as u64]
    }

    /// The box: a stage's window of `box_rows` rows of one expert.
    pub const fn box_dims(&self) -> [u32; 3] {
        [self.box_bytes as u32, self.box_rows as u32, 1]
    }

    /// Bytes one box lands in shared memory.
    pub const fn box_total(&self) -> usize {
        self.box_bytes * self.box_rows
    }
}

// Every box lands 128-byte aligned: a raw stage buffer of 64 or 128 rows of 16-byte multiples
// starts at a multiple of 1,024 bytes, each box at a multiple of 32 x 16 bytes from it.
const _: () = assert!((MMQ_TMA_BOX_ROWS * 16).is_multiple_of(128));
const _: () = assert!(MMQ_TMA_BOX_ROWS.is_multiple_of(8));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::MmqPipeSmem;

    const W: MmqPipeShape = MmqPipeShape::Wide;

    #[test]
    fn maps_of_the_tensors_a_box_can_take() {
        // The reference shape's merged gate/up tensor of Q2_0: 720-byte rows, 1,280 an expert.
        let m = MmqTmaMap::of(WType::Q2_0, W, 720, 1280, 512, 1280 * 720).unwrap();
        assert_eq!(m.box_bytes, 48); // a 128-value stage: 36 bytes, from 0-12 bytes in
        assert_eq!(MmqTmaMap::stage_box(WType::Q2_0, 3), (96, 12));
        assert_eq!(MmqTmaMap::stage_box(WType::Q2_0, 4), (144, 0));
        assert_eq!(MmqTmaMap::stage_box(WType::Iq4Nl, 1), (64, 8));
        assert_eq!(m.dims(), [720, 1280, 512]);
        assert_eq!(m.strides(), [720, 1280 * 720]);
        assert_eq!(m.box_dims(), [48, 32, 1]);
        assert_eq!(m.box_total(), 48 * 32);
        assert_eq!(m.box_rows, 32);
        // The narrow kernel's: a warp's 16 rows, its 176-byte slot (a 144-byte stage from a
        // 16-byte boundary, its odd slot); none for the tall kernel.
        let n = MmqPipeShape::Narrow;
        let m = MmqTmaMap::of(WType::Q2_0, n, 720, 1280, 512, 1280 * 720).unwrap();
        assert_eq!((m.box_bytes, m.box_rows), (176, 16));
        assert_eq!(m.box_dims(), [176, 16, 1]);
        assert_eq!(MmqTmaMap::stage_box_of(WType::Q2_0, n, 3), (432, 0));
        assert!(
            MmqTmaMap::of(
                WType::Q8_0,
                MmqPipeShape::Tall,
                2720,
                1280,
                512,
                1280 * 2720
            )
            .is_none()
        );
        assert_eq!(MmqTmaMap::box_bytes(WType::Iq4Nl), 80);
        assert_eq!(MmqTmaMap::box_bytes(WType::Q8_0), 144);
        // Rows that are not whole 16-byte pieces (the down product's 180 bytes, IQ3_S's 1,100).
        assert!(MmqTmaMap::of(WType::Q2_0, W, 180, 2560, 512, 2560 * 180).is_none());
        assert!(MmqTmaMap::of(WType::Iq3S, W, 1100, 1280, 512, 1280 * 1100).is_none());
        // An expert stride off 16 bytes, or shorter than its rows.
        assert!(MmqTmaMap::of(WType::Q2_0, W, 720, 1280, 512, 1280 * 720 + 8).is_none());
        assert!(MmqTmaMap::of(WType::Q2_0, W, 720, 1280, 512, 1279 * 720).is_none());
        // Rows not whole boxes, no rows, no experts.
        assert!(MmqTmaMap::of(WType::Q2_0, W, 720, 1264, 512, 1280 * 720).is_none());
        assert!(MmqTmaMap::of(WType::Q2_0, W, 720, 0, 512, 1280 * 720).is_none());
        assert!(MmqTmaMap::of(WType::Q2_0, W, 720, 1280, 0, 1280 * 720).is_none());
    }

    #[test]
    fn a_box_row_fits_the_raw_stage_slots() {
        // The kernels land box rows `box_bytes` apart in stage buffers of `slot`-byte rows.
        for w in WType::ALL {
            for shape in [MmqPipeShape::Wide, MmqPipeShape::Flat] {
                let sm = MmqPipeSmem::of(w, shape);
                assert!(
                    sm.lead == 0 || MmqTmaMap::box_bytes(w) <= sm.slot,
                    "{w:?} {shape:?}"
                );
                // Every stage's bytes lie in its box row.
                for st in 0..64 {
                    let (_, into) = MmqTmaMap::stage_box(w, st);
                    let srb = shape.stage_row_bytes(w);
                    assert!(into as usize + srb <= MmqTmaMap::box_bytes(w), "{w:?} {st}");
                }
                assert_eq!(
                    shape.stage_row_bytes(w),
                    MmqPipeShape::Wide.stage_row_bytes(w)
                );
                assert!(shape.rows().is_multiple_of(2 * MMQ_TMA_BOX_ROWS));
                assert!((shape.rows() * sm.slot).is_multiple_of(1024));
            }
        }
        // The narrow boxes: the slot its products read (so the stage's layout is the pieces'),
        // every stage inside its row's box, each box 128-byte aligned.
        for w in WType::ALL {
            let n = MmqPipeShape::Narrow;
            let sm = MmqPipeSmem::of(w, n);
            let (bytes, rows) = MmqTmaMap::box_of(w, n).unwrap();
            assert_eq!((bytes, rows), (sm.slot, mmq_tma_narrow_box_rows(w)));
            assert!(
                16 % rows == 0 && rows >= 8,
                "{w:?}: a warp's rows in whole boxes"
            );
            assert!((rows * bytes).is_multiple_of(128));
            if MmqTmaMap::of(w, n, 2560 * 18, 64, 1, 64 * 2560 * 18).is_some() {
                for st in 0..64 {
                    let (_, into) = MmqTmaMap::stage_box_of(w, n, st);
                    assert!(into as usize + n.stage_row_bytes(w) <= bytes, "{w:?} {st}");
                }
            }
        }
    }
}
