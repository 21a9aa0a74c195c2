//! Probe kernels on the GPU: the parameter-struct ABI, the hold kernel of the timing harnesses,
//! and ggml's fast-math q8_1 arithmetic against ours (the README's figure for how often our
//! scales differ from ggml's).

use cudarc::driver::{LaunchConfig, PushKernelArg};
use gpu::layout::SwigluQuantParams;
use host::device::KArg;
use tests::*;

#[test]
#[ignore = "needs a CUDA GPU"]
fn params_echo() {
    let gpu = gpu();
    let p = SwigluQuantParams {
        gu: 0x0102_0304_0506_0708,
        out: 0x1112_1314_1516_1718,
        n_rows: 0x2122_2324,
        ffn: 0x3132_3334,
        gu_stride: 0x4142_4344,
        n_cols: 0x5152_5354,
        interleaved: 0x6162_6364,
        out_chunks: 0x7172_7374,
    };
    let mut out = gpu
        .alloc_filled::<u8>(size_of::<SwigluQuantParams>(), POISON)
        .expect("alloc");
    let arg = KArg(p);
    let cfg = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the probe writes one SwigluQuantParams to `out`, which holds exactly that.
    unsafe {
        gpu.stream
            .launch_builder(&gpu.kernels.probe_params_echo)
            .arg(&arg)
            .arg(&mut out)
            .launch(cfg)
    }
    .expect("launch");
    let got = gpu.download(&out).expect("download");
    assert_eq!(got, bytemuck::bytes_of(&p));
}

/// `Gpu::hold` keeps the stream busy for at least its time: the GPU's events around it are at
/// least that far apart (a kernel that returned at once, or spun on a wrong timer, fails), and
/// a hold of 0 returns.
#[test]
#[ignore = "needs a CUDA GPU"]
fn hold_keeps_the_stream_busy() {
    let gpu = gpu();
    let timer = host::timing::Timer::new(&gpu).expect("events");
    for us in [0u32, 50, 300] {
        let ms = timer.time(&gpu, || gpu.hold(us)).expect("hold");
        assert!(ms * 1e3 >= us as f64 * 0.999, "hold({us}) took {ms} ms");
    }
}

/// Runs a probe kernel with one thread per binary16 pattern (65,536) and one output buffer
/// argument of `per` u32 per thread (poisoned first); returns the buffer.
///
/// # Safety
/// `kernel` takes exactly that buffer and writes only its `65,536 x per` u32.
unsafe fn every_f16_pattern(
    gpu: &host::device::Gpu,
    kernel: &cudarc::driver::CudaFunction,
    per: usize,
) -> Vec<u32> {
    let mut out = gpu
        .alloc_filled::<u32>(per * 65_536, POISON)
        .expect("alloc");
    let cfg = LaunchConfig {
        grid_dim: (256, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: 65,536 threads; the caller's contract for what they write.
    unsafe { gpu.stream.launch_builder(kernel).arg(&mut out).launch(cfg) }.expect("launch");
    gpu.download(&out).expect("download")
}

/// The GPU's f16 -> f32 (hardware `cvt.f32.f16` for finite values, the integer path for
/// infinities and NaN) gives the host's bits for all 65,536 patterns: zeros, subnormals,
/// normals, infinities and NaN payloads.
#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_to_f32_every_pattern() {
    let gpu = gpu();
    // SAFETY: the probe writes one u32 per thread.
    let got = unsafe { every_f16_pattern(&gpu, &gpu.kernels.probe_f16_to_f32, 1) };
    let mut bad = 0;
    for (h, g) in got.iter().enumerate() {
        let want = gpu::quant::f16_to_f32_soft(h as u16).to_bits();
        if *g != want {
            if bad < 8 {
                eprintln!("f16 {h:#06x}: GPU {g:#010x}, host {want:#010x}");
            }
            bad += 1;
        }
    }
    assert_eq!(bad, 0, "{bad} of 65536 patterns differ");
}

/// The decoders read weight scales with a plain `cvt.f32.f16` (`quant::f16_scale_to_f32`),
/// whose NaN payload PTX leaves unspecified: MMQ's scale steps on the GPU give the same bits
/// with it as with the payload-keeping conversion, for all 65,536 patterns as the weight scale
/// (NaN and infinities included), and the host's bits wherever the result is not NaN.
#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_scale_conversion_keeps_mmq_steps() {
    use gpu::quant::{f16_to_f32_soft, mmq_step_16, mmq_step_32};
    let gpu = gpu();
    // SAFETY: the probe writes four u32 per thread.
    let got = unsafe { every_f16_pattern(&gpu, &gpu.kernels.probe_f16_scale_step, 4) };
    let (mut differ, mut nan_results, mut off_host) = (0, 0, 0);
    for h in 0..65_536usize {
        let g = &got[4 * h..4 * h + 4];
        let (c0, c1, db, acc) = gpu::quant::scale_probe_inputs(h as u32);
        let d = f16_to_f32_soft(h as u16);
        let other = f16_to_f32_soft(0x3c00 ^ (h as u16 & 0x03ff));
        let host = [
            mmq_step_32(acc, c0, d, db),
            mmq_step_16(acc, c0, c1, other, d, db),
        ];
        for k in 0..2 {
            let (plain, exact) = (g[2 * k], g[2 * k + 1]);
            if plain != exact {
                if differ < 8 {
                    eprintln!("f16 {h:#06x}, step {k}: plain {plain:#010x}, exact {exact:#010x}");
                }
                differ += 1;
            }
            if f32::from_bits(plain).is_nan() {
                nan_results += 1;
                off_host += usize::from(!host[k].is_nan());
            } else {
                off_host += usize::from(plain != host[k].to_bits());
            }
        }
    }
    eprintln!("{nan_results} NaN results of 131072");
    assert_eq!(
        differ, 0,
        "{differ} steps differ between the two conversions"
    );
    assert_eq!(off_host, 0, "{off_host} steps differ from the host's");
    // Every NaN and infinite scale (2 x 2,048 patterns per step) gives NaN: those cases ran.
    assert!(nan_results >= 4096, "{nan_results}");
}

/// ggml's `quantize_mmq_q8_1` under fast math (rcp.approx) vs our IEEE rules on random groups:
/// prints the share of scales and values that differ (README quotes it). The emulation must
/// agree with ours on all-zero groups and differ from ours by at most 4 ulp in d (3 seen on an H200).
#[test]
#[ignore = "needs a CUDA GPU"]
fn ggml_fast_math_q8_1_vs_ours() {
    let gpu = gpu();
    let mut rng = Rng::new(seed("ggml_fast_math_q8_1_vs_ours"));
    let n_groups = 1usize << 20;
    let mut x = vec![0.0f32; n_groups * 32];
    for (g, c) in x.chunks_mut(32).enumerate() {
        let scale = 10f64.powi((g % 13) as i32 - 6);
        for v in c.iter_mut() {
            *v = (rng.normal() * scale) as f32;
        }
        if g % 1000 == 0 {
            c.fill(0.0);
        }
    }
    let dx = gpu.upload(&x).expect("upload");
    let mut dd = gpu.alloc_filled::<f32>(n_groups, POISON).expect("alloc");
    let mut dq = gpu
        .alloc_filled::<i8>(n_groups * 32, POISON)
        .expect("alloc");
    let n = n_groups as u32;
    let cfg = LaunchConfig {
        grid_dim: (n.div_ceil(128), 1, 1),
        block_dim: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: x holds n_groups * 32 f32, d n_groups f32, q n_groups * 32 i8.
    unsafe {
        gpu.stream
            .launch_builder(&gpu.kernels.probe_ggml_q8_1)
            .arg(&dx)
            .arg(&n)
            .arg(&mut dd)
            .arg(&mut dq)
            .launch(cfg)
    }
    .expect("launch");
    let gd = gpu.download(&dd).expect("download");
    let gq = gpu.download(&dq).expect("download");
    let (mut d_diff, mut q_diff, mut max_ulp) = (0usize, 0usize, 0u32);
    for g in 0..n_groups {
        let group: [f32; 32] = x[32 * g..32 * g + 32].try_into().expect("32 values");
        let (d, q) = gpu::quant::quantize_group_q8_1(&group);
        if d.to_bits() != gd[g].to_bits() {
            d_diff += 1;
            max_ulp =
                max_ulp.max((d.to_bits() as i64 - gd[g].to_bits() as i64).unsigned_abs() as u32);
        }
        q_diff += (0..32).filter(|&k| q[k] != gq[32 * g + k]).count();
        if group.iter().all(|&v| v == 0.0) {
            assert_eq!(
                (d, q),
                (gd[g], gq[32 * g..32 * g + 32].try_into().expect("32"))
            );
        }
    }
    eprintln!(
        "q8_1 vs ggml fast math: {d_diff} of {n_groups} scales differ ({:.1} %, at most {max_ulp} ulp), \
         {q_diff} of {} values differ ({:.2e})",
        100.0 * d_diff as f64 / n_groups as f64,
        n_groups * 32,
        q_diff as f64 / (n_groups * 32) as f64
    );
    assert!(max_ulp <= 4, "scales differ by up to {max_ulp} ulp");
    assert!(
        d_diff > 0,
        "no difference at all: is the probe really using rcp.approx?"
    );
}
