//! A pipeline's buffers and settings: every scratch buffer allocated once for a token capacity
//! (poisoned, so unwritten bytes show), poisoned again by tests, the token buffer resized where
//! the scatter's forms change; whether runs time each stage.

use cudarc::driver::CudaSlice;
use gpu::layout::{MMQ_BLOCK_VALUES, Q8_1_MMQ_BYTES};

use super::Prefill;
use super::stages::{POST_STAGES, PRE_STAGES};
use crate::device::Gpu;
use crate::error::{DriverOp, Result};
use crate::moe::expert::ExpertPlan;
use crate::moe::path::{self, PathChoice};
use crate::moe::scatter::ScatterForms;
use crate::moe::{combine, scatter};
use crate::problem::MoeShape;

/// The byte every buffer is filled with when it is allocated, so that bytes no run wrote show.
const FILL: u8 = 0xa5;

/// The scatter's token buffer for runs of up to `cap_tokens` under `forms` (poisoned), 16 bytes
/// where no run gathers (only a run of as many rows as the gather takes uses it).
fn token_buffer(
    gpu: &Gpu,
    shape: &MoeShape,
    cap_tokens: usize,
    forms: ScatterForms,
) -> Result<CudaSlice<u8>> {
    let rows = (cap_tokens * shape.top_k).max(1);
    let bytes = if forms.gathers(rows) {
        scatter::token_blocks_bytes(cap_tokens, shape.hidden)
    } else {
        16
    };
    gpu.alloc_filled(bytes, FILL)
}

impl Prefill {
    /// Allocates every buffer for up to `cap_tokens` tokens (filled with 0xa5, `FILL`, so
    /// unwritten bytes show), with the plan of expert path `path` (a forced path or `auto`).
    pub fn new(
        gpu: &Gpu,
        shape: &MoeShape,
        cap_tokens: usize,
        path: impl Into<PathChoice>,
    ) -> Result<Self> {
        shape.check()?;
        scatter::check(cap_tokens, shape.top_k, shape.n_experts, shape.hidden)?;
        combine::check(cap_tokens, shape.hidden)?;
        let rows = (cap_tokens * shape.top_k).max(1);
        let plan = path::plan_for(path.into(), gpu, shape, rows)?;
        Self::with_plan(gpu, shape, cap_tokens, plan)
    }

    /// A pipeline around a plan built by the caller (e.g. a split plan with chosen options); the
    /// plan must have been built for `shape` and at least `cap_tokens * top_k` rows.
    pub fn with_plan(
        gpu: &Gpu,
        shape: &MoeShape,
        cap_tokens: usize,
        plan: Box<dyn ExpertPlan>,
    ) -> Result<Self> {
        shape.check()?;
        scatter::check(cap_tokens, shape.top_k, shape.n_experts, shape.hidden)?;
        combine::check(cap_tokens, shape.hidden)?;
        let rows = (cap_tokens * shape.top_k).max(1);
        let scatter_forms = ScatterForms::from_env()?;
        let p = FILL;
        let ev = || {
            gpu.ctx
                .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
                .op("cuEventCreate")
        };
        Ok(Prefill {
            shape: *shape,
            cap_tokens,
            n_tokens: 0,
            ids: gpu.alloc_filled(rows, p)?,
            weights: gpu.alloc_filled(rows, p)?,
            chunk_counts: gpu
                .alloc_filled(scatter::chunk_counts_len(cap_tokens, shape.n_experts), p)?,
            bounds: gpu.alloc_filled(shape.n_experts + 1, p)?,
            row_token: gpu.alloc_filled(rows, p)?,
            row_dst: gpu.alloc_filled(rows, p)?,
            row_of: gpu.alloc_filled(rows, p)?,
            xq: gpu.alloc_filled(
                shape.hidden_padded() / MMQ_BLOCK_VALUES * rows * Q8_1_MMQ_BYTES,
                p,
            )?,
            // (Only a run of as many rows as the gather takes uses it.)
            xt: token_buffer(gpu, shape, cap_tokens, scatter_forms)?,
            dm: gpu.alloc_filled(rows * shape.hidden, p)?,
            out: gpu.alloc_filled(cap_tokens.max(1) * shape.hidden, p)?,
            events: (0..PRE_STAGES.len() + plan.max_stages() + POST_STAGES.len() + 1)
                .map(|_| ev())
                .collect::<Result<_>>()?,
            plan,
            uploaded: None,
            read_back: false,
            stage_events: true,
            scatter_forms,
        })
    }

    /// Fills every stage buffer with `byte` (tests poison them before a run).
    pub fn poison(&mut self, gpu: &Gpu, byte: u8) -> Result<()> {
        self.uploaded = None;
        gpu.fill(&mut self.ids, byte)?;
        gpu.fill(&mut self.weights, byte)?;
        gpu.fill(&mut self.bounds, byte)?;
        gpu.fill(&mut self.row_token, byte)?;
        gpu.fill(&mut self.row_dst, byte)?;
        gpu.fill(&mut self.row_of, byte)?;
        gpu.fill(&mut self.xq, byte)?;
        gpu.fill(&mut self.xt, byte)?;
        self.plan.poison(gpu, byte)?;
        gpu.fill(&mut self.dm, byte)?;
        gpu.fill(&mut self.out, byte)
    }

    /// Whether runs time each stage (on by default). Off, a run records only the events at its
    /// start and end, and its `StageTimes` has the layer's time and no stages: an event between
    /// stages costs the stream about a microsecond (BENCHMARKS.md).
    pub fn set_stage_events(&mut self, on: bool) {
        self.stage_events = on;
    }

    /// Sets the scatter's form per run (from the environment by default; tests set each form).
    pub fn set_scatter_forms(&mut self, gpu: &Gpu, forms: ScatterForms) -> Result<()> {
        self.xt = token_buffer(gpu, &self.shape, self.cap_tokens, forms)?;
        self.scatter_forms = forms;
        Ok(())
    }
}
