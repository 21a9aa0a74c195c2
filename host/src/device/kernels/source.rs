//! Where the kernels come from: the loaded PTX text, cut into one module a kernel
//! (`ptx::split`) and each kernel's module loaded - compiled by the driver's JIT - the first time
//! the kernel is asked for ([`Lazy`]), so a run compiles only the kernels it launches. A text
//! that does not split (`ptx::split` answers `None`) is loaded whole, as one module.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};

use crate::error::{DriverOp, Error, Result};
use crate::ptx;

/// The PTX text of the loaded target and how its kernels are loaded.
pub struct KernelSource {
    ctx: Arc<CudaContext>,
    text: Cow<'static, str>,
    form: Form,
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
        let form = match ptx::split(&text) {
            Some(parts) => Form::Split(parts),
            None => Form::Whole(
                ctx.load_module(text.as_ref().into())
                    .op("cuModuleLoadData (PTX)")?,
            ),
        };
        Ok(KernelSource {
            ctx: ctx.clone(),
            text,
            form,
        })
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
                self.ctx
                    .load_module(one.into())
                    .op("cuModuleLoadData (one kernel's PTX)")?
            }
            Form::Whole(module) => module.clone(),
        };
        module
            .load_function(name)
            .map_err(|_| Error::MissingKernel(name))
    }
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
