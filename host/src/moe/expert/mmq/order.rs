//! The order in which the pipelined MMQ kernels' CTAs take their work (`MmqParams::order`),
//! and its environment variable.

use gpu::layout::{MMQ_ORDER_ROWS, MMQ_ORDER_TILES};

use crate::env;
use crate::error::Result;

/// Environment variable naming the order in which the pipelined MMQ kernels take their CTAs'
/// work ([`MmqOrder`]): `rows` (the default) or `tiles`.
pub const MMQ_ORDER_VAR: &str = "MOE_MMQ_ORDER";

/// The order in which the pipelined MMQ kernels' CTAs take their work (`MmqParams::order`). Both
/// give the same bytes. `Rows`: the CTAs started together run every row tile of a few tiles (an
/// expert's rows), so a tile's activations are read from memory once and from the L2 by its
/// other row tiles; `Tiles`: the grid's order, every tile of the first row tile first (each row
/// tile reads all the activations again). Measured on the H200 (BENCHMARKS.md): `Rows` is 0.6 to
/// 1.3 % faster for the layer at every T.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MmqOrder {
    #[default]
    Rows,
    Tiles,
}

impl MmqOrder {
    /// The variable's names, the default first.
    const NAMES: [(&str, MmqOrder); 2] = [("rows", MmqOrder::Rows), ("tiles", MmqOrder::Tiles)];

    /// From `MOE_MMQ_ORDER` (unset: `Rows`); an unknown value is an error, not ignored.
    pub fn from_env() -> Result<MmqOrder> {
        env::choice_from_env(MMQ_ORDER_VAR, &Self::NAMES)
    }

    /// From a `MOE_MMQ_ORDER` value (`None`: unset).
    pub fn parse(v: Option<&str>) -> Result<MmqOrder> {
        env::choice(MMQ_ORDER_VAR, v, &Self::NAMES)
    }

    /// The kernels' parameter (`MmqParams::order`).
    pub const fn param(self) -> u32 {
        match self {
            MmqOrder::Rows => MMQ_ORDER_ROWS,
            MmqOrder::Tiles => MMQ_ORDER_TILES,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cta_order_from_its_variable() {
        assert_eq!(MmqOrder::parse(None).unwrap(), MmqOrder::Rows);
        assert_eq!(MmqOrder::parse(Some("rows")).unwrap(), MmqOrder::Rows);
        assert_eq!(MmqOrder::parse(Some("tiles")).unwrap(), MmqOrder::Tiles);
        assert_eq!(MmqOrder::default(), MmqOrder::Rows);
        assert_eq!(MmqOrder::Rows.param(), MMQ_ORDER_ROWS);
        assert_eq!(MmqOrder::Tiles.param(), MMQ_ORDER_TILES);
        assert_ne!(MMQ_ORDER_ROWS, MMQ_ORDER_TILES);
        let e = MmqOrder::parse(Some("columns")).unwrap_err().to_string();
        assert!(e.contains("MOE_MMQ_ORDER") && e.contains("columns"), "{e}");
    }
}
