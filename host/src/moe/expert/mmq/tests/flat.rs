//! Where each product takes flat tiles under `MmqChoice::Auto` (mmq/bounds.rs's `flat_pays`),
//! with the tails in the flat tiles and on the wide kernel, and when forced.

use super::*;
use gpu::layout::{MMQ_FLAT_COLS, MMQ_FLAT_ROWS};

#[test]
fn flat_tiles_from_their_bound_of_rows_per_expert_or_forced() {
    let d = dev(227 * 1024);
    let e = 512;
    let f = MmqKernel::flat(WType::Q2_0, &d).unwrap();
    assert_eq!((f.cols(), f.rows()), (MMQ_FLAT_COLS, MMQ_FLAT_ROWS));
    let w = MmqKernel::choose(WType::Q2_0, &d, MmqChoice::Auto);
    let auto = MmqKernels::new([WType::Q2_0; 2], LONG, &d, MmqChoice::Auto, false);
    let at = FLAT_MIN_ROWS_PER_EXPERT * e;
    // The types by their 64-column kernel: decoded through shared tiles (wide) or into
    // registers (tall).
    let shared_tiles = WType::ALL
        .into_iter()
        .filter(|&t| MmqPipeShape::wide_of(t) == MmqPipeShape::Wide);
    let tall: Vec<WType> = WType::ALL
        .into_iter()
        .filter(|&t| MmqPipeShape::wide_of(t) == MmqPipeShape::Tall)
        .collect();
    assert_eq!((shared_tiles.clone().count(), tall.len()), (5, 3));
    assert_eq!(auto.for_run(at - 1, e), [w, w]);
    assert_eq!(auto.for_run(at, e), [f, f]);
    // The measured points (rows per expert) of the types that decode through shared tiles:
    // wide where either routing was slower with flat tiles (55 to 160: uniform or skewed; 280:
    // a nearly empty last tile), flat where both gained (200, 240, 320); whole 128-column tiles.
    for (r, flat) in [
        (55, false),
        (80, false),
        (120, false),
        (160, false),
        (191, false),
        (192, true),
        (200, true),
        (240, true),
        (280, false),
        (320, true),
        (384, true),
    ] {
        for t in shared_tiles.clone() {
            for which in [0, 1] {
                assert_eq!(flat_pays(t, which, r * e, e, false), flat, "{t:?} {r}");
            }
        }
        assert_eq!(
            auto.for_run(r * e, e),
            if flat { [f, f] } else { [w, w] },
            "{r}"
        );
    }
    // The tall types (their 64-column kernel decodes into registers): 90 tall, 100 and more
    // flat, whatever the last tile's fill.
    for t in tall {
        assert!(!flat_pays(t, 0, 90 * e, e, false), "{t:?}");
        assert!(
            !flat_pays(t, 1, (FLAT_MIN_ROWS_TALL - 1) * e, e, false),
            "{t:?}"
        );
        for r in [FLAT_MIN_ROWS_TALL, 120, 160, 280, 320] {
            assert!(flat_pays(t, 0, r * e, e, false), "{t:?} {r}");
        }
    }
    // Each product by its own type: at 160 rows per expert IQ3_S's gate/up takes flat tiles,
    // IQ4_NL's down its wide ones; at 240 both flat; at 80 both their 64-column kernels.
    let mixed = MmqKernels::new(
        [WType::Iq3S, WType::Iq4Nl],
        LONG,
        &d,
        MmqChoice::Auto,
        false,
    );
    let (w3, f3) = (
        MmqKernel::choose(WType::Iq3S, &d, MmqChoice::Auto),
        MmqKernel::flat(WType::Iq3S, &d).unwrap(),
    );
    let (w4, f4) = (
        MmqKernel::choose(WType::Iq4Nl, &d, MmqChoice::Auto),
        MmqKernel::flat(WType::Iq4Nl, &d).unwrap(),
    );
    assert_eq!(mixed.for_run(160 * e, e), [f3, w4]);
    assert_eq!(mixed.for_run(240 * e, e), [f3, f4]);
    assert_eq!(mixed.for_run(80 * e, e), [w3, w4]);
    // Forced: flat at any row count; the other choices never take it.
    let forced = MmqKernels::new([WType::Q2_0; 2], LONG, &d, MmqChoice::Flat, false);
    assert_eq!(forced.for_run(1, e), [f, f]);
    for c in [
        MmqChoice::Classic,
        MmqChoice::Pipelined,
        MmqChoice::Narrow,
        MmqChoice::NarrowStreamed,
    ] {
        let k = MmqKernels::new([WType::Q2_0; 2], LONG, &d, c, false);
        assert!(k.all().flatten().all(|k| k != f), "{c:?}");
    }
    assert_eq!(MmqChoice::parse("flat").unwrap(), MmqChoice::Flat);
}

#[test]
fn flat_tiles_with_tails_from_each_products_bound() {
    let d = dev(227 * 1024);
    let e = 512;
    let [gu, dn] = FLAT_TAILS_MIN_ROWS;
    assert!(gu <= dn, "the measured bounds: gate/up 60, down 80");
    // Above every narrow bound, so that the narrow kernels keep their row counts.
    assert!(gu > gate_up_narrow_max_rows(WType::Q2_0, true));
    assert!(dn > NARROW_RESIDENT_MAX_ROWS_PER_EXPERT);
    for types in [
        [WType::Q2_0, WType::Q2_0],
        [WType::Iq2S, WType::Iq4Nl],
        [WType::Iq3S, WType::Iq4Nl],
        [WType::Q8_0, WType::Q8_0],
    ] {
        let mut k = MmqKernels::new(types, REF, &d, MmqChoice::Auto, false);
        let wide = types.map(|w| MmqKernel::choose(w, &d, MmqChoice::Auto));
        let flat = types.map(|w| MmqKernel::flat(w, &d).unwrap());
        // At 160 and 280 rows per expert (last tiles of 32 and 24 columns) the types that
        // decode through shared tiles take their wide kernel without the tails on it.
        let shared_tiles = types
            .iter()
            .any(|&w| MmqPipeShape::wide_of(w) == MmqPipeShape::Wide);
        for r in [160, 280] {
            assert_eq!(k.for_run(r * e, e) != flat, shared_tiles, "{types:?} {r}");
        }
        k.set_tails(MmqTails::Wide);
        assert!(k.tails());
        assert_eq!(k.for_run(gu * e - 1, e), wide, "{types:?}");
        assert_eq!(k.for_run(gu * e, e), [flat[0], wide[1]], "{types:?}");
        assert_eq!(k.for_run(dn * e - 1, e), [flat[0], wide[1]], "{types:?}");
        // With them, flat whatever the last tile's fill.
        for r in [dn, 160, 200, 280, 320] {
            assert_eq!(k.for_run(r * e, e), flat, "{types:?} {r}");
        }
        for which in [0, 1] {
            for w in types {
                assert!(!flat_pays(
                    w,
                    which,
                    (FLAT_TAILS_MIN_ROWS[which] - 1) * e,
                    e,
                    true
                ));
                assert!(flat_pays(w, which, FLAT_TAILS_MIN_ROWS[which] * e, e, true));
            }
        }
    }
}

#[test]
fn no_tails_where_a_wide_kernel_is_the_classic_one() {
    // Forced classic: the wide kernels are the classic ones, which have no SwiGLU epilogue.
    let d = dev(227 * 1024);
    let mut k = MmqKernels::new([WType::Q2_0; 2], REF, &d, MmqChoice::Classic, false);
    k.set_tails(MmqTails::Wide);
    assert!(!k.tails());
    let mut k = MmqKernels::new([WType::Q2_0; 2], REF, &d, MmqChoice::Auto, false);
    k.set_tails(MmqTails::Off);
    assert!(!k.tails());
}
