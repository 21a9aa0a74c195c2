//! The per-group MMQ products' limits and kernels (gpu/src/moe/mmq/): one CTA per 128 output
//! features and up to 64 rows of an expert. Two kernels give the same bytes: the classic one
//! (load, barrier, multiply, barrier; 31 KB of shared memory, every tensor-core GPU) and the
//! pipelined one (`moe_mmq_pipe_<type>`: `cp.async` copies 1-2 K steps ahead and double-buffered
//! decode, up to 113 KB), run wherever its shared memory fits. `MOE_MMQ_KERNEL` (or a plan's
//! [`MmqChoice`]) forces one. The plan that runs them is the split plan (split.rs).

use cudarc::driver::CudaFunction;
use cudarc::driver::sys::CUfunction_attribute as FnAttr;
use gpu::layout::{MMQ_ROWS, MMQ_SMEM_BYTES, MmqPipeSmem, WType};

use super::check_product;
use crate::device::{DeviceLimits, FormatKernels};
use crate::error::{DriverOp, Error, Result};
use crate::problem::MoeShape;

/// Environment variable that forces the MMQ kernel: `classic` or `pipelined`; `auto` or unset
/// lets the plan choose. Both give the same bytes.
pub const MMQ_KERNEL_VAR: &str = "MOE_MMQ_KERNEL";

/// Why the MMQ path cannot run this shape, if it cannot.
pub fn eligible(s: &MoeShape) -> Result<()> {
    check_product("moe_gate_up_mmq", 2 * s.ffn, s.hidden, MMQ_ROWS)?;
    check_product("moe_down_mmq", s.hidden, s.ffn, MMQ_ROWS)
}

/// Which MMQ kernel a plan runs: its choice (`Auto`: the pipelined one where it fits), or a
/// forced one (tests reach the classic kernel this way on GPUs where the pipelined one fits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MmqChoice {
    #[default]
    Auto,
    Classic,
    Pipelined,
}

impl MmqChoice {
    pub const ALL: [MmqChoice; 3] = [MmqChoice::Auto, MmqChoice::Classic, MmqChoice::Pipelined];

    pub fn name(self) -> &'static str {
        match self {
            MmqChoice::Auto => "auto",
            MmqChoice::Classic => "classic",
            MmqChoice::Pipelined => "pipelined",
        }
    }

    pub fn parse(s: &str) -> Result<MmqChoice> {
        Self::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "unknown MMQ kernel `{s}` (expected auto, classic or pipelined)"
                ))
            })
    }

    /// From `MOE_MMQ_KERNEL` (unset: `Auto`); an unknown value is an error, not ignored.
    pub fn from_env() -> Result<MmqChoice> {
        match std::env::var(MMQ_KERNEL_VAR) {
            Ok(v) => Self::parse(&v),
            Err(_) => Ok(MmqChoice::Auto),
        }
    }
}

/// The MMQ kernel of one product.
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
    /// type has one today) and its shared memory fits one CTA on this device, unless `choice`
    /// is `Classic`; else the classic one (also when `Pipelined` was asked but cannot run).
    pub fn choose(w: WType, dev: &DeviceLimits, choice: MmqChoice) -> MmqKernel {
        let sm = MmqPipeSmem::new(w);
        let smem = sm.total;
        if choice != MmqChoice::Classic && sm.lead > 0 && smem <= dev.max_smem_optin as usize {
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

    /// The kernel of product `which` (0 gate/up, 1 down) in `k`, with its name.
    pub fn function(
        self,
        k: &FormatKernels,
        which: usize,
    ) -> Result<(&CudaFunction, &'static str)> {
        match self {
            MmqKernel::Pipe { .. } => k.mmq_pipe(),
            MmqKernel::Classic => Ok(if which == 0 {
                (k.gate_up_mmq()?, k.names[0])
            } else {
                (k.down_mmq()?, k.names[1])
            }),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            MmqKernel::Classic => "classic",
            MmqKernel::Pipe { .. } => "pipelined",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(max_smem_optin: u32) -> DeviceLimits {
        DeviceLimits {
            max_smem_optin,
            ..DeviceLimits::default()
        }
    }

    #[test]
    fn pipelined_where_it_fits_unless_classic_is_forced() {
        let d = dev(227 * 1024);
        for w in WType::ALL {
            let smem = MmqPipeSmem::new(w).total;
            for c in [MmqChoice::Auto, MmqChoice::Pipelined] {
                assert_eq!(
                    MmqKernel::choose(w, &d, c),
                    MmqKernel::Pipe { smem },
                    "{w:?}"
                );
            }
            assert_eq!(
                MmqKernel::choose(w, &d, MmqChoice::Classic),
                MmqKernel::Classic
            );
            // Too little shared memory for the pipelined layout: classic, whatever was asked.
            let small = dev(smem as u32 - 1);
            for c in MmqChoice::ALL {
                assert_eq!(MmqKernel::choose(w, &small, c), MmqKernel::Classic, "{w:?}");
            }
        }
        assert_eq!(MmqKernel::Classic.smem(), MMQ_SMEM_BYTES);
    }

    #[test]
    fn choices_parse_by_name_and_refuse_others() {
        for c in MmqChoice::ALL {
            assert_eq!(MmqChoice::parse(c.name()).unwrap(), c);
        }
        let e = MmqChoice::parse("fast").unwrap_err().to_string();
        assert!(e.contains("unknown MMQ kernel `fast`"), "{e}");
    }
}
