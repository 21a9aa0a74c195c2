//! Whether the pipelined MMQ kernels copy their raw weight stages by tensor copies
//! (`MmqParams::wmap0`, `gpu::layout::MmqTmaMap`), and its environment variable.

use crate::env;
use crate::error::Result;
use crate::moe::layer::LayerPtrs;

/// Environment variable saying whether the pipelined MMQ kernels copy their weight stages by
/// tensor copies ([`MmqTma`]): `auto` (the default) or `never`.
pub const MMQ_TMA_VAR: &str = "MOE_MMQ_TMA";

/// Whether the pipelined gate/up kernels with the SwiGLU epilogue (128-row, flat) and the
/// narrow ones copy their raw weight stages by tensor copies. Both give the same bytes. `Auto`:
/// wherever the layer has the product's tensor maps (an sm_90 module, row and expert strides of
/// whole 16-byte pieces: `LayerPtrs::gate_map`);
/// `Never`: 16-byte `cp.async` pieces spread over the CTA's threads, as before tensor copies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MmqTma {
    #[default]
    Auto,
    Never,
}

impl MmqTma {
    /// The variable's names, the default first.
    const NAMES: [(&str, MmqTma); 2] = [("auto", MmqTma::Auto), ("never", MmqTma::Never)];

    /// From `MOE_MMQ_TMA` (unset: `Auto`); an unknown value is an error, not ignored.
    pub fn from_env() -> Result<MmqTma> {
        env::choice_from_env(MMQ_TMA_VAR, &Self::NAMES)
    }

    /// From a `MOE_MMQ_TMA` value (`None`: unset).
    pub fn parse(v: Option<&str>) -> Result<MmqTma> {
        env::choice(MMQ_TMA_VAR, v, &Self::NAMES)
    }

    /// The gate/up product's maps (`MmqParams::wmap0`, `wmap1`) for the narrow kernels or the
    /// others, or zeros.
    pub fn gate_up(self, w: &LayerPtrs, narrow: bool) -> (u64, u64) {
        match (self, narrow) {
            (MmqTma::Auto, false) => (w.gate_map, w.up_map),
            (MmqTma::Auto, true) => (w.gate_map_narrow, w.up_map_narrow),
            (MmqTma::Never, _) => (0, 0),
        }
    }

    /// One line for reports: how the gate/up product's pipelined kernels copy their weight
    /// stages for this layer (`w`) on a module of `ptx_arch`, and why not by tensor copies where
    /// they do not.
    pub fn describe(self, w: &LayerPtrs, ptx_arch: u32) -> String {
        let pieces = "16-byte cp.async pieces";
        if self == MmqTma::Never {
            format!("weight copies: {pieces} ({MMQ_TMA_VAR}=never)")
        } else if w.gate_map != 0 || w.gate_map_narrow != 0 {
            let which = match (w.gate_map != 0, w.gate_map_narrow != 0) {
                (true, true) => {
                    "the gate/up kernels with the SwiGLU epilogue and the narrow one without it"
                }
                (true, false) => "the gate/up kernels with the SwiGLU epilogue",
                _ => "the narrow gate/up kernel without the SwiGLU epilogue",
            };
            format!(
                "weight copies: tensor copies (cp.async.bulk.tensor) in {which}; 16-byte \
                 cp.async pieces in the others"
            )
        } else if ptx_arch < 90 {
            format!(
                "weight copies: {pieces} (tensor copies need the sm_90 module; this is \
                 sm_{ptx_arch})"
            )
        } else {
            format!(
                "weight copies: {pieces} (gate/up rows of {} bytes: tensor copies need rows and \
                 expert strides of whole 16-byte pieces, experts of whole 32-row boxes)",
                w.gu_row_bytes
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_copies_from_their_variable() {
        assert_eq!(MmqTma::parse(None).unwrap(), MmqTma::Auto);
        assert_eq!(MmqTma::parse(Some("auto")).unwrap(), MmqTma::Auto);
        assert_eq!(MmqTma::parse(Some("never")).unwrap(), MmqTma::Never);
        assert_eq!(MmqTma::default(), MmqTma::Auto);
        let e = MmqTma::parse(Some("always")).unwrap_err().to_string();
        assert!(e.contains("MOE_MMQ_TMA") && e.contains("always"), "{e}");
    }

    #[test]
    fn the_report_line_says_why_not() {
        let w = LayerPtrs {
            gate: 1 << 20,
            up: 0,
            gu_expert_bytes: 1280 * 660,
            gu_row_bytes: 660,
            down: 1 << 30,
            down_expert_bytes: 2560 * 180,
            down_row_bytes: 180,
            merged: true,
            gate_map: 0,
            up_map: 0,
            gate_map_narrow: 0,
            up_map_narrow: 0,
        };
        let line = MmqTma::Auto.describe(&w, 90);
        assert!(
            line.contains("660 bytes") && line.contains("pieces"),
            "{line}"
        );
        let line = MmqTma::Auto.describe(&w, 80);
        assert!(line.contains("sm_80"), "{line}");
        let with = LayerPtrs {
            gate_map: 1 << 12,
            gate_map_narrow: 1 << 13,
            ..w
        };
        let line = MmqTma::Auto.describe(&with, 90);
        assert!(
            line.contains("tensor copies (cp.async.bulk.tensor)") && line.contains("narrow"),
            "{line}"
        );
        let wide_only = LayerPtrs {
            gate_map_narrow: 0,
            ..with
        };
        let line = MmqTma::Auto.describe(&wide_only, 90);
        assert!(
            line.contains("epilogue") && !line.contains("narrow"),
            "{line}"
        );
        assert!(
            MmqTma::Never
                .describe(&with, 90)
                .contains("MOE_MMQ_TMA=never")
        );
    }
}
