//! Reads the embedded PTX modules (no GPU needed): each target holds exactly the kernels the host
//! expects of it, nothing calls an undefined function, the hot kernels keep their arrays in
//! registers (no `.local`), have no panic path (`trap`), and use only our exact float arithmetic
//! (no `.approx`, no `.ftz`). The sm_60 module (compiled as sm_70 and re-labelled by the builder)
//! uses no instruction newer than sm_60 and assembles for sm_60 (ptx/sm60.rs).

use host::device::{kernel_names, kernel_names_in};
use host::ptx::MODULES;
use tests::kernel_body;

#[path = "ptx/sm60.rs"]
mod sm60;

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
