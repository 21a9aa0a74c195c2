//! What the CLI tests share: temporary model files, running the binary with or without the
//! GPU, the small and mixed models.

use std::path::PathBuf;
use std::process::{Command, Output};

use gpu::layout::WType;
use host::gguf::{self, TensorSpec, Value};
use host::moe::model::write_synthetic_model;
use host::problem::{MoeShape, Numerics};
use host::synth::SyntheticLayer;

/// A file under the temp dir, removed when dropped.
pub struct Temp(pub PathBuf);

impl Temp {
    pub fn new(name: &str) -> Temp {
        Temp(std::env::temp_dir().join(format!(
            "moe-prefill-cli-{}-{name}.gguf",
            std::process::id()
        )))
    }
    pub fn path(&self) -> &str {
        self.0.to_str().expect("temp paths are UTF-8")
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn show(&self) -> String {
        format!(
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
    /// Asserts a successful run whose stdout has every line fragment of `want`.
    pub fn ok(&self, want: &[&str]) {
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
    pub fn refused(&self, want: &[&str]) {
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

/// The CLI binary: cargo's build of it, or, where the test binary was moved away from its
/// target directory together with the CLI (a GPU machine with no Rust toolchain), the
/// `moe-prefill` beside this test binary.
fn binary() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_moe-prefill"));
    if built.exists() {
        return built;
    }
    let beside = std::env::current_exe()
        .expect("the test binary's path")
        .with_file_name("moe-prefill");
    if beside.exists() { beside } else { built }
}

pub fn moe_prefill(args: &[&str], hide_gpu: bool) -> Run {
    let mut c = Command::new(binary());
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
pub fn no_gpu(args: &[&str]) -> Run {
    moe_prefill(args, true)
}

/// With the machine's GPU if it has one: for runs that must stop before it is opened.
pub fn any(args: &[&str]) -> Run {
    moe_prefill(args, false)
}

/// The small layer of these tests: the CPU reference of 16 tokens runs in milliseconds.
pub fn small() -> MoeShape {
    MoeShape {
        n_experts: 8,
        top_k: 2,
        hidden: 256,
        ffn: 128,
        gate_up_type: WType::Iq2Xxs,
        down_type: WType::Iq4Nl,
        numerics: Numerics::Mmq,
    }
}

/// A 2-layer synthetic model of the small shape (qwen3moe, separate gate and up).
pub fn small_model(name: &str) -> Temp {
    let t = Temp::new(name);
    write_synthetic_model(&t.0, &small(), 2, false, 7).expect("write the small model");
    t
}

pub fn kv(k: &str, v: Value) -> (String, Value) {
    (k.to_string(), v)
}

/// A 4-block model (hidden 256, FFN 256, 8 experts, top-2) with the other tensors a real model
/// has: block 0 separate iq2_xxs gate/up with iq4_nl down (every built path runs it); block 1
/// merged q2_0 gate/up with iq2_xxs down (MMQ only: the fused path has no iq2_xxs down); block 2
/// dense (no experts); block 3 a q4_K down (a type this build does not run).
pub fn mixed_model(name: &str) -> Temp {
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
pub fn number_after(line: &str, key: &str) -> f64 {
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
