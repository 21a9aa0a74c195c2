//! GPU timing with CUDA events (launches are asynchronous; host clocks would time the queue).

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice};

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
