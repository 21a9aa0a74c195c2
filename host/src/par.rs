//! CPU thread-pool helpers (`std::thread::scope`), for the reference, synthetic layers and the
//! router: work spread over all cores, results in order.

/// Number of worker threads: all cores.
pub fn threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Calls `f(i, &mut out[i * chunk .. (i + 1) * chunk])` for every chunk of `out`, on all cores.
pub fn par_chunks_mut<T: Send>(out: &mut [T], chunk: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    par_items(
        out.chunks_mut(chunk.max(1)).enumerate().collect(),
        |(i, c)| f(i, c),
    );
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

/// Runs `f` on every item, on all cores (items taken in order from a shared queue).
pub fn par_items<T: Send>(items: Vec<T>, f: impl Fn(T) + Sync) {
    let n = items.len();
    let queue = std::sync::Mutex::new(items.into_iter());
    std::thread::scope(|s| {
        for _ in 0..threads().min(n) {
            s.spawn(|| {
                loop {
                    let item = queue.lock().ok().and_then(|mut q| q.next());
                    match item {
                        Some(it) => f(it),
                        None => break,
                    }
                }
            });
        }
    });
}
