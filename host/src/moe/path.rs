//! Which expert path runs a layer: [`eligible`] says what may run (with the reason when not),
//! [`preferred`] what `--path auto` chooses among (per run and per product, by the tune table:
//! moe/expert/auto.rs, moe/tune/), [`plan_for`] builds the plan of a choice. The choice never
//! changes bytes: every path gives the reference's.

use std::sync::Arc;

use crate::device::{DeviceLimits, Gpu};
use crate::error::{Error, Result};
use crate::moe::expert::ExpertPlan;
use crate::moe::expert::auto::{self, AutoPlan};
use crate::moe::expert::fused::{self, FusedPlan};
use crate::moe::expert::mmq;
use crate::moe::expert::split::{Product, SplitChoice, SplitOptions, SplitPlan};
use crate::moe::expert::ws;
use crate::moe::tune::{self, Tuning};
use crate::problem::MoeShape;
use crate::ptx;

/// The expert paths of the system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExpertPath {
    /// Per-group MMQ: gate/up, swiglu_quant, down as three launches (GU and H in global memory).
    Mmq,
    /// Fused int8 experts: one launch, H in shared memory.
    Fused,
    /// Weight-stationary experts (a thread per weight row, integer arithmetic only).
    Ws,
}

impl ExpertPath {
    pub const ALL: [ExpertPath; 3] = [ExpertPath::Mmq, ExpertPath::Fused, ExpertPath::Ws];

    /// The name the CLI, tables and bench ids use.
    pub const fn name(self) -> &'static str {
        match self {
            ExpertPath::Mmq => "mmq",
            ExpertPath::Fused => "fused",
            ExpertPath::Ws => "ws",
        }
    }
}

impl From<ExpertPath> for PathChoice {
    fn from(p: ExpertPath) -> Self {
        PathChoice::Only(p)
    }
}

/// A path forced by the user, or the preferred eligible one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathChoice {
    Auto,
    Only(ExpertPath),
}

impl std::str::FromStr for PathChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        if s == "auto" {
            return Ok(PathChoice::Auto);
        }
        ExpertPath::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .map(PathChoice::Only)
            .ok_or_else(|| {
                Error::Unsupported(format!("unknown path {s:?}: mmq, fused, ws or auto"))
            })
    }
}

/// Whether `path` can run a layer of shape `s` on a device with limits `dev`; the error says
/// why not. The MMQ and fused paths need the loaded PTX module to hold their tensor-core
/// kernels (sm_75 and newer; the sm_60 module holds only the weight-stationary path).
pub fn eligible(path: ExpertPath, s: &MoeShape, dev: &DeviceLimits) -> Result<()> {
    s.check()?;
    match path {
        ExpertPath::Mmq => {
            tensor_cores("the per-group MMQ path", dev)?;
            s.mmq_numerics()?;
            mmq::eligible(s)
        }
        ExpertPath::Fused => {
            tensor_cores("the fused path", dev)?;
            fused::eligible(s, dev)
        }
        ExpertPath::Ws => {
            s.mmq_numerics()?;
            ws::eligible(s)
        }
    }
}

/// Whether the fused path is the only one the numerics of `s` leave (with `ok`, what may run).
fn fused_only(s: &MoeShape, ok: auto::Allowed) -> bool {
    s.shared_d_any() && ok.fused && !ok.mmq && !ok.ws
}

/// Err when the loaded module (`dev.ptx_arch`) has no `mma.sync` kernels for `what`.
fn tensor_cores(what: &str, dev: &DeviceLimits) -> Result<()> {
    if ptx::has_mma(dev.ptx_arch) {
        return Ok(());
    }
    Err(Error::Unsupported(format!(
        "{what} needs tensor cores (sm_{}+); the loaded PTX module is sm_{}",
        ptx::MMA_MIN_ARCH,
        dev.ptx_arch
    )))
}

/// The paths `--path auto` chooses among, per run by rows per routed expert and per product
/// (moe/expert/auto.rs: the fastest by the tune table).
pub fn preferred(s: &MoeShape, dev: &DeviceLimits) -> Vec<ExpertPath> {
    [ExpertPath::Fused, ExpertPath::Mmq, ExpertPath::Ws]
        .into_iter()
        .filter(|&p| eligible(p, s, dev).is_ok())
        .collect()
}

/// What auto may run for shape `s` on `dev` besides MMQ.
pub fn allowed(s: &MoeShape, dev: &DeviceLimits) -> auto::Allowed {
    auto::Allowed {
        fused: eligible(ExpertPath::Fused, s, dev).is_ok(),
        mmq: eligible(ExpertPath::Mmq, s, dev).is_ok(),
        ws: eligible(ExpertPath::Ws, s, dev).is_ok(),
    }
}

/// A line saying what a choice means for this layer: the forced path, or for auto where its
/// table came from, what it picks at which rows per routed expert, and which paths can run
/// (for the CLI's report). Errors when a forced path cannot run the layer.
pub fn explain(
    choice: PathChoice,
    s: &MoeShape,
    dev: &DeviceLimits,
    tuning: &Tuning,
) -> Result<String> {
    match choice {
        PathChoice::Only(p) => {
            eligible(p, s, dev).map_err(|e| {
                Error::Unsupported(format!("path {} cannot run this layer: {e}", p.name()))
            })?;
            Ok(format!("{} (forced by --path)", p.name()))
        }
        PathChoice::Auto => {
            let why = ExpertPath::ALL
                .into_iter()
                .map(|q| match eligible(q, s, dev) {
                    Ok(()) => format!("{} eligible", q.name()),
                    Err(e) => format!("{} not eligible: {e}", q.name()),
                })
                .collect::<Vec<_>>()
                .join("; ");
            let ok = allowed(s, dev);
            if fused_only(s, ok) {
                return Ok(format!(
                    "auto: fused at every row count, the one path of the {} numerics ({why})",
                    s.numerics.name()
                ));
            }
            let picks = auto::summary(tuning, s.gate_up_type, s.down_type, ok);
            Ok(format!(
                "auto: {picks}, per run (table: {}) ({why})",
                tuning.describe()
            ))
        }
    }
}

/// Builds the plan of `path` for layers of shape `s` and up to `cap_rows` rows (T x top_k).
pub fn plan(
    path: ExpertPath,
    gpu: &Gpu,
    s: &MoeShape,
    cap_rows: usize,
) -> Result<Box<dyn ExpertPlan>> {
    eligible(path, s, &gpu.limits())?;
    let product = match path {
        ExpertPath::Fused => return Ok(Box::new(FusedPlan::new(gpu, s, cap_rows)?)),
        ExpertPath::Mmq => Product::Mmq,
        ExpertPath::Ws => Product::Ws,
    };
    split_plan(gpu, s, cap_rows, [product; 2], SplitOptions::from_env()?)
}

/// A split plan whose products (gate/up, down) are fixed to `products`, run with `opts`: the
/// mmq and ws paths, and mixes and options for tests and measurements.
pub fn split_plan(
    gpu: &Gpu,
    s: &MoeShape,
    cap_rows: usize,
    products: [Product; 2],
    opts: SplitOptions,
) -> Result<Box<dyn ExpertPlan>> {
    let choice = SplitChoice::Fixed(products);
    Ok(Box::new(SplitPlan::new(gpu, s, cap_rows, choice, opts)?))
}

/// The plan of a choice: the forced path's, or for auto the fused plan (where eligible) and a
/// split plan behind the per-run choice, by this process's tune table ([`tune::key::for_gpu`]:
/// the cache file of this GPU, driver and build, else the built-in table).
pub fn plan_for(
    choice: PathChoice,
    gpu: &Gpu,
    s: &MoeShape,
    cap_rows: usize,
) -> Result<Box<dyn ExpertPlan>> {
    match choice {
        PathChoice::Only(p) => plan(p, gpu, s, cap_rows),
        PathChoice::Auto => plan_tuned(gpu, s, cap_rows, tune::key::for_gpu(gpu)),
    }
}

/// Auto's plan with the table `tuning` (tests and callers with a table of their own). The
/// split plan exists where MMQ can run the layer; its weight-stationary products where they can.
pub fn plan_tuned(
    gpu: &Gpu,
    s: &MoeShape,
    cap_rows: usize,
    tuning: Arc<Tuning>,
) -> Result<Box<dyn ExpertPlan>> {
    let dev = gpu.limits();
    let ok = allowed(s, &dev);
    if fused_only(s, ok) {
        return plan(ExpertPath::Fused, gpu, s, cap_rows);
    }
    let fused = if ok.fused {
        Some(plan(ExpertPath::Fused, gpu, s, cap_rows)?)
    } else {
        None
    };
    let pair = (s.gate_up_type, s.down_type);
    let constant = auto::constant(&tuning, pair.0, pair.1, ok);
    let split: Option<Box<dyn ExpertPlan>> = if !ok.mmq && !ok.ws {
        None
    } else {
        let products = if !ok.mmq {
            SplitChoice::Fixed([Product::Ws; 2])
        } else if let Some(d) = &constant {
            // The table's products at every row count: a fixed split (MMQ for both builds its
            // tile list on the device).
            SplitChoice::Fixed(d.products)
        } else if ok.ws {
            let t = tuning.clone();
            // The same decision auto's prepare() makes for the run (auto::decide is pure).
            SplitChoice::PerRun(Box::new(move |rows| {
                auto::decide(&t, pair.0, pair.1, rows, ok).products
            }))
        } else {
            SplitChoice::Fixed([Product::Mmq; 2])
        };
        Some(Box::new(SplitPlan::new(
            gpu,
            s,
            cap_rows,
            products,
            SplitOptions::from_env()?,
        )?))
    };
    Ok(Box::new(AutoPlan::new(
        fused, split, tuning, pair, ok, constant,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choice_parses_and_auto_follows_the_built_in_table() {
        assert_eq!("auto".parse::<PathChoice>().unwrap(), PathChoice::Auto);
        assert_eq!(
            "fused".parse::<PathChoice>().unwrap(),
            PathChoice::Only(ExpertPath::Fused)
        );
        assert!("fast".parse::<PathChoice>().is_err());
        let dev = DeviceLimits::default();
        assert_eq!(
            preferred(&MoeShape::REFERENCE, &dev),
            [ExpertPath::Fused, ExpertPath::Mmq, ExpertPath::Ws]
        );
        let iq_down = MoeShape {
            ffn: 1024,
            down_type: gpu::layout::WType::Iq2Xxs,
            ..MoeShape::REFERENCE
        };
        assert_eq!(preferred(&iq_down, &dev), [ExpertPath::Mmq, ExpertPath::Ws]);
        let t = Tuning::built_in("no GPU");
        let r = &MoeShape::REFERENCE;
        assert_eq!(
            explain(PathChoice::Only(ExpertPath::Ws), r, &dev, &t).unwrap(),
            "ws (forced by --path)"
        );
        assert_eq!(
            explain(PathChoice::Auto, r, &dev, &t).unwrap(),
            "auto: mmq at 1+ rows per routed expert, per run (table: built-in NVIDIA H200; no \
             GPU) (mmq eligible; fused eligible; ws eligible)"
        );
        let why = explain(PathChoice::Auto, &iq_down, &dev, &t).unwrap();
        assert!(
            why.starts_with(
                "auto: mmq at 1+ rows per routed expert, per run (table: built-in NVIDIA H200; no \
                 GPU) (mmq eligible; fused not eligible: the fused path decodes"
            ),
            "{why}"
        );
    }

    /// The Q2_0 shared-d numerics leave only the fused path where a product is Q2_0, and
    /// change nothing where none is.
    #[test]
    fn shared_d_numerics_run_on_the_fused_path_only() {
        use crate::problem::Numerics;
        use gpu::layout::WType;
        let dev = DeviceLimits::default();
        let t = Tuning::built_in("no GPU");
        for (g, d) in [
            (WType::Q2_0, WType::Q2_0),
            (WType::Iq2Xxs, WType::Q2_0),
            (WType::Q2_0, WType::Iq4Nl),
        ] {
            let s = MoeShape {
                gate_up_type: g,
                down_type: d,
                numerics: Numerics::Q2_0SharedD,
                ..MoeShape::REFERENCE
            };
            assert!(s.shared_d_any());
            assert_eq!(preferred(&s, &dev), [ExpertPath::Fused], "{g:?}/{d:?}");
            for p in [ExpertPath::Mmq, ExpertPath::Ws] {
                let e = eligible(p, &s, &dev).unwrap_err().to_string();
                assert!(
                    e.contains("q2_0-shared-d numerics run on the fused path only"),
                    "{e}"
                );
                let e = explain(PathChoice::Only(p), &s, &dev, &t)
                    .unwrap_err()
                    .to_string();
                assert!(e.contains(&format!("path {} cannot run", p.name())), "{e}");
            }
            let why = explain(PathChoice::Auto, &s, &dev, &t).unwrap();
            assert!(
                why.starts_with("auto: fused at every row count, the one path of the q2_0-"),
                "{why}"
            );
            assert!(
                s.summary().ends_with(", q2_0-shared-d numerics"),
                "{}",
                s.summary()
            );
        }
        let none = MoeShape {
            gate_up_type: WType::Iq3S,
            down_type: WType::Iq4Nl,
            numerics: Numerics::Q2_0SharedD,
            ..MoeShape::REFERENCE
        };
        assert!(!none.shared_d_any());
        assert_eq!(preferred(&none, &dev).len(), 3);
        assert!(!none.summary().contains("numerics"));
    }

    /// The limits `Gpu::open_with(Some(60))` gives on any GPU (the sm_60 module loaded): only
    /// the weight-stationary path may run, and auto takes it.
    #[test]
    fn sm60_module_runs_only_the_weight_stationary_path() {
        let sm60 = DeviceLimits {
            ptx_arch: 60,
            ..DeviceLimits::default()
        };
        let s = MoeShape::REFERENCE;
        assert!(eligible(ExpertPath::Ws, &s, &sm60).is_ok());
        for (p, what) in [
            (ExpertPath::Mmq, "the per-group MMQ path"),
            (ExpertPath::Fused, "the fused path"),
        ] {
            assert!(eligible(p, &s, &DeviceLimits::default()).is_ok(), "{p:?}");
            let e = eligible(p, &s, &sm60)
                .expect_err("refused on sm_60")
                .to_string();
            assert_eq!(
                e,
                format!("{what} needs tensor cores (sm_75+); the loaded PTX module is sm_60")
            );
            assert!(explain(PathChoice::Only(p), &s, &sm60, &Tuning::built_in("test")).is_err());
        }
        assert_eq!(preferred(&s, &sm60), [ExpertPath::Ws]);
        let why =
            explain(PathChoice::Auto, &s, &sm60, &Tuning::built_in("test")).expect("auto runs ws");
        assert!(why.starts_with("auto: ws at 1+ rows"), "{why}");
        // The sm_75 module (the Turing port) has them.
        let sm75 = DeviceLimits {
            ptx_arch: 75,
            ..DeviceLimits::default()
        };
        assert!(eligible(ExpertPath::Mmq, &s, &sm75).is_ok());
        assert!(eligible(ExpertPath::Fused, &s, &sm75).is_ok());
    }
}
