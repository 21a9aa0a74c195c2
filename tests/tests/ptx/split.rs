//! Each kernel's module of the split (`host::ptx::split`: the module's preamble and one
//! `.entry`, what the host loads a kernel from) assembles alone with ptxas for its module's
//! target, as the driver's JIT compiles it when the host first launches the kernel (ignored
//! test: needs the ptxas of a CUDA 12.x toolkit, `MOE_PTXAS`, as ptx/sm60.rs).

use std::process::Command;

use host::ptx::MODULES;

#[test]
#[ignore = "needs ptxas of CUDA 12.x (sm_60): set MOE_PTXAS"]
fn each_kernel_module_assembles_with_ptxas() {
    let ptxas = super::sm60::ptxas();
    let dir = std::env::temp_dir().join(format!("moe-prefill-split-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir should be writable");
    let (src, out) = (dir.join("kernel.ptx"), dir.join("kernel.cubin"));
    let mut n = 0;
    for (arch, ptx) in MODULES {
        let parts = host::ptx::split(ptx).expect("each module splits (each_module_splits_...)");
        for name in parts.names(ptx) {
            std::fs::write(&src, parts.kernel(ptx, name).unwrap()).expect("writable");
            let run = Command::new(&ptxas)
                .arg(format!("-arch=sm_{arch}"))
                .arg(&src)
                .arg("-o")
                .arg(&out)
                .output()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", ptxas.display()));
            assert!(
                run.status.success(),
                "sm_{arch}: {name}'s module does not assemble:\n{}",
                String::from_utf8_lossy(&run.stderr)
            );
            n += 1;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{n} kernel modules assembled");
}
