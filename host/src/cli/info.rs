//! `moe-prefill info`: build and device facts; with `--model`, a GGUF file's MoE layers (weight
//! types, which expert paths can run each and why not) and its other tensors, from the header
//! alone: the tensor data is mapped, never read, so a multi-GB file takes milliseconds.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use host::device::{DeviceLimits, Gpu, kernel_names, kernel_names_in};
use host::gguf::{GgufFile, TensorInfo, is_moe_tensor_name};
use host::moe::expert::auto;
use host::moe::model::layer_shape;
use host::moe::path::{self as paths, ExpertPath};
use host::moe::tune::key::{self as tune, Tuning};
use host::ptx::MODULES;
use host::{Error, Result};

use super::model::{moe_blocks, ranges};

#[derive(Args, Clone)]
pub struct InfoArgs {
    /// A GGUF model to describe (its MoE layers and which expert paths can run them) instead of
    /// the build and the device. Reads the file's header only.
    #[arg(long)]
    pub model: Option<PathBuf>,
}

pub fn run(a: &InfoArgs) -> Result<()> {
    match &a.model {
        Some(path) => model(path),
        None => build_and_device(),
    }
}

fn build_and_device() -> Result<()> {
    let targets: Vec<String> = MODULES
        .iter()
        .map(|(a, p)| format!("sm_{a} ({} KB)", p.len() / 1024))
        .collect();
    println!("PTX targets built: {}", targets.join(", "));
    println!("kernels: {}", kernel_names().join(", "));
    println!("CPU threads for the reference: {}", host::par::threads());
    match Gpu::open() {
        Ok(g) => {
            let i = &g.info;
            println!(
                "device: {} | compute capability {}.{} | {} SMs | L2 {} MB | shared memory opt-in {} KB/block | driver {}.{}",
                i.name,
                i.cc / 10,
                i.cc % 10,
                i.sm_count,
                i.l2_bytes >> 20,
                i.max_smem_optin >> 10,
                i.driver_version / 1000,
                i.driver_version % 1000 / 10
            );
            println!(
                "loaded PTX: sm_{} ({} kernels resolved)",
                i.ptx_arch,
                kernel_names_in(i.ptx_arch).len()
            );
        }
        Err(e) => println!("{e}"),
    }
    Ok(())
}

/// llama.cpp's names of `expert_gating_func` values.
fn gating_name(g: u32) -> &'static str {
    match g {
        1 => "softmax",
        2 => "sigmoid",
        3 => "softmax over the selected",
        4 => "sqrt(softplus)",
        _ => "unknown",
    }
}

/// `info --model`: the file's routing shape, each MoE layer (runs of layers with the same
/// description as one entry) and the tensors outside the MoE layers.
fn model(path: &Path) -> Result<()> {
    let t0 = Instant::now();
    let f = GgufFile::open(path)?;
    let info = f.model_info()?;
    let blocks = moe_blocks(&f, &info);
    if blocks.is_empty() {
        // Its error says what a MoE layer is and that the file has none.
        f.moe_layers()?;
    }
    let limits = || -> (DeviceLimits, String, Arc<Tuning>) {
        match Gpu::open() {
            Ok(g) => {
                let i = &g.info;
                let line = format!(
                    "expert paths judged for this machine's GPU: {} (compute capability {}.{}, {} SMs, {} KB shared memory per block)",
                    i.name,
                    i.cc / 10,
                    i.cc % 10,
                    i.sm_count,
                    i.max_smem_optin >> 10
                );
                (g.limits(), line, tune::for_gpu(&g))
            }
            Err(e) => {
                let d = DeviceLimits::default();
                let line = format!(
                    "{e}; expert paths judged with the default limits (DeviceLimits::default(): compute capability {}.{}, {} SMs, {} KB shared memory per block)",
                    d.cc / 10,
                    d.cc % 10,
                    d.sm_count,
                    d.max_smem_optin >> 10
                );
                (d, line, tune::without_gpu())
            }
        }
    };
    // The file first (cheap, and its errors come before any GPU start), then the device.
    let header_ms = t0.elapsed().as_secs_f64() * 1e3;
    let (dev, dev_line, tuning) = limits();
    let mut layers: Vec<(Vec<usize>, Vec<String>)> = Vec::new();
    for &n in &blocks {
        let lines = layer_lines(&f, n, &dev, &tuning);
        match layers.last_mut() {
            Some((ns, prev)) if *prev == lines => ns.push(n),
            _ => layers.push((vec![n], lines)),
        }
    }

    println!(
        "{}: GGUF v{}, {} tensors, {} metadata keys, {:.2} GB; header read in {header_ms:.1} ms",
        path.display(),
        f.version(),
        f.tensors().len(),
        f.metadata().len(),
        f.bytes().len() as f64 / 1e9
    );
    if let Some(name) = f.get_str("general.name") {
        println!("name: {name}");
    }
    println!(
        "architecture: {}, {} layers, {} MoE ({})",
        info.arch,
        info.n_layers,
        blocks.len(),
        ranges(&blocks)
    );
    println!(
        "experts: {}, top-{} (weights {}, scale {}, {} gating)",
        info.n_expert,
        info.n_expert_used,
        if info.expert_weights_norm {
            "normalised"
        } else {
            "not normalised"
        },
        info.expert_weights_scale,
        gating_name(info.gating_func)
    );
    println!("hidden {}, expert FFN {}", info.n_embd, info.n_ff_exp);
    println!("{dev_line}");
    println!("auto's tune table: {}", tuning.describe());
    for (ns, lines) in &layers {
        let s = if ns.len() > 1 { "s" } else { "" };
        println!("layer{s} {}:", ranges(ns));
        for l in lines {
            println!("  {l}");
        }
    }
    print_other_tensors(&f);
    Ok(())
}

/// What `info --model` says of MoE layer `n`: its tensors' types and sizes, then whether this
/// build runs it and, if so, which expert paths can run it on `dev` and why not, and what auto
/// picks at which rows per routed expert by `tuning`.
fn layer_lines(f: &GgufFile, n: usize, dev: &DeviceLimits, tuning: &Tuning) -> Vec<String> {
    // The file's path leads every Gguf error; under the file's own heading it is noise.
    let msg = |e: Error| match e {
        Error::Gguf { msg, .. } => msg,
        e => e.to_string(),
    };
    let l = match f.moe_layer(n) {
        Ok(l) => l,
        Err(e) => return vec![format!("malformed: {}", msg(e))],
    };
    let mb = |ts: &[Option<&TensorInfo>]| {
        ts.iter().flatten().map(|t| t.n_bytes).sum::<u64>() as f64 / 1e6
    };
    let (gate, up, merged) = (
        l.gate.map(|t| t.info),
        l.up.map(|t| t.info),
        l.gate_up.map(|t| t.info),
    );
    let gate_up = match (gate, merged) {
        (Some(g), _) => format!(
            "gate/up {} (separate ffn_gate_exps and ffn_up_exps)",
            g.type_name()
        ),
        (None, Some(m)) => format!("gate/up {} (merged ffn_gate_up_exps)", m.type_name()),
        (None, None) => "no gate/up".into(),
    };
    let mut lines = vec![format!(
        "{gate_up}, down {}, router {}; {:.1} MB of expert weights",
        l.down.info.type_name(),
        l.router.info.type_name(),
        mb(&[gate, up, merged, Some(l.down.info)])
    )];
    let s = match layer_shape(f, &l) {
        Ok(s) => s,
        Err(e) => {
            lines.push(format!("cannot run: {}", msg(e)));
            return lines;
        }
    };
    for p in ExpertPath::ALL {
        lines.push(match paths::eligible(p, &s, dev) {
            Ok(()) => format!("{}: eligible", p.name()),
            Err(e) => format!("{}: not eligible: {e}", p.name()),
        });
    }
    let preferred: Vec<&str> = paths::preferred(&s, dev)
        .into_iter()
        .map(ExpertPath::name)
        .collect();
    lines.push(if preferred.is_empty() {
        "auto: no path can run this layer".into()
    } else {
        format!(
            "auto: picks per run among {}: {} (table: {})",
            preferred.join(", "),
            auto::summary(tuning, s.gate_up_type, s.down_type, paths::allowed(&s, dev)),
            tuning.source
        )
    });
    lines
}

/// The tensors outside the MoE layers' routing and experts (embeddings, attention, norms, dense
/// FFNs, ...), one line per name pattern (`blk.*.` for per-layer ones), type and shape.
fn print_other_tensors(f: &GgufFile) {
    let others: Vec<&TensorInfo> = f
        .tensors()
        .iter()
        .filter(|t| !is_moe_tensor_name(&t.name))
        .collect();
    if others.is_empty() {
        println!("other tensors (not MoE router or expert tensors): none");
        return;
    }
    println!(
        "other tensors (not MoE router or expert tensors): {}, {:.1} MB",
        others.len(),
        others.iter().map(|t| t.n_bytes).sum::<u64>() as f64 / 1e6
    );
    // (pattern, type, dims) -> the blocks it occurs in, in file order.
    let mut groups: Vec<(String, String, Vec<u64>, Vec<usize>)> = Vec::new();
    for t in others {
        let (pattern, block) = match t
            .name
            .strip_prefix("blk.")
            .and_then(|r| r.split_once('.'))
            .and_then(|(n, local)| Some((n.parse::<usize>().ok()?, local)))
        {
            Some((n, local)) => (format!("blk.*.{local}"), Some(n)),
            None => (t.name.clone(), None),
        };
        let key = (pattern, t.type_name(), t.dims.clone());
        match groups
            .iter_mut()
            .find(|g| (&g.0, &g.1, &g.2) == (&key.0, &key.1, &key.2))
        {
            Some(g) => g.3.extend(block),
            None => groups.push((key.0, key.1, key.2, block.into_iter().collect())),
        }
    }
    for (pattern, ty, dims, mut blocks) in groups {
        blocks.sort_unstable();
        let in_blocks = if blocks.is_empty() {
            String::new()
        } else {
            format!(" in layers {}", ranges(&blocks))
        };
        println!("  {pattern} {ty} {dims:?}{in_blocks}");
    }
}
