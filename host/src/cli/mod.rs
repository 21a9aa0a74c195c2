//! The CLI's commands.

pub mod default;
pub mod env;
pub mod info;
pub mod make_model;
pub mod model;
pub mod prefill;
pub mod report;
pub mod swiglu;
pub mod tune;
pub mod ws_down;

use host::device::Gpu;
use host::problem::{MoeShape, Numerics};

/// The shape flags of a synthetic layer (default: the reference shape), shared by the commands
/// that build one.
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct ShapeArgs {
    /// Experts of the synthetic layer (small values give a layer a sanitizer runs in seconds).
    #[arg(long, default_value_t = MoeShape::REFERENCE.n_experts)]
    pub experts: usize,
    /// Experts per token.
    #[arg(long, default_value_t = MoeShape::REFERENCE.top_k)]
    pub top_k: usize,
    /// Model width (gate/up K, down N).
    #[arg(long, default_value_t = MoeShape::REFERENCE.hidden)]
    pub hidden: usize,
    /// Expert FFN width.
    #[arg(long, default_value_t = MoeShape::REFERENCE.ffn)]
    pub ffn: usize,
}

impl ShapeArgs {
    /// The reference shape's sizes (the flags' defaults).
    pub const REFERENCE: ShapeArgs = ShapeArgs {
        experts: MoeShape::REFERENCE.n_experts,
        top_k: MoeShape::REFERENCE.top_k,
        hidden: MoeShape::REFERENCE.hidden,
        ffn: MoeShape::REFERENCE.ffn,
    };

    /// The shape with these sizes and weight types, checked.
    pub fn shape(
        &self,
        gate_up_type: gpu::layout::WType,
        down_type: gpu::layout::WType,
    ) -> host::Result<MoeShape> {
        let s = MoeShape {
            n_experts: self.experts,
            top_k: self.top_k,
            hidden: self.hidden,
            ffn: self.ffn,
            gate_up_type,
            down_type,
            numerics: Numerics::Mmq,
        };
        s.check()?;
        Ok(s)
    }
}
use host::timing::{copy_bandwidth, read_bandwidth};

/// An open GPU and its measured bandwidths, opened and measured once per command.
pub struct Session {
    pub gpu: Gpu,
    pub rates: Rates,
}

/// Environment variable: `h200` makes a session take the H200's ceilings instead of measuring.
pub const CEILINGS_VAR: &str = "MOE_CEILINGS";
/// The H200's device-to-device copy, GB/s (read + write; docs/h200-ceilings.md).
const H200_COPY_GBS: f64 = 4200.0;

/// The GPU's memory ceilings, measured when the session opens.
#[derive(Clone, Copy, Debug)]
pub struct Rates {
    /// Device-to-device copy, GB/s counting bytes read plus written: the ceiling of every GB/s
    /// figure of a kernel that reads and writes.
    pub copy_gbs: f64,
    /// Read-only (16-byte `ld.global.nc`), GB/s: the rate of the weight-read floor.
    pub read_gbs: f64,
}

/// Opens the GPU and measures its copy bandwidth, printing both; without a GPU, prints one line
/// saying why and returns None.
pub fn open_session() -> host::Result<Option<Session>> {
    let gpu = match Gpu::open() {
        Ok(g) => g,
        Err(e) => {
            println!("{e}: running what can run without one (the CPU reference).");
            return Ok(None);
        }
    };
    // Under compute-sanitizer the 46 GB of timed traffic would take minutes: MOE_CEILINGS=h200
    // takes the H200's measured figures (docs/h200-ceilings.md) instead.
    let (copy_gbs, read_gbs, how) = if std::env::var(CEILINGS_VAR).is_ok_and(|v| v == "h200") {
        (
            H200_COPY_GBS,
            host::timing::H200_READ_ONLY_BYTES_PER_S / 1e9,
            format!("the H200's, {CEILINGS_VAR}=h200"),
        )
    } else {
        let (copy, _) = copy_bandwidth(&gpu, 1 << 30)?;
        let (read, _) = read_bandwidth(&gpu, 1 << 30)?;
        (copy, read, "measured".to_string())
    };
    println!(
        "device: {} (sm_{}, {} SMs); device-to-device copy {copy_gbs:.0} GB/s (read + write), read-only {read_gbs:.0} GB/s ({how}): the ceilings below",
        gpu.info.name, gpu.info.ptx_arch, gpu.info.sm_count
    );
    Ok(Some(Session {
        gpu,
        rates: Rates { copy_gbs, read_gbs },
    }))
}
