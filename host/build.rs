//! Builds the kernels (gpu/) to PTX for every target in `builder::ARCHS` and leaves them in
//! OUT_DIR, where src/ptx.rs embeds them.
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let root = manifest
        .parent()
        .expect("host/ should sit in the workspace root")
        .to_path_buf();
    let gpu = root.join("gpu");
    println!("cargo:rerun-if-changed={}", gpu.join("src").display());
    println!(
        "cargo:rerun-if-changed={}",
        gpu.join("Cargo.toml").display()
    );
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let nested = builder::default_out_dir(&root);
    for arch in builder::ARCHS {
        let opts = builder::Options {
            crate_dir: gpu.clone(),
            arch: arch.to_string(),
            out_dir: nested.clone(),
            max_registers: match (builder::ws_only(arch), builder::has_bulk(arch)) {
                (Ok(true), _) => gpu::layout::MAX_REGISTERS,
                (_, Ok(true)) => Vec::leak(
                    [
                        gpu::layout::MAX_REGISTERS_MMA,
                        gpu::layout::MAX_REGISTERS_RESIDENT,
                    ]
                    .concat(),
                ),
                _ => gpu::layout::MAX_REGISTERS_MMA,
            },
        };
        match builder::build_ptx(&opts) {
            Ok(ptx) => {
                std::fs::copy(&ptx, out_dir.join(format!("gpu_{arch}.ptx")))
                    .expect("OUT_DIR should be writable");
            }
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
    }
}
