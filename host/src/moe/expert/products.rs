//! What a split plan (split.rs) chooses between: the kernel family of each product (MMQ or
//! weight-stationary), fixed or per run, and the options of each family.

use crate::env;
use crate::error::Result;
use crate::moe::expert::mmq::{
    self, MmqChoice, MmqFlatWs, MmqOrder, MmqTails, MmqTma, MmqWeightL2,
};
use crate::moe::expert::ws::{self, WsOptions};
use crate::moe::path::ExpertPath;
use crate::problem::MoeShape;

/// The kernel family that runs one product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Product {
    Mmq,
    Ws,
}

impl Product {
    pub const fn path(self) -> ExpertPath {
        match self {
            Product::Mmq => ExpertPath::Mmq,
            Product::Ws => ExpertPath::Ws,
        }
    }
}

/// How a split plan picks its products for a run: fixed, or from the run's rows per routed
/// expert (auto's table).
pub enum SplitChoice {
    Fixed([Product; 2]),
    PerRun(Box<dyn Fn(usize) -> [Product; 2]>),
}

impl SplitChoice {
    pub(super) fn may_use(&self, p: Product) -> bool {
        match self {
            SplitChoice::Fixed(f) => f.contains(&p),
            SplitChoice::PerRun(_) => true,
        }
    }
}

/// How a split plan's products run: the weight-stationary options, the MMQ kernel choice, its
/// CTAs' order, tensor copies, weights' L2 priority, flat kernels' form and tails, and where
/// SwiGLU + q8_1 runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SplitOptions {
    pub ws: WsOptions,
    pub mmq: MmqChoice,
    pub order: MmqOrder,
    pub tma: MmqTma,
    pub weight_l2: MmqWeightL2,
    pub flat_ws: MmqFlatWs,
    pub tails: MmqTails,
    pub swiglu: SwigluAt,
}

impl SplitOptions {
    /// From the environment (`MOE_WS_FAST`, `MOE_WS_COLS`, `MOE_MMQ_KERNEL`, `MOE_MMQ_ORDER`,
    /// `MOE_MMQ_TMA`, `MOE_MMQ_WEIGHT_L2`, `MOE_MMQ_FLAT_WS`, `MOE_MMQ_TAILS`, `MOE_SWIGLU`).
    pub fn from_env() -> Result<SplitOptions> {
        Ok(SplitOptions {
            ws: WsOptions::from_env(),
            mmq: MmqChoice::from_env()?,
            order: MmqOrder::from_env()?,
            tma: MmqTma::from_env()?,
            weight_l2: MmqWeightL2::from_env()?,
            flat_ws: MmqFlatWs::from_env()?,
            tails: MmqTails::from_env()?,
            swiglu: SwigluAt::from_env()?,
        })
    }
}

/// Environment variable that says where SwiGLU + q8_1 runs: `auto` (the default), `epilogue` or
/// `kernel`. All give the same bytes.
pub const SWIGLU_VAR: &str = "MOE_SWIGLU";

/// `SwigluAt::Auto` puts SwiGLU in the gate/up epilogue from this many rows per routed expert
/// (`n_rows / n_experts`) on. The epilogue costs each CTA its tail (three barriers, a SwiGLU per
/// output column, empty ones included), which `moe_swiglu_quant` beats at few rows per expert.
/// Measured on the H200, Q2_0 / Q2_0 at the reference shape (BENCHMARKS.md), layer ms, kernel
/// form -> epilogue: 0.886 -> 1.00 at 10 rows per expert (T = 512), 1.453 -> 1.49-1.52 at 40,
/// 2.716 -> 2.77 at 80, 4.648 -> 4.617 at 160, 8.754 -> 8.63 at 320 (the IQ pairs: -0.14 to
/// -0.18 ms at 320).
pub const SWIGLU_EPILOGUE_MIN_ROWS_PER_EXPERT: usize = 160;

/// Where SwiGLU + q8_1 runs between the products. `Epilogue`: in the gate/up product's epilogue
/// when that product runs on a pipelined MMQ kernel (`moe_mmq_(pipe|narrow)_swiglu_<type>`; gate
/// and up never reach global memory), else in `moe_swiglu_quant`. `Kernel`: always in
/// `moe_swiglu_quant`, from the f32 gate/up rows (which the plan can then read back). `Auto`:
/// the epilogue from [`SWIGLU_EPILOGUE_MIN_ROWS_PER_EXPERT`] rows per routed expert, the
/// kernel below.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SwigluAt {
    #[default]
    Auto,
    Epilogue,
    Kernel,
}

impl SwigluAt {
    /// From `MOE_SWIGLU` (unset: `Auto`); an unknown value is an error, not ignored.
    pub fn from_env() -> Result<SwigluAt> {
        env::choice_from_env(
            SWIGLU_VAR,
            &[
                ("auto", SwigluAt::Auto),
                ("epilogue", SwigluAt::Epilogue),
                ("kernel", SwigluAt::Kernel),
            ],
        )
    }

    /// Whether a run of `n_rows` rows over `n_experts` experts takes the epilogue (where the
    /// gate/up kernel has one).
    pub fn epilogue(self, n_rows: usize, n_experts: usize) -> bool {
        match self {
            SwigluAt::Epilogue => true,
            SwigluAt::Kernel => false,
            SwigluAt::Auto => n_rows >= SWIGLU_EPILOGUE_MIN_ROWS_PER_EXPERT * n_experts.max(1),
        }
    }
}

/// Why a product family cannot run this shape, if it cannot.
pub fn eligible(p: Product, s: &MoeShape) -> Result<()> {
    match p {
        Product::Mmq => mmq::eligible(s),
        Product::Ws => ws::eligible(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swiglu_epilogue_rule() {
        let (e, m) = (512, SWIGLU_EPILOGUE_MIN_ROWS_PER_EXPERT);
        assert!(SwigluAt::Auto.epilogue(m * e, e));
        assert!(!SwigluAt::Auto.epilogue(m * e - 1, e));
        // T = 512 and 16,384 at the reference shape (top-10 of 512 experts).
        assert!(!SwigluAt::Auto.epilogue(5_120, e));
        assert!(SwigluAt::Auto.epilogue(163_840, e));
        for rows in [0, 1, 5_120, 163_840] {
            assert!(SwigluAt::Epilogue.epilogue(rows, e));
            assert!(!SwigluAt::Kernel.epilogue(rows, e));
        }
        assert_eq!(SwigluAt::default(), SwigluAt::Auto);
    }
}
