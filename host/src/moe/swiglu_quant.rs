//! Launchers of `moe_swiglu_quant` (fused) and of the two-kernel form `moe_swiglu_f32` +
//! `moe_quantize_q8_1` (gpu/src/moe/swiglu_quant.rs). CPU twin: host/src/reference/swiglu_quant.rs.

use cudarc::driver::{CudaSlice, LaunchConfig};
use gpu::layout::{
    ActLayout, MMQ_BLOCK_VALUES, Q8_1_MMQ_BYTES, QuantizeParams, SWIGLU_QUANT_ROWS,
    SWIGLU_QUANT_THREADS, SwigluParams, SwigluQuantParams, act_layout_of_ggml_type,
    quant_block_warps,
};

use crate::device::{Gpu, KArg, MAX_GRID_X, dptr};
use crate::error::{DriverOp, Error, Result, shape};
use crate::ggml::type_name;

use crate::problem::SwigluQuantShape;

const BLOCK_BYTES: usize = Q8_1_MMQ_BYTES;

/// Grid and checked limits of `moe_swiglu_quant` (and of the two-kernel form, same shape).
#[derive(Clone, Copy, Debug)]
pub struct SwigluQuantPlan {
    pub shape: SwigluQuantShape,
    /// None when there are no rows (nothing is launched).
    pub config: Option<LaunchConfig>,
    /// The two-kernel form's grid (a CTA per row).
    two_kernel: Option<LaunchConfig>,
}

impl SwigluQuantPlan {
    /// Checks `shape` and the down type `down_type_id` (ggml type id) whose activations this
    /// writes: the kernel writes the D4 layout only.
    pub fn new(s: &SwigluQuantShape, down_type_id: u32) -> Result<Self> {
        let k = "moe_swiglu_quant";
        match act_layout_of_ggml_type(down_type_id) {
            Some(ActLayout::D4) => {}
            Some(other) => {
                return Err(Error::Unsupported(format!(
                    "{k} writes q8_1 activations in MMQ's D4 layout, but the down type {} reads \
                     the {other:?} layout",
                    type_name(down_type_id)
                )));
            }
            None => {
                return Err(Error::Unsupported(format!(
                    "{k}: the down type {} is not run by MMQ (no q8_1 activation layout)",
                    type_name(down_type_id)
                )));
            }
        }

        if s.ffn == 0 || !s.ffn.is_multiple_of(MMQ_BLOCK_VALUES) {
            return Err(shape(
                format!("{k}: ffn"),
                s.ffn,
                "it must be a positive multiple of 128",
            ));
        }
        if s.ffn > 1 << 24 {
            return Err(shape(
                format!("{k}: ffn"),
                s.ffn,
                "at most 16,777,216 supported",
            ));
        }
        // The fused kernel's CTAs: a chunk of SWIGLU_QUANT_ROWS rows each.
        let ctas = s.n_rows.div_ceil(SWIGLU_QUANT_ROWS) * s.out_chunks();
        if ctas > MAX_GRID_X {
            return Err(shape(
                format!("{k}: rows"),
                s.n_rows,
                format!(
                    "at most {MAX_GRID_X} CTAs of {SWIGLU_QUANT_ROWS} rows x 128 values (a CUDA \
                     grid's x dimension)"
                ),
            ));
        }
        if s.gu_stride < 2 * s.ffn || !s.gu_stride.is_multiple_of(4) {
            return Err(shape(
                format!("{k}: gate/up row stride"),
                s.gu_stride,
                format!(
                    "it must be a multiple of 4 and at least 2 * ffn = {}",
                    2 * s.ffn
                ),
            ));
        }
        if s.gu_stride > u32::MAX as usize {
            return Err(shape(
                format!("{k}: gate/up row stride"),
                s.gu_stride,
                "it must fit in u32",
            ));
        }
        if s.n_rows > s.n_cols {
            return Err(shape(
                format!("{k}: rows"),
                s.n_rows,
                format!("the output holds {} rows", s.n_cols),
            ));
        }
        if s.n_rows > MAX_GRID_X || s.n_cols > u32::MAX as usize {
            return Err(shape(
                format!("{k}: rows"),
                s.n_rows,
                format!("at most {MAX_GRID_X} rows per launch"),
            ));
        }
        let config = (s.n_rows > 0).then_some(LaunchConfig {
            grid_dim: (ctas as u32, 1, 1),
            block_dim: (SWIGLU_QUANT_THREADS as u32, 1, 1),
            shared_mem_bytes: 0,
        });
        let two_kernel = (s.n_rows > 0).then_some(LaunchConfig {
            grid_dim: (s.n_rows as u32, 1, 1),
            block_dim: (32 * quant_block_warps(s.ffn) as u32, 1, 1),
            shared_mem_bytes: 0,
        });
        Ok(SwigluQuantPlan {
            shape: *s,
            config,
            two_kernel,
        })
    }

    fn check_buffers(&self, gu: &CudaSlice<f32>, out: &CudaSlice<u8>) -> Result<()> {
        if gu.len() < self.shape.gu_len() {
            return Err(Error::Buffer {
                what: "gate/up",
                got: gu.len(),
                want: self.shape.gu_len(),
            });
        }
        let want = self.shape.out_blocks() * BLOCK_BYTES;
        if out.len() < want {
            return Err(Error::Buffer {
                what: "q8_1 out (bytes)",
                got: out.len(),
                want,
            });
        }
        Ok(())
    }

    /// Queues the fused kernel: `out` (bytes of D4 blocks) = q8_1(swiglu(gu)).
    pub fn launch(&self, gpu: &Gpu, gu: &CudaSlice<f32>, out: &mut CudaSlice<u8>) -> Result<()> {
        self.check_buffers(gu, out)?;
        let Some(cfg) = self.config else {
            return Ok(());
        };
        let s = &self.shape;
        let p = KArg(SwigluQuantParams {
            gu: dptr(gu, &gpu.stream),
            out: dptr(out, &gpu.stream),
            n_rows: s.n_rows as u32,
            ffn: s.ffn as u32,
            gu_stride: s.gu_stride as u32,
            n_cols: s.n_cols as u32,
            interleaved: s.interleaved as u32,
            out_chunks: s.out_chunks() as u32,
        });
        // SAFETY: the plan checked the shape against the kernel's limits and check_buffers the
        // buffer sizes against the shape; the kernel reads gu and writes out within them.
        unsafe { gpu.launch(&gpu.stream, &gpu.kernels.moe_swiglu_quant, cfg, &p) }
            .op("launch moe_swiglu_quant")?;
        Ok(())
    }

    /// f32 elements of the H scratch buffer of the two-kernel form.
    pub fn h_len(&self) -> usize {
        self.shape.n_rows * self.shape.ffn
    }

    /// Queues the two-kernel form: `h` = swiglu(gu) as f32, then `out` = q8_1(h) (padded rows
    /// only: `moe_quantize_q8_1` writes ggml's padding chunks).
    pub fn launch_two_kernel(
        &self,
        gpu: &Gpu,
        gu: &CudaSlice<f32>,
        h: &mut CudaSlice<f32>,
        out: &mut CudaSlice<u8>,
    ) -> Result<()> {
        if !self.shape.padded {
            return Err(Error::Unsupported(
                "swiglu_quant's two-kernel form writes padded rows only".into(),
            ));
        }
        self.check_buffers(gu, out)?;
        if h.len() < self.h_len() {
            return Err(Error::Buffer {
                what: "h",
                got: h.len(),
                want: self.h_len(),
            });
        }
        let Some(cfg) = self.two_kernel else {
            return Ok(());
        };
        let s = &self.shape;
        let sw = KArg(SwigluParams {
            gu: dptr(gu, &gpu.stream),
            h: dptr(h, &gpu.stream),
            n_rows: s.n_rows as u32,
            ffn: s.ffn as u32,
            gu_stride: s.gu_stride as u32,
            interleaved: s.interleaved as u32,
        });
        // SAFETY: as in `launch`; h holds n_rows * ffn f32 (checked above).
        unsafe { gpu.launch(&gpu.stream, &gpu.kernels.moe_swiglu_f32, cfg, &sw) }
            .op("launch moe_swiglu_f32")?;
        let qp = KArg(QuantizeParams {
            x: dptr(h, &gpu.stream),
            out: dptr(out, &gpu.stream),
            n_rows: s.n_rows as u32,
            k: s.ffn as u32,
            x_stride: s.ffn as u32,
            n_cols: s.n_cols as u32,
        });
        // SAFETY: h is n_rows rows of ffn f32, out was checked for padded_k(ffn)/128 * n_cols
        // blocks; the grid is the same as moe_swiglu_f32's.
        unsafe { gpu.launch(&gpu.stream, &gpu.kernels.moe_quantize_q8_1, cfg, &qp) }
            .op("launch moe_quantize_q8_1")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_checks_shapes() {
        let ok = SwigluQuantShape::dense(37, 640, false);
        let p = SwigluQuantPlan::new(&ok, 42).unwrap();
        // 16 rows a CTA, a CTA per chunk: 3 x 8 (padded), 3 x 5 (the layer's H).
        assert_eq!(p.config.unwrap().grid_dim, (24, 1, 1));
        let layer = SwigluQuantPlan::new(&SwigluQuantShape::layer(37, 640), 42).unwrap();
        assert_eq!(layer.config.unwrap().grid_dim, (15, 1, 1));
        // 2^31 - 1 rows of 40 chunks: more CTAs than a grid's x dimension takes (2^27 of 5
        // chunks do not).
        assert!(SwigluQuantPlan::new(&SwigluQuantShape::layer(MAX_GRID_X, 640), 42).is_ok());
        let many = SwigluQuantShape::layer(MAX_GRID_X, 8 * 640);
        let e = SwigluQuantPlan::new(&many, 42).unwrap_err().to_string();
        assert!(e.contains("CTAs of 16 rows"), "{e}");
        assert_eq!(p.two_kernel.unwrap().grid_dim, (37, 1, 1));
        assert_eq!(p.config.unwrap().block_dim, (256, 1, 1));
        // Two-kernel form: one warp per 128-value data chunk, at most 8: 5 for n_ff 640.
        assert_eq!(p.two_kernel.unwrap().block_dim, (160, 1, 1));
        for (ffn, threads) in [(128, 32), (1024, 256), (2048, 256)] {
            let p = SwigluQuantPlan::new(&SwigluQuantShape::dense(3, ffn, true), 42).unwrap();
            assert_eq!(p.two_kernel.unwrap().block_dim.0, threads, "{ffn}");
        }
        assert_eq!(ok.out_blocks(), 8 * 37);
        // The layer's H: the 5 data chunks of 640 values, no padding chunks.
        assert_eq!(SwigluQuantShape::layer(37, 640).out_blocks(), 5 * 37);
        assert_eq!(
            SwigluQuantShape::layer(37, 640).fused_bytes(),
            (37 * 1280 * 4 + 5 * 37 * 144) as u64
        );
        assert!(
            SwigluQuantPlan::new(&SwigluQuantShape::dense(0, 640, false), 42)
                .unwrap()
                .config
                .is_none()
        );
        assert!(SwigluQuantPlan::new(&SwigluQuantShape::dense(1, 100, false), 42).is_err());
        assert!(
            SwigluQuantPlan::new(
                &SwigluQuantShape {
                    gu_stride: 1279,
                    ..ok
                },
                42
            )
            .is_err()
        );
        assert!(SwigluQuantPlan::new(&SwigluQuantShape { n_cols: 36, ..ok }, 42).is_err());
        // Q4_K (12) reads DS4, Q2_K (10) D2S6, F32 (0) is not an MMQ type: refused.
        for t in [12, 10, 0] {
            let e = SwigluQuantPlan::new(&ok, t).unwrap_err().to_string();
            assert!(e.contains("moe_swiglu_quant"), "{e}");
        }
        for t in gpu::layout::WType::ALL {
            assert!(SwigluQuantPlan::new(&ok, t.id()).is_ok());
        }
    }
}
