//! The per-group MMQ path: gate/up product -> swiglu_quant -> down product, three launches over
//! one tile list (one CTA per up to 64 rows of an expert, none for an expert without rows), GU
//! and H through global memory. Kernels: gpu/src/moe/mmq.rs, gpu/src/moe/swiglu_quant.rs.

use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};
use gpu::layout::{
    MMQ_BLOCK_VALUES, MMQ_COLS, MMQ_KSTEP, MMQ_ROWS, MMQ_SMEM_BYTES, MMQ_THREADS, MmqParams,
    Q8_1_MMQ_BYTES, padded_k,
};

use super::{
    ExpertIo, ExpertPlan, Intermediates, check_rows, max_tiles, tiles_from_bounds, upload_tiles,
};
use crate::device::{Gpu, KArg, dptr};
use crate::error::{DriverOp, Result, shape};
use crate::moe::layer::DeviceLayer;
use crate::moe::path::ExpertPath;
use crate::moe::swiglu_quant::SwigluQuantPlan;
use crate::problem::{MoeShape, SwigluQuantShape};

/// `MmqTile` as 4 u32 for cudarc buffers.
type TileRepr = [u32; 4];

/// Checks a product's shape against the MMQ kernels' limits; `what` names the kernel.
pub fn check_product(what: &str, n: usize, k: usize) -> Result<()> {
    if n == 0 || !n.is_multiple_of(MMQ_ROWS) || n / MMQ_ROWS > 65_535 {
        return Err(shape(
            format!("{what}: output features"),
            n,
            "a positive multiple of 128, at most 8,388,480",
        ));
    }
    if k == 0 || !k.is_multiple_of(MMQ_KSTEP) || k > u32::MAX as usize {
        return Err(shape(format!("{what}: K"), k, "a positive multiple of 128"));
    }
    Ok(())
}

/// Why the MMQ path cannot run this shape, if it cannot.
pub fn eligible(s: &MoeShape) -> Result<()> {
    check_product("moe_gate_up_mmq", 2 * s.ffn, s.hidden)?;
    check_product("moe_down_mmq", s.hidden, s.ffn)
}

/// The MMQ path's plan: the tile list and the GU / H scratch for up to `cap_rows` rows.
pub struct MmqPlan {
    shape: MoeShape,
    cap_rows: usize,
    tiles: CudaSlice<TileRepr>,
    n_tiles: usize,
    gu: CudaSlice<f32>,
    hq: CudaSlice<u8>,
}

impl MmqPlan {
    pub fn new(gpu: &Gpu, s: &MoeShape, cap_rows: usize) -> Result<Self> {
        eligible(s)?;
        let rows = cap_rows.max(1);
        Ok(MmqPlan {
            shape: *s,
            cap_rows: rows,
            tiles: gpu.alloc_filled(max_tiles(rows, s.n_experts, MMQ_COLS), 0xa5)?,
            n_tiles: 0,
            gu: gpu.alloc_filled(rows * 2 * s.ffn, 0xa5)?,
            hq: gpu.alloc_filled(hq_bytes(s, rows), 0xa5)?,
        })
    }

    /// Queues one MMQ product over the prepared tiles.
    ///
    /// # Safety
    /// `p` must describe live device buffers as `gpu::layout::MmqParams` requires and `func`
    /// must be an MMQ kernel.
    unsafe fn product(
        &self,
        gpu: &Gpu,
        func: &CudaFunction,
        name: &'static str,
        p: MmqParams,
    ) -> Result<()> {
        if self.n_tiles == 0 {
            return Ok(());
        }
        let cfg = LaunchConfig {
            grid_dim: (self.n_tiles as u32, p.n / MMQ_ROWS as u32, 1),
            block_dim: (MMQ_THREADS as u32, 1, 1),
            shared_mem_bytes: MMQ_SMEM_BYTES as u32,
        };
        let arg = KArg(p);
        // SAFETY: forwarded from the caller; the tiles buffer holds n_tiles tiles.
        unsafe { gpu.stream.launch_builder(func).arg(&arg).launch(cfg) }.op(name)?;
        Ok(())
    }
}

fn hq_bytes(s: &MoeShape, rows: usize) -> usize {
    padded_k(s.ffn) / MMQ_BLOCK_VALUES * rows * Q8_1_MMQ_BYTES
}

impl ExpertPlan for MmqPlan {
    fn path(&self) -> ExpertPath {
        ExpertPath::Mmq
    }

    fn stages(&self) -> &'static [&'static str] {
        &["gate_up", "swiglu_quant", "down"]
    }

    fn prepare(&mut self, gpu: &Gpu, bounds: &[u32]) -> Result<()> {
        let list = tiles_from_bounds(bounds, MMQ_COLS, false);
        self.n_tiles = upload_tiles(gpu, &list, &mut self.tiles)?;
        Ok(())
    }

    fn launch(
        &mut self,
        gpu: &Gpu,
        layer: &DeviceLayer,
        io: &ExpertIo,
        mark: &mut dyn FnMut(usize) -> Result<()>,
    ) -> Result<()> {
        let s = self.shape;
        check_rows("MMQ path", io.n_rows, self.cap_rows)?;
        let st = &gpu.stream;
        let w = layer.ptrs(gpu);
        let kernels = gpu.kernels.format(s.gate_up_type)?;
        let gu_p = MmqParams {
            w0: w.gate,
            w1: if w.merged { 0 } else { w.up },
            w_expert_bytes: w.gu_expert_bytes,
            x: io.xq,
            tiles: dptr(&self.tiles, st),
            out: dptr(&self.gu, st),
            out_rows: 0,
            row_bytes: w.gu_row_bytes as u32,
            n_split: if w.merged {
                2 * s.ffn as u32
            } else {
                s.ffn as u32
            },
            n: 2 * s.ffn as u32,
            k: s.hidden as u32,
            n_cols_x: io.n_rows as u32,
            out_stride: 2 * s.ffn as u32,
        };
        // SAFETY: weights resident with the layer's shape (checked at upload); xq holds
        // hidden_padded / 128 chunks of n_rows blocks; the tiles cover rows < n_rows; gu holds
        // cap_rows >= n_rows rows of 2 ffn.
        unsafe { self.product(gpu, &kernels.gate_up_mmq, kernels.names[0], gu_p)? };
        mark(0)?;
        let sq = SwigluQuantShape::dense(io.n_rows, s.ffn, false);
        SwigluQuantPlan::new(&sq, s.down_type.id())?.launch(gpu, &self.gu, &mut self.hq)?;
        mark(1)?;
        let down = gpu.kernels.format(s.down_type)?;
        let dn_p = MmqParams {
            w0: w.down,
            w1: 0,
            w_expert_bytes: w.down_expert_bytes,
            x: dptr(&self.hq, st),
            tiles: dptr(&self.tiles, st),
            out: io.dm,
            out_rows: io.row_dst,
            row_bytes: w.down_row_bytes as u32,
            n_split: s.hidden as u32,
            n: s.hidden as u32,
            k: s.ffn as u32,
            n_cols_x: io.n_rows as u32,
            out_stride: s.hidden as u32,
        };
        // SAFETY: as for gate/up; hq holds padded(ffn) / 128 chunks of n_rows blocks;
        // row_dst maps each row to its (token, slot) row of dm.
        unsafe { self.product(gpu, &down.down_mmq, down.names[1], dn_p)? };
        mark(2)
    }

    fn describe(&self) -> String {
        format!(
            "per-group MMQ: {} tiles of up to {MMQ_COLS} rows x {MMQ_ROWS} features per product",
            self.n_tiles
        )
    }

    fn poison(&mut self, gpu: &Gpu, byte: u8) -> Result<()> {
        gpu.fill(&mut self.gu, byte)?;
        gpu.fill(&mut self.hq, byte)
    }

    fn intermediates(&self, gpu: &Gpu, n_rows: usize) -> Result<Intermediates> {
        let s = &self.shape;
        let mut gu = gpu.download(&self.gu)?;
        gu.truncate(n_rows * 2 * s.ffn);
        let mut hq = gpu.download(&self.hq)?;
        hq.truncate(hq_bytes(s, n_rows));
        Ok(Intermediates {
            gu: Some(gu),
            hq: Some(hq),
        })
    }

    fn written_past_end(&self, gpu: &Gpu, byte: u8, n_rows: usize) -> Result<Vec<&'static str>> {
        let s = &self.shape;
        let mut bad = Vec::new();
        let gu = gpu.download(&self.gu)?;
        if gu[n_rows * 2 * s.ffn..]
            .iter()
            .any(|v| v.to_bits() != u32::from_ne_bytes([byte; 4]))
        {
            bad.push("gu");
        }
        if gpu.download(&self.hq)?[hq_bytes(s, n_rows)..]
            .iter()
            .any(|&b| b != byte)
        {
            bad.push("hq");
        }
        Ok(bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_limits() {
        assert!(check_product("x", 1280, 2560).is_ok());
        assert!(check_product("x", 1000, 2560).is_err());
        assert!(check_product("x", 1280, 100).is_err());
    }
}
