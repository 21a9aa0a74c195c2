//! `moe-prefill`: the prompt pass of MoE layers with low-bit quantized experts, on the GPU.
//! With no arguments it runs the embedded default (see `cli::default`).

mod cli;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "moe-prefill",
    version,
    about = "MoE prefill with low-bit quantized experts on the GPU, checked byte for byte against a CPU reference"
)]
struct Args {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// Expert path of the default run (no subcommand): mmq, fused, ws or auto.
    #[arg(long, default_value = "auto")]
    path: String,
    /// Numerics of the default run: mmq, or q2_0-shared-d (opt-in; the fused path only).
    /// Default: $MOE_NUMERICS, else mmq.
    #[arg(long)]
    numerics: Option<String>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Fused SwiGLU + q8_1 quantization (and its two-kernel form) on a synthetic batch:
    /// time, GB/s against the copy bandwidth, parity with the CPU reference.
    Swiglu(cli::swiglu::SwigluArgs),
    /// MoE layers' prefill on the GPU (synthetic reference shape, or a GGUF's layers): stage
    /// times, TOPS or GB/s, floors, parity with the CPU reference on sampled tokens.
    Prefill(cli::prefill::PrefillArgs),
    /// Writes a synthetic MoE model (reference shape unless told otherwise) as a GGUF file.
    MakeModel(cli::make_model::MakeModelArgs),
    /// Device and build facts: compute capability, PTX targets, kernels loaded. With --model, a
    /// GGUF file's MoE layers instead: weight types, and which expert paths can run each and why
    /// not (from the header alone).
    Info(cli::info::InfoArgs),
    /// WS_FAST against the default weight-stationary down kernel on the reference shape's down
    /// product: bytes compared, down time per routing and token count.
    WsDown(cli::ws_down::WsDownArgs),
    /// Times every eligible expert path per format pair at a ladder of rows per routed expert
    /// and writes the table `--path auto` picks from (by default to the cache file of this GPU,
    /// driver and build).
    Tune(cli::tune::TuneArgs),
}

fn main() {
    let args = Args::parse();
    cli::env::EnvReport::of(std::env::vars_os()).print();
    let r = match args.cmd {
        None => cli::default::run(&args.path, args.numerics),
        Some(Cmd::Swiglu(a)) => cli::swiglu::run(&a),
        Some(Cmd::Prefill(a)) => cli::prefill::run(&a),
        Some(Cmd::MakeModel(a)) => cli::make_model::run(&a),
        Some(Cmd::Info(a)) => cli::info::run(&a),
        Some(Cmd::WsDown(a)) => cli::ws_down::run(&a),
        Some(Cmd::Tune(a)) => cli::tune::run(&a),
    };
    if let Err(e) = r {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
