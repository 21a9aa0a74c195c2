//! The reference shape (E = 512, top-10, hidden 2560, FFN 640) on every pipeline, as two tests
//! so that each fits one device command: all 18 pairs at few rows per expert, and the three
//! benchmarked pairs at many.

use super::common::*;
use gpu::layout::WType;
use host::device::Gpu;
use host::moe::layer::DeviceLayer;
use host::problem::MoeShape;
use host::synth::{self, Popularity, SyntheticLayer};
use tests::*;
use tests::{DOWN_TYPES as DOWN, GATE_UP_TYPES as GATE_UP};

/// The reference shape (E = 512, top-10, hidden 2560, FFN 640): all 18 pairs at T = 37 and 512,
/// uniform. (The many-rows runs are [`reference_shape_many_rows`], so that each test fits one
/// device command.)
#[test]
#[ignore = "needs a CUDA GPU"]
fn reference_shape() {
    let gpu = gpu();
    let sd = seed("reference_shape");
    for g in GATE_UP {
        for d in DOWN {
            reference_runs(
                &gpu,
                g,
                d,
                sd,
                512,
                &[(37, Popularity::Uniform), (512, Popularity::Uniform)],
            );
        }
    }
}

/// The reference shape at T = 4113 (82 rows per routed expert: the MMQ kernel choice puts both
/// products on flat tiles, their tails on the wide kernel), uniform and skewed, for the three
/// benchmarked pairs.
#[test]
#[ignore = "needs a CUDA GPU"]
fn reference_shape_many_rows() {
    let gpu = gpu();
    let sd = seed("reference_shape_many_rows");
    let runs = [
        (4113, Popularity::Uniform),
        (4113, Popularity::Skewed { sigma: 0.5 }),
    ];
    for (g, d) in [
        (WType::Q2_0, WType::Q2_0),
        (WType::Iq2Xxs, WType::Q2_0),
        (WType::Iq3S, WType::Iq4Nl),
    ] {
        reference_runs(&gpu, g, d, sd, 4113, &runs);
    }
}

/// The reference-shape layer of pair (`g`, `d`) from seed `sd`, checked on every pipeline for
/// each (T, popularity) of `runs` (pipelines sized for `cap` tokens). Prints each run's time.
fn reference_runs(
    gpu: &Gpu,
    g: WType,
    d: WType,
    sd: u64,
    cap: usize,
    runs: &[(usize, Popularity)],
) {
    let start = std::time::Instant::now();
    let s = MoeShape {
        gate_up_type: g,
        down_type: d,
        ..MoeShape::REFERENCE
    };
    let layer =
        SyntheticLayer::new(s, false, sd ^ g.id() as u64 ^ (d.id() as u64) << 8).expect("layer");
    let dev = DeviceLayer::upload(gpu, &layer.weights(), &s).expect("upload");
    let mut pfs = pipelines(gpu, &s, cap);
    for &(t, pop) in runs {
        let r = synth::routing(t, s.n_experts, s.top_k, pop, sd ^ t as u64);
        let label = format!("reference {}/{} {pop:?} T={t}", g.name(), d.name());
        check(gpu, &label, &layer, &dev, &mut pfs, &r, sd ^ 5 ^ t as u64);
        eprintln!(
            "{label}: checked on {} pipelines, {:.1} s into the pair",
            pfs.len(),
            start.elapsed().as_secs_f64()
        );
    }
}
