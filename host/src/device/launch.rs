//! The layer's kernel launches: one parameter struct a kernel, queued on a stream, on sm_90
//! with programmatic dependent launch.
//!
//! Every kernel of the layer opens with `gpu::ptx::grid_dependency_sync` (sm_90 module:
//! `griddepcontrol.launch_dependents`, then `griddepcontrol.wait`). Launched through
//! `cuLaunchKernelEx` with the programmatic-stream-serialization attribute, a kernel's CTAs are
//! then scheduled once every CTA of the kernel before it in the stream has started (its last
//! wave), and each waits at its first instruction until that kernel has completed and its
//! writes are visible: the launch's latency and the CTAs' start overlap the previous kernel's
//! tail, and stream order is kept (a kernel reads nothing before the wait). A launch after
//! something other than a kernel (a copy, an event wait) keeps its full dependency.

use std::ffi::c_void;

use cudarc::driver::sys;
use cudarc::driver::{
    CudaFunction, CudaStream, DeviceRepr, DriverError, LaunchConfig, PushKernelArg,
};

use super::Gpu;
use crate::error::Result;

/// Environment variable for programmatic dependent launch on sm_90: `on` (the default) or
/// `off` (every launch a plain `cuLaunchKernel`). Both give the same bytes.
pub const PDL_VAR: &str = "MOE_PDL";

/// Whether `MOE_PDL` asks for programmatic dependent launches (unset: yes); an unknown value
/// is an error.
pub(super) fn pdl_from_env() -> Result<bool> {
    crate::env::choice_from_env(PDL_VAR, &[("on", true), ("off", false)])
}

impl Gpu {
    /// Launches `func` with its one parameter `arg` on `stream` (the main or the side
    /// stream): with the programmatic-stream-serialization attribute where [`Gpu::pdl`] (the
    /// sm_90 module, `MOE_PDL` not `off`), else as cudarc does.
    ///
    /// # Safety
    /// As a kernel launch: `arg` is the kernel's parameter as it declares it, and every buffer
    /// it names is valid for the kernel's accesses; `func` opens with `grid_dependency_sync`
    /// (every kernel of the layer does; tests/tests/ptx.rs checks the sm_90 module).
    pub unsafe fn launch<T: DeviceRepr>(
        &self,
        stream: &CudaStream,
        func: &CudaFunction,
        cfg: LaunchConfig,
        arg: &T,
    ) -> std::result::Result<(), DriverError> {
        if !self.pdl {
            // SAFETY: forwarded contract.
            return unsafe { stream.launch_builder(func).arg(arg).launch(cfg) }.map(|_| ());
        }
        stream.context().bind_to_thread()?;
        // SAFETY: a zeroed attribute is a valid value of the C struct; its id and value set next.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: stream.cu_stream(),
            attrs: &mut attr,
            numAttrs: 1,
        };
        let mut params = [arg as *const T as *mut c_void];
        // SAFETY: the config and the one parameter outlive the call (the driver copies them);
        // forwarded contract for the kernel itself.
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                func.cu_function(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
    }
}
