//! The per-group MMQ products' limits (gpu/src/moe/mmq.rs): one CTA per up to 64 rows of an
//! expert and 128 output features. The plan that runs them is the split plan (split.rs).

use gpu::layout::MMQ_ROWS;

use super::check_product;
use crate::error::Result;
use crate::problem::MoeShape;

/// Why the MMQ path cannot run this shape, if it cannot.
pub fn eligible(s: &MoeShape) -> Result<()> {
    check_product("moe_gate_up_mmq", 2 * s.ffn, s.hidden, MMQ_ROWS)?;
    check_product("moe_down_mmq", s.hidden, s.ffn, MMQ_ROWS)
}
