//! The expert products as a layer of their own: everything between the scatter (q8_1 rows
//! per expert) and the combine (weighted sum of each token's down rows). A path is a plan -
//! built from the layer's shape and the device, owning its scratch buffers and its stage list -
//! behind [`ExpertPlan`]; `moe/prefill.rs` runs whichever plan `moe/path.rs` chose and knows
//! nothing of what is inside. Every path writes the same bytes into `dm`.
//!
//! Adding a path: a file here with a plan implementing [`ExpertPlan`], a variant of
//! `ExpertPath` and its arms in `path.rs` (eligibility, the plan's constructor). A path that
//! only brings new gate/up and down kernels (GU and H through global memory) is a `Product` of
//! the split plan (split.rs) instead.

pub mod auto;
pub mod fused;
pub mod mmq;
pub mod mmq_lists;
pub mod products;
pub mod split;
pub mod tiles;
pub mod ws;

pub use tiles::{TilePart, max_tiles, part_from_bounds, tiles_from_bounds, upload_tiles};

use cudarc::driver::CudaSlice;

use crate::device::{Gpu, dptr};
use crate::error::Result;
use crate::moe::layer::DeviceLayer;
use crate::moe::path::ExpertPath;

/// What the pipeline hands a path: device addresses of the scatter's outputs and of `dm`.
#[derive(Clone, Copy, Debug)]
pub struct ExpertIo {
    /// q8_1 D4 activations `[hidden_padded / 128][n_rows]`, compact (expert-sorted) rows.
    pub xq: u64,
    /// `[n_rows]`: compact row -> token * top_k + slot.
    pub row_dst: u64,
    /// `*mut f32` `[n_tokens * top_k][hidden]`: the down product's rows.
    pub dm: u64,
    /// Rows of this run (T * top_k).
    pub n_rows: usize,
}

/// Intermediate results a path leaves in global memory (tests compare them with the
/// reference); a fused path has none.
#[derive(Default)]
pub struct Intermediates {
    /// Gate/up product `[n_rows][2 ffn]` f32, compact order.
    pub gu: Option<Vec<f32>>,
    /// H as q8_1 D4 blocks `[padded(ffn) / 128][n_rows]`, raw bytes.
    pub hq: Option<Vec<u8>>,
}

/// The scatter's expert bounds (`[n_experts + 1]`) as a plan's `prepare` sees them: on the
/// device, and on the host only when a plan asks - reading them back waits for the GPU, the one
/// synchronisation inside a layer, so a plan that can build its work list on the device does
/// not ask.
pub struct Bounds<'a> {
    dev: &'a CudaSlice<u32>,
    host: Option<Vec<u32>>,
    /// Rows of this run (T * top_k).
    pub n_rows: usize,
}

impl<'a> Bounds<'a> {
    pub fn new(dev: &'a CudaSlice<u32>, n_rows: usize) -> Self {
        Bounds {
            dev,
            host: None,
            n_rows,
        }
    }

    /// The device address of the bounds.
    pub fn device(&self, gpu: &Gpu) -> u64 {
        dptr(self.dev, &gpu.stream)
    }

    /// The bounds on the host: read back (waiting for the scatter) at the first call.
    pub fn host(&mut self, gpu: &Gpu) -> Result<&[u32]> {
        if self.host.is_none() {
            self.host = Some(gpu.download(self.dev)?);
        }
        Ok(self.host.as_deref().unwrap_or_default())
    }

    /// Whether a plan read the bounds back.
    pub fn read_back(&self) -> bool {
        self.host.is_some()
    }
}

/// One expert path's plan for a layer shape and a row capacity.
pub trait ExpertPlan {
    fn path(&self) -> ExpertPath;
    /// The path's name for tables: `path().name()`, or e.g. `ws+mmq` for a split plan whose
    /// products differ.
    fn label(&self) -> String {
        self.path().name().to_string()
    }
    /// Why the last prepared run took this path, for a plan that chooses per run (auto).
    fn why(&self) -> Option<String> {
        None
    }
    /// Stage names in launch order of the last prepared run (for tables: "gate_up", ...).
    fn stages(&self) -> &'static [&'static str];
    /// The most stages any run of this plan has (the pipeline's event count).
    fn max_stages(&self) -> usize {
        self.stages().len()
    }
    /// Builds the work list from the expert bounds: on the device, or on the host from
    /// [`Bounds::host`] and uploaded (the pipeline's "tiles" stage).
    fn prepare(&mut self, gpu: &Gpu, bounds: &mut Bounds) -> Result<()>;
    /// Queues the stages; `mark(i)` records the end of stage i.
    fn launch(
        &mut self,
        gpu: &Gpu,
        layer: &DeviceLayer,
        io: &ExpertIo,
        mark: &mut dyn FnMut(usize) -> Result<()>,
    ) -> Result<()>;
    /// A line on how the plan is configured (tile width, stages, occupancy).
    fn describe(&self) -> String;
    /// Fills the plan's scratch buffers with `byte`.
    fn poison(&mut self, gpu: &Gpu, byte: u8) -> Result<()>;
    /// The intermediates of the last run of `n_rows` rows.
    fn intermediates(&self, gpu: &Gpu, n_rows: usize) -> Result<Intermediates>;
    /// Names of scratch buffers written past the last run's extent (guard check).
    fn written_past_end(&self, gpu: &Gpu, byte: u8, n_rows: usize) -> Result<Vec<&'static str>>;
}

/// Rows per routed expert of a run (its rows over the experts that have any): what the path
/// choice and the fused tile width follow.
pub fn rows_per_routed_expert(bounds: &[u32]) -> usize {
    let experts = bounds.windows(2).filter(|w| w[1] > w[0]).count().max(1);
    bounds.last().copied().unwrap_or(0) as usize / experts
}

/// Refuses a run of more rows than a plan was built for; `what` names the path.
pub fn check_rows(what: &str, n_rows: usize, cap_rows: usize) -> Result<()> {
    if n_rows > cap_rows {
        return Err(crate::error::shape(
            format!("{what} rows"),
            n_rows,
            format!("at most {cap_rows}"),
        ));
    }
    Ok(())
}

/// Checks one product's shape (`n` output features, `k` values per row) against the limits of a
/// kernel family with `rows` output features per CTA along grid.y and 128-value K steps; `what`
/// names the kernel.
pub fn check_product(what: &str, n: usize, k: usize, rows: usize) -> Result<()> {
    if n == 0 || !n.is_multiple_of(rows) || n / rows > 65_535 {
        return Err(crate::error::shape(
            format!("{what}: output features"),
            n,
            format!("a positive multiple of {rows}, at most {}", rows * 65_535),
        ));
    }
    let step = gpu::layout::MMQ_KSTEP;
    if k == 0 || !k.is_multiple_of(step) || k > u32::MAX as usize {
        return Err(crate::error::shape(
            format!("{what}: K"),
            k,
            format!("a positive multiple of {step}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_refuse_shapes_outside_the_kernels() {
        assert!(check_product("x", 1280, 2560, 128).is_ok());
        assert!(check_product("x", 1000, 2560, 128).is_err());
        assert!(check_product("x", 1280, 100, 128).is_err());
        assert!(check_product("x", 0, 2560, 128).is_err());
        assert!(check_product("x", 1280, 0, 128).is_err());
    }
}
