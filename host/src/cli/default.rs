//! The embedded default run (no arguments): the synthetic reference-shape layer (canonical Q2_0
//! pack, uniform routing) at 512, 2,048, 8,192 and 16,384 tokens on the expert path `--path`
//! (auto by default: MMQ at every T on the H200 by its tune table), stage tables and parity on sampled
//! tokens; then the swiglu_quant fused vs two-kernel table at 163,840 rows.

use super::prefill::{self, PrefillArgs};
use super::swiglu::{self, SwigluArgs};

pub fn run(path: &str, numerics: Option<String>) -> host::Result<()> {
    let p = PrefillArgs {
        model: None,
        layer: "first".into(),
        tokens: vec![512, 2048, 8192, 16384],
        gate_up: "q2_0".into(),
        down: "q2_0".into(),
        shape: super::ShapeArgs::REFERENCE,
        routing: "uniform".into(),
        check: true,
        path: path.into(),
        numerics,
        reps: 10,
        hold_us: host::device::QUEUE_HOLD_US,
        seed: 1,
    };
    // A wrong --path or --numerics is refused before the GPU opens, as without one.
    prefill::path_choice(path)?;
    prefill::numerics(&p)?;
    // One GPU context and one copy-bandwidth measurement for both tables.
    let Some(session) = super::open_session()? else {
        return prefill::cpu_only(&p);
    };
    prefill::run_synthetic(&session, &p)?;
    println!();
    swiglu::run_on(
        &session,
        &SwigluArgs {
            rows: vec![163_840],
            ffn: 640,
            interleaved: false,
            seed: 1,
        },
    )?;
    println!("{}", session.gpu.kernels.load_summary());
    Ok(())
}
