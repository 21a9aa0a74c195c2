//! The MoE-layer finder: hyperparameters, tensors and their bytes, and the errors for files that
//! are not (well-formed) MoE models.

use std::path::Path;

use host::gguf::{self, GgufFile, TensorSpec, Value};

use crate::util::*;

/// Each `TensorRef` points at the bytes written for that tensor.
fn assert_ref(f: &GgufFile, r: &gguf::TensorRef<'_>, dims: &[u64], ggml_type: u32) {
    assert_eq!(
        (r.info.dims.as_slice(), r.ggml_type()),
        (dims, ggml_type),
        "{}",
        r.info.name
    );
    let i = f
        .tensors()
        .iter()
        .position(|t| t.name == r.info.name)
        .expect("listed");
    assert_eq!(
        r.data,
        tensor_bytes(i, r.info.n_bytes).as_slice(),
        "{}: data",
        r.info.name
    );
}

#[test]
fn moe_finder_separate_and_merged() {
    for merged in [false, true] {
        let f = open_vec(moe_file(merged));
        let info = f.model_info().expect("model info");
        assert_eq!(
            info,
            gguf::ModelInfo {
                arch: "qwen3moe".into(),
                n_layers: 2,
                n_embd: 256,
                n_expert: 8,
                n_expert_used: 2,
                n_ff_exp: 128,
                // qwen3moe's graph normalises the top-k weights whatever the metadata says.
                expert_weights_norm: true,
                expert_weights_scale: 1.0,
                gating_func: 1,
            }
        );
        let layers = f.moe_layers().expect("layers");
        assert_eq!(layers.len(), 2);
        for (n, l) in layers.iter().enumerate() {
            assert_eq!((l.layer, l.n_ff), (n, 128));
            assert_ref(&f, &l.router, &[EMBD, E], 0);
            assert_ref(&f, &l.down, &[FF, EMBD, E], 8);
            assert!(l.router_bias.is_none() && l.probs_bias.is_none() && l.extra.is_empty());
            if merged {
                assert!(l.gate.is_none() && l.up.is_none());
                assert_ref(
                    &f,
                    l.gate_up.as_ref().expect("merged"),
                    &[EMBD, 2 * FF, E],
                    8,
                );
            } else {
                assert!(l.gate_up.is_none());
                assert_ref(&f, l.gate.as_ref().expect("gate"), &[EMBD, FF, E], 8);
                assert_ref(&f, l.up.as_ref().expect("up"), &[EMBD, FF, E], 8);
            }
        }
        assert_eq!(
            f.moe_layer(1).expect("layer 1").down.info.name,
            "blk.1.ffn_down_exps.weight"
        );
    }
}

/// DeepSeek-style: a dense first block, n_ff from the tensors (no key), routing from metadata,
/// a selection bias, and a per-expert tensor the finder reports as extra.
#[test]
fn moe_finder_dense_first_block_and_extras() {
    let metadata = vec![
        kv("general.architecture", Value::Str("deepseek2".into())),
        kv("deepseek2.block_count", Value::U64(2)),
        kv("deepseek2.embedding_length", Value::I32(EMBD as i32)),
        kv("deepseek2.expert_count", Value::U32(E as u32)),
        kv("deepseek2.expert_used_count", Value::U32(3)),
        kv("deepseek2.expert_weights_norm", Value::Bool(true)),
        kv("deepseek2.expert_weights_scale", Value::F32(2.5)),
        kv("deepseek2.expert_gating_func", Value::U32(2)),
    ];
    let specs = vec![
        spec("blk.0.ffn_gate.weight", &[EMBD, 512], 8),
        spec("blk.0.ffn_down.weight", &[512, EMBD], 8),
        spec("blk.1.ffn_gate_inp.weight", &[EMBD, E], 0),
        spec("blk.1.exp_probs_b.bias", &[E], 0),
        spec("blk.1.ffn_gate_exps.weight", &[EMBD, 64, E], 12),
        spec("blk.1.ffn_up_exps.weight", &[EMBD, 64, E], 12),
        spec("blk.1.ffn_down_exps.weight", &[64, EMBD, E], 8),
        spec("blk.1.ffn_down_exps.scale", &[E], 0),
        spec("blk.1.ffn_gate_shexp.weight", &[EMBD, 64], 8),
    ];
    let f = open_vec(build(&metadata, &specs, 32));
    let info = f.model_info().expect("model info");
    assert_eq!(
        (info.n_ff_exp, info.n_expert_used, info.expert_weights_norm),
        (64, 3, true)
    );
    assert_eq!((info.expert_weights_scale, info.gating_func), (2.5, 2));
    let layers = f.moe_layers().expect("layers");
    assert_eq!(layers.len(), 1);
    let l = &layers[0];
    assert_eq!((l.layer, l.n_ff), (1, 64));
    assert_ref(&f, l.probs_bias.as_ref().expect("selection bias"), &[E], 0);
    assert_ref(&f, l.gate.as_ref().expect("gate"), &[EMBD, 64, E], 12);
    assert_ref(&f, &l.down, &[64, EMBD, E], 8);
    let extra: Vec<&str> = l.extra.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(extra, ["blk.1.ffn_down_exps.scale"]);
    let e = f.moe_layer(0).expect_err("block 0 is dense");
    check_err(
        "dense layer",
        f.path(),
        e,
        &["layer 0 is not a MoE layer: no tensor named blk.0.ffn_down_exps.weight"],
    );
}

/// An edit of the metadata and tensor list of [`moe_parts`].
type Edit<'a> = dyn Fn(&mut Vec<(String, Value)>, &mut Vec<TensorSpec>) + 'a;

#[test]
fn moe_finder_errors() {
    let p = Path::new("mem.gguf");
    let with = |edit: &Edit<'_>| {
        let (mut m, mut s) = moe_parts(false);
        edit(&mut m, &mut s);
        open_vec(build(&m, &s, 32))
    };
    let set_dims = |s: &mut Vec<TensorSpec>, name: &str, dims: &[u64], ty: u32| {
        let t = s
            .iter_mut()
            .find(|t| t.name == name)
            .expect("tensor in the file");
        (t.dims, t.ggml_type) = (dims.to_vec(), ty);
    };
    let no_moe = with(&|_, s| s.retain(|t| !t.name.contains("exps")));
    check_err(
        "no MoE",
        p,
        no_moe.moe_layers().expect_err("no MoE layer"),
        &["no MoE layer: no tensor named blk.N.ffn_down_exps.weight"],
    );
    let no_moe_no_ff = with(&|m, s| {
        s.retain(|t| !t.name.contains("exps"));
        m.retain(|(k, _)| !k.ends_with("expert_feed_forward_length"));
    });
    check_err(
        "no MoE (info)",
        p,
        no_moe_no_ff.model_info().expect_err("no MoE layer"),
        &["no MoE layer"],
    );

    let cases: Vec<(&str, GgufFile, &str)> = vec![
        (
            "down shape",
            with(&|_, s| set_dims(s, "blk.1.ffn_down_exps.weight", &[FF, EMBD, 4], 8)),
            "tensor 'blk.1.ffn_down_exps.weight' (q8_0) has shape [128, 256, 4]; expected [n_ff 128, n_embd 256, n_expert 8]",
        ),
        (
            "router shape",
            with(&|_, s| set_dims(s, "blk.0.ffn_gate_inp.weight", &[EMBD, 16], 0)),
            "'blk.0.ffn_gate_inp.weight' (f32) has shape [256, 16]; expected [n_embd 256, n_expert 8]",
        ),
        (
            "up shape",
            with(&|_, s| set_dims(s, "blk.0.ffn_up_exps.weight", &[EMBD, 96, E], 8)),
            "expected [n_embd 256, n_ff 128, n_expert 8]",
        ),
        (
            "gate/up types",
            with(&|_, s| set_dims(s, "blk.0.ffn_up_exps.weight", &[EMBD, FF, E], 12)),
            "gate and up must have the same type",
        ),
        (
            "gate only",
            with(&|_, s| s.retain(|t| t.name != "blk.1.ffn_up_exps.weight")),
            "it needs either both ffn_gate_exps and ffn_up_exps",
        ),
        (
            "gate, up and gate_up",
            with(&|_, s| s.push(spec("blk.0.ffn_gate_up_exps.weight", &[EMBD, 2 * FF, E], 8))),
            "or ffn_gate_up_exps alone",
        ),
        (
            "neither",
            with(&|_, s| {
                s.retain(|t| {
                    !t.name.starts_with("blk.0.ffn_gate_exps")
                        && !t.name.starts_with("blk.0.ffn_up_exps")
                })
            }),
            "MoE layer 0 has neither",
        ),
        (
            "no router",
            with(&|_, s| s.retain(|t| t.name != "blk.1.ffn_gate_inp.weight")),
            "MoE layer 1 has no router",
        ),
        (
            "missing expert_count",
            with(&|m, _| m.retain(|(k, _)| k != "qwen3moe.expert_count")),
            "missing qwen3moe.expert_count",
        ),
        (
            "expert_count as string",
            with(&|m, _| m[3].1 = Value::Str("8".into())),
            "qwen3moe.expert_count must be a non-negative integer, found str \"8\"",
        ),
        (
            "top-k > E",
            with(&|m, _| m[4].1 = Value::U32(9)),
            "expert_used_count is 9; it must be in 1..=8",
        ),
        (
            "no architecture",
            with(&|m, _| {
                m.remove(0);
            }),
            "missing general.architecture",
        ),
        (
            "n_ff mismatch",
            with(&|m, _| m[5].1 = Value::U32(64)),
            "expected [n_ff 64, n_embd 256, n_expert 8]",
        ),
    ];
    for (label, f, want) in cases {
        let e = f.moe_layers().expect_err(label);
        check_err(label, p, e, &[want]);
    }
}

/// Found by `cargo fuzz` (fuzz/): a header whose `block_count` is 4,278,190,081 made the MoE-layer finder
/// try every block number. The finder now reads the block numbers off the tensor list; this file
/// must be answered (here: an error or a list) at once, whatever its block count.
#[test]
fn huge_block_count_is_answered_from_the_tensor_list() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/fuzz/huge_block_count.gguf");
    let bytes = std::fs::read(&path).expect("the fuzz artifact is in tests/data/fuzz");
    let f = GgufFile::from_vec(&path, bytes).expect("the header itself is well formed");
    let info = f.model_info();
    let layers = f.moe_layers();
    assert!(info.is_err() || layers.is_err() || layers.is_ok_and(|l| !l.is_empty()));
    if let Ok(info) = f.model_info() {
        assert!(info.n_layers > 1 << 31, "block count {}", info.n_layers);
        assert!(f.moe_blocks(&info).len() <= f.tensors().len());
    }
}

/// A layer with a shared expert (Qwen-Next / Qwen2-MoE style `ffn_*_shexp`, gated by
/// `ffn_gate_inp_shexp`) is refused by name: running only the routed experts would change the
/// layer's output without saying so. The layer without it still runs.
#[test]
fn shared_expert_is_named_not_skipped() {
    let (m, mut s) = moe_parts(false);
    for (name, dims) in [
        ("blk.1.ffn_gate_inp_shexp.weight", vec![EMBD]),
        ("blk.1.ffn_gate_shexp.weight", vec![EMBD, FF]),
        ("blk.1.ffn_up_shexp.weight", vec![EMBD, FF]),
        ("blk.1.ffn_down_shexp.weight", vec![FF, EMBD]),
    ] {
        s.push(spec(name, &dims, 0));
    }
    let f = open_vec(build(&m, &s, 32));
    let layers = f.moe_layers().expect("the routed experts are found");
    assert_eq!(layers.len(), 2);
    assert!(host::moe::model::layer_shape(&f, &layers[0]).is_ok());
    let e = host::moe::model::layer_shape(&f, &layers[1]).expect_err("shared expert");
    let msg = e.to_string();
    for want in [
        "layer 1",
        "shared expert",
        "blk.1.ffn_gate_shexp.weight",
        "blk.1.ffn_gate_inp_shexp.weight",
    ] {
        assert!(msg.contains(want), "{msg:?} should name {want:?}");
    }
    assert!(host::moe::model::file_layer(&f, &layers[1]).is_err());
}
