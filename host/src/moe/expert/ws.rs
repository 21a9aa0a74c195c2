//! The weight-stationary products' limits and tiers (gpu/src/moe/ws.rs): a thread per weight
//! row, 128 rows per CTA, integer arithmetic only. The plan that runs them is the split plan
//! (split.rs), alone (`--path ws`) or product by product beside MMQ (`--path auto`).

use gpu::layout::{MMQ_KSTEP, WS_COLS, WS_FAST_COLS, WS_ROWS};

use crate::error::{Result, shape};
use crate::problem::MoeShape;

/// Environment variable that turns WS_FAST on (`1`): the down product's 32-row tier runs its
/// `_fast` kernel (same bytes, fewer instructions). `--ws-fast` on the CLI does the same.
pub const WS_FAST_VAR: &str = "MOE_WS_FAST";

/// Environment variable that forces the tier's width (16, 32 or 64 rows) for every run.
pub const WS_COLS_VAR: &str = "MOE_WS_COLS";

/// How the weight-stationary products run: WS_FAST, and a forced tier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WsOptions {
    /// The down product's 32-row tier runs its `_fast` kernel (same bytes).
    pub fast: bool,
    /// A tier index into `WS_COLS` for every run instead of [`tier`]'s choice.
    pub tier: Option<usize>,
}

impl WsOptions {
    /// From `MOE_WS_FAST=1` and `MOE_WS_COLS=16|32|64` (other values are ignored).
    pub fn from_env() -> WsOptions {
        WsOptions {
            fast: std::env::var(WS_FAST_VAR).is_ok_and(|v| v == "1"),
            tier: std::env::var(WS_COLS_VAR)
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                .and_then(|c| WS_COLS.iter().position(|&w| w == c)),
        }
    }

    /// The tier of a run with `rows` rows per routed expert.
    pub fn tier_for(&self, rows: usize) -> usize {
        self.tier.unwrap_or_else(|| tier(rows))
    }
}

/// Checks a product's shape against the weight-stationary kernels' limits.
pub fn check_product(what: &str, n: usize, k: usize) -> Result<()> {
    if n == 0 || !n.is_multiple_of(WS_ROWS) || n / WS_ROWS > 65_535 {
        return Err(shape(
            format!("{what}: output features"),
            n,
            "a positive multiple of 128, at most 8,388,480",
        ));
    }
    if k == 0 || !k.is_multiple_of(MMQ_KSTEP) || k > u32::MAX as usize {
        return Err(shape(format!("{what}: K"), k, "a positive multiple of 128"));
    }
    Ok(())
}

/// Why the weight-stationary path cannot run this shape, if it cannot.
pub fn eligible(s: &MoeShape) -> Result<()> {
    check_product("moe_ws (gate/up)", 2 * s.ffn, s.hidden)?;
    check_product("moe_ws (down)", s.hidden, s.ffn)
}

/// The tier (index into `WS_COLS`) for a run with `rows` rows per routed expert: the narrowest
/// whose tiles hold an expert's rows in one CTA, the widest above that. Measured on the H200
/// (BENCHMARKS.md, "weight-stationary tiers").
pub fn tier(rows: usize) -> usize {
    WS_COLS
        .iter()
        .position(|&c| rows <= c)
        .unwrap_or(WS_COLS.len() - 1)
}

/// The tier index of `WS_FAST_COLS`.
pub const FAST_TIER: usize = {
    let mut i = 0;
    while WS_COLS[i] != WS_FAST_COLS {
        i += 1;
    }
    i
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_follow_rows_per_expert() {
        assert_eq!(WS_COLS[tier(1)], 16);
        assert_eq!(WS_COLS[tier(16)], 16);
        assert_eq!(WS_COLS[tier(17)], 32);
        assert_eq!(WS_COLS[tier(33)], 64);
        assert_eq!(WS_COLS[tier(4000)], 64);
        assert_eq!(WS_COLS[FAST_TIER], WS_FAST_COLS);
        assert!(eligible(&MoeShape::REFERENCE).is_ok());
    }
}
