//! One MoE layer's prefill on the GPU, the per-group MMQ path: route -> scatter -> gate/up ->
//! swiglu_quant -> down -> combine, with the layer's weights resident on the device and every
//! scratch buffer owned here, allocated once for a token capacity.
//!
//! After the scatter the host reads the expert bounds (E + 1 integers) back and builds the tile
//! list, so that the product grids hold exactly one CTA per 64 rows of an expert and none for an
//! expert without rows; that read is the one synchronisation of a layer, and its cost is part
//! of every layer time reported.

use cudarc::driver::{CudaEvent, CudaSlice};
use gpu::layout::{MMQ_BLOCK_VALUES, MmqParams, MmqTile, ScatterParams, padded_k};

use crate::device::{Gpu, dptr};
use crate::error::{DriverOp, Error, Result, shape};
use crate::moe::shape::{GateUp, LayerWeights, MoeShape, Routing};
use crate::moe::swiglu_quant::{SwigluQuantPlan, SwigluQuantShape};
use crate::moe::{combine, mmq, route, scatter};
use crate::reference::route::RouteParams as Rule;

const BLOCK_BYTES: usize = 144;

/// A layer's expert weights on the device, read where they lie by the products.
pub struct DeviceLayer {
    pub shape: MoeShape,
    /// gate (or the merged gate_up tensor) and up (None when merged).
    gate: CudaSlice<u8>,
    up: Option<CudaSlice<u8>>,
    down: CudaSlice<u8>,
}

impl DeviceLayer {
    /// Copies the layer's weights to the device once.
    pub fn upload(gpu: &Gpu, w: &LayerWeights, shape: &MoeShape) -> Result<Self> {
        w.check(shape)?;
        mmq::check_product("moe_gate_up", 2 * shape.ffn, shape.hidden)?;
        mmq::check_product("moe_down", shape.hidden, shape.ffn)?;
        let (gate, up) = match &w.gate_up {
            GateUp::Separate { gate, up } => (gpu.upload(gate.data)?, Some(gpu.upload(up.data)?)),
            GateUp::Merged(t) => (gpu.upload(t.data)?, None),
        };
        Ok(DeviceLayer {
            shape: *shape,
            gate,
            up,
            down: gpu.upload(w.down.data)?,
        })
    }

    pub fn bytes(&self) -> usize {
        self.gate.len() + self.up.as_ref().map_or(0, |u| u.len()) + self.down.len()
    }
}

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

/// GPU milliseconds of each stage of one prefill, from events recorded between them.
#[derive(Clone, Copy, Debug, Default)]
pub struct StageTimes {
    pub route: f64,
    pub scatter: f64,
    /// Reading the bounds back and uploading the tile list (host round trip).
    pub tiles: f64,
    pub gate_up: f64,
    pub swiglu_quant: f64,
    pub down: f64,
    pub combine: f64,
    pub total: f64,
}

/// The stages' names, in order, for tables.
pub const STAGES: [&str; 7] = [
    "route",
    "scatter",
    "tiles (host)",
    "gate_up",
    "swiglu_quant",
    "down",
    "combine",
];

impl StageTimes {
    pub fn as_array(&self) -> [f64; 7] {
        [
            self.route,
            self.scatter,
            self.tiles,
            self.gate_up,
            self.swiglu_quant,
            self.down,
            self.combine,
        ]
    }
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
    tiles: CudaSlice<MmqTileRepr>,
    gu: CudaSlice<f32>,
    hq: CudaSlice<u8>,
    dm: CudaSlice<f32>,
    out: CudaSlice<f32>,
    events: Vec<CudaEvent>,
    /// Tiles of the last run (host copy).
    pub tile_list: Vec<MmqTile>,
    /// Token count of the routing last uploaded (and still in `ids` / `weights`).
    uploaded: Option<usize>,
}

/// `MmqTile` as 4 u32 for cudarc buffers.
type MmqTileRepr = [u32; 4];

impl Prefill {
    /// Allocates every buffer for up to `cap_tokens` tokens (poisoned with 0xa5 so unwritten
    /// bytes show).
    pub fn new(gpu: &Gpu, shape: &MoeShape, cap_tokens: usize) -> Result<Self> {
        shape.check()?;
        scatter::check(cap_tokens, shape.top_k, shape.n_experts, shape.hidden)?;
        let rows = (cap_tokens * shape.top_k).max(1);
        let p = 0xa5;
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
                shape.hidden_padded() / MMQ_BLOCK_VALUES * rows * BLOCK_BYTES,
                p,
            )?,
            tiles: gpu.alloc_filled(mmq::max_tiles(rows, shape.n_experts), p)?,
            gu: gpu.alloc_filled(rows * 2 * shape.ffn, p)?,
            hq: gpu.alloc_filled(
                padded_k(shape.ffn) / MMQ_BLOCK_VALUES * rows * BLOCK_BYTES,
                p,
            )?,
            dm: gpu.alloc_filled(rows * shape.hidden, p)?,
            out: gpu.alloc_filled(cap_tokens.max(1) * shape.hidden, p)?,
            events: (0..8).map(|_| ev()).collect::<Result<_>>()?,
            tile_list: Vec::new(),
            uploaded: None,
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
        gpu.fill(&mut self.gu, byte)?;
        gpu.fill(&mut self.hq, byte)?;
        gpu.fill(&mut self.dm, byte)?;
        gpu.fill(&mut self.out, byte)
    }

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

    fn record(&self, gpu: &Gpu, i: usize) -> Result<()> {
        self.events[i].record(&gpu.stream).op("cuEventRecord")
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
            n_tokens: n_tokens as u32,
            top_k: s.top_k as u32,
            n_experts: s.n_experts as u32,
            hidden: s.hidden as u32,
        };
        // SAFETY: every buffer was allocated for cap_tokens >= n_tokens with the sizes
        // ScatterParams describes; ids come from moe_route or a checked routing.
        unsafe { scatter::launch(gpu, sp)? };
        self.record(gpu, 2)?;
        // 3. tiles: bounds back to the host, tile list up.
        let bounds = gpu.download(&self.bounds)?;
        self.tile_list = mmq::tiles_from_bounds(&bounds);
        let n_tiles = self.tile_list.len();
        if n_tiles > 0 {
            let raw: Vec<MmqTileRepr> = self
                .tile_list
                .iter()
                .map(|t| [t.expert, t.col_start, t.n_cols, 0])
                .collect();
            st.memcpy_htod(&raw, &mut self.tiles)
                .op("cuMemcpyHtoD tiles")?;
        }
        self.record(gpu, 3)?;
        // 4. gate/up
        let gu_p = MmqParams {
            w0: dptr(&layer.gate, st),
            w1: layer.up.as_ref().map_or(0, |u| dptr(u, st)),
            w_expert_bytes: (if layer.up.is_some() { s.ffn } else { 2 * s.ffn }
                * s.gate_up_type.row_bytes(s.hidden)) as u64,
            x: dptr(&self.xq, st),
            tiles: dptr(&self.tiles, st),
            out: dptr(&self.gu, st),
            out_rows: 0,
            row_bytes: s.gate_up_type.row_bytes(s.hidden) as u32,
            n_split: if layer.up.is_some() {
                s.ffn as u32
            } else {
                2 * s.ffn as u32
            },
            n: 2 * s.ffn as u32,
            k: s.hidden as u32,
            n_cols_x: n_rows as u32,
            out_stride: 2 * s.ffn as u32,
        };
        // SAFETY: weights resident with the layer's shape (checked at upload); xq holds
        // hidden_padded / 128 chunks of n_rows blocks; tiles hold n_tiles valid tiles; gu holds
        // n_rows rows of 2 ffn.
        unsafe {
            mmq::launch(
                gpu,
                gpu.kernels.gate_up_mmq(s.gate_up_type),
                "launch moe_gate_up_mmq",
                gu_p,
                n_tiles,
            )?
        };
        self.record(gpu, 4)?;
        // 5. swiglu_quant
        let sq = SwigluQuantShape::dense(n_rows, s.ffn, false);
        SwigluQuantPlan::new(&sq, s.down_type.id())?.launch(gpu, &self.gu, &mut self.hq)?;
        self.record(gpu, 5)?;
        // 6. down
        let dn_p = MmqParams {
            w0: dptr(&layer.down, st),
            w1: 0,
            w_expert_bytes: (s.hidden * s.down_type.row_bytes(s.ffn)) as u64,
            x: dptr(&self.hq, st),
            tiles: dptr(&self.tiles, st),
            out: dptr(&self.dm, st),
            out_rows: dptr(&self.row_dst, st),
            row_bytes: s.down_type.row_bytes(s.ffn) as u32,
            n_split: s.hidden as u32,
            n: s.hidden as u32,
            k: s.ffn as u32,
            n_cols_x: n_rows as u32,
            out_stride: s.hidden as u32,
        };
        // SAFETY: as for gate/up; row_dst maps each row to its (token, slot) row of dm.
        unsafe {
            mmq::launch(
                gpu,
                gpu.kernels.down_mmq(s.down_type),
                "launch moe_down_mmq",
                dn_p,
                n_tiles,
            )?
        };
        self.record(gpu, 6)?;
        // 7. combine
        combine::launch(
            gpu,
            n_tokens,
            s.top_k,
            s.hidden,
            &self.dm,
            &self.weights,
            &mut self.out,
        )?;
        self.record(gpu, 7)?;
        gpu.sync()?;
        let ms = |a: usize, b: usize| {
            self.events[a]
                .elapsed_ms(&self.events[b])
                .map(|v| v as f64)
                .op("cuEventElapsedTime")
        };
        Ok(StageTimes {
            route: ms(0, 1)?,
            scatter: ms(1, 2)?,
            tiles: ms(2, 3)?,
            gate_up: ms(3, 4)?,
            swiglu_quant: ms(4, 5)?,
            down: ms(5, 6)?,
            combine: ms(6, 7)?,
            total: ms(0, 7)?,
        })
    }

    /// The stage outputs of the last run, downloaded (for comparison with the reference).
    pub fn outputs(&self, gpu: &Gpu) -> Result<GpuStages> {
        let s = &self.shape;
        let rows = self.n_tokens * s.top_k;
        let cut_u32 = |v: Vec<u32>, n: usize| v.into_iter().take(n).collect::<Vec<_>>();
        let cut_f32 = |v: Vec<f32>, n: usize| v.into_iter().take(n).collect::<Vec<_>>();
        let xq_chunks = s.hidden_padded() / MMQ_BLOCK_VALUES;
        let hq_chunks = padded_k(s.ffn) / MMQ_BLOCK_VALUES;
        let blocks = |buf: &CudaSlice<u8>, chunks: usize| -> Result<Vec<u8>> {
            // The buffer is laid out for cap rows; the run used n_cols = rows.
            let v = gpu.download(buf)?;
            Ok(v[..chunks * rows * BLOCK_BYTES].to_vec())
        };
        Ok(GpuStages {
            ids: cut_u32(gpu.download(&self.ids)?, rows),
            weights: cut_f32(gpu.download(&self.weights)?, rows),
            expert_bounds: gpu.download(&self.bounds)?,
            row_token: cut_u32(gpu.download(&self.row_token)?, rows),
            row_dst: cut_u32(gpu.download(&self.row_dst)?, rows),
            xq: blocks(&self.xq, xq_chunks)?,
            gu: cut_f32(gpu.download(&self.gu)?, rows * 2 * s.ffn),
            hq: blocks(&self.hq, hq_chunks)?,
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
            s.hidden_padded() / MMQ_BLOCK_VALUES * rows * BLOCK_BYTES,
            &mut bad,
        );
        tail_u8("gu", f32s(&self.gu)?, rows * 2 * s.ffn * 4, &mut bad);
        tail_u8(
            "hq",
            gpu.download(&self.hq)?,
            padded_k(s.ffn) / MMQ_BLOCK_VALUES * rows * BLOCK_BYTES,
            &mut bad,
        );
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
    pub gu: Vec<f32>,
    pub hq: Vec<u8>,
    pub dm: Vec<f32>,
    pub out: Vec<f32>,
}
