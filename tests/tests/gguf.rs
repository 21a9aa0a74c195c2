//! gguf: the reader accepts what the writer writes (bytes, metadata, offsets round-trip), rejects
//! every malformed variant of a valid file with a message naming the problem, never panics on
//! mutated input, opens a multi-GB file without reading its data, and finds MoE layers.
//! CPU only: these always run.

#[path = "gguf/big.rs"]
mod big;
#[path = "gguf/corrupt.rs"]
mod corrupt;
#[path = "gguf/fields.rs"]
mod fields;
#[path = "gguf/moe.rs"]
mod moe;
#[path = "gguf/util.rs"]
mod util;

use std::path::Path;
use std::sync::Mutex;

use host::gguf::{self, GgufFile, TensorSpec, Value, ValueType};
use util::*;

/// Held by the tests whose memory use is measured or large, so they do not overlap.
static HEAVY: Mutex<()> = Mutex::new(());

/// Every value type and several tensor types survive write -> open -> write unchanged, at the
/// default alignment and at 64 (where `general.alignment` is appended) and 1.
#[test]
fn round_trip_every_value_type() {
    let metadata = every_value();
    let specs = mixed_specs();
    for alignment in [32u64, 64, 1] {
        let tmp = TempFile::new("roundtrip");
        gguf::write_gguf(&tmp.0, &metadata, &specs, alignment, pattern_fill(&specs))
            .expect("write should succeed");
        let on_disk = std::fs::read(&tmp.0).expect("read back");
        assert_eq!(
            on_disk,
            build(&metadata, &specs, alignment),
            "file and in-memory writer differ"
        );

        let f = GgufFile::open(&tmp.0).expect("open should succeed");
        assert_eq!(
            (f.version(), f.alignment(), f.path()),
            (3, alignment, tmp.0.as_path())
        );
        assert_eq!(f.data_offset() % alignment, 0);
        let mut want = metadata.clone();
        if alignment != 32 {
            want.push(kv("general.alignment", Value::U32(alignment as u32)));
        }
        assert_eq!(
            f.metadata(),
            want.as_slice(),
            "alignment {alignment}: metadata differs"
        );
        assert_eq!(f.get_u64("v.u32"), Some(4_000_000_000));
        assert_eq!(f.get_u64("v.i8"), None, "a negative integer is not a u64");
        assert_eq!(f.get_str("v.str_empty"), Some(""));
        assert_eq!(f.get_bool("v.bool_t"), Some(true));
        assert_eq!(f.get_f32("v.f32"), Some(-1.5e-3));

        let mut next = 0u64;
        assert_eq!(f.tensors().len(), specs.len());
        for (i, (t, s)) in f.tensors().iter().zip(&specs).enumerate() {
            assert_eq!(
                (&t.name, &t.dims, t.ggml_type),
                (&s.name, &s.dims, s.ggml_type)
            );
            assert_eq!(Some(t.n_bytes), s.n_bytes());
            assert_eq!(t.offset, next, "{}: offset", t.name);
            next = (t.offset + t.n_bytes).div_ceil(alignment) * alignment;
            assert_eq!(
                f.tensor_data(t),
                tensor_bytes(i, t.n_bytes).as_slice(),
                "{}: data",
                t.name
            );
            assert_eq!(f.tensor(&t.name), Some(t));
        }
        assert!(f.tensor("missing").is_none());

        // write(read(file)) == file, the metadata passed back as read (alignment key included).
        let respecs: Vec<TensorSpec> = f
            .tensors()
            .iter()
            .map(|t| TensorSpec::new(t.name.clone(), &t.dims, t.ggml_type))
            .collect();
        let again = gguf::to_bytes(f.metadata(), &respecs, alignment, |i, out| {
            out.write_all(f.tensor_data(&f.tensors()[i]))
        })
        .expect("rewrite should succeed");
        assert_eq!(
            again, on_disk,
            "alignment {alignment}: write(read(file)) differs"
        );
    }
}

/// A file with no tensors and no metadata is valid, as is one with only metadata.
#[test]
fn round_trip_empty() {
    for metadata in [
        vec![],
        vec![kv("general.architecture", Value::Str("x".into()))],
    ] {
        let bytes = build(&metadata, &[], 32);
        let h = gguf::parse(Path::new("empty.gguf"), &bytes).expect("should parse");
        assert_eq!((h.metadata(), h.tensors().len()), (metadata.as_slice(), 0));
    }
}

/// The writer refuses bad inputs before writing, with a message naming the problem, and removes
/// a partial file when `fill` misbehaves.
#[test]
fn writer_rejects_bad_input() {
    let p = Path::new("<memory>");
    let ok = [spec("a", &[32], 8)];
    let write = |m: &[(String, Value)], s: &[TensorSpec], align: u64| {
        gguf::to_bytes(m, s, align, pattern_fill(s))
    };
    let cases: Vec<(&str, host::Result<Vec<u8>>, &str)> = vec![
        ("alignment 3", write(&[], &ok, 3), "not a power of two"),
        ("alignment 0", write(&[], &ok, 0), "not a power of two"),
        (
            "alignment key mismatch",
            write(&[kv("general.alignment", Value::U32(64))], &ok, 32),
            "general.alignment",
        ),
        (
            "alignment key type",
            write(&[kv("general.alignment", Value::U64(32))], &ok, 32),
            "general.alignment",
        ),
        (
            "dup key",
            write(&[kv("k", Value::U8(1)), kv("k", Value::U8(2))], &ok, 32),
            "duplicate metadata key 'k'",
        ),
        (
            "empty key",
            write(&[kv("", Value::U8(1))], &ok, 32),
            "empty",
        ),
        (
            "mixed array",
            write(
                &[kv(
                    "k",
                    Value::Array(ValueType::U8, vec![Value::U8(1), Value::U16(2)]),
                )],
                &ok,
                32,
            ),
            "element 1 of an array of u8 is a u16",
        ),
        (
            "dup tensor",
            write(&[], &[spec("a", &[32], 8), spec("a", &[32], 8)], 32),
            "duplicate tensor name 'a'",
        ),
        (
            "ne0",
            write(&[], &[spec("a", &[33], 8)], 32),
            "not a multiple of the q8_0 block size 32",
        ),
        (
            "unknown type",
            write(&[], &[spec("a", &[32], 999)], 32),
            "unknown ggml type 999",
        ),
        (
            "no dims",
            write(&[], &[spec("a", &[], 0)], 32),
            "has 0 dimensions",
        ),
        (
            "5 dims",
            write(&[], &[spec("a", &[1, 1, 1, 1, 1], 0)], 32),
            "has 5 dimensions",
        ),
        (
            "zero dim",
            write(&[], &[spec("a", &[4, 0], 0)], 32),
            "dimension 1 = 0",
        ),
        (
            "long name",
            write(&[], &[spec(&"n".repeat(64), &[4], 0)], 32),
            "1 to 63 bytes",
        ),
        (
            "short fill",
            gguf::to_bytes(&[], &ok, 32, |_, out| out.write_all(&[0; 33])),
            "wrote 33 bytes",
        ),
        (
            "long fill",
            gguf::to_bytes(&[], &ok, 32, |_, out| out.write_all(&[0; 35])),
            "wrote more than",
        ),
    ];
    for (label, got, want) in cases {
        match got {
            Ok(_) => panic!("{label}: the writer accepted it"),
            Err(e) => {
                check_err(label, p, e, &[want]);
            }
        }
    }
    let tmp = TempFile::new("partial");
    let e = gguf::write_gguf(&tmp.0, &[], &ok, 32, |_, out| out.write_all(&[0; 10]))
        .expect_err("short fill");
    check_err("partial file", &tmp.0, e, &["wrote 10 bytes"]);
    assert!(
        !tmp.0.exists(),
        "a failed write must remove its partial file"
    );
}
