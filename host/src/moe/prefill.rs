//! One MoE layer's prefill on the GPU: route -> scatter -> tiles -> expert path -> combine,
//! with the layer's weights resident on the device and every scratch buffer of the pipeline
//! owned here, allocated once for a token capacity. What happens between the scatter and the
//! combine is the expert path's (`moe/expert/`, chosen in `moe/path.rs`): this file knows only
//! its stage names.
//!
//! After the scatter the path builds its work list from the expert bounds (E + 1 integers), so
//! that no CTA is launched for an expert without rows: on the device where it can (MMQ for both
//! products), else on the host from the bounds read back - a synchronisation inside the layer,
//! whose cost is part of every layer time reported (the "tiles" stage).

use cudarc::driver::{CudaEvent, CudaSlice};
use gpu::layout::ScatterParams;

use crate::device::{Gpu, dptr};
use crate::error::{DriverOp, Error, Result, shape};
use crate::moe::expert::{Bounds, ExpertIo, ExpertPlan};
use crate::moe::layer::DeviceLayer;
use crate::moe::path::ExpertPath;
use crate::moe::scatter::ScatterForms;
use crate::moe::{combine, route, scatter};
use crate::problem::{MoeShape, RouteRule as Rule, Routing};

mod buffers;
mod readback;
mod stages;
pub use readback::GpuStages;
pub use stages::StageTimes;
use stages::{POST_STAGES, PRE_STAGES};

/// Where a prefill's routing comes from.
pub enum RoutingInput<'a> {
    /// Router logits `[n_tokens][n_experts]` on the device, routed by `moe_route`.
    Logits(&'a CudaSlice<f32>, Rule),
    /// A routing computed elsewhere (uploaded: ids and weights only).
    Given(&'a Routing),
    /// The routing last uploaded with [`Prefill::upload_routing`] (benches keep the upload out
    /// of the timed layer, as llama.cpp's layer figures have no routing in them).
    Uploaded,
}

/// The pipeline and its scratch buffers, for layers of one shape up to `cap_tokens` tokens.
pub struct Prefill {
    pub shape: MoeShape,
    pub cap_tokens: usize,
    pub n_tokens: usize,
    ids: CudaSlice<u32>,
    weights: CudaSlice<f32>,
    chunk_counts: CudaSlice<u32>,
    bounds: CudaSlice<u32>,
    row_token: CudaSlice<u32>,
    row_dst: CudaSlice<u32>,
    row_of: CudaSlice<u32>,
    xq: CudaSlice<u8>,
    /// Each token's q8_1 blocks (the scatter's step 4), copied to its rows of `xq`.
    xt: CudaSlice<u8>,
    dm: CudaSlice<f32>,
    out: CudaSlice<f32>,
    events: Vec<CudaEvent>,
    /// The expert path's plan.
    plan: Box<dyn ExpertPlan>,
    /// Token count of the routing last uploaded (and still in `ids` / `weights`).
    uploaded: Option<usize>,
    /// Whether the last run's path read the expert bounds back to the host.
    read_back: bool,
    /// Whether runs record an event between stages (else only at the start and the end: the
    /// layer's time without the events between its stages, `StageTimes` then has no stages).
    stage_events: bool,
    /// The scatter's form per run (`MOE_SCATTER_GATHER`, `MOE_SCATTER_ONE`, read once: `xt` is
    /// sized by it).
    scatter_forms: ScatterForms,
}

/// Records `ev` on the stream where `on`.
fn record_if(ev: &CudaEvent, gpu: &Gpu, on: bool) -> Result<()> {
    if on {
        ev.record(&gpu.stream).op("cuEventRecord")?;
    }
    Ok(())
}

impl Prefill {
    /// Uploads a routing for later runs with [`RoutingInput::Uploaded`].
    pub fn upload_routing(&mut self, gpu: &Gpu, r: &Routing) -> Result<()> {
        if r.n_tokens > self.cap_tokens || r.top_k != self.shape.top_k {
            return Err(shape(
                "routing tokens",
                r.n_tokens,
                format!("at most {} with top-{}", self.cap_tokens, self.shape.top_k),
            ));
        }
        r.check(self.shape.n_experts)?;
        if !r.ids.is_empty() {
            gpu.stream
                .memcpy_htod(&r.ids, &mut self.ids)
                .op("cuMemcpyHtoD ids")?;
            gpu.stream
                .memcpy_htod(&r.weights, &mut self.weights)
                .op("cuMemcpyHtoD weights")?;
        }
        self.uploaded = Some(r.n_tokens);
        Ok(())
    }

    /// Records the event before pipeline stage `i` (route, scatter, tiles): the first always,
    /// the others where [`Prefill::set_stage_events`] left them on.
    fn record(&self, gpu: &Gpu, i: usize) -> Result<()> {
        record_if(&self.events[i], gpu, i == 0 || self.stage_events)
    }

    /// Runs one layer's prefill for `n_tokens` tokens of `x` (`[n_tokens][hidden]` f32 on the
    /// device). Returns the stage times (the call waits for the GPU at the end).
    pub fn run(
        &mut self,
        gpu: &Gpu,
        layer: &DeviceLayer,
        x: &CudaSlice<f32>,
        n_tokens: usize,
        routing: RoutingInput,
    ) -> Result<StageTimes> {
        let s = self.shape;
        if layer.shape != s {
            return Err(Error::Unsupported(format!(
                "the layer's shape {:?} is not the pipeline's {s:?}",
                layer.shape
            )));
        }
        if n_tokens > self.cap_tokens {
            return Err(shape(
                "prefill tokens",
                n_tokens,
                format!("the pipeline was made for at most {}", self.cap_tokens),
            ));
        }
        if x.len() < n_tokens * s.hidden {
            return Err(Error::Buffer {
                what: "x",
                got: x.len(),
                want: n_tokens * s.hidden,
            });
        }
        self.n_tokens = n_tokens;
        let n_rows = n_tokens * s.top_k;
        let st = &gpu.stream;
        self.record(gpu, 0)?;
        // 1. route
        match routing {
            RoutingInput::Logits(logits, rule) => {
                if rule.n_experts != s.n_experts || rule.top_k != s.top_k {
                    return Err(Error::Unsupported(
                        "routing rule does not match the layer".into(),
                    ));
                }
                self.uploaded = None;
                route::launch(
                    gpu,
                    &rule,
                    n_tokens,
                    logits,
                    &mut self.ids,
                    &mut self.weights,
                )?;
            }
            RoutingInput::Given(r) => {
                if r.n_tokens != n_tokens {
                    return Err(Error::Unsupported(format!(
                        "routing is for {} tokens, not {n_tokens}",
                        r.n_tokens
                    )));
                }
                self.upload_routing(gpu, r)?;
            }
            RoutingInput::Uploaded => {
                if self.uploaded != Some(n_tokens) {
                    return Err(Error::Unsupported(format!(
                        "no routing of {n_tokens} tokens was uploaded"
                    )));
                }
            }
        }
        self.record(gpu, 1)?;
        // 2. scatter
        let sp = ScatterParams {
            ids: dptr(&self.ids, st),
            chunk_counts: dptr(&self.chunk_counts, st),
            expert_bounds: dptr(&self.bounds, st),
            row_token: dptr(&self.row_token, st),
            row_dst: dptr(&self.row_dst, st),
            row_of: dptr(&self.row_of, st),
            x: dptr(x, st),
            xq: dptr(&self.xq, st),
            xt: dptr(&self.xt, st),
            n_tokens: n_tokens as u32,
            top_k: s.top_k as u32,
            n_experts: s.n_experts as u32,
            hidden: s.hidden as u32,
        };
        // SAFETY: every buffer was allocated for cap_tokens >= n_tokens with the sizes
        // ScatterParams describes; ids come from moe_route or a checked routing.
        // Where the scatter gathers, its quantizer and gather run on the side stream: joined
        // before the stage's event where stages are timed, else after the tile list, which
        // then runs beside the gather.
        let mut side = unsafe { scatter::launch(gpu, sp, self.scatter_forms)? };
        if self.stage_events {
            side.join()?;
        }
        self.record(gpu, 2)?;
        // 3. tiles: the path's work list (on the device, or from the bounds read back).
        let mut bounds = Bounds::new(&self.bounds, n_rows);
        self.plan.prepare(gpu, &mut bounds)?;
        self.read_back = bounds.read_back();
        side.join()?;
        self.record(gpu, 3)?;
        // 4. the expert path, between the scatter and the combine.
        let io = ExpertIo {
            xq: dptr(&self.xq, st),
            row_dst: dptr(&self.row_dst, st),
            dm: dptr(&self.dm, st),
            n_rows,
        };
        let n_path = self.plan.stages().len();
        {
            let (events, on) = (&self.events, self.stage_events);
            let mut mark = |i: usize| record_if(&events[4 + i], gpu, on);
            self.plan.launch(gpu, layer, &io, &mut mark)?;
        }
        // 5. combine
        combine::launch(
            gpu,
            n_tokens,
            s.top_k,
            s.hidden,
            &self.dm,
            &self.weights,
            &mut self.out,
        )?;
        let last = 4 + n_path;
        record_if(&self.events[last], gpu, true)?;
        gpu.sync()?;
        let ms = |a: usize, b: usize| {
            self.events[a]
                .elapsed_ms(&self.events[b])
                .map(|v| v as f64)
                .op("cuEventElapsedTime")
        };
        if !self.stage_events {
            return Ok(StageTimes {
                names: Vec::new(),
                ms: Vec::new(),
                total: ms(0, last)?,
            });
        }
        let names: Vec<&'static str> = PRE_STAGES
            .iter()
            .chain(self.plan.stages())
            .chain(POST_STAGES.iter())
            .copied()
            .collect();
        let ms_all = (0..last)
            .map(|i| ms(i, i + 1))
            .collect::<Result<Vec<_>>>()?;
        Ok(StageTimes {
            names,
            ms: ms_all,
            total: ms(0, last)?,
        })
    }

    /// The expert path of the last run (auto chooses per run).
    pub fn path(&self) -> ExpertPath {
        self.plan.path()
    }

    /// The name of the last run's path for tables (`ws+mmq` when a split plan mixes products).
    pub fn label(&self) -> String {
        self.plan.label()
    }

    /// Why the last run took its path, where the plan chooses per run (`auto`): "ws+mmq at 10
    /// rows per routed expert: ... (table: ...)".
    pub fn why(&self) -> Option<String> {
        self.plan.why()
    }

    /// The scatter's form at the last run (`ScatterForms::name`).
    pub fn scatter_form(&self) -> &'static str {
        self.scatter_forms.name(self.n_tokens * self.shape.top_k)
    }

    /// A line on the path's configuration and the last run's work items.
    pub fn describe(&self) -> String {
        self.plan.describe()
    }

    /// Whether the last run read the expert bounds back to the host (a synchronisation inside
    /// the layer) rather than building its work list on the device.
    pub fn read_back(&self) -> bool {
        self.read_back
    }
}
