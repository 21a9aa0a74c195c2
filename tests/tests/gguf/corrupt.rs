//! Malformed inputs: a corpus of single-field corruptions with the message each must give, every
//! truncation of a small file, and random mutations that must never cause a panic.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::Instant;

use host::gguf::{self, GgufFile};
use host::rng::Rng;

use crate::HEAVY;
use crate::util::*;

/// Each malformed variant of a valid file, built by editing one field, is an `Error::Gguf` for
/// the right path whose message names the problem.
#[test]
fn malformed_corpus() {
    let seed = corpus_seed();
    let f = walk(&seed);
    let path = Path::new("/corpus/bad.gguf");
    gguf::parse(path, &seed).expect("the seed is valid");
    let h = gguf::parse(path, &seed).expect("valid");
    let data_end = |name: &str| {
        let t = h.tensor(name).expect("seed tensor");
        (h.data_offset() + t.offset + t.n_bytes) as usize
    };

    let edit = |e: &dyn Fn(&mut Vec<u8>)| {
        let mut b = seed.clone();
        e(&mut b);
        b
    };
    let align_kv = f.kv("general.alignment");
    let k2 = f.kv("a.k2");
    let (k2_elem_at, k2_count_at) = k2.array_at.expect("a.k2 is an array");
    let (t0, t1, t2) = (f.info("t0"), f.info("t1"), f.info("t2"));
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("bad magic", edit(&|b| b[3] = b'G'), "bad magic \"GGUG\""),
        (
            "version 1",
            edit(&|b| put_u32(b, 4, 1)),
            "unsupported GGUF version 1 ",
        ),
        (
            "version 4",
            edit(&|b| put_u32(b, 4, 4)),
            "unsupported GGUF version 4 ",
        ),
        (
            "version 0",
            edit(&|b| put_u32(b, 4, 0)),
            "unsupported GGUF version 0 ",
        ),
        (
            "big-endian",
            edit(&|b| put_u32(b, 4, 3u32.swap_bytes())),
            "big-endian",
        ),
        (
            "tensor count 2^63",
            edit(&|b| put_u64(b, 8, 1 << 63)),
            "tensor count 9223372036854775808 at byte 8",
        ),
        (
            "KV count huge",
            edit(&|b| put_u64(b, 16, u64::MAX)),
            "KV count 18446744073709551615 at byte 16",
        ),
        (
            "key length huge",
            edit(&|b| put_u64(b, k2.at, 1 << 62)),
            "longer than the rest of the file",
        ),
        (
            "key empty",
            edit(&|b| put_u64(b, k2.at, 0)),
            "KV pair 3 at byte",
        ),
        (
            "key not UTF-8",
            edit(&|b| b[k2.at + 8] = 0xff),
            "not valid UTF-8",
        ),
        (
            "duplicate key",
            edit(&|b| b[k2.at + 8 + 3] = b'1'),
            "duplicate metadata key 'a.k1'",
        ),
        (
            "value type 13",
            edit(&|b| put_u32(b, k2.type_at, 13)),
            "key 'a.k2' has unknown value type 13",
        ),
        (
            "array elem type 99",
            edit(&|b| put_u32(b, k2_elem_at, 99)),
            "array of unknown value type 99",
        ),
        (
            "array count 2^60",
            edit(&|b| put_u64(b, k2_count_at, 1 << 60)),
            "array of 1152921504606846976 u8",
        ),
        (
            "array count u64::MAX str",
            edit(&|b| {
                put_u32(b, k2_elem_at, 8);
                put_u64(b, k2_count_at, u64::MAX);
            }),
            "array of 18446744073709551615 str",
        ),
        (
            "string length huge",
            edit(&|b| put_u64(b, f.kv("a.k3").value_at, u64::MAX - 3)),
            "longer than the rest",
        ),
        (
            "bool 2",
            edit(&|b| b[f.kv("a.k4").value_at] = 2),
            "bool byte 2",
        ),
        (
            "alignment 0",
            edit(&|b| put_u32(b, align_kv.value_at, 0)),
            "general.alignment = 0 is not a power of two",
        ),
        (
            "alignment 3",
            edit(&|b| put_u32(b, align_kv.value_at, 3)),
            "general.alignment = 3 is not a power of two",
        ),
        (
            "alignment as string",
            edit(&|b| {
                let mut s = 8u32.to_le_bytes().to_vec();
                s.extend(2u64.to_le_bytes());
                s.extend(b"32");
                b.splice(align_kv.type_at..align_kv.type_at + 8, s);
            }),
            "general.alignment must be a u32, found str \"32\"",
        ),
        (
            "alignment as u64",
            edit(&|b| {
                put_u32(b, align_kv.type_at, 10);
                b.splice(
                    align_kv.value_at..align_kv.value_at + 4,
                    32u64.to_le_bytes(),
                );
            }),
            "general.alignment must be a u32, found u64 32",
        ),
        (
            "tensor name empty",
            edit(&|b| put_u64(b, t1.at, 0)),
            "tensor 1 (info at byte",
        ),
        (
            "duplicate tensor",
            edit(&|b| b[t1.at + 9] = b'0'),
            "duplicate tensor name 't0'",
        ),
        (
            "n_dims 0",
            edit(&|b| put_u32(b, t0.n_dims_at, 0)),
            "tensor 't0' has n_dims = 0",
        ),
        (
            "n_dims 5",
            edit(&|b| put_u32(b, t0.n_dims_at, 5)),
            "tensor 't0' has n_dims = 5",
        ),
        (
            "ggml type 999",
            edit(&|b| put_u32(b, t1.type_at, 999)),
            "has unknown ggml type 999",
        ),
        (
            "ggml type 4 (removed)",
            edit(&|b| put_u32(b, t1.type_at, 4)),
            "unknown ggml type 4",
        ),
        (
            "ne0 33 q8_0",
            edit(&|b| put_u64(b, t1.dims_at[0], 33)),
            "ne0 = 33 elements per row, not a multiple of the q8_0 block size 32",
        ),
        (
            "dim 0",
            edit(&|b| put_u64(b, t0.dims_at[1], 0)),
            "dimension 1 = 0",
        ),
        (
            "dim huge",
            edit(&|b| put_u64(b, t0.dims_at[1], u64::MAX)),
            "more than ggml's limit",
        ),
        (
            "dims product overflows",
            edit(&|b| {
                put_u64(b, t0.dims_at[0], 1 << 32);
                put_u64(b, t0.dims_at[1], 1 << 32);
            }),
            "element count overflows",
        ),
        (
            "bytes past the file",
            edit(&|b| put_u64(b, t0.dims_at[1], 1 << 40)),
            "ends past the end of the file",
        ),
        (
            "offset misaligned",
            edit(&|b| put_u64(b, t1.offset_at, 65)),
            "offset 65, not a multiple of the alignment 32",
        ),
        (
            "offset out of order",
            edit(&|b| put_u64(b, t1.offset_at, 0)),
            "tensors overlap or are out of order",
        ),
        (
            "offset gap",
            edit(&|b| {
                let old = get_u64(b, t2.offset_at);
                put_u64(b, t2.offset_at, old + 32)
            }),
            "leaves a gap",
        ),
        (
            "offset huge",
            edit(&|b| put_u64(b, t0.offset_at, u64::MAX - 31)),
            "tensor 't0'",
        ),
        (
            "data cut short",
            seed[..data_end("t2") - 1].to_vec(),
            "truncated: tensor 't2'",
        ),
        (
            "data cut in t1",
            seed[..data_end("t1") - 100].to_vec(),
            "truncated: tensor 't1'",
        ),
        (
            "cut before data",
            seed[..f.infos_end + 1].to_vec(),
            "truncated: ",
        ),
    ];
    for (label, bytes, want) in &cases {
        let msg = expect_gguf_err(label, path, bytes, &[want]);
        eprintln!("{label:>26}: {msg}");
    }

    // Truncated anywhere before the end of the last tensor's data: an error that says so; at or
    // after it (only padding missing), still valid.
    let last_end = data_end("t2");
    for cut in 0..seed.len() {
        let label = format!("cut at {cut}");
        if cut < last_end {
            expect_gguf_err(
                &label,
                path,
                &seed[..cut],
                &["truncated", "bytes left", "rest of the file"],
            );
        } else {
            gguf::parse(path, &seed[..cut]).unwrap_or_else(|e| panic!("{label}: {e}"));
        }
    }
}

/// Random mutations of valid files (bit flips, field overwrites with edge values, truncations,
/// insertions, deletions, duplicated ranges) never make the reader or the model finder panic.
#[test]
fn fuzz_mutations_never_panic() {
    let _heavy = HEAVY.lock().unwrap_or_else(|e| e.into_inner());
    let iters: usize = std::env::var("MOE_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30_000);
    let seed = tests::seed("gguf fuzz");
    let seeds = [
        corpus_seed(),
        build(&every_value(), &mixed_specs(), 64),
        moe_file(false),
        moe_file(true),
    ];
    let fields: Vec<Fields> = seeds.iter().map(|s| walk(s)).collect();
    let path = Path::new("fuzz.gguf");
    let mut rng = Rng::new(seed);
    let (mut n_ok, mut n_moe_ok) = (0usize, 0usize);
    let start = Instant::now();
    for i in 0..iters {
        let which = rng.below(seeds.len() as u64) as usize;
        let mut b = seeds[which].clone();
        for _ in 0..1 + rng.below(3) {
            mutate(&mut rng, &mut b, &fields[which]);
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let Ok(_) = gguf::parse(path, &b) else {
                return (false, false);
            };
            let Ok(f) = GgufFile::from_vec(path, b.clone()) else {
                panic!("parse accepted, from_vec refused")
            };
            for t in f.tensors() {
                assert_eq!(f.tensor_data(t).len() as u64, t.n_bytes);
            }
            let moe = f.model_info().is_ok() && f.moe_layers().is_ok();
            (true, moe)
        }));
        match outcome {
            Ok((ok, moe)) => {
                n_ok += usize::from(ok);
                n_moe_ok += usize::from(moe);
            }
            Err(_) => panic!(
                "input {i} (seed file {which}, MOE_TEST_SEED={seed}) panicked; {} bytes",
                b.len()
            ),
        }
    }
    eprintln!(
        "gguf fuzz: {iters} mutated inputs in {:.2?}: {n_ok} parsed, {n_moe_ok} with valid MoE layers, {} rejected",
        start.elapsed(),
        iters - n_ok
    );
}

fn mutate(rng: &mut Rng, b: &mut Vec<u8>, f: &Fields) {
    const EDGES: [u64; 10] = [0, 1, 2, 3, 5, 0xff, 1 << 31, 1 << 32, 1 << 63, u64::MAX];
    let edge = |rng: &mut Rng, old: u64| match rng.below(4) {
        0 => EDGES[rng.below(EDGES.len() as u64) as usize],
        1 => old.wrapping_add(rng.below(9)).wrapping_sub(4),
        2 => rng.next_u64() >> rng.below(64),
        _ => rng.next_u64(),
    };
    let len = b.len() as u64;
    let pos = |rng: &mut Rng| rng.below(len.max(1)) as usize;
    match rng.below(8) {
        0 if len > 0 => {
            let p = pos(rng);
            b[p] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let p = pos(rng);
            b[p] = rng.next_u32() as u8;
        }
        2 => {
            let at = f.u64s[rng.below(f.u64s.len() as u64) as usize];
            if at + 8 <= b.len() {
                let v = edge(rng, get_u64(b, at));
                put_u64(b, at, v);
            }
        }
        3 => {
            let at = f.u32s[rng.below(f.u32s.len() as u64) as usize];
            if at + 4 <= b.len() {
                let old = u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes")) as u64;
                put_u32(b, at, edge(rng, old) as u32);
            }
        }
        4 => b.truncate(rng.below(len + 1) as usize),
        5 => {
            let p = rng.below(len + 1) as usize;
            let mut ins = vec![0u8; 1 + rng.below(16) as usize];
            rng.fill_bytes(&mut ins);
            b.splice(p..p, ins);
        }
        6 if len > 0 => {
            let p = pos(rng);
            let n = (1 + rng.below(64) as usize).min(b.len() - p);
            b.drain(p..p + n);
        }
        _ if len > 0 => {
            let p = pos(rng);
            let n = (1 + rng.below(128) as usize).min(b.len() - p);
            let copy = b[p..p + n].to_vec();
            let to = rng.below(len + 1) as usize;
            b.splice(to..to, copy);
        }
        _ => {}
    }
}
