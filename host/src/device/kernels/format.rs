//! The kernels of one weight format ([`FormatKernels`]): their names from gpu's format list
//! (`gpu::for_each_format!`, [`format_kernel_names`]), checked against the module's text, each
//! loaded on first use (`source::Lazy`), and reached through accessors that say which modules
//! hold them.

use std::sync::Arc;

use cudarc::driver::CudaFunction;
use gpu::layout::WType;

use super::source::{KernelSource, Lazy};
use crate::error::{Error, Result};
use crate::ptx;

/// The kernels of one weight format (a row of `gpu::for_each_format!`). The weight-stationary
/// ones are in every module; the tensor-core ones (MMQ and fused, `mma.sync`) only in the
/// modules of [`ptx::MMA_MIN_ARCH`] and newer, so they are reached through accessors that say
/// when the loaded module (sm_60) has none. Each is loaded the first time an accessor returns
/// it (a driver error then is the accessor's).
pub struct FormatKernels {
    pub wtype: WType,
    /// `moe_gate_up_<wtype>_mmq`
    gate_up_mmq: Option<Lazy>,
    /// `moe_down_<wtype>_mmq`
    down_mmq: Option<Lazy>,
    /// `moe_experts_<wtype>_fused` (this type as gate/up, 32-row tiles; the down type is a
    /// parameter)
    fused: Option<Lazy>,
    /// `moe_experts_<wtype>_fused_wide` (64-row tiles)
    fused_wide: Option<Lazy>,
    /// `moe_experts_<wtype>_fused_sd`, `moe_experts_<wtype>_fused_wide_sd`: both in the Q2_0
    /// shared-d numerics (`Numerics::Q2_0SharedD`)
    fused_sd: [Option<Lazy>; 2],
    /// `moe_mmq_pipe_<wtype>`: the pipelined MMQ product (either product)
    mmq_pipe: Option<Lazy>,
    /// `moe_mmq_narrow_<wtype>`: its narrow shape (16-row tiles)
    mmq_narrow: Option<Lazy>,
    /// `moe_mmq_resident_<wtype>`: the narrow shape's resident form (sm_90 modules only,
    /// `ptx::has_bulk`)
    mmq_resident: Option<Lazy>,
    /// `moe_mmq_narrow_tma_<wtype>`: the narrow shape built with tensor copies only (sm_90
    /// modules only)
    mmq_narrow_tma: Option<Lazy>,
    /// `moe_mmq_flat_ws_<wtype>`: the flat shape warp specialized (sm_90 modules only)
    mmq_flat_ws: Option<Lazy>,
    /// `moe_mmq_pipe_swiglu_<wtype>`, `moe_mmq_narrow_swiglu_<wtype>`: both as the gate/up
    /// product with the SwiGLU + q8_1 epilogue (H out instead of gate and up)
    mmq_swiglu: [Option<Lazy>; 2],
    /// `moe_mmq_flat_<wtype>` (the flat shape: 64 weight rows x 128 columns) and
    /// `moe_mmq_flat_swiglu_<wtype>` (with the SwiGLU + q8_1 epilogue)
    mmq_flat: [Option<Lazy>; 2],
    /// `moe_ws_<wtype>_c16`, `_c32`, `_c64`: the weight-stationary product for each tier of
    /// `gpu::layout::WS_COLS` (either product).
    ws: [Lazy; 3],
    /// `moe_ws_<wtype>_c16_fast`, `_c32_fast` (WS_FAST), for the tiers of
    /// `gpu::layout::WS_FAST_COLS`.
    ws_fast: [Lazy; 2],
    /// The names, in that order (for errors).
    pub names: [&'static str; FORMAT_KERNELS],
    /// The PTX target of the module they were resolved from.
    ptx_arch: u32,
    /// Where they are loaded from.
    src: Arc<KernelSource>,
}

/// Kernels per weight format.
pub const FORMAT_KERNELS: usize = 20;
/// The last `BULK_KERNELS` of a format's kernels (the narrow MMQ product's resident form, its
/// form with tensor copies and the flat product warp specialized) are in the modules with bulk
/// copies only (`ptx::has_bulk`: sm_90).
pub const BULK_KERNELS: usize = 3;
/// The first `MMA_KERNELS` of a format's kernels (`format_kernel_names`) are its tensor-core
/// ones (MMQ gate/up and down, fused, fused_wide, the pipelined MMQ, wide and narrow, both
/// with the SwiGLU epilogue, the flat one with and without it, and the fused ones in the Q2_0
/// shared-d numerics), absent below [`ptx::MMA_MIN_ARCH`].
pub const MMA_KERNELS: usize = 12;

impl FormatKernels {
    /// `moe_gate_up_<wtype>_mmq`; `Error::Unsupported` when the loaded module has none.
    pub fn gate_up_mmq(&self) -> Result<&CudaFunction> {
        self.tensor_core(&self.gate_up_mmq, 0)
    }

    /// `moe_down_<wtype>_mmq`; `Error::Unsupported` when the loaded module has none.
    pub fn down_mmq(&self) -> Result<&CudaFunction> {
        self.tensor_core(&self.down_mmq, 1)
    }

    /// The fused kernel of a width (`wide`: 64-row tiles) and numerics (`shared_d`: the Q2_0
    /// shared-d variant), with its name; `Error::Unsupported` when the loaded module has none.
    pub fn fused_kernel(
        &self,
        wide: bool,
        shared_d: bool,
    ) -> Result<(&CudaFunction, &'static str)> {
        match (wide, shared_d) {
            (false, false) => self.named(&self.fused, 2),
            (true, false) => self.named(&self.fused_wide, 3),
            (w, true) => self.named(&self.fused_sd[w as usize], 10 + w as usize),
        }
    }

    /// `moe_mmq_pipe_<wtype>` with its name; `Error::Unsupported` when the loaded module has
    /// none.
    pub fn mmq_pipe(&self) -> Result<(&CudaFunction, &'static str)> {
        self.named(&self.mmq_pipe, 4)
    }

    /// `moe_mmq_narrow_<wtype>` with its name; `Error::Unsupported` when the loaded module has
    /// none.
    pub fn mmq_narrow(&self) -> Result<(&CudaFunction, &'static str)> {
        self.named(&self.mmq_narrow, 5)
    }

    /// `moe_mmq_resident_<wtype>` with its name; `Error::Unsupported` when the loaded module has
    /// none (below sm_90: `ptx::has_bulk`).
    pub fn mmq_resident(&self) -> Result<(&CudaFunction, &'static str)> {
        self.bulk(
            &self.mmq_resident,
            FORMAT_KERNELS - BULK_KERNELS,
            "the resident form needs bulk copies",
        )
    }

    /// `moe_mmq_narrow_tma_<wtype>` with its name; `Error::Unsupported` when the loaded module
    /// has none (below sm_90: `ptx::has_bulk`).
    pub fn mmq_narrow_tma(&self) -> Result<(&CudaFunction, &'static str)> {
        self.bulk(
            &self.mmq_narrow_tma,
            FORMAT_KERNELS - 2,
            "tensor copies need bulk copies",
        )
    }

    /// `moe_mmq_flat_ws_<wtype>` with its name; `Error::Unsupported` when the loaded module has
    /// none (below sm_90: `ptx::has_bulk`).
    pub fn mmq_flat_ws(&self) -> Result<(&CudaFunction, &'static str)> {
        self.bulk(
            &self.mmq_flat_ws,
            FORMAT_KERNELS - 1,
            "the warp-specialized flat kernel needs transaction barriers",
        )
    }

    /// Bulk-copy kernel `f` (name slot `i`; `what` it is, for the error) with its name.
    fn bulk<'a>(
        &'a self,
        f: &'a Option<Lazy>,
        i: usize,
        what: &str,
    ) -> Result<(&'a CudaFunction, &'static str)> {
        let name = self.names[i];
        let f = f.as_ref().ok_or_else(|| {
            Error::Unsupported(format!(
                "kernel `{name}` is not in the loaded PTX module (sm_{}): {what} (sm_90)",
                self.ptx_arch
            ))
        })?;
        Ok((f.get(&self.src)?, name))
    }

    /// The gate/up product with the SwiGLU + q8_1 epilogue, wide (`moe_mmq_pipe_swiglu_<wtype>`)
    /// or narrow (`moe_mmq_narrow_swiglu_<wtype>`), with its name; `Error::Unsupported` when
    /// the loaded module has none.
    pub fn mmq_swiglu(&self, narrow: bool) -> Result<(&CudaFunction, &'static str)> {
        let i = narrow as usize;
        self.named(&self.mmq_swiglu[i], 6 + i)
    }

    /// The flat pipelined MMQ product (`moe_mmq_flat_<wtype>`), or with `swiglu` its gate/up
    /// form with the SwiGLU + q8_1 epilogue (`moe_mmq_flat_swiglu_<wtype>`), with its name;
    /// `Error::Unsupported` when the loaded module has none.
    pub fn mmq_flat(&self, swiglu: bool) -> Result<(&CudaFunction, &'static str)> {
        let i = swiglu as usize;
        self.named(&self.mmq_flat[i], 8 + i)
    }

    /// The weight-stationary kernel of tier `tier` (index into `gpu::layout::WS_COLS`), or its
    /// `_fast` form where `fast` is `Some(i)` (index into `gpu::layout::WS_FAST_COLS`), with its
    /// name.
    pub fn ws_kernel(
        &self,
        tier: usize,
        fast: Option<usize>,
    ) -> Result<(&CudaFunction, &'static str)> {
        const WS: usize = MMA_KERNELS;
        Ok(match fast {
            Some(f) => (
                self.ws_fast[f].get(&self.src)?,
                self.names[WS + self.ws.len() + f],
            ),
            None => (self.ws[tier].get(&self.src)?, self.names[WS + tier]),
        })
    }

    /// Tensor-core kernel `f` (name slot `i` of `format_kernel_names`) with its name.
    fn named<'a>(
        &'a self,
        f: &'a Option<Lazy>,
        i: usize,
    ) -> Result<(&'a CudaFunction, &'static str)> {
        Ok((self.tensor_core(f, i)?, self.names[i]))
    }

    fn tensor_core<'a>(&'a self, f: &'a Option<Lazy>, i: usize) -> Result<&'a CudaFunction> {
        f.as_ref()
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "kernel `{}` is not in the loaded PTX module (sm_{}): the MMQ and fused \
                     kernels need tensor cores (sm_{}+); that module holds only the \
                     weight-stationary path",
                    self.names[i],
                    self.ptx_arch,
                    ptx::MMA_MIN_ARCH
                ))
            })?
            .get(&self.src)
    }
}

macro_rules! format_table {
    ($(($w:ident, $b:ident, $gate_up:ident, $down:ident, $fused:ident, $wide:ident,
        $pipe:ident, $narrow:ident, $pipe_sw:ident, $narrow_sw:ident, $flat:ident,
        $flat_sw:ident, $c16:ident, $c32:ident, $c64:ident, $fast16:ident, $fast32:ident, $resident:ident,
        $narrow_tma:ident, $fused_sd:ident, $wide_sd:ident, $flat_ws:ident)),* $(,)?) => {
        /// Names of the per-format kernels, in list order.
        pub(super) const FORMAT_KERNEL_NAMES: &[&str] = &[$(
            stringify!($gate_up), stringify!($down), stringify!($fused), stringify!($wide),
            stringify!($pipe), stringify!($narrow), stringify!($pipe_sw), stringify!($narrow_sw),
            stringify!($flat), stringify!($flat_sw), stringify!($fused_sd), stringify!($wide_sd),
            stringify!($c16), stringify!($c32), stringify!($c64),
            stringify!($fast16),
            stringify!($fast32),
            stringify!($resident), stringify!($narrow_tma), stringify!($flat_ws)
        ),*];

        /// The kernel names of format `w` (exhaustive: a type without a row does not compile).
        pub const fn format_kernel_names(w: WType) -> [&'static str; FORMAT_KERNELS] {
            match w {
                $(WType::$w => [
                    stringify!($gate_up), stringify!($down), stringify!($fused), stringify!($wide),
                    stringify!($pipe), stringify!($narrow), stringify!($pipe_sw),
                    stringify!($narrow_sw), stringify!($flat), stringify!($flat_sw),
                    stringify!($fused_sd), stringify!($wide_sd),
                    stringify!($c16), stringify!($c32),
                    stringify!($c64),
                    stringify!($fast16), stringify!($fast32), stringify!($resident),
                    stringify!($narrow_tma), stringify!($flat_ws)
                ],)*
            }
        }

        pub(super) fn load_formats(
            src: &Arc<KernelSource>,
            ptx_arch: u32,
        ) -> Result<Vec<FormatKernels>> {
            let load = |name| Lazy::new(src, name);
            // Absent from a module without tensor-core kernels; required in every other.
            let mma = |name| -> Result<Option<Lazy>> {
                if ptx::has_mma(ptx_arch) {
                    load(name).map(Some)
                } else {
                    Ok(None)
                }
            };
            // Only in the modules with bulk copies.
            let bulk = |name| -> Result<Option<Lazy>> {
                if ptx::has_bulk(ptx_arch) {
                    load(name).map(Some)
                } else {
                    Ok(None)
                }
            };
            Ok(vec![$(FormatKernels {
                wtype: WType::$w,
                gate_up_mmq: mma(stringify!($gate_up))?,
                down_mmq: mma(stringify!($down))?,
                fused: mma(stringify!($fused))?,
                fused_wide: mma(stringify!($wide))?,
                fused_sd: [mma(stringify!($fused_sd))?, mma(stringify!($wide_sd))?],
                mmq_pipe: mma(stringify!($pipe))?,
                mmq_narrow: mma(stringify!($narrow))?,
                mmq_resident: bulk(stringify!($resident))?,
                mmq_narrow_tma: bulk(stringify!($narrow_tma))?,
                mmq_flat_ws: bulk(stringify!($flat_ws))?,
                mmq_swiglu: [mma(stringify!($pipe_sw))?, mma(stringify!($narrow_sw))?],
                mmq_flat: [mma(stringify!($flat))?, mma(stringify!($flat_sw))?],
                ws: [
                    load(stringify!($c16))?,
                    load(stringify!($c32))?,
                    load(stringify!($c64))?,
                ],
                ws_fast: [
                    load(stringify!($fast16))?,
                    load(stringify!($fast32))?,
                ],
                names: format_kernel_names(WType::$w),
                ptx_arch,
                src: src.clone(),
            }),*])
        }
    };
}

gpu::for_each_format!(format_table);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_slots_follow_the_format_list() {
        // `tensor_core` and `ws_kernel` index the names by these slots.
        let n = format_kernel_names(WType::Q2_0);
        assert_eq!(
            &n[..MMA_KERNELS],
            [
                "moe_gate_up_q2_0_mmq",
                "moe_down_q2_0_mmq",
                "moe_experts_q2_0_fused",
                "moe_experts_q2_0_fused_wide",
                "moe_mmq_pipe_q2_0",
                "moe_mmq_narrow_q2_0",
                "moe_mmq_pipe_swiglu_q2_0",
                "moe_mmq_narrow_swiglu_q2_0",
                "moe_mmq_flat_q2_0",
                "moe_mmq_flat_swiglu_q2_0",
                "moe_experts_q2_0_fused_sd",
                "moe_experts_q2_0_fused_wide_sd"
            ]
        );
        assert_eq!(
            &n[MMA_KERNELS..],
            [
                "moe_ws_q2_0_c16",
                "moe_ws_q2_0_c32",
                "moe_ws_q2_0_c64",
                "moe_ws_q2_0_c16_fast",
                "moe_ws_q2_0_c32_fast",
                "moe_mmq_resident_q2_0",
                "moe_mmq_narrow_tma_q2_0",
                "moe_mmq_flat_ws_q2_0"
            ]
        );
    }
}
