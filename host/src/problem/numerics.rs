//! The float epilogue's numerics a layer is computed in: MMQ's (the default, on every path) or
//! the opt-in Q2_0 shared-d variant (the fused path only). Both sides take the rule of each
//! step from `gpu::quant`; this type says which applies to which product.

use gpu::layout::WType;

use crate::error::{Error, Result};

/// The numerics of a layer's two products.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Numerics {
    /// ggml MMQ's: one scale step per 32 K values (per 16 for IQ2_XS / IQ2_S) in ascending K
    /// (`gpu::quant::mmq_step_32` / `mmq_step_16`). Every path gives these bytes.
    #[default]
    Mmq,
    /// Q2_0 shared-d: a product with Q2_0 weights takes one step per 64-value block,
    /// `acc = fma(d, fma(C0, dB0, C1 dB1), acc)` (`gpu::quant::q2_0_shared_d_step`: the block's
    /// two 32-value groups share its scale d); the other types' products keep MMQ's. Not
    /// ggml's numerics: its bytes differ from MMQ's (by about one rounding per block), and
    /// only the fused path and the reference compute it. Opt-in: `--numerics q2_0-shared-d`
    /// or `MOE_NUMERICS=q2_0-shared-d`.
    Q2_0SharedD,
}

/// Environment variable choosing the numerics where no `--numerics` flag does.
pub const NUMERICS_VAR: &str = "MOE_NUMERICS";

impl Numerics {
    /// The names the CLI and [`NUMERICS_VAR`] take, the default first.
    pub const NAMES: [(&'static str, Numerics); 2] = [
        ("mmq", Numerics::Mmq),
        ("q2_0-shared-d", Numerics::Q2_0SharedD),
    ];

    pub fn name(self) -> &'static str {
        match self {
            Numerics::Mmq => "mmq",
            Numerics::Q2_0SharedD => "q2_0-shared-d",
        }
    }

    /// Whether a product with weights of type `w` takes the Q2_0 shared-d step.
    pub fn shared_d(self, w: WType) -> bool {
        self == Numerics::Q2_0SharedD && w == WType::Q2_0
    }

    /// [`NUMERICS_VAR`]'s choice (unset: MMQ's); an unknown value is an error.
    pub fn from_env() -> Result<Numerics> {
        crate::env::choice_from_env(NUMERICS_VAR, &Self::NAMES)
    }
}

impl std::str::FromStr for Numerics {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == s)
            .map(|&(_, v)| v)
            .ok_or_else(|| {
                Error::Unsupported(format!("unknown numerics {s:?}: mmq or q2_0-shared-d"))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_the_variant_touches_q2_0_only() {
        for (n, v) in Numerics::NAMES {
            assert_eq!(n.parse::<Numerics>().unwrap(), v);
            assert_eq!(v.name(), n);
        }
        assert!("shared-d".parse::<Numerics>().is_err());
        assert_eq!(Numerics::default(), Numerics::Mmq);
        for w in WType::ALL {
            assert!(!Numerics::Mmq.shared_d(w));
            assert_eq!(Numerics::Q2_0SharedD.shared_d(w), w == WType::Q2_0, "{w:?}");
        }
    }
}
