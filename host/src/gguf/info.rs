//! A MoE model's routing hyperparameters from the file's metadata (`{arch}.*` keys, and the
//! architectures whose llama.cpp graph fixes them), and the expert FFN width.

use super::model::expert_name;
use super::{GgufFile, Value};
use crate::error::Result;

/// Architectures whose llama.cpp graph passes fixed routing choices to `build_moe_ffn` instead
/// of reading `expert_weights_norm` / `expert_gating_func` from the metadata:
/// (architecture, weights normalised, gating function). Source: src/models/{arch}.cpp.
const GRAPH_FIXED: &[(&str, bool, u32)] = &[
    ("llama", true, 1),
    ("llama4", false, 2),
    ("grok", true, 1),
    ("dbrx", true, 1),
    ("arctic", true, 1),
    ("deepseek", false, 1),
    ("jamba", false, 1),
    ("olmoe", false, 1),
    ("qwen2moe", false, 1),
    ("qwen3moe", true, 1),
    ("qwen3next", true, 1),
    ("qwen3vlmoe", true, 1),
    ("qwen35moe", true, 1),
    ("ernie4_5-moe", true, 1),
    ("llada-moe", false, 1),
    ("gpt-oss", false, 3),
];

/// Routing hyperparameters of a MoE model, as llama.cpp's graph uses them.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelInfo {
    /// `general.architecture`; the other keys are `{arch}.<name>`.
    pub arch: String,
    /// `{arch}.block_count`.
    pub n_layers: usize,
    /// `{arch}.embedding_length`: the hidden size.
    pub n_embd: usize,
    /// `{arch}.expert_count`.
    pub n_expert: usize,
    /// `{arch}.expert_used_count`: top-k.
    pub n_expert_used: usize,
    /// `{arch}.expert_feed_forward_length` (a scalar, or per layer with one non-zero width);
    /// when absent, the width of the first MoE layer's `ffn_down_exps` (ne0).
    pub n_ff_exp: usize,
    /// Divide the top-k weights by their sum. `{arch}.expert_weights_norm` (default false),
    /// except for the architectures whose llama.cpp graph fixes it (qwen3moe: true, ...).
    pub expert_weights_norm: bool,
    /// Multiply the top-k weights by this. `{arch}.expert_weights_scale`; absent or 0 (which
    /// ggml treats as "no scaling") gives 1.0.
    pub expert_weights_scale: f32,
    /// 1 softmax, 2 sigmoid, 3 softmax over the selected weights, 4 sqrt(softplus).
    /// `{arch}.expert_gating_func` (absent or 0: softmax), except for the
    /// architectures whose llama.cpp graph fixes it.
    pub gating_func: u32,
}

impl GgufFile {
    /// The routing hyperparameters, checked for presence, type and range.
    pub fn model_info(&self) -> Result<ModelInfo> {
        let arch = match self.get("general.architecture") {
            Some(Value::Str(a)) => a.clone(),
            Some(v) => {
                return Err(self.err(format!(
                    "general.architecture must be a string, found {}",
                    v.describe()
                )));
            }
            None => {
                return Err(self.err("missing general.architecture; cannot name the model's keys"));
            }
        };
        let count = |name: &str| -> Result<usize> {
            let key = format!("{arch}.{name}");
            match self.get(&key) {
                None => Err(self.err(format!("missing {key}"))),
                Some(v) => v
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| {
                        self.err(format!(
                            "{key} must be a non-negative integer, found {}",
                            v.describe()
                        ))
                    }),
            }
        };
        let n_layers = count("block_count")?;
        let n_embd = count("embedding_length")?;
        let n_expert = count("expert_count")?;
        let n_expert_used = count("expert_used_count")?;
        if n_embd == 0 {
            return Err(self.err(format!("{arch}.embedding_length is 0")));
        }
        if n_expert == 0 {
            return Err(self.err(format!("{arch}.expert_count is 0: not a MoE model")));
        }
        if n_expert_used == 0 || n_expert_used > n_expert {
            return Err(self.err(format!(
                "{arch}.expert_used_count is {n_expert_used}; it must be in 1..={n_expert} (expert_count)"
            )));
        }

        let key = format!("{arch}.expert_weights_norm");
        let mut expert_weights_norm = match self.get(&key) {
            None => false,
            Some(v) => v
                .as_bool()
                .ok_or_else(|| self.err(format!("{key} must be a bool, found {}", v.describe())))?,
        };
        let key = format!("{arch}.expert_weights_scale");
        let expert_weights_scale = match self.get(&key) {
            None => 1.0,
            Some(v) => match v.as_f32() {
                Some(0.0) => 1.0,
                Some(s) if s.is_finite() => s,
                _ => {
                    return Err(self.err(format!(
                        "{key} must be a finite float, found {}",
                        v.describe()
                    )));
                }
            },
        };
        let key = format!("{arch}.expert_gating_func");
        let mut gating_func = match self.get(&key) {
            None => 1,
            Some(v) => match v.as_u64() {
                Some(0) => 1,
                Some(g @ 1..=4) => g as u32,
                _ => {
                    return Err(self.err(format!(
                        "{key} is {}; llama.cpp defines 1 softmax, 2 sigmoid, 3 softmax over the \
                         selected weights, 4 sqrt(softplus)",
                        v.describe()
                    )));
                }
            },
        };
        if let Some(&(_, norm, gating)) = GRAPH_FIXED.iter().find(|f| f.0 == arch) {
            expert_weights_norm = norm;
            gating_func = gating;
        }

        let mut info = ModelInfo {
            arch,
            n_layers,
            n_embd,
            n_expert,
            n_expert_used,
            n_ff_exp: 0,
            expert_weights_norm,
            expert_weights_scale,
            gating_func,
        };
        info.n_ff_exp = self.n_ff_exp(&info)?;
        Ok(info)
    }

    /// The expert width: from the metadata, else from the first MoE layer.
    fn n_ff_exp(&self, info: &ModelInfo) -> Result<usize> {
        let key = format!("{}.expert_feed_forward_length", info.arch);
        let widths: Vec<u64> = match self.get(&key) {
            None => Vec::new(),
            Some(Value::Array(_, items)) => {
                let w: Option<Vec<u64>> = items.iter().map(Value::as_u64).collect();
                let w =
                    w.ok_or_else(|| self.err(format!("{key} must hold non-negative integers")))?;
                if w.len() != info.n_layers {
                    return Err(self.err(format!(
                        "{key} has {} entries; block_count is {}",
                        w.len(),
                        info.n_layers
                    )));
                }
                w.into_iter().filter(|&n| n != 0).collect()
            }
            Some(v) => vec![v.as_u64().ok_or_else(|| {
                self.err(format!(
                    "{key} must be a non-negative integer, found {}",
                    v.describe()
                ))
            })?],
        };
        if let Some(&first) = widths.first() {
            if widths.iter().any(|&w| w != first) {
                return Err(self.err(format!(
                    "{key} differs between layers ({widths:?}); not supported"
                )));
            }
            return usize::try_from(first)
                .ok()
                .filter(|&w| w > 0)
                .ok_or_else(|| self.err(format!("{key} is {first}")));
        }
        let first_moe = self
            .moe_blocks(info)
            .first()
            .and_then(|&n| self.tensor(&expert_name(n, "ffn_down_exps")));
        match first_moe {
            Some(down) => usize::try_from(down.dims[0])
                .map_err(|_| self.err(format!("'{}' is too wide", down.name))),
            None => Err(self.no_moe_layer(info)),
        }
    }
}
