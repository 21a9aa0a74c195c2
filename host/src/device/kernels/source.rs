//! Where the kernels come from: the loaded PTX text, cut into one module a kernel
//! (`ptx::split`) and each kernel's module loaded - compiled by the driver's JIT - the first time
//! the kernel is asked for ([`Lazy`]), so a run compiles only the kernels it launches. A text
//! that does not split (`ptx::split` answers `None`) is loaded whole, as one module.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use cudarc::driver::sys::CUresult;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, DriverError};

use crate::error::{Error, Result};
use crate::ptx;

/// The PTX text of the loaded target and how its kernels are loaded.
pub struct KernelSource {
    ctx: Arc<CudaContext>,
    text: Cow<'static, str>,
    form: Form,
    /// Modules loaded so far, and the nanoseconds spent in their loads (the driver's compile).
    loads: AtomicUsize,
    load_ns: AtomicU64,
}

enum Form {
    /// One module a kernel, loaded on demand.
    Split(ptx::Parts),
    /// The whole text as one module, loaded at once.
    Whole(Arc<CudaModule>),
}

impl KernelSource {
    /// The kernels of `text` in context `ctx`: split, or (where the text does not split) the
    /// whole module loaded now.
    pub fn new(ctx: &Arc<CudaContext>, text: Cow<'static, str>) -> Result<Self> {
        let t0 = Instant::now();
        let (form, loads) = match ptx::split(&text) {
            Some(parts) => (Form::Split(parts), 0),
            None => (
                Form::Whole(
                    ctx.load_module(text.as_ref().into())
                        .map_err(|e| load_error(e, "cuModuleLoadData (PTX)", &text))?,
                ),
                1,
            ),
        };
        Ok(KernelSource {
            ctx: ctx.clone(),
            text,
            form,
            loads: AtomicUsize::new(loads),
            load_ns: AtomicU64::new(if loads > 0 { nanos(t0) } else { 0 }),
        })
    }

    /// What has been loaded: one line for a report (how many of the text's kernels, the time
    /// the driver took to load - on a first run, to compile - them).
    pub fn summary(&self) -> String {
        let s = self.load_ns.load(Ordering::Relaxed) as f64 * 1e-9;
        match &self.form {
            Form::Split(parts) => format!(
                "kernels: {} of the module's {} loaded, one module each, {s:.2} s in the \
                 driver's loads (its JIT compile on a first run, its cache after)",
                self.loads.load(Ordering::Relaxed),
                parts.names(&self.text).count()
            ),
            Form::Whole(_) => format!(
                "kernels: the PTX loaded whole (it does not split into kernels), {s:.2} s in \
                 the driver's load"
            ),
        }
    }

    /// Whether the text holds kernel `name` (nothing is loaded).
    pub fn has(&self, name: &str) -> bool {
        match &self.form {
            Form::Split(parts) => parts.names(&self.text).any(|n| n == name),
            Form::Whole(module) => module.load_function(name).is_ok(),
        }
    }

    /// Kernel `name`, its module loaded (and so compiled) now where the text is split.
    pub fn load(&self, name: &'static str) -> Result<CudaFunction> {
        let module = match &self.form {
            Form::Split(parts) => {
                let one = parts
                    .kernel(&self.text, name)
                    .ok_or(Error::MissingKernel(name))?;
                let t0 = Instant::now();
                let m = self.ctx.load_module(one.into()).map_err(|e| {
                    load_error(e, "cuModuleLoadData (one kernel's PTX)", &self.text)
                })?;
                self.load_ns.fetch_add(nanos(t0), Ordering::Relaxed);
                self.loads.fetch_add(1, Ordering::Relaxed);
                m
            }
            Form::Whole(module) => module.clone(),
        };
        module
            .load_function(name)
            .map_err(|_| Error::MissingKernel(name))
    }
}

/// A failed module load as an error: where the driver is older than the text's PTX ISA, one
/// that says so and what to do (the sm_90 module is ISA 8.0, which needs a CUDA 12.0 driver;
/// the older modules 7.0, CUDA 11.0); any other failure as the driver's error.
fn load_error(source: DriverError, op: &'static str, text: &str) -> Error {
    if source.0 != CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION {
        return Error::Driver { op, source };
    }
    let isa = text
        .lines()
        .find_map(|l| l.strip_prefix(".version "))
        .map_or("?", str::trim);
    Error::NoGpu(format!(
        "the CUDA driver cannot compile this build's PTX (ISA {isa}; {:?}): it is older than \
         that ISA. Update the NVIDIA driver (ISA 8.0 needs a driver for CUDA 12.0 or newer, 7.0 \
         one for CUDA 11.0), or set {}=80 to load the sm_80 module (ISA 7.0, every path)",
        source.0,
        crate::device::PTX_ARCH_VAR
    ))
}

fn nanos(t0: Instant) -> u64 {
    t0.elapsed().as_nanos().try_into().unwrap_or(u64::MAX)
}

/// A kernel resolved on first use: its name, checked against the text when the table is built,
/// and its function once loaded.
pub struct Lazy {
    name: &'static str,
    f: OnceLock<CudaFunction>,
}

impl Lazy {
    /// Kernel `name` of `src`; `Error::MissingKernel` where the text has none.
    pub fn new(src: &KernelSource, name: &'static str) -> Result<Self> {
        if !src.has(name) {
            return Err(Error::MissingKernel(name));
        }
        Ok(Lazy {
            name,
            f: OnceLock::new(),
        })
    }

    /// The kernel, loaded from `src` (the source it was made from) on the first call. Two
    /// threads asking first may both load it; one function is kept, and they are the same code.
    pub fn get(&self, src: &KernelSource) -> Result<&CudaFunction> {
        if let Some(f) = self.f.get() {
            return Ok(f);
        }
        let f = src.load(self.name)?;
        Ok(self.f.get_or_init(|| f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_driver_is_told_to_update_or_load_an_older_module() {
        let text = "//\n.version 8.0\n.target sm_90\n";
        let e = load_error(
            DriverError(CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION),
            "op",
            text,
        );
        let msg = e.to_string();
        assert!(matches!(e, Error::NoGpu(_)), "{msg}");
        assert!(
            msg.contains("ISA 8.0") && msg.contains("MOE_PTX_ARCH=80"),
            "{msg}"
        );
        let other = load_error(DriverError(CUresult::CUDA_ERROR_INVALID_PTX), "op", text);
        assert!(matches!(other, Error::Driver { op: "op", .. }), "{other}");
    }
}
