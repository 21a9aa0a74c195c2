//! `moe-prefill swiglu`: the fused SwiGLU + q8_1 kernel and its two-kernel form on synthetic
//! gate/up rows, timed, with every output byte compared to the CPU reference.

use clap::Args;
use gpu::layout::{BlockQ8_1Mmq, WType};
use host::device::Gpu;
use host::moe::swiglu_quant::SwigluQuantPlan;
use host::problem::SwigluQuantShape;
use host::reference::swiglu_quant as reference;
use host::timing::bench;
use host::{Error, Result};

#[derive(Args, Clone)]
pub struct SwigluArgs {
    /// Rows (T * top_k); several may be given.
    #[arg(long, num_args = 1.., default_values_t = [20_480usize, 81_920, 163_840])]
    pub rows: Vec<usize>,
    /// Expert FFN width (multiple of 128).
    #[arg(long, default_value_t = 640)]
    pub ffn: usize,
    /// Gate and up interleaved element by element instead of two halves.
    #[arg(long)]
    pub interleaved: bool,
    /// Seed of the synthetic inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Number of timed repetitions per case.
const REPS: usize = 30;

pub fn run(a: &SwigluArgs) -> Result<()> {
    match super::open_session()? {
        Some(s) => run_on(&s, a),
        None => cpu_only(a),
    }
}

/// The command on an open GPU.
pub fn run_on(session: &super::Session, a: &SwigluArgs) -> Result<()> {
    let (gpu, rates) = (&session.gpu, session.rates);
    println!(
        "{:<11} {:>8} {:>10} {:>9} {:>7} {:>8}  parity",
        "path", "rows", "median ms", "GB/s", "% copy", "speedup"
    );
    for &rows in &a.rows {
        table_rows(gpu, a, rows, rates.copy_gbs)?;
    }
    Ok(())
}

fn table_rows(gpu: &Gpu, a: &SwigluArgs, rows: usize, copy_gbs: f64) -> Result<()> {
    let s = SwigluQuantShape::dense(rows, a.ffn, a.interleaved);
    let plan = SwigluQuantPlan::new(&s, WType::Q2_0.id())?;
    let gu = host::synth::normal_f32(a.seed ^ rows as u64, s.gu_len(), 3.0);
    let d_gu = gpu.upload(&gu)?;
    let out_bytes = s.out_blocks() * size_of::<BlockQ8_1Mmq>();
    let mut fused = gpu.alloc_filled::<u8>(out_bytes, 0xa5)?;
    let mut two = gpu.alloc_filled::<u8>(out_bytes, 0xa5)?;
    let mut h = gpu.alloc_filled::<f32>(plan.h_len(), 0xa5)?;
    let tf = bench(gpu, 3, REPS, || plan.launch(gpu, &d_gu, &mut fused))?;
    let tt = bench(gpu, 3, REPS, || {
        plan.launch_two_kernel(gpu, &d_gu, &mut h, &mut two)
    })?;
    let mut want = vec![
        BlockQ8_1Mmq {
            d: [0.0; 4],
            qs: [0; 128]
        };
        s.out_blocks()
    ];
    reference::swiglu_quant(&gu, &s, &mut want);
    let want: &[u8] = bytemuck::cast_slice(&want);
    for (name, stats, bytes, buf, speedup) in [
        (
            "fused",
            tf,
            s.fused_bytes(),
            &fused,
            Some(tt.median / tf.median),
        ),
        ("two-kernel", tt, s.two_kernel_bytes(), &two, None),
    ] {
        let got = gpu.download(buf)?;
        let diff = got.iter().zip(want).filter(|(g, w)| g != w).count();
        let gbs = bytes as f64 / (stats.median * 1e-3) / 1e9;
        println!(
            "{:<11} {:>8} {:>10.4} {:>9.0} {:>6.1}% {:>8}  {} of {} bytes differ (spread {:.4}-{:.4} ms)",
            name,
            rows,
            stats.median,
            gbs,
            100.0 * gbs / copy_gbs,
            speedup.map(|x| format!("{x:.2}x")).unwrap_or_default(),
            diff,
            got.len(),
            stats.min,
            stats.max
        );
        if diff != 0 {
            return Err(Error::Mismatch(format!(
                "{name} swiglu_quant at {rows} rows: {diff} bytes differ"
            )));
        }
    }
    Ok(())
}

/// Without a GPU: the CPU reference on a small batch.
pub fn cpu_only(a: &SwigluArgs) -> Result<()> {
    let rows = 4096;
    let s = SwigluQuantShape::dense(rows, a.ffn, a.interleaved);
    SwigluQuantPlan::new(&s, WType::Q2_0.id())?;
    let gu = host::synth::normal_f32(a.seed, s.gu_len(), 3.0);
    let mut out = vec![
        BlockQ8_1Mmq {
            d: [0.0; 4],
            qs: [0; 128]
        };
        s.out_blocks()
    ];
    let t = std::time::Instant::now();
    reference::swiglu_quant(&gu, &s, &mut out);
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let nonzero = out.iter().filter(|b| b.d.iter().any(|&d| d != 0.0)).count();
    println!(
        "CPU reference swiglu_quant: {rows} rows x ffn {} in {ms:.1} ms on {} threads ({nonzero} of {} q8_1 blocks non-zero)",
        a.ffn,
        host::par::threads(),
        out.len()
    );
    Ok(())
}
