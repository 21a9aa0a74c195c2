//! The synthetic model as GGUF: written, read back, its layers equal the generated ones; and (on
//! the GPU) a file's layer, routed by its own router, runs byte-identical to the reference.

use gpu::layout::WType;
use host::gguf::GgufFile;
use host::moe::layer::DeviceLayer;
use host::moe::model::{file_layer, write_synthetic_model};
use host::moe::path::ExpertPath;
use host::moe::prefill::{Prefill, RoutingInput};
use host::moe::router;
use host::problem::{GateUp, MoeShape, Numerics};
use host::reference;
use host::synth::SyntheticLayer;
use tests::*;

fn small() -> MoeShape {
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

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("moe-prefill-{}-{name}.gguf", std::process::id()))
}

#[test]
fn synthetic_model_round_trip() {
    for merged in [false, true] {
        let s = small();
        let path = temp(if merged { "merged" } else { "split" });
        write_synthetic_model(&path, &s, 2, merged, 40).expect("write");
        let f = GgufFile::open(&path).expect("open");
        let layers = f.moe_layers().expect("moe layers");
        assert_eq!(layers.len(), 2);
        for l in &layers {
            let fl = file_layer(&f, l).expect("layer inputs");
            assert_eq!(fl.shape, s);
            assert!(fl.rule.norm, "qwen3moe normalises its top-k weights");
            let want = SyntheticLayer::new(s, merged, 40 + l.layer as u64).expect("layer");
            assert_eq!(
                bytemuck::cast_slice::<f32, u8>(&fl.router),
                bytemuck::cast_slice::<f32, u8>(&want.router)
            );
            match fl.weights.gate_up {
                GateUp::Separate { gate, up } => {
                    assert!(!merged);
                    assert_eq!(gate.data, &want.gate[..]);
                    assert_eq!(up.data, &want.up[..]);
                }
                GateUp::Merged(t) => {
                    assert!(merged);
                    assert_eq!(t.data, &want.gate[..]);
                }
            }
            assert_eq!(fl.weights.down.data, &want.down[..]);
        }
        drop(f);
        std::fs::remove_file(&path).expect("remove");
    }
}

#[test]
fn unsupported_weight_type_is_a_clear_error() {
    // A file whose down tensor is Q4_K (id 12): readable, but not runnable here.
    let path = temp("q4k");
    let s = small();
    let specs = vec![
        host::gguf::TensorSpec::new("blk.0.ffn_gate_inp.weight", &[256, 8], 0),
        host::gguf::TensorSpec::new(
            "blk.0.ffn_gate_exps.weight",
            &[256, 256, 8],
            s.gate_up_type.id(),
        ),
        host::gguf::TensorSpec::new(
            "blk.0.ffn_up_exps.weight",
            &[256, 256, 8],
            s.gate_up_type.id(),
        ),
        host::gguf::TensorSpec::new("blk.0.ffn_down_exps.weight", &[256, 256, 8], 12),
    ];
    use host::gguf::Value;
    let md = vec![
        (
            "general.architecture".to_string(),
            Value::Str("qwen3moe".into()),
        ),
        ("qwen3moe.block_count".to_string(), Value::U32(1)),
        ("qwen3moe.embedding_length".to_string(), Value::U32(256)),
        ("qwen3moe.expert_count".to_string(), Value::U32(8)),
        ("qwen3moe.expert_used_count".to_string(), Value::U32(2)),
        (
            "qwen3moe.expert_feed_forward_length".to_string(),
            Value::U32(256),
        ),
    ];
    host::gguf::write_gguf(&path, &md, &specs, 32, |i, w| {
        let n = specs[i].n_bytes().expect("size") as usize;
        w.write_all(&vec![0u8; n])
    })
    .expect("write");
    let f = GgufFile::open(&path).expect("open");
    let layers = f.moe_layers().expect("layers");
    let e = match file_layer(&f, &layers[0]) {
        Ok(_) => panic!("a q4_K down tensor must be refused"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("q4_K") && e.contains("blk.0.ffn_down_exps.weight"),
        "{e}"
    );
    drop(f);
    std::fs::remove_file(&path).expect("remove");
}

/// A file's layer on the GPU, routed by the file's router (logits on the CPU, top-k on the GPU),
/// equals the CPU reference.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gguf_layer_on_gpu() {
    let gpu = gpu();
    let sd = seed("gguf_layer_on_gpu");
    let s = MoeShape {
        n_experts: 64,
        top_k: 6,
        ..small()
    };
    let path = temp("gpu");
    write_synthetic_model(&path, &s, 2, true, sd).expect("write");
    let f = GgufFile::open(&path).expect("open");
    for l in f.moe_layers().expect("layers") {
        let fl = file_layer(&f, &l).expect("layer");
        let t = 777;
        let x = host::synth::normal_f32(sd ^ 3, t * s.hidden, 1.0);
        let logits = router::logits(&x, &fl.router, s.n_experts, s.hidden);
        let r = reference::route::route(&logits, t, &fl.rule);
        let want = reference::prefill(&x, &r, &fl.weights, &fl.shape);
        let dev = DeviceLayer::upload(&gpu, &fl.weights, &fl.shape).expect("upload");
        let (dl, dx) = (
            gpu.upload(&logits).expect("upload"),
            gpu.upload(&x).expect("upload"),
        );
        for path in [ExpertPath::Mmq, ExpertPath::Fused] {
            let mut pf = Prefill::new(&gpu, &fl.shape, t, path).expect("pipeline");
            pf.poison(&gpu, POISON).expect("poison");
            pf.run(&gpu, &dev, &dx, t, RoutingInput::Logits(&dl, fl.rule))
                .expect("run");
            let got = pf.output(&gpu).expect("download");
            assert_bytes_eq(
                &format!("gguf layer {} [{}]", l.layer, path.name()),
                bytemuck::cast_slice(&got),
                bytemuck::cast_slice(&want.out),
                |i| format!("token {}, column {}", i / 4 / s.hidden, i / 4 % s.hidden),
            );
        }
    }
    drop(f);
    std::fs::remove_file(&path).expect("remove");
}
