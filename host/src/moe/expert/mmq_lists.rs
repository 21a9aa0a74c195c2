//! The MMQ work lists of a split plan, one per tile width its products may take (wide, and
//! narrow where a product may run the narrow kernel: expert/mmq.rs). Each product runs over the
//! list of its kernel's width, so that a product on the wide kernel never decodes an expert's
//! weights once per 16 rows. Where the plan runs the flat products' tails on the wide kernel
//! (`MmqTails::Wide`), the flat list leaves them out and a list of its own holds them.

use cudarc::driver::CudaSlice;
use gpu::layout::{MMQ_COLS, MMQ_FLAT_COLS, MMQ_NARROW_COLS, MmqTile};

use super::mmq::{MmqKernel, MmqKernels};
use super::tiles::{TilePart, TileRepr, build_on_device, upload_tiles};
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

/// The list class of the flat kernel's width.
const FLAT: usize = 0;

pub struct MmqLists {
    bufs: [Option<CudaSlice<TileRepr>>; 3],
    /// The flat products' tails, where the flat list leaves them out.
    tails: Option<CudaSlice<TileRepr>>,
    /// Tiles (CTAs along x) of each list for the prepared run, then of the tails; built on the
    /// device, the slots of the list (its padding included).
    n: [usize; 4],
    /// The prepared run's lists were built on the device.
    pub on_device: bool,
}

impl MmqLists {
    /// Buffers for runs of up to `rows` rows over `n_experts` experts, for every width
    /// `kernels` may take; where they run the flat products' tails on the wide kernel
    /// (`MmqKernels::tails`), the flat list leaves out each expert's last tile where it fits a
    /// wide one ([`MMQ_COLS`] rows), and a list of its own holds those.
    pub fn new(gpu: &Gpu, rows: usize, n_experts: usize, kernels: &MmqKernels) -> Result<Self> {
        let tails = kernels.tails();
        let mut bufs = [None, None, None];
        for ks in kernels.all() {
            for k in ks {
                let c = class(k);
                if bufs[c].is_none() {
                    let n = Self::part(c, tails).max_tiles(rows, n_experts, WIDTHS[c]);
                    bufs[c] = Some(gpu.alloc_filled(n, 0xa5)?);
                }
            }
        }
        let tails = if tails && bufs[FLAT].is_some() {
            let n = Self::tail_part().max_tiles(rows, n_experts, WIDTHS[FLAT]);
            Some(gpu.alloc_filled(n, 0xa5)?)
        } else {
            None
        };
        Ok(MmqLists {
            bufs,
            tails,
            n: [0; 4],
            on_device: false,
        })
    }

    /// The tiles list class `c` holds (with `tails`: whether the flat one leaves them out).
    fn part(c: usize, tails: bool) -> TilePart {
        if c == FLAT && tails {
            TilePart::Body {
                tail: MMQ_COLS as u32,
            }
        } else {
            TilePart::All
        }
    }

    /// The tiles of the tails' list.
    fn tail_part() -> TilePart {
        TilePart::Tails {
            tail: MMQ_COLS as u32,
        }
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
        let tails = self.tails.is_some();
        for c in Self::classes(kernels, [true; 2]) {
            let part = Self::part(c, tails);
            let slots = part.max_tiles(n_rows, n_experts, WIDTHS[c]);
            let buf = self.bufs[c]
                .as_mut()
                .expect("a buffer per width the plan may take");
            // SAFETY: forwarded contract; the part's max_tiles of n_rows fits the buffer.
            unsafe { build_on_device(gpu, bounds, n_experts, WIDTHS[c], part, buf, slots)? };
            self.n[c] = slots;
            if c == FLAT
                && let Some(buf) = self.tails.as_mut()
            {
                let part = Self::tail_part();
                let slots = part.max_tiles(n_rows, n_experts, WIDTHS[FLAT]);
                // SAFETY: as above (n_experts slots, the buffer's).
                unsafe { build_on_device(gpu, bounds, n_experts, WIDTHS[FLAT], part, buf, slots)? };
                self.n[3] = slots;
            }
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
        let tails = self.tails.is_some();
        for c in Self::classes(kernels, used) {
            let part = Self::part(c, tails);
            let list: Vec<MmqTile> = super::part_from_bounds(bounds, WIDTHS[c], part, false);
            let buf = self.bufs[c]
                .as_mut()
                .expect("a buffer per width the plan may take");
            self.n[c] = upload_tiles(gpu, &list, buf)?;
            if c == FLAT
                && let Some(buf) = self.tails.as_mut()
            {
                let list = super::part_from_bounds(bounds, WIDTHS[FLAT], Self::tail_part(), false);
                self.n[3] = upload_tiles(gpu, &list, buf)?;
            }
        }
        self.on_device = false;
        Ok(())
    }

    /// The device address and tile count (for the prepared run) of the flat products' tails,
    /// where the flat list leaves them out; they run on the wide kernel.
    pub fn tails(&self, gpu: &Gpu) -> Option<(u64, usize)> {
        self.tails
            .as_ref()
            .map(|b| (dptr(b, &gpu.stream), self.n[3]))
    }

    /// Whether the flat list leaves the tails out (to a list of their own).
    pub fn has_tails(&self) -> bool {
        self.tails.is_some()
    }

    /// The tails' tile count for the prepared run (built on the device: its slots).
    pub fn tails_len(&self) -> usize {
        self.n[3]
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
