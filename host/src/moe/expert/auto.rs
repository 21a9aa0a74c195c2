//! `--path auto`: the fused plan (where eligible) and one split plan, and per run the path and
//! products the tune table (moe/tune/) says are fastest at that run's rows per routed expert:
//! the fused path, or the split with each product on MMQ or weight-stationary. A format pair
//! the table lacks takes the built-in rule: MMQ for both products (on the H200 the pipelined
//! MMQ kernels beat the fused path at every measured row count of all 18 pairs,
//! BENCHMARKS.md). The choice is made from the expert bounds of the run (in the
//! pipeline's "tiles" stage) and never changes bytes; where the table makes the same choice at
//! every row count (the built-in table does, for every pair), no bounds are read back.

use std::sync::Arc;

use gpu::layout::WType;

use super::split::Product;
use super::{Bounds, ExpertIo, ExpertPlan, Intermediates, rows_per_routed_expert};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::moe::layer::DeviceLayer;
use crate::moe::path::ExpertPath;
use crate::moe::tune::{Tuning, split_label};

/// What one run takes and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub fused: bool,
    /// The split's products (also when the fused path runs).
    pub products: [Product; 2],
    /// "ws+mmq at 10 rows per routed expert: 1.234 ms vs fused 1.444 ms (table: ...)".
    pub why: String,
}

impl Decision {
    /// "fused" or the split's label ("mmq", "ws+mmq", ...).
    pub fn label(&self) -> String {
        if self.fused {
            "fused".into()
        } else {
            split_label(self.products)
        }
    }
}

/// What may run a layer: the fused path, weight-stationary products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allowed {
    pub fused: bool,
    /// MMQ products (not on the sm_60 module, which has no tensor-core kernels).
    pub mmq: bool,
    pub ws: bool,
}

/// The path and products for a run of pair (`g`, `d`) at `rows` rows per routed expert, by the
/// table of `tuning`, among what `allowed` lets run.
pub fn decide(tuning: &Tuning, g: WType, d: WType, rows: usize, allowed: Allowed) -> Decision {
    let pair = format!("{}/{}", g.name(), d.name());
    let (fused, mut products, mut how) = match tuning.table.choice(g, d, rows) {
        Some(c) if c.fused && !allowed.fused => {
            let how = match c.split_ms {
                Some(s) => format!("{s:.3} ms; the fused path cannot run this layer"),
                None => "the fused path cannot run this layer, no split figures".into(),
            };
            (false, c.products, how)
        }
        Some(c) => (c.fused, c.products, c.why),
        None => (
            false,
            [Product::Mmq; 2],
            format!("{pair} not in the table, built-in rule: mmq"),
        ),
    };
    if !allowed.ws && products.contains(&Product::Ws) {
        products = products.map(|_| Product::Mmq);
        how.push_str("; weight-stationary products cannot run this layer");
    }
    if !allowed.mmq && products.contains(&Product::Mmq) {
        products = products.map(|_| Product::Ws);
        how.push_str("; MMQ products cannot run here (no tensor-core kernels in the module)");
    }
    let mut dec = Decision {
        fused,
        products,
        why: String::new(),
    };
    dec.why = format!(
        "{} at {rows} rows per routed expert: {how} (table: {})",
        dec.label(),
        tuning.source
    );
    dec
}

/// Auto's choice over rows per routed expert 1 and up, as runs of the same label: "fused at
/// 1-28, mmq at 29+ rows per routed expert". Past the table's last ladder point the choice no
/// longer changes.
pub fn summary(tuning: &Tuning, g: WType, d: WType, allowed: Allowed) -> String {
    let last = tuning.table.max_rows(g, d) + 1;
    let mut runs: Vec<(usize, usize, String)> = Vec::new();
    for rows in 1..=last {
        let l = decide(tuning, g, d, rows, allowed).label();
        match runs.last_mut() {
            Some(r) if r.2 == l => r.1 = rows,
            _ => runs.push((rows, rows, l)),
        }
    }
    let n = runs.len();
    let parts: Vec<String> = runs
        .into_iter()
        .enumerate()
        .map(|(i, (a, b, l))| match (i + 1 == n, a == b) {
            (true, _) => format!("{l} at {a}+"),
            (false, true) => format!("{l} at {a}"),
            (false, false) => format!("{l} at {a}-{b}"),
        })
        .collect();
    format!("{} rows per routed expert", parts.join(", "))
}

/// The decision of every row count, where the table makes the same one at all of them (the
/// built-in H200 table does for every pair: MMQ for both products): then a run needs no expert
/// bounds to choose, and auto reads none back.
pub fn constant(tuning: &Tuning, g: WType, d: WType, allowed: Allowed) -> Option<Decision> {
    let first = decide(tuning, g, d, 1, allowed);
    let last = tuning.table.max_rows(g, d) + 1;
    if (2..=last).any(|rows| {
        let x = decide(tuning, g, d, rows, allowed);
        (x.fused, x.products) != (first.fused, first.products)
    }) {
        return None;
    }
    Some(Decision {
        why: format!(
            "{} at every row count (table: {})",
            first.label(),
            tuning.source
        ),
        ..first
    })
}

/// The fused plan (where eligible) and a split plan whose products follow the table; one runs
/// per call.
pub struct AutoPlan {
    /// The fused plan and/or the split plan, at `fused` and `split`.
    plans: Vec<Box<dyn ExpertPlan>>,
    fused: Option<usize>,
    split: Option<usize>,
    /// Index into `plans` of the last prepared run.
    chosen: usize,
    tuning: Arc<Tuning>,
    pair: (WType, WType),
    allowed: Allowed,
    /// The table's decision where it is the same at every row count ([`constant`]).
    constant: Option<Decision>,
    why: String,
}

impl AutoPlan {
    /// `split` must pick its products per run with [`decide`] on the same table, or take those
    /// of [`constant`] where that is given (path.rs builds both); `allowed`: what may run (its
    /// `fused` is ignored: `fused` says it).
    pub fn new(
        fused: Option<Box<dyn ExpertPlan>>,
        split: Option<Box<dyn ExpertPlan>>,
        tuning: Arc<Tuning>,
        pair: (WType, WType),
        allowed: Allowed,
        constant: Option<Decision>,
    ) -> Result<Self> {
        let mut plans = Vec::new();
        let mut add = |p: Option<Box<dyn ExpertPlan>>| {
            p.map(|p| {
                plans.push(p);
                plans.len() - 1
            })
        };
        let (fused, split) = (add(fused), add(split));
        if plans.is_empty() {
            return Err(Error::Unsupported(
                "no expert path can run this layer".into(),
            ));
        }
        Ok(AutoPlan {
            plans,
            fused,
            split,
            chosen: split.or(fused).unwrap_or(0),
            tuning,
            pair,
            allowed,
            constant,
            why: "no run yet".into(),
        })
    }

    fn current(&self) -> &dyn ExpertPlan {
        self.plans[self.chosen].as_ref()
    }
}

impl ExpertPlan for AutoPlan {
    fn path(&self) -> ExpertPath {
        self.current().path()
    }

    fn label(&self) -> String {
        self.current().label()
    }

    fn why(&self) -> Option<String> {
        Some(self.why.clone())
    }

    fn stages(&self) -> &'static [&'static str] {
        self.current().stages()
    }

    fn max_stages(&self) -> usize {
        self.plans.iter().map(|p| p.max_stages()).max().unwrap_or(0)
    }

    fn prepare(&mut self, gpu: &Gpu, bounds: &mut Bounds) -> Result<()> {
        if let Some(d) = &self.constant {
            let want = if d.fused { self.fused } else { self.split };
            self.chosen = want.or(self.split).or(self.fused).unwrap_or(0);
            self.why = d.why.clone();
            return self.plans[self.chosen].prepare(gpu, bounds);
        }
        let rows = rows_per_routed_expert(bounds.host(gpu)?);
        let allowed = Allowed {
            fused: self.fused.is_some(),
            ..self.allowed
        };
        let d = decide(&self.tuning, self.pair.0, self.pair.1, rows, allowed);
        let want = if d.fused { self.fused } else { self.split };
        self.chosen = want.or(self.split).or(self.fused).unwrap_or(0);
        self.why = d.why;
        self.plans[self.chosen].prepare(gpu, bounds)
    }

    fn launch(
        &mut self,
        gpu: &Gpu,
        layer: &DeviceLayer,
        io: &ExpertIo,
        mark: &mut dyn FnMut(usize) -> Result<()>,
    ) -> Result<()> {
        self.plans[self.chosen].launch(gpu, layer, io, mark)
    }

    fn describe(&self) -> String {
        format!("auto -> {}", self.current().describe())
    }

    fn poison(&mut self, gpu: &Gpu, byte: u8) -> Result<()> {
        for p in &mut self.plans {
            p.poison(gpu, byte)?;
        }
        Ok(())
    }

    fn intermediates(&self, gpu: &Gpu, n_rows: usize) -> Result<Intermediates> {
        self.current().intermediates(gpu, n_rows)
    }

    fn written_past_end(&self, gpu: &Gpu, byte: u8, n_rows: usize) -> Result<Vec<&'static str>> {
        let mut bad = Vec::new();
        for p in &self.plans {
            bad.extend(p.written_past_end(gpu, byte, n_rows)?);
        }
        Ok(bad)
    }
}

#[cfg(test)]
mod tests;
