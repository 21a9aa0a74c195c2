//! A multi-GB file: opening it reads the header, not the data.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use host::gguf::{self, GgufFile, Value};

use crate::HEAVY;
use crate::util::*;

/// A > 4 GiB tensor in a sparse file: opening maps it without reading it (resident memory grows
/// by far less than the tensor), and offsets past 4 GiB work.
#[test]
fn multi_gb_file_opens_cheaply() {
    let _heavy = HEAVY.lock().unwrap_or_else(|e| e.into_inner());
    let rows = (1u64 << 20) + 3;
    let specs = [
        spec("big.weight", &[4096, rows], 8),
        spec("after.weight", &[64], 0),
    ];
    let big_bytes = 4096 / 32 * 34 * rows;
    assert!(big_bytes > 4 << 30);

    // Run the writer into a sink that keeps only the head of the stream; the data is zeros, so
    // the head + a sparse extension is exactly the file the writer would have produced.
    let mut head = HeadSink {
        kept: Vec::new(),
        total: 0,
    };
    let zeros = vec![0u8; 1 << 20];
    let total = gguf::write_to(
        &mut head,
        Path::new("<sink>"),
        &[kv("general.architecture", Value::Str("big".into()))],
        &specs,
        32,
        |i, out| {
            let mut left = specs[i].n_bytes().expect("valid");
            while left > 0 {
                let n = left.min(zeros.len() as u64) as usize;
                out.write_all(&zeros[..n])?;
                left -= n as u64;
            }
            Ok(())
        },
    )
    .expect("the writer should accept this");
    assert_eq!(total, head.total);

    let tmp = TempFile::new("4gib");
    {
        let mut file = std::fs::File::create(&tmp.0).expect("create");
        file.write_all(&head.kept).expect("write head");
        file.set_len(total).expect("extend sparsely");
    }
    let rss_before = vm_rss_kib();
    let t0 = Instant::now();
    let f = GgufFile::open(&tmp.0).expect("open should succeed");
    let took = t0.elapsed();
    let rss_after = vm_rss_kib();
    eprintln!(
        "opened a {:.2} GiB file in {took:.2?}; VmRSS {rss_before:?} -> {rss_after:?} KiB",
        total as f64 / (1u64 << 30) as f64
    );
    // Resident memory is only measured where /proc/self/status exists.
    if cfg!(target_os = "linux") {
        let before = rss_before.expect("VmRSS should be readable on Linux");
        let after = rss_after.expect("VmRSS should be readable on Linux");
        assert!(
            after.saturating_sub(before) < 64 * 1024,
            "VmRSS grew by {} KiB while opening",
            after.saturating_sub(before)
        );
    }

    let big = f.tensor("big.weight").expect("big tensor");
    assert_eq!(
        (big.dims.as_slice(), big.ggml_type, big.offset, big.n_bytes),
        (&[4096, rows][..], 8, 0, big_bytes)
    );
    assert_eq!(f.tensor_data(big).len() as u64, big_bytes);
    let after = f.tensor("after.weight").expect("second tensor");
    assert_eq!(after.offset, big_bytes.div_ceil(32) * 32);
    assert!(f.data_offset() + after.offset > 4 << 30);
    assert_eq!(
        f.tensor_data(after),
        &[0u8; 256][..],
        "the tensor past 4 GiB reads back (as zeros)"
    );
}

/// Keeps the first 64 KiB written, counts the rest.
struct HeadSink {
    kept: Vec<u8>,
    total: u64,
}

impl Write for HeadSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let keep = buf
            .len()
            .min((64usize << 10).saturating_sub(self.kept.len()));
        self.kept.extend_from_slice(&buf[..keep]);
        self.total += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn vm_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
