//! `moe-prefill prefill` without a GPU: the CPU reference on a small batch of the synthetic
//! layer, or on a few tokens of each chosen layer of a GGUF file, after the same checks of the
//! arguments and the path a GPU run makes.

use host::device::DeviceLimits;
use host::gguf::GgufFile;
use host::moe::path::{self as paths, PathChoice};
use host::moe::router;
use host::moe::tune::key as tune;
use host::reference;
use host::synth::{self, Popularity, SyntheticLayer};
use host::{Error, Result};

use super::super::model;
use super::{PrefillArgs, numerics, path_choice, synthetic_routing, synthetic_shape};

/// Without a GPU: the CPU reference of a small batch of the synthetic layer.
pub fn cpu_only(a: &PrefillArgs) -> Result<()> {
    let s = synthetic_shape(a)?;
    synthetic_routing(a)?;
    // The path is checked as it would be on a GPU, against the default limits.
    paths::explain(
        path_choice(&a.path)?,
        &s,
        &DeviceLimits::default(),
        &tune::without_gpu(),
    )?;
    let t = 64;
    let t0 = std::time::Instant::now();
    let layer = SyntheticLayer::new(s, false, a.seed)?;
    let r = synth::routing(t, s.n_experts, s.top_k, Popularity::Uniform, a.seed);
    let x = host::synth::normal_f32(a.seed, t * s.hidden, 1.0);
    let t1 = std::time::Instant::now();
    let st = reference::prefill(&x, &r, &layer.weights(), &s);
    println!(
        "CPU reference of the synthetic layer ({}): {t} tokens in {:.2} s on {} threads (layer made in {:.2} s); output rms {:.3}",
        s.summary(),
        t1.elapsed().as_secs_f64(),
        host::par::threads(),
        (t1 - t0).as_secs_f64(),
        rms(&st.out)
    );
    Ok(())
}

/// Tokens of the CPU reference per file layer without a GPU (fewer when `--tokens` asks for
/// fewer): enough to exercise routing and every stage, few enough for seconds per layer.
const CPU_TOKENS: usize = 16;

/// Without a GPU: the CPU reference on a file's chosen layers, each routed by its own router
/// (logits, softmax and top-k on the CPU), a few tokens per layer.
pub(super) fn cpu_model(
    a: &PrefillArgs,
    choice: PathChoice,
    f: &GgufFile,
    chosen: &model::ChosenLayers,
) -> Result<()> {
    let dev = DeviceLimits::default();
    println!("{}", chosen.summary(f));
    // What a GPU would run, judged against the default limits; a forced path that cannot run
    // a layer is refused as on a GPU, before any layer runs.
    let mut whys: Vec<(Vec<usize>, String)> = Vec::new();
    let numerics = numerics(a)?;
    for (l, s) in &chosen.layers {
        let s = &s.with_numerics(numerics);
        let why = paths::explain(choice, s, &dev, &tune::without_gpu())
            .map_err(|e| Error::Unsupported(format!("layer {}: {e}", l.layer)))?;
        match whys.iter_mut().find(|w| w.1 == why) {
            Some(w) => w.0.push(l.layer),
            None => whys.push((vec![l.layer], why)),
        }
    }
    for (layers, why) in whys {
        let s = if layers.len() > 1 { "s" } else { "" };
        println!(
            "expert path on a GPU with the default limits (no GPU here), layer{s} {}: {why}",
            model::ranges(&layers)
        );
    }
    let t = a
        .tokens
        .iter()
        .copied()
        .min()
        .unwrap_or(CPU_TOKENS)
        .clamp(1, CPU_TOKENS);
    let n = chosen.layers.len();
    for (i, (l, _)) in chosen.layers.iter().enumerate() {
        eprintln!("[layer {}/{n}] blk.{}", i + 1, l.layer);
        let fl = host::moe::model::file_layer(f, l)?;
        let s = &fl.shape.with_numerics(numerics);
        let x = host::synth::normal_f32(a.seed ^ t as u64, t * s.hidden, 1.0);
        let t0 = std::time::Instant::now();
        let logits = router::logits(&x, &fl.router, s.n_experts, s.hidden);
        let r = reference::route::route(&logits, t, &fl.rule);
        let out = reference::prefill(&x, &r, &fl.weights, s).out;
        let secs = t0.elapsed().as_secs_f64();
        let mut used = vec![false; s.n_experts];
        for &e in &r.ids {
            used[e as usize] = true;
        }
        let max = out.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        println!(
            "layer {}: CPU reference, {t} tokens routed by the model's router ({}/{}{}, {} of {} experts used): {secs:.2} s on {} threads; output rms {:.4}, max |out| {max:.3}",
            l.layer,
            s.gate_up_type.name(),
            s.down_type.name(),
            s.numerics_note(),
            used.iter().filter(|&&u| u).count(),
            s.n_experts,
            host::par::threads(),
            rms(&out)
        );
    }
    Ok(())
}

/// Root mean square of `v` (NaN for an empty slice).
fn rms(v: &[f32]) -> f64 {
    (v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>() / v.len() as f64).sqrt()
}
