//! The per-group MMQ products' limits (gpu/src/moe/mmq/): one CTA per up to 64 rows of an
//! expert and 128 output features. Two kernels give the same bytes: the classic one (load,
//! barrier, multiply, barrier; 31 KB of shared memory, every tensor-core GPU) and the pipelined
//! one (`moe_mmq_pipe_<type>`: `cp.async` copies 1-2 K steps ahead and double-buffered decode,
//! up to 113 KB), run wherever its shared memory fits. The plan that runs them is the split plan (split.rs).

use cudarc::driver::sys::CUfunction_attribute as FnAttr;
use gpu::layout::{MMQ_ROWS, MMQ_SMEM_BYTES, MmqPipeSmem, WType};

use super::check_product;
use crate::device::{DeviceLimits, FormatKernels};
use crate::error::{DriverOp, Result};
use crate::problem::MoeShape;

/// Environment variable that keeps the classic MMQ kernels (`1`) where the pipelined ones fit
/// (for comparisons; the bytes are the same).
pub const MMQ_CLASSIC_VAR: &str = "MOE_MMQ_CLASSIC";

/// Why the MMQ path cannot run this shape, if it cannot.
pub fn eligible(s: &MoeShape) -> Result<()> {
    check_product("moe_gate_up_mmq", 2 * s.ffn, s.hidden, MMQ_ROWS)?;
    check_product("moe_down_mmq", s.hidden, s.ffn, MMQ_ROWS)
}

/// Which MMQ kernel runs a product of weight type `w`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmqKernel {
    Classic,
    /// The pipelined kernel, with its shared-memory bytes.
    Pipe {
        smem: usize,
    },
}

impl MmqKernel {
    /// The pipelined kernel where its layout has a copy lead (`gpu::layout::MmqPipeSmem`; every
    /// type has one today) and its shared memory fits one CTA on this device (and
    /// MOE_MMQ_CLASSIC is not 1), else the classic one.
    pub fn choose(w: WType, dev: &DeviceLimits) -> MmqKernel {
        let classic = std::env::var(MMQ_CLASSIC_VAR).is_ok_and(|v| v == "1");
        let sm = MmqPipeSmem::new(w);
        let smem = sm.total;
        if !classic && sm.lead > 0 && smem <= dev.max_smem_optin as usize {
            MmqKernel::Pipe { smem }
        } else {
            MmqKernel::Classic
        }
    }

    pub fn smem(self) -> usize {
        match self {
            MmqKernel::Classic => MMQ_SMEM_BYTES,
            MmqKernel::Pipe { smem } => smem,
        }
    }

    /// Opts the pipelined kernel into its shared memory (the classic one needs no opt-in).
    pub fn prepare(self, k: &FormatKernels) -> Result<()> {
        if let MmqKernel::Pipe { smem } = self {
            k.mmq_pipe()?
                .0
                .set_attribute(
                    FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    smem as i32,
                )
                .op("cuFuncSetAttribute (pipelined MMQ kernel shared memory)")?;
        }
        Ok(())
    }

    pub fn name(self) -> &'static str {
        match self {
            MmqKernel::Classic => "classic",
            MmqKernel::Pipe { .. } => "pipelined",
        }
    }
}
