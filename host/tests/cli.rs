//! The `moe-prefill` binary on model files, without a GPU: a missing, malformed or unsupported
//! file, a layer out of range and an unknown `--path` are errors naming what is wrong, with exit
//! code 1, before any GPU is opened; `prefill --model` runs the CPU reference on the file's own
//! layers, routed by its own router; `info --model` lists the layers, which expert paths can
//! run them and what auto picks, from the header alone; `tune` checks its arguments and, with
//! nothing to measure, is an error without a GPU.
//!
//! Runs that must not see a GPU set `CUDA_VISIBLE_DEVICES` to empty, so these tests check the
//! same behaviour on a machine with one.

#[path = "cli/common.rs"]
mod common;
#[path = "cli/errors.rs"]
mod errors;

use common::*;
use std::io::Write;
use std::path::Path;

use host::gguf::{self, TensorSpec, Value};
use host::moe::model::file_layer;
use host::moe::router;
use host::problem::MoeShape;
use host::reference;

#[test]
fn prefill_model_without_gpu_runs_the_files_layers() {
    let m = small_model("prefill");
    let all = no_gpu(&[
        "prefill",
        "--model",
        m.path(),
        "--layer",
        "all",
        "--tokens",
        "5",
        "512",
    ]);
    all.ok(&[
        "no CUDA GPU available",
        &format!(
            "{}: qwen3moe (2 layers, 2 MoE), E=8 top-2 hidden 256 FFN 128",
            m.path()
        ),
        "expert path on a GPU with the default limits (no GPU here), layers 0-1: auto:",
        "layer 0: CPU reference, 5 tokens routed by the model's router (iq2_xxs/iq4_nl,",
        "layer 1: CPU reference, 5 tokens routed by the model's router (iq2_xxs/iq4_nl,",
    ]);
    assert!(all.stderr.contains("[layer 2/2] blk.1"), "{}", all.show());

    // The printed figures are the reference's on the file's layer 1, routed by its router, with
    // the command's activations (seed 1 ^ T): a run that ignored the file, the layer or the
    // router would print other figures.
    let f = gguf::GgufFile::open(&m.0).expect("open");
    let layers = f.moe_layers().expect("layers");
    let fl = file_layer(&f, &layers[1]).expect("layer 1");
    let (t, s) = (5, fl.shape);
    let x = host::synth::normal_f32(1 ^ t as u64, t * s.hidden, 1.0);
    let logits = router::logits(&x, &fl.router, s.n_experts, s.hidden);
    let r = reference::route::route(&logits, t, &fl.rule);
    let out = reference::prefill(&x, &r, &fl.weights, &s).out;
    let rms = (out.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / out.len() as f64).sqrt();
    let line = all
        .stdout
        .lines()
        .find(|l| l.starts_with("layer 1: CPU reference"))
        .expect("layer 1's line");
    assert_eq!(
        format!("{:.4}", number_after(line, "output rms")),
        format!("{rms:.4}"),
        "{line}"
    );
    assert!(rms > 0.0);

    // The default layer is the first MoE layer, at 16 tokens; --layer N runs that layer alone.
    let first = no_gpu(&["prefill", "--model", m.path()]);
    first.ok(&["layer 0: CPU reference, 16 tokens"]);
    assert!(!first.stdout.contains("layer 1:"), "{}", first.show());
    let one = no_gpu(&[
        "prefill",
        "--model",
        m.path(),
        "--layer",
        "1",
        "--tokens",
        "5",
    ]);
    one.ok(&["layer 1: CPU reference, 5 tokens"]);
    assert!(!one.stdout.contains("layer 0:"), "{}", one.show());
    // The same figures as in the run of both layers (the time aside).
    let figures = |l: &str| l[l.find("output rms").expect("figures")..].to_string();
    let alone = one
        .stdout
        .lines()
        .find(|l| l.starts_with("layer 1: CPU reference"))
        .expect("layer 1's line");
    assert_eq!(figures(alone), figures(line));
}

#[test]
fn info_model_lists_layers_and_path_eligibility() {
    let m = small_model("info");
    no_gpu(&["info", "--model", m.path()]).ok(&[
        "GGUF v3, 8 tensors",
        "architecture: qwen3moe, 2 layers, 2 MoE (0-1)",
        "experts: 8, top-2 (weights normalised, scale 1, softmax gating)",
        "hidden 256, expert FFN 128",
        "expert paths judged with the default limits (DeviceLimits::default()",
        "layers 0-1:\n  gate/up iq2_xxs (separate ffn_gate_exps and ffn_up_exps), down iq4_nl, router f32;",
        "auto's tune table: built-in NVIDIA H200; no GPU to look up a measured table for\n",
        "  mmq: eligible\n  fused: eligible\n  ws: eligible\n  auto: picks per run among fused, mmq, ws: \
         mmq at 1+ rows per routed expert (table: built-in NVIDIA H200)\n",
        "other tensors (not MoE router or expert tensors): none",
    ]);

    let x = mixed_model("info-mixed");
    no_gpu(&["info", "--model", x.path()]).ok(&[
        "architecture: qwen3moe, 4 layers, 3 MoE (0-1, 3)",
        "hidden 256, expert FFN 256",
        "layer 0:\n  gate/up iq2_xxs (separate ffn_gate_exps and ffn_up_exps), down iq4_nl, router f32;",
        "layer 0:\n  gate/up iq2_xxs (separate ffn_gate_exps and ffn_up_exps), down iq4_nl, router f32; 0.6 MB of expert weights\n  mmq: eligible\n  fused: eligible\n",
        "layer 1:\n  gate/up q2_0 (merged ffn_gate_up_exps), down iq2_xxs, router f32;",
        "  mmq: eligible\n  fused: not eligible: the fused path decodes down types q2_0, iq4_nl and q8_0, not iq2_xxs\n",
        "  auto: picks per run among mmq, ws: mmq at 1+ rows per routed expert (table: built-in \
         NVIDIA H200)\n",
        "layer 3:\n  gate/up iq2_xxs (separate ffn_gate_exps and ffn_up_exps), down q4_K, router f32;",
        "  cannot run: layer 3: tensor blk.3.ffn_down_exps.weight is q4_K;",
        "other tensors (not MoE router or expert tensors): 6,",
        "  token_embd.weight q8_0 [256, 32]\n",
        "  blk.*.attn_norm.weight f32 [256] in layers 0-3\n",
        "  blk.*.ffn_down.weight f32 [256, 256] in layers 2\n",
    ]);
}

/// `info --model` reads the header only: on a sparse file of 48 reference-shape layers (34 GB,
/// which takes tens of seconds to read on this project's machines) it answers at once. The one
/// timing in these tests: nothing else shows that the data is never read.
#[test]
fn info_model_reads_the_header_only() {
    let s = MoeShape::REFERENCE;
    let n_layers = 48;
    let (h, f, e) = (s.hidden as u64, s.ffn as u64, s.n_experts as u64);
    let a = "qwen3moe";
    let md = vec![
        kv("general.architecture", Value::Str(a.into())),
        kv(&format!("{a}.block_count"), Value::U32(n_layers)),
        kv(
            &format!("{a}.embedding_length"),
            Value::U32(s.hidden as u32),
        ),
        kv(&format!("{a}.expert_count"), Value::U32(s.n_experts as u32)),
        kv(
            &format!("{a}.expert_used_count"),
            Value::U32(s.top_k as u32),
        ),
        kv(
            &format!("{a}.expert_feed_forward_length"),
            Value::U32(s.ffn as u32),
        ),
    ];
    let q2 = s.gate_up_type.id();
    let specs: Vec<TensorSpec> = (0..n_layers)
        .flat_map(|l| {
            [
                TensorSpec::new(format!("blk.{l}.ffn_gate_inp.weight"), &[h, e], 0),
                TensorSpec::new(format!("blk.{l}.ffn_gate_exps.weight"), &[h, f, e], q2),
                TensorSpec::new(format!("blk.{l}.ffn_up_exps.weight"), &[h, f, e], q2),
                TensorSpec::new(format!("blk.{l}.ffn_down_exps.weight"), &[f, h, e], q2),
            ]
        })
        .collect();
    // The writer streams zeros into a sink that keeps the header; the file is that header
    // extended sparsely to the full size, which is exactly what the writer would have written.
    let mut sink = HeadSink::default();
    let zeros = vec![0u8; 1 << 20];
    let total = gguf::write_to(&mut sink, Path::new("<sink>"), &md, &specs, 32, |i, out| {
        let mut left = specs[i].n_bytes().expect("valid") as usize;
        while left > 0 {
            let n = left.min(zeros.len());
            out.write_all(&zeros[..n])?;
            left -= n;
        }
        Ok(())
    })
    .expect("the writer should accept this");
    assert!(total > 30_000_000_000, "{total}");
    let t = Temp::new("sparse");
    {
        let mut file = std::fs::File::create(&t.0).expect("create");
        file.write_all(&sink.kept).expect("write the header");
        file.set_len(total).expect("extend sparsely");
    }
    // No time is asserted (timings live in benches and the CLI): reading 34 GB instead of the
    // header would show as a run of minutes, not as a failure.
    let run = no_gpu(&["info", "--model", t.path()]);
    run.ok(&[
        "architecture: qwen3moe, 48 layers, 48 MoE (0-47)",
        "layers 0-47:\n  gate/up q2_0 (separate ffn_gate_exps and ffn_up_exps), down q2_0, router f32; 707.8 MB of expert weights\n  mmq: eligible\n  fused: eligible\n",
    ]);
}

/// Keeps the first MiB written, counts the rest.
#[derive(Default)]
struct HeadSink {
    kept: Vec<u8>,
    total: u64,
}

impl Write for HeadSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let keep = buf
            .len()
            .min((1usize << 20).saturating_sub(self.kept.len()));
        self.kept.extend_from_slice(&buf[..keep]);
        self.total += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
