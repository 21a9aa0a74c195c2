//! The L2 priority of the weights' lines in the narrow, tall and resident MMQ kernels' copies
//! (`MmqParams::weight_l2`), and its environment variable.

use gpu::layout::{MMQ_WEIGHT_L2_FIRST, MMQ_WEIGHT_L2_NORMAL};

use crate::env;
use crate::error::Result;

/// Environment variable naming the L2 priority of the narrow, tall and resident MMQ kernels'
/// weight copies on sm_90 ([`MmqWeightL2`]): `normal` (the default) or `first`.
pub const MMQ_WEIGHT_L2_VAR: &str = "MOE_MMQ_WEIGHT_L2";

/// The L2 priority of the lines the narrow, tall and resident MMQ kernels' weight copies bring in
/// on sm_90 modules (`.L2::cache_hint` on their tensor copies, bulk copies and `cp.async` pieces:
/// the kernels of few rows per expert). Both give the same bytes. `Normal`: as a copy without a
/// hint. `First`: evicted before any other line, so that a product streaming its weights (read once
/// at few rows per expert) leaves in the L2 what is read again: its activations, and its output,
/// which the next kernel (SwiGLU + quantize after gate/up, the combine after down) reads. Not
/// measured yet: `Normal` stays the default until the H200 says otherwise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MmqWeightL2 {
    #[default]
    Normal,
    First,
}

impl MmqWeightL2 {
    /// The variable's names, the default first.
    const NAMES: [(&str, MmqWeightL2); 2] = [
        ("normal", MmqWeightL2::Normal),
        ("first", MmqWeightL2::First),
    ];

    /// From `MOE_MMQ_WEIGHT_L2` (unset: `Normal`); an unknown value is an error, not ignored.
    pub fn from_env() -> Result<MmqWeightL2> {
        env::choice_from_env(MMQ_WEIGHT_L2_VAR, &Self::NAMES)
    }

    /// From a `MOE_MMQ_WEIGHT_L2` value (`None`: unset).
    pub fn parse(v: Option<&str>) -> Result<MmqWeightL2> {
        env::choice(MMQ_WEIGHT_L2_VAR, v, &Self::NAMES)
    }

    /// The kernels' parameter (`MmqParams::weight_l2`).
    pub const fn param(self) -> u32 {
        match self {
            MmqWeightL2::Normal => MMQ_WEIGHT_L2_NORMAL,
            MmqWeightL2::First => MMQ_WEIGHT_L2_FIRST,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weight_l2_from_its_variable() {
        assert_eq!(MmqWeightL2::parse(None).unwrap(), MmqWeightL2::Normal);
        assert_eq!(
            MmqWeightL2::parse(Some("normal")).unwrap(),
            MmqWeightL2::Normal
        );
        assert_eq!(
            MmqWeightL2::parse(Some("first")).unwrap(),
            MmqWeightL2::First
        );
        assert_eq!(MmqWeightL2::default(), MmqWeightL2::Normal);
        assert_eq!(MmqWeightL2::Normal.param(), MMQ_WEIGHT_L2_NORMAL);
        assert_eq!(MmqWeightL2::First.param(), MMQ_WEIGHT_L2_FIRST);
        assert_ne!(MMQ_WEIGHT_L2_NORMAL, MMQ_WEIGHT_L2_FIRST);
        let e = MmqWeightL2::parse(Some("last")).unwrap_err().to_string();
        assert!(e.contains("MOE_MMQ_WEIGHT_L2") && e.contains("last"), "{e}");
    }
}
