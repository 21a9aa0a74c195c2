//! The Q2_0 shared-d numerics (opt-in: `Numerics::Q2_0SharedD`) on the fused kernels
//! (`moe_experts_<gate_up>_fused_sd`, `_fused_wide_sd`): every stage's bytes equal the
//! reference's computed in that variant, on the sm_90 module and on the sm_75 (Turing port) and
//! sm_80 ones; the MMQ and weight-stationary paths refuse the variant.

use gpu::layout::WType;
use host::device::Gpu;
use host::moe::expert::fused::FusedPlan;
use host::moe::expert::split::{Product, SplitOptions};
use host::moe::layer::DeviceLayer;
use host::moe::path::{self, ExpertPath, PathChoice};
use host::moe::prefill::Prefill;
use host::problem::{MoeShape, Numerics};
use host::synth::{self, Popularity, SyntheticLayer};
use tests::*;

use super::common::*;

/// `s` in the Q2_0 shared-d numerics.
fn shared_d(s: MoeShape) -> MoeShape {
    s.with_numerics(Numerics::Q2_0SharedD)
}

/// The pipelines that run the variant: the fused path, the fused path prefetching its weights
/// into the L2, and auto (whose one choice is then the fused path). The MMQ and
/// weight-stationary paths, and split plans of their products, are refused with the reason.
fn shared_d_pipelines(gpu: &Gpu, s: &MoeShape, cap: usize) -> Vec<Prefill> {
    assert!(s.shared_d_any());
    for p in [ExpertPath::Mmq, ExpertPath::Ws] {
        let e = Prefill::new(gpu, s, cap, p).err().expect("refused");
        assert!(e.to_string().contains("fused path only"), "{e}");
    }
    for products in [[Product::Mmq; 2], [Product::Ws; 2]] {
        let o = SplitOptions::default();
        let e = path::split_plan(gpu, s, cap * s.top_k, products, o).err();
        let e = e.expect("a split plan refuses the variant").to_string();
        assert!(e.contains("fused path only"), "{e}");
    }
    let mut plan = FusedPlan::new(gpu, s, cap * s.top_k).expect("fused plan");
    plan.set_prefetch(true);
    let pfs = vec![
        Prefill::new(gpu, s, cap, ExpertPath::Fused).expect("fused pipeline"),
        Prefill::with_plan(gpu, s, cap, Box::new(plan)).expect("prefetching pipeline"),
        Prefill::new(gpu, s, cap, PathChoice::Auto).expect("auto pipeline"),
    ];
    for pf in &pfs {
        assert_eq!(pf.path(), ExpertPath::Fused);
        assert!(
            pf.describe().contains("the q2_0-shared-d numerics"),
            "{}",
            pf.describe()
        );
    }
    pfs
}

/// The pairs with a Q2_0 product: both, gate/up only (each down type), down only (behind a
/// 32- and a 16-scale gate/up type), on the small layer at T = 1, 37, 512, 4113 (32- and
/// 64-row tiles), uniform and skewed routing, on each module with tensor cores.
#[test]
#[ignore = "needs a CUDA GPU"]
fn shared_d_small_layer_on_every_module() {
    let sd = seed("shared_d_small_layer_on_every_module");
    for arch in [None, Some(75), Some(80)] {
        let gpu = Gpu::open_with(arch).expect("GPU with the chosen PTX");
        for (i, (g, d)) in [
            (WType::Q2_0, WType::Q2_0),
            (WType::Q2_0, WType::Iq4Nl),
            (WType::Q2_0, WType::Q8_0),
            (WType::Iq2Xxs, WType::Q2_0),
            (WType::Iq2S, WType::Q2_0),
        ]
        .into_iter()
        .enumerate()
        {
            let s = shared_d(small(g, d, 4));
            let merged = i % 2 == 1;
            let layer = SyntheticLayer::new(s, merged, sd ^ i as u64).expect("layer");
            let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
            let mut pfs = shared_d_pipelines(&gpu, &s, 4113);
            for pop in [Popularity::Uniform, Popularity::Skewed { sigma: 1.0 }] {
                for t in [1, 37, 512, 4113] {
                    let r = synth::routing(t, s.n_experts, s.top_k, pop, sd ^ t as u64);
                    let label = format!(
                        "shared-d sm_{} {}/{} {pop:?} T={t}",
                        gpu.info.ptx_arch,
                        g.name(),
                        d.name()
                    );
                    check(&gpu, &label, &layer, &dev, &mut pfs, &r, sd ^ 5 ^ t as u64);
                }
            }
        }
    }
}

/// The reference shape (Q2_0 / Q2_0, and IQ2_XXS / Q2_0) at T = 37 and 512, and experts with
/// 0, 1, 31, 32, 33, 63, 64, 65 rows (the tiles' edges) at top-k 1 on the small layer and 10 at
/// the reference shape, on the default module.
#[test]
#[ignore = "needs a CUDA GPU"]
fn shared_d_reference_shape_and_tile_edges() {
    let gpu = gpu();
    let sd = seed("shared_d_reference_shape_and_tile_edges");
    for (g, d) in [(WType::Q2_0, WType::Q2_0), (WType::Iq2Xxs, WType::Q2_0)] {
        let s = shared_d(MoeShape {
            gate_up_type: g,
            down_type: d,
            ..MoeShape::REFERENCE
        });
        let layer = SyntheticLayer::new(s, false, sd).expect("layer");
        let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
        let mut pfs = shared_d_pipelines(&gpu, &s, 512);
        for t in [37, 512] {
            let r = synth::routing(t, s.n_experts, s.top_k, Popularity::Uniform, sd ^ t as u64);
            let label = format!("shared-d reference shape {}/{} T={t}", g.name(), d.name());
            check(&gpu, &label, &layer, &dev, &mut pfs, &r, sd ^ 7 ^ t as u64);
        }
    }
    let counts = [0usize, 1, 31, 32, 33, 63, 64, 65];
    for (s, merged) in [
        (shared_d(small(WType::Q2_0, WType::Q2_0, 1)), true),
        (shared_d(MoeShape::REFERENCE), false),
    ] {
        let k = s.top_k;
        let r = routing_with_counts(&counts, k, s.n_experts);
        let layer = SyntheticLayer::new(s, merged, sd ^ k as u64).expect("layer");
        let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
        let mut pfs = shared_d_pipelines(&gpu, &s, r.n_tokens);
        let label = format!("shared-d row counts {counts:?} top-{k}");
        check(&gpu, &label, &layer, &dev, &mut pfs, &r, sd ^ 11);
    }
}
