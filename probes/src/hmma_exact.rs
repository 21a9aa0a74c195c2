//! Exactness probe of the 16-bit-float tensor-core product on integers: is
//! `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}` exact when every operand is a small
//! integer (MMQ's int8 weights and activations) and the sum fits f32's 24 bits? If it is, the
//! first half of a "Q8_0_16" step (IQ2_XS, IQ2_S: docs/h200-ceilings.md) could come out of the
//! tensor pipe already as the f32 value of its integer sum, with no `I2FP` or MAGIC subtraction.
//! One warp a case: A 16 x 16 row-major (16-bit float bits), B as 8 columns of 16 K values, C and
//! D 16 x 8 row-major f32; scripts/probe_hmma_exact.py builds the cases and checks D = C + A B.

use core::arch::asm;

/// The fragments of one case, loaded from global memory in the PTX ISA's m16n8k16 layout
/// (lane l: g = l / 4, q = l % 4): A regs (g, 2q..), (g + 8, 2q..), (g, 2q + 8..),
/// (g + 8, 2q + 8..); B regs K 2q.. and 2q + 8.. of column g; C/D (g, 2q..), (g + 8, 2q..).
struct Case {
    a: [u32; 4],
    b: [u32; 2],
    c: [u32; 4],
}

#[inline(always)]
unsafe fn load_case(a: *const u16, b: *const u16, c: *const f32, lane: usize, t: usize) -> Case {
    let (g, q) = (lane / 4, lane % 4);
    // SAFETY: the caller passes buffers of `t + 1` cases (256 + 128 halves, 128 floats each).
    unsafe {
        let a = a.add(t * 256);
        let b = b.add(t * 128);
        let c = c.add(t * 128);
        let pair = |p: *const u16| (*p as u32) | ((*p.add(1) as u32) << 16);
        let ar = |r: usize, k: usize| pair(a.add(r * 16 + k));
        let br = |k: usize| pair(b.add(g * 16 + k));
        let cr = |r: usize, n: usize| (*c.add(r * 8 + n)).to_bits();
        Case {
            a: [
                ar(g, 2 * q),
                ar(g + 8, 2 * q),
                ar(g, 2 * q + 8),
                ar(g + 8, 2 * q + 8),
            ],
            b: [br(2 * q), br(2 * q + 8)],
            c: [
                cr(g, 2 * q),
                cr(g, 2 * q + 1),
                cr(g + 8, 2 * q),
                cr(g + 8, 2 * q + 1),
            ],
        }
    }
}

#[inline(always)]
unsafe fn store_case(d: *mut f32, lane: usize, t: usize, v: [u32; 4]) {
    let (g, q) = (lane / 4, lane % 4);
    // SAFETY: as `load_case`.
    unsafe {
        let d = d.add(t * 128);
        *d.add(g * 8 + 2 * q) = f32::from_bits(v[0]);
        *d.add(g * 8 + 2 * q + 1) = f32::from_bits(v[1]);
        *d.add((g + 8) * 8 + 2 * q) = f32::from_bits(v[2]);
        *d.add((g + 8) * 8 + 2 * q + 1) = f32::from_bits(v[3]);
    }
}

macro_rules! hmma_kernel {
    ($name:ident, $ty:literal) => {
        /// One case a CTA of 32 threads: D = C + A B by the tensor core (see the module doc).
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            a: *const u16,
            b: *const u16,
            c: *const f32,
            d: *mut f32,
        ) {
            let lane = (super::tid() & 31) as usize;
            let t = super::ctaid() as usize;
            // SAFETY: the launch gives one CTA a case and buffers for all of them.
            let k = unsafe { load_case(a, b, c, lane, t) };
            let (d0, d1, d2, d3): (u32, u32, u32, u32);
            // SAFETY: register-only; all 32 lanes execute it together.
            unsafe {
                asm!(concat!("mma.sync.aligned.m16n8k16.row.col.f32.", $ty, ".", $ty,
                             ".f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, ",
                             "{{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};"),
                     d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
                     a0 = in(reg32) k.a[0], a1 = in(reg32) k.a[1], a2 = in(reg32) k.a[2],
                     a3 = in(reg32) k.a[3], b0 = in(reg32) k.b[0], b1 = in(reg32) k.b[1],
                     c0 = in(reg32) k.c[0], c1 = in(reg32) k.c[1], c2 = in(reg32) k.c[2],
                     c3 = in(reg32) k.c[3], options(pure, nomem, nostack));
                store_case(d, lane, t, [d0, d1, d2, d3]);
            }
        }
    };
}

hmma_kernel!(probe_hmma_f16, "f16");
hmma_kernel!(probe_hmma_bf16, "bf16");
