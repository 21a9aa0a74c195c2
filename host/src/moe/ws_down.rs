//! WS_FAST against the default weight-stationary down kernel, on a reference-shape layer's down
//! product (the `ws-down` CLI command and the `ws_down` bench): the same run through two
//! pipelines whose down product is a weight-stationary tier (16 or 32 rows), one with WS_FAST;
//! the
//! gate/up product runs on MMQ in both (it is not what is compared). The two `dm` buffers must
//! be byte-identical; the down stage's GPU time is what is timed.

use gpu::layout::WType;

use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::moe::expert::split::{Product, SplitOptions};
use crate::moe::expert::ws::WsOptions;
use crate::moe::layer::DeviceLayer;
use crate::moe::path::split_plan;
use crate::moe::prefill::{Prefill, RoutingInput};
use crate::problem::MoeShape;
use crate::synth::{self, Popularity, SyntheticLayer};

/// The reference shape with a chosen down type (gate/up Q2_0), on the device.
pub struct WsDownLayer {
    pub shape: MoeShape,
    layer: DeviceLayer,
}

impl WsDownLayer {
    pub fn new(gpu: &Gpu, down: WType, seed: u64) -> Result<Self> {
        let s = MoeShape {
            gate_up_type: WType::Q2_0,
            down_type: down,
            ..MoeShape::REFERENCE
        };
        let layer = SyntheticLayer::new(s, false, seed)?;
        Ok(WsDownLayer {
            shape: s,
            layer: DeviceLayer::upload(gpu, &layer.weights(), &s)?,
        })
    }
}

/// A layer, its activations and routing, and the default and WS_FAST pipelines.
pub struct WsDownCase<'a> {
    pub n_tokens: usize,
    pub rows_per_routed_expert: usize,
    layer: &'a DeviceLayer,
    routing: crate::problem::Routing,
    x: cudarc::driver::CudaSlice<f32>,
    pipelines: [Prefill; 2],
}

impl<'a> WsDownCase<'a> {
    /// `n_tokens` tokens of `layer` routed by `pop`; the down product on the `cols`-row tier
    /// (one of `gpu::layout::WS_FAST_COLS`).
    pub fn new(
        gpu: &Gpu,
        layer: &'a WsDownLayer,
        n_tokens: usize,
        pop: Popularity,
        seed: u64,
        cols: usize,
    ) -> Result<Self> {
        let s = layer.shape;
        if !gpu::layout::WS_FAST_COLS.contains(&cols) {
            return Err(Error::Unsupported(format!(
                "WS_FAST exists for tiers of {:?} rows, not {cols}",
                gpu::layout::WS_FAST_COLS
            )));
        }
        let tier = gpu::layout::WS_COLS.iter().position(|&c| c == cols);
        let r = synth::routing(n_tokens, s.n_experts, s.top_k, pop, seed ^ n_tokens as u64);
        let pipe = |fast: bool| -> Result<Prefill> {
            let o = SplitOptions {
                ws: WsOptions { fast, tier },
                ..SplitOptions::from_env()?
            };
            let products = [Product::Mmq, Product::Ws];
            let plan = split_plan(gpu, &s, n_tokens * s.top_k, products, o)?;
            let mut pf = Prefill::with_plan(gpu, &s, n_tokens, plan)?;
            pf.upload_routing(gpu, &r)?;
            Ok(pf)
        };
        let pipelines = [pipe(false)?, pipe(true)?];
        let x = gpu.upload(&synth::normal_f32(seed ^ 3, n_tokens * s.hidden, 1.0))?;
        let used = {
            let mut seen = vec![false; s.n_experts];
            r.ids.iter().for_each(|&e| seen[e as usize] = true);
            seen.iter().filter(|&&b| b).count().max(1)
        };
        Ok(WsDownCase {
            n_tokens,
            rows_per_routed_expert: n_tokens * s.top_k / used,
            layer: &layer.layer,
            routing: r,
            x,
            pipelines,
        })
    }

    /// One run of the default (`fast` false) or WS_FAST pipeline; the down stage's GPU ms.
    pub fn run(&mut self, gpu: &Gpu, fast: bool) -> Result<f64> {
        let pf = &mut self.pipelines[fast as usize];
        let st = pf.run(
            gpu,
            self.layer,
            &self.x,
            self.n_tokens,
            RoutingInput::Uploaded,
        )?;
        st.names
            .iter()
            .position(|&n| n == "down")
            .map(|i| st.ms[i])
            .ok_or_else(|| Error::Unsupported("the split plan has no down stage".into()))
    }

    /// Runs both pipelines once (outputs poisoned first) and counts the bytes of `dm` that
    /// differ between them: (differing, total).
    pub fn compare(&mut self, gpu: &Gpu) -> Result<(usize, usize)> {
        let mut dms = Vec::new();
        for fast in [false, true] {
            let pf = &mut self.pipelines[fast as usize];
            pf.poison(gpu, 0xa5)?;
            pf.upload_routing(gpu, &self.routing)?;
            self.run(gpu, fast)?;
            dms.push(self.pipelines[fast as usize].outputs(gpu)?.dm);
        }
        let (a, b): (&[u8], &[u8]) = (bytemuck::cast_slice(&dms[0]), bytemuck::cast_slice(&dms[1]));
        Ok((a.iter().zip(b).filter(|(x, y)| x != y).count(), a.len()))
    }
}
