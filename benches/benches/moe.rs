//! Benches, named `<stage>/<path>/<shape>`. GPU time by CUDA events (`benches::time_iters`).
//! After criterion's own report, a summary prints each median with its distance from the
//! ceiling (copy bandwidth measured here; int8 rates from docs/h200-ceilings.md).

use criterion::{Criterion, Throughput};
use gpu::layout::WType;
use host::device::Gpu;
use host::moe::layer::DeviceLayer;
use host::moe::path::{self as paths, ExpertPath};
use host::moe::prefill::{Prefill, RoutingInput};
use host::moe::swiglu_quant::SwigluQuantPlan;
use host::moe::ws_down::{WsDownCase, WsDownLayer};
use host::problem::MoeShape;
use host::problem::SwigluQuantShape;
use host::synth::{self, Popularity, SyntheticLayer};
use host::timing::copy_bandwidth;

/// Token counts of the layer benches.
const TOKENS: [usize; 4] = [512, 2048, 8192, 16384];
/// Format pairs of the layer benches: the four llama.cpp was measured on (issue 4).
const PAIRS: [(WType, WType); 4] = [
    (WType::Q2_0, WType::Q2_0),
    (WType::Iq2Xxs, WType::Q2_0),
    (WType::Iq3S, WType::Iq4Nl),
    (WType::Iq2S, WType::Iq4Nl),
];
/// llama.cpp's CUDA backend, same layer and GPU, median ms (issue 4), per PAIRS x TOKENS.
const LLAMA_CPP: [[f64; 4]; 4] = [
    [3.76, 5.77, 16.48, 31.83],
    [3.89, 5.89, 16.83, 32.29],
    [4.29, 6.31, 17.57, 33.41],
    [4.88, 6.89, 18.71, 35.06],
];

fn pop_name(p: Popularity) -> String {
    p.name()
}

/// The expert paths benched (those built).
const PATHS: [ExpertPath; 3] = [ExpertPath::Mmq, ExpertPath::Fused, ExpertPath::Ws];

fn layer_id(path: ExpertPath, g: WType, d: WType, pop: Popularity, t: usize) -> String {
    format!(
        "prefill/{}/{}-{}/{}/T={t}",
        path.name(),
        g.name(),
        d.name(),
        pop_name(pop)
    )
}

/// The whole layer (route given, scatter, tiles, the expert path's stages, combine) per path,
/// pair, token count and routing; stage times come from the events of the same runs.
fn prefill(c: &mut Criterion, gpu: &Gpu) {
    let mut g = c.benchmark_group("prefill");
    for (pi, &(gt, dt)) in PAIRS.iter().enumerate() {
        let s = MoeShape {
            gate_up_type: gt,
            down_type: dt,
            ..MoeShape::REFERENCE
        };
        let layer = SyntheticLayer::new(s, false, 1).expect("layer");
        let dev = DeviceLayer::upload(gpu, &layer.weights(), &s).expect("upload");
        for path in PATHS {
            if paths::eligible(path, &s, &gpu.limits()).is_err() {
                continue;
            }
            let mut pf = Prefill::new(gpu, &s, 16384, path).expect("pipeline");
            let pops: &[Popularity] = if pi == 0 {
                &[
                    Popularity::Uniform,
                    Popularity::Skewed { sigma: 0.5 },
                    Popularity::Skewed { sigma: 1.0 },
                ]
            } else {
                &[Popularity::Uniform]
            };
            for &pop in pops {
                for t in TOKENS {
                    let r = synth::routing(t, s.n_experts, s.top_k, pop, 7 ^ t as u64);
                    let x = gpu
                        .upload(&host::synth::normal_f32(t as u64, t * s.hidden, 1.0))
                        .expect("upload");
                    let id = layer_id(path, gt, dt, pop, t);
                    pf.upload_routing(gpu, &r).expect("routing");
                    g.throughput(Throughput::Elements(s.ops(t)));
                    g.bench_function(id.trim_start_matches("prefill/"), |b| {
                        b.iter_custom(|n| {
                            let mut total = 0.0;
                            for _ in 0..n {
                                // The layer queued before the GPU reaches it (the CLI's
                                // default: host::device::QUEUE_HOLD_US).
                                gpu.hold(host::device::QUEUE_HOLD_US).expect("hold");
                                let st = pf
                                    .run(gpu, &dev, &x, t, RoutingInput::Uploaded)
                                    .expect("prefill");
                                total += st.total;
                                benches::record(&id, st.total);
                                for (name, v) in st.names.iter().zip(&st.ms) {
                                    benches::record(&format!("{id}/{name}"), *v);
                                }
                            }
                            std::time::Duration::from_secs_f64(total * 1e-3)
                        })
                    });
                }
            }
        }
    }
    g.finish();
}

/// Token counts and routings of the WS_FAST down bench.
const WS_DOWN_TOKENS: [usize; 4] = [768, 1024, 2048, 4096];
const WS_DOWN_POPS: [Popularity; 3] = [
    Popularity::Skewed { sigma: 0.5 },
    Popularity::Skewed { sigma: 1.0 },
    Popularity::Flat,
];

/// WS_FAST against the default weight-stationary down kernel (IQ4_NL down, 32-row tier, the
/// reference shape's 512 experts): byte-compared once per case, then the down stage timed.
fn ws_down(c: &mut Criterion, gpu: &Gpu) {
    let mut g = c.benchmark_group("ws_down");
    let layer = WsDownLayer::new(gpu, WType::Iq4Nl, 1).expect("layer");
    for pop in WS_DOWN_POPS {
        for t in WS_DOWN_TOKENS {
            let mut case = WsDownCase::new(gpu, &layer, t, pop, 1, 32).expect("case");
            let (diff, total) = case.compare(gpu).expect("compare");
            assert_eq!(diff, 0, "WS_FAST changed {diff} of {total} bytes");
            for fast in [false, true] {
                let id = format!(
                    "iq4_nl/{}/T={t}/{}",
                    pop.name(),
                    if fast { "fast" } else { "default" }
                );
                g.bench_function(&id, |b| {
                    b.iter_custom(|n| {
                        let mut total = 0.0;
                        for _ in 0..n {
                            let ms = case.run(gpu, fast).expect("run");
                            total += ms;
                            benches::record(&format!("ws_down/{id}"), ms);
                        }
                        std::time::Duration::from_secs_f64(total * 1e-3)
                    })
                });
            }
        }
    }
    g.finish();
}

fn ws_down_summary() {
    println!("\nws_down summary (down stage medians in ms, WS_FAST gain):");
    for pop in WS_DOWN_POPS {
        for t in WS_DOWN_TOKENS {
            let id = |v: &str| format!("ws_down/iq4_nl/{}/T={t}/{v}", pop.name());
            let (Some(d), Some(f)) = (benches::stats(&id("default")), benches::stats(&id("fast")))
            else {
                continue;
            };
            println!(
                "{:<40} default {:.4} ({:.4}-{:.4})  fast {:.4} ({:.4}-{:.4})  gain {:.1}%",
                format!("iq4_nl/{}/T={t}", pop.name()),
                d.median,
                d.min,
                d.max,
                f.median,
                f.min,
                f.max,
                100.0 * (d.median - f.median) / d.median
            );
        }
    }
}

fn prefill_summary(copy_gbs: f64) {
    println!(
        "\nprefill summary (medians in ms; llama.cpp figures measured side by side on the H200):"
    );
    println!(
        "{:<48} {:>8} {:>17} {:>6} {:>9} {:>8}  stage shares",
        "layer", "median", "spread", "TOPS", "llama.cpp", "speedup",
    );
    const STAGE_NAMES: [&str; 8] = [
        "route",
        "scatter",
        "tiles",
        "gate_up",
        "swiglu_quant",
        "down",
        "experts (fused)",
        "combine",
    ];
    for path in PATHS {
        for (pi, &(gt, dt)) in PAIRS.iter().enumerate() {
            let s = MoeShape {
                gate_up_type: gt,
                down_type: dt,
                ..MoeShape::REFERENCE
            };
            for pop in [
                Popularity::Uniform,
                Popularity::Skewed { sigma: 0.5 },
                Popularity::Skewed { sigma: 1.0 },
            ] {
                for (ti, t) in TOKENS.into_iter().enumerate() {
                    let id = layer_id(path, gt, dt, pop, t);
                    let Some(st) = benches::stats(&id) else {
                        continue;
                    };
                    let shares: Vec<String> = STAGE_NAMES
                        .iter()
                        .filter_map(|n| {
                            benches::stats(&format!("{id}/{n}"))
                                .map(|x| format!("{n} {:.0}%", 100.0 * x.median / st.median))
                        })
                        .collect();
                    let (llama, speed) = if pop == Popularity::Uniform {
                        let l = LLAMA_CPP[pi][ti];
                        (format!("{l:.2}"), format!("{:.2}x", l / st.median))
                    } else {
                        (String::new(), String::new())
                    };
                    println!(
                        "{:<42} {:>8.3} {:>8.3}-{:<8.3} {:>6.0} {:>9} {:>8}  {}",
                        id.trim_start_matches("prefill/"),
                        st.median,
                        st.min,
                        st.max,
                        s.ops(t) as f64 / (st.median * 1e-3) / 1e12,
                        llama,
                        speed,
                        shares.join(" / ")
                    );
                }
            }
        }
    }
    let s = MoeShape::REFERENCE;
    for t in TOKENS {
        let (w, m, f) = host::timing::floors_ms(&s, t, host::timing::H200_READ_ONLY_BYTES_PER_S);
        println!(
            "H200 floors at T={t} (reference shape, Q2_0 pack, {} MB): weights read once {w:.3} ms at 4.45 TB/s; int8 work {m:.3} ms at 1,285 TOPS; MMQ scale steps {f:.3} ms of FP32 issue (copy measured here: {copy_gbs:.0} GB/s)",
            s.weight_bytes() / 1_000_000
        );
    }
}

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
            .alloc_filled::<u8>(s.out_blocks() * gpu::layout::Q8_1_MMQ_BYTES, 0)
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
            let speedup = match (name, t) {
                ("fused", Some(t)) => format!("{:.2}x", t.median / st.median),
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
    let mut c = c
        .sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1));
    prefill(&mut c, &gpu);
    ws_down(&mut c, &gpu);
    c.final_summary();
    println!(
        "device: {} (sm_{}), device-to-device copy {copy_gbs:.0} GB/s",
        gpu.info.name, gpu.info.ptx_arch
    );
    swiglu_summary(copy_gbs);
    prefill_summary(copy_gbs);
    ws_down_summary();
}
