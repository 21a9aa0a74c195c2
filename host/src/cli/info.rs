//! `moe-prefill info`.

use host::device::{Gpu, kernel_names};
use host::ptx::MODULES;

pub fn run() -> host::Result<()> {
    let targets: Vec<String> = MODULES
        .iter()
        .map(|(a, p)| format!("sm_{a} ({} KB)", p.len() / 1024))
        .collect();
    println!("PTX targets built: {}", targets.join(", "));
    println!("kernels: {}", kernel_names().join(", "));
    println!("CPU threads for the reference: {}", host::par::threads());
    match Gpu::open() {
        Ok(g) => {
            let i = &g.info;
            println!(
                "device: {} | compute capability {}.{} | {} SMs | L2 {} MB | shared memory opt-in {} KB/block | driver {}.{}",
                i.name,
                i.cc / 10,
                i.cc % 10,
                i.sm_count,
                i.l2_bytes >> 20,
                i.max_smem_optin >> 10,
                i.driver_version / 1000,
                i.driver_version % 1000 / 10
            );
            println!(
                "loaded PTX: sm_{} ({} kernels resolved)",
                i.ptx_arch,
                kernel_names().len()
            );
        }
        Err(e) => println!("{e}"),
    }
    Ok(())
}
