//! `moe-prefill tune`'s measurements: one ladder point of one format pair, each eligible path
//! timed on its own pipeline, reduced to the table's six columns (medians).

use cudarc::driver::CudaSlice;
use host::Result;
use host::device::Gpu;
use host::moe::expert::split::GATE_UP_SWIGLU;
use host::moe::layer::DeviceLayer;
use host::moe::path::ExpertPath;
use host::moe::prefill::{Prefill, RoutingInput, StageTimes};
use host::moe::tune::{self as tune, Times};
use host::problem::{MoeShape, Routing};
use host::timing::Stats;

/// Untimed runs before the timed ones at each point and path.
pub const WARMUP: usize = 2;

/// One ladder point: rows per routed expert, tokens, and the uniform routing of those tokens.
pub struct Point {
    pub rows: usize,
    pub n_tokens: usize,
    pub routing: Routing,
}

/// The six columns of one ladder point: MMQ, weight-stationary and fused pipelines, each timed
/// `runs` times; `ok` says which paths can run the pair.
pub fn measure(
    gpu: &Gpu,
    s: &MoeShape,
    dev: &DeviceLayer,
    x: &CudaSlice<f32>,
    pt: &Point,
    runs: usize,
    ok: impl Fn(ExpertPath) -> bool,
) -> Result<Times> {
    let median = |v: Vec<f64>| (!v.is_empty()).then(|| Stats::of(v).median);
    let stage = |runs: &[StageTimes], name: &str| -> Option<f64> {
        median(runs.iter().filter_map(|r| r.stage(name)).collect())
    };
    let mut t = Times::default();
    let mut swiglu = Vec::new();
    // A gate/up product with the SwiGLU epilogue, counted as the product alone: its time less
    // the swiglu_quant kernel it replaces (measured on the other family where that runs).
    let mut with_swiglu = None;
    for (path, gate_up, down) in [
        (ExpertPath::Mmq, tune::GATE_UP_MMQ, tune::DOWN_MMQ),
        (ExpertPath::Ws, tune::GATE_UP_WS, tune::DOWN_WS),
    ] {
        if ok(path) {
            let r = time_path(gpu, s, dev, x, pt, path, runs)?;
            t.0[gate_up] = stage(&r, "gate_up");
            if t.0[gate_up].is_none() {
                with_swiglu = stage(&r, GATE_UP_SWIGLU).map(|v| (gate_up, v));
            }
            t.0[down] = stage(&r, "down");
            swiglu.extend(r.iter().filter_map(|r| r.stage("swiglu_quant")));
        }
    }
    t.0[tune::SWIGLU_QUANT] = median(swiglu);
    if let Some((i, v)) = with_swiglu {
        t.0[i] = Some(v - t.0[tune::SWIGLU_QUANT].unwrap_or(0.0));
    }
    if ok(ExpertPath::Fused) {
        let r = time_path(gpu, s, dev, x, pt, ExpertPath::Fused, runs)?;
        t.0[tune::FUSED] = median(r.iter().map(StageTimes::path_ms).collect());
    }
    Ok(t)
}

/// `runs` timed runs of one path at one point (routing uploaded once, outside the timing).
fn time_path(
    gpu: &Gpu,
    s: &MoeShape,
    dev: &DeviceLayer,
    x: &CudaSlice<f32>,
    pt: &Point,
    path: ExpertPath,
    runs: usize,
) -> Result<Vec<StageTimes>> {
    let mut pf = Prefill::new(gpu, s, pt.n_tokens, path)?;
    pf.upload_routing(gpu, &pt.routing)?;
    for _ in 0..WARMUP {
        pf.run(gpu, dev, x, pt.n_tokens, RoutingInput::Uploaded)?;
    }
    (0..runs)
        .map(|_| pf.run(gpu, dev, x, pt.n_tokens, RoutingInput::Uploaded))
        .collect()
}

/// Rows per routed expert of a routing, as auto computes them from the expert bounds.
pub fn routed_rows(r: &Routing, n_experts: usize) -> usize {
    let mut used = vec![false; n_experts];
    for &e in &r.ids {
        used[e as usize] = true;
    }
    r.ids.len() / used.iter().filter(|&&u| u).count().max(1)
}

/// "gate/up mmq 1.502 ws - | swiglu 0.034 | down mmq 0.819 ws - | fused 1.444".
pub fn columns(t: &Times) -> String {
    let v = |c: usize| t.0[c].map_or("-".to_string(), |v| format!("{v:.3}"));
    format!(
        "gate/up mmq {} ws {} | swiglu {} | down mmq {} ws {} | fused {}",
        v(tune::GATE_UP_MMQ),
        v(tune::GATE_UP_WS),
        v(tune::SWIGLU_QUANT),
        v(tune::DOWN_MMQ),
        v(tune::DOWN_WS),
        v(tune::FUSED)
    )
}
