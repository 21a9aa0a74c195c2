//! `moe-prefill tune`: times every eligible expert path for each format pair at a ladder of rows
//! per routed expert and writes the table `--path auto` picks from (moe/tune/): by default to
//! the cache file of this GPU, driver and build. Per pair one synthetic layer (uploaded once);
//! per ladder point T = rows x E / top-k tokens with uniform routing, and per path (MMQ,
//! weight-stationary, fused where eligible) a pipeline timed `--runs` times after two warm-up
//! runs; the table keeps the median of each expert stage. The arguments are checked before the
//! GPU is opened; without a GPU the command is an error (it has nothing to measure).

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use gpu::layout::WType;
use host::device::Gpu;
use host::moe::expert::auto;
use host::moe::layer::DeviceLayer;
use host::moe::path as paths;
use host::moe::tune::TuneTable;
use host::moe::tune::key::{self, TuneKey, Tuning};
use host::problem::MoeShape;
use host::synth::{self, Popularity, SyntheticLayer};
use host::{Error, Result};

use super::prefill::wtype;

mod measure;

use measure::{Point, columns, measure, routed_rows};

use host::problem::{DOWN_TYPES, GATE_UP_TYPES};

#[derive(Args, Clone)]
pub struct TuneArgs {
    /// Format pairs as gate_up/down, comma-separated (e.g. iq2_xxs/q2_0,q2_0/q8_0); default:
    /// the 18 pairs of {iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, q2_0} x {q2_0, iq4_nl, q8_0}.
    #[arg(long, value_delimiter = ',')]
    pub pairs: Vec<String>,
    /// The ladder of rows per routed expert, comma-separated; each point runs T = rows x E /
    /// top-k tokens.
    #[arg(long, value_delimiter = ',', default_values_t = [2usize, 5, 10, 20, 40, 80, 160, 320])]
    pub rows: Vec<usize>,
    #[command(flatten)]
    pub shape: crate::cli::ShapeArgs,
    /// Timed runs per ladder point and path (the table keeps the median), after 2 warm-up runs.
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Where to write the table; default: the cache file `--path auto` reads for this GPU,
    /// driver and build ($MOE_TUNE_DIR, else $XDG_CACHE_HOME/moe-prefill, else
    /// $HOME/.cache/moe-prefill).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// The checked arguments: pairs as shapes and the ladder's token counts.
struct Plan {
    shapes: Vec<MoeShape>,
    ladder: Vec<(usize, usize)>,
}

/// Checks everything the arguments can be checked for without a GPU.
fn plan(a: &TuneArgs) -> Result<Plan> {
    let pairs: Vec<(WType, WType)> = if a.pairs.is_empty() {
        GATE_UP_TYPES
            .iter()
            .flat_map(|&g| DOWN_TYPES.iter().map(move |&d| (g, d)))
            .collect()
    } else {
        a.pairs
            .iter()
            .map(|p| {
                let (g, d) = p.split_once('/').ok_or_else(|| {
                    Error::Unsupported(format!("--pairs: {p:?} is not gate_up/down"))
                })?;
                Ok((wtype(g)?, wtype(d)?))
            })
            .collect::<Result<_>>()?
    };
    let shapes = pairs
        .into_iter()
        .map(|(g, d)| {
            a.shape
                .shape(g, d)
                .map_err(|e| Error::Unsupported(format!("--pairs: {}/{}: {e}", g.name(), d.name())))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut rows = a.rows.clone();
    rows.sort_unstable();
    rows.dedup();
    if rows.is_empty() {
        return Err(Error::Unsupported("--rows: no ladder points".into()));
    }
    let ladder = rows
        .into_iter()
        .map(|r| {
            let t = r * a.shape.experts / a.shape.top_k;
            if r == 0 || t == 0 {
                return Err(Error::Unsupported(format!(
                    "--rows {r}: {t} tokens at E={} top-{}; every point needs at least one",
                    a.shape.experts, a.shape.top_k
                )));
            }
            Ok((r, t))
        })
        .collect::<Result<Vec<_>>>()?;
    if a.runs == 0 {
        return Err(Error::Unsupported("--runs: at least 1".into()));
    }
    if a.out.is_none() && key::cache_dir().is_none() {
        return Err(Error::Unsupported(format!(
            "no cache directory to write the table to: set {} (or XDG_CACHE_HOME or HOME), or \
             pass --out FILE",
            key::DIR_VAR
        )));
    }
    Ok(Plan { shapes, ladder })
}

pub fn run(a: &TuneArgs) -> Result<()> {
    let p = plan(a)?;
    let gpu = Gpu::open().map_err(|e| match e {
        Error::NoGpu(why) => Error::NoGpu(format!(
            "{why}; `moe-prefill tune` times the expert paths on a GPU and has nothing to do \
             without one"
        )),
        e => e,
    })?;
    let key = TuneKey::current(&gpu);
    let out = match &a.out {
        Some(o) => o.clone(),
        None => key::cache_path(&key).ok_or_else(|| {
            Error::Unsupported("no cache directory to write the table to; pass --out".into())
        })?,
    };
    let i = &gpu.info;
    println!(
        "device: {} (sm_{}, {} SMs), driver {}; build {}",
        i.name, i.ptx_arch, i.sm_count, key.driver, key.build
    );
    let s0 = p.shapes[0];
    println!(
        "tuning {} pair(s) x {} ladder point(s) ({:?} rows per routed expert) at E={} top-{} hidden {} FFN {}, {} timed runs per point and path (median); table -> {}",
        p.shapes.len(),
        p.ladder.len(),
        p.ladder.iter().map(|l| l.0).collect::<Vec<_>>(),
        s0.n_experts,
        s0.top_k,
        s0.hidden,
        s0.ffn,
        a.runs,
        out.display()
    );
    let t_max = p.ladder.iter().map(|l| l.1).max().unwrap_or(1);
    let x = gpu.upload(&synth::normal_f32(a.seed, t_max * s0.hidden, 1.0))?;
    let points: Vec<Point> = p
        .ladder
        .iter()
        .map(|&(rows, t)| Point {
            rows,
            n_tokens: t,
            routing: synth::routing(
                t,
                s0.n_experts,
                s0.top_k,
                Popularity::Uniform,
                a.seed ^ 0x5eed ^ t as u64,
            ),
        })
        .collect();
    let comments = vec![
        format!(
            "measured by `moe-prefill tune` on {} (sm_{}, {} SMs), CUDA driver {}, build {}",
            i.name, i.ptx_arch, i.sm_count, key.driver, key.build
        ),
        format!(
            "synthetic layers E={} top-{} hidden {} FFN {} (seed {}), uniform routing, T = rows x E / top-k tokens",
            s0.n_experts, s0.top_k, s0.hidden, s0.ffn, a.seed
        ),
        format!(
            "GPU ms per layer of each expert stage from CUDA events, median of {} runs after {} warm-up runs; - where a path cannot run",
            a.runs,
            measure::WARMUP
        ),
        format!(
            "command: moe-prefill {}",
            std::env::args().skip(1).collect::<Vec<_>>().join(" ")
        ),
    ];
    let mut table = TuneTable::new(key.clone());
    let t0 = Instant::now();
    let n = p.shapes.len();
    for (pi, s) in p.shapes.iter().enumerate() {
        let pair = format!("{}/{}", s.gate_up_type.name(), s.down_type.name());
        eprintln!(
            "[pair {}/{n}] {pair} ({:.0} s elapsed)",
            pi + 1,
            t0.elapsed().as_secs_f64()
        );
        let layer = SyntheticLayer::new(*s, false, a.seed)?;
        let dev = DeviceLayer::upload(&gpu, &layer.weights(), s)?;
        drop(layer);
        let ok = |path| paths::eligible(path, s, &gpu.limits()).is_ok();
        for pt in &points {
            let times = measure(&gpu, s, &dev, &x, pt, a.runs, ok)?;
            println!(
                "{pair:<14} {:>4} rows (T {:>6}, {:>3} rows per routed expert as routed): {}",
                pt.rows,
                pt.n_tokens,
                routed_rows(&pt.routing, s.n_experts),
                columns(&times)
            );
            table
                .entries
                .insert((s.gate_up_type, s.down_type, pt.rows), times);
        }
        // After every pair, so that an interrupted run leaves the pairs it measured.
        key::write_table(&out, &table.to_text(&comments))?;
    }
    println!(
        "\nwrote {} ({} entries) in {:.0} s",
        out.display(),
        table.entries.len(),
        t0.elapsed().as_secs_f64()
    );
    print_summary(&gpu, &p, &table, &out);
    Ok(())
}

/// What auto picks with the new table: per pair at each ladder point, and where it changes.
fn print_summary(gpu: &Gpu, p: &Plan, table: &TuneTable, out: &std::path::Path) {
    let tuning = Tuning {
        table: table.clone(),
        source: out.display().to_string(),
        note: None,
    };
    println!("\nwhat --path auto picks with this table, by rows per routed expert:");
    let ladder: String = p.ladder.iter().map(|l| format!(" {:>7}", l.0)).collect();
    println!("  {:<16}{ladder}", "pair");
    let mut changes = Vec::new();
    for s in &p.shapes {
        let allowed = paths::allowed(s, &gpu.limits());
        let (g, d) = (s.gate_up_type, s.down_type);
        let pair = format!("{}/{}", g.name(), d.name());
        let picks: String = p
            .ladder
            .iter()
            .map(|l| format!(" {:>7}", auto::decide(&tuning, g, d, l.0, allowed).label()))
            .collect();
        println!("  {pair:<16}{picks}");
        changes.push(format!(
            "  {pair}: {}",
            auto::summary(&tuning, g, d, allowed)
        ));
    }
    println!("\n{}", changes.join("\n"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: TuneArgs,
    }

    fn args(v: &[&str]) -> TuneArgs {
        Cli::try_parse_from(std::iter::once("tune").chain(v.iter().copied()))
            .expect("arguments parse")
            .a
    }

    #[test]
    fn defaults_are_the_18_pairs_on_the_ladder() {
        let p = plan(&args(&["--out", "x.txt"])).expect("plan");
        assert_eq!(p.shapes.len(), 18);
        assert_eq!(
            p.ladder,
            [2, 5, 10, 20, 40, 80, 160, 320].map(|r| (r, r * 512 / 10))
        );
        assert_eq!(p.ladder[2], (10, 512));
        let p = plan(&args(&[
            "--out",
            "x.txt",
            "--pairs",
            "iq2_xxs/q2_0,q2_0/q8_0",
            "--rows",
            "40,10,10",
        ]))
        .expect("plan");
        let pairs: Vec<_> = p
            .shapes
            .iter()
            .map(|s| (s.gate_up_type, s.down_type))
            .collect();
        assert_eq!(
            pairs,
            [(WType::Iq2Xxs, WType::Q2_0), (WType::Q2_0, WType::Q8_0)]
        );
        assert_eq!(p.ladder, [(10, 512), (40, 2048)]);
    }

    #[test]
    fn bad_arguments_are_errors() {
        let err = |v: &[&str], what: &str| {
            let e = plan(&args(v)).err().expect("an error").to_string();
            assert!(e.contains(what), "{v:?}: {e}");
        };
        err(
            &["--out", "x", "--pairs", "q2_0"],
            "\"q2_0\" is not gate_up/down",
        );
        err(
            &["--out", "x", "--pairs", "q2_0/q4_k"],
            "unknown weight type",
        );
        // An IQ down type needs an FFN that is a multiple of 256.
        err(
            &["--out", "x", "--pairs", "q2_0/iq2_xxs"],
            "--pairs: q2_0/iq2_xxs:",
        );
        err(&["--out", "x", "--rows", "5,0"], "--rows 0: 0 tokens");
        err(&["--out", "x", "--runs", "0"], "--runs");
    }
}
