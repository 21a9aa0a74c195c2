//! The kernel table: the kernels of the loaded PTX text in [`Kernels`], and the names the host
//! expects of each module ([`kernel_names`], [`kernel_names_in`]). The shared stages' kernels
//! are loaded when the table is built; the per-format ones (`format.rs`), most of the text, on
//! first use, each from a module of its own (`source.rs`).

use std::sync::Arc;

use cudarc::driver::CudaFunction;
use gpu::layout::WType;

use crate::error::{Error, Result};
use crate::ptx;

mod format;
mod source;
pub use format::{BULK_KERNELS, FORMAT_KERNELS, FormatKernels, MMA_KERNELS, format_kernel_names};
use format::{FORMAT_KERNEL_NAMES, load_formats};
pub use source::KernelSource;

macro_rules! kernels {
    ($($name:ident),* $(,)?) => {
        /// The kernels of the module: the shared stages by name (in every module, loaded when
        /// the table is built), the per-format kernels in `formats` (from gpu's format list;
        /// each checked to be in the text then, and loaded on first use).
        pub struct Kernels {
            $(pub $name: CudaFunction,)*
            formats: Vec<FormatKernels>,
            src: Arc<KernelSource>,
        }
        /// Names of the kernels not tied to a weight format.
        const COMMON_KERNEL_NAMES: &[&str] = &[$(stringify!($name)),*];
        impl Kernels {
            /// The kernels of `src`, the PTX of target `ptx_arch`.
            pub(super) fn load(src: &Arc<KernelSource>, ptx_arch: u32) -> Result<Self> {
                Ok(Kernels {
                    $($name: src.load(stringify!($name))?,)*
                    formats: load_formats(src, ptx_arch)?,
                    src: src.clone(),
                })
            }
        }
    };
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
    moe_scatter_gather,
    moe_scatter_one,
    moe_expert_tiles,
    moe_combine,
    moe_hold,
    probe_params_echo,
    probe_ggml_q8_1,
    probe_read_bandwidth,
    probe_f16_to_f32,
    probe_f16_scale_step,
);

/// Names of every kernel the host may expect in a PTX module (the union over the modules).
pub fn kernel_names() -> Vec<&'static str> {
    COMMON_KERNEL_NAMES
        .iter()
        .chain(FORMAT_KERNEL_NAMES)
        .copied()
        .collect()
}

/// Names of the kernels the module of PTX target `arch` holds and the host resolves from it:
/// all of [`kernel_names`] from sm_90 on, all but the bulk-copy ones (the last [`BULK_KERNELS`]
/// of each format's: the resident, tensor-copy and warp-specialized MMQ ones) from sm_75, and below that neither those nor the MMQ and fused ones
/// (tests/tests/ptx.rs checks each module has exactly these of [`kernel_names`]).
pub fn kernel_names_in(arch: u32) -> Vec<&'static str> {
    let skip = if ptx::has_mma(arch) { 0 } else { MMA_KERNELS };
    let end = FORMAT_KERNELS - if ptx::has_bulk(arch) { 0 } else { BULK_KERNELS };
    COMMON_KERNEL_NAMES
        .iter()
        .chain(
            FORMAT_KERNEL_NAMES
                .chunks(FORMAT_KERNELS)
                .flat_map(|row| &row[skip..end]),
        )
        .copied()
        .collect()
}

impl Kernels {
    /// What has been loaded so far, in a line for reports (`KernelSource::summary`).
    pub fn load_summary(&self) -> String {
        self.src.summary()
    }

    /// The kernels of weight format `w`.
    pub fn format(&self, w: WType) -> Result<&FormatKernels> {
        self.formats
            .iter()
            .find(|f| f.wtype == w)
            .ok_or(Error::MissingKernel(format_kernel_names(w)[0]))
    }
}
