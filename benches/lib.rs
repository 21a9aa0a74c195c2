//! Helpers of the criterion benches: GPU timing inside `iter_custom` (events around the
//! launches, so asynchronous launches are timed on the device), and a summary table that puts
//! each median next to its ceiling.

use std::sync::Mutex;
use std::time::Duration;

use host::device::Gpu;
use host::timing::{Stats, Timer};

/// The GPU, or None after printing one line (benches without a GPU measure nothing).
pub fn gpu_or_say() -> Option<Gpu> {
    match Gpu::open() {
        Ok(g) => Some(g),
        Err(e) => {
            eprintln!("{e}: the GPU benches need one; nothing measured");
            None
        }
    }
}

/// Per-iteration GPU times of every bench, in ms, for the summary.
static SAMPLES: Mutex<Vec<(String, Vec<f64>)>> = Mutex::new(Vec::new());

/// Times `iters` back-to-back runs of `f` with CUDA events; records ms per run under `id`.
pub fn time_iters(gpu: &Gpu, id: &str, iters: u64, mut f: impl FnMut()) -> Duration {
    let t = Timer::new(gpu).expect("events");
    let ms = t
        .time(gpu, || {
            for _ in 0..iters {
                f();
            }
            Ok(())
        })
        .expect("timed launches");
    record(id, ms / iters as f64);
    Duration::from_secs_f64(ms * 1e-3)
}

/// Records one per-run time (ms) under `id` for the summary.
pub fn record(id: &str, ms: f64) {
    let mut s = SAMPLES.lock().expect("lock");
    match s.iter_mut().find(|(k, _)| k == id) {
        Some((_, v)) => v.push(ms),
        None => s.push((id.to_string(), vec![ms])),
    }
}

/// Median / min / max ms of bench `id` so far.
pub fn stats(id: &str) -> Option<Stats> {
    let s = SAMPLES.lock().expect("lock");
    s.iter()
        .find(|(k, _)| k == id)
        .map(|(_, v)| Stats::of(v.clone()))
}
