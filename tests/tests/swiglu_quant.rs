//! swiglu_quant: the fused kernel, the two-kernel form and the CPU reference give identical bytes.

use gpu::layout::{BlockQ8_1Mmq, WType, padded_k};
use host::moe::swiglu_quant::SwigluQuantPlan;
use host::problem::SwigluQuantShape;
use host::reference::swiglu_quant as reference;
use tests::*;

fn poisoned_blocks(n: usize) -> Vec<BlockQ8_1Mmq> {
    let b: BlockQ8_1Mmq = bytemuck::cast([POISON; 144]);
    vec![b; n]
}

/// Gate/up rows with gate = 32 (where SiLU(32) == 32 exactly in f32, since exp(-32) < 2^-24) and
/// up = h / 32, so that swiglu gives exactly `h`.
fn exact_rows(rows: &[Vec<f32>], ffn: usize) -> Vec<f32> {
    let mut gu = vec![0.0f32; rows.len() * 2 * ffn];
    for (r, h) in rows.iter().enumerate() {
        for j in 0..ffn {
            let v = h.get(j).copied().unwrap_or(0.0);
            gu[r * 2 * ffn + j] = 32.0;
            gu[r * 2 * ffn + ffn + j] = v / 32.0;
        }
    }
    gu
}

/// Rows worked out by hand: zero row, one huge value, rounding ties, negative zero, NaN.
#[test]
fn reference_hand_made_rows() {
    let ffn = 128;
    assert_eq!(
        gpu::quant::swiglu(32.0, 0.25),
        8.0,
        "SiLU(32) must be exactly 32"
    );
    let mut rows = vec![vec![0.0f32; ffn]; 5];
    // 1: one huge value among ones
    rows[1] = vec![1.0; ffn];
    rows[1][5] = 3.0e38;
    // 2: ties on a scale of exactly 1 (amax 127 -> d_inv = 1)
    rows[2] = vec![0.0; ffn];
    rows[2][..6].copy_from_slice(&[127.0, 0.5, 1.5, -2.5, 126.5, -0.5]);
    // 3: negative zeros
    rows[3] = vec![-0.0; ffn];
    // 4: a NaN among ones
    rows[4] = vec![1.0; ffn];
    rows[4][0] = f32::NAN;
    let mut gu = exact_rows(&rows, ffn);
    // row 3 also has gate = -0 for its second half: SiLU(-0) * 1 = -0
    for j in 64..ffn {
        gu[3 * 2 * ffn + j] = -0.0;
        gu[3 * 2 * ffn + ffn + j] = 1.0;
    }
    let s = SwigluQuantShape::dense(5, ffn, false);
    let mut fused = poisoned_blocks(s.out_blocks());
    reference::swiglu_quant(&gu, &s, &mut fused);
    let blk = |r: usize, kc: usize| fused[kc * 5 + r];

    // Padding blocks (values 128..511) are all-zero groups: d = 0, q = 0.
    for r in 0..5 {
        for kc in 1..4 {
            assert_eq!(
                bytemuck::bytes_of(&blk(r, kc)),
                &[0u8; 144][..],
                "row {r} chunk {kc}"
            );
        }
    }
    // Row 0: zeros.
    assert_eq!(bytemuck::bytes_of(&blk(0, 0)), &[0u8; 144][..]);
    // Row 1: q = 127 at the huge value, 0 elsewhere in its group (1 / 3e38 * 127 rounds to 0);
    // other groups are all ones: q = 127, d = 1 / 127.
    let b = blk(1, 0);
    assert_eq!(b.d[0], 1.0 / (127.0 / 3.0e38));
    assert_eq!(b.qs[5], 127);
    assert!(
        b.qs[..32]
            .iter()
            .enumerate()
            .all(|(i, &q)| i == 5 || q == 0)
    );
    assert_eq!(b.d[1], 1.0 / 127.0);
    assert!(b.qs[32..].iter().all(|&q| q == 127));
    // Row 2: ties round away from zero; d = 1.
    let b = blk(2, 0);
    assert_eq!(b.d[0], 1.0);
    assert_eq!(&b.qs[..6], &[127, 1, 2, -3, 127, -1]);
    assert!(b.qs[6..32].iter().all(|&q| q == 0));
    assert_eq!(&b.d[1..], &[0.0; 3]);
    // Row 3: negative zeros quantize to 0 with d = +0.
    assert_eq!(bytemuck::bytes_of(&blk(3, 0)), &[0u8; 144][..]);
    // Row 4: NaN -> q = 0 and is ignored by the group maximum (ggml: fmaxf skips NaN, the
    // float-to-int conversion of NaN gives 0).
    let b = blk(4, 0);
    assert_eq!(b.qs[0], 0);
    assert!(b.qs[1..].iter().all(|&q| q == 127));
    assert_eq!(b.d, [1.0 / 127.0; 4]);

    // The two-kernel form on the CPU gives the same bytes.
    let h = reference::swiglu_f32(&gu, &s);
    let mut two = poisoned_blocks(s.out_blocks());
    reference::quantize_q8_1(&h, 5, ffn, ffn, 5, &mut two);
    assert_eq!(
        bytemuck::cast_slice::<_, u8>(&two),
        bytemuck::cast_slice::<_, u8>(&fused)
    );
}

fn random_gate_up(rng: &mut Rng, s: &SwigluQuantShape) -> Vec<f32> {
    let mut gu = vec![0.0f32; s.gu_len()];
    for v in gu.iter_mut() {
        *v = (rng.normal() * 3.0) as f32;
    }
    // a zero row and a row with one huge value among the others
    let zero_row = if s.n_rows > 1 { 0 } else { usize::MAX };
    let huge_row = s.n_rows / 2;
    for r in 0..s.n_rows {
        for j in 0..2 * s.ffn {
            let i = r * s.gu_stride + j;
            if r == zero_row {
                gu[i] = 0.0;
            }
        }
    }
    let j = rng.below(s.ffn as u64) as usize;
    let (g, u) = if s.interleaved {
        (2 * j, 2 * j + 1)
    } else {
        (j, s.ffn + j)
    };
    gu[huge_row * s.gu_stride + g] = 40.0;
    gu[huge_row * s.gu_stride + u] = 7.5e36;
    if s.n_rows == 1 {
        // the single row also gets an all-zero group
        for k in 0..32 {
            let (g, u) = if s.interleaved {
                (2 * (64 + k), 2 * (64 + k) + 1)
            } else {
                (64 + k, s.ffn + 64 + k)
            };
            gu[g] = 0.0;
            gu[u] = 0.0;
        }
    }
    gu
}

#[test]
fn reference_fused_equals_two_kernel() {
    let mut rng = Rng::new(seed("reference_fused_equals_two_kernel"));
    for interleaved in [false, true] {
        let s = SwigluQuantShape {
            n_rows: 37,
            ffn: 640,
            gu_stride: 1288,
            interleaved,
            n_cols: 40,
            padded: true,
        };
        let gu = random_gate_up(&mut rng, &s);
        let mut fused = poisoned_blocks(s.out_blocks());
        reference::swiglu_quant(&gu, &s, &mut fused);
        let h = reference::swiglu_f32(&gu, &s);
        let mut two = poisoned_blocks(s.out_blocks());
        reference::quantize_q8_1(&h, s.n_rows, s.ffn, s.ffn, s.n_cols, &mut two);
        assert_bytes_eq(
            "cpu fused vs two-kernel",
            bytemuck::cast_slice(&two),
            bytemuck::cast_slice(&fused),
            locate_q8_1(s.n_cols),
        );
    }
}

/// One GPU case: fused, two-kernel (padded rows only) and CPU reference must agree on every
/// byte; the output buffer is poisoned a block past the shape's own blocks, which stays poison.
fn gpu_case(gpu: &host::device::Gpu, rng: &mut Rng, s: SwigluQuantShape, down: WType) {
    let label = format!(
        "down {} {} rows {} ffn {}",
        down.name(),
        if s.interleaved {
            "interleaved"
        } else {
            "split"
        },
        s.n_rows,
        s.ffn
    );
    let plan = SwigluQuantPlan::new(&s, down.id()).expect("plan");
    let gu = random_gate_up(rng, &s);
    let out_bytes = s.out_blocks() * 144;
    if !s.padded {
        assert_eq!(s.out_blocks(), s.ffn / 128 * s.n_cols);
    }

    let mut want_blocks = poisoned_blocks(s.out_blocks());
    reference::swiglu_quant(&gu, &s, &mut want_blocks);
    let want: &[u8] = bytemuck::cast_slice(&want_blocks);
    let want_h = reference::swiglu_f32(&gu, &s);

    let d_gu = gpu.upload(&gu).expect("upload");
    let mut fused = poisoned_u8(gpu, out_bytes);
    plan.launch(gpu, &d_gu, &mut fused).expect("launch fused");
    gpu.sync().expect("kernels should run without fault");
    let got = download_checked(gpu, &label, &fused, out_bytes);
    assert_bytes_eq(&format!("{label} fused"), &got, want, locate_q8_1(s.n_cols));
    if !s.padded {
        let mut h = poisoned_f32(gpu, plan.h_len());
        let e = plan.launch_two_kernel(gpu, &d_gu, &mut h, &mut fused);
        assert!(
            e.is_err(),
            "{label}: the two-kernel form writes padded rows only"
        );
        return;
    }
    let mut two = poisoned_u8(gpu, out_bytes);
    let mut h = poisoned_f32(gpu, plan.h_len());
    plan.launch_two_kernel(gpu, &d_gu, &mut h, &mut two)
        .expect("launch two-kernel");
    gpu.sync().expect("kernels should run without fault");

    let got_h = download_checked_f32(gpu, &label, &h, plan.h_len());
    assert_bytes_eq(
        &format!("{label} two-kernel H"),
        &got_h,
        bytemuck::cast_slice(&want_h),
        |i| format!("row {}, value {}", i / 4 / s.ffn, i / 4 % s.ffn),
    );
    let got = download_checked(gpu, &label, &two, out_bytes);
    assert_bytes_eq(
        &format!("{label} two-kernel"),
        &got,
        want,
        locate_q8_1(s.n_cols),
    );
}

/// The 18 cases: down Q2_0 / IQ4_NL / Q8_0 x split / interleaved x 1 / 37 / 4113 rows, n_ff 640.
/// Rows of the output beyond n_rows stay poisoned (compared as such).
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_matches_reference() {
    let gpu = gpu();
    let mut rng = Rng::new(seed("gpu_matches_reference"));
    for down in [WType::Q2_0, WType::Iq4Nl, WType::Q8_0] {
        for interleaved in [false, true] {
            for n_rows in [1, 37, 4113] {
                let s = SwigluQuantShape {
                    n_rows,
                    ffn: 640,
                    gu_stride: 2 * 640 + if interleaved { 0 } else { 8 },
                    interleaved,
                    n_cols: n_rows + 3,
                    padded: true,
                };
                gpu_case(&gpu, &mut rng, s, down);
                // The layer's H: the data chunks only, the rest of the buffer untouched.
                gpu_case(
                    &gpu,
                    &mut rng,
                    SwigluQuantShape { padded: false, ..s },
                    down,
                );
            }
        }
    }
}

/// Other widths: every multiple of 128 the issue names up to 2048 works.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_other_widths() {
    let gpu = gpu();
    let mut rng = Rng::new(seed("gpu_other_widths"));
    for ffn in [128, 256, 384, 512, 768, 1024, 1152, 1536, 2048, 2560] {
        assert_eq!(padded_k(ffn) % 512, 0);
        for interleaved in [false, true] {
            gpu_case(
                &gpu,
                &mut rng,
                SwigluQuantShape::dense(300, ffn, interleaved),
                WType::Q2_0,
            );
        }
    }
}

/// No rows: nothing launched, the output stays as it was.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_zero_rows() {
    let gpu = gpu();
    let s = SwigluQuantShape {
        n_rows: 0,
        ffn: 640,
        gu_stride: 1280,
        interleaved: false,
        n_cols: 4,
        padded: true,
    };
    let plan = SwigluQuantPlan::new(&s, WType::Q8_0.id()).expect("plan");
    let gu = gpu.upload(&[0.0f32; 4]).expect("upload");
    let mut out = poisoned_u8(&gpu, s.out_blocks() * 144);
    plan.launch(&gpu, &gu, &mut out).expect("launch");
    gpu.sync().expect("sync");
    let got = download_checked(&gpu, "zero rows", &out, s.out_blocks() * 144);
    assert!(got.iter().all(|&b| b == POISON));
}

/// SwiGLU over gate values from every corner of f32 (random bit patterns: subnormals, huge,
/// infinities, NaN; and dense ranges around 0, the tails of exp and its overflow), through the
/// two-kernel form whose first kernel stores H as f32: the GPU's exp and its branch-free
/// division must give the reference's bits. NaNs compare as NaN (PTX returns the canonical
/// NaN, x86 keeps the operand's payload); every other value bit for bit.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_swiglu_sweep() {
    let gpu = gpu();
    let mut rng = Rng::new(seed("gpu_swiglu_sweep"));
    let (n_rows, ffn) = (4096, 1024);
    let s = SwigluQuantShape::dense(n_rows, ffn, false);
    let plan = SwigluQuantPlan::new(&s, WType::Q8_0.id()).expect("plan");
    let mut gu = vec![0.0f32; s.gu_len()];
    for r in 0..n_rows {
        for j in 0..ffn {
            let g = match r % 4 {
                0 => f32::from_bits(rng.next_u32()),
                1 => rng.uniform(-120.0, 120.0),
                2 => (rng.normal() * 3.0) as f32,
                _ => {
                    f32::from_bits((rng.next_u32() & 0x807f_ffff) | ((rng.below(80) as u32) << 23))
                }
            };
            gu[r * 2 * ffn + j] = g;
            gu[r * 2 * ffn + ffn + j] = if r % 8 == 5 {
                f32::from_bits(rng.next_u32())
            } else {
                rng.normal() as f32
            };
        }
    }
    let want = reference::swiglu_f32(&gu, &s);
    let d_gu = gpu.upload(&gu).expect("upload");
    let mut h = poisoned_f32(&gpu, plan.h_len());
    let mut out = poisoned_u8(&gpu, s.out_blocks() * 144);
    plan.launch_two_kernel(&gpu, &d_gu, &mut h, &mut out)
        .expect("launch");
    gpu.sync().expect("sync");
    let got = download_checked_f32(&gpu, "sweep", &h, plan.h_len());
    let canon = |b: &[u8]| -> Vec<u8> {
        b.chunks(4)
            .flat_map(|c| {
                let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                if v.is_nan() {
                    f32::NAN.to_le_bytes()
                } else {
                    v.to_le_bytes()
                }
            })
            .collect()
    };
    let nans = want.iter().filter(|v| v.is_nan()).count();
    eprintln!("sweep: {} values, {nans} NaN", want.len());
    assert_bytes_eq(
        "swiglu sweep H",
        &canon(&got),
        &canon(bytemuck::cast_slice(&want)),
        |i| {
            let (r, j) = (i / 4 / ffn, i / 4 % ffn);
            format!(
                "row {r} value {j}: gate {:e} up {:e}",
                gu[r * 2 * ffn + j],
                gu[r * 2 * ffn + ffn + j]
            )
        },
    );
    // the fused kernel on the same inputs equals the reference bit for bit (NaN -> q = 0)
    let mut fused = poisoned_u8(&gpu, s.out_blocks() * 144);
    plan.launch(&gpu, &d_gu, &mut fused).expect("launch");
    gpu.sync().expect("sync");
    let mut wb = poisoned_blocks(s.out_blocks());
    reference::swiglu_quant(&gu, &s, &mut wb);
    let got = download_checked(&gpu, "sweep fused", &fused, s.out_blocks() * 144);
    assert_bytes_eq(
        "swiglu sweep fused",
        &got,
        bytemuck::cast_slice(&wb),
        locate_q8_1(n_rows),
    );
}
