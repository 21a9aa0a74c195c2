//! The tensor-core wrappers: `ldmatrix` and the int8 `mma.sync` shapes (sm_75 and newer; not
//! in the sm_60 module).

use core::arch::asm;

/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16` [9.7.14.5.15]: four 8x8 matrices of 16-bit
/// elements (here: 8 rows of 16 int8 each). Lanes 8i..8i+7 give the row addresses of matrix i;
/// result register i holds matrix i's fragment: lane l gets row l/4, bytes 4(l%4)..4(l%4)+3 -
/// exactly one .b32 of an m16n8k32 int8 A or B fragment.
///
/// # Safety
/// `addr` (this lane's row) must be a 16-byte aligned shared address; all 32 lanes must call it.
#[inline(always)]
pub unsafe fn ldmatrix_x4(addr: u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller guarantees the address and convergence.
    unsafe {
        asm!("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{a}, {b}, {c}, {d}}}, [{p}];",
             a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
             p = in(reg32) addr, options(readonly, nostack));
    }
    [a, b, c, d]
}

/// `ldmatrix.sync.aligned.m8n8.x2.shared.b16` [9.7.14.5.15]: two 8x8 matrices, as
/// [`ldmatrix_x4`]'s first two (lanes 0..15 give the row addresses; the others' are unused).
///
/// # Safety
/// As [`ldmatrix_x4`] for lanes 0..15; all 32 lanes must call it.
#[inline(always)]
pub unsafe fn ldmatrix_x2(addr: u32) -> [u32; 2] {
    let (a, b): (u32, u32);
    // SAFETY: the caller guarantees the address and convergence.
    unsafe {
        asm!("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {{{a}, {b}}}, [{p}];",
             a = out(reg32) a, b = out(reg32) b, p = in(reg32) addr, options(readonly, nostack));
    }
    [a, b]
}

/// `mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32` [9.7.14.5.14] with every C element `c`: the
/// Turing shape. A: lane l holds row l/4, K 4(l%4)..+3; B: column l/4, same K; D: row l/4,
/// columns 2(l%4), +1.
#[inline(always)]
pub fn mma_m8n8k16_s8(a: u32, b: u32, c: i32) -> [i32; 2] {
    let (d0, d1): (i32, i32);
    // SAFETY: register-only; all lanes of the warp execute it together.
    unsafe {
        asm!("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {{{d0}, {d1}}}, {{{a}}}, {{{b}}}, {{{z}, {z}}};",
             d0 = out(reg32) d0, d1 = out(reg32) d1, a = in(reg32) a, b = in(reg32) b, z = in(reg32) c,
             options(pure, nomem, nostack));
    }
    [d0, d1]
}

/// int8 16x8x32 product plus `c` in every element: `mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32`
/// on sm_80+ [9.7.14.5.9], four `m8n8k16` on sm_75 (`c` is the C operand of each row pair's
/// first; the int32 sums are exact in any order). With `c = quant::MAGIC` the results are the
/// MAGIC form of the sums (`quant::magic_to_f32`).
/// A (16x32): a[0] row g, K 4t..4t+3; a[1] row g+8, same K; a[2] row g, K 16+4t..; a[3] row
/// g+8, K 16+4t.. (g = lane/4, t = lane%4). B (32x8, column-major): b[0] column g, K 4t..;
/// b[1] column g, K 16+4t... D: d[0], d[1] row g, columns 2t, 2t+1; d[2], d[3] row g+8.
#[inline(always)]
pub fn mma_m16n8k32_s8(a: [u32; 4], b: [u32; 2], c: i32) -> [i32; 4] {
    #[cfg(gpu_sm80)]
    {
        let (d0, d1, d2, d3): (i32, i32, i32, i32);
        // SAFETY: register-only; all lanes of the warp execute it together.
        unsafe {
            asm!("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{z}, {z}, {z}, {z}}};",
                 d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
                 a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                 b0 = in(reg32) b[0], b1 = in(reg32) b[1], z = in(reg32) c,
                 options(pure, nomem, nostack));
        }
        [d0, d1, d2, d3]
    }
    #[cfg(not(gpu_sm80))]
    {
        let lo0 = mma_m8n8k16_s8(a[0], b[0], c);
        let hi0 = mma_m8n8k16_s8(a[1], b[0], c);
        let lo1 = mma_m8n8k16_s8(a[2], b[1], 0);
        let hi1 = mma_m8n8k16_s8(a[3], b[1], 0);
        [
            lo0[0].wrapping_add(lo1[0]),
            lo0[1].wrapping_add(lo1[1]),
            hi0[0].wrapping_add(hi1[0]),
            hi0[1].wrapping_add(hi1[1]),
        ]
    }
}

/// int8 16x8x16 product plus `c` in every element: `mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32`
/// on sm_80+, two `m8n8k16` on sm_75. A: a[0] row g, K 4t..; a[1] row g+8. B: column g, K 4t...
/// D as [`mma_m16n8k32_s8`].
#[inline(always)]
pub fn mma_m16n8k16_s8(a: [u32; 2], b: u32, c: i32) -> [i32; 4] {
    #[cfg(gpu_sm80)]
    {
        let (d0, d1, d2, d3): (i32, i32, i32, i32);
        // SAFETY: register-only; all lanes of the warp execute it together.
        unsafe {
            asm!("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}}}, {{{b0}}}, {{{z}, {z}, {z}, {z}}};",
                 d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
                 a0 = in(reg32) a[0], a1 = in(reg32) a[1], b0 = in(reg32) b, z = in(reg32) c,
                 options(pure, nomem, nostack));
        }
        [d0, d1, d2, d3]
    }
    #[cfg(not(gpu_sm80))]
    {
        let lo = mma_m8n8k16_s8(a[0], b, c);
        let hi = mma_m8n8k16_s8(a[1], b, c);
        [lo[0], lo[1], hi[0], hi[1]]
    }
}
