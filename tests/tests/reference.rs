//! The CPU reference of the whole expert path: self-checks and accuracy against the f64
//! reference (the MMQ numerics quantize activations to int8: about 1e-2 relative RMS).

use gpu::layout::WType;
use host::problem::{MoeShape, RowOrder};
use host::reference::{self, exact};
use host::synth::{self, Popularity, SyntheticLayer};
use tests::*;
use tests::{DOWN_TYPES as DOWN, GATE_UP_TYPES as GATE_UP};

fn small(gate_up_type: WType, down_type: WType) -> MoeShape {
    MoeShape {
        n_experts: 16,
        top_k: 4,
        hidden: 256,
        ffn: 128,
        gate_up_type,
        down_type,
    }
}

#[test]
fn row_order_is_expert_sorted_tokens_ascending() {
    let r = synth::routing(300, 16, 4, Popularity::Skewed { sigma: 1.0 }, 5);
    let o = RowOrder::from_routing(&r, 16);
    assert_eq!(o.expert_bounds[16] as usize, 1200);
    for e in 0..16 {
        let rows = o.rows_of(e);
        for c in rows.clone() {
            let (t, s) = (o.row_token[c] as usize, o.row_slot[c] as usize);
            assert_eq!(r.ids[t * 4 + s] as usize, e);
            if c > rows.start {
                assert!(o.row_token[c - 1] < o.row_token[c]);
            }
        }
    }
}

/// All 18 format pairs on a small layer: the MMQ-numerics output is close to the f64 one.
#[test]
fn accuracy_small_layer_all_pairs() {
    let sd = seed("accuracy_small_layer_all_pairs");
    for g in GATE_UP {
        for d in DOWN {
            let s = small(g, d);
            let layer = SyntheticLayer::new(s, g == WType::Iq2S, sd).expect("layer");
            let w = layer.weights();
            w.check(&s).expect("weights fit the shape");
            let r = synth::routing(64, s.n_experts, s.top_k, Popularity::Uniform, sd ^ 7);
            let x = host::synth::normal_f32(sd ^ 9, 64 * s.hidden, 1.0);
            let st = reference::prefill(&x, &r, &w, &s);
            let f = exact::prefill_f64(&x, &r, &w, &s);
            let e = exact::relative_rms(&st.out, &f);
            eprintln!("{} / {}: relative rms {e:.2e}", g.name(), d.name());
            assert!(
                e > 1e-4 && e < 5e-2,
                "{} / {}: relative rms {e}",
                g.name(),
                d.name()
            );
        }
    }
}

/// Two runs give the same bytes (the reference is the parity target: it must be deterministic
/// whatever the thread scheduling).
#[test]
fn reference_is_deterministic() {
    let s = small(WType::Iq2Xs, WType::Iq4Nl);
    let layer = SyntheticLayer::new(s, false, 3).expect("layer");
    let r = synth::routing(
        100,
        s.n_experts,
        s.top_k,
        Popularity::Skewed { sigma: 0.5 },
        4,
    );
    let x = host::synth::normal_f32(6, 100 * s.hidden, 1.0);
    let a = reference::prefill(&x, &r, &layer.weights(), &s);
    let b = reference::prefill(&x, &r, &layer.weights(), &s);
    assert_eq!(
        bytemuck::cast_slice::<_, u8>(&a.out),
        bytemuck::cast_slice::<_, u8>(&b.out)
    );
    assert_eq!(
        bytemuck::cast_slice::<_, u8>(&a.gu),
        bytemuck::cast_slice::<_, u8>(&b.gu)
    );
}

/// The accuracy figure of the README: reference shape, 512 tokens, canonical Q2_0 pack.
/// Heavy (about a minute on 2 cores): run with --ignored.
#[test]
#[ignore = "heavy: reference shape (run with --ignored)"]
fn accuracy_reference_shape_512_tokens() {
    let s = MoeShape::REFERENCE;
    let t0 = std::time::Instant::now();
    let layer = SyntheticLayer::new(s, false, 1).expect("layer");
    let r = synth::routing(512, s.n_experts, s.top_k, Popularity::Uniform, 2);
    let x = host::synth::normal_f32(3, 512 * s.hidden, 1.0);
    let t1 = std::time::Instant::now();
    let st = reference::prefill(&x, &r, &layer.weights(), &s);
    let t2 = std::time::Instant::now();
    let f = exact::prefill_f64(&x, &r, &layer.weights(), &s);
    let e = exact::relative_rms(&st.out, &f);
    eprintln!(
        "reference shape, T=512, q2_0/q2_0: relative rms {e:.3e} (setup {:.1} s, MMQ reference {:.1} s, f64 {:.1} s, {} threads)",
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        t2.elapsed().as_secs_f64(),
        host::par::threads()
    );
    assert!(e > 1e-3 && e < 5e-2, "relative rms {e}");
}
