//! The pipelined MMQ layouts' tests (layout/mmq_pipe.rs): budgets, leads, buffers and slots.

use super::*;

const SHAPES: [MmqPipeShape; 4] = [
    MmqPipeShape::Wide,
    MmqPipeShape::Narrow,
    MmqPipeShape::Tall,
    MmqPipeShape::Flat,
];

#[test]
fn layouts_fit_their_budgets() {
    for shape in SHAPES {
        for w in WType::ALL {
            let sm = MmqPipeSmem::of(w, shape);
            assert!((1..=MMQ_PIPE_MAX_LEAD).contains(&sm.lead), "{w:?}: {sm:?}");
            assert!(sm.total <= MMQ_PIPE_SMEM_BUDGET, "{w:?}: {sm:?}");
            // The buffers the lead needs (MmqPipeSmem's doc), each slot the row's window.
            assert_eq!((sm.nw, sm.na), MmqPipeSmem::buffers(w, shape, sm.lead));
            assert_eq!(sm.na, sm.lead + 2);
            // A stage in flight beside those still read: decoded (or, decoding into
            // registers, multiplied) one step later.
            let held = sm.lead + shape.in_registers() as usize;
            assert!(sm.nw * shape.stage_steps(w) > held);
            assert_eq!(sm.tile_bytes == 0, shape.in_registers(), "{w:?}");
            // The SwiGLU epilogue's arrays fit the region they overlay.
            let room = if sm.tile_bytes == 0 {
                sm.acts
            } else {
                2 * sm.tile_bytes
            };
            assert!(MMQ_SWIGLU_SMEM <= room, "{w:?} {shape:?}");
            assert!(
                sm.epilogue() + MMQ_SWIGLU_SMEM <= sm.bars,
                "{w:?} {shape:?}"
            );
            assert!(sm.slot >= shape.stage_window(w) && sm.slot.is_multiple_of(16));
            assert_eq!(sm.acts, sm.nw * shape.rows() * sm.slot);
            assert_eq!(sm.acts_bytes, shape.cols() * Q8_1_MMQ_BYTES);
            assert_eq!(sm.tiles, sm.acts + sm.na * sm.acts_bytes);
            assert_eq!(sm.bars, sm.tiles + 2 * sm.tile_bytes);
            assert!(sm.bars.is_multiple_of(MMQ_PIPE_BAR_BYTES));
            let mut bars_end = sm.bars + sm.na * shape.bars_per_buffer() * MMQ_PIPE_BAR_BYTES;
            assert_eq!(sm.wbars, bars_end);
            if shape.in_registers() {
                assert_eq!(sm.empty_bar(0), sm.bars + sm.na * MMQ_PIPE_BAR_BYTES);
                assert_eq!(sm.empty_bar(sm.na - 1) + MMQ_PIPE_BAR_BYTES, bars_end);
            }
            if shape == MmqPipeShape::Narrow {
                // A weight barrier per warp and weight buffer after them.
                let warps = MMQ_THREADS / 32;
                assert_eq!(sm.weight_bar(0, 0), bars_end);
                bars_end += sm.nw * warps * MMQ_PIPE_BAR_BYTES;
                assert_eq!(
                    sm.weight_bar(warps - 1, sm.nw - 1) + MMQ_PIPE_BAR_BYTES,
                    bars_end
                );
            }
            assert!(sm.tables >= bars_end);
            assert!(sm.tables.is_multiple_of(16) && sm.tables < bars_end + 16);
            assert_eq!(sm.total, sm.tables + w.lookup_table_bytes());
            assert!(sm.tiles.is_multiple_of(16) && sm.tile_bytes.is_multiple_of(16));
            // At least two CTAs per SM on sm_90 (228 KB, 1 KB reserved per CTA).
            assert!(2 * (sm.total + 1024) <= 228 * 1024, "{w:?}");
        }
    }
    // The 64-column kernel's layout is its shape's (`MmqPipeShape::wide_of`). The lead of the
    // main pairs' gate/up types there (IQ2_S's 256-value stages and 4 KB grid leave room for
    // 1 beside the decoded tiles; IQ3_S, tall, has no decoded tiles: 3).
    for w in WType::ALL {
        assert_eq!(
            MmqPipeSmem::new(w),
            MmqPipeSmem::of(w, MmqPipeShape::wide_of(w))
        );
    }
    let lead = |w| MmqPipeSmem::new(w).lead;
    assert_eq!(lead(WType::Q2_0), 2);
    assert_eq!(lead(WType::Iq2Xxs), 2);
    assert_eq!(lead(WType::Iq3S), 3);
    assert_eq!(lead(WType::Iq2S), 1);
    // Three narrow CTAs per SM for every type (no decoded tiles; Q8_0's 136-byte rows with a
    // lead of 1, IQ2_S's 4 KB grid with the longest; Q2_0's 512-value stages with their own
    // lead, 2 stages and 4 activation buffers in 54 KB).
    let narrow = |w| MmqPipeSmem::of(w, MmqPipeShape::Narrow);
    let per_sm = |w| 228 * 1024 / (narrow(w).total + 1024);
    for w in WType::ALL {
        assert!(per_sm(w) >= 3, "{w:?}: {:?}", narrow(w));
        assert!(narrow(w).lead >= 1, "{w:?}");
    }
    let q2 = narrow(WType::Q2_0);
    assert_eq!((q2.lead, q2.nw, q2.na), (MMQ_LONG_STAGE_LEAD, 2, 4));
    assert_eq!(q2.slot, 176);
    assert!(q2.total <= 54 * 1024, "{q2:?}");
    assert_eq!(narrow(WType::Iq2Xxs).lead, MMQ_PIPE_MAX_LEAD);
    assert_eq!(narrow(WType::Iq2S).lead, MMQ_PIPE_MAX_LEAD);
}

#[test]
fn stages_hold_whole_blocks() {
    for shape in SHAPES {
        for w in WType::ALL {
            let steps = shape.stage_steps(w);
            // Whole blocks, at least the type's own stage, and 16-byte windows around them.
            assert_eq!((steps * MMQ_KSTEP) % w.block_values(), 0, "{w:?} {shape:?}");
            assert!(steps >= fused_sub_steps(w) && steps.is_multiple_of(fused_sub_steps(w)));
            assert_eq!(
                shape.stage_row_bytes(w),
                steps * MmqPipeShape::step_row_bytes(w),
                "{w:?} {shape:?}"
            );
            assert!(shape.stage_window(w) >= shape.stage_row_bytes(w) + 15);
            assert!(shape.stage_window(w).is_multiple_of(16));
        }
    }
    // The narrow Q2_0 stage: 8 blocks, 144 bytes, 9 pieces: a row's offset in its window is
    // the same in every stage.
    assert_eq!(MmqPipeShape::Narrow.stage_steps(WType::Q2_0), 4);
    assert_eq!(MmqPipeShape::Narrow.stage_row_bytes(WType::Q2_0), 144);
    assert_eq!(MmqPipeShape::Wide.stage_steps(WType::Q2_0), 1);
    assert_eq!(MmqPipeShape::Narrow.stage_steps(WType::Iq3S), 2);
}

#[test]
fn shapes_cover_the_tile_with_eight_warps() {
    assert_eq!((MmqPipeShape::Wide.mt(), MmqPipeShape::Wide.nt()), (2, 4));
    assert_eq!((MmqPipeShape::Flat.mt(), MmqPipeShape::Flat.nt()), (2, 4));
    assert_eq!(
        (MmqPipeShape::Narrow.mt(), MmqPipeShape::Narrow.nt()),
        (1, 2)
    );
    assert_eq!((MmqPipeShape::Tall.mt(), MmqPipeShape::Tall.nt()), (1, 8));
    assert_eq!(MmqPipeShape::Tall.cols(), MmqPipeShape::Wide.cols());
    for shape in SHAPES {
        let wn = 8 / shape.warps_m();
        assert_eq!(shape.warps_m() * 16 * shape.mt(), shape.rows());
        // The SwiGLU epilogue writes whole 32-value groups of a D4 block, at most half of it
        // (its staging rows hold MMQ_SWIGLU_FEATURES).
        let f = shape.swiglu_features();
        assert!(f.is_multiple_of(32) && MMQ_KSTEP.is_multiple_of(f) && f <= MMQ_SWIGLU_FEATURES);
        assert_eq!(wn * 8 * shape.nt(), shape.cols());
        // A warp's fragments fill the eight accumulator slots, each once, the wide shape's as
        // `[mt][nt]`.
        let mut seen = [[false; 4]; 2];
        for mt in 0..shape.mt() {
            for nt in 0..shape.nt() {
                let (a, b) = shape.acc_slot(mt, nt);
                assert!(!seen[a][b], "{shape:?}");
                assert_eq!(shape.slot_frag(a, b), (mt, nt), "{shape:?}");
                seen[a][b] = true;
                if matches!(shape, MmqPipeShape::Wide | MmqPipeShape::Flat) {
                    assert_eq!((a, b), (mt, nt));
                }
            }
        }
        // A slot no fragment uses names a fragment out of the warp's bounds (store skips it).
        for (a, row) in seen.iter().enumerate() {
            for (b, &used) in row.iter().enumerate() {
                let (mt, nt) = shape.slot_frag(a, b);
                assert_eq!(
                    used,
                    mt < shape.mt() && nt < shape.nt(),
                    "{shape:?} {a} {b}"
                );
            }
        }
    }
}

#[test]
fn scale_slots_are_permutations() {
    for shape in SHAPES {
        let (mt, nt) = (shape.mt(), shape.nt());
        let mut rows = [false; MMQ_ROWS];
        for r in 0..shape.rows() {
            let s = shape.row_slot(r);
            assert!(!rows[s]);
            rows[s] = true;
            // A lane's rows (m, h) sit side by side.
            let (wm, m, h, g) = (r / (16 * mt), (r / 16) % mt, (r / 8) % 2, r % 8);
            assert_eq!(s, 16 * mt * wm + 2 * mt * g + 2 * m + h);
        }
        let mut cols = [false; MMQ_FLAT_COLS];
        for c in 0..shape.cols() {
            let s = shape.col_slot(c);
            assert!(s < shape.cols() && !cols[s]);
            cols[s] = true;
            let (wn, n, t, j) = (c / (8 * nt), (c / 8) % nt, (c / 2) % 4, c % 2);
            assert_eq!(s, 8 * nt * wn + 2 * nt * t + 2 * n + j);
        }
    }
    // The wide shape's slots as they were written before the narrow shape.
    for r in 0..MMQ_ROWS {
        let (wm, mt, h, g) = (r / 32, (r / 16) % 2, (r / 8) % 2, r % 8);
        assert_eq!(MmqPipeShape::Wide.row_slot(r), 32 * wm + 4 * g + 2 * mt + h);
    }
}

#[test]
fn warp_specialized_flat_fits_two_ctas_an_sm() {
    // Shared memory: the flat layout and the four barriers in the wide budget (two CTAs an SM).
    for w in WType::ALL {
        let sm = MmqPipeSmem::of(w, MmqPipeShape::Flat);
        assert!(sm.ws_bars() >= sm.total && sm.ws_bars().is_multiple_of(MMQ_PIPE_BAR_BYTES));
        assert!(
            sm.ws_total() <= MMQ_PIPE_SMEM_BUDGET,
            "{w:?}: {}",
            sm.ws_total()
        );
    }
    // Registers: two CTAs of the consumers and the producer warps at the cap, allocated 8 at a
    // time, and no 8 more would fit.
    let cap = MMQ_WS_MAX_REGISTERS as usize;
    assert!(cap.is_multiple_of(8) && 2 * MMQ_WS_THREADS * cap <= SM_REGISTERS);
    assert!(2 * MMQ_WS_THREADS * (cap + 8) > SM_REGISTERS);
    assert_eq!(MMQ_WS_THREADS, MMQ_THREADS + 32 * MMQ_WS_PRODUCER_WARPS);
}
