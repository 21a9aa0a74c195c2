//! The per-group MMQ products' limits and kernels (gpu/src/moe/mmq/): one CTA per 128 output
//! features and up to 64 (narrow: 16) rows of an expert. Three kernels give the same bytes: the
//! classic one (load, barrier, multiply, barrier; 31 KB of shared memory, every tensor-core
//! GPU), the pipelined one (`moe_mmq_pipe_<type>`: `cp.async` copies 1-2 K steps ahead and
//! double-buffered decode, up to 113 KB), run wherever its shared memory fits, and its narrow
//! shape (`moe_mmq_narrow_<type>`: 16-row tiles, every warp on 16 weight rows, up to 75 KB and
//! 80 registers so that three CTAs share an SM), run where a layer has few rows per expert
//! ([`NARROW_MAX_ROWS_PER_EXPERT`]) and the type's narrow layout fits (every type decodes
//! into registers there, whatever the product's K: `MmqPipeShape::in_registers`). On sm_90 the
//! narrow kernel runs a product in its resident form where the tile's whole K fits
//! ([`MmqKernels::resident`]: every weight byte and activation block bulk-copied once in the
//! prologue). At many rows per expert a product takes the flat shape ([`MmqKernel::Flat`]: 64
//! features x 128 rows a CTA), each expert's last tile of at most 64 rows on the wide kernel
//! ([`MmqTails`]; bounds in mmq/bounds.rs). `MOE_MMQ_KERNEL` (or a plan's [`MmqChoice`]) forces
//! one. The plan that runs them is the split plan (split.rs).

use cudarc::driver::CudaFunction;
use cudarc::driver::sys::CUfunction_attribute as FnAttr;
use gpu::layout::{
    MMQ_COLS, MMQ_NARROW_COLS, MMQ_ROWS, MMQ_SMEM_BYTES, MmqParams, MmqPipeShape, MmqPipeSmem,
    MmqResidentSmem, WType,
};

use super::check_product;
use crate::device::{DeviceLimits, FormatKernels};
use crate::error::{DriverOp, Result};
use crate::problem::MoeShape;
use crate::ptx;

mod bounds;
mod choice;
mod flat_ws;
mod order;
mod tails;
mod tma;
mod weight_l2;
pub use bounds::{
    FLAT_MIN_ROWS_PER_EXPERT, FLAT_MIN_ROWS_TALL, FLAT_TAILS_MIN_ROWS, NARROW_MAX_ROWS_PER_EXPERT,
    NARROW_RESIDENT_MAX_ROWS_IQ4_NL, NARROW_RESIDENT_MAX_ROWS_PER_EXPERT, flat_pays,
    gate_up_narrow_max_rows, narrow_resident_max_rows,
};
pub use choice::{MMQ_KERNEL_VAR, MmqChoice};
pub use flat_ws::{MMQ_FLAT_WS_VAR, MmqFlatWs};
pub use order::{MMQ_ORDER_VAR, MmqOrder};
pub use tails::{MMQ_TAILS_VAR, MmqTails};
pub use tma::{MMQ_TMA_VAR, MmqTma};
pub use weight_l2::{MMQ_WEIGHT_L2_VAR, MmqWeightL2};

/// Why the MMQ path cannot run this shape, if it cannot.
pub fn eligible(s: &MoeShape) -> Result<()> {
    check_product("moe_gate_up_mmq", 2 * s.ffn, s.hidden, MMQ_ROWS)?;
    check_product("moe_down_mmq", s.hidden, s.ffn, MMQ_ROWS)
}

/// The MMQ kernel of one product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmqKernel {
    Classic,
    /// The pipelined kernel, with its shared-memory bytes.
    Pipe {
        smem: usize,
    },
    /// The pipelined kernel's narrow shape (16-row tiles), with its shared-memory bytes.
    Narrow {
        smem: usize,
    },
    /// The pipelined kernel's flat shape (64 weight rows x 128 columns a CTA), with its
    /// shared-memory bytes.
    Flat {
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

    /// The narrow kernel where the type's narrow layout has a copy lead and fits this device.
    pub fn narrow(w: WType, dev: &DeviceLimits) -> Option<MmqKernel> {
        let sm = MmqPipeSmem::of(w, MmqPipeShape::Narrow);
        (sm.lead > 0 && sm.total <= dev.max_smem_optin as usize)
            .then_some(MmqKernel::Narrow { smem: sm.total })
    }

    /// The flat kernel (64 weight rows x 128 columns a CTA, decoded through shared tiles) where
    /// the type's flat layout has a copy lead and fits this device: every type on the H200.
    pub fn flat(w: WType, dev: &DeviceLimits) -> Option<MmqKernel> {
        let sm = MmqPipeSmem::of(w, MmqPipeShape::Flat);
        (sm.lead > 0 && sm.total <= dev.max_smem_optin as usize)
            .then_some(MmqKernel::Flat { smem: sm.total })
    }

    /// Shared-memory bytes of the warp-specialized flat kernel of `w` (`moe_mmq_flat_ws_<type>`:
    /// the flat layout and its four barriers, `MmqPipeSmem::ws_total`).
    pub fn flat_ws_smem(w: WType) -> usize {
        MmqPipeSmem::of(w, MmqPipeShape::Flat).ws_total()
    }

    pub fn smem(self) -> usize {
        match self {
            MmqKernel::Classic => MMQ_SMEM_BYTES,
            MmqKernel::Pipe { smem } | MmqKernel::Narrow { smem } | MmqKernel::Flat { smem } => {
                smem
            }
        }
    }

    /// The most activation rows of one tile this kernel takes.
    pub fn cols(self) -> usize {
        match self {
            MmqKernel::Narrow { .. } => MMQ_NARROW_COLS,
            MmqKernel::Flat { .. } => MmqPipeShape::Flat.cols(),
            MmqKernel::Classic | MmqKernel::Pipe { .. } => MMQ_COLS,
        }
    }

    /// The weight rows (output features) of one CTA: its row tile.
    pub fn rows(self) -> usize {
        match self {
            MmqKernel::Flat { .. } => MmqPipeShape::Flat.rows(),
            _ => MMQ_ROWS,
        }
    }

    /// Opts a pipelined kernel, and its form with the SwiGLU epilogue, into its shared memory
    /// (the classic one needs no opt-in); with the narrow kernel, its resident form
    /// (`moe_mmq_resident_<type>`) into `resident` bytes where that is not 0
    /// (`MmqKernels::resident_smem`), and its instance with tensor copies
    /// (`moe_mmq_narrow_tma_<type>`) where the module has it; with the flat kernel, its warp
    /// specialized form (`moe_mmq_flat_ws_<type>`, [`MmqKernel::flat_ws_smem`]) where the module
    /// has it.
    pub fn prepare(self, k: &FormatKernels, resident: usize) -> Result<()> {
        let (fs, smem) = match self {
            MmqKernel::Classic => return Ok(()),
            MmqKernel::Pipe { smem } => ([k.mmq_pipe()?, k.mmq_swiglu(false)?], smem),
            MmqKernel::Narrow { smem } => ([k.mmq_narrow()?, k.mmq_swiglu(true)?], smem),
            MmqKernel::Flat { smem } => ([k.mmq_flat(false)?, k.mmq_flat(true)?], smem),
        };
        let opt_in = |f: &CudaFunction, smem: usize| {
            f.set_attribute(
                FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem as i32,
            )
            .op("cuFuncSetAttribute (pipelined MMQ kernel shared memory)")
        };
        for f in fs {
            opt_in(f.0, smem)?;
        }
        if matches!(self, MmqKernel::Narrow { .. }) {
            if resident > 0 {
                opt_in(k.mmq_resident()?.0, resident)?;
            }
            // Its instance with tensor copies (same layout) where the module has it.
            if let Ok((f, _)) = k.mmq_narrow_tma() {
                opt_in(f, smem)?;
            }
        }
        if matches!(self, MmqKernel::Flat { .. })
            && let Ok((f, _)) = k.mmq_flat_ws()
        {
            opt_in(f, Self::flat_ws_smem(k.wtype))?;
        }
        Ok(())
    }

    /// The gate/up kernel with the SwiGLU + q8_1 epilogue of this kernel's shape, with its name;
    /// `None` for the classic kernel, which has none (its gate/up output goes through
    /// `moe_swiglu_quant`).
    pub fn swiglu_function(
        self,
        k: &FormatKernels,
    ) -> Option<Result<(&CudaFunction, &'static str)>> {
        match self {
            MmqKernel::Classic => None,
            MmqKernel::Pipe { .. } => Some(k.mmq_swiglu(false)),
            MmqKernel::Narrow { .. } => Some(k.mmq_swiglu(true)),
            MmqKernel::Flat { .. } => Some(k.mmq_flat(true)),
        }
    }

    /// The kernel of product `which` (0 gate/up, 1 down) in `k`, with its name.
    pub fn function(
        self,
        k: &FormatKernels,
        which: usize,
    ) -> Result<(&CudaFunction, &'static str)> {
        match self {
            MmqKernel::Pipe { .. } => k.mmq_pipe(),
            MmqKernel::Narrow { .. } => k.mmq_narrow(),
            MmqKernel::Flat { .. } => k.mmq_flat(false),
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
            MmqKernel::Narrow { .. } => "narrow",
            MmqKernel::Flat { .. } => "flat",
        }
    }
}

/// The MMQ kernels of a plan's two products (gate/up, down): the wide ones, for runs with few
/// rows per expert the narrow kernel for each product whose layout fits, and for runs with many
/// the flat one for each product whose flat layout fits the device. Each product runs over a
/// tile list of its kernel's width (expert/mmq_lists.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmqKernels {
    wide: [MmqKernel; 2],
    narrow: Option<[MmqKernel; 2]>,
    /// Each product's flat kernel where its layout fits the device, else its wide one; `None`
    /// where neither product's fits or the choice excludes them.
    flat: Option<[MmqKernel; 2]>,
    choice: MmqChoice,
    /// The loaded module has the bulk copies (`ptx::has_bulk`) for the resident narrow form.
    bulk: bool,
    /// Under `MmqChoice::Auto`, the most rows per expert at which each product takes narrow
    /// tiles.
    narrow_max: [usize; 2],
    /// Each product's weight type and K.
    types: [WType; 2],
    ks: [usize; 2],
    /// The flat products' tails run on the wide kernel (`MmqTails::Wide`): flat tiles pay from
    /// fewer rows per expert ([`flat_pays`]).
    tails: bool,
}

/// Whether the narrow kernel can run a product of type `w` and K `k` in its resident form,
/// rows aside (`MmqKernels::resident` adds their alignment): a module with bulk copies, a choice
/// that allows it, and a resident layout for the type and K.
fn resident_form(bulk: bool, choice: MmqChoice, w: WType, k: usize) -> bool {
    bulk && choice != MmqChoice::NarrowStreamed && MmqResidentSmem::of(w, k).is_some()
}

impl MmqKernels {
    /// `types`: the weight type of each product; `ks`: its K (values per weight row);
    /// `gate_up_tma`: the gate/up product's narrow kernel copies by tensor copies (the layer's
    /// narrow maps: `DeviceLayer::has_narrow_gate_up_maps`). With bulk copies the gate/up
    /// product takes narrow tiles up to [`gate_up_narrow_max_rows`] of its type.
    pub fn new(
        types: [WType; 2],
        ks: [usize; 2],
        dev: &DeviceLimits,
        choice: MmqChoice,
        gate_up_tma: bool,
    ) -> MmqKernels {
        let wide = types.map(|w| MmqKernel::choose(w, dev, choice));
        let takes = match choice {
            MmqChoice::Auto | MmqChoice::Narrow | MmqChoice::NarrowStreamed => true,
            MmqChoice::Classic | MmqChoice::Pipelined | MmqChoice::Flat => false,
        };
        let n = [0, 1].map(|i| {
            MmqKernel::narrow(types[i], dev)
                .filter(|_| takes)
                .unwrap_or(wide[i])
        });
        let narrow = (n != wide).then_some(n);
        let takes_flat = matches!(choice, MmqChoice::Auto | MmqChoice::Flat);
        let f = [0, 1].map(|i| {
            MmqKernel::flat(types[i], dev)
                .filter(|_| takes_flat)
                .unwrap_or(wide[i])
        });
        let flat = (f != wide).then_some(f);
        let bulk = ptx::has_bulk(dev.ptx_arch);
        // Products the resident form can run (given aligned rows, as device buffers are).
        let narrow_max = [0, 1].map(|i| {
            if resident_form(bulk, choice, types[i], ks[i]) {
                narrow_resident_max_rows(types[i])
            } else if i == 0 && bulk {
                gate_up_narrow_max_rows(types[0], gate_up_tma)
            } else {
                NARROW_MAX_ROWS_PER_EXPERT
            }
        });
        MmqKernels {
            wide,
            narrow,
            flat,
            choice,
            bulk,
            narrow_max,
            types,
            ks,
            tails: false,
        }
    }

    /// Whether the flat products' tails run on the wide kernel (the plan's `MmqTails`; off
    /// until set), which moves [`MmqKernels::for_run`]'s bound of flat tiles. Never where a
    /// product's wide kernel is the classic one: a tail takes the SwiGLU epilogue where its flat
    /// product does, and the classic kernel has none.
    pub fn set_tails(&mut self, tails: MmqTails) {
        self.tails = tails == MmqTails::Wide && !self.wide.contains(&MmqKernel::Classic);
    }

    /// Whether the flat products' tails run on the wide kernel (`set_tails`): the flat lists
    /// leave them out.
    pub fn tails(&self) -> bool {
        self.tails
    }

    /// Whether `kernel` runs product `p` of weight type `w` in the narrow kernel's resident form
    /// (`moe_mmq_resident_<type>`, gpu/src/moe/mmq/pipe/resident.rs): the narrow kernel (not its
    /// SwiGLU form, which `swiglu` says), a module with bulk copies, the resident layout for
    /// the type and `p.k` (`MmqResidentSmem::of`), and each tile's 128 rows consecutive in one
    /// tensor and 16-byte aligned; not under `MmqChoice::NarrowStreamed`.
    pub fn resident(&self, kernel: MmqKernel, swiglu: bool, w: WType, p: &MmqParams) -> bool {
        let tensor_aligned = |base: u64| base.is_multiple_of(16);
        let one_tensor =
            p.n_split >= p.n || (p.n_split.is_multiple_of(MMQ_ROWS as u32) && tensor_aligned(p.w1));
        matches!(kernel, MmqKernel::Narrow { .. })
            && !swiglu
            && resident_form(self.bulk, self.choice, w, p.k as usize)
            && tensor_aligned(p.w0)
            && p.w_expert_bytes.is_multiple_of(16)
            && one_tensor
    }

    /// The most shared memory the narrow kernel of type `w` takes in its resident form, over
    /// the products of that type that may run it (0 if none: `MmqResidentSmem::total`).
    pub fn resident_smem(&self, w: WType) -> usize {
        (0..2)
            .filter(|&i| self.types[i] == w && resident_form(self.bulk, self.choice, w, self.ks[i]))
            .filter_map(|i| MmqResidentSmem::of(w, self.ks[i]))
            .map(|l| l.total)
            .max()
            .unwrap_or(0)
    }

    /// Each product's wide kernel (the pipelined one where it fits, else the classic one).
    pub fn wide(&self) -> [MmqKernel; 2] {
        self.wide
    }

    /// Every kernel a run may take, each product's in order (for `prepare`).
    pub fn all(&self) -> impl Iterator<Item = [MmqKernel; 2]> {
        std::iter::once(self.wide)
            .chain(self.narrow)
            .chain(self.flat)
    }

    /// The kernels of a run of `n_rows` rows over `n_experts` experts: each product's narrow
    /// kernel up to its bound of rows per expert (`NARROW_MAX_ROWS_PER_EXPERT`,
    /// `narrow_resident_max_rows` of its type where it runs resident, or
    /// `gate_up_narrow_max_rows` for the gate/up product on sm_90), or at every row count
    /// when narrow tiles are forced; its flat kernel where [`flat_pays`] for it, or at
    /// every row count when flat tiles are forced; else the wide one.
    pub fn for_run(&self, n_rows: usize, n_experts: usize) -> [MmqKernel; 2] {
        let forced = matches!(self.choice, MmqChoice::Narrow | MmqChoice::NarrowStreamed);
        [0, 1].map(|i| {
            if let Some(f) = self.flat
                && f[i] != self.wide[i]
                && (self.choice == MmqChoice::Flat
                    || flat_pays(self.types[i], i, n_rows, n_experts, self.tails))
            {
                return f[i];
            }
            match self.narrow {
                Some(n) if forced || n_rows <= self.narrow_max[i] * n_experts => n[i],
                _ => self.wide[i],
            }
        })
    }
}

#[cfg(test)]
mod tests;
