//! The `moe-prefill` binary on model files, without a GPU: a missing, malformed or unsupported
//! file, a layer out of range and an unknown `--path` are errors naming what is wrong, with exit
//! code 1, before any GPU is opened; `prefill --model` runs the CPU reference on the file's own
//! layers, routed by its own router; `info --model` lists the layers, which expert paths can
//! run them and what auto picks, from the header alone; `tune` checks its arguments and, with
//! nothing to measure, is an error without a GPU.
//!
//! Runs that must not see a GPU set `CUDA_VISIBLE_DEVICES` to empty, so these tests check the
//! same behaviour on a machine with one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gpu::layout::WType;
use host::gguf::{self, TensorSpec, Value};
use host::moe::model::{file_layer, write_synthetic_model};
use host::moe::router;
use host::problem::MoeShape;
use host::reference;
use host::synth::SyntheticLayer;

/// A file under the temp dir, removed when dropped.
struct Temp(PathBuf);

impl Temp {
    fn new(name: &str) -> Temp {
        Temp(std::env::temp_dir().join(format!(
            "moe-prefill-cli-{}-{name}.gguf",
            std::process::id()
        )))
    }
    fn path(&self) -> &str {
        self.0.to_str().expect("temp paths are UTF-8")
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn show(&self) -> String {
        format!(
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
    /// Asserts a successful run whose stdout has every line fragment of `want`.
    fn ok(&self, want: &[&str]) {
        assert_eq!(self.code, Some(0), "{}", self.show());
        for w in want {
            assert!(
                self.stdout.contains(w),
                "stdout lacks {w:?}\n{}",
                self.show()
            );
        }
    }
    /// Asserts exit code 1 with "error: " and every fragment of `want` on stderr, and that the
    /// checks came before any GPU work: nothing on stdout, where the no-GPU line or the
    /// device line would be.
    fn refused(&self, want: &[&str]) {
        assert_eq!(self.code, Some(1), "{}", self.show());
        assert!(self.stderr.starts_with("error: "), "{}", self.show());
        for w in want {
            assert!(
                self.stderr.contains(w),
                "stderr lacks {w:?}\n{}",
                self.show()
            );
        }
        assert_eq!(self.stdout, "", "output before the error\n{}", self.show());
    }
}

fn moe_prefill(args: &[&str], hide_gpu: bool) -> Run {
    let mut c = Command::new(env!("CARGO_BIN_EXE_moe-prefill"));
    c.args(args);
    if hide_gpu {
        c.env("CUDA_VISIBLE_DEVICES", "");
    }
    let Output {
        status,
        stdout,
        stderr,
    } = c.output().expect("the binary should start");
    Run {
        code: status.code(),
        stdout: String::from_utf8(stdout).expect("UTF-8 stdout"),
        stderr: String::from_utf8(stderr).expect("UTF-8 stderr"),
    }
}

/// Without a GPU, whatever the machine has.
fn no_gpu(args: &[&str]) -> Run {
    moe_prefill(args, true)
}

/// With the machine's GPU if it has one: for runs that must stop before it is opened.
fn any(args: &[&str]) -> Run {
    moe_prefill(args, false)
}

/// The small layer of these tests: the CPU reference of 16 tokens runs in milliseconds.
fn small() -> MoeShape {
    MoeShape {
        n_experts: 8,
        top_k: 2,
        hidden: 256,
        ffn: 128,
        gate_up_type: WType::Iq2Xxs,
        down_type: WType::Iq4Nl,
    }
}

/// A 2-layer synthetic model of the small shape (qwen3moe, separate gate and up).
fn small_model(name: &str) -> Temp {
    let t = Temp::new(name);
    write_synthetic_model(&t.0, &small(), 2, false, 7).expect("write the small model");
    t
}

fn kv(k: &str, v: Value) -> (String, Value) {
    (k.to_string(), v)
}

/// A 4-block model (hidden 256, FFN 256, 8 experts, top-2) with the other tensors a real model
/// has: block 0 separate iq2_xxs gate/up with iq4_nl down (every built path runs it); block 1
/// merged q2_0 gate/up with iq2_xxs down (MMQ only: the fused path has no iq2_xxs down); block 2
/// dense (no experts); block 3 a q4_K down (a type this build does not run).
fn mixed_model(name: &str) -> Temp {
    let t = Temp::new(name);
    let (h, f, e) = (256u64, 256u64, 8u64);
    let l0 = MoeShape {
        ffn: 256,
        ..small()
    };
    let l1 = MoeShape {
        gate_up_type: WType::Q2_0,
        down_type: WType::Iq2Xxs,
        ..l0
    };
    let (s0, s1) = (
        SyntheticLayer::new(l0, false, 1).expect("layer 0"),
        SyntheticLayer::new(l1, true, 2).expect("layer 1"),
    );
    let a = "qwen3moe";
    let md = vec![
        kv("general.architecture", Value::Str(a.into())),
        kv(&format!("{a}.block_count"), Value::U32(4)),
        kv(&format!("{a}.embedding_length"), Value::U32(256)),
        kv(&format!("{a}.expert_count"), Value::U32(8)),
        kv(&format!("{a}.expert_used_count"), Value::U32(2)),
        kv(&format!("{a}.expert_feed_forward_length"), Value::U32(256)),
    ];
    let mut specs = vec![TensorSpec::new("token_embd.weight", &[h, 32], 8)];
    for b in 0..4 {
        specs.push(TensorSpec::new(
            format!("blk.{b}.attn_norm.weight"),
            &[h],
            0,
        ));
    }
    let (gu0, d0, gu1, d1) = (
        l0.gate_up_type.id(),
        l0.down_type.id(),
        l1.gate_up_type.id(),
        l1.down_type.id(),
    );
    specs.extend([
        TensorSpec::new("blk.0.ffn_gate_inp.weight", &[h, e], 0),
        TensorSpec::new("blk.0.ffn_gate_exps.weight", &[h, f, e], gu0),
        TensorSpec::new("blk.0.ffn_up_exps.weight", &[h, f, e], gu0),
        TensorSpec::new("blk.0.ffn_down_exps.weight", &[f, h, e], d0),
        TensorSpec::new("blk.1.ffn_gate_inp.weight", &[h, e], 0),
        TensorSpec::new("blk.1.ffn_gate_up_exps.weight", &[h, 2 * f, e], gu1),
        TensorSpec::new("blk.1.ffn_down_exps.weight", &[f, h, e], d1),
        TensorSpec::new("blk.2.ffn_down.weight", &[h, h], 0),
        TensorSpec::new("blk.3.ffn_gate_inp.weight", &[h, e], 0),
        TensorSpec::new("blk.3.ffn_gate_exps.weight", &[h, f, e], gu0),
        TensorSpec::new("blk.3.ffn_up_exps.weight", &[h, f, e], gu0),
        TensorSpec::new("blk.3.ffn_down_exps.weight", &[f, h, e], 12),
    ]);
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let sizes: Vec<usize> = specs
        .iter()
        .map(|s| s.n_bytes().expect("valid spec") as usize)
        .collect();
    gguf::write_gguf(&t.0, &md, &specs, 32, |i, w| {
        let data: &[u8] = match names[i].as_str() {
            "blk.0.ffn_gate_inp.weight" => bytemuck::cast_slice(&s0.router),
            "blk.0.ffn_gate_exps.weight" => &s0.gate,
            "blk.0.ffn_up_exps.weight" => &s0.up,
            "blk.0.ffn_down_exps.weight" => &s0.down,
            "blk.1.ffn_gate_inp.weight" => bytemuck::cast_slice(&s1.router),
            "blk.1.ffn_gate_up_exps.weight" => &s1.gate,
            "blk.1.ffn_down_exps.weight" => &s1.down,
            _ => return w.write_all(&vec![0u8; sizes[i]]),
        };
        assert_eq!(data.len(), sizes[i], "{}", names[i]);
        w.write_all(data)
    })
    .expect("write the mixed model");
    t
}

/// The number after `key` in `line` ("output rms 1.2345," -> 1.2345).
fn number_after(line: &str, key: &str) -> f64 {
    let rest = &line[line
        .find(key)
        .unwrap_or_else(|| panic!("{key:?} in {line:?}"))
        + key.len()..];
    let n: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
        .collect();
    n.parse()
        .unwrap_or_else(|_| panic!("a number after {key:?} in {line:?}"))
}

#[test]
fn missing_file_is_an_error_naming_it() {
    let missing =
        std::env::temp_dir().join(format!("moe-prefill-cli-{}-none.gguf", std::process::id()));
    let p = missing.to_str().expect("UTF-8");
    for args in [
        &["prefill", "--model", p][..],
        &["prefill", "--model", p, "--layer", "all", "--path", "mmq"],
        &["info", "--model", p],
    ] {
        any(args).refused(&[p, "No such file"]);
    }
}

#[test]
fn malformed_files_are_errors_naming_them() {
    let m = small_model("malformed-src");
    let whole = std::fs::read(&m.0).expect("read the model");
    let cases: [(&str, Vec<u8>, &str); 4] = [
        (
            "truncated-data",
            whole[..whole.len() / 2].to_vec(),
            "past the end of the file",
        ),
        ("truncated-header", whole[..40].to_vec(), "truncated"),
        (
            "not-gguf",
            b"PK\x03\x04 a zip file, not a model".to_vec(),
            "bad magic",
        ),
        ("empty", Vec::new(), "truncated"),
    ];
    for (name, bytes, why) in cases {
        let t = Temp::new(name);
        std::fs::write(&t.0, &bytes).expect("write");
        for cmd in ["prefill", "info"] {
            any(&[cmd, "--model", t.path()]).refused(&[t.path(), why]);
        }
    }
    // A well-formed GGUF that is not a MoE model.
    let t = Temp::new("dense");
    gguf::write_gguf(
        &t.0,
        &[
            kv("general.architecture", Value::Str("llama".into())),
            kv("llama.block_count", Value::U32(1)),
            kv("llama.embedding_length", Value::U32(256)),
        ],
        &[TensorSpec::new("blk.0.ffn_down.weight", &[256, 256], 0)],
        32,
        |_, w| w.write_all(&[0u8; 256 * 256 * 4]),
    )
    .expect("write");
    for cmd in ["prefill", "info"] {
        any(&[cmd, "--model", t.path()]).refused(&[t.path(), "llama.expert_count"]);
    }
}

#[test]
fn layer_out_of_range_is_an_error() {
    let m = small_model("layers");
    any(&["prefill", "--model", m.path(), "--layer", "7"]).refused(&[
        "--layer 7",
        m.path(),
        "has 2 layers",
        "MoE layers: 0-1",
    ]);
    any(&["prefill", "--model", m.path(), "--layer", "last"])
        .refused(&["--layer \"last\"", "a block number, first or all"]);
    let x = mixed_model("layers-mixed");
    any(&["prefill", "--model", x.path(), "--layer", "2"]).refused(&[
        "layer 2",
        "is not a MoE layer",
        "MoE layers: 0-1, 3",
    ]);
    // A layer whose weights this build cannot run is refused before any layer runs, also when
    // it comes after runnable ones.
    for layer in ["3", "all"] {
        any(&["prefill", "--model", x.path(), "--layer", layer]).refused(&[
            x.path(),
            "layer 3",
            "blk.3.ffn_down_exps.weight is q4_K",
        ]);
    }
}

#[test]
fn unknown_path_is_an_error() {
    let m = small_model("path");
    let bogus = "--path: unknown path \"bogus\": mmq, fused, ws or auto";
    any(&["prefill", "--model", m.path(), "--path", "bogus"]).refused(&[bogus]);
    any(&["prefill", "--path", "bogus", "--tokens", "1"]).refused(&[bogus]);
    any(&["--path", "bogus"]).refused(&[bogus]);
    // A known path that cannot run the layer is refused too, naming the layer and the reason,
    // before any layer runs (its eligibility depends on the GPU's limits: it is judged after the
    // GPU is opened, or found missing).
    let mixed = mixed_model("path-mixed");
    let fused = no_gpu(&[
        "prefill",
        "--model",
        mixed.path(),
        "--layer",
        "1",
        "--path",
        "fused",
    ]);
    assert_eq!(fused.code, Some(1), "{}", fused.show());
    assert!(
        fused.stderr.contains(
            "error: layer 1: path fused cannot run this layer: the fused path decodes down types \
             q2_0, iq4_nl and q8_0, not iq2_xxs"
        ),
        "{}",
        fused.show()
    );
    assert!(
        !fused.stdout.contains("layer 1: CPU reference"),
        "{}",
        fused.show()
    );
}

#[test]
fn tune_checks_its_arguments_and_needs_a_gpu() {
    any(&["tune", "--pairs", "q2_0"]).refused(&["--pairs: \"q2_0\" is not gate_up/down"]);
    any(&["tune", "--pairs", "iq2_xxs/q2_0,q2_0/q4_k"]).refused(&["unknown weight type \"q4_k\""]);
    // An IQ down type at the reference FFN of 640 (not a multiple of 256).
    any(&["tune", "--pairs", "q2_0/iq2_xxs"]).refused(&["--pairs: q2_0/iq2_xxs:"]);
    any(&["tune", "--rows", "10,0"]).refused(&["--rows 0: 0 tokens"]);
    any(&["tune", "--runs", "0"]).refused(&["--runs: at least 1"]);
    let out = Temp::new("tune-table");
    no_gpu(&["tune", "--pairs", "q2_0/q2_0", "--out", out.path()]).refused(&[
        "no CUDA GPU available",
        "`moe-prefill tune` times the expert paths on a GPU",
    ]);
    assert!(!out.0.exists());
}

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
