//! Each kernel's module of the split (`host::ptx::split`: the module's preamble and one
//! `.entry`, what the host loads a kernel from) assembles alone with ptxas for its module's
//! target, as the driver's JIT compiles it when the host first launches the kernel (ignored
//! test: needs the ptxas of a CUDA 12.x toolkit, `MOE_PTXAS`, as ptx/sm60.rs). A ptxas without
//! a module's target (CUDA 13.x has no sm_60) still checks the other modules, then fails naming
//! the target it could not check.

use std::process::Command;

use host::ptx::MODULES;

#[test]
#[ignore = "needs ptxas of CUDA 12.x (sm_60): set MOE_PTXAS"]
fn each_kernel_module_assembles_with_ptxas() {
    let ptxas = super::sm60::ptxas();
    let dir = std::env::temp_dir().join(format!("moe-prefill-split-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir should be writable");
    let (src, out) = (dir.join("kernel.ptx"), dir.join("kernel.cubin"));
    let (mut n, mut failed, mut no_target) = (0, Vec::new(), Vec::new());
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
            let text = String::from_utf8_lossy(&run.stderr).into_owned();
            if super::sm60::lacks_target(&text) {
                // Not a finding about this module: the other targets are still checked.
                no_target.push(format!("sm_{arch}"));
                break;
            }
            if !run.status.success() {
                failed.push(format!(
                    "sm_{arch}: {name}'s module does not assemble:\n{text}"
                ));
            }
            n += 1;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{n} kernel modules checked");
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert!(
        no_target.is_empty(),
        "{n} kernel modules of the other targets assemble, but {} ({}) has no {}: set MOE_PTXAS \
         to the ptxas of a CUDA 12.x toolkit",
        ptxas.display(),
        super::sm60::ptxas_version(&ptxas),
        no_target.join(", ")
    );
}
