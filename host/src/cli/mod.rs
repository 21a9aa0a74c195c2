//! The CLI's commands.

pub mod default;
pub mod info;
pub mod make_model;
pub mod model;
pub mod prefill;
pub mod report;
pub mod swiglu;

use host::device::Gpu;
use host::timing::copy_bandwidth;

/// An open GPU and its measured copy bandwidth (the ceiling of every GB/s figure), opened once
/// per command.
pub struct Session {
    pub gpu: Gpu,
    /// Device-to-device copy, GB/s counting bytes read plus written.
    pub copy_gbs: f64,
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
    let (copy_gbs, _) = copy_bandwidth(&gpu, 1 << 30)?;
    println!(
        "device: {} (sm_{}, {} SMs); device-to-device copy {copy_gbs:.0} GB/s (read + write), the ceiling below",
        gpu.info.name, gpu.info.ptx_arch, gpu.info.sm_count
    );
    Ok(Some(Session { gpu, copy_gbs }))
}
