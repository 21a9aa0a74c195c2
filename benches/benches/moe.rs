//! Benches, named `<stage>/<path>/<shape>`. GPU time by CUDA events (`benches::time_iters`).
//! After criterion's own report, a summary prints each median with its distance from the
//! ceiling (copy bandwidth measured here; int8 rates from ../shared/docs/h200-ceilings.md).

use criterion::{Criterion, Throughput};
use gpu::layout::WType;
use host::device::Gpu;
use host::moe::swiglu_quant::{SwigluQuantPlan, SwigluQuantShape};
use host::timing::copy_bandwidth;

/// Rows of the swiglu_quant benches: T * top-10 at T = 2,048 / 8,192 / 16,384.
const SWIGLU_ROWS: [usize; 3] = [20_480, 81_920, 163_840];

fn swiglu_quant(c: &mut Criterion, gpu: &Gpu) {
    let mut g = c.benchmark_group("swiglu_quant");
    for rows in SWIGLU_ROWS {
        let s = SwigluQuantShape::dense(rows, 640, false);
        let plan = SwigluQuantPlan::new(&s, WType::Q2_0.id()).expect("plan");
        let gu = gpu
            .upload(&host::synth::normal_f32(rows as u64, s.gu_len(), 3.0))
            .expect("upload");
        let mut out = gpu
            .alloc_filled::<u8>(s.out_blocks() * 144, 0)
            .expect("alloc");
        let mut h = gpu.alloc_filled::<f32>(plan.h_len(), 0).expect("alloc");
        g.throughput(Throughput::Bytes(s.fused_bytes()));
        let id = format!("swiglu_quant/fused/{rows}x640");
        g.bench_function(format!("fused/{rows}x640"), |b| {
            b.iter_custom(|n| {
                benches::time_iters(gpu, &id, n, || {
                    plan.launch(gpu, &gu, &mut out).expect("launch")
                })
            })
        });
        g.throughput(Throughput::Bytes(s.two_kernel_bytes()));
        let id = format!("swiglu_quant/two_kernel/{rows}x640");
        g.bench_function(format!("two_kernel/{rows}x640"), |b| {
            b.iter_custom(|n| {
                benches::time_iters(gpu, &id, n, || {
                    plan.launch_two_kernel(gpu, &gu, &mut h, &mut out)
                        .expect("launch")
                })
            })
        });
    }
    g.finish();
}

fn swiglu_summary(copy_gbs: f64) {
    println!("\nswiglu_quant summary (copy ceiling {copy_gbs:.0} GB/s, read + write):");
    println!(
        "{:<34} {:>10} {:>19} {:>8} {:>7} {:>8}",
        "bench", "median ms", "spread ms", "GB/s", "% copy", "fused x"
    );
    for rows in SWIGLU_ROWS {
        let s = SwigluQuantShape::dense(rows, 640, false);
        let f = benches::stats(&format!("swiglu_quant/fused/{rows}x640"));
        let t = benches::stats(&format!("swiglu_quant/two_kernel/{rows}x640"));
        for (name, st, bytes) in [
            ("fused", f, s.fused_bytes()),
            ("two_kernel", t, s.two_kernel_bytes()),
        ] {
            let Some(st) = st else { continue };
            let gbs = bytes as f64 / (st.median * 1e-3) / 1e9;
            let speedup = match (name, f, t) {
                ("fused", Some(f), Some(t)) => format!("{:.2}x", t.median / f.median),
                _ => String::new(),
            };
            println!(
                "{:<34} {:>10.4} {:>9.4}-{:<9.4} {:>8.0} {:>6.1}% {:>8}",
                format!("swiglu_quant/{name}/{rows}x640"),
                st.median,
                st.min,
                st.max,
                gbs,
                100.0 * gbs / copy_gbs,
                speedup
            );
        }
    }
}

fn main() {
    let Some(gpu) = benches::gpu_or_say() else {
        return;
    };
    let (copy_gbs, _) = copy_bandwidth(&gpu, 1 << 30).expect("copy bandwidth");
    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(20)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    swiglu_quant(&mut c, &gpu);
    c.final_summary();
    println!(
        "device: {} (sm_{}), device-to-device copy {copy_gbs:.0} GB/s",
        gpu.info.name, gpu.info.ptx_arch
    );
    swiglu_summary(copy_gbs);
}
