//! A GGUF file's MoE layer as the pipeline's inputs: weight views (borrowed from the file's
//! map), shape, routing rule and f32 router weights; and the synthetic model written as GGUF.

use std::path::Path;

use gpu::layout::WType;

use crate::error::{Error, Result};
use crate::formats::ExpertTensor;
use crate::gguf::{GgufFile, MoeLayer, TensorRef, TensorSpec, Value, write_gguf};
use crate::moe::router::{check_router_type, router_weights_f32};
use crate::problem::RouteRule;
use crate::problem::{GateUp, LayerWeights, MoeShape, Numerics};
use crate::synth::SyntheticLayer;

/// Everything the pipeline needs from one MoE layer of a file.
pub struct FileLayer<'a> {
    pub layer: usize,
    pub shape: MoeShape,
    pub weights: LayerWeights<'a>,
    pub rule: RouteRule,
    /// Router `[n_experts][hidden]` as f32.
    pub router: Vec<f32>,
}

fn wtype(f: &GgufFile, t: &TensorRef) -> Result<WType> {
    WType::from_id(t.info.ggml_type).ok_or_else(|| Error::Gguf {
        path: f.path().to_path_buf(),
        msg: format!(
            "tensor {} is {}; this build runs q8_0, q2_0, iq4_nl, iq2_xxs, iq2_xs, iq2_s, iq3_xxs and iq3_s experts",
            t.info.name,
            crate::ggml::type_name(t.info.ggml_type)
        ),
    })
}

/// The layer's shape from the file's header alone (no tensor data is read), with a clear error
/// for what this build cannot run at all: weight types, router types, routing functions other
/// than softmax, per-expert biases or scales, a shared expert. The shape is not checked against the kernels'
/// limits here: [`MoeShape::check`] and `moe::path::eligible` say whether and where it runs.
pub fn layer_shape(f: &GgufFile, l: &MoeLayer) -> Result<MoeShape> {
    let info = f.model_info()?;
    let err = |msg: String| Error::Gguf {
        path: f.path().to_path_buf(),
        msg: format!("layer {}: {msg}", l.layer),
    };
    if l.router_bias.is_some() || l.probs_bias.is_some() || !l.extra.is_empty() {
        let mut names: Vec<&str> = l.extra.iter().map(|t| t.name.as_str()).collect();
        names.extend(
            l.router_bias
                .iter()
                .chain(l.probs_bias.iter())
                .map(|t| t.info.name.as_str()),
        );
        return Err(err(format!("tensors this build does not apply: {names:?}")));
    }
    // A shared expert (Qwen2-MoE / Qwen-Next, DeepSeek: `ffn_{gate,up,down}_shexp`, maybe gated
    // by `ffn_gate_inp_shexp`) is added to the routed experts' output: running the routed
    // experts alone would give the wrong layer output, so it is refused by name.
    let prefix = format!("blk.{}.", l.layer);
    let shared: Vec<&str> = f
        .tensors()
        .iter()
        .map(|t| t.name.as_str())
        .filter(|n| {
            n.strip_prefix(&prefix)
                .is_some_and(|rest| rest.contains("_shexp"))
        })
        .collect();
    if !shared.is_empty() {
        return Err(err(format!(
            "a shared expert {shared:?}: this build runs the routed experts only, and the layer's \
             output needs the shared expert added"
        )));
    }
    if info.gating_func != 1 {
        return Err(err(format!(
            "gating function {} (only softmax routing is implemented)",
            info.gating_func
        )));
    }
    let gate_up = match (&l.gate, &l.gate_up) {
        (Some(g), _) => g,
        (None, Some(m)) => m,
        (None, None) => return Err(err("no gate/up expert tensors".into())),
    };
    check_router_type(l.router.info.ggml_type).map_err(|e| err(e.to_string()))?;
    let in_layer = |e: Error| match e {
        Error::Gguf { msg, .. } => err(msg),
        e => e,
    };
    let shape = MoeShape {
        n_experts: info.n_expert,
        top_k: info.n_expert_used,
        hidden: info.n_embd,
        ffn: l.n_ff,
        gate_up_type: wtype(f, gate_up).map_err(in_layer)?,
        down_type: wtype(f, &l.down).map_err(in_layer)?,
        numerics: Numerics::Mmq,
    };
    Ok(shape)
}

/// The layer's inputs (weights borrowed from the file's map, the router converted to f32), after
/// the checks of [`layer_shape`].
pub fn file_layer<'a>(f: &'a GgufFile, l: &MoeLayer<'a>) -> Result<FileLayer<'a>> {
    let info = f.model_info()?;
    let shape = layer_shape(f, l)?;
    let (h, ff, e) = (shape.hidden, shape.ffn, shape.n_experts);
    let tensor = |t: &TensorRef<'a>, n: usize, k: usize| -> Result<ExpertTensor<'a>> {
        ExpertTensor::new(wtype(f, t)?, e, n, k, t.data)
    };
    let gate_up = match (&l.gate, &l.up, &l.gate_up) {
        (Some(g), Some(u), _) => GateUp::Separate {
            gate: tensor(g, ff, h)?,
            up: tensor(u, ff, h)?,
        },
        (_, _, Some(m)) => GateUp::Merged(tensor(m, 2 * ff, h)?),
        _ => {
            return Err(Error::Gguf {
                path: f.path().to_path_buf(),
                msg: format!("layer {}: no gate/up expert tensors", l.layer),
            });
        }
    };
    let weights = LayerWeights {
        gate_up,
        down: tensor(&l.down, h, ff)?,
    };
    weights.check(&shape)?;
    let router = router_weights_f32(l.router.info.ggml_type, l.router.data)?;
    let rule = RouteRule {
        n_experts: e,
        top_k: shape.top_k,
        norm: info.expert_weights_norm,
        scale: info.expert_weights_scale,
    };
    Ok(FileLayer {
        layer: l.layer,
        shape,
        weights,
        rule,
        router,
    })
}

/// Writes a synthetic MoE model of `n_layers` layers (each `SyntheticLayer::new(shape, merged,
/// seed + layer)`) as a GGUF file of architecture "qwen3moe" (softmax routing, normalised
/// top-k weights, as the synthetic routing rule). Layers are generated one at a time while the
/// file is written.
pub fn write_synthetic_model(
    path: &Path,
    shape: &MoeShape,
    n_layers: usize,
    merged: bool,
    seed: u64,
) -> Result<()> {
    let s = shape;
    let a = "qwen3moe";
    let u32v = |v: usize| Value::U32(v as u32);
    let metadata = vec![
        ("general.architecture".to_string(), Value::Str(a.into())),
        (
            "general.name".to_string(),
            Value::Str("moe-prefill synthetic".into()),
        ),
        (format!("{a}.block_count"), u32v(n_layers)),
        (format!("{a}.embedding_length"), u32v(s.hidden)),
        (format!("{a}.expert_count"), u32v(s.n_experts)),
        (format!("{a}.expert_used_count"), u32v(s.top_k)),
        (format!("{a}.expert_feed_forward_length"), u32v(s.ffn)),
    ];
    let (e, h, f) = (s.n_experts as u64, s.hidden as u64, s.ffn as u64);
    let mut specs = Vec::new();
    for l in 0..n_layers {
        specs.push(TensorSpec::new(
            format!("blk.{l}.ffn_gate_inp.weight"),
            &[h, e],
            0,
        ));
        if merged {
            specs.push(TensorSpec::new(
                format!("blk.{l}.ffn_gate_up_exps.weight"),
                &[h, 2 * f, e],
                s.gate_up_type.id(),
            ));
        } else {
            specs.push(TensorSpec::new(
                format!("blk.{l}.ffn_gate_exps.weight"),
                &[h, f, e],
                s.gate_up_type.id(),
            ));
            specs.push(TensorSpec::new(
                format!("blk.{l}.ffn_up_exps.weight"),
                &[h, f, e],
                s.gate_up_type.id(),
            ));
        }
        specs.push(TensorSpec::new(
            format!("blk.{l}.ffn_down_exps.weight"),
            &[f, h, e],
            s.down_type.id(),
        ));
    }
    let per_layer = if merged { 3 } else { 4 };
    let mut current: Option<(usize, SyntheticLayer)> = None;
    write_gguf(path, &metadata, &specs, 32, |i, w| {
        let l = i / per_layer;
        if current.as_ref().map(|c| c.0) != Some(l) {
            let layer =
                SyntheticLayer::new(*s, merged, seed + l as u64).map_err(std::io::Error::other)?;
            current = Some((l, layer));
        }
        let layer = &current.as_ref().expect("just set").1;
        match (i % per_layer, merged) {
            (0, _) => w.write_all(bytemuck::cast_slice(&layer.router)),
            (1, _) => w.write_all(&layer.gate),
            (2, false) => w.write_all(&layer.up),
            _ => w.write_all(&layer.down),
        }
    })
}
