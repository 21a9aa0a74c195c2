//! What a split plan (split.rs) chooses between: the kernel family of each product (MMQ or
//! weight-stationary), fixed or per run, and the options of each family.

use crate::error::Result;
use crate::moe::expert::mmq::{self, MmqChoice};
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

/// How a split plan's products run: the weight-stationary options and the MMQ kernel choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SplitOptions {
    pub ws: WsOptions,
    pub mmq: MmqChoice,
}

impl SplitOptions {
    /// From the environment (`MOE_WS_FAST`, `MOE_WS_COLS`, `MOE_MMQ_KERNEL`).
    pub fn from_env() -> Result<SplitOptions> {
        Ok(SplitOptions {
            ws: WsOptions::from_env(),
            mmq: MmqChoice::from_env()?,
        })
    }
}

/// Why a product family cannot run this shape, if it cannot.
pub fn eligible(p: Product, s: &MoeShape) -> Result<()> {
    match p {
        Product::Mmq => mmq::eligible(s),
        Product::Ws => ws::eligible(s),
    }
}
