//! What `moe-prefill prefill` prints of a layer: the stage table with rates, the H200 floors,
//! llama.cpp's figure, and the parity check on sampled tokens against the CPU reference.

use gpu::layout::{MMQ_BLOCK_VALUES, Q8_1_MMQ_BYTES, WType, padded_k};
use host::device::Gpu;
use host::moe::expert::split::GATE_UP_SWIGLU;
use host::moe::prefill::{Prefill, StageTimes};
use host::problem::{LayerWeights, MoeShape, Routing, SwigluQuantShape};
use host::reference;
use host::timing::Stats;
use host::{Error, Result};

/// Tokens whose outputs are compared with the CPU reference.
pub const SAMPLE: usize = 48;

/// llama.cpp's CUDA backend on the same layer and GPU (issue figures, median ms of the FFN):
/// (gate/up, down, [T=512, 2048, 8192, 16384]).
const LLAMA_CPP: [(WType, WType, [f64; 4]); 4] = [
    (WType::Iq2Xxs, WType::Q2_0, [3.89, 5.89, 16.83, 32.29]),
    (WType::Iq3S, WType::Iq4Nl, [4.29, 6.31, 17.57, 33.41]),
    (WType::Q2_0, WType::Q2_0, [3.76, 5.77, 16.48, 31.83]),
    (WType::Iq2S, WType::Iq4Nl, [4.88, 6.89, 18.71, 35.06]),
];

/// llama.cpp's time for this pair and token count, where the issue gives one.
pub fn llama_cpp_ms(g: WType, d: WType, t: usize) -> Option<f64> {
    let i = [512, 2048, 8192, 16384].iter().position(|&x| x == t)?;
    LLAMA_CPP
        .iter()
        .find(|r| r.0 == g && r.1 == d)
        .map(|r| r.2[i])
}

/// Compares the outputs of `SAMPLE` tokens spread over the batch with the CPU reference run on
/// those tokens alone (a token's output depends only on its own activations and routing).
pub fn check_sample(
    gpu: &Gpu,
    pf: &Prefill,
    x: &[f32],
    r: &Routing,
    w: &LayerWeights,
    s: &MoeShape,
) -> Result<(usize, usize)> {
    let t = r.n_tokens;
    let picks: Vec<usize> = if t <= SAMPLE {
        (0..t).collect()
    } else {
        (0..SAMPLE).map(|i| i * (t - 1) / (SAMPLE - 1)).collect()
    };
    let k = r.top_k;
    let sub = Routing {
        n_tokens: picks.len(),
        top_k: k,
        ids: picks
            .iter()
            .flat_map(|&p| r.ids[p * k..(p + 1) * k].iter().copied())
            .collect(),
        weights: picks
            .iter()
            .flat_map(|&p| r.weights[p * k..(p + 1) * k].iter().copied())
            .collect(),
    };
    let xs: Vec<f32> = picks
        .iter()
        .flat_map(|&p| x[p * s.hidden..(p + 1) * s.hidden].iter().copied())
        .collect();
    let want = reference::prefill(&xs, &sub, w, s).out;
    let got = pf.output(gpu)?;
    let mut diff = 0;
    for (i, &p) in picks.iter().enumerate() {
        let g = &got[p * s.hidden..(p + 1) * s.hidden];
        let wv = &want[i * s.hidden..(i + 1) * s.hidden];
        diff += g
            .iter()
            .zip(wv)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count()
            * 4;
    }
    let total = picks.len() * s.hidden * 4;
    if diff != 0 {
        return Err(Error::Mismatch(format!(
            "layer output of {} sampled tokens: {diff} of {total} bytes differ",
            picks.len()
        )));
    }
    Ok((diff, total))
}

pub fn print_table(
    s: &MoeShape,
    t: usize,
    runs: &[StageTimes],
    rates: super::Rates,
    parity: Option<(usize, usize)>,
    routed_on_gpu: bool,
    pf: &Prefill,
) {
    let rows = (t * s.top_k) as f64;
    let med = |f: &dyn Fn(&StageTimes) -> f64| Stats::of(runs.iter().map(f).collect());
    let total = med(&|r| r.total);
    let names = runs[0].names.clone();
    let stages: Vec<Stats> = (0..names.len())
        .map(|i| med(&|r: &StageTimes| r.ms[i]))
        .collect();
    let (h, ff) = (s.hidden as f64, s.ffn as f64);
    let act = |k: usize| (padded_k(k) / MMQ_BLOCK_VALUES * Q8_1_MMQ_BYTES) as f64;
    let gate_up_ops = 2.0 * rows * 2.0 * ff * h;
    let down_ops = 2.0 * rows * h * ff;
    // The work of each stage a path may have, with its unit.
    let work = |name: &str| -> (f64, &str) {
        match name {
            "route" => (t as f64 * s.n_experts as f64 * 4.0, "GB/s"),
            "scatter" => (t as f64 * h * 4.0 + rows * act(s.hidden), "GB/s"),
            "gate_up" | GATE_UP_SWIGLU => (gate_up_ops, "TOPS"),
            "swiglu_quant" => (
                SwigluQuantShape::layer(t * s.top_k, s.ffn).fused_bytes() as f64,
                "GB/s",
            ),
            "down" => (down_ops, "TOPS"),
            "experts (fused)" => (gate_up_ops + down_ops, "TOPS"),
            "combine" => (rows * h * 4.0 + t as f64 * h * 4.0, "GB/s"),
            _ => (0.0, ""),
        }
    };
    println!(
        "\nT = {t} ({} rows), path {}: layer {:.3} ms median (spread {:.3}-{:.3}, {} runs), {:.0} TOPS int8",
        t * s.top_k,
        pf.label(),
        total.median,
        total.min,
        total.max,
        total.n,
        s.ops(t) as f64 / (total.median * 1e-3) / 1e12
    );
    if let Some(why) = pf.why() {
        println!("  auto: {why}");
    }
    println!("  {}", pf.describe());
    println!("  scatter: {}", pf.scatter_form());
    println!(
        "  {:<16} {:>9} {:>7} {:>10}",
        "stage", "ms", "share", "rate"
    );
    for (i, name) in names.iter().enumerate() {
        let m = stages[i].median;
        let (w, unit) = work(name);
        let rate = if w > 0.0 && m > 0.0 {
            let v = w / (m * 1e-3);
            if unit == "TOPS" {
                format!("{:.0} {unit}", v / 1e12)
            } else {
                format!("{:.0} {unit}", v / 1e9)
            }
        } else {
            String::new()
        };
        // The route stage reads the logits only when moe_route runs; a given routing was
        // uploaded before the timed runs and the stage is empty (two adjacent events).
        let rate = if i == 0 && !routed_on_gpu {
            "(given, uploaded before timing)".to_string()
        } else {
            rate
        };
        println!(
            "  {:<16} {:>9.4} {:>6.1}% {:>10}",
            name,
            m,
            100.0 * m / total.median,
            rate
        );
    }
    let (floor_w, floor_mma, floor_fp) = host::timing::floors_ms(s, t, rates.read_gbs * 1e9);
    println!(
        "  floors: weights read once {floor_w:.3} ms ({} MB at the {:.0} GB/s read-only rate measured here); int8 work {floor_mma:.3} ms at the H200's 1,285 TOPS (mma.sync); MMQ scale steps {floor_fp:.3} ms of the H200's FP32 issue",
        s.weight_bytes() / 1_000_000,
        rates.read_gbs,
    );
    if let Some(l) = llama_cpp_ms(s.gate_up_type, s.down_type, t) {
        println!(
            "  llama.cpp CUDA (issue figure): {l:.2} ms -> this path is {:.1}x faster",
            l / total.median
        );
    }
    if let Some((d, n)) = parity {
        println!(
            "  parity with the CPU reference ({SAMPLE} sampled tokens): {d} of {n} bytes differ"
        );
    }
}
