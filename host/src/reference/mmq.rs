//! The MMQ product of one expert on the CPU: exact integer sums per 32 values (per 16 inside the
//! term for IQ2_XS / IQ2_S), then the float epilogue `gpu::quant::mmq_step_32` /
//! `mmq_step_16` over the groups in ascending K from +0.0, no split of K
//! (docs/ggml-reference.md §5.1, §6.2); in the opt-in Q2_0 shared-d numerics a Q2_0 product's
//! step is `gpu::quant::q2_0_shared_d_step` per 64-value block instead (`Numerics`). Shared by
//! the gate/up and down references.

use gpu::layout::{BlockQ8_1Mmq, QK8_1};
use gpu::quant::{mmq_step_16, mmq_step_32, q2_0_shared_d_step};

use crate::formats::decode_row;
use crate::problem::Numerics;
use gpu::layout::WType;

/// One expert's weight matrix decoded to MMQ's int8 form.
pub struct DecodedExpert {
    pub n_rows: usize,
    pub k: usize,
    pub sixteen: bool,
    /// One Q2_0 shared-d step per 64 values (`Numerics::shared_d`) instead of MMQ's per 32.
    pub shared_d: bool,
    /// `[n_rows][k]` int8 values.
    pub q: Vec<i8>,
    /// `[n_rows][k / 16]` scales (per 16 values; equal in pairs for 32-scale types).
    pub s16: Vec<f32>,
}

impl DecodedExpert {
    /// Decodes `n_rows` rows given by `row(n)` (whole blocks of `wtype`, `k` values each), for
    /// a product in `numerics`.
    pub fn new<'a>(
        wtype: WType,
        numerics: Numerics,
        n_rows: usize,
        k: usize,
        row: impl Fn(usize) -> &'a [u8],
    ) -> Self {
        let mut q = vec![0i8; n_rows * k];
        let mut s16 = vec![0.0f32; n_rows * k / 16];
        for n in 0..n_rows {
            decode_row(
                wtype,
                row(n),
                &mut q[n * k..(n + 1) * k],
                &mut s16[n * k / 16..(n + 1) * k / 16],
            );
        }
        DecodedExpert {
            n_rows,
            k,
            sixteen: wtype.scale_values() == 16,
            shared_d: numerics.shared_d(wtype),
            q,
            s16,
        }
    }
}

/// One activation row taken out of a D4 buffer: int8 values and one scale per 32.
pub struct ActRow {
    pub q: Vec<i8>,
    pub d: Vec<f32>,
}

impl ActRow {
    /// Row `c` of the D4 buffer `buf` (`[..][n_cols]` blocks), its first `k` values.
    pub fn from_d4(buf: &[BlockQ8_1Mmq], n_cols: usize, c: usize, k: usize) -> ActRow {
        let mut q = vec![0i8; k];
        let mut d = vec![0.0f32; k / QK8_1];
        for kc in 0..k.div_ceil(128) {
            let b = &buf[kc * n_cols + c];
            let n = (k - kc * 128).min(128);
            q[kc * 128..kc * 128 + n].copy_from_slice(&b.qs[..n]);
            for g in 0..n / 32 {
                d[kc * 4 + g] = b.d[g];
            }
        }
        ActRow { q, d }
    }
}

#[inline(always)]
fn dot16(a: &[i8], b: &[i8]) -> i32 {
    let a: &[i8; 16] = a.try_into().expect("16 values");
    let b: &[i8; 16] = b.try_into().expect("16 values");
    let mut s = 0i32;
    for i in 0..16 {
        s += a[i] as i32 * b[i] as i32;
    }
    s
}

/// Output `n` of the expert for activation row `a`: the epilogue over all groups of K.
#[inline(always)]
pub fn dot_row(w: &DecodedExpert, n: usize, a: &ActRow) -> f32 {
    let k = w.k;
    let wq = &w.q[n * k..(n + 1) * k];
    let ws = &w.s16[n * k / 16..(n + 1) * k / 16];
    let mut acc = 0.0f32;
    if w.shared_d {
        // Q2_0: one block per 64 values, its scale in all four of its 16-value slots.
        for b in 0..k / 64 {
            let g = 2 * b;
            let c0 = dot16(&wq[32 * g..32 * g + 16], &a.q[32 * g..32 * g + 16])
                + dot16(
                    &wq[32 * g + 16..32 * g + 32],
                    &a.q[32 * g + 16..32 * g + 32],
                );
            let c1 = dot16(
                &wq[32 * g + 32..32 * g + 48],
                &a.q[32 * g + 32..32 * g + 48],
            ) + dot16(
                &wq[32 * g + 48..32 * g + 64],
                &a.q[32 * g + 48..32 * g + 64],
            );
            acc = q2_0_shared_d_step(acc, c0, c1, a.d[g], a.d[g + 1], ws[4 * b]);
        }
        return acc;
    }
    for g in 0..k / 32 {
        let c0 = dot16(&wq[32 * g..32 * g + 16], &a.q[32 * g..32 * g + 16]);
        let c1 = dot16(
            &wq[32 * g + 16..32 * g + 32],
            &a.q[32 * g + 16..32 * g + 32],
        );
        acc = if w.sixteen {
            mmq_step_16(acc, c0, c1, ws[2 * g], ws[2 * g + 1], a.d[g])
        } else {
            mmq_step_32(acc, c0 + c1, ws[2 * g], a.d[g])
        };
    }
    acc
}

#[inline(always)]
fn rows_impl(w: &DecodedExpert, a: &ActRow, out: &mut [f32]) {
    for (n, o) in out.iter_mut().enumerate() {
        *o = dot_row(w, n, a);
    }
}

/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_v3(w: &DecodedExpert, a: &ActRow, out: &mut [f32]) {
    rows_impl(w, a, out)
}

/// All outputs (`out.len()` rows of the expert) for activation row `a`. The same arithmetic with
/// or without AVX2/FMA (fma is exact either way: hardware, or libm's `fmaf`); the hardware path
/// is taken when the CPU has it, for speed.
pub fn expert_outputs(w: &DecodedExpert, a: &ActRow, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the features were just detected.
        unsafe { rows_v3(w, a, out) };
        return;
    }
    rows_impl(w, a, out)
}
