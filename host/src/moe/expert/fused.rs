//! The fused int8 expert path: one launch for the whole layer's experts, one CTA per expert and
//! up to `FUSED_COLS` of its rows (largest expert first), gate/up -> SwiGLU -> q8_1 H in shared
//! memory -> down. Kernels: gpu/src/moe/fused/ (`moe_experts_<gate_up>_fused`).

use cudarc::driver::sys::CUfunction_attribute as FnAttr;
use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use gpu::layout::{
    FUSED_COLS, FUSED_MAX_STAGES, FUSED_MIN_STAGES, FUSED_ROWS, FUSED_THREADS, FusedParams,
    FusedSmem, MMQ_KSTEP, WType, fused_sub_steps,
};

use super::{ExpertIo, ExpertPlan, Intermediates, max_tiles, tiles_from_bounds};
use crate::device::{DeviceLimits, Gpu, KArg, dptr};
use crate::error::{DriverOp, Error, Result, shape};
use crate::moe::layer::DeviceLayer;
use crate::moe::path::ExpertPath;
use crate::problem::MoeShape;

/// Down types the fused kernels decode (a run-time choice inside each kernel).
pub const DOWN_TYPES: [WType; 3] = [WType::Q2_0, WType::Iq4Nl, WType::Q8_0];

/// Shared memory the driver reserves per CTA on sm_80+ (CUDA programming guide, "shared memory"
/// of compute capability 8.x / 9.0).
const RESERVED_SMEM_PER_CTA: usize = 1024;

/// The copy pipeline's depth and the CTAs per SM it leaves: the deepest pipeline that keeps two
/// CTAs per SM with at least 3 stages, else the deepest that fits one CTA; one stage below sm_80
/// (no `cp.async`: the copies are synchronous, deeper buffers buy nothing). The one function the
/// shared-memory size, the launch and the report take the depth from.
pub fn stages(s: &MoeShape, dev: &DeviceLimits) -> Option<(usize, usize)> {
    let smem = |n| FusedSmem::new(s.gate_up_type, s.down_type, s.ffn, n).total;
    let fits = |n: usize, per_sm: usize| {
        smem(n) <= dev.max_smem_optin as usize
            && per_sm * (smem(n) + RESERVED_SMEM_PER_CTA) <= dev.smem_per_sm as usize
    };
    if dev.cc < 80 {
        return fits(1, 1).then_some((1, 1));
    }
    for per_sm in [2, 1] {
        let min = if per_sm == 2 { 3 } else { FUSED_MIN_STAGES };
        if let Some(n) = (min..=FUSED_MAX_STAGES).rev().find(|&n| fits(n, per_sm)) {
            return Some((n, per_sm));
        }
    }
    None
}

/// Why the fused path cannot run this shape on this device, if it cannot.
pub fn eligible(s: &MoeShape, dev: &DeviceLimits) -> Result<()> {
    if !DOWN_TYPES.contains(&s.down_type) {
        return Err(Error::Unsupported(format!(
            "the fused path decodes down types q2_0, iq4_nl and q8_0, not {}",
            s.down_type.name()
        )));
    }
    let k_stage = MMQ_KSTEP * fused_sub_steps(s.gate_up_type);
    if !s.hidden.is_multiple_of(k_stage) || !s.hidden.is_multiple_of(FUSED_ROWS) {
        return Err(shape(
            "fused path: hidden",
            s.hidden,
            format!("a multiple of {} and of {FUSED_ROWS}", k_stage),
        ));
    }
    if !s.ffn.is_multiple_of(MMQ_KSTEP) {
        return Err(shape("fused path: ffn", s.ffn, "a multiple of 128"));
    }
    if stages(s, dev).is_none() {
        return Err(shape(
            "fused path: shared memory per CTA (bytes)",
            FusedSmem::new(s.gate_up_type, s.down_type, s.ffn, 1).total,
            format!(
                "at most {} on this device (H of ffn {} for {FUSED_COLS} rows is part of it)",
                dev.max_smem_optin, s.ffn
            ),
        ));
    }
    Ok(())
}

/// The fused path's plan: the tile list for up to `cap_rows` rows and the launch shape.
pub struct FusedPlan {
    shape: MoeShape,
    stages: usize,
    ctas_per_sm: usize,
    smem: usize,
    tiles: CudaSlice<[u32; 4]>,
    n_tiles: usize,
    cap_rows: usize,
}

impl FusedPlan {
    pub fn new(gpu: &Gpu, s: &MoeShape, cap_rows: usize) -> Result<Self> {
        let dev = gpu.limits();
        eligible(s, &dev)?;
        let (stages, ctas_per_sm) = stages(s, &dev).ok_or(Error::Unsupported(
            "the fused path does not fit this device's shared memory".into(),
        ))?;
        let smem = FusedSmem::new(s.gate_up_type, s.down_type, s.ffn, stages).total;
        let k = gpu.kernels.format(s.gate_up_type)?;
        k.fused
            .set_attribute(
                FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem as i32,
            )
            .op("cuFuncSetAttribute (fused kernel shared memory)")?;
        let rows = cap_rows.max(1);
        Ok(FusedPlan {
            shape: *s,
            stages,
            ctas_per_sm,
            smem,
            tiles: gpu.alloc_filled(max_tiles(rows, s.n_experts, FUSED_COLS), 0xa5)?,
            n_tiles: 0,
            cap_rows: rows,
        })
    }
}

impl ExpertPlan for FusedPlan {
    fn path(&self) -> ExpertPath {
        ExpertPath::Fused
    }

    fn stages(&self) -> &'static [&'static str] {
        &["experts (fused)"]
    }

    fn prepare(&mut self, gpu: &Gpu, bounds: &[u32]) -> Result<()> {
        let list = tiles_from_bounds(bounds, FUSED_COLS, true);
        self.n_tiles = list.len();
        if !list.is_empty() {
            let raw: Vec<[u32; 4]> = list
                .iter()
                .map(|t| [t.expert, t.col_start, t.n_cols, 0])
                .collect();
            gpu.stream
                .memcpy_htod(&raw, &mut self.tiles)
                .op("cuMemcpyHtoD fused tiles")?;
        }
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
        if io.n_rows > self.cap_rows {
            return Err(shape(
                "fused path rows",
                io.n_rows,
                format!("at most {}", self.cap_rows),
            ));
        }
        if self.n_tiles > 0 {
            let w = layer.ptrs(gpu);
            let k = gpu.kernels.format(s.gate_up_type)?;
            let p = KArg(FusedParams {
                gate: w.gate,
                up: w.up,
                gu_expert_bytes: w.gu_expert_bytes,
                down: w.down,
                down_expert_bytes: w.down_expert_bytes,
                x: io.xq,
                tiles: dptr(&self.tiles, &gpu.stream),
                dm: io.dm,
                row_dst: io.row_dst,
                gu_row_bytes: w.gu_row_bytes as u32,
                down_row_bytes: w.down_row_bytes as u32,
                hidden: s.hidden as u32,
                ffn: s.ffn as u32,
                n_cols_x: io.xq_cols as u32,
                stages: self.stages as u32,
                down_type: s.down_type.id(),
                _pad: 0,
            });
            let cfg = LaunchConfig {
                grid_dim: (self.n_tiles as u32, 1, 1),
                block_dim: (FUSED_THREADS as u32, 1, 1),
                shared_mem_bytes: self.smem as u32,
            };
            // SAFETY: weights resident with the layer's shape and readable 16 bytes past their
            // ends (DeviceLayer::upload); xq holds hidden_padded / 128 chunks of xq_cols blocks;
            // the tiles cover rows < n_rows; row_dst and dm hold n_rows rows; the shared
            // memory is the plan's layout, opted into at construction.
            unsafe { gpu.stream.launch_builder(&k.fused).arg(&p).launch(cfg) }.op(k.names[2])?;
        }
        mark(0)
    }

    fn work_items(&self) -> usize {
        self.n_tiles
    }

    fn describe(&self) -> String {
        format!(
            "fused: {} CTAs of up to {FUSED_COLS} rows, {} copy stages, {} KB shared memory, {} CTA(s) per SM",
            self.n_tiles,
            self.stages,
            self.smem / 1024,
            self.ctas_per_sm
        )
    }

    fn poison(&mut self, _gpu: &Gpu, _byte: u8) -> Result<()> {
        Ok(())
    }

    fn intermediates(&self, _gpu: &Gpu, _n_rows: usize) -> Result<Intermediates> {
        Ok(Intermediates::default())
    }

    fn written_past_end(&self, _: &Gpu, _: u8, _: usize) -> Result<Vec<&'static str>> {
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_depth_follows_the_device() {
        let h200 = DeviceLimits::default();
        let turing = DeviceLimits {
            cc: 75,
            sm_count: 68,
            max_smem_optin: 64 * 1024,
            smem_per_sm: 64 * 1024,
        };
        for g in [WType::Q2_0, WType::Iq2Xxs, WType::Iq3S, WType::Q8_0] {
            for d in DOWN_TYPES {
                let s = MoeShape {
                    gate_up_type: g,
                    down_type: d,
                    ..MoeShape::REFERENCE
                };
                let (n, per_sm) = stages(&s, &h200).expect("fits an H200");
                assert!(n >= 2 && per_sm >= 1, "{g:?}/{d:?}: {n} stages x {per_sm}");
                let total = FusedSmem::new(g, d, s.ffn, n).total;
                assert!(per_sm * (total + RESERVED_SMEM_PER_CTA) <= h200.smem_per_sm as usize);
                assert!(eligible(&s, &h200).is_ok());
                if let Some((n, _)) = stages(&s, &turing) {
                    assert_eq!(n, 1);
                }
            }
        }
        let wide = MoeShape {
            ffn: 8192,
            ..MoeShape::REFERENCE
        };
        assert!(eligible(&wide, &h200).is_err());
        let iq_down = MoeShape {
            ffn: 1024,
            down_type: WType::Iq2Xxs,
            ..MoeShape::REFERENCE
        };
        assert!(eligible(&iq_down, &h200).is_err());
    }
}
