//! The GPU: driver presence, context and stream, the PTX module for the device, and its kernels
//! in [`Kernels`] (device/kernels.rs: the module's text cut into one module a kernel, each
//! compiled by the driver when first used).

use std::borrow::Cow;
use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute as Attr;
use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg,
};

use crate::error::{DriverOp, Error, Result};
use crate::ptx;

mod kernels;
mod launch;
mod side;
mod tma;
use kernels::KernelSource;
pub use kernels::{
    BULK_KERNELS, FORMAT_KERNELS, FormatKernels, Kernels, MMA_KERNELS, format_kernel_names,
    kernel_names, kernel_names_in,
};
pub use launch::PDL_VAR;
pub use side::{Side, SideJoin};
pub use tma::{TMA_MAP_BYTES, encode as encode_tma_map};

/// Facts about the device, for plans (limits) and reports.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub name: String,
    /// Compute capability as major * 10 + minor (90 for an H200).
    pub cc: u32,
    pub sm_count: u32,
    /// Largest dynamic shared memory one block may opt into, bytes.
    pub max_smem_optin: u32,
    pub smem_per_sm: u32,
    pub l2_bytes: u32,
    /// The PTX target loaded (e.g. 80 for sm_80).
    pub ptx_arch: u32,
    pub driver_version: i32,
}

/// The limits plans check against; [`DeviceLimits::default`] describes a conservative sm_80+
/// GPU so plans can be computed (and tested) without one.
#[derive(Clone, Copy, Debug)]
pub struct DeviceLimits {
    pub cc: u32,
    pub sm_count: u32,
    pub max_smem_optin: u32,
    /// Shared memory of one SM, bytes (what co-resident CTAs share).
    pub smem_per_sm: u32,
    /// The PTX target of the loaded module ([`DeviceInfo::ptx_arch`]): below
    /// [`ptx::MMA_MIN_ARCH`] it has no MMQ or fused kernels, and `moe::path::eligible` refuses
    /// those paths.
    pub ptx_arch: u32,
}

impl Default for DeviceLimits {
    fn default() -> Self {
        DeviceLimits {
            cc: 90,
            sm_count: 132,
            max_smem_optin: 227 * 1024,
            smem_per_sm: 228 * 1024,
            ptx_arch: 90,
        }
    }
}

/// The most CTAs along a CUDA grid's x dimension (2^31 - 1): the launchers that spread rows
/// or tokens over x refuse more.
pub const MAX_GRID_X: usize = i32::MAX as usize;

/// How long the timing harnesses (the CLI's `prefill`, the benches) hold the GPU before a timed
/// layer ([`Gpu::hold`]), in microseconds: far longer than the host takes to queue one layer's
/// dozen launches and events, so that none of its kernels waits for the host. Measured on the H200 (BENCHMARKS.md): at T = 512 the layer's first kernels (the
/// scatter's four) otherwise wait about 11 us for their launches.
pub const QUEUE_HOLD_US: u32 = 300;

/// An open GPU: context, the main stream and a side stream, the loaded module.
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    /// Work beside the main stream, ordered against it by events (device/side.rs).
    pub side: Side,
    pub kernels: Kernels,
    pub info: DeviceInfo,
    /// Whether the layer's kernels are queued as programmatic dependent launches (sm_90 module
    /// and `MOE_PDL` not `off`: device/launch.rs).
    pub pdl: bool,
}

/// Whether a CUDA driver library can be loaded on this machine (no driver call is made).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda; no CUDA function is called.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Environment variable naming a PTX file to load instead of the embedded module.
pub const PTX_OVERRIDE_VAR: &str = "MOE_PTX_FILE";

/// Environment variable choosing one of the embedded PTX modules by target (`60`, `75`, `80`,
/// `90`, or `sm_75` style) instead of the newest the device runs: to time the Turing port or the
/// sm_60 module on a newer GPU. [`Gpu::open`] honours it; `open_with` does not.
pub const PTX_ARCH_VAR: &str = "MOE_PTX_ARCH";

/// The module target `MOE_PTX_ARCH` asks for, if set; an error names a value that is not one.
fn arch_from_env() -> Result<Option<u32>> {
    let Some(v) = std::env::var_os(PTX_ARCH_VAR) else {
        return Ok(None);
    };
    let v = v.to_string_lossy();
    let n = v.trim().trim_start_matches("sm_").parse::<u32>().ok();
    match n.filter(|a| crate::ptx::module(*a).is_some()) {
        Some(a) => Ok(Some(a)),
        None => Err(Error::Unsupported(format!(
            "{PTX_ARCH_VAR}={v:?} is not a built PTX target; built: {:?}",
            crate::ptx::MODULES.iter().map(|m| m.0).collect::<Vec<_>>()
        ))),
    }
}

impl Gpu {
    /// Opens device 0: `Error::NoGpu` when there is no driver or no device.
    pub fn open() -> Result<Gpu> {
        Self::open_with(arch_from_env()?)
    }

    /// Opens device 0 with the PTX module of target `arch` (60, 75, 80, 90) instead of the newest
    /// one the device runs: tests run the sm_75 module (the Turing `m8n8k16` port) and the sm_60
    /// module (weight-stationary path only) on newer GPUs.
    pub fn open_with(arch: Option<u32>) -> Result<Gpu> {
        if !driver_present() {
            return Err(Error::NoGpu(
                "the CUDA driver library (libcuda) was not found".into(),
            ));
        }
        let n = CudaContext::device_count()
            .op("cuDeviceGetCount")
            .map_err(|e| {
                Error::NoGpu(format!(
                    "the CUDA driver is present but reports no usable device ({e})"
                ))
            })?;
        if n < 1 {
            return Err(Error::NoGpu("the CUDA driver reports 0 devices".into()));
        }
        let ctx = CudaContext::new(0).op("cuCtx (device 0)")?;
        // The main stream, ordered by construction, and a side stream ordered against it by
        // explicit events (device/side.rs): no per-buffer event tracking needed.
        // SAFETY: every buffer of this program is used on `stream`, or on `side` between a
        // fork and a join of the main stream.
        unsafe { ctx.disable_event_tracking() };
        let attr = |a| ctx.attribute(a).op("cuDeviceGetAttribute");
        let (major, minor) = ctx.compute_capability().op("compute capability")?;
        let cc = (major * 10 + minor) as u32;
        let chosen = match arch {
            Some(a) if a <= cc => Some((
                a,
                ptx::module(a).ok_or_else(|| {
                    let built: Vec<u32> = ptx::MODULES.iter().map(|m| m.0).collect();
                    Error::NoGpu(format!("no PTX module for sm_{a}; built: {built:?}"))
                })?,
            )),
            Some(a) => {
                return Err(Error::NoGpu(format!(
                    "PTX for sm_{a} cannot run on compute capability {major}.{minor}"
                )));
            }
            None => ptx::for_cc(cc),
        };
        let (ptx_arch, src) = chosen.ok_or_else(|| {
            Error::NoGpu(format!(
                "compute capability {major}.{minor} is older than the oldest PTX target built \
                 (sm_{})",
                ptx::MODULES[0].0
            ))
        })?;
        // A PTX file in place of the embedded module, for kernel experiments on a machine
        // without Rust: every kernel the host expects of the chosen target must be in it.
        let src: Cow<'static, str> = match std::env::var_os(PTX_OVERRIDE_VAR) {
            Some(path) => {
                let text = std::fs::read_to_string(&path).map_err(|source| Error::Io {
                    path: path.clone().into(),
                    source,
                })?;
                eprintln!(
                    "note: PTX module from {PTX_OVERRIDE_VAR}={}, not the built-in sm_{ptx_arch}",
                    path.to_string_lossy()
                );
                Cow::Owned(text)
            }
            None => Cow::Borrowed(src),
        };
        let kernels = Kernels::load(&Arc::new(KernelSource::new(&ctx, src)?), ptx_arch)?;
        let info = DeviceInfo {
            name: ctx.name().op("cuDeviceGetName")?,
            cc,
            sm_count: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            max_smem_optin: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?
                as u32,
            smem_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?
                as u32,
            l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u32,
            ptx_arch,
            driver_version: {
                let mut v = 0i32;
                // SAFETY: writes one int; the driver is loaded and initialised above.
                unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
                v
            },
        };
        // The main stream at the greatest priority, the side stream at the least (device/side.rs).
        let (least, greatest) = cudarc::driver::result::stream::get_priority_range()
            .op("cuCtxGetStreamPriorityRange")?;
        let stream = ctx
            .new_stream_with_priority(greatest)
            .op("cuStreamCreateWithPriority (main stream)")?;
        let side = Side::new(&ctx, least)?;
        let pdl = ptx_arch >= 90 && launch::pdl_from_env()?;
        Ok(Gpu {
            ctx,
            stream,
            side,
            kernels,
            info,
            pdl,
        })
    }

    pub fn limits(&self) -> DeviceLimits {
        DeviceLimits {
            cc: self.info.cc,
            sm_count: self.info.sm_count,
            max_smem_optin: self.info.max_smem_optin,
            smem_per_sm: self.info.smem_per_sm,
            ptx_arch: self.info.ptx_arch,
        }
    }

    /// Queues `moe_hold` (gpu/src/hold.rs): the stream is busy for `us` microseconds, so that
    /// work queued after it is all queued before the GPU reaches it.
    pub fn hold(&self, us: u32) -> Result<()> {
        let ns = u64::from(us) * 1000;
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: one thread; the kernel touches no memory.
        unsafe {
            self.stream
                .launch_builder(&self.kernels.moe_hold)
                .arg(&ns)
                .launch(cfg)
        }
        .op("launch moe_hold")?;
        Ok(())
    }

    /// Waits for all queued work; reports an asynchronous kernel fault here.
    pub fn sync(&self) -> Result<()> {
        self.stream.synchronize().op("cuStreamSynchronize")
    }

    /// Copies a host slice to a new device buffer.
    pub fn upload<T: DeviceRepr>(&self, data: &[T]) -> Result<CudaSlice<T>> {
        self.stream.clone_htod(data).op("cuMemcpyHtoD")
    }

    /// Copies a device buffer back.
    pub fn download<T: DeviceRepr + Default + Clone>(&self, buf: &CudaSlice<T>) -> Result<Vec<T>> {
        self.stream.clone_dtoh(buf).op("cuMemcpyDtoH")
    }

    /// A new device buffer of `len` elements, every byte set to `byte`.
    pub fn alloc_filled<T: DeviceRepr>(&self, len: usize, byte: u8) -> Result<CudaSlice<T>> {
        // SAFETY: the buffer is filled right below, before anyone reads it.
        let mut b = unsafe { self.stream.alloc::<T>(len) }.op("cuMemAlloc")?;
        self.fill(&mut b, byte)?;
        Ok(b)
    }

    /// Sets every byte of `buf` to `byte` (poisoning outputs before a run).
    pub fn fill<T>(&self, buf: &mut CudaSlice<T>, byte: u8) -> Result<()> {
        let n = buf.num_bytes();
        let (ptr, _rec) = buf.device_ptr(&self.stream);
        // SAFETY: ptr is a live allocation of n bytes, used on this stream only.
        unsafe { cudarc::driver::result::memset_d8_async(ptr, byte, n, self.stream.cu_stream()) }
            .op("cuMemsetD8")
    }
}

/// The raw device address of a buffer, for the pointer fields of kernel parameter structs.
pub fn dptr<T>(buf: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    buf.device_ptr(stream).0
}

/// A `gpu::layout` parameter struct passed by value to a kernel. The struct's field order is
/// defined once, in gpu::layout, and compiled into both sides.
#[repr(transparent)]
pub struct KArg<T: bytemuck::Pod>(pub T);

// SAFETY: T is a #[repr(C)] plain-old-data struct from gpu::layout whose layout the kernel
// shares (same source); the probe test `params_echo` checks it on the device.
unsafe impl<T: bytemuck::Pod> DeviceRepr for KArg<T> {}
