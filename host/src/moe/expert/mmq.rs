//! The per-group MMQ products' limits (gpu/src/moe/mmq.rs): one CTA per up to 64 rows of an
//! expert and 128 output features. The plan that runs them is the split plan (split.rs).

use gpu::layout::{MMQ_KSTEP, MMQ_ROWS};

use crate::error::{Result, shape};
use crate::problem::MoeShape;

/// Checks a product's shape against the MMQ kernels' limits; `what` names the kernel.
pub fn check_product(what: &str, n: usize, k: usize) -> Result<()> {
    if n == 0 || !n.is_multiple_of(MMQ_ROWS) || n / MMQ_ROWS > 65_535 {
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

/// Why the MMQ path cannot run this shape, if it cannot.
pub fn eligible(s: &MoeShape) -> Result<()> {
    check_product("moe_gate_up_mmq", 2 * s.ffn, s.hidden)?;
    check_product("moe_down_mmq", s.hidden, s.ffn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_limits() {
        assert!(check_product("x", 1280, 2560).is_ok());
        assert!(check_product("x", 1000, 2560).is_err());
        assert!(check_product("x", 1280, 100).is_err());
    }
}
