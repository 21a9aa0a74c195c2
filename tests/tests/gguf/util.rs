//! Helpers of the gguf tests: temp files, deterministic tensor bytes, seed files, error checks;
//! and (fields.rs, re-exported here) a walker that records where each field of a (valid) GGUF
//! file lies, so tests can corrupt exactly one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use host::gguf::{self, GgufFile, TensorSpec, Value, ValueType};
use host::rng::Rng;

pub use crate::fields::*;

/// A path under the temp dir, unique to this process and call, removed on drop.
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn new(tag: &str) -> TempFile {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        TempFile(std::env::temp_dir().join(format!(
            "moe-gguf-test-{}-{tag}-{n}.gguf",
            std::process::id()
        )))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The bytes of tensor `i` of size `n`: seeded by `i`, so a swapped or shifted tensor shows.
pub fn tensor_bytes(i: usize, n: u64) -> Vec<u8> {
    let mut v = vec![0; n as usize];
    Rng::new(0x6767_7566 + i as u64).fill_bytes(&mut v);
    v
}

/// A `fill` callback writing [`tensor_bytes`] for each spec.
pub fn pattern_fill(
    specs: &[TensorSpec],
) -> impl FnMut(usize, &mut dyn Write) -> std::io::Result<()> + '_ {
    move |i, out| {
        out.write_all(&tensor_bytes(
            i,
            specs[i].n_bytes().expect("specs should be valid"),
        ))
    }
}

/// A file in memory with [`pattern_fill`] data.
pub fn build(metadata: &[(String, Value)], specs: &[TensorSpec], alignment: u64) -> Vec<u8> {
    gguf::to_bytes(metadata, specs, alignment, pattern_fill(specs))
        .expect("the writer should accept these inputs")
}

pub fn kv(key: &str, v: Value) -> (String, Value) {
    (key.to_string(), v)
}

pub fn spec(name: &str, dims: &[u64], ggml_type: u32) -> TensorSpec {
    TensorSpec::new(name, dims, ggml_type)
}

pub fn strs(items: &[&str]) -> Value {
    Value::Array(
        ValueType::Str,
        items.iter().map(|s| Value::Str(s.to_string())).collect(),
    )
}

/// One value of every type, arrays of every element type, nested and empty arrays and strings.
pub fn every_value() -> Vec<(String, Value)> {
    use Value::*;
    let arr = |t, v| Array(t, v);
    vec![
        kv("general.architecture", Str("roundtrip".into())),
        kv("v.u8", U8(250)),
        kv("v.i8", I8(-100)),
        kv("v.u16", U16(65_000)),
        kv("v.i16", I16(-30_000)),
        kv("v.u32", U32(4_000_000_000)),
        kv("v.i32", I32(-2_000_000_000)),
        kv("v.f32", F32(-1.5e-3)),
        kv("v.f32_neg_zero", F32(-0.0)),
        kv("v.f32_inf", F32(f32::INFINITY)),
        kv("v.bool_t", Bool(true)),
        kv("v.bool_f", Bool(false)),
        kv("v.str", Str("héllo, wörld ✓".into())),
        kv("v.str_empty", Str(String::new())),
        kv("v.u64", U64(u64::MAX)),
        kv("v.i64", I64(i64::MIN)),
        kv("v.f64", F64(std::f64::consts::PI)),
        kv("a.u8", arr(ValueType::U8, vec![U8(0), U8(1), U8(255)])),
        kv("a.i8", arr(ValueType::I8, vec![I8(-1), I8(127)])),
        kv("a.u16", arr(ValueType::U16, vec![U16(1), U16(2)])),
        kv("a.i16", arr(ValueType::I16, vec![I16(-2)])),
        kv("a.u32", arr(ValueType::U32, vec![U32(7); 5])),
        kv("a.i32", arr(ValueType::I32, vec![I32(-7), I32(0)])),
        kv("a.f32", arr(ValueType::F32, vec![F32(0.25), F32(-8.0)])),
        kv(
            "a.bool",
            arr(ValueType::Bool, vec![Bool(true), Bool(false), Bool(true)]),
        ),
        kv("a.str", strs(&["", "a", "tokens ▁with ▁spaces", ""])),
        kv("a.u64", arr(ValueType::U64, vec![U64(1 << 40)])),
        kv("a.i64", arr(ValueType::I64, vec![I64(-(1 << 40))])),
        kv("a.f64", arr(ValueType::F64, vec![F64(1e300), F64(-0.0)])),
        kv("a.empty_u8", arr(ValueType::U8, vec![])),
        kv("a.empty_str", arr(ValueType::Str, vec![])),
        kv("a.empty_arr", arr(ValueType::Array, vec![])),
        kv(
            "a.nested",
            arr(
                ValueType::Array,
                vec![
                    arr(ValueType::U32, vec![U32(1), U32(2)]),
                    arr(ValueType::U32, vec![]),
                    arr(ValueType::U32, vec![U32(3)]),
                ],
            ),
        ),
        kv(
            "a.nested3",
            arr(
                ValueType::Array,
                vec![arr(ValueType::Array, vec![strs(&["x", ""]), strs(&[])])],
            ),
        ),
    ]
}

/// Tensors of several types and ranks, sizes not multiples of 32 or 64.
pub fn mixed_specs() -> Vec<TensorSpec> {
    vec![
        spec("token_embd.weight", &[64, 3], 8), // q8_0: 2 blocks x 3 rows = 204 bytes
        spec("norm.weight", &[5], 0),           // f32: 20 bytes
        spec("x.f16", &[3, 2, 2], 1),           // f16: 24 bytes
        spec("x.q4_K", &[256, 2, 1, 3], 12),    // q4_K: 6 blocks = 864 bytes
        spec("x.iq2_xxs", &[512], 16),          // 2 blocks = 132 bytes
        spec("x.bf16", &[7, 1, 3], 30),         // 42 bytes
        spec("x.i8", &[1], 24),                 // 1 byte
        spec("blk.0.ffn_down_exps.weight", &[32, 4, 2], 2), // q4_0: 8 blocks = 144 bytes
    ]
}

/// The small file of the malformed-input corpus: general.alignment present, three tensors.
pub fn corpus_seed() -> Vec<u8> {
    let metadata = vec![
        kv("general.architecture", Value::Str("corpus".into())),
        kv("general.alignment", Value::U32(32)),
        kv("a.k1", Value::U32(7)),
        kv(
            "a.k2",
            Value::Array(
                ValueType::U8,
                vec![Value::U8(1), Value::U8(2), Value::U8(3)],
            ),
        ),
        kv("a.k3", Value::Str("hello".into())),
        kv("a.k4", Value::Bool(true)),
    ];
    let specs = vec![
        spec("t0", &[8, 2], 0),
        spec("t1", &[64, 3], 8),
        spec("t2", &[16], 1),
    ];
    build(&metadata, &specs, 32)
}

pub const E: u64 = 8;
pub const EMBD: u64 = 256;
pub const FF: u64 = 128;

/// A two-layer qwen3moe-like file (E = 8, top-2, n_embd 256, n_ff 128): router f32, experts
/// q8_0, separate gate/up or merged gate_up, plus some dense tensors around them.
pub fn moe_file(merged: bool) -> Vec<u8> {
    let (metadata, specs) = moe_parts(merged);
    build(&metadata, &specs, 32)
}

pub fn moe_parts(merged: bool) -> (Vec<(String, Value)>, Vec<TensorSpec>) {
    let metadata = vec![
        kv("general.architecture", Value::Str("qwen3moe".into())),
        kv("qwen3moe.block_count", Value::U32(2)),
        kv("qwen3moe.embedding_length", Value::U32(EMBD as u32)),
        kv("qwen3moe.expert_count", Value::U32(E as u32)),
        kv("qwen3moe.expert_used_count", Value::U32(2)),
        kv("qwen3moe.expert_feed_forward_length", Value::U32(FF as u32)),
    ];
    let mut specs = vec![spec("token_embd.weight", &[EMBD, 10], 8)];
    for n in 0..2 {
        specs.push(spec(&format!("blk.{n}.attn_norm.weight"), &[EMBD], 0));
        specs.push(spec(&format!("blk.{n}.ffn_gate_inp.weight"), &[EMBD, E], 0));
        if merged {
            specs.push(spec(
                &format!("blk.{n}.ffn_gate_up_exps.weight"),
                &[EMBD, 2 * FF, E],
                8,
            ));
        } else {
            specs.push(spec(
                &format!("blk.{n}.ffn_gate_exps.weight"),
                &[EMBD, FF, E],
                8,
            ));
            specs.push(spec(
                &format!("blk.{n}.ffn_up_exps.weight"),
                &[EMBD, FF, E],
                8,
            ));
        }
        specs.push(spec(
            &format!("blk.{n}.ffn_down_exps.weight"),
            &[FF, EMBD, E],
            8,
        ));
    }
    (metadata, specs)
}

/// Parses `bytes` named `path`, expecting an `Error::Gguf` for `path` whose message contains
/// `want`; returns the message.
#[track_caller]
pub fn expect_gguf_err(label: &str, path: &Path, bytes: &[u8], want: &[&str]) -> String {
    match gguf::parse(path, bytes) {
        Ok(_) => panic!("{label}: parsed, expected an error containing {want:?}"),
        Err(e) => check_err(label, path, e, want),
    }
}

/// `e` must be `Error::Gguf` for `path` with a message containing one of `want`.
#[track_caller]
pub fn check_err(label: &str, path: &Path, e: host::Error, want: &[&str]) -> String {
    let shown = e.to_string();
    match e {
        host::Error::Gguf { path: p, msg } => {
            assert_eq!(p, path, "{label}: error names the wrong path: {msg}");
            assert!(
                shown.contains(&*path.to_string_lossy()),
                "{label}: message lacks the path: {shown}"
            );
            assert!(
                want.iter().any(|w| msg.contains(w)),
                "{label}: message {msg:?} lacks any of {want:?}"
            );
            msg
        }
        other => panic!("{label}: expected Error::Gguf, got {other:?}"),
    }
}

/// Opens an in-memory file.
pub fn open_vec(bytes: Vec<u8>) -> GgufFile {
    GgufFile::from_vec(Path::new("mem.gguf"), bytes).expect("this file should be valid")
}
