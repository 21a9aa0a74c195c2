//! A model file on the command line: `--layer` resolved against the file, and every chosen layer
//! checked for what this build runs - from the header alone, before any GPU work, so that a
//! wrong file, layer or type gives the same error with a GPU and without one.

use host::gguf::{GgufFile, ModelInfo, MoeLayer};
use host::moe::model::layer_shape;
use host::problem::MoeShape;
use host::{Error, Result};

/// The MoE layers a `--layer` argument picks from a file, each with its checked shape.
pub struct ChosenLayers<'f> {
    pub info: ModelInfo,
    /// Block numbers of every MoE layer of the file (blocks with `ffn_down_exps`).
    pub moe_blocks: Vec<usize>,
    /// The chosen layers, in block order.
    pub layers: Vec<(MoeLayer<'f>, MoeShape)>,
}

impl ChosenLayers<'_> {
    /// One line naming the file and its routing shape.
    pub fn summary(&self, f: &GgufFile) -> String {
        let i = &self.info;
        format!(
            "{}: {} ({} layers, {} MoE), E={} top-{} hidden {} FFN {}",
            f.path().display(),
            i.arch,
            i.n_layers,
            self.moe_blocks.len(),
            i.n_expert,
            i.n_expert_used,
            i.n_embd,
            i.n_ff_exp
        )
    }
}

/// Block numbers of the blocks that have an `ffn_down_exps` tensor, well-formed or not.
pub fn moe_blocks(f: &GgufFile, info: &ModelInfo) -> Vec<usize> {
    f.moe_blocks(info)
}

/// Resolves `layer` ("first", "all" or a block number) against `f` and checks each chosen layer:
/// its tensors (`GgufFile::moe_layer`), what this build runs (`layer_shape`) and the kernels'
/// shape limits (`MoeShape::check`). Every error names the file, and the layer where there is one.
pub fn choose_layers<'f>(f: &'f GgufFile, layer: &str) -> Result<ChosenLayers<'f>> {
    let info = f.model_info()?;
    let blocks = moe_blocks(f, &info);
    let path = f.path().display();
    let chosen: Vec<MoeLayer<'f>> = match layer {
        "all" => f.moe_layers()?,
        "first" => match blocks.first() {
            Some(&n) => vec![f.moe_layer(n)?],
            // moe_layers' error says what a MoE layer is and that there is none.
            None => f.moe_layers()?,
        },
        n => {
            let n: usize = n.parse().map_err(|_| {
                Error::Unsupported(format!("--layer {n:?}: a block number, first or all"))
            })?;
            if n >= info.n_layers {
                return Err(Error::Unsupported(format!(
                    "--layer {n}: {path} has {} layers (0 to {}; {}.block_count); its MoE layers: {}",
                    info.n_layers,
                    info.n_layers.saturating_sub(1),
                    info.arch,
                    ranges(&blocks)
                )));
            }
            if !blocks.contains(&n) {
                return Err(Error::Unsupported(format!(
                    "--layer {n}: layer {n} of {path} is not a MoE layer (no blk.{n}.ffn_down_exps.weight); its MoE layers: {}",
                    ranges(&blocks)
                )));
            }
            vec![f.moe_layer(n)?]
        }
    };
    let layers = chosen
        .into_iter()
        .map(|l| {
            let s = layer_shape(f, &l)?;
            s.check().map_err(|e| Error::Gguf {
                path: f.path().to_path_buf(),
                msg: format!("layer {}: {e}", l.layer),
            })?;
            Ok((l, s))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(ChosenLayers {
        info,
        moe_blocks: blocks,
        layers,
    })
}

/// Sorted numbers as ranges: "0-47", "1-3, 5", "none".
pub fn ranges(v: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if j == i {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    if out.is_empty() {
        "none".into()
    } else {
        out.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::ranges;

    #[test]
    fn ranges_compact_runs() {
        assert_eq!(ranges(&[]), "none");
        assert_eq!(ranges(&[3]), "3");
        assert_eq!(ranges(&[0, 1, 2, 3]), "0-3");
        assert_eq!(ranges(&[1, 2, 3, 5, 7, 8]), "1-3, 5, 7-8");
    }
}
