//! What every prefill test shares: the small layer's shape, the pipelines of every eligible
//! path, and one run checked stage by stage against the CPU reference.

use gpu::layout::{MAX_EXPERTS, WType};
use host::device::Gpu;
use host::moe::expert::fused::FusedPlan;
use host::moe::expert::mmq::{
    MmqChoice, MmqFlatWs, MmqKernel, MmqOrder, MmqTails, MmqTma, MmqWeightL2,
};
use host::moe::expert::split::{Product, SplitOptions, SwigluAt};
use host::moe::expert::ws::WsOptions;
use host::moe::layer::DeviceLayer;
use host::moe::path::{self, ExpertPath, PathChoice};
use host::moe::prefill::{Prefill, RoutingInput};
use host::problem::{MoeShape, Numerics, Routing};
use host::reference;
use host::synth::SyntheticLayer;
use tests::*;

pub fn small(gate_up_type: WType, down_type: WType, top_k: usize) -> MoeShape {
    MoeShape {
        n_experts: 16,
        top_k,
        hidden: 256,
        ffn: 128,
        gate_up_type,
        down_type,
        numerics: Numerics::Mmq,
    }
}

/// The most experts and the largest top-k the scatter takes (2,048, top-32), on the small
/// layer's widths.
pub fn most_experts() -> MoeShape {
    MoeShape {
        n_experts: MAX_EXPERTS,
        top_k: 32,
        ..small(WType::Q2_0, WType::Q2_0, 32)
    }
}

/// A routing in which (about) `counts[c]` rows go to each expert of bucket c: slot j of a token
/// of the c-th bucket goes to expert (c + buckets j) mod E, weights cycling over 0.5 .. 1.5.
pub fn routing_with_counts(counts: &[usize], k: usize, n_experts: usize) -> Routing {
    let nb = counts.len();
    let t = counts.iter().sum::<usize>();
    let mut owner = Vec::with_capacity(t);
    for (e, &n) in counts.iter().enumerate() {
        owner.extend(std::iter::repeat_n(e, n));
    }
    let ids: Vec<u32> = (0..t)
        .flat_map(|i| {
            let o = owner[i];
            (0..k).map(move |j| ((o + nb * j) % n_experts) as u32)
        })
        .collect();
    let weights: Vec<f32> = (0..t * k).map(|i| 0.5 + (i % 5) as f32 * 0.25).collect();
    let r = Routing {
        n_tokens: t,
        top_k: k,
        ids,
        weights,
    };
    r.check(n_experts).expect("distinct experts per token");
    r
}

pub fn f32_bytes(v: &[f32]) -> &[u8] {
    bytemuck::cast_slice(v)
}

/// A pipeline whose products are fixed to `products`, run with `opts`.
pub fn split_pipeline(
    gpu: &Gpu,
    s: &MoeShape,
    cap: usize,
    products: [Product; 2],
    opts: SplitOptions,
) -> Prefill {
    let plan = path::split_plan(gpu, s, cap * s.top_k, products, opts).expect("split plan");
    Prefill::with_plan(gpu, s, cap, plan).expect("pipeline")
}

/// One pipeline per expert path that can run `s` here (MMQ and weight-stationary always; fused
/// where eligible), the weight-stationary path with WS_FAST, the fused path prefetching its
/// weights into the L2 (where eligible), the MMQ path on its classic kernel
/// (the plain MMQ pipeline runs the pipelined one where it fits, as on every GPU we test on), on
/// narrow tiles at every row count (with SwiGLU in the gate/up epilogue, and in its own kernel
/// with the narrow kernel's resident form where it fits and without it), with SwiGLU in the
/// gate/up epilogue and in its own kernel at every row count, and one that chooses per run
/// (`auto`).
pub fn pipelines(gpu: &Gpu, s: &MoeShape, cap: usize) -> Vec<Prefill> {
    let mut pfs: Vec<Prefill> = ExpertPath::ALL
        .into_iter()
        .filter(|&p| path::eligible(p, s, &gpu.limits()).is_ok())
        .map(|p| Prefill::new(gpu, s, cap, p).expect("pipeline"))
        .collect();
    let fast = WsOptions {
        fast: true,
        tier: None,
    };
    let o = SplitOptions {
        ws: fast,
        mmq: MmqChoice::Auto,
        ..SplitOptions::default()
    };
    pfs.push(split_pipeline(gpu, s, cap, [Product::Ws; 2], o));
    if path::eligible(ExpertPath::Fused, s, &gpu.limits()).is_ok() {
        // The fused kernels prefetching each next stage's weights into the L2
        // (`MOE_FUSED_PREFETCH=on`).
        let mut plan = FusedPlan::new(gpu, s, cap * s.top_k).expect("fused plan");
        plan.set_prefetch(true);
        let pf = Prefill::with_plan(gpu, s, cap, Box::new(plan)).expect("pipeline");
        assert!(
            pf.describe().contains("prefetched into the L2"),
            "{}",
            pf.describe()
        );
        pfs.push(pf);
    }
    if path::eligible(ExpertPath::Mmq, s, &gpu.limits()).is_ok() {
        // The classic kernel, and the narrow one at every row count (the default takes it at
        // few rows per expert only).
        // The pipelined kernels with SwiGLU in their gate/up epilogue and in its own kernel at
        // every row count (the default takes the epilogue at many rows per expert only).
        // Each in the default CTA order, and the pipelined ones once more in the other.
        let (rows, tiles) = (MmqOrder::Rows, MmqOrder::Tiles);
        // Where neither product's flat layout fits the device, `MmqChoice::Flat` runs the wide
        // one.
        let dev = gpu.limits();
        let flat = if [s.gate_up_type, s.down_type]
            .iter()
            .any(|&w| MmqKernel::flat(w, &dev).is_some())
        {
            "flat kernel"
        } else {
            "pipelined kernel"
        };
        for (mmq, swiglu, order, kernel) in [
            (MmqChoice::Classic, SwigluAt::Auto, rows, "classic kernel"),
            (MmqChoice::Narrow, SwigluAt::Epilogue, rows, "narrow kernel"),
            // Narrow gate/up without the epilogue, resident where it fits (sm_90) and streamed.
            (MmqChoice::Narrow, SwigluAt::Kernel, rows, "narrow kernel"),
            (MmqChoice::Narrow, SwigluAt::Kernel, tiles, "narrow kernel"),
            (
                MmqChoice::NarrowStreamed,
                SwigluAt::Kernel,
                rows,
                "narrow kernel",
            ),
            (
                MmqChoice::Auto,
                SwigluAt::Epilogue,
                rows,
                "SwiGLU in the gate/up epilogue",
            ),
            (
                MmqChoice::Pipelined,
                SwigluAt::Epilogue,
                tiles,
                "SwiGLU in the gate/up epilogue",
            ),
            (
                MmqChoice::Auto,
                SwigluAt::Kernel,
                rows,
                "SwiGLU in moe_swiglu_quant",
            ),
            // Flat tiles at every row count (the default takes them at many rows per expert
            // only), with SwiGLU in the epilogue and, in the grid's order, in its own kernel.
            (MmqChoice::Flat, SwigluAt::Epilogue, rows, flat),
            (MmqChoice::Flat, SwigluAt::Kernel, tiles, flat),
        ] {
            let o = SplitOptions {
                ws: WsOptions::default(),
                mmq,
                order,
                tma: MmqTma::Auto,
                weight_l2: MmqWeightL2::Normal,
                flat_ws: MmqFlatWs::Off,
                tails: MmqTails::Off,
                swiglu,
            };
            let pf = split_pipeline(gpu, s, cap, [Product::Mmq; 2], o);
            assert!(pf.describe().contains(kernel), "{}", pf.describe());
            pfs.push(pf);
        }
        // The pipelined kernels' weight stages by `cp.async` pieces where the pipelines above
        // take tensor copies (an sm_90 module, strides of whole 16-byte pieces).
        let o = SplitOptions {
            mmq: MmqChoice::Pipelined,
            swiglu: SwigluAt::Epilogue,
            tma: MmqTma::Never,
            ..SplitOptions::default()
        };
        let pf = split_pipeline(gpu, s, cap, [Product::Mmq; 2], o);
        assert!(
            pf.describe().contains("no tensor copies"),
            "{}",
            pf.describe()
        );
        pfs.push(pf);
        // The flat kernels without the epilogue warp specialized (`MOE_MMQ_FLAT_WS=on`; sm_90
        // modules): gate/up with SwiGLU in its own kernel, and down.
        let o = SplitOptions {
            mmq: MmqChoice::Flat,
            swiglu: SwigluAt::Kernel,
            flat_ws: MmqFlatWs::On,
            ..SplitOptions::default()
        };
        let pf = split_pipeline(gpu, s, cap, [Product::Mmq; 2], o);
        assert_eq!(
            pf.describe().contains("flat kernels warp specialized"),
            host::ptx::has_bulk(gpu.info.ptx_arch),
            "{}",
            pf.describe()
        );
        pfs.push(pf);
        // Each flat product's tails on the wide kernel (`MOE_MMQ_TAILS=wide`): SwiGLU in its
        // own kernel and in the epilogue (lists built on the device), and the gate/up product
        // alone on MMQ (its lists built on the host from the bounds read back).
        for (products, swiglu) in [
            ([Product::Mmq; 2], SwigluAt::Kernel),
            ([Product::Mmq; 2], SwigluAt::Epilogue),
            ([Product::Mmq, Product::Ws], SwigluAt::Kernel),
        ] {
            let o = SplitOptions {
                mmq: MmqChoice::Flat,
                swiglu,
                tails: MmqTails::Wide,
                ..SplitOptions::default()
            };
            let pf = split_pipeline(gpu, s, cap, products, o);
            assert_eq!(
                pf.describe().contains("tails on the wide kernel"),
                flat == "flat kernel",
                "{}",
                pf.describe()
            );
            pfs.push(pf);
        }
        // The weights' lines evicted from the L2 first (`MOE_MMQ_WEIGHT_L2=first`; the narrow,
        // tall and resident kernels' copies on sm_90 modules): the default kernels (narrow by
        // tensor copies, resident, tall where the types and rows take them), narrow ones by
        // `cp.async` pieces, and the narrow kernel with the SwiGLU epilogue.
        for (mmq, swiglu, tma) in [
            (MmqChoice::Auto, SwigluAt::Auto, MmqTma::Auto),
            (MmqChoice::NarrowStreamed, SwigluAt::Kernel, MmqTma::Never),
            (MmqChoice::Narrow, SwigluAt::Epilogue, MmqTma::Auto),
        ] {
            let o = SplitOptions {
                mmq,
                swiglu,
                tma,
                weight_l2: MmqWeightL2::First,
                ..SplitOptions::default()
            };
            let pf = split_pipeline(gpu, s, cap, [Product::Mmq; 2], o);
            assert_eq!(
                pf.describe().contains("weights evicted from the L2 first"),
                host::ptx::has_bulk(gpu.info.ptx_arch),
                "{}",
                pf.describe()
            );
            pfs.push(pf);
        }
    }
    pfs.push(Prefill::new(gpu, s, cap, PathChoice::Auto).expect("auto pipeline"));
    if host::ptx::has_mma(gpu.info.ptx_arch) {
        assert!(pfs.iter().any(|p| p.path() == ExpertPath::Mmq));
    }
    assert!(pfs.iter().any(|p| p.path() == ExpertPath::Ws));
    pfs
}

/// One run of `routing` through each pipeline, every stage compared with the reference.
pub fn check(
    gpu: &Gpu,
    label: &str,
    layer: &SyntheticLayer,
    dev: &DeviceLayer,
    pfs: &mut [Prefill],
    routing: &Routing,
    seed: u64,
) {
    let s = layer.shape;
    let t = routing.n_tokens;
    let x = host::synth::normal_f32(seed, t * s.hidden, 1.0);
    let want = reference::prefill(&x, routing, &layer.weights(), &s);
    let dx = gpu.upload(&x).expect("upload x");
    for (i, pf) in pfs.iter_mut().enumerate() {
        check_one(gpu, label, i, &s, dev, pf, routing, &want, &dx);
        // A pipeline builds its work list on the device or reads the bounds back, never both.
        assert_eq!(
            pf.read_back(),
            !pf.describe().contains("built on the device"),
            "{label} [pipeline {i}]: {}",
            pf.describe()
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn check_one(
    gpu: &Gpu,
    label: &str,
    index: usize,
    s: &MoeShape,
    dev: &DeviceLayer,
    pf: &mut Prefill,
    routing: &Routing,
    want: &reference::Stages,
    dx: &cudarc::driver::CudaSlice<f32>,
) {
    let t = routing.n_tokens;
    pf.poison(gpu, POISON).expect("poison");
    pf.run(gpu, dev, dx, t, RoutingInput::Given(routing))
        .expect("prefill runs");
    // The path of this run (a pipeline built with auto reports the one it chose).
    let label = &format!(
        "{label} [pipeline {index}: {}, {}]",
        pf.label(),
        pf.describe()
    );
    let got = pf.outputs(gpu).expect("download");
    let rows = t * s.top_k;
    let k = s.top_k;
    assert_eq!(
        got.expert_bounds, want.order.expert_bounds,
        "{label}: expert bounds"
    );
    assert_eq!(
        got.row_token, want.order.row_token,
        "{label}: row order (tokens)"
    );
    let want_dst: Vec<u32> = (0..rows)
        .map(|c| want.order.row_token[c] * k as u32 + want.order.row_slot[c])
        .collect();
    assert_eq!(got.row_dst, want_dst, "{label}: row order (destinations)");
    assert_bytes_eq(
        &format!("{label} xq"),
        &got.xq,
        bytemuck::cast_slice(&want.xq),
        locate_q8_1(rows),
    );
    let w2 = 2 * s.ffn;
    if let Some(gu) = &got.gu {
        assert_bytes_eq(
            &format!("{label} gate/up"),
            f32_bytes(gu),
            f32_bytes(&want.gu),
            |i| {
                let (c, n) = (i / 4 / w2, i / 4 % w2);
                format!(
                    "row {c} (token {}, expert row {n})",
                    want.order.row_token[c]
                )
            },
        );
    }
    if let Some(hq) = &got.hq {
        assert_bytes_eq(
            &format!("{label} swiglu_quant"),
            hq,
            bytemuck::cast_slice(&want.hq),
            locate_q8_1(rows),
        );
    }
    assert_bytes_eq(
        &format!("{label} down"),
        f32_bytes(&got.dm),
        f32_bytes(&want.dm),
        |i| {
            let (r, h) = (i / 4 / s.hidden, i / 4 % s.hidden);
            format!(
                "token {} slot {} (expert {}), column {h}",
                r / k,
                r % k,
                routing.ids[r]
            )
        },
    );
    assert_bytes_eq(
        &format!("{label} output"),
        f32_bytes(&got.out),
        f32_bytes(&want.out),
        |i| format!("token {}, column {}", i / 4 / s.hidden, i / 4 % s.hidden),
    );
    let past = pf.written_past_end(gpu, POISON).expect("download");
    assert!(past.is_empty(), "{label}: written past the end of {past:?}");
}
