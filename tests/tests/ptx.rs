//! Reads the embedded PTX modules (no GPU needed): each target holds exactly the kernels the host
//! expects of it, nothing calls an undefined function, the hot kernels keep their arrays in
//! registers (no `.local`), have no panic path (`trap`), and use only our exact float arithmetic
//! (no `.approx`, no `.ftz`); on sm_90 every layer kernel waits for its predecessor
//! (`griddepcontrol.wait`) before it touches memory. The sm_60 module (compiled as sm_70 and
//! re-labelled by the builder) uses no instruction newer than sm_60 and assembles for sm_60
//! (ptx/sm60.rs). Each module splits into one module a kernel, as the host loads them, and each
//! of those assembles (ptx/split.rs).

use host::device::{kernel_names, kernel_names_in};
use host::ptx::MODULES;
use tests::kernel_body;

#[path = "ptx/sm60.rs"]
mod sm60;
#[path = "ptx/split.rs"]
mod split;

#[test]
fn each_module_holds_exactly_its_kernels() {
    for (arch, ptx) in MODULES {
        assert!(
            ptx.lines().any(|l| l == format!(".target sm_{arch}")),
            "sm_{arch}: wrong .target"
        );
        let want = kernel_names_in(arch);
        for name in kernel_names() {
            assert_eq!(
                kernel_body(ptx, name).is_some(),
                want.contains(&name),
                "sm_{arch}: kernel {name} {}",
                if want.contains(&name) {
                    "missing"
                } else {
                    "present, but the host does not expect it in this module"
                }
            );
        }
    }
    // The sm_90 module holds every kernel; sm_75 and sm_80 all but the bulk-copy MMQ ones
    // (resident, tensor copies, warp specialized) of each of the 8 formats; sm_60 neither those
    // nor the tensor-core ones.
    let bulk = host::device::BULK_KERNELS;
    assert_eq!(bulk, 3);
    assert_eq!(kernel_names_in(90), kernel_names());
    assert_eq!(kernel_names_in(75).len(), kernel_names().len() - 8 * bulk);
    assert_eq!(
        kernel_names_in(60).len(),
        kernel_names().len() - 8 * (host::device::MMA_KERNELS + bulk)
    );
}

#[test]
fn each_module_splits_into_one_module_a_kernel() {
    // The host loads (and the driver compiles) each kernel from a module of its own, made of
    // the module's preamble and the kernel's `.entry` block (host::ptx::split); a text that does
    // not split would be loaded, and compiled, whole.
    let code = |t: &str| {
        t.lines()
            .filter(|l| !l.trim().is_empty() && !l.trim().starts_with("//"))
            .count()
    };
    for (arch, ptx) in MODULES {
        let parts = host::ptx::split(ptx)
            .unwrap_or_else(|| panic!("sm_{arch}: the module does not split into kernels"));
        let mut names: Vec<&str> = parts.names(ptx).collect();
        names.sort_unstable();
        let mut want = kernel_names_in(arch);
        want.sort_unstable();
        assert_eq!(names, want, "sm_{arch}: the split's kernels");
        let preamble = parts.preamble(ptx);
        assert!(
            [
                ".version ",
                ".target ",
                ".address_size ",
                ".extern .shared "
            ]
            .iter()
            .all(|d| preamble.lines().any(|l| l.starts_with(d))),
            "sm_{arch}: preamble"
        );
        // Every line of code is in the preamble or in exactly one kernel's module.
        let mut lines = code(preamble);
        for name in &names {
            let one = parts.kernel(ptx, name).unwrap();
            assert!(one.starts_with(preamble), "sm_{arch}: {name}");
            assert_eq!(one.matches(".entry ").count(), 1, "sm_{arch}: {name}");
            assert!(
                one.contains(kernel_body(ptx, name).unwrap()),
                "sm_{arch}: {name}'s entry"
            );
            assert!(one.trim_end().ends_with('}'), "sm_{arch}: {name}'s end");
            lines += code(&one) - code(preamble);
        }
        assert_eq!(
            lines,
            code(ptx),
            "sm_{arch}: lines of code outside the split"
        );
    }
}

#[test]
fn no_undefined_calls() {
    for (arch, ptx) in MODULES {
        let bad = builder::undefined_calls(ptx);
        assert!(
            bad.is_empty(),
            "sm_{arch}: calls undefined functions {bad:?}"
        );
    }
}

#[test]
fn hot_kernels_have_no_local_memory_no_trap_and_exact_floats() {
    for (arch, ptx) in MODULES {
        for name in kernel_names_in(arch)
            .into_iter()
            .filter(|n| n.starts_with("moe_"))
        {
            let body = kernel_body(ptx, name).expect("present");
            for bad in [".local", "trap", ".approx", ".ftz", "call"] {
                assert!(!body.contains(bad), "sm_{arch} {name}: contains `{bad}`");
            }
        }
    }
}

#[test]
fn layer_kernels_wait_for_their_predecessor_before_any_memory_access() {
    // The host queues every kernel of the layer on sm_90 as a programmatic dependent launch
    // (host/src/device/launch.rs): its CTAs may run while the kernel before it still does, so
    // each must execute `griddepcontrol.wait` before it reads or writes global or shared memory
    // or meets a barrier (`gpu::ptx::grid_dependency_sync`). Below sm_90 nothing of it is there.
    for (arch, ptx) in MODULES {
        for name in kernel_names_in(arch)
            .into_iter()
            .filter(|n| n.starts_with("moe_") && *n != "moe_hold")
        {
            let body = kernel_body(ptx, name).expect("present");
            if arch < 90 {
                assert!(!body.contains("griddepcontrol"), "sm_{arch} {name}");
                continue;
            }
            let at = body
                .find("griddepcontrol.wait;")
                .unwrap_or_else(|| panic!("sm_{arch} {name}: no griddepcontrol.wait"));
            let head = &body[..at];
            assert!(
                head.contains("griddepcontrol.launch_dependents;"),
                "sm_{arch} {name}: no launch_dependents before the wait"
            );
            // The kernel's parameters may be read first (`ld.param`): they are its own.
            let head = head.replace("ld.param", "");
            for bad in [
                ".global", ".shared", "cp.async", "atom.", "red.", "bar.", "mbarrier", "ld.", "st.",
            ] {
                assert!(
                    !head.contains(bad),
                    "sm_{arch} {name}: `{bad}` before griddepcontrol.wait"
                );
            }
        }
    }
    // The hold kernel and the probes are launched plainly and hold none of it.
    for (arch, ptx) in MODULES {
        for name in ["moe_hold", "probe_read_bandwidth"] {
            let body = kernel_body(ptx, name)
                .unwrap_or_else(|| panic!("sm_{arch}: {name} is not in the module"));
            assert!(!body.contains("griddepcontrol"), "sm_{arch} {name}");
        }
    }
}

#[test]
fn the_probe_that_emulates_ggml_does_use_fast_math() {
    // The check above would not notice if the patterns it looks for were never emitted at all.
    for (arch, ptx) in MODULES {
        let body = kernel_body(ptx, "probe_ggml_q8_1").expect("present");
        assert!(body.contains("rcp.approx.ftz.f32"), "sm_{arch}");
    }
}

#[test]
fn register_caps_are_in_every_module() {
    assert!(!gpu::layout::MAX_REGISTERS.is_empty());
    for (arch, ptx) in MODULES {
        let caps: &[&[(&str, u32)]] = if arch < 70 {
            &[gpu::layout::MAX_REGISTERS]
        } else if arch < 90 {
            &[gpu::layout::MAX_REGISTERS_MMA]
        } else {
            &[
                gpu::layout::MAX_REGISTERS_MMA,
                gpu::layout::MAX_REGISTERS_RESIDENT,
            ]
        };
        for &(name, regs) in caps.iter().copied().flatten() {
            let body = kernel_body(ptx, name).expect("present");
            let head = &body[..body.find("\n{").expect("a body")];
            assert!(
                head.ends_with(&format!("\n.maxnreg {regs}")),
                "sm_{arch} {name}: no .maxnreg {regs} before the body"
            );
        }
    }
    // Every pipelined MMQ kernel is capped where it exists.
    for w in gpu::layout::WType::ALL {
        let name = format!("moe_mmq_pipe_{}", w.name());
        assert!(
            gpu::layout::MAX_REGISTERS_MMA
                .iter()
                .any(|&(n, r)| n == name && r == gpu::layout::MMQ_PIPE_MAX_REGISTERS),
            "{name}"
        );
    }
}
