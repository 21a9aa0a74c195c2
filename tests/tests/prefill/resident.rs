//! The narrow MMQ kernel's resident form (gpu/src/moe/mmq/pipe/resident.rs: the tile's whole K
//! copied in the prologue by bulk copies, sm_90): where it runs, and that it gives the
//! reference's bytes, as its streamed form does.

use super::common::*;
use gpu::layout::{MmqResidentSmem, WType, resident_row_tiles};
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
/// 256-value stages resident, more K steps than warps; hidden 640 or FFN 640: CTAs over 4 row
/// tiles and fewer in the last, one weight buffer and two), separate and merged gate/up
/// tensors, T = 1, 37, 512; the description of
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
        // Row tiles a CTA (`resident_row_tiles`): gate/up's 4 in one CTA, down's 5 as 4 + 1.
        (
            MoeShape {
                hidden: 640,
                ..wide(WType::Q2_0, WType::Q2_0)
            },
            false,
        ),
        // IQ4_NL's down product at K = 640 in one weight buffer, its 6 row tiles as 4 + 2;
        // gate/up's 10 as 4 + 4 + 2 in two buffers.
        (
            MoeShape {
                ffn: 640,
                ..wide(WType::Q2_0, WType::Iq4Nl)
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
                ..SplitOptions::default()
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
                let ran = per_product(&desc).map(|p| p.contains("resident"));
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
    // The 10-step case is resident where it should be (its layout exists), and the last two
    // cases have the buffers and row tiles they name.
    assert!(MmqResidentSmem::of(WType::Iq2Xxs, 1280).is_some());
    let bufs = |w, k| MmqResidentSmem::of(w, k).map(|l| l.wbufs);
    assert_eq!(bufs(WType::Q2_0, 640), Some(2));
    assert_eq!(bufs(WType::Q2_0, 768), Some(2));
    assert_eq!(bufs(WType::Iq4Nl, 640), Some(1));
    assert_eq!([512, 640, 768, 1280].map(resident_row_tiles), [4; 4]);
}

/// Under `auto` each product takes narrow tiles up to its own bound of rows per expert: a
/// product the resident form can run up to its type's (`narrow_resident_max_rows`: 32 for
/// IQ4_NL), the gate/up product on sm_90 up to its type's (`gate_up_narrow_max_rows`: 28 for
/// Q2_0 by tensor copies, where the layer has the narrow maps), the others up to
/// `NARROW_MAX_ROWS_PER_EXPERT`. With hidden 2,560 the gate/up product has no resident layout
/// and the down product (K = 128) has one, so between the bounds the products run on tile
/// lists of different widths in one layer. 16 experts, top-4, at 9, 25, 32, 33 and 41 rows per
/// expert, every byte against the reference.
#[test]
#[ignore = "needs a CUDA GPU"]
fn auto_tile_widths_per_product() {
    use host::moe::expert::mmq::{
        NARROW_MAX_ROWS_PER_EXPERT, gate_up_narrow_max_rows, narrow_resident_max_rows,
    };
    let gpu = gpu();
    let sd = seed("auto_tile_widths_per_product");
    let bulk = host::ptx::has_bulk(gpu.info.ptx_arch);
    let s = MoeShape {
        hidden: 2560,
        ..small(WType::Q2_0, WType::Iq4Nl, 4)
    };
    assert!(MmqResidentSmem::of(s.gate_up_type, s.hidden).is_none());
    assert!(MmqResidentSmem::of(s.down_type, s.ffn).is_some());
    let layer = SyntheticLayer::new(s, false, sd).expect("layer");
    let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
    let o = SplitOptions {
        ws: WsOptions::default(),
        mmq: MmqChoice::Auto,
        swiglu: SwigluAt::Kernel,
        ..SplitOptions::default()
    };
    let mut pf = split_pipeline(&gpu, &s, 164, [Product::Mmq; 2], o);
    let tma = DeviceLayer::has_narrow_gate_up_maps(&gpu, &s);
    assert_eq!(
        tma, bulk,
        "Q2_0 gate/up rows of 720 bytes: narrow maps on sm_90"
    );
    assert_eq!(dev.ptrs(&gpu).gate_map_narrow != 0, tma);
    let gate_up_bound = if bulk {
        gate_up_narrow_max_rows(s.gate_up_type, tma)
    } else {
        NARROW_MAX_ROWS_PER_EXPERT
    };
    for t in [37, 100, 128, 132, 164] {
        let per_expert = t * s.top_k / s.n_experts;
        let r = synth::routing(t, s.n_experts, s.top_k, Popularity::Uniform, sd ^ t as u64);
        let label = format!("q2_0/iq4_nl auto T={t} ({per_expert} rows per expert)");
        check(
            &gpu,
            &label,
            &layer,
            &dev,
            std::slice::from_mut(&mut pf),
            &r,
            sd ^ 5,
        );
        let desc = pf.describe();
        let [gate_up, down] = per_product(&desc);
        let narrow = |p: &str| p.contains("narrow kernel");
        assert_eq!(
            narrow(gate_up),
            per_expert <= gate_up_bound,
            "{label}: {desc}"
        );
        let down_bound = if bulk {
            narrow_resident_max_rows(s.down_type)
        } else {
            NARROW_MAX_ROWS_PER_EXPERT
        };
        assert_eq!(narrow(down), per_expert <= down_bound, "{label}: {desc}");
        assert_eq!(
            down.contains("resident"),
            bulk && per_expert <= down_bound,
            "{label}: {desc}"
        );
    }
}

/// A pipeline description's parts for gate/up and down (`"gate/up A, down B; ..."`, or one
/// part for both when they run the same).
fn per_product(desc: &str) -> [&str; 2] {
    match desc.split_once(", down ") {
        Some((gate_up, down)) => [gate_up, down],
        None => [desc; 2],
    }
}
