//! Reads the embedded PTX modules (no GPU needed): every kernel the host expects is there in
//! every target, nothing calls an undefined function, the hot kernels keep their arrays in
//! registers (no `.local`), have no panic path (`trap`), and use only our exact float arithmetic
//! (no `.approx`, no `.ftz`).

use host::device::kernel_names;
use host::ptx::MODULES;
use tests::kernel_body;

#[test]
fn every_kernel_in_every_module() {
    for (arch, ptx) in MODULES {
        assert!(
            ptx.contains(&format!(".target sm_{arch}")),
            "sm_{arch}: wrong .target"
        );
        for name in kernel_names() {
            assert!(
                kernel_body(ptx, name).is_some(),
                "sm_{arch}: kernel {name} missing"
            );
        }
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
        for name in kernel_names().into_iter().filter(|n| n.starts_with("moe_")) {
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
    let body = kernel_body(MODULES[2].1, "probe_ggml_q8_1").expect("present");
    assert!(body.contains("rcp.approx.ftz.f32"));
}

#[test]
fn register_caps_are_in_every_module() {
    assert!(!gpu::layout::MAX_REGISTERS.is_empty());
    for (arch, ptx) in MODULES {
        for &(name, regs) in gpu::layout::MAX_REGISTERS {
            let body = kernel_body(ptx, name).expect("present");
            let head = &body[..body.find("\n{").expect("a body")];
            assert!(
                head.ends_with(&format!("\n.maxnreg {regs}")),
                "sm_{arch} {name}: no .maxnreg {regs} before the body"
            );
        }
    }
}
