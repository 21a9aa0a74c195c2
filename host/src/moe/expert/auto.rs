//! `--path auto`: every eligible path's plan, and per run the one measured fastest on the H200 at
//! that run's rows per routed expert (BENCHMARKS.md): the fused path below `FUSED_MAX_ROWS`
//! rows per routed expert, MMQ above. The choice is made from the expert bounds of the run
//! (in the pipeline's "tiles" stage) and never changes bytes.

use super::{ExpertIo, ExpertPlan, Intermediates, rows_per_routed_expert};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::moe::layer::DeviceLayer;
use crate::moe::path::ExpertPath;

/// Rows per routed expert below which the fused path is faster than MMQ on the H200: at the
/// reference shape it was 1.28-1.41x faster at 20 rows and 0.77-0.80x at 40 for the four
/// benchmarked pairs (BENCHMARKS.md); the lines between those points cross at 29-30 rows.
pub const FUSED_MAX_ROWS: usize = 30;

/// The path auto takes for a run with these expert bounds, among `available`.
pub fn choose(bounds: &[u32], available: &[ExpertPath]) -> ExpertPath {
    let want = if rows_per_routed_expert(bounds) < FUSED_MAX_ROWS {
        ExpertPath::Fused
    } else {
        ExpertPath::Mmq
    };
    if available.contains(&want) {
        want
    } else {
        available.first().copied().unwrap_or(ExpertPath::Mmq)
    }
}

/// The plans of every eligible path; one runs per call.
pub struct AutoPlan {
    plans: Vec<Box<dyn ExpertPlan>>,
    chosen: usize,
}

impl AutoPlan {
    pub fn new(plans: Vec<Box<dyn ExpertPlan>>) -> Result<Self> {
        if plans.is_empty() {
            return Err(Error::Unsupported(
                "no expert path can run this layer".into(),
            ));
        }
        Ok(AutoPlan { plans, chosen: 0 })
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

    fn stages(&self) -> &'static [&'static str] {
        self.current().stages()
    }

    fn max_stages(&self) -> usize {
        self.plans.iter().map(|p| p.max_stages()).max().unwrap_or(0)
    }

    fn prepare(&mut self, gpu: &Gpu, bounds: &[u32]) -> Result<()> {
        let available: Vec<ExpertPath> = self.plans.iter().map(|p| p.path()).collect();
        let want = choose(bounds, &available);
        self.chosen = available.iter().position(|&p| p == want).unwrap_or(0);
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
        format!(
            "auto ({} below {FUSED_MAX_ROWS} rows per routed expert, else mmq) -> {}",
            ExpertPath::Fused.name(),
            self.current().describe()
        )
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
mod tests {
    use super::*;

    #[test]
    fn auto_takes_fused_for_few_rows_per_expert() {
        let both = [ExpertPath::Mmq, ExpertPath::Fused];
        // 10 rows on each of 3 experts, one expert without rows.
        assert_eq!(choose(&[0, 10, 20, 20, 30], &both), ExpertPath::Fused);
        assert_eq!(choose(&[0, 100, 200, 200, 300], &both), ExpertPath::Mmq);
        assert_eq!(choose(&[0, 10, 20], &[ExpertPath::Mmq]), ExpertPath::Mmq);
        assert_eq!(choose(&[0, 0], &both), ExpertPath::Fused);
    }
}
