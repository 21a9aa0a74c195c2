//! Reading a pipeline's buffers back after a run: every stage's output in the reference's
//! layouts (tests and the CLI's parity check), the guard check of the bytes past each output,
//! and the layer output.

use cudarc::driver::CudaSlice;
use gpu::layout::{MMQ_BLOCK_VALUES, Q8_1_MMQ_BYTES};

use super::Prefill;
use crate::device::Gpu;
use crate::error::Result;

impl Prefill {
    /// The stage outputs of the last run, downloaded (for comparison with the reference).
    pub fn outputs(&self, gpu: &Gpu) -> Result<GpuStages> {
        let s = &self.shape;
        let rows = self.n_tokens * s.top_k;
        let cut_u32 = |v: Vec<u32>, n: usize| v.into_iter().take(n).collect::<Vec<_>>();
        let cut_f32 = |v: Vec<f32>, n: usize| v.into_iter().take(n).collect::<Vec<_>>();
        let xq_chunks = s.hidden_padded() / MMQ_BLOCK_VALUES;
        let blocks = |buf: &CudaSlice<u8>, chunks: usize| -> Result<Vec<u8>> {
            // The buffer is laid out for cap rows; the run used n_cols = rows.
            let v = gpu.download(buf)?;
            Ok(v[..chunks * rows * Q8_1_MMQ_BYTES].to_vec())
        };
        let inter = self.plan.intermediates(gpu, rows)?;
        Ok(GpuStages {
            ids: cut_u32(gpu.download(&self.ids)?, rows),
            weights: cut_f32(gpu.download(&self.weights)?, rows),
            expert_bounds: gpu.download(&self.bounds)?,
            row_token: cut_u32(gpu.download(&self.row_token)?, rows),
            row_dst: cut_u32(gpu.download(&self.row_dst)?, rows),
            xq: blocks(&self.xq, xq_chunks)?,
            gu: inter.gu,
            hq: inter.hq,
            dm: cut_f32(gpu.download(&self.dm)?, rows * s.hidden),
            out: cut_f32(gpu.download(&self.out)?, self.n_tokens * s.hidden),
        })
    }

    /// Names of the buffers whose bytes past the last run's extent are not all `byte` (the
    /// guard check of tests: run with fewer tokens than the capacity, after `poison(byte)`).
    pub fn written_past_end(&self, gpu: &Gpu, byte: u8) -> Result<Vec<&'static str>> {
        let s = &self.shape;
        let rows = self.n_tokens * s.top_k;
        let mut bad = Vec::new();
        let tail_u8 = |name: &'static str, v: Vec<u8>, used: usize, bad: &mut Vec<&'static str>| {
            if v[used.min(v.len())..].iter().any(|&b| b != byte) {
                bad.push(name);
            }
        };
        let u32s = |b: &CudaSlice<u32>| {
            gpu.download(b)
                .map(|v| bytemuck::cast_slice::<u32, u8>(&v).to_vec())
        };
        let f32s = |b: &CudaSlice<f32>| {
            gpu.download(b)
                .map(|v| bytemuck::cast_slice::<f32, u8>(&v).to_vec())
        };
        tail_u8("ids", u32s(&self.ids)?, rows * 4, &mut bad);
        tail_u8("weights", f32s(&self.weights)?, rows * 4, &mut bad);
        tail_u8("row_token", u32s(&self.row_token)?, rows * 4, &mut bad);
        tail_u8("row_dst", u32s(&self.row_dst)?, rows * 4, &mut bad);
        tail_u8("row_of", u32s(&self.row_of)?, rows * 4, &mut bad);
        tail_u8(
            "xq",
            gpu.download(&self.xq)?,
            s.hidden_padded() / MMQ_BLOCK_VALUES * rows * Q8_1_MMQ_BYTES,
            &mut bad,
        );
        bad.extend(self.plan.written_past_end(gpu, byte, rows)?);
        tail_u8("dm", f32s(&self.dm)?, rows * s.hidden * 4, &mut bad);
        tail_u8(
            "out",
            f32s(&self.out)?,
            self.n_tokens * s.hidden * 4,
            &mut bad,
        );
        Ok(bad)
    }

    /// The layer output of the last run, `[n_tokens][hidden]`, downloaded.
    pub fn output(&self, gpu: &Gpu) -> Result<Vec<f32>> {
        let mut v = gpu.download(&self.out)?;
        v.truncate(self.n_tokens * self.shape.hidden);
        Ok(v)
    }
}

/// Every stage's output from the GPU, in the reference's layouts (see `reference::Stages`).
pub struct GpuStages {
    pub ids: Vec<u32>,
    pub weights: Vec<f32>,
    pub expert_bounds: Vec<u32>,
    pub row_token: Vec<u32>,
    pub row_dst: Vec<u32>,
    pub xq: Vec<u8>,
    /// Gate/up product and H, where the path writes them to global memory (MMQ; not fused).
    pub gu: Option<Vec<f32>>,
    pub hq: Option<Vec<u8>>,
    pub dm: Vec<f32>,
    pub out: Vec<f32>,
}
