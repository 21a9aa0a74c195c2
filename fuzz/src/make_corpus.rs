//! Writes the fuzzer's seed files into `fuzz/corpus/gguf/`: small valid MoE models (separate and
//! merged gate/up, several weight types) written by the project's own GGUF writer.

use gpu::layout::WType;
use host::problem::MoeShape;

fn main() -> host::Result<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/gguf");
    std::fs::create_dir_all(&dir).map_err(|source| host::Error::Io {
        path: dir.clone(),
        source,
    })?;
    for (i, (g, d, merged)) in [
        (WType::Q2_0, WType::Q2_0, false),
        (WType::Iq2Xxs, WType::Iq4Nl, false),
        (WType::Iq3S, WType::Q8_0, true),
    ]
    .into_iter()
    .enumerate()
    {
        let s = MoeShape {
            n_experts: 4,
            top_k: 2,
            hidden: 256,
            ffn: 128,
            gate_up_type: g,
            down_type: d,
        };
        let path = dir.join(format!("seed{i}.gguf"));
        host::moe::model::write_synthetic_model(&path, &s, 2, merged, i as u64)?;
        println!("{}", path.display());
    }
    Ok(())
}
