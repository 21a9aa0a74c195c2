//! The fused int8 expert path: one launch for the whole layer's experts, one CTA per expert and
//! up to 32 or 64 of its rows (largest expert first), gate/up -> SwiGLU -> q8_1 H in shared
//! memory -> down. The width follows the rows per expert of the run (see [`tile_nt`]).
//! Kernels: gpu/src/moe/fused/ (`moe_experts_<gate_up>_fused`).

use cudarc::driver::sys::CUfunction_attribute as FnAttr;
use cudarc::driver::{CudaSlice, LaunchConfig};
use gpu::layout::{
    FUSED_COL_UNIT, FUSED_MAX_STAGES, FUSED_MIN_STAGES, FUSED_NT, FUSED_ROWS, FUSED_THREADS,
    FusedParams, FusedSmem, MMQ_KSTEP, SM_REGISTERS, WType, fused_sub_steps,
};

use super::{
    Bounds, ExpertIo, ExpertPlan, Intermediates, check_rows, max_tiles, rows_per_routed_expert,
    tiles_from_bounds, upload_tiles,
};
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
/// CTAs per SM with at least 3 K steps in flight (when the kernel's registers allow two,
/// `max_per_sm`),
/// else the deepest that fits one CTA; one stage below sm_80 (no `cp.async`: the copies are
/// synchronous, deeper buffers buy nothing). The one function the shared-memory size, the
/// launch and the report take the depth from.
pub fn stages(
    s: &MoeShape,
    dev: &DeviceLimits,
    nt: usize,
    max_per_sm: usize,
) -> Option<(usize, usize)> {
    let smem = |n| FusedSmem::new(s.gate_up_type, s.down_type, s.ffn, n, nt).total;
    let fits = |n: usize, per_sm: usize| {
        smem(n) <= dev.max_smem_optin as usize
            && per_sm * (smem(n) + RESERVED_SMEM_PER_CTA) <= dev.smem_per_sm as usize
    };
    if dev.cc < 80 {
        return fits(1, 1).then_some((1, 1));
    }
    // Two CTAs per SM are worth it with at least 3 K steps of 128 values in flight (2 stages of
    // 256-value blocks).
    let min_two = 3usize.div_ceil(fused_sub_steps(s.gate_up_type)).max(2);
    for per_sm in [2, 1].into_iter().filter(|&n| n <= max_per_sm.max(1)) {
        let min = if per_sm == 2 {
            min_two
        } else {
            FUSED_MIN_STAGES
        };
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
    if stages(s, dev, FUSED_NT[0], 2).is_none() {
        return Err(shape(
            "fused path: shared memory per CTA (bytes)",
            FusedSmem::new(s.gate_up_type, s.down_type, s.ffn, 1, FUSED_NT[0]).total,
            format!(
                "at most {} on this device (H of ffn {} for {FUSED_COL_UNIT} rows is part of it)",
                dev.max_smem_optin, s.ffn
            ),
        ));
    }
    Ok(())
}

/// Environment variable forcing the fused tile width in n-tiles per warp (1: 32 rows, 2: 64),
/// for measurements; the bytes are the same either way.
pub const NT_VAR: &str = "MOE_FUSED_NT";

/// Environment variable choosing whether the fused kernels bring each next stage's weight rows
/// into the L2 (`FusedParams::prefetch`): `off` (the default) or `on`. The same bytes either way.
pub const PREFETCH_VAR: &str = "MOE_FUSED_PREFETCH";

/// [`PREFETCH_VAR`]'s values, the default first.
const PREFETCH_NAMES: [(&str, bool); 2] = [("off", false), ("on", true)];

/// [`PREFETCH_VAR`]'s value (`None`: unset, off); an unknown value is an error, not ignored.
pub fn prefetch_from(v: Option<&str>) -> Result<bool> {
    crate::env::choice(PREFETCH_VAR, v, &PREFETCH_NAMES)
}

/// The tile width of a run, in n-tiles per warp: 64-row tiles once the routed experts average
/// at least `WIDE_ROWS` rows (decode amortised over more columns), else 32 (fewer idle columns,
/// more CTAs). `forced` (from `MOE_FUSED_NT`, read once by the plan) overrides it.
pub fn tile_nt(bounds: &[u32], widths: &[usize], forced: Option<usize>) -> usize {
    if let Some(nt) = forced.filter(|n| widths.contains(n)) {
        return nt;
    }
    if rows_per_routed_expert(bounds) >= WIDE_ROWS && widths.contains(&2) {
        2
    } else {
        1
    }
}

/// Rows per routed expert from which the 64-row tiles are used (BENCHMARKS.md).
pub const WIDE_ROWS: usize = 24;

/// One tile width's launch shape.
#[derive(Clone, Copy, Debug)]
struct Width {
    nt: usize,
    stages: usize,
    ctas_per_sm: usize,
    smem: usize,
}

/// The fused path's plan: the tile list for up to `cap_rows` rows and the launch shapes.
pub struct FusedPlan {
    shape: MoeShape,
    widths: Vec<Width>,
    /// Index into `widths` of the last prepared run.
    chosen: usize,
    /// The width `MOE_FUSED_NT` forces, read when the plan is built.
    forced_nt: Option<usize>,
    /// Each next stage's weight rows prefetched into the L2 (`MOE_FUSED_PREFETCH`, read when the
    /// plan is built; [`FusedPlan::set_prefetch`]).
    prefetch: bool,
    tiles: CudaSlice<[u32; 4]>,
    n_tiles: usize,
    cap_rows: usize,
}

impl FusedPlan {
    pub fn new(gpu: &Gpu, s: &MoeShape, cap_rows: usize) -> Result<Self> {
        let dev = gpu.limits();
        eligible(s, &dev)?;
        let k = gpu.kernels.format(s.gate_up_type)?;
        // CTAs per SM the kernels' registers allow (65,536 registers per SM).
        let by_regs = |f: &cudarc::driver::CudaFunction| -> Result<usize> {
            let regs = f
                .get_attribute(FnAttr::CU_FUNC_ATTRIBUTE_NUM_REGS)
                .op("cuFuncGetAttribute (registers)")?;
            Ok(SM_REGISTERS / (regs.max(1) as usize * FUSED_THREADS))
        };
        // The kernels of the layer's numerics (the Q2_0 shared-d ones where a product takes
        // that step).
        let sd = s.shared_d_any();
        let reg_caps = [
            by_regs(k.fused_kernel(false, sd)?.0)?,
            by_regs(k.fused_kernel(true, sd)?.0)?,
        ];
        let widths: Vec<Width> = FUSED_NT
            .iter()
            .zip(reg_caps)
            .filter_map(|(&nt, cap)| {
                stages(s, &dev, nt, cap).map(|(stages, ctas_per_sm)| Width {
                    nt,
                    stages,
                    ctas_per_sm,
                    smem: FusedSmem::new(s.gate_up_type, s.down_type, s.ffn, stages, nt).total,
                })
            })
            .collect();
        let smem = widths
            .iter()
            .map(|w| w.smem)
            .max()
            .ok_or(Error::Unsupported(
                "the fused path does not fit this device's shared memory".into(),
            ))?;
        let k = gpu.kernels.format(s.gate_up_type)?;
        for f in [k.fused_kernel(false, sd)?.0, k.fused_kernel(true, sd)?.0] {
            f.set_attribute(
                FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem as i32,
            )
            .op("cuFuncSetAttribute (fused kernel shared memory)")?;
        }
        let rows = cap_rows.max(1);
        Ok(FusedPlan {
            shape: *s,
            widths,
            chosen: 0,
            forced_nt: std::env::var(NT_VAR).ok().and_then(|v| v.parse().ok()),
            prefetch: crate::env::choice_from_env(PREFETCH_VAR, &PREFETCH_NAMES)?,
            tiles: gpu.alloc_filled(max_tiles(rows, s.n_experts, FUSED_COL_UNIT), 0xa5)?,
            n_tiles: 0,
            cap_rows: rows,
        })
    }

    /// Whether the kernels prefetch each next stage's weight rows into the L2 (tests and
    /// measurements; the plan starts with `MOE_FUSED_PREFETCH`'s choice).
    pub fn set_prefetch(&mut self, on: bool) {
        self.prefetch = on;
    }
}

impl ExpertPlan for FusedPlan {
    fn path(&self) -> ExpertPath {
        ExpertPath::Fused
    }

    fn stages(&self) -> &'static [&'static str] {
        &["experts (fused)"]
    }

    fn prepare(&mut self, gpu: &Gpu, bounds: &mut Bounds) -> Result<()> {
        let bounds = bounds.host(gpu)?;
        let nts: Vec<usize> = self.widths.iter().map(|w| w.nt).collect();
        let nt = tile_nt(bounds, &nts, self.forced_nt);
        self.chosen = nts.iter().position(|&n| n == nt).unwrap_or(0);
        let list = tiles_from_bounds(bounds, FUSED_COL_UNIT * self.widths[self.chosen].nt, true);
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
        check_rows("fused path", io.n_rows, self.cap_rows)?;
        if self.n_tiles > 0 {
            let width = self.widths[self.chosen];
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
                n_cols_x: io.n_rows as u32,
                stages: width.stages as u32,
                down_type: s.down_type.id(),
                nt: width.nt as u32,
                prefetch: self.prefetch as u32,
                _pad: 0,
            });
            let cfg = LaunchConfig {
                grid_dim: (self.n_tiles as u32, 1, 1),
                block_dim: (FUSED_THREADS as u32, 1, 1),
                shared_mem_bytes: width.smem as u32,
            };
            let (func, name) = k.fused_kernel(width.nt == 2, s.shared_d_any())?;
            // SAFETY: weights resident with the layer's shape and readable 16 bytes past their
            // ends (DeviceLayer::upload); xq holds hidden_padded / 128 chunks of n_rows blocks;
            // the tiles cover rows < n_rows at the kernel's width; row_dst and dm hold n_rows
            // rows; the shared memory is the plan's layout, opted into at construction.
            unsafe { gpu.launch(&gpu.stream, func, cfg, &p) }.op(name)?;
        }
        mark(0)
    }

    fn describe(&self) -> String {
        let w = self.widths[self.chosen];
        format!(
            "fused: {} CTAs of up to {} rows, {} copy stages{}, {} KB shared memory, {} CTA(s) per \
             SM{}",
            self.n_tiles,
            FUSED_COL_UNIT * w.nt,
            w.stages,
            if self.prefetch {
                " (the next stage's weights prefetched into the L2)"
            } else {
                ""
            },
            w.smem / 1024,
            w.ctas_per_sm,
            if self.shape.shared_d_any() {
                ", the q2_0-shared-d numerics"
            } else {
                ""
            }
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
            ptx_arch: 75,
        };
        for g in [WType::Q2_0, WType::Iq2Xxs, WType::Iq3S, WType::Q8_0] {
            for d in DOWN_TYPES {
                let s = MoeShape {
                    gate_up_type: g,
                    down_type: d,
                    ..MoeShape::REFERENCE
                };
                for nt in FUSED_NT {
                    let (n, per_sm) = stages(&s, &h200, nt, 2).expect("fits an H200");
                    assert!(n >= 2 && per_sm >= 1, "{g:?}/{d:?}: {n} stages x {per_sm}");
                    let total = FusedSmem::new(g, d, s.ffn, n, nt).total;
                    assert!(per_sm * (total + RESERVED_SMEM_PER_CTA) <= h200.smem_per_sm as usize);
                    if let Some((n, _)) = stages(&s, &turing, nt, 2) {
                        assert_eq!(n, 1);
                    }
                }
                assert!(eligible(&s, &h200).is_ok());
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

    #[test]
    fn prefetch_from_its_variable() {
        assert!(!prefetch_from(None).unwrap());
        assert!(!prefetch_from(Some("off")).unwrap());
        assert!(prefetch_from(Some("on")).unwrap());
        let e = prefetch_from(Some("1")).unwrap_err().to_string();
        assert!(e.contains(PREFETCH_VAR) && e.contains("`1`"), "{e}");
    }

    #[test]
    fn width_follows_rows_per_expert() {
        // 3 experts with rows, 1 without.
        let few = [0u32, 10, 10, 30, 40];
        let many = [0u32, 100, 100, 250, 400];
        assert_eq!(tile_nt(&few, &[1, 2], None), 1);
        assert_eq!(tile_nt(&many, &[1, 2], None), 2);
        assert_eq!(tile_nt(&many, &[1], None), 1);
        assert_eq!(tile_nt(&[0], &[1, 2], None), 1);
        assert_eq!(tile_nt(&few, &[1, 2], Some(2)), 2);
        assert_eq!(tile_nt(&many, &[1, 2], Some(3)), 2);
    }
}
