//! The MMQ work lists of a split plan, one per tile width its products may take (wide, and
//! narrow where a product may run the narrow kernel: expert/mmq.rs). Each product runs over the
//! list of its kernel's width, so that a product on the wide kernel never decodes an expert's
//! weights once per 16 rows.

use cudarc::driver::CudaSlice;
use gpu::layout::{MMQ_COLS, MMQ_FLAT_COLS, MMQ_NARROW_COLS, MmqTile};

use super::mmq::{MmqKernel, MmqKernels};
use super::tiles::{TileRepr, build_on_device, max_tiles, upload_tiles};
use crate::device::{Gpu, dptr};
use crate::error::Result;

/// The widths, in list order.
const WIDTHS: [usize; 3] = [MMQ_FLAT_COLS, MMQ_COLS, MMQ_NARROW_COLS];

fn class(k: MmqKernel) -> usize {
    WIDTHS
        .iter()
        .position(|&w| w == k.cols())
        .expect("every MMQ kernel's width has a list")
}

pub struct MmqLists {
    bufs: [Option<CudaSlice<TileRepr>>; 3],
    /// Tiles (CTAs along x) of each list for the prepared run; built on the device, the slots
    /// of the list (its padding included).
    n: [usize; 3],
    /// The prepared run's lists were built on the device.
    pub on_device: bool,
}

impl MmqLists {
    /// Buffers for runs of up to `rows` rows over `n_experts` experts, for every width
    /// `kernels` may take.
    pub fn new(gpu: &Gpu, rows: usize, n_experts: usize, kernels: &MmqKernels) -> Result<Self> {
        let mut bufs = [None, None, None];
        for ks in kernels.all() {
            for k in ks {
                let c = class(k);
                if bufs[c].is_none() {
                    bufs[c] = Some(gpu.alloc_filled(max_tiles(rows, n_experts, WIDTHS[c]), 0xa5)?);
                }
            }
        }
        Ok(MmqLists {
            bufs,
            n: [0; 3],
            on_device: false,
        })
    }

    /// Queues the lists of `kernels`' widths, built on the device from the bounds at device
    /// address `bounds`.
    ///
    /// # Safety
    /// As `tiles::build_on_device`; `n_rows` at most the rows the buffers were made for.
    pub unsafe fn build_on_device(
        &mut self,
        gpu: &Gpu,
        bounds: u64,
        n_rows: usize,
        n_experts: usize,
        kernels: [MmqKernel; 2],
    ) -> Result<()> {
        for c in Self::classes(kernels, [true; 2]) {
            let slots = max_tiles(n_rows, n_experts, WIDTHS[c]);
            let buf = self.bufs[c]
                .as_mut()
                .expect("a buffer per width the plan may take");
            // SAFETY: forwarded contract; max_tiles of n_rows fits the buffer.
            unsafe { build_on_device(gpu, bounds, n_experts, WIDTHS[c], buf, slots)? };
            self.n[c] = slots;
        }
        self.on_device = true;
        Ok(())
    }

    /// Uploads the lists of the widths of the products `used` (those on MMQ), built on the host
    /// from the bounds read back.
    pub fn upload(
        &mut self,
        gpu: &Gpu,
        bounds: &[u32],
        kernels: [MmqKernel; 2],
        used: [bool; 2],
    ) -> Result<()> {
        for c in Self::classes(kernels, used) {
            let list: Vec<MmqTile> = super::tiles_from_bounds(bounds, WIDTHS[c], false);
            let buf = self.bufs[c]
                .as_mut()
                .expect("a buffer per width the plan may take");
            self.n[c] = upload_tiles(gpu, &list, buf)?;
        }
        self.on_device = false;
        Ok(())
    }

    /// The device address of kernel `k`'s list.
    pub fn list(&self, gpu: &Gpu, k: MmqKernel) -> u64 {
        let buf = self.bufs[class(k)]
            .as_ref()
            .expect("a buffer per width the plan may take");
        dptr(buf, &gpu.stream)
    }

    /// The tile count of kernel `k`'s list for the prepared run.
    pub fn len(&self, k: MmqKernel) -> usize {
        self.n[class(k)]
    }

    /// The width classes of the products `used`, each once.
    fn classes(kernels: [MmqKernel; 2], used: [bool; 2]) -> Vec<usize> {
        let mut c: Vec<usize> = (0..2)
            .filter(|&i| used[i])
            .map(|i| class(kernels[i]))
            .collect();
        c.dedup();
        c
    }
}
