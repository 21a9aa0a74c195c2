//! The scatter's forms (host/src/moe/scatter.rs): the one kernel, the chain writing the rows
//! from its quantizer, and the chain gathering them from its token buffer, each set on the
//! pipeline at every row count, give the reference's row order and q8_1 rows (the layer's
//! bytes checked stage by stage, as every prefill test).

use gpu::layout::WType;
use host::moe::layer::DeviceLayer;
use host::moe::path::ExpertPath;
use host::moe::prefill::Prefill;
use host::moe::scatter::{RowsRule, ScatterForms};
use host::problem::{MoeShape, Routing};
use host::synth::{self, Popularity, SyntheticLayer};
use tests::*;

use super::common::*;

const FORMS: [(ScatterForms, &str); 3] = [
    (
        ScatterForms {
            gather: RowsRule::Auto,
            one: RowsRule::Always,
        },
        "one kernel",
    ),
    (
        ScatterForms {
            gather: RowsRule::Never,
            one: RowsRule::Never,
        },
        "chain",
    ),
    (
        ScatterForms {
            gather: RowsRule::Always,
            one: RowsRule::Never,
        },
        "chain, rows gathered",
    ),
];

/// Routings of `t` tokens over `s`: uniform, skewed (sigma 3: most experts get no row), and
/// every token on the same experts (each expert's rows from every token).
fn routings(s: &MoeShape, t: usize, sd: u64) -> Vec<(String, Routing)> {
    let k = s.top_k;
    let same = Routing {
        n_tokens: t,
        top_k: k,
        ids: (0..t)
            .flat_map(|i| (0..k).map(move |j| ((1 + (i + j) % k) % s.n_experts) as u32))
            .collect(),
        weights: (0..t * k).map(|i| 1.0 / (1 + i % 5) as f32).collect(),
    };
    vec![
        (
            "uniform".into(),
            synth::routing(t, s.n_experts, k, Popularity::Uniform, sd ^ t as u64),
        ),
        (
            "skewed 3.0".into(),
            synth::routing(t, s.n_experts, k, Popularity::Skewed { sigma: 3.0 }, sd ^ 5),
        ),
        ("same experts".into(), same),
    ]
}

/// Each form at T = 0, 1, 37, 512 and 1,100 on the small layer (top-4 and top-10), and at the
/// reference shape and with the most experts (top-32) at 300 tokens.
#[test]
#[ignore = "needs a CUDA GPU"]
fn scatter_forms_same_bytes() {
    let gpu = gpu();
    let sd = seed("scatter_forms_same_bytes");
    let most = most_experts();
    for (s, ts) in [
        (
            small(WType::Q2_0, WType::Q2_0, 4),
            &[0, 1, 37, 512, 1100][..],
        ),
        (small(WType::Iq4Nl, WType::Q8_0, 10), &[1, 37, 512][..]),
        (MoeShape::REFERENCE, &[300][..]),
        (most, &[300][..]),
    ] {
        let layer = SyntheticLayer::new(s, false, sd).expect("layer");
        let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
        let cap = *ts.iter().max().expect("token counts");
        for (forms, name) in FORMS {
            let mut pf = Prefill::new(&gpu, &s, cap, ExpertPath::Mmq).expect("pipeline");
            pf.set_scatter_forms(&gpu, forms).expect("scatter forms");
            let mut pfs = [pf];
            for &t in ts {
                for (what, r) in routings(&s, t, sd) {
                    let label = format!(
                        "{} experts top-{} {}/{} T = {t} {what}, scatter: {name}",
                        s.n_experts,
                        s.top_k,
                        s.gate_up_type.name(),
                        s.down_type.name()
                    );
                    check(&gpu, &label, &layer, &dev, &mut pfs, &r, sd ^ 9 ^ t as u64);
                    if t > 0 {
                        assert_eq!(pfs[0].scatter_form(), name, "{label}");
                    }
                }
            }
        }
    }
}
