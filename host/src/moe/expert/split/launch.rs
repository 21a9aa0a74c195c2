//! Queueing a split plan's stages (split.rs): each product's parameters, kernel, tile list and
//! launch, and `moe_swiglu_quant` between them.

use cudarc::driver::{CudaFunction, LaunchConfig};
use gpu::layout::{
    MMQ_ROWS, MMQ_THREADS, MMQ_WS_THREADS, MmqParams, MmqResidentSmem, WS_COLS, WS_ROWS,
    WS_THREADS, WType, resident_row_tiles, ws_smem_bytes,
};

use super::{Product, SplitPlan};
use crate::device::{Gpu, KArg, dptr};
use crate::error::{DriverOp, Result};
use crate::moe::expert::mmq::MmqKernel;
use crate::moe::expert::{ExpertIo, check_rows, ws};
use crate::moe::layer::DeviceLayer;
use crate::moe::swiglu_quant::SwigluQuantPlan;
use crate::problem::SwigluQuantShape;

impl SplitPlan {
    /// Queues the plan's stages for a prepared run (`ExpertPlan::launch`): the gate/up
    /// product, `moe_swiglu_quant` where the epilogue does not take it, the down product.
    pub(super) fn queue(
        &mut self,
        gpu: &Gpu,
        layer: &DeviceLayer,
        io: &ExpertIo,
        mark: &mut dyn FnMut(usize) -> Result<()>,
    ) -> Result<()> {
        let s = self.shape;
        check_rows("split path", io.n_rows, self.cap_rows)?;
        let st = &gpu.stream;
        let w = layer.ptrs(gpu);
        let epilogue = self.epilogue();
        let (func, name, tiles) = self.kernel(gpu, 0, s.gate_up_type)?;
        // With the epilogue the output is H's D4 blocks [ffn / 128][n_rows], as
        // moe_swiglu_quant writes them for the layer (no row stride, no padding chunks), and
        // out_stride H's chunk count.
        let (out, out_stride) = if epilogue {
            let chunks = SwigluQuantShape::layer(io.n_rows, s.ffn).out_chunks();
            (dptr(&self.hq, st), chunks as u32)
        } else {
            (dptr(&self.gu, st), 2 * s.ffn as u32)
        };
        // The narrow kernel takes the maps only without the epilogue (its instance with tensor
        // copies, `product`); the others only with it (copy/mod.rs's `tma_here`).
        let narrow = matches!(self.mmq_kernels[0], MmqKernel::Narrow { .. });
        let (wmap0, wmap1) = if narrow == epilogue {
            (0, 0)
        } else {
            self.mmq_tma.gate_up(&w, narrow)
        };
        let gu_p = MmqParams {
            w0: w.gate,
            w1: if w.merged { 0 } else { w.up },
            w_expert_bytes: w.gu_expert_bytes,
            x: io.xq,
            tiles,
            out,
            out_rows: 0,
            wmap0,
            wmap1,
            row_bytes: w.gu_row_bytes as u32,
            n_split: if w.merged {
                2 * s.ffn as u32
            } else {
                s.ffn as u32
            },
            n: 2 * s.ffn as u32,
            k: s.hidden as u32,
            n_cols_x: io.n_rows as u32,
            out_stride,
            resident: 0,
            order: self.mmq_order.param(),
            weight_l2: self.mmq_weight_l2.param(),
            _pad: 0,
        };
        let gu_p = self.with_resident(0, epilogue, s.gate_up_type, gu_p);
        // SAFETY: weights resident with the layer's shape (checked at upload); xq holds
        // hidden_padded / 128 chunks of n_rows blocks; the tiles cover rows < n_rows with at
        // most the kernel's width each; gu holds cap_rows >= n_rows rows of 2 ffn, hq
        // padded_k(ffn) / 128 chunks of cap_rows blocks (ffn a multiple of 128 for the
        // epilogue, as `epilogue` checks).
        unsafe { self.product(gpu, 0, self.products[0], func, name, gu_p)? };
        // SAFETY: as above; the tails' list covers the rows the flat one leaves out.
        unsafe { self.tails(gpu, 0, epilogue, gu_p)? };
        mark(0)?;
        if !epilogue {
            let sq = SwigluQuantShape::layer(io.n_rows, s.ffn);
            SwigluQuantPlan::new(&sq, s.down_type.id())?.launch(gpu, &self.gu, &mut self.hq)?;
            mark(1)?;
        }
        let (func, name, tiles) = self.kernel(gpu, 1, s.down_type)?;
        let dn_p = MmqParams {
            w0: w.down,
            w1: 0,
            w_expert_bytes: w.down_expert_bytes,
            x: dptr(&self.hq, st),
            tiles,
            out: io.dm,
            out_rows: io.row_dst,
            wmap0: 0,
            wmap1: 0,
            row_bytes: w.down_row_bytes as u32,
            n_split: s.hidden as u32,
            n: s.hidden as u32,
            k: s.ffn as u32,
            n_cols_x: io.n_rows as u32,
            out_stride: s.hidden as u32,
            resident: 0,
            order: self.mmq_order.param(),
            weight_l2: self.mmq_weight_l2.param(),
            _pad: 0,
        };
        let dn_p = self.with_resident(1, false, s.down_type, dn_p);
        // SAFETY: as for gate/up; hq holds padded(ffn) / 128 chunks of n_rows blocks;
        // row_dst maps each row to its (token, slot) row of dm.
        unsafe { self.product(gpu, 1, self.products[1], func, name, dn_p)? };
        // SAFETY: as for gate/up's tails.
        unsafe { self.tails(gpu, 1, false, dn_p)? };
        mark(if epilogue { 1 } else { 2 })
    }

    /// `p` with `resident` set where product `which` (type `w`; `swiglu`: its kernel has the
    /// SwiGLU epilogue) runs the narrow kernel's resident form (`MmqKernels::resident`): the
    /// row tiles each CTA runs (`gpu::layout::resident_row_tiles`), recorded with the form's
    /// shared memory for the launch and the plan's description.
    fn with_resident(
        &mut self,
        which: usize,
        swiglu: bool,
        w: WType,
        mut p: MmqParams,
    ) -> MmqParams {
        let layout = (self.products[which] == Product::Mmq
            && self.mmq.resident(self.mmq_kernels[which], swiglu, w, &p))
        .then(|| MmqResidentSmem::of(w, p.k as usize))
        .flatten();
        self.resident_smem[which] = layout.map_or(0, |l| l.total);
        p.resident = if layout.is_some() {
            resident_row_tiles(p.n as usize) as u32
        } else {
            0
        };
        p
    }

    /// Queues the wide kernel of product `which` over the tails its flat list leaves out, where
    /// it has them (`tails_at`); `p`: the flat launch's parameters, `swiglu`: whether that
    /// launch had the SwiGLU epilogue (the wide kernel's form with it takes the same maps and
    /// writes H in the same layout).
    ///
    /// # Safety
    /// As `product`, with `p` the parameters the flat launch of `which` took.
    pub(super) unsafe fn tails(
        &self,
        gpu: &Gpu,
        which: usize,
        swiglu: bool,
        mut p: MmqParams,
    ) -> Result<()> {
        if !self.tails_at(which) {
            return Ok(());
        }
        // `tails_at`: the lists exist and hold the tails' list.
        let Some((list, n_tiles)) = self.lists().tails(gpu).filter(|&(_, n)| n > 0) else {
            return Ok(());
        };
        let wide = self.mmq.wide()[which];
        let k = gpu
            .kernels
            .format([self.shape.gate_up_type, self.shape.down_type][which])?;
        let (func, name) = if swiglu {
            wide.swiglu_function(k)
                .expect("tails run where the wide kernel is a pipelined one")?
        } else {
            wide.function(k, which)?
        };
        p.tiles = list;
        let (rows, smem) = (wide.rows(), wide.smem());
        // SAFETY: forwarded from the caller; the tails' buffer holds n_tiles tiles of at most
        // the wide kernel's width.
        unsafe { launch_tiles(gpu, func, name, p, n_tiles, rows, MMQ_THREADS, smem) }
    }

    /// Queues one product over the prepared tiles of its family.
    ///
    /// # Safety
    /// `p` must describe live device buffers as `gpu::layout::MmqParams` requires, with
    /// `p.tiles` this plan's tile buffer of family `prod`; `func` must be that family's kernel
    /// (of the prepared tier for the weight-stationary family).
    pub(super) unsafe fn product(
        &self,
        gpu: &Gpu,
        which: usize,
        prod: Product,
        func: &CudaFunction,
        name: &'static str,
        p: MmqParams,
    ) -> Result<()> {
        let w = [self.shape.gate_up_type, self.shape.down_type][which];
        let (n_tiles, rows, threads, smem) = match prod {
            // The resident form: up to `p.resident` row tiles a CTA, in its own layout.
            Product::Mmq if p.resident > 0 => (
                self.lists().len(self.mmq_kernels[which]),
                MMQ_ROWS * p.resident as usize,
                MMQ_THREADS,
                self.resident_smem[which],
            ),
            // The warp-specialized flat kernel (`kernel` gave it): its producer warps and their
            // barriers.
            Product::Mmq if self.flat_ws_at(which) => (
                self.lists().len(self.mmq_kernels[which]),
                self.mmq_kernels[which].rows(),
                MMQ_WS_THREADS,
                MmqKernel::flat_ws_smem(w),
            ),
            Product::Mmq => (
                self.lists().len(self.mmq_kernels[which]),
                self.mmq_kernels[which].rows(),
                MMQ_THREADS,
                self.mmq_kernels[which].smem(),
            ),
            Product::Ws => (
                self.n_ws,
                WS_ROWS,
                WS_THREADS,
                ws_smem_bytes(WS_COLS[self.ws_tier]),
            ),
        };
        if n_tiles == 0 {
            return Ok(());
        }
        // The resident form is a kernel of its own (`moe_mmq_resident_<type>`), and so is the
        // narrow kernel with tensor copies (`moe_mmq_narrow_tma_<type>`, where the narrow
        // kernel without the epilogue has the maps: `queue`).
        let own;
        let narrow = matches!(self.mmq_kernels[which], MmqKernel::Narrow { .. });
        let (func, name) = if prod == Product::Mmq && p.resident > 0 {
            own = gpu.kernels.format(w)?.mmq_resident()?;
            (own.0, own.1)
        } else if prod == Product::Mmq && narrow && p.wmap0 != 0 {
            own = gpu.kernels.format(w)?.mmq_narrow_tma()?;
            (own.0, own.1)
        } else {
            (func, name)
        };
        // SAFETY: forwarded from the caller; the tile buffer holds n_tiles tiles. (The resident
        // form's last CTA of a column may run fewer row tiles.)
        unsafe { launch_tiles(gpu, func, name, p, n_tiles, rows, threads, smem) }
    }

    /// The kernel, its name and the tile buffer of product `which` (0 gate/up, 1 down) of type
    /// `w` for the prepared run (the gate/up kernel with the SwiGLU epilogue where the run takes
    /// it).
    pub(super) fn kernel<'a>(
        &self,
        gpu: &'a Gpu,
        which: usize,
        w: gpu::layout::WType,
    ) -> Result<(&'a CudaFunction, &'static str, u64)> {
        let k = gpu.kernels.format(w)?;
        let st = &gpu.stream;
        Ok(match self.products[which] {
            Product::Mmq => {
                let kernel = self.mmq_kernels[which];
                let (f, name) = if which == 0 && self.epilogue() {
                    kernel
                        .swiglu_function(k)
                        .expect("the epilogue runs on a pipelined kernel")?
                } else if self.flat_ws_at(which) {
                    k.mmq_flat_ws()?
                } else {
                    kernel.function(k, which)?
                };
                (f, name, self.lists().list(gpu, kernel))
            }
            Product::Ws => {
                let t = self
                    .tiles_ws
                    .as_ref()
                    .expect("ws tiles exist when ws may run");
                let fast = ws::fast_index(self.ws_tier).filter(|_| self.ws.fast);
                let (f, name) = k.ws_kernel(self.ws_tier, fast)?;
                (f, name, dptr(t, st))
            }
        })
    }
}

/// Launches an MMQ product's kernel `func` over `n_tiles` tiles (grid.x) and its output
/// features in row tiles of `rows` (grid.y), `threads` a CTA with `smem` bytes of dynamic shared
/// memory.
///
/// # Safety
/// `p` describes live device buffers as `gpu::layout::MmqParams` requires for `func`, with
/// `p.tiles` holding `n_tiles` tiles; `rows`, `threads` and `smem` are `func`'s.
#[allow(clippy::too_many_arguments)]
unsafe fn launch_tiles(
    gpu: &Gpu,
    func: &CudaFunction,
    name: &'static str,
    p: MmqParams,
    n_tiles: usize,
    rows: usize,
    threads: usize,
    smem: usize,
) -> Result<()> {
    let cfg = LaunchConfig {
        grid_dim: (n_tiles as u32, (p.n as usize).div_ceil(rows) as u32, 1),
        block_dim: (threads as u32, 1, 1),
        shared_mem_bytes: smem as u32,
    };
    let arg = KArg(p);
    // SAFETY: forwarded from the caller.
    unsafe { gpu.launch(&gpu.stream, func, cfg, &arg) }.op(name)?;
    Ok(())
}
