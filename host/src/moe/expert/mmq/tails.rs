//! Whether a flat MMQ product runs each expert's mostly empty last tile on the wide kernel
//! ([`MmqTails`]), and its environment variable.

use crate::env;
use crate::error::Result;

/// Environment variable choosing where a flat MMQ product's tails run ([`MmqTails`]): `wide`
/// (the default) or `off`.
pub const MMQ_TAILS_VAR: &str = "MOE_MMQ_TAILS";

/// Where a product on the flat MMQ kernel (128 columns a tile) runs each expert's last tile of
/// at most 64 columns, its *tail* (`crate::moe::expert::TilePart`). Both give the same bytes.
/// `Off`: in the flat kernel with the others, where the warps of its empty columns wait at
/// every K step's barrier. `Wide`: in a second launch on the wide kernel (128 weight rows x 64
/// columns a CTA), over a list of the tails alone; the flat launch takes the rest. With
/// `Wide`, `MmqChoice::Auto` takes flat tiles from fewer rows per expert
/// (`FLAT_TAILS_MIN_ROWS`). Measured on an H100 (BENCHMARKS.md, the forty-third session), flat
/// tiles with their tails on the wide kernel against flat tiles alone, Q2_0 / Q2_0 layer:
/// -8.7 % at 160 rows per expert, -4.8 % at 280, -1.6 % at 320, even at 240; so `Wide` is the
/// default (`Off` only where the wide kernel is the classic one, which has no SwiGLU epilogue).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MmqTails {
    Off,
    #[default]
    Wide,
}

impl MmqTails {
    /// The variable's names, the default first.
    const NAMES: [(&str, MmqTails); 2] = [("wide", MmqTails::Wide), ("off", MmqTails::Off)];

    /// From `MOE_MMQ_TAILS` (unset: `Wide`); an unknown value is an error, not ignored.
    pub fn from_env() -> Result<MmqTails> {
        env::choice_from_env(MMQ_TAILS_VAR, &Self::NAMES)
    }

    /// From a `MOE_MMQ_TAILS` value (`None`: unset).
    pub fn parse(v: Option<&str>) -> Result<MmqTails> {
        env::choice(MMQ_TAILS_VAR, v, &Self::NAMES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_from_their_variable() {
        assert_eq!(MmqTails::parse(None).unwrap(), MmqTails::Wide);
        assert_eq!(MmqTails::default(), MmqTails::Wide);
        assert_eq!(MmqTails::parse(Some("off")).unwrap(), MmqTails::Off);
        assert_eq!(MmqTails::parse(Some("wide")).unwrap(), MmqTails::Wide);
        let e = MmqTails::parse(Some("narrow")).unwrap_err().to_string();
        assert!(e.contains("MOE_MMQ_TAILS") && e.contains("narrow"), "{e}");
    }
}
