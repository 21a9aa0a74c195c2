//! The MMQ kernel choice's tests (expert/mmq.rs): which kernel each product takes per device,
//! choice and row count, and where the narrow kernel runs in its resident form; the flat
//! kernel's bounds in tests/flat.rs.

use super::*;
use gpu::layout::{MMQ_ORDER_ROWS, MMQ_WEIGHT_L2_NORMAL};

mod flat;

fn dev(max_smem_optin: u32) -> DeviceLimits {
    DeviceLimits {
        max_smem_optin,
        ..DeviceLimits::default()
    }
}

/// K of both products where neither has a resident layout (the streamed bound applies).
const LONG: [usize; 2] = [2560, 2560];
/// The reference shape's K (gate/up, down).
const REF: [usize; 2] = [2560, 640];

#[test]
fn resident_products_take_narrow_tiles_up_to_their_bound() {
    let d = dev(227 * 1024);
    let q2 = [WType::Q2_0, WType::Q2_0];
    let (n, w) = (
        MmqKernel::narrow(WType::Q2_0, &d).unwrap(),
        MmqKernel::choose(WType::Q2_0, &d, MmqChoice::Auto),
    );
    let e = 512;
    let auto = MmqKernels::new(q2, REF, &d, MmqChoice::Auto, false);
    let at = |r: usize| r * e;
    let gate_up = gate_up_narrow_max_rows(WType::Q2_0, false);
    assert_eq!(auto.for_run(at(gate_up), e), [n, n]);
    // The down product (resident at K = 640) keeps narrow tiles up to its own bound.
    assert_eq!(auto.for_run(at(gate_up) + 1, e), [w, n]);
    assert_eq!(
        auto.for_run(at(NARROW_RESIDENT_MAX_ROWS_PER_EXPERT), e),
        [w, n]
    );
    assert_eq!(
        auto.for_run(at(NARROW_RESIDENT_MAX_ROWS_PER_EXPERT) + 1, e),
        [w, w]
    );
    // IQ4_NL's down product up to its own bound.
    let iq4 = MmqKernels::new([WType::Q2_0, WType::Iq4Nl], REF, &d, MmqChoice::Auto, false);
    let n4 = MmqKernel::narrow(WType::Iq4Nl, &d).unwrap();
    let w4 = MmqKernel::choose(WType::Iq4Nl, &d, MmqChoice::Auto);
    assert_eq!(iq4.for_run(at(NARROW_RESIDENT_MAX_ROWS_IQ4_NL), e), [w, n4]);
    assert_eq!(
        iq4.for_run(at(NARROW_RESIDENT_MAX_ROWS_IQ4_NL) + 1, e),
        [w, w4]
    );
    // Not where the form cannot run: streamed by choice, no bulk copies, no layout.
    let streamed = MmqKernels::new(q2, REF, &d, MmqChoice::NarrowStreamed, false);
    assert_eq!(streamed.for_run(at(100), e), [n, n]);
    let sm80 = DeviceLimits { ptx_arch: 80, ..d };
    let old = MmqKernels::new(q2, REF, &sm80, MmqChoice::Auto, false);
    assert_eq!(old.for_run(at(NARROW_MAX_ROWS_PER_EXPERT) + 1, e), [w, w]);
    let q8 = MmqKernels::new([WType::Q8_0; 2], REF, &d, MmqChoice::Auto, false);
    let w8 = MmqKernel::choose(WType::Q8_0, &d, MmqChoice::Auto);
    assert_eq!(q8.for_run(at(NARROW_MAX_ROWS_PER_EXPERT) + 1, e), [w8, w8]);
}

/// On sm_90 the gate/up product takes narrow tiles up to its type's own bound, by tensor copies
/// or by pieces; the down product and older modules keep theirs.
#[test]
fn gate_up_narrow_bounds_per_type() {
    let d = dev(227 * 1024);
    let e = 512;
    let at = |r: usize| r * e;
    for (w, tma, bound) in [
        (WType::Q2_0, true, 28),
        (WType::Q2_0, false, 20),
        (WType::Iq4Nl, true, 18),
        (WType::Iq2Xxs, false, 15),
        (WType::Iq3S, false, 13),
        (WType::Iq3Xxs, true, 12),
    ] {
        assert_eq!(gate_up_narrow_max_rows(w, tma), bound);
        let (n, wide) = (
            MmqKernel::narrow(w, &d).unwrap(),
            MmqKernel::choose(w, &d, MmqChoice::Auto),
        );
        let k = MmqKernels::new([w, w], LONG, &d, MmqChoice::Auto, tma);
        assert_eq!(k.for_run(at(bound), e)[0], n, "{w:?}");
        assert_eq!(k.for_run(at(bound) + 1, e)[0], wide, "{w:?}");
        // The down product (streamed here) at the streamed bound.
        let down = k.for_run(at(NARROW_MAX_ROWS_PER_EXPERT) + 1, e)[1];
        assert_eq!(down, wide, "{w:?}");
        // Without bulk copies (no tensor copies either): the streamed bound.
        let sm80 = DeviceLimits { ptx_arch: 80, ..d };
        let old = MmqKernels::new([w, w], LONG, &sm80, MmqChoice::Auto, tma);
        let old_wide = MmqKernel::choose(w, &sm80, MmqChoice::Auto);
        assert_eq!(
            old.for_run(at(NARROW_MAX_ROWS_PER_EXPERT) + 1, e)[0],
            old_wide,
            "{w:?}"
        );
    }
}

#[test]
fn pipelined_where_it_fits_unless_classic_is_forced() {
    let d = dev(227 * 1024);
    for w in WType::ALL {
        let smem = MmqPipeSmem::new(w).total;
        for c in [MmqChoice::Auto, MmqChoice::Pipelined] {
            assert_eq!(
                MmqKernel::choose(w, &d, c),
                MmqKernel::Pipe { smem },
                "{w:?}"
            );
        }
        assert_eq!(
            MmqKernel::choose(w, &d, MmqChoice::Classic),
            MmqKernel::Classic
        );
        // Too little shared memory for the pipelined layout: classic, whatever was asked.
        let small = dev(smem as u32 - 1);
        for c in MmqChoice::ALL {
            assert_eq!(MmqKernel::choose(w, &small, c), MmqKernel::Classic, "{w:?}");
        }
    }
    assert_eq!(MmqKernel::Classic.smem(), MMQ_SMEM_BYTES);
}

#[test]
fn narrow_tiles_at_few_rows_per_expert_unless_forced() {
    let d = dev(227 * 1024);
    let q2 = [WType::Q2_0, WType::Q2_0];
    let n = MmqKernel::narrow(WType::Q2_0, &d).unwrap();
    assert_eq!(n.cols(), MMQ_NARROW_COLS);
    let w = MmqKernel::choose(WType::Q2_0, &d, MmqChoice::Auto);
    // Every type takes the narrow kernel at few rows per expert, whatever its K.
    let auto = MmqKernels::new(q2, LONG, &d, MmqChoice::Auto, false);
    let e = 512;
    let at = NARROW_MAX_ROWS_PER_EXPERT * e;
    // The down product (streamed at this K) up to the streamed bound, the gate/up product
    // (sm_90) up to its type's.
    let gate_up = gate_up_narrow_max_rows(WType::Q2_0, false) * e;
    assert!(gate_up > at);
    assert_eq!(auto.for_run(at, e), [n, n]);
    assert_eq!(auto.for_run(at + 1, e), [n, w]);
    assert_eq!(auto.for_run(gate_up, e), [n, w]);
    assert_eq!(auto.for_run(gate_up + 1, e), [w, w]);
    // Wide, narrow, flat.
    assert_eq!(auto.all().count(), 3);
    for w in WType::ALL {
        let k = MmqKernels::new([w, w], LONG, &d, MmqChoice::Auto, false);
        // Every type's flat layout fits the H200.
        assert!(MmqKernel::flat(w, &d).is_some(), "{w:?}");
        assert_eq!(k.all().count(), 3, "{w:?}");
    }
    // IQ3_S's gate/up and IQ4_NL's down.
    let iq3 = [WType::Iq3S, WType::Iq4Nl];
    let (n3, w3) = (
        MmqKernel::narrow(WType::Iq3S, &d).unwrap(),
        MmqKernel::choose(WType::Iq3S, &d, MmqChoice::Auto),
    );
    let n4 = MmqKernel::narrow(WType::Iq4Nl, &d).unwrap();
    let w4 = MmqKernel::choose(WType::Iq4Nl, &d, MmqChoice::Auto);
    let mixed = MmqKernels::new(iq3, LONG, &d, MmqChoice::Auto, false);
    let gate_up3 = gate_up_narrow_max_rows(WType::Iq3S, false) * e;
    assert_eq!(mixed.for_run(at, e), [n3, n4]);
    assert_eq!(mixed.for_run(at + 1, e), [n3, w4]);
    assert_eq!(mixed.for_run(gate_up3, e), [n3, w4]);
    assert_eq!(mixed.for_run(gate_up3 + 1, e), [w3, w4]);
    let forced = MmqKernels::new(q2, LONG, &d, MmqChoice::Narrow, false);
    assert_eq!(forced.for_run(100 * e, e), [n, n]);
    for c in [MmqChoice::Pipelined, MmqChoice::Classic] {
        let k = MmqKernels::new(q2, LONG, &d, c, false);
        assert!(
            k.for_run(1, e).iter().all(|k| k.cols() == MMQ_COLS),
            "{c:?}"
        );
        assert_eq!(k.all().count(), 1, "{c:?}");
    }
    // A device whose shared memory holds no narrow layout: the classic kernel throughout.
    let small = dev(MMQ_SMEM_BYTES as u32);
    let k = MmqKernels::new(q2, LONG, &small, MmqChoice::Narrow, false);
    assert_eq!(k.for_run(1, e), [MmqKernel::Classic; 2]);
}

#[test]
fn resident_form_where_its_layout_and_the_rows_allow() {
    let d = DeviceLimits {
        ptx_arch: 90,
        ..dev(227 * 1024)
    };
    // The reference shape's down product: IQ4_NL rows of 360 bytes, K = 640.
    let down = MmqParams {
        w0: 1 << 20,
        w1: 0,
        w_expert_bytes: 2560 * 360,
        x: 0,
        tiles: 0,
        out: 0,
        out_rows: 0,
        wmap0: 0,
        wmap1: 0,
        row_bytes: 360,
        n_split: 2560,
        n: 2560,
        k: 640,
        n_cols_x: 5120,
        out_stride: 2560,
        resident: 0,
        order: MMQ_ORDER_ROWS,
        weight_l2: MMQ_WEIGHT_L2_NORMAL,
        _pad: 0,
    };
    let w = WType::Iq4Nl;
    let ks = |c| MmqKernels::new([WType::Q2_0, w], REF, &d, c, false);
    let n = MmqKernel::narrow(w, &d).unwrap();
    let auto = ks(MmqChoice::Auto);
    assert!(auto.resident(n, false, w, &down));
    assert!(ks(MmqChoice::Narrow).resident(n, false, w, &down));
    // Not with the SwiGLU epilogue, on another kernel, streamed by choice, below sm_90.
    assert!(!auto.resident(n, true, w, &down));
    let wide = MmqKernel::choose(w, &d, MmqChoice::Auto);
    assert!(!auto.resident(wide, false, w, &down));
    assert!(!auto.resident(MmqKernel::Classic, false, w, &down));
    assert!(!ks(MmqChoice::NarrowStreamed).resident(n, false, w, &down));
    let sm80 = DeviceLimits { ptx_arch: 80, ..d };
    assert!(
        !MmqKernels::new([WType::Q2_0, w], REF, &sm80, MmqChoice::Auto, false)
            .resident(n, false, w, &down)
    );
    // No layout: a K whose 128 rows and activations do not fit (the gate/up product's).
    let long = MmqParams {
        k: 2560,
        row_bytes: 1440,
        ..down
    };
    assert!(!auto.resident(n, false, w, &long));
    // Rows not 16-byte aligned, in the tensor or from expert to expert.
    assert!(!auto.resident(
        n,
        false,
        w,
        &MmqParams {
            w0: down.w0 + 8,
            ..down
        }
    ));
    let odd = MmqParams {
        w_expert_bytes: down.w_expert_bytes + 8,
        ..down
    };
    assert!(!auto.resident(n, false, w, &odd));
    // Separate gate and up tensors: tiles within one tensor, both aligned.
    let split = MmqParams {
        n_split: 1280,
        w1: 1 << 24,
        ..down
    };
    assert!(auto.resident(n, false, w, &split));
    assert!(!auto.resident(
        n,
        false,
        w,
        &MmqParams {
            n_split: 1216,
            ..split
        }
    ));
    assert!(!auto.resident(
        n,
        false,
        w,
        &MmqParams {
            w1: split.w1 + 2,
            ..split
        }
    ));
}

#[test]
fn choices_parse_by_name_and_refuse_others() {
    for c in MmqChoice::ALL {
        assert_eq!(MmqChoice::parse(c.name()).unwrap(), c);
    }
    let e = MmqChoice::parse("fast").unwrap_err().to_string();
    assert!(e.contains("unknown MMQ kernel `fast`"), "{e}");
}
