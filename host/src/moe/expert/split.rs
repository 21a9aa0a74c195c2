//! The split paths: gate/up product -> swiglu_quant -> down product, three launches, GU and H
//! through global memory. Each product runs on the per-group MMQ kernels (gpu/src/moe/mmq/:
//! one CTA per up to 64 rows of an expert, `mma`; the pipelined kernel where its shared memory
//! fits - its narrow shape, 16-row tiles, at few rows per expert - else the classic one,
//! expert/mmq.rs) or on the weight-stationary ones
//! (gpu/src/moe/ws/: a thread per weight row, integer `mad`, tiers of 16/32/64 rows, largest
//! expert first). `--path mmq` and `--path ws` fix both products; `--path auto` picks each
//! product per run (moe/expert/auto.rs). Both kernel families take `MmqParams` and give the
//! same bytes, so any mix gives the reference's. SwiGLU + q8_1 runs in `moe_swiglu_quant` or,
//! at many rows per expert, in the epilogue of the pipelined MMQ gate/up kernel (`SwigluAt`).
//! The choice types and options: products.rs; queueing the stages: split/launch.rs.

use cudarc::driver::CudaSlice;
use gpu::layout::{MMQ_BLOCK_VALUES, Q8_1_MMQ_BYTES, WS_COLS, WS_ROWS};

use super::{
    Bounds, ExpertIo, ExpertPlan, Intermediates, check_rows, max_tiles, rows_per_routed_expert,
    tiles_from_bounds, upload_tiles,
};
use crate::device::Gpu;
use crate::error::Result;
use crate::moe::expert::mmq::{MmqFlatWs, MmqKernel, MmqKernels, MmqOrder, MmqTma, MmqWeightL2};
use crate::moe::expert::mmq_lists::MmqLists;
use crate::moe::expert::tiles::TileRepr;
use crate::moe::expert::ws::{self, WsOptions};
use crate::moe::layer::DeviceLayer;
use crate::moe::path::ExpertPath;
use crate::problem::{MoeShape, SwigluQuantShape};

pub use super::products::{Product, SplitChoice, SplitOptions, SwigluAt, eligible};

mod launch;

/// A split plan: the tile lists of the product families it may use and the GU / H scratch for
/// up to `cap_rows` rows.
pub struct SplitPlan {
    shape: MoeShape,
    cap_rows: usize,
    choice: SplitChoice,
    ws: WsOptions,
    /// The MMQ tile lists, one per width the products may take (where MMQ may run).
    lists: Option<MmqLists>,
    tiles_ws: Option<CudaSlice<TileRepr>>,
    n_ws: usize,
    ws_tier: usize,
    /// The MMQ kernels the products may run.
    mmq: MmqKernels,
    /// The MMQ kernel of each product (gate/up, down) of the prepared run.
    mmq_kernels: [MmqKernel; 2],
    /// The pipelined MMQ kernels' CTA order (`MmqParams::order`).
    mmq_order: MmqOrder,
    /// Whether the pipelined MMQ kernels take the layer's tensor maps (`MmqParams::wmap0`).
    mmq_tma: MmqTma,
    /// The L2 priority of the narrow, tall and resident MMQ kernels' weight copies
    /// (`MmqParams::weight_l2`).
    mmq_weight_l2: MmqWeightL2,
    /// The flat kernels without the epilogue warp specialized (sm_90 modules only).
    mmq_flat_ws: MmqFlatWs,
    /// The shared memory of each product's resident form where the last launch ran it (its
    /// layout's `MmqResidentSmem::total`), else 0.
    resident_smem: [usize; 2],
    products: [Product; 2],
    swiglu: SwigluAt,
    /// Rows of the prepared run.
    run_rows: usize,
    gu: CudaSlice<f32>,
    hq: CudaSlice<u8>,
}

/// The stage of a gate/up product with the SwiGLU + q8_1 epilogue.
pub const GATE_UP_SWIGLU: &str = "gate_up+swiglu";

impl SplitPlan {
    /// `opts`: how the weight-stationary products run (WS_FAST, a forced tier) and which MMQ
    /// kernel runs (per run, or forced).
    pub fn new(
        gpu: &Gpu,
        s: &MoeShape,
        cap_rows: usize,
        choice: SplitChoice,
        opts: SplitOptions,
    ) -> Result<Self> {
        // Its MMQ and weight-stationary kernels compute MMQ's numerics only.
        s.mmq_numerics()?;
        let rows = cap_rows.max(1);
        let dev = gpu.limits();
        // The narrow gate/up kernel by tensor copies takes more rows per expert.
        let gate_up_tma = opts.tma == MmqTma::Auto && DeviceLayer::has_narrow_gate_up_maps(gpu, s);
        let mut mmq = MmqKernels::new(
            [s.gate_up_type, s.down_type],
            [s.hidden, s.ffn],
            &dev,
            opts.mmq,
            gate_up_tma,
        );
        mmq.set_tails(opts.tails);
        let lists = if choice.may_use(Product::Mmq) {
            eligible(Product::Mmq, s)?;
            for ks in mmq.all() {
                for (k, w) in ks.iter().zip([s.gate_up_type, s.down_type]) {
                    k.prepare(gpu.kernels.format(w)?, mmq.resident_smem(w))?;
                }
            }
            Some(MmqLists::new(gpu, rows, s.n_experts, &mmq)?)
        } else {
            None
        };
        let mmq_kernels = mmq.for_run(rows, s.n_experts);
        let tiles_ws = if choice.may_use(Product::Ws) {
            eligible(Product::Ws, s)?;
            let n = max_tiles(rows, s.n_experts, WS_COLS[0]);
            Some(gpu.alloc_filled(n, 0xa5)?)
        } else {
            None
        };
        let first = match &choice {
            SplitChoice::Fixed(f) => f[0],
            SplitChoice::PerRun(_) => Product::Mmq,
        };
        Ok(SplitPlan {
            shape: *s,
            cap_rows: rows,
            choice,
            ws: opts.ws,
            lists,
            tiles_ws,
            n_ws: 0,
            ws_tier: 0,
            mmq,
            mmq_kernels,
            resident_smem: [0; 2],
            products: [first; 2],
            mmq_order: opts.order,
            mmq_tma: opts.tma,
            // Only sm_90 modules' kernels take it (the others copy without a hint).
            mmq_weight_l2: if crate::ptx::has_bulk(gpu.info.ptx_arch) {
                opts.weight_l2
            } else {
                MmqWeightL2::Normal
            },
            mmq_flat_ws: if crate::ptx::has_bulk(gpu.info.ptx_arch) {
                opts.flat_ws
            } else {
                MmqFlatWs::Off
            },
            swiglu: opts.swiglu,
            run_rows: rows,
            gu: gpu.alloc_filled(rows * 2 * s.ffn, 0xa5)?,
            hq: gpu.alloc_filled(hq_bytes(s, rows), 0xa5)?,
        })
    }

    /// Whether the prepared run puts SwiGLU in the gate/up epilogue: chosen for its rows
    /// (`SwigluAt::epilogue`), and the gate/up product runs on a pipelined MMQ kernel (the
    /// classic one and the weight-stationary kernels have no such epilogue). Under
    /// `SwigluAt::Auto` not on the flat kernel: its CTAs make 32 features of H each, half the
    /// wide one's, so the epilogue's passes and barriers double; measured on the H200
    /// (BENCHMARKS.md, Q2_0 at T = 16,384) its gate/up with the epilogue 4.46 ms, without it
    /// 4.04 + 0.28 for `moe_swiglu_quant`.
    fn epilogue(&self) -> bool {
        let flat_auto =
            self.swiglu == SwigluAt::Auto && matches!(self.mmq_kernels[0], MmqKernel::Flat { .. });
        self.swiglu.epilogue(self.run_rows, self.shape.n_experts)
            && !flat_auto
            && self.products[0] == Product::Mmq
            && self.mmq_kernels[0] != MmqKernel::Classic
            && self.shape.ffn.is_multiple_of(MMQ_BLOCK_VALUES)
    }

    /// Whether product `which` (0 gate/up, 1 down) of the prepared run is the flat MMQ kernel
    /// without the epilogue in its warp-specialized form (`moe_mmq_flat_ws_<type>`: the plan's
    /// `MmqFlatWs::On`, sm_90 modules only).
    fn flat_ws_at(&self, which: usize) -> bool {
        self.mmq_flat_ws == MmqFlatWs::On
            && self.products[which] == Product::Mmq
            && matches!(self.mmq_kernels[which], MmqKernel::Flat { .. })
            && !(which == 0 && self.epilogue())
    }

    /// Whether product `which` (0 gate/up, 1 down) of the prepared run is a flat MMQ product
    /// whose tails run on the wide kernel (its flat list leaves them out: `MmqTails::Wide`).
    fn tails_at(&self, which: usize) -> bool {
        self.products[which] == Product::Mmq
            && matches!(self.mmq_kernels[which], MmqKernel::Flat { .. })
            && self.lists.as_ref().is_some_and(|l| l.has_tails())
    }

    fn lists(&self) -> &MmqLists {
        self.lists
            .as_ref()
            .expect("mmq lists exist when mmq may run")
    }

    /// The products of the last prepared run (gate/up, down).
    pub fn products(&self) -> [Product; 2] {
        self.products
    }

    /// The MMQ kernels of the products (gate/up, down) where MMQ runs (of the last prepared
    /// run; before one, of a run of the plan's row capacity).
    pub fn mmq_kernels(&self) -> [MmqKernel; 2] {
        self.mmq_kernels
    }
}

/// H's bytes for `rows` rows: the chunks that hold data only (`SwigluQuantShape::layer`).
fn hq_bytes(s: &MoeShape, rows: usize) -> usize {
    SwigluQuantShape::layer(rows, s.ffn).out_chunks() * rows * Q8_1_MMQ_BYTES
}

impl ExpertPlan for SplitPlan {
    fn path(&self) -> ExpertPath {
        self.products[0].path()
    }

    fn label(&self) -> String {
        crate::moe::tune::split_label(self.products)
    }

    fn stages(&self) -> &'static [&'static str] {
        if self.epilogue() {
            &[GATE_UP_SWIGLU, "down"]
        } else {
            &["gate_up", "swiglu_quant", "down"]
        }
    }

    fn max_stages(&self) -> usize {
        3
    }

    fn prepare(&mut self, gpu: &Gpu, bounds: &mut Bounds) -> Result<()> {
        check_rows("split path", bounds.n_rows, self.cap_rows)?;
        self.run_rows = bounds.n_rows;
        self.mmq_kernels = self.mmq.for_run(bounds.n_rows, self.shape.n_experts);
        if let SplitChoice::Fixed(f) = &self.choice
            && *f == [Product::Mmq; 2]
        {
            // MMQ for both products: the tile lists are built on the device, no read-back.
            self.products = *f;
            let (n_rows, n_experts, kernels) =
                (bounds.n_rows, self.shape.n_experts, self.mmq_kernels);
            let dev_bounds = bounds.device(gpu);
            let lists = self
                .lists
                .as_mut()
                .expect("mmq lists exist when mmq may run");
            // SAFETY: the bounds are the scatter's (n_experts + 1 entries, queued before);
            // n_rows <= cap_rows, the rows the lists were made for.
            unsafe { lists.build_on_device(gpu, dev_bounds, n_rows, n_experts, kernels)? };
            return Ok(());
        }
        let bounds = bounds.host(gpu)?;
        let rows = rows_per_routed_expert(bounds);
        self.products = match &self.choice {
            SplitChoice::Fixed(f) => *f,
            SplitChoice::PerRun(f) => f(rows),
        };
        if let Some(lists) = self.lists.as_mut() {
            let used = self.products.map(|p| p == Product::Mmq);
            lists.upload(gpu, bounds, self.mmq_kernels, used)?;
        }
        if let Some(t) = self.tiles_ws.as_mut()
            && self.products.contains(&Product::Ws)
        {
            self.ws_tier = self.ws.tier_for(rows);
            let list = tiles_from_bounds(bounds, WS_COLS[self.ws_tier], true);
            self.n_ws = upload_tiles(gpu, &list, t)?;
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
        self.queue(gpu, layer, io, mark)
    }

    fn describe(&self) -> String {
        let one = |p: Product, which: usize| match p {
            Product::Mmq => format!(
                "mmq ({}{} tiles of up to {} rows x {} features{}, {} kernel{})",
                if self.lists().on_device { "up to " } else { "" },
                self.lists().len(self.mmq_kernels[which]),
                self.mmq_kernels[which].cols(),
                self.mmq_kernels[which].rows(),
                if self.lists().on_device {
                    " built on the device"
                } else {
                    ""
                },
                self.mmq_kernels[which].name(),
                if self.resident_smem[which] > 0 {
                    ", resident"
                } else {
                    ""
                }
            ),
            Product::Ws => format!(
                "weight-stationary ({} tiles of up to {} rows x {WS_ROWS} features{})",
                self.n_ws,
                WS_COLS[self.ws_tier],
                if self.ws.fast && ws::fast_index(self.ws_tier).is_some() {
                    ", WS_FAST"
                } else {
                    ""
                }
            ),
        };
        let [g, d] = self.products;
        let (a, b) = (one(g, 0), one(d, 1));
        let mut swiglu = if self.epilogue() {
            "SwiGLU in the gate/up epilogue"
        } else {
            "SwiGLU in moe_swiglu_quant"
        }
        .to_string();
        if self.mmq_tma == MmqTma::Never && self.products.contains(&Product::Mmq) {
            swiglu += "; no tensor copies";
        }
        if self.mmq_weight_l2 == MmqWeightL2::First && self.products.contains(&Product::Mmq) {
            swiglu += "; weights evicted from the L2 first";
        }
        if (0..2).any(|which| self.flat_ws_at(which)) {
            swiglu += "; flat kernels warp specialized";
        }
        if (0..2).any(|which| self.tails_at(which)) {
            swiglu += &format!(
                "; the flat tiles' tails on the wide kernel ({}{} tiles)",
                if self.lists().on_device { "up to " } else { "" },
                self.lists().tails_len()
            );
        }
        if a == b {
            format!("{a} per product; {swiglu}")
        } else {
            format!("gate/up {a}, down {b}; {swiglu}")
        }
    }

    fn poison(&mut self, gpu: &Gpu, byte: u8) -> Result<()> {
        gpu.fill(&mut self.gu, byte)?;
        gpu.fill(&mut self.hq, byte)
    }

    fn intermediates(&self, gpu: &Gpu, n_rows: usize) -> Result<Intermediates> {
        let s = &self.shape;
        // With the SwiGLU epilogue (of the prepared run, the one launched) gate and up are never
        // stored.
        let gu = if self.epilogue() {
            None
        } else {
            let mut gu = gpu.download(&self.gu)?;
            gu.truncate(n_rows * 2 * s.ffn);
            Some(gu)
        };
        let mut hq = gpu.download(&self.hq)?;
        hq.truncate(hq_bytes(s, n_rows));
        Ok(Intermediates { gu, hq: Some(hq) })
    }

    fn written_past_end(&self, gpu: &Gpu, byte: u8, n_rows: usize) -> Result<Vec<&'static str>> {
        let s = &self.shape;
        let mut bad = Vec::new();
        let gu = gpu.download(&self.gu)?;
        if gu[n_rows * 2 * s.ffn..]
            .iter()
            .any(|v| v.to_bits() != u32::from_ne_bytes([byte; 4]))
        {
            bad.push("gu");
        }
        if gpu.download(&self.hq)?[hq_bytes(s, n_rows)..]
            .iter()
            .any(|&b| b != byte)
        {
            bad.push("hq");
        }
        Ok(bad)
    }
}
