//! The narrow MMQ kernel's resident form (gpu/src/moe/mmq/pipe/resident.rs: the tile's whole K
//! copied in the prologue by bulk copies, sm_90): where it runs, and that it gives the
//! reference's bytes, as its streamed form does.

use super::common::*;
use gpu::layout::{MmqResidentSmem, WType};
use host::moe::expert::mmq::MmqChoice;
use host::moe::expert::split::{Product, SplitOptions, SwigluAt};
use host::moe::expert::ws::WsOptions;
use host::moe::layer::DeviceLayer;
use host::problem::MoeShape;
use host::synth::{self, Popularity, SyntheticLayer};
use tests::*;

/// Narrow tiles with SwiGLU in its own kernel (so that both products run the narrow kernel
/// without the epilogue), resident where the layout fits and streamed throughout: the small
/// layer (K = 256 and 128) and wider ones (hidden 768 or 1,280, FFN 256: several K steps and
/// 256-value stages resident, more K steps than warps), separate and merged gate/up tensors,
/// T = 1, 37, 512; the description of
/// each run names the resident products, which are those whose layout exists on a module with
/// bulk copies.
#[test]
#[ignore = "needs a CUDA GPU"]
fn narrow_resident_form() {
    let gpu = gpu();
    let sd = seed("narrow_resident_form");
    let bulk = host::ptx::has_bulk(gpu.info.ptx_arch);
    let wide = |g, d| MoeShape {
        hidden: 768,
        ffn: 256,
        ..small(g, d, 4)
    };
    let cases = [
        (small(WType::Iq2Xxs, WType::Q2_0, 4), false),
        (small(WType::Q2_0, WType::Iq4Nl, 4), true),
        (small(WType::Iq3S, WType::Q8_0, 4), false),
        (wide(WType::Iq2S, WType::Iq4Nl), true),
        (wide(WType::Iq4Nl, WType::Q2_0), false),
        (wide(WType::Q8_0, WType::Q8_0), false),
        (wide(WType::Iq3Xxs, WType::Iq4Nl), false),
        // 10 K steps of gate/up: warps 0 and 1 copy two steps' activations each.
        (
            MoeShape {
                hidden: 1280,
                ..wide(WType::Iq2Xxs, WType::Q2_0)
            },
            true,
        ),
    ];
    let mut seen = [false; 2];
    for (i, (s, merged)) in cases.into_iter().enumerate() {
        let layer = SyntheticLayer::new(s, merged, sd ^ i as u64).expect("layer");
        let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
        let fits = [
            MmqResidentSmem::of(s.gate_up_type, s.hidden).is_some(),
            MmqResidentSmem::of(s.down_type, s.ffn).is_some(),
        ];
        for (mmq, resident) in [
            (MmqChoice::Narrow, fits.map(|f| f && bulk)),
            (MmqChoice::NarrowStreamed, [false; 2]),
        ] {
            let o = SplitOptions {
                ws: WsOptions::default(),
                mmq,
                swiglu: SwigluAt::Kernel,
            };
            let mut pf = split_pipeline(&gpu, &s, 512, [Product::Mmq; 2], o);
            for t in [1, 37, 512] {
                let r = synth::routing(t, s.n_experts, s.top_k, Popularity::Uniform, sd ^ t as u64);
                let label = format!(
                    "{}/{} hidden {} ffn {} {} T={t} {}",
                    s.gate_up_type.name(),
                    s.down_type.name(),
                    s.hidden,
                    s.ffn,
                    if merged { "merged" } else { "split" },
                    mmq.name()
                );
                check(
                    &gpu,
                    &label,
                    &layer,
                    &dev,
                    std::slice::from_mut(&mut pf),
                    &r,
                    sd ^ 3,
                );
                let desc = pf.describe();
                let ran = match desc.split_once(", down ") {
                    Some((gate_up, down)) => [gate_up, down].map(|p| p.contains("resident")),
                    None => [desc.contains("resident"); 2],
                };
                assert!(desc.contains("narrow kernel"), "{label}: {desc}");
                assert_eq!(ran, resident, "{label}: {desc}");
                for (s, r) in seen.iter_mut().zip(ran) {
                    *s |= r;
                }
            }
        }
    }
    // Both products resident somewhere on a module with bulk copies.
    assert_eq!(seen, [bulk; 2]);
    // The 10-step case is resident where it should be (its layout exists).
    assert!(MmqResidentSmem::of(WType::Iq2Xxs, 1280).is_some());
}
