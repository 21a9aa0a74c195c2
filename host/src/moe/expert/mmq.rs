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
//! prologue). `MOE_MMQ_KERNEL` (or a plan's [`MmqChoice`]) forces one. The plan that runs them
//! is the split plan (split.rs).

use cudarc::driver::CudaFunction;
use cudarc::driver::sys::CUfunction_attribute as FnAttr;
use gpu::layout::{
    MMQ_COLS, MMQ_FLAT_COLS, MMQ_NARROW_COLS, MMQ_ROWS, MMQ_SMEM_BYTES, MmqParams, MmqPipeShape,
    MmqPipeSmem, MmqResidentSmem, WType,
};

use super::check_product;
use crate::device::{DeviceLimits, FormatKernels};
use crate::error::{DriverOp, Result};
use crate::problem::MoeShape;
use crate::ptx;

mod choice;
mod order;
mod tma;
pub use choice::{MMQ_KERNEL_VAR, MmqChoice};
pub use order::{MMQ_ORDER_VAR, MmqOrder};
pub use tma::{MMQ_TMA_VAR, MmqTma};

/// Why the MMQ path cannot run this shape, if it cannot.
pub fn eligible(s: &MoeShape) -> Result<()> {
    check_product("moe_gate_up_mmq", 2 * s.ffn, s.hidden, MMQ_ROWS)?;
    check_product("moe_down_mmq", s.hidden, s.ffn, MMQ_ROWS)
}

/// Runs with at most this many rows per expert on average (`n_rows / n_experts`) take narrow
/// tiles under `MmqChoice::Auto` (T = 512 at the reference shape: 10), for a streamed down
/// product and for the gate/up product below sm_90 (on sm_90 its type's
/// [`gate_up_narrow_max_rows`]). Above it an expert's rows span several narrow tiles, and each
/// decodes the expert's weights again.
pub const NARROW_MAX_ROWS_PER_EXPERT: usize = 12;

/// The same bound for a product whose narrow kernel runs in its resident form
/// ([`MmqKernels::resident`]: the tile's whole K copied once, no CTA barrier in its K loop).
/// Measured on the H200 (BENCHMARKS.md), the Q2_0 down product at the reference shape on
/// narrow resident tiles (four row tiles a CTA) against the wide kernel: 0.419 / 0.450 ms at
/// 40 rows per expert (T = 2,048), 0.513 / 0.498 at 50. IQ4_NL's down product takes
/// [`NARROW_RESIDENT_MAX_ROWS_IQ4_NL`].
pub const NARROW_RESIDENT_MAX_ROWS_PER_EXPERT: usize = 40;

/// The bound of rows per expert for the gate/up product of weight type `w` on a module with
/// bulk copies (sm_90, where the narrow kernel's K loop is warp-private), by tensor copies
/// (`tma`: `moe_mmq_narrow_tma_<type>`, where the layer has the narrow maps) or by pieces: each
/// narrow tile decodes the expert's rows again, so past some rows per expert the wide kernel
/// wins, and where depends on the type's decode. Measured on the H200 at the reference shape
/// (BENCHMARKS.md, the twenty-sixth session: the layer at 12.5, 15, 17.5, 20, 22.5, 25 and 30
/// rows per expert, narrow against wide): the bound is the last point at which narrow tiles
/// were faster, or the crossover between two points where they split.
pub fn gate_up_narrow_max_rows(w: WType, tma: bool) -> usize {
    match (w, tma) {
        // 25 rows: -3.8 %; 30: +0.8 %. By pieces -6 % still at 20 (not measured further).
        (WType::Q2_0, true) => 28,
        (WType::Q2_0, false) => 20,
        // 17.5 rows: -0.5 % (by pieces +0.4 %); 20: +4.6 %.
        (WType::Iq4Nl, true) => 18,
        (WType::Iq4Nl, false) => 17,
        // 12.5 rows: -12 %, 15: -1.5 %, 17.5: +10 %. By pieces +7 % at 12.5.
        (WType::Q8_0, true) => 15,
        (WType::Q8_0, false) => NARROW_MAX_ROWS_PER_EXPERT,
        // 12.5 rows: -10 %, 15: -1 %, 17.5: +8 %.
        (WType::Iq2Xxs, _) => 15,
        // 12.5 rows: -3 to -5 %; 15: +4 to +6 %.
        (WType::Iq2Xs | WType::Iq2S | WType::Iq3S, _) => 13,
        // 12.5 rows: -1 %; 15: +9 %.
        (WType::Iq3Xxs, _) => NARROW_MAX_ROWS_PER_EXPERT,
    }
}

/// [`NARROW_RESIDENT_MAX_ROWS_PER_EXPERT`] for IQ4_NL, whose wide kernel overtakes the resident
/// narrow one sooner (its rows take one weight buffer: `MmqResidentSmem::wbufs`). Measured on
/// the H200 (the down product at the reference shape, narrow resident / wide, ms): 0.446 /
/// 0.470 at 30 rows per expert, 0.564 / 0.520 at 40; the two meet near 33.
pub const NARROW_RESIDENT_MAX_ROWS_IQ4_NL: usize = 32;

/// A product whose type decodes through shared tiles (`MmqPipeShape::wide_of` wide: Q2_0,
/// IQ4_NL, IQ2_XXS, IQ2_XS, IQ2_S) takes the flat kernel (64 weight rows x 128 columns a CTA)
/// under `MmqChoice::Auto` from this many rows per expert on average, where an average
/// expert's last 128-column tile is at least half full ([`flat_pays`]). Measured on the H200
/// (BENCHMARKS.md; the reference shape, flat against wide, each product's stage), uniform
/// routing: 55 and 65 rows per expert slower, 70 to 120 faster (-2 to -9 %), 160 slower (32
/// columns in the last tile: Q2_0 gate/up +3 %, down +9 %), 200 and 240 faster (-4 to -9 %),
/// 280 slower (24 columns: the Q2_0 layer +2 %), 320 faster; skewed routing (lognormal sigma
/// 1.0), where many experts have few rows and a few many: 80 to 120 slower (Q2_0's down +6 to
/// +14 %, its gate/up up to +8 %), 200 even to faster (-4 %), 240 and 320 faster (-3 to -10 %).
/// So from 192, where both routings gain (128 + 64 columns: the last tile half full).
pub const FLAT_MIN_ROWS_PER_EXPERT: usize = 192;

/// A product whose type decodes into registers in its 64-column kernel (the tall shape: IQ3_S,
/// IQ3_XXS, Q8_0) takes the flat kernel from this many rows per expert on average, whatever
/// its last tile's fill: the tall kernel decodes each weight value once per 64 columns, the
/// flat one once per 128 through shared tiles. Measured on the H200 (BENCHMARKS.md; flat
/// against tall, each product's stage), uniform routing: 55 rows per expert slower (IQ3_S
/// gate/up +11 %, Q8_0 down +14 %), 65 to 320 faster (-5 to -24 %); skewed routing: 80 slower
/// (Q8_0 gate/up +6 %, IQ3_S's +1 %), 90 mixed (+4 %, -1 %), 100 even (+1 %, -3 %; Q8_0 down
/// -5 %), 120 to 320 faster (-2 to -24 %). So from 100.
pub const FLAT_MIN_ROWS_TALL: usize = 100;

/// Whether a product of type `w` takes flat tiles under `MmqChoice::Auto` for a run of `n_rows`
/// rows over `n_experts` experts: from [`FLAT_MIN_ROWS_TALL`] rows per expert on average for
/// the tall types, from [`FLAT_MIN_ROWS_PER_EXPERT`] for the others where the average expert's
/// last 128-column tile is at least half full.
pub fn flat_pays(w: WType, n_rows: usize, n_experts: usize) -> bool {
    let r = n_rows / n_experts.max(1);
    if MmqPipeShape::wide_of(w) == MmqPipeShape::Tall {
        return r >= FLAT_MIN_ROWS_TALL;
    }
    let last = r % MMQ_FLAT_COLS;
    r >= FLAT_MIN_ROWS_PER_EXPERT && (last == 0 || 2 * last >= MMQ_FLAT_COLS)
}

/// The bound of rows per expert up to which a product of type `w` takes narrow resident tiles.
pub const fn narrow_resident_max_rows(w: WType) -> usize {
    match w {
        WType::Iq4Nl => NARROW_RESIDENT_MAX_ROWS_IQ4_NL,
        _ => NARROW_RESIDENT_MAX_ROWS_PER_EXPERT,
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
    /// (`moe_mmq_narrow_tma_<type>`) where the module has it.
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
        }
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
    /// when narrow tiles are forced; its flat kernel where [`flat_pays`] for its type, or at
    /// every row count when flat tiles are forced; else the wide one.
    pub fn for_run(&self, n_rows: usize, n_experts: usize) -> [MmqKernel; 2] {
        let forced = matches!(self.choice, MmqChoice::Narrow | MmqChoice::NarrowStreamed);
        [0, 1].map(|i| {
            if let Some(f) = self.flat
                && f[i] != self.wide[i]
                && (self.choice == MmqChoice::Flat || flat_pays(self.types[i], n_rows, n_experts))
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
