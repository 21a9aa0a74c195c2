//! Each kernel's module of the split (`host::ptx::split`: the module's preamble and one
//! `.entry`, what the host loads a kernel from) assembles alone with ptxas for its module's
//! target, as the driver's JIT compiles it when the host first launches the kernel (ignored
//! test: needs the ptxas of a CUDA 12.x toolkit, `MOE_PTXAS`, as ptx/sm60.rs). A ptxas without
//! a module's target (CUDA 13.x has no sm_60) still checks the other modules, then fails naming
//! the target it could not check.

use host::ptx::MODULES;

#[test]
#[ignore = "needs ptxas of CUDA 12.x (sm_60): set MOE_PTXAS"]
fn each_kernel_module_assembles_with_ptxas() {
    let ptxas = super::sm60::ptxas();
    let (mut n, mut failed, mut no_target) = (0, Vec::new(), Vec::new());
    for (arch, ptx) in MODULES {
        let parts = host::ptx::split(ptx).expect("each module splits (each_module_splits_...)");
        for name in parts.names(ptx) {
            let one = parts.kernel(ptx, name).unwrap();
            let (ok, text) = super::sm60::assemble(&ptxas, arch, name, &one);
            if super::sm60::lacks_target(&text) {
                // Not a finding about this module: the other targets are still checked.
                no_target.push(format!("sm_{arch}"));
                break;
            }
            if !ok {
                failed.push(format!(
                    "sm_{arch}: {name}'s module does not assemble:\n{text}"
                ));
            }
            n += 1;
        }
    }
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
