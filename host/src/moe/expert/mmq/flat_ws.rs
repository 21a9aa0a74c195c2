//! Whether the flat MMQ kernels without the epilogue run warp specialized
//! (`moe_mmq_flat_ws_<type>`, sm_90 modules), and its environment variable.

use crate::env;
use crate::error::Result;

/// Environment variable choosing the flat MMQ kernel's form on sm_90 ([`MmqFlatWs`]): `off`
/// (the default) or `on`.
pub const MMQ_FLAT_WS_VAR: &str = "MOE_MMQ_FLAT_WS";

/// The form of the flat MMQ products without the SwiGLU epilogue (the down product, and the
/// gate/up product where SwiGLU runs in its own kernel) on sm_90 modules. Both give the same
/// bytes. `Off`: `moe_mmq_flat_<type>`, whose 8 warps each copy, decode and multiply, a CTA
/// barrier a K step. `On`: `moe_mmq_flat_ws_<type>` (gpu/src/moe/mmq/pipe/ws.rs), whose 8 warps
/// only multiply while `gpu::layout::MMQ_WS_PRODUCER_WARPS` more warps copy and decode.
/// Measured (an H100, T = 16,384, BENCHMARKS.md): `On` takes 1.03-1.07x the layer time of
/// `Off`, so `Off` is the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MmqFlatWs {
    #[default]
    Off,
    On,
}

impl MmqFlatWs {
    /// The variable's names, the default first.
    const NAMES: [(&str, MmqFlatWs); 2] = [("off", MmqFlatWs::Off), ("on", MmqFlatWs::On)];

    /// From `MOE_MMQ_FLAT_WS` (unset: `Off`); an unknown value is an error, not ignored.
    pub fn from_env() -> Result<MmqFlatWs> {
        env::choice_from_env(MMQ_FLAT_WS_VAR, &Self::NAMES)
    }

    /// From a `MOE_MMQ_FLAT_WS` value (`None`: unset).
    pub fn parse(v: Option<&str>) -> Result<MmqFlatWs> {
        env::choice(MMQ_FLAT_WS_VAR, v, &Self::NAMES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_ws_from_its_variable() {
        assert_eq!(MmqFlatWs::parse(None).unwrap(), MmqFlatWs::Off);
        assert_eq!(MmqFlatWs::parse(Some("off")).unwrap(), MmqFlatWs::Off);
        assert_eq!(MmqFlatWs::parse(Some("on")).unwrap(), MmqFlatWs::On);
        assert_eq!(MmqFlatWs::default(), MmqFlatWs::Off);
        let e = MmqFlatWs::parse(Some("yes")).unwrap_err().to_string();
        assert!(e.contains("MOE_MMQ_FLAT_WS") && e.contains("yes"), "{e}");
    }
}
