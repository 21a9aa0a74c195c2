//! The MoE layers of a model file: routing hyperparameters from the metadata and, per layer, the
//! router and expert tensors with their shapes checked against the metadata and each other.
//!
//! Names and shapes are llama.cpp's (src/llama-arch.cpp, `create_tensor_gate_up_exps` in
//! src/llama-model.cpp; docs/ggml-reference.md §8.1), shapes as ggml `ne`:
//! - `blk.N.ffn_gate_inp.weight` {n_embd, n_expert}: the router (required);
//! - `blk.N.ffn_gate_exps.weight` and `blk.N.ffn_up_exps.weight` {n_embd, n_ff, n_expert}, or
//!   `blk.N.ffn_gate_up_exps.weight` {n_embd, 2 n_ff, n_expert} (gate rows first), not both;
//! - `blk.N.ffn_down_exps.weight` {n_ff, n_embd, n_expert} (required; it marks a MoE layer);
//! - optional `blk.N.ffn_gate_inp.bias` and `blk.N.exp_probs_b.bias`, {n_expert}.
//!
//! Weight types are reported, not judged: whether a path can run one is the caller's decision.

use super::info::ModelInfo;
use super::{GgufFile, TensorInfo};
use crate::error::Result;

/// One tensor of the file with its bytes (a slice of the map).
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    /// Name, shape, type, offset, size.
    pub info: &'a TensorInfo,
    /// The tensor's bytes, `info.n_bytes` of them.
    pub data: &'a [u8],
}

impl TensorRef<'_> {
    /// The ggml type id.
    pub fn ggml_type(&self) -> u32 {
        self.info.ggml_type
    }
}

/// The router and expert tensors of one MoE layer, shapes checked.
#[derive(Clone, Debug)]
pub struct MoeLayer<'a> {
    /// Block index N of `blk.N.*`.
    pub layer: usize,
    /// Expert FFN width (ne0 of `down`; equal to [`ModelInfo::n_ff_exp`]).
    pub n_ff: usize,
    /// `blk.N.ffn_gate_inp.weight` {n_embd, n_expert}.
    pub router: TensorRef<'a>,
    /// `blk.N.ffn_gate_inp.bias` {n_expert}, added to the router logits, if present.
    pub router_bias: Option<TensorRef<'a>>,
    /// `blk.N.exp_probs_b.bias` {n_expert}, added to the probabilities for selection only.
    pub probs_bias: Option<TensorRef<'a>>,
    /// `blk.N.ffn_gate_exps.weight` {n_embd, n_ff, n_expert}; present exactly when `up` is.
    pub gate: Option<TensorRef<'a>>,
    /// `blk.N.ffn_up_exps.weight` {n_embd, n_ff, n_expert}, same type as `gate`.
    pub up: Option<TensorRef<'a>>,
    /// `blk.N.ffn_gate_up_exps.weight` {n_embd, 2 n_ff, n_expert}: gate rows, then up rows.
    /// Present exactly when `gate` and `up` are not.
    pub gate_up: Option<TensorRef<'a>>,
    /// `blk.N.ffn_down_exps.weight` {n_ff, n_embd, n_expert}.
    pub down: TensorRef<'a>,
    /// Other routed-expert tensors of this layer that the fields above do not cover (per-expert
    /// scales or biases such as `ffn_down_exps.bias`, chunked experts, ...). A caller that does
    /// not implement them must refuse the layer rather than ignore them.
    pub extra: Vec<&'a TensorInfo>,
}

impl GgufFile {
    /// Every MoE layer, in block order (dense blocks, e.g. DeepSeek's first ones, are skipped).
    /// An error if there is none or if any is malformed.
    pub fn moe_layers(&self) -> Result<Vec<MoeLayer<'_>>> {
        let info = self.model_info()?;
        let layers = self
            .moe_blocks(&info)
            .into_iter()
            .map(|n| self.layer_of(&info, n))
            .collect::<Result<Vec<_>>>()?;
        if layers.is_empty() {
            return Err(self.no_moe_layer(&info));
        }
        Ok(layers)
    }

    /// The blocks below `block_count` that hold a `blk.N.ffn_down_exps.weight` tensor, ascending.
    /// Found from the tensor list, not by trying every block number: `block_count` comes from the
    /// file and may be anything up to 2^64 - 1 (a fuzzed file with a huge one made a loop over
    /// the block numbers run for minutes).
    pub fn moe_blocks(&self, info: &ModelInfo) -> Vec<usize> {
        let mut blocks: Vec<usize> = self
            .tensors()
            .iter()
            .filter_map(|t| {
                let n = t
                    .name
                    .strip_prefix("blk.")?
                    .strip_suffix(".ffn_down_exps.weight")?;
                // Canonical decimal only, as `expert_name` writes it ("07" is another tensor).
                let v: usize = n.parse().ok()?;
                (v.to_string() == n && v < info.n_layers).then_some(v)
            })
            .collect();
        blocks.sort_unstable();
        blocks.dedup();
        blocks
    }

    /// MoE layer `n` (block `blk.n.*`).
    pub fn moe_layer(&self, n: usize) -> Result<MoeLayer<'_>> {
        let info = self.model_info()?;
        self.layer_of(&info, n)
    }

    pub(super) fn no_moe_layer(&self, info: &ModelInfo) -> crate::Error {
        self.err(format!(
            "no MoE layer: no tensor named blk.N.ffn_down_exps.weight for any N in 0..{} \
             ({}.block_count)",
            info.n_layers, info.arch
        ))
    }

    fn layer_of<'s>(&'s self, info: &ModelInfo, n: usize) -> Result<MoeLayer<'s>> {
        if n >= info.n_layers {
            return Err(self.err(format!(
                "layer {n} does not exist: {}.block_count is {}",
                info.arch, info.n_layers
            )));
        }
        let down_name = expert_name(n, "ffn_down_exps");
        let Some(down) = self.tensor(&down_name) else {
            return Err(self.err(format!(
                "layer {n} is not a MoE layer: no tensor named {down_name}"
            )));
        };
        let (embd, expert) = (info.n_embd as u64, info.n_expert as u64);
        let ff = info.n_ff_exp as u64;
        self.expect_shape(
            down,
            &[("n_ff", ff), ("n_embd", embd), ("n_expert", expert)],
        )?;

        let router_name = expert_name(n, "ffn_gate_inp");
        let router = self.tensor(&router_name).ok_or_else(|| {
            self.err(format!(
                "MoE layer {n} has no router: no tensor named {router_name}"
            ))
        })?;
        self.expect_shape(router, &[("n_embd", embd), ("n_expert", expert)])?;

        let find = |stem: &str, suffix: &str| self.tensor(&format!("blk.{n}.{stem}.{suffix}"));
        let router_bias = find("ffn_gate_inp", "bias");
        let probs_bias = find("exp_probs_b", "bias");
        for t in router_bias.iter().chain(&probs_bias) {
            self.expect_shape(t, &[("n_expert", expert)])?;
        }

        let gate = find("ffn_gate_exps", "weight");
        let up = find("ffn_up_exps", "weight");
        let gate_up = find("ffn_gate_up_exps", "weight");
        match (gate, up, gate_up) {
            (Some(g), Some(u), None) => {
                self.expect_shape(g, &[("n_embd", embd), ("n_ff", ff), ("n_expert", expert)])?;
                self.expect_shape(u, &[("n_embd", embd), ("n_ff", ff), ("n_expert", expert)])?;
                if g.ggml_type != u.ggml_type {
                    return Err(self.err(format!(
                        "'{}' is {} but '{}' is {}; gate and up must have the same type",
                        g.name,
                        g.type_name(),
                        u.name,
                        u.type_name()
                    )));
                }
            }
            (None, None, Some(gu)) => {
                let ff2 = ff
                    .checked_mul(2)
                    .ok_or_else(|| self.err("2 * n_ff overflows"))?;
                self.expect_shape(
                    gu,
                    &[("n_embd", embd), ("2 n_ff", ff2), ("n_expert", expert)],
                )?;
            }
            (None, None, None) => {
                return Err(self.err(format!(
                    "MoE layer {n} has neither blk.{n}.ffn_gate_exps.weight + blk.{n}.ffn_up_exps.weight \
                     nor blk.{n}.ffn_gate_up_exps.weight"
                )));
            }
            (g, u, gu) => {
                let have: Vec<&str> = [g, u, gu]
                    .iter()
                    .flatten()
                    .map(|t| t.name.as_str())
                    .collect();
                return Err(self.err(format!(
                    "MoE layer {n} has {have:?}; it needs either both ffn_gate_exps and ffn_up_exps \
                     or ffn_gate_up_exps alone"
                )));
            }
        }

        let used: Vec<&str> = [
            Some(down),
            Some(router),
            router_bias,
            probs_bias,
            gate,
            up,
            gate_up,
        ]
        .iter()
        .flatten()
        .map(|t| t.name.as_str())
        .collect();
        let prefix = format!("blk.{n}.");
        let extra = self
            .tensors()
            .iter()
            .filter(|t| {
                t.name
                    .strip_prefix(&prefix)
                    .is_some_and(is_routed_expert_tensor)
            })
            .filter(|t| !used.contains(&t.name.as_str()))
            .collect();

        let r = |t: &'s TensorInfo| TensorRef {
            info: t,
            data: self.tensor_data(t),
        };
        Ok(MoeLayer {
            layer: n,
            n_ff: info.n_ff_exp,
            router: r(router),
            router_bias: router_bias.map(r),
            probs_bias: probs_bias.map(r),
            gate: gate.map(r),
            up: up.map(r),
            gate_up: gate_up.map(r),
            down: r(down),
            extra,
        })
    }

    /// `t`'s shape must be `want` (named dimensions), up to trailing 1s.
    fn expect_shape(&self, t: &TensorInfo, want: &[(&str, u64)]) -> Result<()> {
        let mut want4 = [1u64; 4];
        for (w, &(_, n)) in want4.iter_mut().zip(want) {
            *w = n;
        }
        if t.shape4() == want4 {
            return Ok(());
        }
        let named: Vec<String> = want.iter().map(|(name, n)| format!("{name} {n}")).collect();
        Err(self.err(format!(
            "tensor '{}' ({}) has shape {:?}; expected [{}]",
            t.name,
            t.type_name(),
            t.dims,
            named.join(", ")
        )))
    }
}

/// `blk.{n}.{stem}.weight`.
pub(super) fn expert_name(n: usize, stem: &str) -> String {
    format!("blk.{n}.{stem}.weight")
}

/// Whether the tensor called `name` belongs to a MoE layer's routing or routed experts: `blk.N.`
/// followed by what [`MoeLayer`] covers, its `extra` tensors included.
pub fn is_moe_tensor_name(name: &str) -> bool {
    name.strip_prefix("blk.")
        .and_then(|rest| rest.split_once('.'))
        .is_some_and(|(n, local)| n.parse::<usize>().is_ok() && is_routed_expert_tensor(local))
}

/// Whether a layer tensor (name after `blk.N.`) takes part in the routed-expert computation:
/// the router, selection biases, and anything per expert (`*_exps.*`, `*_chexps.*`).
fn is_routed_expert_tensor(local: &str) -> bool {
    local.starts_with("ffn_gate_inp.")
        || local.starts_with("exp_probs_b")
        || local
            .split('.')
            .next()
            .is_some_and(|stem| stem.ends_with("_exps") || stem.ends_with("_chexps"))
}
