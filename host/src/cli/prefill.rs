//! `moe-prefill prefill`: one or more MoE layers' prefill on the GPU on the chosen expert path,
//! timed stage by stage, with parity against the CPU reference on a sample of tokens. The layer
//! is a synthetic one of the reference shape, or read from a GGUF file (routed by its own
//! router). The arguments and the file are checked before the GPU is opened; without a GPU the
//! command runs the CPU reference on a few tokens instead.

use std::path::PathBuf;

use clap::Args;
use gpu::layout::WType;
use host::device::Gpu;
use host::gguf::GgufFile;
use host::moe::expert::mmq::MmqTma;
use host::moe::layer::DeviceLayer;
use host::moe::path::{self as paths, PathChoice};
use host::moe::prefill::{Prefill, RoutingInput, StageTimes};
use host::moe::router;
use host::moe::tune::key as tune;
use host::problem::RouteRule;
use host::problem::{LayerWeights, MoeShape, Numerics};
use host::reference;
use host::synth::{self, Popularity, SyntheticLayer};
use host::{Error, Result};

use super::model;
use super::report::{check_sample, print_table};

mod cpu;
use cpu::cpu_model;
pub use cpu::cpu_only;

#[derive(Args, Clone)]
pub struct PrefillArgs {
    /// A GGUF model; without it, a synthetic layer of the reference shape.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Layer number, or "all" (GGUF only).
    #[arg(long, default_value = "first")]
    pub layer: String,
    /// Token counts to run.
    #[arg(long, num_args = 1.., default_values_t = [2048usize, 8192, 16384])]
    pub tokens: Vec<usize>,
    /// Gate/up weight type of the synthetic layer.
    #[arg(long, default_value = "q2_0")]
    pub gate_up: String,
    /// Down weight type of the synthetic layer.
    #[arg(long, default_value = "q2_0")]
    pub down: String,
    #[command(flatten)]
    pub shape: super::ShapeArgs,
    /// Routing of the synthetic layer: uniform, skewed (lognormal sigma 1.0), flat (every
    /// expert the same row count), or router.
    #[arg(long, default_value = "uniform")]
    pub routing: String,
    /// Compare with the CPU reference on a sample of tokens (on by default; --check false skips).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub check: bool,
    /// Expert path: mmq (per-group MMQ), fused (fused int8 experts), ws (weight-stationary:
    /// integer arithmetic, a thread per weight row) or auto (per run and per product the fastest
    /// by the tune table: `moe-prefill tune`'s for this GPU, else the built-in H200 one).
    #[arg(long, default_value = "auto")]
    pub path: String,
    /// Numerics of the products: mmq (ggml MMQ's; every path) or q2_0-shared-d (opt-in, not
    /// ggml's: a Q2_0 product takes one step per 64-value block, d (C0 dx0 + C1 dx1); the fused
    /// path only, checked against the reference computed the same way). Default: $MOE_NUMERICS,
    /// else mmq.
    #[arg(long)]
    pub numerics: Option<String>,
    /// Timed repetitions per token count.
    #[arg(long, default_value_t = 10)]
    pub reps: usize,
    /// Microseconds the GPU is held (`moe_hold`) before each run, so that the host has queued
    /// the whole layer before the GPU reaches it: the times are then the GPU's, as when layers
    /// run back to back. 0 runs each layer from an idle GPU, whose small first kernels then
    /// wait for the host's launches (about 10 us more at T = 512 on the H200). At most one
    /// second.
    #[arg(long, default_value_t = host::device::QUEUE_HOLD_US,
          value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub hold_us: u32,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

pub fn wtype(name: &str) -> Result<WType> {
    WType::ALL
        .into_iter()
        .find(|w| w.name() == name.to_ascii_lowercase())
        .ok_or_else(|| Error::Unsupported(format!("unknown weight type {name:?}; one of q8_0 q2_0 iq4_nl iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s")))
}

/// The synthetic layer's shape from the arguments, checked.
pub fn synthetic_shape(a: &PrefillArgs) -> Result<MoeShape> {
    let s = a.shape.shape(wtype(&a.gate_up)?, wtype(&a.down)?)?;
    Ok(s.with_numerics(numerics(a)?))
}

/// `--numerics`, else `MOE_NUMERICS`, else MMQ's.
pub fn numerics(a: &PrefillArgs) -> Result<Numerics> {
    match &a.numerics {
        Some(n) => n
            .parse()
            .map_err(|e| Error::Unsupported(format!("--numerics: {e}"))),
        None => Numerics::from_env(),
    }
}

/// `--path`, parsed.
pub fn path_choice(path: &str) -> Result<PathChoice> {
    path.parse()
        .map_err(|e| Error::Unsupported(format!("--path: {e}")))
}

/// The synthetic layer's routing from `--routing`: a popularity, or None for the router.
fn synthetic_routing(a: &PrefillArgs) -> Result<Option<Popularity>> {
    match a.routing.as_str() {
        "uniform" => Ok(Some(Popularity::Uniform)),
        "skewed" => Ok(Some(Popularity::Skewed { sigma: 1.0 })),
        "flat" => Ok(Some(Popularity::Flat)),
        "router" => Ok(None),
        r => Err(Error::Unsupported(format!(
            "unknown routing {r:?}: uniform, skewed, flat or router"
        ))),
    }
}

/// The command. Everything the arguments and the file can be checked for is checked before the
/// GPU is opened, so a mistake gives the same error with a GPU and without one.
pub fn run(a: &PrefillArgs) -> Result<()> {
    let choice = path_choice(&a.path)?;
    numerics(a)?;
    match &a.model {
        None => {
            synthetic_shape(a)?;
            synthetic_routing(a)?;
            match super::open_session()? {
                Some(s) => {
                    run_synthetic(&s, a)?;
                    println!("{}", s.gpu.kernels.load_summary());
                    Ok(())
                }
                None => cpu_only(a),
            }
        }
        Some(path) => {
            let f = GgufFile::open(path)?;
            let chosen = model::choose_layers(&f, &a.layer)?;
            match super::open_session()? {
                Some(s) => {
                    run_gguf(&s, a, &f, &chosen)?;
                    println!("{}", s.gpu.kernels.load_summary());
                    Ok(())
                }
                None => cpu_model(a, choice, &f, &chosen),
            }
        }
    }
}

/// The synthetic layer on an open GPU.
pub fn run_synthetic(session: &super::Session, a: &PrefillArgs) -> Result<()> {
    let (gpu, rates) = (&session.gpu, session.rates);
    let s = synthetic_shape(a)?;
    let pop = synthetic_routing(a)?;
    let layer = SyntheticLayer::new(s, false, a.seed)?;
    println!(
        "synthetic layer: {}, {} MB of weights; {} routing",
        s.summary(),
        s.weight_bytes() / 1_000_000,
        a.routing
    );
    let rule = RouteRule {
        n_experts: s.n_experts,
        top_k: s.top_k,
        norm: true,
        scale: 1.0,
    };
    run_layer(
        gpu,
        a,
        &layer.weights(),
        &s,
        pop,
        &layer.router,
        rule,
        rates,
    )
}

/// A file's chosen layers (checked by `model::choose_layers`) on an open GPU.
fn run_gguf(
    session: &super::Session,
    a: &PrefillArgs,
    f: &GgufFile,
    chosen: &model::ChosenLayers,
) -> Result<()> {
    let (gpu, rates) = (&session.gpu, session.rates);
    println!("{}", chosen.summary(f));
    // A forced path that cannot run one of the layers is refused before any layer runs.
    let choice = path_choice(&a.path)?;
    let numerics = numerics(a)?;
    for (l, s) in &chosen.layers {
        let s = &s.with_numerics(numerics);
        paths::explain(choice, s, &gpu.limits(), &tune::for_gpu(gpu))
            .map_err(|e| Error::Unsupported(format!("layer {}: {e}", l.layer)))?;
    }
    let n = chosen.layers.len();
    for (i, (l, _)) in chosen.layers.iter().enumerate() {
        eprintln!("[layer {}/{n}] blk.{}", i + 1, l.layer);
        let fl = host::moe::model::file_layer(f, l)?;
        run_layer(
            gpu,
            a,
            &fl.weights,
            &fl.shape.with_numerics(numerics),
            None,
            &fl.router,
            fl.rule,
            rates,
        )?;
    }
    Ok(())
}

/// Timing and parity of one layer at every token count.
#[allow(clippy::too_many_arguments)]
fn run_layer(
    gpu: &Gpu,
    a: &PrefillArgs,
    w: &LayerWeights,
    s: &MoeShape,
    pop: Option<Popularity>,
    router_w: &[f32],
    rule: RouteRule,
    rates: super::Rates,
) -> Result<()> {
    let dev = DeviceLayer::upload(gpu, w, s)?;
    let cap = a.tokens.iter().copied().max().unwrap_or(0);
    let choice = path_choice(&a.path)?;
    println!(
        "expert path: {}",
        paths::explain(choice, s, &gpu.limits(), &tune::for_gpu(gpu))?
    );
    println!(
        "{}",
        MmqTma::from_env()?.describe(&dev.ptrs(gpu), gpu.info.ptx_arch)
    );
    println!("{}", timing_line(a.hold_us));
    println!("{}", launch_line(gpu.pdl));
    let mut pf = Prefill::new(gpu, s, cap, choice)?;
    for &t in &a.tokens {
        let x = host::synth::normal_f32(a.seed ^ t as u64, t * s.hidden, 1.0);
        let dx = gpu.upload(&x)?;
        let (routing, logits) = match pop {
            Some(p) => (
                synth::routing(t, s.n_experts, s.top_k, p, a.seed ^ 0x5eed ^ t as u64),
                None,
            ),
            None => {
                let l = router::logits(&x, router_w, s.n_experts, s.hidden);
                (reference::route::route(&l, t, &rule), Some(gpu.upload(&l)?))
            }
        };
        if logits.is_none() {
            // A given routing is uploaded once, outside the timed runs.
            pf.upload_routing(gpu, &routing)?;
        }
        let input = || match &logits {
            Some(l) => RoutingInput::Logits(l, rule),
            None => RoutingInput::Uploaded,
        };
        let run = |pf: &mut Prefill| -> Result<StageTimes> {
            if a.hold_us > 0 {
                gpu.hold(a.hold_us)?;
            }
            pf.run(gpu, &dev, &dx, t, input())
        };
        for _ in 0..2 {
            run(&mut pf)?;
        }
        let mut runs: Vec<StageTimes> = Vec::new();
        for _ in 0..a.reps.max(1) {
            runs.push(run(&mut pf)?);
        }
        // The same runs with events only at the layer's start and end.
        pf.set_stage_events(false);
        let mut bare = Vec::new();
        for _ in 0..a.reps.max(1) {
            bare.push(run(&mut pf)?.total);
        }
        pf.set_stage_events(true);
        let parity = if a.check {
            Some(check_sample(gpu, &pf, &x, &routing, w, s)?)
        } else {
            None
        };
        print_table(s, t, &runs, rates, parity, logits.is_some(), &pf);
        let b = host::timing::Stats::of(bare);
        println!(
            "  layer without the events between stages: {:.3} ms median (spread {:.3}-{:.3}, {} runs)",
            b.median, b.min, b.max, b.n
        );
    }
    Ok(())
}

/// How the layer's kernels are queued, for the table's header.
pub fn launch_line(pdl: bool) -> String {
    if pdl {
        "launches: programmatic dependent launches (each kernel's CTAs scheduled during the last wave of the one before, waiting there for it; MOE_PDL=off: plain)".to_string()
    } else {
        "launches: plain (programmatic dependent launch needs the sm_90 module; off by MOE_PDL=off)"
            .to_string()
    }
}

/// How the runs are timed, for the table's header.
pub fn timing_line(hold_us: u32) -> String {
    if hold_us > 0 {
        format!(
            "timing: CUDA events around each stage; each run queued behind a {hold_us} us hold, so the times are the GPU's (--hold-us 0: from an idle GPU, with the host's launch latency)"
        )
    } else {
        "timing: CUDA events around each stage; each run from an idle GPU (its first kernels wait for the host's launches)".to_string()
    }
}
