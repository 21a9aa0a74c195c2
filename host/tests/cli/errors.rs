//! Bad input: missing and malformed files, a layer out of range, an unknown path or numerics,
//! `tune`'s arguments - each an error naming what is wrong, before any GPU is opened.

use super::common::*;

use host::gguf::{self, TensorSpec, Value};

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
fn hold_us_takes_microseconds_up_to_a_second() {
    for bad in ["-5", "x", "1000001"] {
        let flag = format!("--hold-us={bad}");
        let r = any(&["prefill", &flag, "--tokens", "1"]);
        // A flag's value clap refuses: its usage error (exit code 2), naming the flag.
        assert_eq!(r.code, Some(2), "{}", r.show());
        assert!(r.stderr.contains("--hold-us"), "{}", r.show());
        assert_eq!(r.stdout, "", "{}", r.show());
    }
}

#[test]
fn numerics_flag_is_checked_and_the_variant_needs_the_fused_path() {
    // The small synthetic layer with `extra` arguments.
    let args = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut v = vec![
            "prefill",
            "--experts",
            "16",
            "--top-k",
            "4",
            "--hidden",
            "256",
        ];
        v.extend(["--ffn", "128"]);
        v.extend(extra);
        v
    };
    any(&args(&["--numerics", "bogus"]))
        .refused(&["--numerics: unknown numerics \"bogus\": mmq or q2_0-shared-d"]);
    any(&["--numerics", "bogus"]).refused(&["unknown numerics \"bogus\""]);
    // A path that computes MMQ's numerics only is refused with the reason (judged as every
    // path's eligibility is: after the GPU is opened, or found missing).
    for path in ["mmq", "ws"] {
        let r = no_gpu(&args(&["--numerics", "q2_0-shared-d", "--path", path]));
        assert_eq!(r.code, Some(1), "{}", r.show());
        assert!(
            r.stderr.contains(&format!(
                "error: path {path} cannot run this layer: the q2_0-shared-d numerics run on the \
                 fused path only"
            )),
            "{}",
            r.show()
        );
    }
    // auto runs it (here the CPU reference, in the variant).
    no_gpu(&args(&["--numerics", "q2_0-shared-d"])).ok(&["q2_0 down, q2_0-shared-d numerics"]);
}
