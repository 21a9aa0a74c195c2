//! Compiles the `gpu` crate to PTX with rustc's own NVPTX backend. No CUDA toolkit is involved.
//!
//! `build_ptx` runs a nested `cargo rustc` of the installed `nightly` toolchain (kernels need
//! `abi_ptx`, `asm_experimental_arch` and `-Zbuild-std=core`) for `nvptx64-nvidia-cuda`, in its
//! own target directory and with the outer cargo's environment removed, and returns the path of
//! the PTX module (the crate's LTO'd assembly). It then checks the PTX: a module that calls a
//! function it does not define would fail to load on the GPU, so it is rejected here.
//!
//! rustc accepts no target CPU below sm_70, so the sm_60 module (Pascal) is compiled for sm_70
//! with cfg `gpu_ws_only` - the gpu crate then holds only the kernels of the weight-stationary
//! path, which use no instruction newer than sm_60 - and its `.target sm_70` line is re-labelled
//! `.target sm_60` (`.version` stays as emitted). tests/tests/ptx.rs checks that module's text for
//! sm_61+ instructions and assembles it with `ptxas -arch=sm_60`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

mod text;
pub use text::{relabel_target, undefined_calls, with_max_registers};

/// The toolchain the kernels are built with. The one installed on every machine of this project
/// (rustc 1.97.0-nightly e50aa6fba 2026-05-19); a newer nightly works as long as `abi_ptx` does.
pub const NIGHTLY: &str = "nightly";

/// The PTX targets the host embeds: sm_60 (Pascal: the weight-stationary path only, built as
/// sm_70 and re-labelled, see [`target_cpu`]), sm_75 (Turing `m8n8k16` port), sm_80 (m16n8k32
/// `mma`), sm_90 (Hopper). The host loads the newest one not above the device's compute
/// capability.
pub const ARCHS: [&str; 4] = ["sm_60", "sm_75", "sm_80", "sm_90"];

/// The oldest `-C target-cpu` rustc's NVPTX backend accepts ("sm_60 is a known but unsupported
/// target CPU" below it). Targets of [`ARCHS`] under it are compiled for it with cfg
/// `gpu_ws_only` and re-labelled.
pub const RUSTC_MIN_ARCH: u32 = 70;

/// What to build.
#[derive(Clone, Debug)]
pub struct Options {
    /// The `gpu` crate's directory (holding its Cargo.toml).
    pub crate_dir: PathBuf,
    /// Target GPU, e.g. "sm_80".
    pub arch: String,
    /// Where the nested build keeps its target directory and where the .ptx is written.
    pub out_dir: PathBuf,
    /// Register caps: (kernel, registers per thread), written into the PTX as `.maxnreg`
    /// (rustc has no launch-bounds attribute). Every kernel named must be in the module.
    pub max_registers: &'static [(&'static str, u32)],
}

/// Why a PTX build failed; `Display` says what to do.
#[derive(Debug)]
pub enum BuildError {
    /// rustup (and so the nightly toolchain) cannot be run.
    NoRustup(std::io::Error),
    /// The nightly toolchain is not installed.
    NoNightly(String),
    /// rust-src is missing and could not be installed.
    NoRustSrc(String),
    /// The arch is not one we build.
    BadArch(String),
    /// rustc reported errors (its diagnostics were already printed, untouched).
    Compile {
        arch: String,
        status: String,
    },
    /// The build succeeded but produced no assembly file where expected.
    NoOutput(PathBuf),
    /// The PTX calls a function it does not define, or declares an external one.
    UndefinedCall {
        arch: String,
        names: Vec<String>,
    },
    /// A kernel named in `Options::max_registers` is not in the PTX.
    MissingEntry {
        arch: String,
        name: String,
    },
    /// The PTX of a re-labelled target does not have the `.target` line it was compiled for.
    Relabel {
        arch: String,
        found: String,
    },
    Io(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::NoRustup(e) => write!(
                f,
                "the kernels are built with the `{NIGHTLY}` toolchain through rustup, but rustup \
                 could not be run ({e}); install rustup from https://rustup.rs"
            ),
            BuildError::NoNightly(msg) => write!(
                f,
                "the kernels need the `{NIGHTLY}` toolchain, which is not installed ({msg}); \
                 install it with `rustup toolchain install {NIGHTLY} --component rust-src`"
            ),
            BuildError::NoRustSrc(msg) => write!(
                f,
                "the nvptx build needs rust-src for the `{NIGHTLY}` toolchain (it builds `core` \
                 from source); installing it failed ({msg}); install it with \
                 `rustup component add rust-src --toolchain {NIGHTLY}`"
            ),
            BuildError::BadArch(a) => {
                write!(f, "unknown PTX target {a:?}; the builder knows {ARCHS:?}")
            }
            BuildError::Compile { arch, status } => write!(
                f,
                "compiling the gpu crate for {arch} failed ({status}); rustc's messages are above"
            ),
            BuildError::NoOutput(p) => write!(
                f,
                "the nvptx build finished but wrote no assembly at {}",
                p.display()
            ),
            BuildError::UndefinedCall { arch, names } => write!(
                f,
                "the {arch} PTX calls functions it does not define: {names:?}; the module would \
                 not load. Make them #[inline(always)], or avoid the core function that needs them"
            ),
            BuildError::MissingEntry { arch, name } => write!(
                f,
                "the {arch} PTX has no kernel `{name}`, which has a register cap \
                 (gpu::layout::MAX_REGISTERS); rename or remove the entry there"
            ),
            BuildError::Relabel { arch, found } => write!(
                f,
                "the {arch} PTX is compiled for {} and re-labelled, but its .target line is \
                 {found:?}; the re-labelling in builder/src/lib.rs must follow rustc's output",
                target_cpu(arch).unwrap_or_default()
            ),
            BuildError::Io(e) => write!(f, "i/o error during the PTX build: {e}"),
        }
    }
}

impl std::error::Error for BuildError {}

impl From<std::io::Error> for BuildError {
    fn from(e: std::io::Error) -> Self {
        BuildError::Io(e)
    }
}

/// The number of an arch of [`ARCHS`] ("sm_80" -> 80).
fn arch_number(arch: &str) -> Result<u32, BuildError> {
    arch.strip_prefix("sm_")
        .and_then(|s| s.parse().ok())
        .filter(|_| ARCHS.contains(&arch))
        .ok_or_else(|| BuildError::BadArch(arch.to_string()))
}

/// `cfg` flags for an arch: `gpu_sm = "80"`, plus `gpu_sm80` on sm_80 and newer, `gpu_sm90` on
/// sm_90 and newer (bulk copies, `mbarrier` transaction counts: PTX ISA 8.0, see [`ptx_features`]), and
/// `gpu_ws_only` below [`RUSTC_MIN_ARCH`]: such a module is compiled for a newer target than
/// its own, so it may only hold kernels whose instructions the older one has (the gpu crate
/// leaves out the MMQ and fused kernels, which need `mma`, `ldmatrix` and `cp.async`).
fn arch_cfgs(arch: &str) -> Result<Vec<String>, BuildError> {
    let n = arch_number(arch)?;
    let mut v = vec!["--cfg".into(), format!("gpu_sm=\"{n}\"")];
    if n >= 80 {
        v.extend(["--cfg".into(), "gpu_sm80".into()]);
    }
    if n >= 90 {
        v.extend(["--cfg".into(), "gpu_sm90".into()]);
    }
    if n < RUSTC_MIN_ARCH {
        v.extend(["--cfg".into(), "gpu_ws_only".into()]);
    }
    Ok(v)
}

/// The `-C target-feature` of an arch: `+ptx80` on sm_90 and newer (rustc emits PTX ISA 7.8 by
/// default; `cp.async.bulk` and `mbarrier.arrive.expect_tx` need 8.0), none below.
fn ptx_features(arch: &str) -> Result<Option<&'static str>, BuildError> {
    Ok((arch_number(arch)? >= 90).then_some("+ptx80"))
}

/// Whether `arch`'s module has the bulk copies (cfg `gpu_sm90`) and the kernels that need them.
pub fn has_bulk(arch: &str) -> Result<bool, BuildError> {
    Ok(arch_number(arch)? >= 90)
}

/// Whether `arch`'s module holds only the weight-stationary kernels (cfg `gpu_ws_only`: no
/// `mma`, `ldmatrix` or `cp.async` kernels).
pub fn ws_only(arch: &str) -> Result<bool, BuildError> {
    Ok(arch_number(arch)? < RUSTC_MIN_ARCH)
}

/// The `-C target-cpu` rustc compiles `arch` for: the arch itself, or [`RUSTC_MIN_ARCH`] for an
/// older one (whose PTX is then re-labelled by [`relabel_target`]).
pub fn target_cpu(arch: &str) -> Result<String, BuildError> {
    let n = arch_number(arch)?;
    Ok(format!("sm_{}", n.max(RUSTC_MIN_ARCH)))
}

/// A `rustup run nightly <tool>` command with the outer cargo's environment removed, so that the
/// nested build is not steered by the outer one (its target dir lock, RUSTFLAGS, toolchain).
fn nightly(tool: &str) -> Command {
    let mut c = Command::new("rustup");
    c.args(["run", NIGHTLY, tool]);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        let outer = (k.starts_with("CARGO") && k != "CARGO_HOME")
            || k.starts_with("__CARGO")
            || k.starts_with("RUSTC")
            || k.starts_with("RUSTDOC")
            || k == "RUSTFLAGS"
            || k == "RUSTUP_TOOLCHAIN"
            || matches!(
                k.as_str(),
                "TARGET" | "HOST" | "OUT_DIR" | "OPT_LEVEL" | "PROFILE" | "DEBUG" | "NUM_JOBS"
            );
        if outer {
            c.env_remove(&k);
        }
    }
    c
}

/// Checks that the nightly toolchain and its rust-src are there, installing rust-src if not.
pub fn ensure_toolchain() -> Result<(), BuildError> {
    let out = nightly("rustc")
        .args(["--print", "sysroot"])
        .output()
        .map_err(BuildError::NoRustup)?;
    if !out.status.success() {
        return Err(BuildError::NoNightly(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let core_src = sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml");
    if core_src.exists() {
        return Ok(());
    }
    let st = Command::new("rustup")
        .args(["component", "add", "rust-src", "--toolchain", NIGHTLY])
        .status()
        .map_err(BuildError::NoRustup)?;
    if !st.success() || !core_src.exists() {
        return Err(BuildError::NoRustSrc(format!("rustup exited with {st}")));
    }
    // Worded as done, not as under way: cargo repeats a build script's warnings on every later
    // build until the script runs again.
    println!(
        "cargo:warning=rust-src was missing from the {NIGHTLY} toolchain: installed it with rustup \
         (needed to build core for nvptx)"
    );
    Ok(())
}

/// Builds the PTX module for `opts.arch`; returns the path of the `.ptx` file in `out_dir`.
pub fn build_ptx(opts: &Options) -> Result<PathBuf, BuildError> {
    let cfgs = arch_cfgs(&opts.arch)?;
    let cpu = target_cpu(&opts.arch)?;
    ensure_toolchain()?;
    let target_dir = opts.out_dir.join(format!("target-{}", opts.arch));
    let mut cmd = nightly("cargo");
    cmd.arg("rustc")
        .arg("--manifest-path")
        .arg(opts.crate_dir.join("Cargo.toml"))
        .args(["--lib", "--release", "--crate-type", "cdylib"])
        .args(["--target", "nvptx64-nvidia-cuda"])
        // core has no prebuilt nvptx64 build on rustup: build it from rust-src.
        .arg("-Zbuild-std=core")
        .arg("--target-dir")
        .arg(&target_dir)
        // One module with everything in it: fat LTO into a single codegen unit, and no
        // unwinding (a device panic traps).
        .args(["--config", "profile.release.lto=\"fat\""])
        .args(["--config", "profile.release.codegen-units=1"])
        .args(["--config", "profile.release.panic=\"abort\""])
        .args(["--config", "profile.release.opt-level=3"])
        .args(["--config", "profile.release.debug=false"])
        .arg("--")
        // The PTX is the assembly output; there is nothing to link.
        .args(["--emit=asm", "-C", "linker=/bin/true"])
        // sm_70 for sm_60 (rustc's oldest), with cfg gpu_ws_only; re-labelled below.
        .args(["-C", &format!("target-cpu={cpu}")])
        .args(&cfgs);
    if let Some(f) = ptx_features(&opts.arch)? {
        cmd.args(["-C", &format!("target-feature={f}")]);
    }
    let status = cmd.status().map_err(BuildError::NoRustup)?;
    if !status.success() {
        return Err(BuildError::Compile {
            arch: opts.arch.clone(),
            status: status.to_string(),
        });
    }
    let asm = target_dir.join("nvptx64-nvidia-cuda/release/deps/gpu.s");
    let ptx = std::fs::read_to_string(&asm).map_err(|_| BuildError::NoOutput(asm.clone()))?;
    let names = undefined_calls(&ptx);
    if !names.is_empty() {
        return Err(BuildError::UndefinedCall {
            arch: opts.arch.clone(),
            names,
        });
    }
    let ptx =
        with_max_registers(&ptx, opts.max_registers).map_err(|name| BuildError::MissingEntry {
            arch: opts.arch.clone(),
            name,
        })?;
    let ptx = if cpu == opts.arch {
        ptx
    } else {
        relabel_target(&ptx, &cpu, &opts.arch).map_err(|found| BuildError::Relabel {
            arch: opts.arch.clone(),
            found,
        })?
    };
    let out = opts.out_dir.join(format!("gpu_{}.ptx", opts.arch));
    std::fs::write(&out, ptx)?;
    Ok(out)
}

/// The workspace-level directory for nested PTX builds: `$CARGO_TARGET_DIR/ptx` or
/// `<workspace>/target/ptx`, shared by debug and release builds of the host.
pub fn default_out_dir(workspace_root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root.join("target"))
        .join("ptx")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_flags() {
        assert!(arch_cfgs("sm_70").is_err());
        assert!(arch_cfgs("sm_61").is_err());
        assert_eq!(arch_cfgs("sm_75").unwrap().len(), 2);
        assert!(
            arch_cfgs("sm_90")
                .unwrap()
                .contains(&"gpu_sm80".to_string())
        );
        let sm60 = arch_cfgs("sm_60").unwrap();
        assert!(sm60.contains(&"gpu_sm=\"60\"".to_string()));
        assert!(sm60.contains(&"gpu_ws_only".to_string()));
        assert!(!sm60.contains(&"gpu_sm80".to_string()));
        for a in ["sm_75", "sm_80", "sm_90"] {
            assert!(!arch_cfgs(a).unwrap().contains(&"gpu_ws_only".to_string()));
            assert_eq!(target_cpu(a).unwrap(), a);
        }
        assert_eq!(target_cpu("sm_60").unwrap(), "sm_70");
        // Bulk copies and PTX ISA 8.0 on sm_90 only.
        assert!(
            arch_cfgs("sm_90")
                .unwrap()
                .contains(&"gpu_sm90".to_string())
        );
        for a in ["sm_60", "sm_75", "sm_80"] {
            assert!(!arch_cfgs(a).unwrap().contains(&"gpu_sm90".to_string()));
            assert_eq!(ptx_features(a).unwrap(), None);
        }
        assert_eq!(ptx_features("sm_90").unwrap(), Some("+ptx80"));
    }
}
