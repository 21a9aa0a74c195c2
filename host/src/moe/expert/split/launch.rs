//! One product of a split plan (split.rs): its kernel, tile list and launch.

use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};
use gpu::layout::{MMQ_ROWS, MMQ_THREADS, MmqParams, WS_COLS, WS_ROWS, WS_THREADS, ws_smem_bytes};

use super::{Product, SplitPlan};
use crate::device::{Gpu, KArg, dptr};
use crate::error::{DriverOp, Result};
use crate::moe::expert::ws;

impl SplitPlan {
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
        let (n_tiles, rows, threads, smem) = match prod {
            // The resident form: up to `p.resident` row tiles a CTA, in its own layout.
            Product::Mmq if p.resident > 0 => (
                self.lists().len(self.mmq_kernels[which]),
                MMQ_ROWS * p.resident as usize,
                MMQ_THREADS,
                self.resident_smem[which],
            ),
            Product::Mmq => (
                self.lists().len(self.mmq_kernels[which]),
                MMQ_ROWS,
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
        // The resident form is a kernel of its own (`moe_mmq_resident_<type>`).
        let resident;
        let (func, name) = if prod == Product::Mmq && p.resident > 0 {
            let w = [self.shape.gate_up_type, self.shape.down_type][which];
            resident = gpu.kernels.format(w)?.mmq_resident()?;
            (resident.0, resident.1)
        } else {
            (func, name)
        };
        let cfg = LaunchConfig {
            // (The resident form's last CTA of a column may run fewer row tiles.)
            grid_dim: (n_tiles as u32, (p.n as usize).div_ceil(rows) as u32, 1),
            block_dim: (threads as u32, 1, 1),
            shared_mem_bytes: smem as u32,
        };
        let arg = KArg(p);
        // SAFETY: forwarded from the caller; the tile buffer holds n_tiles tiles.
        unsafe { gpu.stream.launch_builder(func).arg(&arg).launch(cfg) }.op(name)?;
        Ok(())
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
                let (f, name) = k.ws_kernel(self.ws_tier, fast);
                (f, name, dptr(t, st))
            }
        })
    }
}
