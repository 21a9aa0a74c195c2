//! `--path auto` follows its tune table run by run: with a made-up table that makes the fused
//! path, ws+mmq and mmq+ws each the cheapest at some rows per routed expert, every run takes
//! what `auto::decide` says for its expert bounds, says so in `why()`, and gives the
//! reference's bytes.

use std::sync::Arc;

use super::common::*;
use gpu::layout::WType;
use host::moe::expert::auto::{self, Allowed};
use host::moe::expert::rows_per_routed_expert;
use host::moe::layer::DeviceLayer;
use host::moe::path;
use host::moe::prefill::Prefill;
use host::moe::tune::{Times, TuneKey, TuneTable, Tuning};
use host::synth::{self, Popularity, SyntheticLayer};
use tests::*;

/// Fused cheapest at 8 rows per routed expert, ws+mmq at 32, mmq+ws at 128.
fn table(g: WType, d: WType) -> Tuning {
    let mut t = TuneTable::new(TuneKey {
        gpu: "made up".into(),
        driver: "-".into(),
        build: "-".into(),
    });
    let row = |v: [f64; 6]| Times(v.map(Some));
    t.entries
        .insert((g, d, 8), row([1.0, 2.0, 0.1, 1.0, 2.0, 0.5]));
    t.entries
        .insert((g, d, 32), row([2.0, 1.0, 0.1, 1.0, 2.0, 5.0]));
    t.entries
        .insert((g, d, 128), row([1.0, 2.0, 0.1, 2.0, 1.0, 5.0]));
    Tuning {
        table: t,
        source: "test table".into(),
        note: None,
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn auto_follows_its_table() {
    let gpu = gpu();
    let sd = seed("auto_follows_its_table");
    for (g, d) in [(WType::Q2_0, WType::Q8_0), (WType::Iq2Xs, WType::Iq4Nl)] {
        let s = small(g, d, 4);
        let layer = SyntheticLayer::new(s, false, sd ^ g.id() as u64).expect("layer");
        let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
        let tuning = Arc::new(table(g, d));
        let cap = 512;
        let plan = path::plan_tuned(&gpu, &s, cap * s.top_k, tuning.clone()).expect("auto plan");
        let mut pfs = vec![Prefill::with_plan(&gpu, &s, cap, plan).expect("pipeline")];
        let allowed = Allowed {
            fused: true,
            mmq: true,
            ws: true,
        };
        let mut seen = Vec::new();
        // 16 experts, top-4: T / 4 rows per routed expert once every expert has rows.
        for t in [37, 128, 512] {
            let r = synth::routing(t, s.n_experts, s.top_k, Popularity::Uniform, sd ^ t as u64);
            let label = format!("auto {}/{} T={t}", g.name(), d.name());
            check(&gpu, &label, &layer, &dev, &mut pfs, &r, sd ^ 3 ^ t as u64);
            let bounds = pfs[0].outputs(&gpu).expect("download").expert_bounds;
            let rows = rows_per_routed_expert(&bounds);
            let want = auto::decide(&tuning, g, d, rows, allowed);
            assert_eq!(pfs[0].label(), want.label(), "{label}: {rows} rows");
            assert_eq!(pfs[0].why().as_deref(), Some(want.why.as_str()), "{label}");
            seen.push(want.label());
        }
        assert_eq!(seen, ["fused", "ws+mmq", "mmq+ws"], "{g:?}/{d:?}");
    }
}
