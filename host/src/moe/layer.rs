//! A layer's expert weights resident on the device, read where they lie by every path.

use cudarc::driver::CudaSlice;

use gpu::formats::to_device_layout;

use crate::device::{Gpu, dptr};
use crate::error::Result;
use crate::formats::ExpertTensor;
use crate::par::par_chunks_mut;
use crate::problem::{GateUp, LayerWeights, MoeShape};

/// Bytes every weight buffer is readable past its end: the fused path copies each row's stage
/// as the 16-byte aligned window around it (layout::fused_slot_bytes).
pub const WEIGHT_TAIL_BYTES: usize = 16;

/// A layer's expert weights on the device.
pub struct DeviceLayer {
    pub shape: MoeShape,
    /// gate (or the merged gate_up tensor) and up (None when merged).
    gate: CudaSlice<u8>,
    up: Option<CudaSlice<u8>>,
    down: CudaSlice<u8>,
}

/// Device addresses and strides of a layer's weights, as the kernels' parameters take them.
#[derive(Clone, Copy, Debug)]
pub struct LayerPtrs {
    /// Gate rows `0..ffn` of expert e at `gate + e * gu_expert_bytes`.
    pub gate: u64,
    /// Up rows of expert e at `up + e * gu_expert_bytes` (inside the merged tensor when merged).
    pub up: u64,
    pub gu_expert_bytes: u64,
    pub gu_row_bytes: usize,
    pub down: u64,
    pub down_expert_bytes: u64,
    pub down_row_bytes: usize,
    /// Whether gate and up are one tensor `[2 ffn]` per expert.
    pub merged: bool,
}

impl DeviceLayer {
    /// Copies the layer's weights to the device once (each buffer followed by
    /// [`WEIGHT_TAIL_BYTES`] zero bytes), each tensor in its type's device layout
    /// (`gpu::formats::to_device_layout`: the bits of Q2_0's and IQ4_NL's blocks reordered, the
    /// other types as in the file).
    pub fn upload(gpu: &Gpu, w: &LayerWeights, shape: &MoeShape) -> Result<Self> {
        w.check(shape)?;
        let up_tail = |t: &ExpertTensor| -> Result<CudaSlice<u8>> {
            let data = t.data;
            let mut v = Vec::with_capacity(data.len() + WEIGHT_TAIL_BYTES);
            v.extend_from_slice(data);
            // Whole blocks per chunk: every tensor is whole blocks from its start.
            let chunk = t.wtype.block_bytes() * 4096;
            par_chunks_mut(&mut v, chunk, |_, c| to_device_layout(t.wtype, c));
            v.resize(data.len() + WEIGHT_TAIL_BYTES, 0);
            gpu.upload(&v)
        };
        let (gate, up) = match &w.gate_up {
            GateUp::Separate { gate, up } => (up_tail(gate)?, Some(up_tail(up)?)),
            GateUp::Merged(t) => (up_tail(t)?, None),
        };
        Ok(DeviceLayer {
            shape: *shape,
            gate,
            up,
            down: up_tail(&w.down)?,
        })
    }

    pub fn ptrs(&self, gpu: &Gpu) -> LayerPtrs {
        let s = &self.shape;
        let st = &gpu.stream;
        let gu_row_bytes = s.gate_up_type.row_bytes(s.hidden);
        let gate = dptr(&self.gate, st);
        let (up, gu_expert_bytes) = match &self.up {
            Some(u) => (dptr(u, st), s.ffn * gu_row_bytes),
            None => (
                gate + (s.ffn * gu_row_bytes) as u64,
                2 * s.ffn * gu_row_bytes,
            ),
        };
        let down_row_bytes = s.down_type.row_bytes(s.ffn);
        LayerPtrs {
            gate,
            up,
            gu_expert_bytes: gu_expert_bytes as u64,
            gu_row_bytes,
            down: dptr(&self.down, st),
            down_expert_bytes: (s.hidden * down_row_bytes) as u64,
            down_row_bytes,
            merged: self.up.is_none(),
        }
    }
}
