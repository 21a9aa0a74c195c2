//! `moe-prefill ws-down`: WS_FAST against the default weight-stationary down kernel (16- or
//! 32-row tier) on the reference shape's down product: bytes compared, down stage timed per routing and
//! token count (host/src/moe/ws_down.rs).

use clap::Args;
use host::error::{Error, Result};
use host::moe::ws_down::{WsDownCase, WsDownLayer};
use host::synth::Popularity;
use host::timing::Stats;

#[derive(Args, Debug)]
pub struct WsDownArgs {
    /// Down weight type: q2_0, iq4_nl or q8_0 (any type runs; these three are the down types
    /// at FFN 640).
    #[arg(long, default_value = "iq4_nl")]
    pub down: String,
    /// Token counts (rows per routed expert = T x 10 / 512 under uniform routing).
    #[arg(long, num_args = 1.., default_values_t = [768usize, 1024, 2048, 4096])]
    pub tokens: Vec<usize>,
    /// The tier: 16 or 32 rows per CTA (the tiers with a WS_FAST variant).
    #[arg(long, default_value_t = 32)]
    pub cols: usize,
    /// Timed runs of each kernel per case (alternating default and WS_FAST).
    #[arg(long, default_value_t = 20)]
    pub reps: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

pub fn run(a: &WsDownArgs) -> Result<()> {
    let down = super::prefill::wtype(&a.down)?;
    if a.reps == 0 {
        return Err(Error::Unsupported("--reps must be at least 1".into()));
    }
    let Some(sess) = super::open_session()? else {
        return Err(Error::NoGpu(
            "ws-down times GPU kernels; there is nothing to run without a GPU".into(),
        ));
    };
    let gpu = &sess.gpu;
    println!(
        "down product {} [2560 x 640] of 512 experts, weight-stationary {}-row tier: default vs WS_FAST (median of {} runs each, ms)",
        down.name(),
        a.cols,
        a.reps
    );
    println!(
        "{:<10} {:>6} {:>9} {:>17} {:>17} {:>7}  bytes",
        "routing", "T", "rows/exp", "default", "WS_FAST", "gain"
    );
    let pops = [
        Popularity::Skewed { sigma: 0.5 },
        Popularity::Skewed { sigma: 1.0 },
        Popularity::Flat,
    ];
    let layer = WsDownLayer::new(gpu, down, a.seed)?;
    let mut bad = 0;
    for pop in pops {
        for &t in &a.tokens {
            let mut case = WsDownCase::new(gpu, &layer, t, pop, a.seed, a.cols)?;
            let (diff, total) = case.compare(gpu)?;
            bad += diff;
            let (mut d, mut f) = (Vec::new(), Vec::new());
            for _ in 0..a.reps {
                d.push(case.run(gpu, false)?);
                f.push(case.run(gpu, true)?);
            }
            let (d, f) = (Stats::of(d), Stats::of(f));
            println!(
                "{:<10} {:>6} {:>9} {:>7.4} ({:.4}-{:.4}) {:>7.4} ({:.4}-{:.4}) {:>6.1}%  {}",
                pop.name(),
                t,
                case.rows_per_routed_expert,
                d.median,
                d.min,
                d.max,
                f.median,
                f.min,
                f.max,
                100.0 * (d.median - f.median) / d.median,
                if diff == 0 {
                    format!("equal ({total})")
                } else {
                    format!("{diff} of {total} DIFFER")
                }
            );
        }
    }
    if bad > 0 {
        return Err(Error::Unsupported(format!(
            "WS_FAST changed {bad} bytes of the down product"
        )));
    }
    Ok(())
}
