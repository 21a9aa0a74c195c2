//! The problem both sides share - what one MoE layer's prefill works on: the shape, the
//! weights (borrowed where they lie), the routing and its rule, the expert-sorted row order
//! every product uses, and the swiglu_quant shape. The launchers (`moe/`) and the CPU reference
//! (`reference/`) import this module and never each other.

use gpu::layout::{BlockQ8_1Mmq, MMQ_BLOCK_VALUES, WType, padded_k};

use crate::error::{Error, Result, shape};
use crate::formats::ExpertTensor;

mod numerics;
pub use numerics::{NUMERICS_VAR, Numerics};

/// One MoE layer's dimensions and weight formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeShape {
    pub n_experts: usize,
    pub top_k: usize,
    /// Model width: gate/up K and down N.
    pub hidden: usize,
    /// Expert FFN width: gate/up N (each) and down K.
    pub ffn: usize,
    pub gate_up_type: WType,
    pub down_type: WType,
    /// The float epilogue's numerics (MMQ's by default; [`Numerics`]).
    pub numerics: Numerics,
}

/// The gate/up formats of the project's 18 target pairs (README, "the 18 pairs").
pub const GATE_UP_TYPES: [WType; 6] = [
    WType::Iq2Xxs,
    WType::Iq2Xs,
    WType::Iq2S,
    WType::Iq3Xxs,
    WType::Iq3S,
    WType::Q2_0,
];
/// The down formats of the 18 target pairs (those that run at the reference FFN of 640).
pub const DOWN_TYPES: [WType; 3] = [WType::Q2_0, WType::Iq4Nl, WType::Q8_0];

impl MoeShape {
    /// The reference shape: E = 512, top-10, hidden 2560, FFN 640, the canonical Q2_0 pack.
    pub const REFERENCE: MoeShape = MoeShape {
        n_experts: 512,
        top_k: 10,
        hidden: 2560,
        ffn: 640,
        gate_up_type: WType::Q2_0,
        down_type: WType::Q2_0,
        numerics: Numerics::Mmq,
    };

    /// Checks everything the kernels and the reference rely on.
    pub fn check(&self) -> Result<()> {
        if self.n_experts == 0 || self.n_experts > 1 << 16 {
            return Err(shape(
                "expert count",
                self.n_experts,
                "1 to 65,536 supported",
            ));
        }
        if self.top_k == 0 || self.top_k > self.n_experts || self.top_k > 32 {
            return Err(shape(
                "top-k",
                self.top_k,
                format!("1 to min(32, experts = {})", self.n_experts),
            ));
        }
        for (what, k, w) in [
            ("hidden (gate/up K)", self.hidden, self.gate_up_type),
            ("ffn (down K)", self.ffn, self.down_type),
        ] {
            if k == 0 || k % MMQ_BLOCK_VALUES != 0 || k % w.block_values() != 0 {
                return Err(shape(
                    what,
                    k,
                    format!(
                        "it must be a positive multiple of 128 and of {}'s block of {}",
                        w.name(),
                        w.block_values()
                    ),
                ));
            }
            if k > 1 << 20 {
                return Err(shape(what, k, "at most 1,048,576 supported"));
            }
        }
        Ok(())
    }

    /// One line for reports: `E=512 top-10 hidden 2560 FFN 640, q2_0 gate/up, q2_0 down`,
    /// followed by `, q2_0-shared-d numerics` where that variant changes a product.
    pub fn summary(&self) -> String {
        format!(
            "E={} top-{} hidden {} FFN {}, {} gate/up, {} down{}",
            self.n_experts,
            self.top_k,
            self.hidden,
            self.ffn,
            self.gate_up_type.name(),
            self.down_type.name(),
            self.numerics_note()
        )
    }

    /// `, q2_0-shared-d numerics` where that variant changes a product of this layer, else
    /// nothing: what reports add to a layer's types.
    pub fn numerics_note(&self) -> String {
        if self.shared_d_any() {
            format!(", {} numerics", self.numerics.name())
        } else {
            String::new()
        }
    }

    /// This shape in `numerics`.
    pub fn with_numerics(self, numerics: Numerics) -> MoeShape {
        MoeShape { numerics, ..self }
    }

    /// Whether a product of this layer takes the Q2_0 shared-d step (`Numerics::shared_d`):
    /// then only the fused path computes it.
    pub fn shared_d_any(&self) -> bool {
        self.numerics.shared_d(self.gate_up_type) || self.numerics.shared_d(self.down_type)
    }

    /// Err where a product of this layer takes the Q2_0 shared-d step, which only the fused
    /// path computes: for the paths whose kernels compute MMQ's numerics only (MMQ and
    /// weight-stationary products).
    pub fn mmq_numerics(&self) -> Result<()> {
        if !self.shared_d_any() {
            return Ok(());
        }
        Err(Error::Unsupported(format!(
            "the {} numerics run on the fused path only; this path computes MMQ's",
            self.numerics.name()
        )))
    }

    /// Values of a quantized activation row of the gate/up product (hidden, padded).
    pub fn hidden_padded(&self) -> usize {
        padded_k(self.hidden)
    }

    /// int8 multiply-adds x 2 of the three expert products for `n_tokens` tokens.
    pub fn ops(&self, n_tokens: usize) -> u64 {
        2 * (n_tokens * self.top_k) as u64
            * (2 * self.ffn * self.hidden + self.hidden * self.ffn) as u64
    }

    /// Bytes of all experts' weights (gate, up, down).
    pub fn weight_bytes(&self) -> u64 {
        let e = self.n_experts as u64;
        e * (2 * self.ffn * self.gate_up_type.row_bytes(self.hidden)
            + self.hidden * self.down_type.row_bytes(self.ffn)) as u64
    }
}

/// Gate and up weights: two tensors `[n_experts][ffn][hidden]`, or one merged tensor
/// `[n_experts][2 ffn][hidden]` whose rows `0..ffn` are gate and `ffn..2 ffn` up.
#[derive(Clone, Copy, Debug)]
pub enum GateUp<'a> {
    Separate {
        gate: ExpertTensor<'a>,
        up: ExpertTensor<'a>,
    },
    Merged(ExpertTensor<'a>),
}

impl<'a> GateUp<'a> {
    /// Row `n` (0..2 ffn) of the gate/up product of expert `e`: gate rows then up rows.
    pub fn row(&self, e: usize, n: usize) -> &'a [u8] {
        match self {
            GateUp::Separate { gate, up } => {
                if n < gate.n_rows {
                    gate.row(e, n)
                } else {
                    up.row(e, n - gate.n_rows)
                }
            }
            GateUp::Merged(t) => t.row(e, n),
        }
    }

    pub fn wtype(&self) -> WType {
        match self {
            GateUp::Separate { gate, .. } => gate.wtype,
            GateUp::Merged(t) => t.wtype,
        }
    }
}

/// One layer's expert weights.
#[derive(Clone, Copy, Debug)]
pub struct LayerWeights<'a> {
    pub gate_up: GateUp<'a>,
    pub down: ExpertTensor<'a>,
}

impl<'a> LayerWeights<'a> {
    /// Checks the tensors against the shape.
    pub fn check(&self, s: &MoeShape) -> Result<()> {
        s.check()?;
        let want = |t: &ExpertTensor, what: &str, w: WType, n: usize, k: usize| -> Result<()> {
            if t.wtype != w || t.n_experts != s.n_experts || t.n_rows != n || t.k != k {
                return Err(Error::Unsupported(format!(
                    "{what} tensor is {} [{} experts x {} x {}], the layer needs {} [{} x {} x {}]",
                    t.wtype.name(),
                    t.n_experts,
                    t.n_rows,
                    t.k,
                    w.name(),
                    s.n_experts,
                    n,
                    k
                )));
            }
            Ok(())
        };
        match &self.gate_up {
            GateUp::Separate { gate, up } => {
                want(gate, "gate", s.gate_up_type, s.ffn, s.hidden)?;
                want(up, "up", s.gate_up_type, s.ffn, s.hidden)?;
            }
            GateUp::Merged(t) => want(t, "merged gate_up", s.gate_up_type, 2 * s.ffn, s.hidden)?,
        }
        want(&self.down, "down", s.down_type, s.hidden, s.ffn)
    }
}

/// Each token's top-k experts and their weights, `[n_tokens][top_k]`, slot order as selected.
#[derive(Clone, Debug, PartialEq)]
pub struct Routing {
    pub n_tokens: usize,
    pub top_k: usize,
    pub ids: Vec<u32>,
    pub weights: Vec<f32>,
}

impl Routing {
    /// Checks ids are in range and distinct per token.
    pub fn check(&self, n_experts: usize) -> Result<()> {
        let n = self.n_tokens * self.top_k;
        if self.ids.len() != n || self.weights.len() != n {
            return Err(shape(
                "routing entries",
                self.ids.len(),
                format!("{} tokens x top-{} = {n}", self.n_tokens, self.top_k),
            ));
        }
        for t in 0..self.n_tokens {
            let row = &self.ids[t * self.top_k..(t + 1) * self.top_k];
            for (s, &e) in row.iter().enumerate() {
                if e as usize >= n_experts {
                    return Err(shape(
                        format!("routing: token {t} slot {s} expert id"),
                        e,
                        format!("fewer than {n_experts} experts"),
                    ));
                }
                if row[..s].contains(&e) {
                    return Err(Error::Unsupported(format!(
                        "routing: token {t} selects expert {e} twice"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// The (token, slot) rows sorted by expert, tokens ascending within an expert (as
/// `mm_ids_helper`, docs/ggml-reference.md §7.3). Row c of the products ("compact" order) is
/// `(row_token[c], row_slot[c])`; expert e owns rows `expert_bounds[e] .. expert_bounds[e + 1]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowOrder {
    pub expert_bounds: Vec<u32>,
    pub row_token: Vec<u32>,
    pub row_slot: Vec<u32>,
}

impl RowOrder {
    pub fn from_routing(r: &Routing, n_experts: usize) -> RowOrder {
        let mut counts = vec![0u32; n_experts + 1];
        for &e in &r.ids {
            counts[e as usize + 1] += 1;
        }
        for e in 0..n_experts {
            counts[e + 1] += counts[e];
        }
        let mut next = counts.clone();
        let n = r.ids.len();
        let (mut row_token, mut row_slot) = (vec![0u32; n], vec![0u32; n]);
        for t in 0..r.n_tokens {
            for s in 0..r.top_k {
                let e = r.ids[t * r.top_k + s] as usize;
                let c = next[e] as usize;
                next[e] += 1;
                row_token[c] = t as u32;
                row_slot[c] = s as u32;
            }
        }
        RowOrder {
            expert_bounds: counts,
            row_token,
            row_slot,
        }
    }

    pub fn n_rows(&self) -> usize {
        self.row_token.len()
    }

    /// Rows of expert e.
    pub fn rows_of(&self, e: usize) -> std::ops::Range<usize> {
        self.expert_bounds[e] as usize..self.expert_bounds[e + 1] as usize
    }
}

/// Parameters of the routing rule.
#[derive(Clone, Copy, Debug)]
pub struct RouteRule {
    pub n_experts: usize,
    pub top_k: usize,
    /// `expert_weights_norm`.
    pub norm: bool,
    /// `expert_weights_scale` (applied unless 0 or 1).
    pub scale: f32,
}

/// What `swiglu_quant` runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwigluQuantShape {
    /// Rows of the gate/up product (T * top_k in a layer).
    pub n_rows: usize,
    /// Expert FFN width: gate and up have `ffn` values each; a multiple of 128.
    pub ffn: usize,
    /// f32 elements from one gate/up row to the next (>= 2 * ffn, a multiple of 4).
    pub gu_stride: usize,
    /// Gate/up interleaved element by element (`g0 u0 g1 u1 ..`) instead of two halves.
    pub interleaved: bool,
    /// Rows of the output buffer (>= n_rows).
    pub n_cols: usize,
    /// The output rows padded as ggml pads them (`padded_k(ffn)` values, zero chunks past `ffn`);
    /// else only the `ffn / 128` chunks that hold data (the layer's H: its down product reads
    /// no K past `ffn`).
    pub padded: bool,
}

impl SwigluQuantShape {
    /// Dense rows of `2 * ffn`, halves, output exactly `n_rows` rows, padded.
    pub fn dense(n_rows: usize, ffn: usize, interleaved: bool) -> Self {
        SwigluQuantShape {
            n_rows,
            ffn,
            gu_stride: 2 * ffn,
            interleaved,
            n_cols: n_rows,
            padded: true,
        }
    }
    /// The layer's H: [`dense`](Self::dense) halves, without the padding chunks.
    pub fn layer(n_rows: usize, ffn: usize) -> Self {
        SwigluQuantShape {
            padded: false,
            ..Self::dense(n_rows, ffn, false)
        }
    }
    /// 128-value chunks of each output row.
    pub fn out_chunks(&self) -> usize {
        if self.padded {
            padded_k(self.ffn) / MMQ_BLOCK_VALUES
        } else {
            self.ffn.div_ceil(MMQ_BLOCK_VALUES)
        }
    }
    /// f32 elements the gate/up input needs.
    pub fn gu_len(&self) -> usize {
        if self.n_rows == 0 {
            0
        } else {
            (self.n_rows - 1) * self.gu_stride + 2 * self.ffn
        }
    }
    /// q8_1 D4 blocks of the output buffer.
    pub fn out_blocks(&self) -> usize {
        self.out_chunks() * self.n_cols
    }
    /// Bytes the fused kernel must move: f32 gate/up in, q8_1 blocks out.
    pub fn fused_bytes(&self) -> u64 {
        (self.n_rows * 2 * self.ffn * 4
            + self.out_chunks() * self.n_rows * size_of::<BlockQ8_1Mmq>()) as u64
    }
    /// Bytes the two-kernel form moves: the fused bytes plus H written and read back.
    pub fn two_kernel_bytes(&self) -> u64 {
        self.fused_bytes() + 2 * (self.n_rows * self.ffn * 4) as u64
    }
}
