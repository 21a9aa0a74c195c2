//! Writes the fuzzer's seed files into `fuzz/corpus/gguf/`: small valid MoE models (separate and
//! merged gate/up, several weight types) written by the project's own GGUF writer.

use gpu::layout::WType;
use host::problem::{MoeShape, Numerics};

fn main() -> host::Result<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/gguf");
    std::fs::create_dir_all(&dir).map_err(|source| host::Error::Io {
        path: dir.clone(),
        source,
    })?;
    // Small files (7-40 KB) keep the fuzzer fast; two layers where the shape allows.
    for (i, (g, d, hidden, layers, merged)) in [
        (WType::Q2_0, WType::Q2_0, 128, 2, false),
        (WType::Q8_0, WType::Iq4Nl, 128, 1, true),
        (WType::Iq2Xxs, WType::Q8_0, 256, 1, false),
    ]
    .into_iter()
    .enumerate()
    {
        let s = MoeShape {
            n_experts: 2,
            top_k: 1,
            hidden,
            ffn: 128,
            gate_up_type: g,
            down_type: d,
            numerics: Numerics::Mmq,
        };
        let path = dir.join(format!("seed{i}.gguf"));
        host::moe::model::write_synthetic_model(&path, &s, layers, merged, i as u64)?;
        println!("{}", path.display());
    }
    Ok(())
}
