//! The CLI's commands.

pub mod default;
pub mod info;
pub mod make_model;
pub mod prefill;
pub mod swiglu;

use host::device::Gpu;

/// Opens the GPU, or prints one line saying why not and returns None.
pub fn open_gpu_or_say() -> Option<Gpu> {
    match Gpu::open() {
        Ok(g) => Some(g),
        Err(e) => {
            println!("{e}: running what can run without one (the CPU reference).");
            None
        }
    }
}
