//! A whole MoE layer's prefill on the GPU against the CPU reference, stage by stage, on every
//! eligible expert path (per-group MMQ, fused): row order, quantized activations, gate/up
//! product and swiglu_quant (where the path writes them to global memory), down product and
//! layer output must be byte-identical - so the paths equal each other too. Outputs are
//! poisoned before every run and the bytes past each stage's extent are checked untouched.

#[path = "prefill/auto.rs"]
mod auto;
#[path = "prefill/common.rs"]
mod common;
#[path = "prefill/reference_shape.rs"]
mod reference_shape;
#[path = "prefill/resident.rs"]
mod resident;
#[path = "prefill/scatter.rs"]
mod scatter;
#[path = "prefill/shared_d.rs"]
mod shared_d;
#[path = "prefill/tiles.rs"]
mod tiles;
#[path = "prefill/tma.rs"]
mod tma;
#[path = "prefill/ws.rs"]
mod ws;

use common::*;
use gpu::layout::WType;
use host::device::Gpu;
use host::moe::layer::DeviceLayer;
use host::moe::prefill::RoutingInput;
use host::problem::{MoeShape, Routing};
use host::reference::{self, route};
use host::synth::{self, Popularity, SyntheticLayer};
use tests::*;
use tests::{DOWN_TYPES as DOWN, GATE_UP_TYPES as GATE_UP};

/// All 18 format pairs on a small layer (16 experts, hidden 256, FFN 128, top-4): uniform and
/// skewed routing at T = 1, 37, 512, 4113, separate and merged gate/up tensors.
#[test]
#[ignore = "needs a CUDA GPU"]
fn small_layer_all_pairs() {
    let gpu = gpu();
    let sd = seed("small_layer_all_pairs");
    for (i, g) in GATE_UP.into_iter().enumerate() {
        for d in DOWN {
            let s = small(g, d, 4);
            let merged = i % 2 == 1;
            let layer = SyntheticLayer::new(s, merged, sd ^ (g.id() as u64 * 100 + d.id() as u64))
                .expect("layer");
            let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
            let mut pfs = pipelines(&gpu, &s, 4113 + 7);
            // The scatter runs as one kernel up to 2,048 rows here, and as the chain that
            // gathers its rows from its token buffer at T = 4113 (16,452 rows); the chain's
            // other form is in `scatter::scatter_forms_same_bytes`.
            let forms = host::moe::scatter::ScatterForms::default();
            assert!(forms.one_kernel(512 * 4) && forms.gathers(4113 * 4));
            for pop in [Popularity::Uniform, Popularity::Skewed { sigma: 1.0 }] {
                for t in [1, 37, 512, 4113] {
                    let r = synth::routing(t, s.n_experts, s.top_k, pop, sd ^ t as u64);
                    let label = format!(
                        "small {}/{} {} {pop:?} T={t}",
                        g.name(),
                        d.name(),
                        if merged { "merged" } else { "split" }
                    );
                    check(&gpu, &label, &layer, &dev, &mut pfs, &r, sd ^ 77 ^ t as u64);
                }
            }
        }
    }
}

/// Experts with no token, every token on the same experts, top-k 1 and 10.
#[test]
#[ignore = "needs a CUDA GPU"]
fn small_layer_routing_extremes() {
    let gpu = gpu();
    let sd = seed("small_layer_routing_extremes");
    for (g, d, k) in [
        (WType::Q2_0, WType::Q2_0, 1),
        (WType::Iq2Xs, WType::Iq4Nl, 10),
        (WType::Iq3S, WType::Q8_0, 10),
    ] {
        let s = small(g, d, k);
        let layer = SyntheticLayer::new(s, false, sd).expect("layer");
        let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
        let mut pfs = pipelines(&gpu, &s, 700);
        // all tokens on experts 3..3+k (same set, rotated slots)
        let t = 700;
        let ids: Vec<u32> = (0..t)
            .flat_map(|i| (0..k).map(move |j| (3 + (i + j) % k) as u32))
            .collect();
        let weights: Vec<f32> = (0..t * k).map(|i| 1.0 / (1 + i % 7) as f32).collect();
        let r = Routing {
            n_tokens: t,
            top_k: k,
            ids,
            weights,
        };
        check(
            &gpu,
            &format!("same experts top-{k} {}/{}", g.name(), d.name()),
            &layer,
            &dev,
            &mut pfs,
            &r,
            sd ^ 1,
        );
        // top-k uniform over only some experts: the rest get no token
        let r = synth::routing(t, s.n_experts, k, Popularity::Skewed { sigma: 3.0 }, sd ^ 2);
        check(
            &gpu,
            &format!("skewed 3.0 top-{k} {}/{}", g.name(), d.name()),
            &layer,
            &dev,
            &mut pfs,
            &r,
            sd ^ 3,
        );
        // no tokens at all
        let r = Routing {
            n_tokens: 0,
            top_k: k,
            ids: vec![],
            weights: vec![],
        };
        check(
            &gpu,
            &format!("zero tokens {}/{}", g.name(), d.name()),
            &layer,
            &dev,
            &mut pfs,
            &r,
            sd ^ 4,
        );
    }
}

/// The same inputs give the same bytes on two runs (the second without the events between
/// stages, which leave the layer's time and no stage times).
#[test]
#[ignore = "needs a CUDA GPU"]
fn two_runs_same_bytes() {
    let gpu = gpu();
    let s = MoeShape {
        gate_up_type: WType::Iq2Xs,
        down_type: WType::Iq4Nl,
        ..MoeShape::REFERENCE
    };
    let layer = SyntheticLayer::new(s, true, 9).expect("layer");
    let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
    let mut pfs = pipelines(&gpu, &s, 2048);
    let r = synth::routing(
        2048,
        s.n_experts,
        s.top_k,
        Popularity::Skewed { sigma: 1.0 },
        10,
    );
    let dx = gpu
        .upload(&host::synth::normal_f32(11, 2048 * s.hidden, 1.0))
        .expect("upload");
    let mut outs = Vec::new();
    for pf in pfs.iter_mut() {
        // The second run without the events between stages (the CLI's bare layer time).
        for staged in [true, false] {
            pf.set_stage_events(staged);
            pf.poison(&gpu, POISON).expect("poison");
            let st = pf
                .run(&gpu, &dev, &dx, 2048, RoutingInput::Given(&r))
                .expect("run");
            assert!(st.total > 0.0, "a layer's time");
            assert_eq!(st.names.len(), if staged { st.ms.len() } else { 0 });
            assert_eq!(st.ms.is_empty(), !staged);
            outs.push(pf.output(&gpu).expect("download"));
        }
    }
    assert!(outs.len() >= 4, "both paths ran");
    for (i, o) in outs.iter().enumerate().skip(1) {
        assert_bytes_eq(
            &format!("run 1 vs run {} (two per path)", i + 1),
            f32_bytes(&outs[0]),
            f32_bytes(o),
            |i| format!("value {}", i / 4),
        );
    }
}

/// `moe_route` from logits equals the reference routing (ids and weight bytes), with ties in
/// the logits, with and without normalisation and scale; then the routed layer equals the
/// reference end to end.
#[test]
#[ignore = "needs a CUDA GPU"]
fn route_from_logits() {
    let gpu = gpu();
    let sd = seed("route_from_logits");
    let s = small(WType::Iq2Xxs, WType::Q2_0, 6);
    for (e, k, norm, scale, t) in [
        (512, 10, true, 1.0, 4113),
        (512, 10, false, 2.5, 600),
        (16, 6, true, 0.0, 1000),
        (100, 1, false, 1.0, 37),
    ] {
        let mut logits = host::synth::normal_f32(sd ^ e as u64, t * e, 2.0);
        // ties: round half of the tokens' logits to quarters
        for (i, l) in logits.iter_mut().enumerate() {
            if (i / e) % 2 == 0 {
                *l = (*l * 4.0).round() / 4.0;
            }
        }
        let rule = host::problem::RouteRule {
            n_experts: e,
            top_k: k,
            norm,
            scale,
        };
        let want = route::route(&logits, t, &rule);
        let dl = gpu.upload(&logits).expect("upload");
        let mut ids = gpu.alloc_filled::<u32>(t * k + 64, POISON).expect("alloc");
        let mut w = gpu.alloc_filled::<f32>(t * k + 64, POISON).expect("alloc");
        host::moe::route::launch(&gpu, &rule, t, &dl, &mut ids, &mut w).expect("route");
        gpu.sync().expect("sync");
        let gi = gpu.download(&ids).expect("download");
        let gw = gpu.download(&w).expect("download");
        assert_eq!(&gi[..t * k], &want.ids[..], "E={e} top-{k}: ids");
        assert!(
            gi[t * k..]
                .iter()
                .all(|&v| v == u32::from_ne_bytes([POISON; 4])),
            "ids written past the end"
        );
        assert_bytes_eq(
            &format!("E={e} top-{k} weights"),
            f32_bytes(&gw[..t * k]),
            f32_bytes(&want.weights),
            |i| format!("token {} slot {}", i / 4 / k, i / 4 % k),
        );
    }
    // Routed by the GPU from logits, end to end.
    let layer = SyntheticLayer::new(s, false, sd).expect("layer");
    let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
    let t = 999;
    let logits = host::synth::normal_f32(sd ^ 3, t * s.n_experts, 1.0);
    let rule = host::problem::RouteRule {
        n_experts: s.n_experts,
        top_k: s.top_k,
        norm: true,
        scale: 1.0,
    };
    let r = route::route(&logits, t, &rule);
    let x = host::synth::normal_f32(sd ^ 4, t * s.hidden, 1.0);
    let want = reference::prefill(&x, &r, &layer.weights(), &s);
    let mut pfs = pipelines(&gpu, &s, t);
    let (dl, dx) = (
        gpu.upload(&logits).expect("upload"),
        gpu.upload(&x).expect("upload"),
    );
    for pf in pfs.iter_mut() {
        pf.poison(&gpu, POISON).expect("poison");
        pf.run(&gpu, &dev, &dx, t, RoutingInput::Logits(&dl, rule))
            .expect("run");
        let got = pf.output(&gpu).expect("download");
        assert_bytes_eq(
            &format!("routed from logits [{}]: output", pf.path().name()),
            f32_bytes(&got),
            f32_bytes(&want.out),
            |i| format!("value {}", i / 4),
        );
    }
}

/// The older PTX targets on this GPU: the sm_60 module (weight-stationary path only, integer
/// arithmetic), the sm_75 module running every product as `m8n8k16` (the Turing port), the
/// sm_80 module as `m16n8k32`; all give the reference's bytes.
#[test]
#[ignore = "needs a CUDA GPU"]
fn older_ptx_targets() {
    let sd = seed("older_ptx_targets");
    for arch in [60, 75, 80] {
        let gpu = Gpu::open_with(Some(arch)).expect("GPU with the chosen PTX");
        assert_eq!(gpu.info.ptx_arch, arch);
        for (g, d) in [
            (WType::Q2_0, WType::Q8_0),
            (WType::Iq2Xs, WType::Iq4Nl),
            (WType::Iq3Xxs, WType::Q2_0),
        ] {
            let s = small(g, d, 4);
            let layer = SyntheticLayer::new(s, false, sd ^ arch as u64).expect("layer");
            let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
            let mut pfs = pipelines(&gpu, &s, 999);
            let r = synth::routing(
                999,
                s.n_experts,
                s.top_k,
                Popularity::Skewed { sigma: 1.0 },
                sd,
            );
            check(
                &gpu,
                &format!("sm_{arch} {}/{}", g.name(), d.name()),
                &layer,
                &dev,
                &mut pfs,
                &r,
                sd ^ 3,
            );
        }
    }
}

/// Experts with 0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 192 and 193 rows (tile
/// edges of every path and MMQ shape, and of the flat tiles' tails), top-k 1 and 10, on the
/// small layer and at the reference shape.
#[test]
#[ignore = "needs a CUDA GPU"]
fn expert_row_counts_at_tile_edges() {
    let gpu = gpu();
    let sd = seed("expert_row_counts_at_tile_edges");
    let counts = [
        0usize, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 192, 193,
    ];
    for (s, merged) in [
        (small(WType::Iq2S, WType::Q8_0, 1), true),
        (
            MoeShape {
                top_k: 10,
                gate_up_type: WType::Q2_0,
                down_type: WType::Iq4Nl,
                ..MoeShape::REFERENCE
            },
            false,
        ),
    ] {
        let k = s.top_k;
        let r = routing_with_counts(&counts, k, s.n_experts);
        let t = r.n_tokens;
        let layer = SyntheticLayer::new(s, merged, sd).expect("layer");
        let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
        let mut pfs = pipelines(&gpu, &s, t);
        assert_eq!(
            pfs.len(),
            24,
            "mmq, fused, ws, ws fast, fused prefetching, mmq on its classic kernel, on narrow \
             tiles (SwiGLU in the epilogue; in its own kernel, resident and streamed, and \
             resident in the grid's CTA order), with SwiGLU in the gate/up epilogue (also on \
             64-column tiles in the grid's order, and by cp.async pieces) and in its own kernel, \
             on flat tiles (both, and warp specialized), their tails on the wide kernel (three), \
             with the weights evicted from the L2 first (three), and auto run this shape"
        );
        let label = format!(
            "row counts {counts:?} top-{k} {}/{}",
            s.gate_up_type.name(),
            s.down_type.name()
        );
        check(&gpu, &label, &layer, &dev, &mut pfs, &r, sd ^ 9);
    }
}
