//! GPU timing with CUDA events (launches are asynchronous; host clocks would time the queue).

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, PushKernelArg};

use crate::device::Gpu;
use crate::error::{DriverOp, Result};

/// A pair of timing events on the GPU's stream.
pub struct Timer {
    start: CudaEvent,
    stop: CudaEvent,
}

impl Timer {
    pub fn new(gpu: &Gpu) -> Result<Self> {
        let ev = || {
            gpu.ctx
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .op("cuEventCreate")
        };
        Ok(Timer {
            start: ev()?,
            stop: ev()?,
        })
    }

    /// Milliseconds the GPU spends on `f`'s launches (queued between two events).
    pub fn time(&self, gpu: &Gpu, f: impl FnOnce() -> Result<()>) -> Result<f64> {
        self.start.record(&gpu.stream).op("cuEventRecord")?;
        f()?;
        self.stop.record(&gpu.stream).op("cuEventRecord")?;
        Ok(self.start.elapsed_ms(&self.stop).op("cuEventElapsedTime")? as f64)
    }
}

/// Median and spread (min, max) of repeated timings, in ms.
#[derive(Clone, Copy, Debug)]
pub struct Stats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Stats {
    pub fn of(mut v: Vec<f64>) -> Stats {
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n == 0 {
            f64::NAN
        } else if n % 2 == 1 {
            v[n / 2]
        } else {
            0.5 * (v[n / 2 - 1] + v[n / 2])
        };
        Stats {
            median,
            min: v.first().copied().unwrap_or(f64::NAN),
            max: v.last().copied().unwrap_or(f64::NAN),
            n,
        }
    }
}

/// Runs `f` `warmup` times untimed, then `reps` times each timed alone; returns the stats.
pub fn bench(
    gpu: &Gpu,
    warmup: usize,
    reps: usize,
    mut f: impl FnMut() -> Result<()>,
) -> Result<Stats> {
    for _ in 0..warmup {
        f()?;
    }
    gpu.sync()?;
    let t = Timer::new(gpu)?;
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        v.push(t.time(gpu, &mut f)?);
    }
    Ok(Stats::of(v))
}

/// Device-to-device copy bandwidth, GB/s counting bytes read plus written, over `bytes`-byte
/// copies: the memory ceiling every GB/s figure is compared with.
pub fn copy_bandwidth(gpu: &Gpu, bytes: usize) -> Result<(f64, Stats)> {
    let src: CudaSlice<u8> = gpu.alloc_filled(bytes, 0x5a)?;
    let mut dst: CudaSlice<u8> = gpu.alloc_filled(bytes, 0)?;
    let s = bench(gpu, 3, 20, || {
        gpu.stream.memcpy_dtod(&src, &mut dst).op("cuMemcpyDtoD")
    })?;
    Ok((2.0 * bytes as f64 / (s.median * 1e-3) / 1e9, s))
}

/// Read-only bandwidth, GB/s, over a `bytes`-byte buffer read with 16-byte `ld.global.nc`
/// (`probe_read_bandwidth`: 16 CTAs of 512 threads per SM, grid-stride): the rate of the
/// weight-read floor on the GPU in use (a copy moves each byte twice, so copy / 2 understates
/// it).
pub fn read_bandwidth(gpu: &Gpu, bytes: usize) -> Result<(f64, Stats)> {
    let bytes = bytes / 16 * 16;
    let src: CudaSlice<u8> = gpu.alloc_filled(bytes, 0x5a)?;
    let out: CudaSlice<u32> = gpu.alloc_filled(1, 0)?;
    let cfg = cudarc::driver::LaunchConfig {
        grid_dim: (gpu.info.sm_count * 16, 1, 1),
        block_dim: (512, 1, 1),
        shared_mem_bytes: 0,
    };
    // 0x5a5a5a5a XORed an even number of times per chunk is 0: the kernel never writes.
    let (n16, never) = ((bytes / 16) as u64, 1u32);
    let s = bench(gpu, 3, 20, || {
        let src_p = crate::device::dptr(&src, &gpu.stream);
        let out_p = crate::device::dptr(&out, &gpu.stream);
        // SAFETY: src holds n16 16-byte chunks (a cudaMalloc buffer is 256-byte aligned); out
        // holds one u32.
        unsafe {
            gpu.stream
                .launch_builder(&gpu.kernels.probe_read_bandwidth)
                .arg(&src_p)
                .arg(&n16)
                .arg(&never)
                .arg(&out_p)
                .launch(cfg)
        }
        .op("launch probe_read_bandwidth")?;
        Ok(())
    })?;
    Ok((bytes as f64 / (s.median * 1e-3) / 1e9, s))
}

/// The H200's read-only bandwidth, bytes per second: a 4 GiB read with 16-byte `ld.global.nc`
/// (docs/h200-ceilings.md). The weight-read floor's rate (a copy moves each byte twice, so
/// copy / 2 understates it).
pub const H200_READ_ONLY_BYTES_PER_S: f64 = 4.45e12;
/// `mma.sync m16n8k32 .s8` issue rate on the H200, int8 operations per second.
pub const H200_MMA_OPS_PER_S: f64 = 1.285e15;
/// FP32-pipe issue of MMQ's scale steps on the H200: 2 instructions per step (our epilogue:
/// `C * dA` in one fma on the MAGIC form, `gpu::quant::magic_mul`, then the fma with dB; the
/// 16-value types take 4 per 32 values) at 132 SMs x 128 lanes x 1.98 GHz
/// (docs/h200-ceilings.md). Until 6a6de04 the steps took 3 (MAGIC subtraction, FMUL, FFMA).
pub const H200_SCALE_STEPS_PER_S: f64 = 132.0 * 128.0 * 1.98e9 / 2.0;

/// The floors of one layer at `n_tokens`, ms: (weights read once at `read_bytes_per_s` - the
/// read-only rate measured by [`read_bandwidth`], or [`H200_READ_ONLY_BYTES_PER_S`] -, int8
/// work at the H200's `mma.sync` rate, MMQ's scale steps - one per 32 K values per output - at
/// the H200's FP32 issue rate).
pub fn floors_ms(
    s: &crate::problem::MoeShape,
    n_tokens: usize,
    read_bytes_per_s: f64,
) -> (f64, f64, f64) {
    let steps = s.ops(n_tokens) as f64 / 2.0 / 32.0;
    (
        s.weight_bytes() as f64 / read_bytes_per_s * 1e3,
        s.ops(n_tokens) as f64 / H200_MMA_OPS_PER_S * 1e3,
        steps / H200_SCALE_STEPS_PER_S * 1e3,
    )
}
