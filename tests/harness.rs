//! Shared test helpers: seeded inputs (seed printed, overridable by `MOE_TEST_SEED`), the GPU
//! (asserted present: GPU tests are `#[ignore]`d on machines without one, never skipped), output
//! poisoning with guard bands, and byte comparison that reports where and how much differs.

use cudarc::driver::CudaSlice;
use host::device::Gpu;
pub use host::rng::Rng;

/// The formats of the parity matrix: the project's 18 target pairs.
pub use host::problem::{DOWN_TYPES, GATE_UP_TYPES};

/// The byte every output is filled with before a run: unwritten bytes then differ from the
/// reference (which never produces this pattern in a full q8_1 block or an f32 of 0xa5a5a5a5).
pub const POISON: u8 = 0xa5;
/// Bytes checked past the end of every output buffer.
pub const GUARD: usize = 4096;

/// A seed for this test: `MOE_TEST_SEED` if set, else fresh from the clock. Printed, so a failure
/// can be replayed.
pub fn seed(test: &str) -> u64 {
    let s = std::env::var("MOE_TEST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("{test}: seed {s} (replay with MOE_TEST_SEED={s})");
    s
}

/// The GPU. Panics when there is none: GPU tests are #[ignore = "needs a CUDA GPU"] and must not
/// pass without running.
pub fn gpu() -> Gpu {
    match Gpu::open() {
        Ok(g) => {
            eprintln!(
                "device: {} (cc {}, {} SMs, PTX sm_{})",
                g.info.name, g.info.cc, g.info.sm_count, g.info.ptx_arch
            );
            g
        }
        Err(e) => panic!("this test needs a CUDA GPU: {e}"),
    }
}

/// A device output buffer of `len` bytes plus [`GUARD`] guard bytes, all poisoned.
pub fn poisoned_u8(gpu: &Gpu, len: usize) -> CudaSlice<u8> {
    gpu.alloc_filled::<u8>(len + GUARD, POISON)
        .expect("allocation should succeed")
}

/// A device f32 output buffer of `len` elements plus guard, all bytes poisoned.
pub fn poisoned_f32(gpu: &Gpu, len: usize) -> CudaSlice<f32> {
    gpu.alloc_filled::<f32>(len + GUARD / 4, POISON)
        .expect("allocation should succeed")
}

/// Downloads a poisoned buffer, checks its guard band is untouched, returns the first `len`
/// bytes.
pub fn download_checked(gpu: &Gpu, label: &str, buf: &CudaSlice<u8>, len: usize) -> Vec<u8> {
    let mut v = gpu.download(buf).expect("download should succeed");
    let guard = &v[len..];
    let touched = guard.iter().filter(|&&b| b != POISON).count();
    assert_eq!(
        touched, 0,
        "{label}: {touched} guard bytes past the output were written"
    );
    v.truncate(len);
    v
}

/// f32 variant of [`download_checked`], returned as bytes.
pub fn download_checked_f32(gpu: &Gpu, label: &str, buf: &CudaSlice<f32>, len: usize) -> Vec<u8> {
    let v = gpu.download(buf).expect("download should succeed");
    let bytes: &[u8] = bytemuck::cast_slice(&v);
    let touched = bytes[len * 4..].iter().filter(|&&b| b != POISON).count();
    assert_eq!(
        touched, 0,
        "{label}: {touched} guard bytes past the output were written"
    );
    bytes[..len * 4].to_vec()
}

/// Asserts `got == want` byte for byte. On mismatch reports the count and the first few
/// positions, decoded by `locate(byte offset) -> String`.
pub fn assert_bytes_eq(label: &str, got: &[u8], want: &[u8], locate: impl Fn(usize) -> String) {
    assert_eq!(got.len(), want.len(), "{label}: length");
    // Equal slices compare at memcmp's rate; the byte-by-byte walk runs only to report a
    // difference (the reference-shape tests compare hundreds of MB per pipeline and run).
    if got == want {
        eprintln!("{label}: 0 of {} bytes differ", got.len());
        return;
    }
    let diffs: Vec<usize> = (0..got.len()).filter(|&i| got[i] != want[i]).collect();
    let first: Vec<String> = diffs
        .iter()
        .take(8)
        .map(|&i| {
            format!(
                "  byte {i} ({}): got {:#04x} want {:#04x}",
                locate(i),
                got[i],
                want[i]
            )
        })
        .collect();
    panic!(
        "{label}: {} of {} bytes differ; first:\n{}",
        diffs.len(),
        got.len(),
        first.join("\n")
    );
}

/// Locates a byte of a D4 q8_1 buffer of `n_cols` rows: (row, value or scale).
pub fn locate_q8_1(n_cols: usize) -> impl Fn(usize) -> String {
    move |i| {
        let blk = i / 144;
        let (kc, row) = (blk / n_cols, blk % n_cols);
        let o = i % 144;
        if o < 16 {
            format!(
                "row {row}, scale of values {}..{}",
                kc * 128 + o / 4 * 32,
                kc * 128 + o / 4 * 32 + 32
            )
        } else {
            format!("row {row}, value {}", kc * 128 + o - 16)
        }
    }
}

/// The text of kernel `name` in a PTX module, from its `.entry` line to its closing brace.
pub fn kernel_body<'a>(ptx: &'a str, name: &str) -> Option<&'a str> {
    let start = ptx.find(&format!(".entry {name}("))?;
    let rest = &ptx[start..];
    let end = rest.find("\n}\n").map(|e| e + 3).unwrap_or(rest.len());
    Some(&rest[..end])
}

#[cfg(test)]
mod tests {
    use super::assert_bytes_eq;

    #[test]
    fn byte_comparison_passes_equal_and_reports_differences() {
        let a: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        assert_bytes_eq("same", &a, &a.clone(), |i| format!("at {i}"));
        let mut b = a.clone();
        b[5] ^= 1;
        b[99_999] ^= 0x80;
        let e = std::panic::catch_unwind(|| assert_bytes_eq("x", &b, &a, |i| format!("at {i}")))
            .expect_err("a difference panics");
        let msg = e.downcast_ref::<String>().expect("a formatted message");
        assert!(msg.starts_with("x: 2 of 100000 bytes differ"), "{msg}");
        assert!(
            msg.contains("byte 5 (at 5)") && msg.contains("byte 99999 (at 99999)"),
            "{msg}"
        );
    }
}
