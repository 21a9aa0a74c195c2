//! The weight-stationary products on their own terms: each tier (16, 32, 64 rows per CTA)
//! forced, WS_FAST, and either product beside MMQ, on four routings (uniform, lognormal sigma
//! 0.5 and 1.0, every expert the same row count) - GU, H and Dm equal to the reference's bytes,
//! so to the MMQ path's. The regular pipelines (common.rs) run the path with its own tier choice.

use super::common::*;
use gpu::layout::{WS_COLS, WS_FAST_COLS, WType};
use host::device::Gpu;
use host::moe::expert::split::{Product, SplitOptions};
use host::moe::expert::ws::WsOptions;
use host::moe::layer::DeviceLayer;
use host::moe::prefill::Prefill;
use host::problem::{MoeShape, Routing};
use host::synth::{self, Popularity, SyntheticLayer};
use tests::*;
use tests::{DOWN_TYPES as DOWN, GATE_UP_TYPES as GATE_UP};

/// Every tier forced, WS_FAST (16- and 32-row tiers), and the two mixes with MMQ.
fn ws_pipelines(gpu: &Gpu, s: &MoeShape, cap: usize) -> Vec<Prefill> {
    let mut pfs: Vec<Prefill> = (0..WS_COLS.len())
        .map(|tier| {
            let o = WsOptions {
                fast: false,
                tier: Some(tier),
            };
            split_pipeline(gpu, s, cap, [Product::Ws; 2], ws_only(o))
        })
        .collect();
    for &cols in &WS_FAST_COLS {
        let fast = WsOptions {
            fast: true,
            tier: WS_COLS.iter().position(|&c| c == cols),
        };
        pfs.push(split_pipeline(gpu, s, cap, [Product::Ws; 2], ws_only(fast)));
    }
    for mix in [[Product::Ws, Product::Mmq], [Product::Mmq, Product::Ws]] {
        pfs.push(split_pipeline(gpu, s, cap, mix, SplitOptions::default()));
    }
    pfs
}

fn ws_only(ws: WsOptions) -> SplitOptions {
    SplitOptions {
        ws,
        ..SplitOptions::default()
    }
}

fn routings(s: &MoeShape, t: usize, sd: u64) -> Vec<(String, Routing)> {
    [
        Popularity::Uniform,
        Popularity::Skewed { sigma: 0.5 },
        Popularity::Skewed { sigma: 1.0 },
        Popularity::Flat,
    ]
    .into_iter()
    .map(|pop| {
        (
            format!("{pop:?}"),
            synth::routing(t, s.n_experts, s.top_k, pop, sd ^ t as u64),
        )
    })
    .collect()
}

/// All 18 pairs on the small layer at T = 1, 37, 512, 4113 (and 128: 32 rows per expert), four
/// routings, every tier, WS_FAST and the mixes.
#[test]
#[ignore = "needs a CUDA GPU"]
fn ws_tiers_fast_and_mixes_small() {
    let gpu = gpu();
    let sd = seed("ws_tiers_fast_and_mixes_small");
    for (i, g) in GATE_UP.into_iter().enumerate() {
        for d in DOWN {
            let s = small(g, d, 4);
            let merged = i % 2 == 0;
            let layer = SyntheticLayer::new(s, merged, sd ^ (g.id() as u64 * 31 + d.id() as u64))
                .expect("layer");
            let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
            let mut pfs = ws_pipelines(&gpu, &s, 4113);
            for t in [1, 37, 128, 512, 4113] {
                for (name, r) in routings(&s, t, sd) {
                    let label = format!("ws small {}/{} {name} T={t}", g.name(), d.name());
                    check(&gpu, &label, &layer, &dev, &mut pfs, &r, sd ^ 11 ^ t as u64);
                }
            }
        }
    }
}

/// The reference shape for three pairs at T = 37 and 512 under the four routings, and 1638
/// flat (32 rows per expert).
#[test]
#[ignore = "needs a CUDA GPU"]
fn ws_tiers_fast_and_mixes_reference_shape() {
    let gpu = gpu();
    let sd = seed("ws_tiers_fast_and_mixes_reference_shape");
    for (g, d) in [
        (WType::Q2_0, WType::Q2_0),
        (WType::Iq2Xxs, WType::Q8_0),
        (WType::Iq3S, WType::Iq4Nl),
    ] {
        let s = MoeShape {
            gate_up_type: g,
            down_type: d,
            ..MoeShape::REFERENCE
        };
        let layer = SyntheticLayer::new(s, false, sd ^ g.id() as u64).expect("layer");
        let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
        let mut pfs = ws_pipelines(&gpu, &s, 1638);
        for t in [37, 512, 1638] {
            // At 1638 tokens only the flat routing (32 rows per expert: full 32-row tiles); the
            // CPU reference of the others would double the test's time for no new tile shape.
            let rs = routings(&s, t, sd)
                .into_iter()
                .filter(|(name, _)| t < 1638 || name == "Flat");
            for (name, r) in rs {
                let label = format!("ws reference {}/{} {name} T={t}", g.name(), d.name());
                check(&gpu, &label, &layer, &dev, &mut pfs, &r, sd ^ 13 ^ t as u64);
            }
        }
    }
}
