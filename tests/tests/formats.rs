//! Weight formats: our decoders against an outside oracle.
//! - Q8_0, IQ4_NL and the five IQ2/IQ3 types: golden hashes of the `gguf` Python package's
//!   dequantization (tests/data/dequant_golden.txt, made by scripts/gguf_golden.py) over 2,048
//!   random blocks per type, regenerated here from the same splitmix64 stream.
//! - Q2_0 (gguf-py has none): hand-made blocks, and thousands of random blocks against a
//!   transcription of ggml's `dequantize_row_q2_0` loop written in the test.

use gpu::layout::WType;
use host::formats::{decode_row, dequant_row, quantize, random};
use tests::*;

const SEED: u64 = 0x5eed_601d;

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The blocks scripts/gguf_golden.py generates.
fn golden_blocks(w: WType, n: usize) -> Vec<u8> {
    let bb = w.block_bytes();
    let mut state = SEED ^ (w.id() as u64 * 0x0100_0193);
    let mut out = Vec::with_capacity(n * bb);
    for _ in 0..n {
        let mut raw = Vec::new();
        let mut first = None;
        for _ in 0..bb.div_ceil(8) {
            let v = splitmix64(&mut state);
            first.get_or_insert(v);
            raw.extend_from_slice(&v.to_le_bytes());
        }
        raw.truncate(bb);
        let f = first.expect("a block has at least one word");
        let d = ((5 + (f >> 20) % 16) << 10) as u16 | ((f >> 40) & 0x3ff) as u16;
        raw[..2].copy_from_slice(&d.to_le_bytes());
        out.extend_from_slice(&raw);
    }
    out
}

fn fnv1a64(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

#[test]
fn dequant_equals_gguf_py() {
    let text = include_str!("../data/dequant_golden.txt");
    let mut checked = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let mut it = line.split_whitespace();
        let id: u32 = it.next().expect("type id").parse().expect("number");
        let n: usize = it.next().expect("count").parse().expect("number");
        let want: Vec<u64> = it
            .map(|h| u64::from_str_radix(h, 16).expect("hex"))
            .collect();
        assert_eq!(want.len(), n);
        let w = WType::from_id(id).expect("a type of ours");
        let blocks = golden_blocks(w, n);
        let mut bad = Vec::new();
        let mut out = vec![0.0f32; w.block_values()];
        for (i, b) in blocks.chunks_exact(w.block_bytes()).enumerate() {
            dequant_row(w, b, &mut out);
            if fnv1a64(bytemuck::cast_slice(&out)) != want[i] {
                bad.push(i);
            }
        }
        assert!(
            bad.is_empty(),
            "{}: {} of {n} blocks differ from gguf-py, first {:?}",
            w.name(),
            bad.len(),
            &bad[..bad.len().min(8)]
        );
        eprintln!("{}: {n} blocks equal gguf-py's dequantization", w.name());
        checked += 1;
    }
    assert_eq!(
        checked, 7,
        "golden file should cover the 7 types gguf-py has"
    );
}

/// ggml's `dequantize_row_q2_0`, transcribed loop for loop (ggml-quants.c): the oracle for Q2_0.
fn ggml_dequantize_row_q2_0(x: &[u8], y: &mut [f32]) {
    for (i, blk) in x.chunks_exact(18).enumerate() {
        let d = half::f16::from_bits(u16::from_le_bytes([blk[0], blk[1]])).to_f32();
        for j in 0..64 {
            let q = (blk[2 + j / 4] >> ((j % 4) * 2)) & 3;
            y[i * 64 + j] = (q as i32 - 1) as f32 * d;
        }
    }
}

#[test]
fn q2_0_hand_made_blocks() {
    // d = 0.5; codes 0,1,2,3 in the first byte -> -0.5, 0, 0.5, 1.0; byte 1 = 0xff -> 1.0 x4
    let mut b = [0u8; 18];
    b[..2].copy_from_slice(&0x3800u16.to_le_bytes());
    b[2] = 0b11_10_01_00;
    b[3] = 0xff;
    let mut y = [0.0f32; 64];
    dequant_row(WType::Q2_0, &b, &mut y);
    assert_eq!(&y[..8], &[-0.5, 0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0]);
    assert!(y[8..].iter().all(|&v| v == -0.5), "code 0 everywhere else");
    // the int8 form MMQ uses: c - 1, one scale for both 32-halves
    let (mut q, mut s) = ([0i8; 64], [0.0f32; 4]);
    decode_row(WType::Q2_0, &b, &mut q, &mut s);
    assert_eq!(&q[..8], &[-1, 0, 1, 2, 2, 2, 2, 2]);
    assert_eq!(s, [0.5; 4]);
}

#[test]
fn q2_0_random_blocks_equal_ggml_loop() {
    let mut rng = Rng::new(seed("q2_0_random_blocks_equal_ggml_loop"));
    let n = 20_000;
    let r = random::ScaleRange {
        lo: 1e-6,
        hi: 1e3,
        signed: true,
    };
    let bytes = random::random_blocks(WType::Q2_0, n, &mut rng, r);
    let mut want = vec![0.0f32; n * 64];
    let mut got = vec![0.0f32; n * 64];
    ggml_dequantize_row_q2_0(&bytes, &mut want);
    dequant_row(WType::Q2_0, &bytes, &mut got);
    assert_bytes_eq(
        "q2_0 dequant",
        bytemuck::cast_slice(&got),
        bytemuck::cast_slice(&want),
        |i| format!("block {}, value {}", i / 256, i / 4 % 64),
    );
}

/// The int8 form (values and per-16 scales) times its scale is the dequantized value, for every
/// type, on random blocks with scales over a wide range (including f16 subnormals).
#[test]
fn int8_form_times_scale_is_dequant() {
    let mut rng = Rng::new(seed("int8_form_times_scale_is_dequant"));
    for w in WType::ALL {
        let n = 512;
        let r = random::ScaleRange {
            lo: 1e-7,
            hi: 6e4,
            signed: true,
        };
        let bytes = random::random_blocks(w, n, &mut rng, r);
        let k = n * w.block_values();
        let (mut q, mut s, mut y) = (vec![0i8; k], vec![0.0f32; k / 16], vec![0.0f32; k]);
        decode_row(w, &bytes, &mut q, &mut s);
        dequant_row(w, &bytes, &mut y);
        for i in 0..k {
            assert_eq!(
                (q[i] as f32 * s[i / 16]).to_bits(),
                y[i].to_bits(),
                "{} value {i}",
                w.name()
            );
        }
        if w.scale_values() == 32 {
            assert!(
                s.chunks(2).all(|p| p[0].to_bits() == p[1].to_bits()),
                "{}: one scale per 32",
                w.name()
            );
        }
    }
}

#[test]
fn quantizers_round_trip_within_their_step() {
    let mut rng = Rng::new(seed("quantizers_round_trip_within_their_step"));
    let x: Vec<f32> = (0..64 * 256).map(|_| rng.normal() as f32).collect();
    let mut y = vec![0.0f32; x.len()];
    let rms = |y: &[f32]| {
        (y.iter()
            .zip(&x)
            .map(|(a, b)| ((a - b) as f64).powi(2))
            .sum::<f64>()
            / x.len() as f64)
            .sqrt()
    };
    dequant_row(
        WType::Q8_0,
        bytemuck::cast_slice(&quantize::quantize_q8_0(&x)),
        &mut y,
    );
    let e8 = rms(&y);
    dequant_row(
        WType::Iq4Nl,
        bytemuck::cast_slice(&quantize::quantize_iq4_nl(&x, 7)),
        &mut y,
    );
    let e4 = rms(&y);
    dequant_row(
        WType::Q2_0,
        bytemuck::cast_slice(&quantize::quantize_q2_0(&x)),
        &mut y,
    );
    let e2 = rms(&y);
    eprintln!("rms error on N(0,1): q8_0 {e8:.4}, iq4_nl {e4:.4}, q2_0 {e2:.4}");
    // Q2_0 with d = amax puts |x| < amax / 2 on 0: about 0.7 rms on N(0,1).
    assert!(e8 < 0.01 && e4 < 0.12 && e2 < 0.8 && e8 < e4 && e4 < e2);
}
