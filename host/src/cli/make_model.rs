//! `moe-prefill make-model`: a synthetic MoE model written as GGUF.

use std::path::PathBuf;

use clap::Args;

#[derive(Args, Clone)]
pub struct MakeModelArgs {
    /// Output file.
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, default_value_t = 1)]
    pub layers: usize,
    #[arg(long, default_value = "q2_0")]
    pub gate_up: String,
    #[arg(long, default_value = "q2_0")]
    pub down: String,
    /// One merged gate_up tensor per layer instead of two.
    #[arg(long)]
    pub merged: bool,
    #[command(flatten)]
    pub shape: super::ShapeArgs,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

pub fn run(a: &MakeModelArgs) -> host::Result<()> {
    let s = a.shape.shape(
        super::prefill::wtype(&a.gate_up)?,
        super::prefill::wtype(&a.down)?,
    )?;
    let t = std::time::Instant::now();
    host::moe::model::write_synthetic_model(&a.out, &s, a.layers, a.merged, a.seed)?;
    println!(
        "wrote {} ({} layers, {} MB of expert weights per layer) in {:.1} s",
        a.out.display(),
        a.layers,
        s.weight_bytes() / 1_000_000,
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
