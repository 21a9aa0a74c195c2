//! Whether a flat MMQ product runs each expert's mostly empty last tile on the wide kernel
//! ([`MmqTails`]), and its environment variable.

use crate::env;
use crate::error::Result;

/// Environment variable choosing where a flat MMQ product's tails run ([`MmqTails`]): `off`
/// (the default) or `wide`.
pub const MMQ_TAILS_VAR: &str = "MOE_MMQ_TAILS";

/// Where a product on the flat MMQ kernel (128 columns a tile) runs each expert's last tile of
/// at most 64 columns, its *tail* (`crate::moe::expert::TilePart`). Both give the same bytes.
/// `Off`: in the flat kernel with the others, where the warps of its empty columns wait at
/// every K step's barrier. `Wide`: in a second launch on the wide kernel (128 weight rows x 64
/// columns a CTA), over a list of the tails alone; the flat launch takes the rest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MmqTails {
    #[default]
    Off,
    Wide,
}

impl MmqTails {
    /// The variable's names, the default first.
    const NAMES: [(&str, MmqTails); 2] = [("off", MmqTails::Off), ("wide", MmqTails::Wide)];

    /// From `MOE_MMQ_TAILS` (unset: `Off`); an unknown value is an error, not ignored.
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
        assert_eq!(MmqTails::parse(None).unwrap(), MmqTails::Off);
        assert_eq!(MmqTails::parse(Some("off")).unwrap(), MmqTails::Off);
        assert_eq!(MmqTails::parse(Some("wide")).unwrap(), MmqTails::Wide);
        let e = MmqTails::parse(Some("narrow")).unwrap_err().to_string();
        assert!(e.contains("MOE_MMQ_TAILS") && e.contains("narrow"), "{e}");
    }
}
