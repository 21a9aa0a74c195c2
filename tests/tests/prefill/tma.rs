//! The pipelined gate/up kernels' tensor copies (sm_90: `MmqParams::wmap0`) against the
//! reference, and against the same kernels' `cp.async` pieces (`MOE_MMQ_TMA=never`).

use gpu::layout::WType;
use host::moe::expert::mmq::{MmqChoice, MmqOrder, MmqTma};
use host::moe::expert::split::{Product, SplitOptions, SwigluAt};
use host::moe::layer::DeviceLayer;
use host::problem::{MoeShape, Numerics};
use host::synth::{self, Popularity, SyntheticLayer};
use tests::*;

use super::common::{check, small, split_pipeline};

/// Every gate/up type whose rows are whole 16-byte pieces at hidden 512 (Q2_0's 144 bytes,
/// IQ4_NL's 288, Q8_0's 544), separate and merged gate/up tensors, on the 128-row and flat
/// kernels with the SwiGLU epilogue and the narrow kernel without it (tensor copies where the
/// layer has the maps, and without: `MmqTma::Never`) and the flat kernel without it and the
/// narrow one with it (never tensor copies): uniform routing at T = 1, 37, 512, 4113 and skewed
/// at 512. On an sm_90 module the layer must have the maps (else the kernels would run their
/// `cp.async` pieces and this test would check nothing new); below it, none. (The narrow boxes:
/// a warp's 16 rows in one for Q2_0 and Q8_0, in two of 8 for IQ4_NL.)
#[test]
#[ignore = "needs a CUDA GPU"]
fn tensor_copies_of_the_gate_up_stages() {
    let gpu = gpu();
    let sd = seed("tensor_copies_of_the_gate_up_stages");
    let sm90 = gpu.info.ptx_arch >= 90;
    let cases = [
        (WType::Q2_0, WType::Q2_0, false),
        (WType::Q2_0, WType::Iq4Nl, true),
        (WType::Iq4Nl, WType::Q2_0, true),
        (WType::Q8_0, WType::Q8_0, false),
    ];
    for (i, (g, d, merged)) in cases.into_iter().enumerate() {
        let s = MoeShape {
            n_experts: 16,
            top_k: 4,
            hidden: 512,
            ffn: 128,
            gate_up_type: g,
            down_type: d,
            numerics: Numerics::Mmq,
        };
        let layer = SyntheticLayer::new(s, merged, sd ^ i as u64).expect("layer");
        let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
        let w = dev.ptrs(&gpu);
        assert_eq!(w.gate_map != 0, sm90, "{g:?}: the gate/up map");
        assert_eq!(w.up_map != 0, sm90 && !merged, "{g:?}: the up map");
        assert_eq!(
            w.gate_map_narrow != 0,
            sm90,
            "{g:?}: the narrow gate/up map"
        );
        assert_eq!(
            w.up_map_narrow != 0,
            sm90 && !merged,
            "{g:?}: the narrow up map"
        );
        let mut pfs = Vec::new();
        for (mmq, swiglu) in [
            (MmqChoice::Pipelined, SwigluAt::Epilogue),
            (MmqChoice::Flat, SwigluAt::Epilogue),
            (MmqChoice::Flat, SwigluAt::Kernel),
            (MmqChoice::NarrowStreamed, SwigluAt::Epilogue),
            (MmqChoice::NarrowStreamed, SwigluAt::Kernel),
        ] {
            // (The flat kernel without the epilogue and the narrow one with it take no maps:
            // both their pipelines run the same code.)
            for tma in [MmqTma::Auto, MmqTma::Never] {
                let o = SplitOptions {
                    mmq,
                    swiglu,
                    tma,
                    order: MmqOrder::Rows,
                    ..SplitOptions::default()
                };
                pfs.push(split_pipeline(&gpu, &s, 4113 + 7, [Product::Mmq; 2], o));
            }
        }
        let runs = [
            (Popularity::Uniform, 1),
            (Popularity::Uniform, 37),
            (Popularity::Uniform, 512),
            (Popularity::Uniform, 4113),
            (Popularity::Skewed { sigma: 1.0 }, 512),
        ];
        for (pop, t) in runs {
            let r = synth::routing(t, s.n_experts, s.top_k, pop, sd ^ t as u64);
            let label = format!(
                "tensor copies {}/{} {} {pop:?} T={t}",
                g.name(),
                d.name(),
                if merged { "merged" } else { "split" }
            );
            check(&gpu, &label, &layer, &dev, &mut pfs, &r, sd ^ 91 ^ t as u64);
        }
    }
    // Rows that are not whole 16-byte pieces (Q2_0 at hidden 256: 72 bytes) have no map.
    let s = small(WType::Q2_0, WType::Q2_0, 4);
    let layer = SyntheticLayer::new(s, true, sd).expect("layer");
    let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
    assert_eq!(dev.ptrs(&gpu).gate_map, 0);
}
