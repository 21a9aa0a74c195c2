//! A layer's expert weights resident on the device, read where they lie by every path.

use cudarc::driver::CudaSlice;

use gpu::formats::to_device_layout;
use gpu::layout::{MmqPipeShape, MmqTmaMap};

use crate::device::{Gpu, TMA_MAP_BYTES, dptr, encode_tma_map};
use crate::error::Result;
use crate::formats::ExpertTensor;
use crate::par::par_chunks_mut;
use crate::problem::{GateUp, LayerWeights, MoeShape};

/// Bytes every weight buffer is readable past its end: the fused path copies each row's stage
/// as the 16-byte aligned window around it (layout::fused_slot_bytes).
pub const WEIGHT_TAIL_BYTES: usize = 16;

/// The gate/up tensors' map slots: gate and up for the 128-row and flat kernels, gate and up
/// for the narrow ones (`LayerPtrs::gate_map` ..).
const MAP_SLOTS: usize = 4;

/// A layer's expert weights on the device.
pub struct DeviceLayer {
    pub shape: MoeShape,
    /// gate (or the merged gate_up tensor) and up (None when merged).
    gate: CudaSlice<u8>,
    up: Option<CudaSlice<u8>>,
    down: CudaSlice<u8>,
    /// The gate/up tensors' tensor maps (gpu::layout::MmqTmaMap) on an sm_90 module, 128 bytes
    /// each, [`MAP_SLOTS`] of them (zeros where a tensor has none): the pipelined MMQ kernels'
    /// tensor copies. None where the tensors have none.
    maps: Option<CudaSlice<u64>>,
    /// Which of the [`MAP_SLOTS`] hold a map.
    have: [bool; MAP_SLOTS],
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
    /// Device addresses of the tensor maps (`MmqParams::wmap0`, `wmap1`) of gate (or the
    /// merged tensor) and up (separate tensors only) for the 128-row and flat kernels, or 0
    /// where a tensor has none: on an sm_90 module, where `gpu::layout::MmqTmaMap::of` takes the
    /// tensors. Of those kernels only the ones with the SwiGLU epilogue read them
    /// (gpu/src/moe/mmq/pipe/copy/mod.rs).
    pub gate_map: u64,
    pub up_map: u64,
    /// The same for the narrow kernels (their boxes: `gpu::layout::mmq_tma_narrow_box_rows` rows
    /// of their slot).
    pub gate_map_narrow: u64,
    pub up_map_narrow: u64,
}

/// Whether layers on `gpu` get tensor maps: the sm_90 module, and CUDA 12.0's driver or newer
/// (`cuTensorMapEncodeTiled`'s first; the sm_90 module needs that driver anyway).
fn maps_on(gpu: &Gpu) -> bool {
    gpu.info.ptx_arch >= 90 && gpu.info.driver_version >= 12000
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
        let mut layer = DeviceLayer {
            shape: *shape,
            gate,
            up,
            down: up_tail(&w.down)?,
            maps: None,
            have: [false; MAP_SLOTS],
        };
        if maps_on(gpu) {
            layer.encode_maps(gpu)?;
        }
        Ok(layer)
    }

    /// Whether a layer of shape `s` uploaded to `gpu` has the narrow kernels' gate/up maps
    /// (`LayerPtrs::gate_map_narrow`), so that its narrow gate/up product runs by tensor copies
    /// (`moe_mmq_narrow_tma_<type>`), for separate gate and up tensors (a merged tensor, twice
    /// the rows, has them wherever these do).
    pub fn has_narrow_gate_up_maps(gpu: &Gpu, s: &MoeShape) -> bool {
        let row_bytes = s.gate_up_type.row_bytes(s.hidden);
        maps_on(gpu)
            && MmqTmaMap::of(
                s.gate_up_type,
                MmqPipeShape::Narrow,
                row_bytes,
                s.ffn,
                s.n_experts,
                s.ffn * row_bytes,
            )
            .is_some()
    }

    /// Encodes and uploads the gate/up tensors' maps where `MmqTmaMap::of` takes them: gate
    /// and up (where separate) for the 128-row and flat kernels, then for the narrow ones.
    fn encode_maps(&mut self, gpu: &Gpu) -> Result<()> {
        let s = self.shape;
        let p = self.ptrs(gpu);
        let rows = if p.merged { 2 * s.ffn } else { s.ffn };
        let expert = p.gu_expert_bytes as usize;
        let mut words = vec![0u64; MAP_SLOTS * TMA_MAP_BYTES / 8];
        for (k, shape) in [MmqPipeShape::Wide, MmqPipeShape::Narrow]
            .into_iter()
            .enumerate()
        {
            let w = s.gate_up_type;
            let Some(m) = MmqTmaMap::of(w, shape, p.gu_row_bytes, rows, s.n_experts, expert) else {
                continue;
            };
            let tensors = if p.merged { 1 } else { 2 };
            for (t, base) in [p.gate, p.up].into_iter().take(tensors).enumerate() {
                let slot = 2 * k + t;
                let at = slot * TMA_MAP_BYTES / 8;
                words[at..at + TMA_MAP_BYTES / 8].copy_from_slice(&encode_tma_map(base, &m)?);
                self.have[slot] = true;
            }
        }
        if self.have.contains(&true) {
            self.maps = Some(gpu.upload(&words)?);
        }
        Ok(())
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
        let map = |slot: usize| match &self.maps {
            Some(m) if self.have[slot] => dptr(m, st) + (slot * TMA_MAP_BYTES) as u64,
            _ => 0,
        };
        LayerPtrs {
            gate,
            up,
            gu_expert_bytes: gu_expert_bytes as u64,
            gu_row_bytes,
            down: dptr(&self.down, st),
            down_expert_bytes: (s.hidden * down_row_bytes) as u64,
            down_row_bytes,
            merged: self.up.is_none(),
            gate_map: map(0),
            up_map: map(1),
            gate_map_narrow: map(2),
            up_map_narrow: map(3),
        }
    }
}
