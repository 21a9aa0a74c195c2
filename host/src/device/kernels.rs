//! The kernel table: every kernel of the loaded PTX module resolved once into [`Kernels`], and
//! the names of the kernels the host expects ([`kernel_names`]).

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaModule};
use gpu::layout::WType;

use crate::error::{Error, Result};

macro_rules! kernels {
    ($($name:ident),* $(,)?) => {
        /// Every kernel of the module, resolved at startup: the shared stages by name, the
        /// per-format kernels in `formats` (from gpu's format list).
        pub struct Kernels {
            $(pub $name: CudaFunction,)*
            formats: Vec<FormatKernels>,
        }
        /// Names of the kernels not tied to a weight format.
        const COMMON_KERNEL_NAMES: &[&str] = &[$(stringify!($name)),*];
        impl Kernels {
            pub(super) fn load(module: &Arc<CudaModule>) -> Result<Self> {
                Ok(Kernels {
                    $($name: load(module, stringify!($name))?,)*
                    formats: load_formats(module)?,
                })
            }
        }
    };
}

fn load(module: &Arc<CudaModule>, name: &'static str) -> Result<CudaFunction> {
    module
        .load_function(name)
        .map_err(|_| Error::MissingKernel(name))
}

kernels!(
    moe_swiglu_quant,
    moe_swiglu_f32,
    moe_quantize_q8_1,
    moe_route,
    moe_scatter_count,
    moe_scatter_offsets,
    moe_scatter_place,
    moe_scatter_quantize,
    moe_combine,
    probe_params_echo,
    probe_ggml_q8_1,
    probe_read_bandwidth,
);

/// The kernels of one weight format (a row of `gpu::for_each_format!`).
pub struct FormatKernels {
    pub wtype: WType,
    /// `moe_gate_up_<wtype>_mmq`
    pub gate_up_mmq: CudaFunction,
    /// `moe_down_<wtype>_mmq`
    pub down_mmq: CudaFunction,
    /// `moe_experts_<wtype>_fused` (this type as gate/up, 32-row tiles; the down type is a
    /// parameter)
    pub fused: CudaFunction,
    /// `moe_experts_<wtype>_fused_wide` (64-row tiles)
    pub fused_wide: CudaFunction,
    /// `moe_ws_<wtype>_c16`, `_c32`, `_c64`: the weight-stationary product for each tier of
    /// `gpu::layout::WS_COLS` (either product).
    pub ws: [CudaFunction; 3],
    /// `moe_ws_<wtype>_c32_fast` (WS_FAST)
    pub ws_fast: CudaFunction,
    /// The names, in that order (for errors).
    pub names: [&'static str; FORMAT_KERNELS],
}

/// Kernels per weight format.
pub const FORMAT_KERNELS: usize = 8;

macro_rules! format_table {
    ($(($w:ident, $b:ident, $gate_up:ident, $down:ident, $fused:ident, $wide:ident,
        $c16:ident, $c32:ident, $c64:ident, $fast:ident)),* $(,)?) => {
        /// Names of the per-format kernels, in list order.
        const FORMAT_KERNEL_NAMES: &[&str] = &[$(
            stringify!($gate_up), stringify!($down), stringify!($fused), stringify!($wide),
            stringify!($c16), stringify!($c32), stringify!($c64), stringify!($fast)
        ),*];

        /// The kernel names of format `w` (exhaustive: a type without a row does not compile).
        pub const fn format_kernel_names(w: WType) -> [&'static str; FORMAT_KERNELS] {
            match w {
                $(WType::$w => [
                    stringify!($gate_up), stringify!($down), stringify!($fused), stringify!($wide),
                    stringify!($c16), stringify!($c32), stringify!($c64), stringify!($fast)
                ],)*
            }
        }

        fn load_formats(module: &Arc<CudaModule>) -> Result<Vec<FormatKernels>> {
            Ok(vec![$(FormatKernels {
                wtype: WType::$w,
                gate_up_mmq: load(module, stringify!($gate_up))?,
                down_mmq: load(module, stringify!($down))?,
                fused: load(module, stringify!($fused))?,
                fused_wide: load(module, stringify!($wide))?,
                ws: [
                    load(module, stringify!($c16))?,
                    load(module, stringify!($c32))?,
                    load(module, stringify!($c64))?,
                ],
                ws_fast: load(module, stringify!($fast))?,
                names: format_kernel_names(WType::$w),
            }),*])
        }
    };
}

gpu::for_each_format!(format_table);

/// Names of every kernel the host expects in the PTX (tests/tests/ptx.rs checks them).
pub fn kernel_names() -> Vec<&'static str> {
    COMMON_KERNEL_NAMES
        .iter()
        .chain(FORMAT_KERNEL_NAMES)
        .copied()
        .collect()
}

impl Kernels {
    /// The kernels of weight format `w`.
    pub fn format(&self, w: WType) -> Result<&FormatKernels> {
        self.formats
            .iter()
            .find(|f| f.wtype == w)
            .ok_or(Error::MissingKernel(format_kernel_names(w)[0]))
    }
}
