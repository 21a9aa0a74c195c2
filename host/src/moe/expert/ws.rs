//! The weight-stationary products' limits and tiers (gpu/src/moe/ws/): a thread per weight
//! row, 128 rows per CTA, integer arithmetic only. The plan that runs them is the split plan
//! (split.rs), alone (`--path ws`) or product by product beside MMQ (`--path auto`).

use gpu::layout::{WS_COLS, WS_FAST_COLS, WS_ROWS};

use super::check_product;
use crate::error::Result;
use crate::problem::MoeShape;

/// Environment variable that turns WS_FAST on (`1`): both products run the `_fast` kernel of
/// their tier where it has one (16 and 32 rows; same bytes, fewer instructions).
pub const WS_FAST_VAR: &str = "MOE_WS_FAST";

/// Environment variable that forces the tier's width (16, 32 or 64 rows) for every run.
pub const WS_COLS_VAR: &str = "MOE_WS_COLS";

/// How the weight-stationary products run: WS_FAST, and a forced tier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WsOptions {
    /// The products run the `_fast` kernel of their tier where it has one (same bytes).
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

    /// The tier of a run with `rows` rows per routed expert: the forced one, else with WS_FAST
    /// the 32-row tier (its `_fast` kernel), else [`tier`]'s. Measured on the H200 (IQ4_NL down,
    /// reference shape, BENCHMARKS.md): the 32-row `_fast` kernel (96 registers) is 15-18 %
    /// faster than the 16-row default (80) at 15-80 rows per routed expert and 17-19 % faster
    /// than the 32-row default (124); the 16-row `_fast` kernel gains only 4-5 %. Below 16 rows
    /// both tiers make the same tiles.
    pub fn tier_for(&self, rows: usize) -> usize {
        self.tier.unwrap_or_else(|| {
            if self.fast {
                WS_COLS
                    .iter()
                    .position(|&c| c == WS_FAST_COLS[1])
                    .unwrap_or(0)
            } else {
                tier(rows)
            }
        })
    }
}

/// Why the weight-stationary path cannot run this shape, if it cannot.
pub fn eligible(s: &MoeShape) -> Result<()> {
    check_product("moe_ws (gate/up)", 2 * s.ffn, s.hidden, WS_ROWS)?;
    check_product("moe_ws (down)", s.hidden, s.ffn, WS_ROWS)
}

/// The tier (index into `WS_COLS`) for a run with `rows` rows per routed expert: the 16-row
/// tier at every row count. Measured on the H200 at the reference shape (BENCHMARKS.md,
/// "weight-stationary tiers"): 16 rows per CTA was the fastest of 16/32/64 at 10, 20, 40, 160
/// and 320 rows per routed expert (3-18 % ahead of the next): more CTAs of fewer registers
/// beat decoding each weight block fewer times, since this path is bound by its integer
/// multiply-adds, not by the decode.
pub fn tier(_rows: usize) -> usize {
    0
}

/// The index into `WS_FAST_COLS` (and `FormatKernels::ws_fast`) of tier `tier`, if it has a
/// `_fast` variant.
pub fn fast_index(tier: usize) -> Option<usize> {
    WS_FAST_COLS.iter().position(|&c| c == WS_COLS[tier])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_follow_rows_per_expert() {
        assert_eq!(WS_COLS[tier(1)], 16);
        assert_eq!(WS_COLS[tier(4000)], 16);
        assert_eq!(fast_index(0), Some(0));
        assert_eq!(fast_index(1), Some(1));
        assert_eq!(fast_index(2), None);
        let o = WsOptions {
            fast: false,
            tier: Some(2),
        };
        assert_eq!(o.tier_for(3), 2);
        let fast = WsOptions {
            fast: true,
            tier: None,
        };
        assert_eq!(WS_COLS[fast.tier_for(3)], 32);
        assert_eq!(WS_COLS[WsOptions::default().tier_for(300)], 16);
        assert!(eligible(&MoeShape::REFERENCE).is_ok());
    }
}
