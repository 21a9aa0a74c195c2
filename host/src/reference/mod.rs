//! The CPU reference: the bytes every GPU path must give. Plain loops over rows, experts and K,
//! integer sums as ggml MMQ defines them, the float epilogue in the kernels' fixed K order,
//! every rounding rule taken from `gpu::quant`. It shares rules and formats with the kernels,
//! never their tiling. Work is spread over all cores with `std::thread::scope`.

pub mod swiglu_quant;

use std::sync::atomic::{AtomicUsize, Ordering};

/// Number of worker threads: all cores.
pub fn threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Calls `f(i, &mut out[i * chunk .. (i + 1) * chunk])` for every chunk of `out`, on all cores.
pub fn par_chunks_mut<T: Send>(out: &mut [T], chunk: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    let chunk = chunk.max(1);
    let parts: Vec<(usize, &mut [T])> = out.chunks_mut(chunk).enumerate().collect();
    let n = parts.len();
    let slots: Vec<std::sync::Mutex<Option<(usize, &mut [T])>>> = parts
        .into_iter()
        .map(|p| std::sync::Mutex::new(Some(p)))
        .collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads().min(n) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let taken = slots[i].lock().map(|mut g| g.take()).ok().flatten();
                    if let Some((idx, part)) = taken {
                        f(idx, part);
                    }
                }
            });
        }
    });
}

/// `(0..n).map(f)` computed on all cores, in order.
pub fn par_map<T: Send + Default>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let mut out: Vec<T> = (0..n).map(|_| T::default()).collect();
    let chunk = n.div_ceil(threads() * 8).max(1);
    par_chunks_mut(&mut out, chunk, |ci, part| {
        for (j, o) in part.iter_mut().enumerate() {
            *o = f(ci * chunk + j);
        }
    });
    out
}
