//! Issue-rate probes of the products' inner loop with MMQ's MAGIC epilogue - the flat kernels'
//! mma.sync loop, its variants and parts, and a `wgmma` form - on operands resident in shared
//! memory (no copies, no decode, no barrier in the loop): what each form issues on its own.
//! The values are zeros: only the time is read (scripts/probe_issue.py). Built by
//! scripts/build_probes.sh for sm_90a (`wgmma`); src/wg.rs and src/ep.rs come from gen.py.
#![no_std]
#![feature(abi_ptx, asm_experimental_arch, stdarch_nvptx, core_float_math)]
#![allow(clippy::missing_safety_doc)]

use core::arch::asm;
mod ep;
mod wg;

// The kernels' own wrappers (gpu/src/ptx), so that the probes issue what the flat kernels issue;
// scripts/build_probes.sh sets `gpu_sm80` as the builder does for sm_80 and newer.
#[allow(dead_code)]
#[path = "../../gpu/src/ptx/mma.rs"]
mod mma;
#[allow(dead_code)]
#[path = "../../gpu/src/ptx/shared.rs"]
mod shared;
use ep::epilogue;
use mma::{ldmatrix_x4, mma_m16n8k32_s8};
use shared::{ld_shared_v2_f32, ld_shared_v4_u32, st_shared_v4};
use wg::{wgmma_64x64x32, wgmma_fence, wgmma_wait};

core::arch::global_asm!(".extern .shared .align 128 .b8 SMEM[];");

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}

const MAGIC: i32 = 0x4B40_0000;
const MAGIC_F: f32 = 12_582_912.0;
const ROW: u32 = 144;

#[inline(always)]
fn smem_base() -> u32 {
    let r: u32;
    unsafe { asm!("mov.u32 {r}, SMEM;", r = out(reg32) r, options(pure, nomem, nostack)) };
    r
}
#[inline(always)]
fn tid() -> u32 {
    unsafe { core::arch::nvptx::_thread_idx_x() as u32 }
}
#[inline(always)]
fn ctaid() -> u32 {
    unsafe { core::arch::nvptx::_block_idx_x() as u32 }
}
#[inline(always)]
fn sync() {
    unsafe { core::arch::nvptx::_syncthreads() };
}
#[inline(always)]
fn fma(a: f32, b: f32, c: f32) -> f32 {
    core::f32::math::mul_add(a, b, c)
}
/// `[f32; 4]` from a 16-byte aligned shared address.
#[inline(always)]
unsafe fn ld4(addr: u32) -> [f32; 4] {
    unsafe { ld_shared_v4_u32(addr) }.map(f32::from_bits)
}

/// Zeroes the first 32 KB of the dynamic shared memory (every probe's operands live there).
#[inline(always)]
fn zero_smem() {
    let base = smem_base();
    let mut i = tid() * 16;
    while i < 32768 {
        unsafe { st_shared_v4(base + i, [0; 4]) };
        i += 256 * 16;
    }
    sync();
}

/// The flat kernel's group loop (tiles.rs `product_nt` with NT = 4, mts = 2): 8 warps as 2 x 4,
/// each a 32 x 32 tile, 4 groups of 32 K values a step, `iters` steps.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_mma(out: *mut f32, iters: u32) {
    unsafe { mma_loop::<ROLLED>(out, iters) }
}

/// [`probe_mma`] with a CTA barrier after each step, as the flat kernels have one a step.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_mma_bar(out: *mut f32, iters: u32) {
    unsafe { mma_loop::<BARRIER>(out, iters) }
}

/// [`probe_mma`] with the next group's fragments and scales loaded after this group's `mma`s,
/// before its `FFMA`s (software pipelined by one group).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_mma_prefetch(out: *mut f32, iters: u32) {
    unsafe { mma_loop::<PREFETCH>(out, iters) }
}

/// [`probe_mma`] software pipelined by one group on the sums: the next group's loads and `mma`s
/// issued before this group's `FFMA`s, so that no `FFMA` waits on an `mma` just issued.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_mma_ahead(out: *mut f32, iters: u32) {
    unsafe { mma_loop::<AHEAD>(out, iters) }
}

/// [`probe_mma_ahead`] with the fragments loaded one more group ahead: each group's `mma`s
/// can issue at the top of the loop body, before the previous group's `FFMA`s.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_mma_ahead2(out: *mut f32, iters: u32) {
    unsafe { mma_loop::<AHEAD2>(out, iters) }
}

/// [`probe_mma`] pipelined by half a group (two 8-column tiles): the `mma`s of the next half
/// issued before the `FFMA`s of this one, the next group's fragments loaded in the middle.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_mma_half(out: *mut f32, iters: u32) {
    unsafe { mma_loop::<HALF>(out, iters) }
}

/// [`probe_mma`] with the 4 groups of a step unrolled (ptxas schedules across them).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_mma_unrolled(out: *mut f32, iters: u32) {
    unsafe { mma_loop::<UNROLLED>(out, iters) }
}

/// [`probe_mma`]'s scale loads and `FFMA`s alone: each group's sums are the ones of the first
/// group (no `ldmatrix`, no `mma` in the loop).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_ffma(out: *mut f32, iters: u32) {
    unsafe { mma_loop::<FFMA_ONLY>(out, iters) }
}

/// [`probe_mma`]'s loads and `mma`s alone: each sum folded into an integer by one `LOP3`
/// instead of the two `FFMA`s.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_imma(out: *mut f32, iters: u32) {
    unsafe { mma_loop::<MMA_ONLY>(out, iters) }
}

const ROLLED: u32 = 0;
const BARRIER: u32 = 1;
const PREFETCH: u32 = 2;
const UNROLLED: u32 = 3;
const FFMA_ONLY: u32 = 4;
const MMA_ONLY: u32 = 5;
const AHEAD: u32 = 6;
const AHEAD2: u32 = 7;
const HALF: u32 = 8;

/// One group's operands of a lane: weight scales and their MAGIC offsets (4 rows), activation
/// scales (8 columns), A and B fragments.
#[derive(Clone, Copy)]
struct Frag {
    da: [f32; 4],
    off: [f32; 4],
    db: [[f32; 4]; 2],
    af: [[u32; 4]; 2],
    bf: [[u32; 2]; 4],
}

/// Shared addresses of the probe's tile (64 rows x 144 B), weight scales, activations and
/// activation scales, and the lane's place.
#[derive(Clone, Copy)]
struct Place {
    t: u32,
    wscales: u32,
    acts: u32,
    xscales: u32,
    lane: u32,
    wm: u32,
    wn: u32,
    gr: u32,
    tc: u32,
}

/// A group's scales: the weight scales with their MAGIC offsets, the activation scales.
#[inline(always)]
unsafe fn scales(p: &Place, g: u32) -> ([f32; 4], [f32; 4], [[f32; 4]; 2]) {
    unsafe {
        let da = ld4(p.wscales + (g * 64 + p.wm * 32 + p.gr * 4) * 4);
        let off = [
            -(MAGIC_F * da[0]),
            -(MAGIC_F * da[1]),
            -(MAGIC_F * da[2]),
            -(MAGIC_F * da[3]),
        ];
        let xsc = p.xscales + (g * 128 + p.wn * 32 + p.tc * 8) * 4;
        (da, off, [ld4(xsc), ld4(xsc + 16)])
    }
}

/// A group's A and B fragments.
#[inline(always)]
unsafe fn fragments(p: &Place, g: u32) -> ([[u32; 4]; 2], [[u32; 2]; 4]) {
    unsafe {
        let mut af = [[0u32; 4]; 2];
        for mt in 0..2u32 {
            let r = p.wm * 32 + mt * 16 + p.lane % 16;
            af[mt as usize] = ldmatrix_x4(p.t + r * ROW + g * 32 + (p.lane / 16) * 16);
        }
        let mut bf = [[0u32; 2]; 4];
        for np in 0..2u32 {
            let col = p.wn * 32 + np * 16 + p.lane % 8 + 8 * (p.lane / 16);
            let v = ldmatrix_x4(p.acts + col * ROW + 16 + g * 32 + ((p.lane / 8) % 2) * 16);
            bf[2 * np as usize] = [v[0], v[1]];
            bf[2 * np as usize + 1] = [v[2], v[3]];
        }
        (af, bf)
    }
}

#[inline(always)]
unsafe fn load(p: &Place, g: u32) -> Frag {
    unsafe {
        let (da, off, db) = scales(p, g);
        let (af, bf) = fragments(p, g);
        Frag {
            da,
            off,
            db,
            af,
            bf,
        }
    }
}

#[inline(always)]
fn mmas(f: &Frag) -> [[[i32; 4]; 4]; 2] {
    let mut m = [[[0i32; 4]; 4]; 2];
    for nt in 0..4 {
        for mt in 0..2 {
            m[mt][nt] = mma_m16n8k32_s8(f.af[mt], f.bf[nt], MAGIC);
        }
    }
    m
}

#[inline(always)]
fn epi(m: &[[[i32; 4]; 4]; 2], f: &Frag, acc: &mut [[[f32; 4]; 4]; 2]) {
    for nt in 0..4 {
        let dbn = [f.db[nt / 2][2 * (nt % 2)], f.db[nt / 2][2 * (nt % 2) + 1]];
        for mt in 0..2 {
            for i in 0..4 {
                let s = 2 * mt + i / 2;
                let p = fma(f32::from_bits(m[mt][nt][i] as u32), f.da[s], f.off[s]);
                acc[mt][nt][i] = fma(p, dbn[i % 2], acc[mt][nt][i]);
            }
        }
    }
}

/// The `mma`s of 8-column tiles `2 h` and `2 h + 1` ([`mmas`]' half `h`).
#[inline(always)]
fn mmas_half(af: &[[u32; 4]; 2], bf: &[[u32; 2]; 4], h: usize) -> [[[i32; 4]; 2]; 2] {
    let mut m = [[[0i32; 4]; 2]; 2];
    for n in 0..2 {
        for mt in 0..2 {
            m[mt][n] = mma_m16n8k32_s8(af[mt], bf[2 * h + n], MAGIC);
        }
    }
    m
}

/// [`epi`] for half `h`'s sums.
#[inline(always)]
fn epi_half(m: &[[[i32; 4]; 2]; 2], f: &Frag, h: usize, acc: &mut [[[f32; 4]; 4]; 2]) {
    for n in 0..2 {
        let nt = 2 * h + n;
        let dbn = [f.db[nt / 2][2 * (nt % 2)], f.db[nt / 2][2 * (nt % 2) + 1]];
        for mt in 0..2 {
            for i in 0..4 {
                let s = 2 * mt + i / 2;
                let p = fma(f32::from_bits(m[mt][n][i] as u32), f.da[s], f.off[s]);
                acc[mt][nt][i] = fma(p, dbn[i % 2], acc[mt][nt][i]);
            }
        }
    }
}

#[inline(always)]
unsafe fn mma_loop<const FORM: u32>(out: *mut f32, iters: u32) {
    zero_smem();
    let tid = tid();
    let (lane, warp) = (tid % 32, tid / 32);
    let base = smem_base();
    let p = Place {
        t: base,
        wscales: base + 9216,
        acts: base + 10240,
        xscales: base + 28672,
        lane,
        wm: warp % 2,
        wn: warp / 2,
        gr: lane / 4,
        tc: lane % 4,
    };
    let mut acc = [[[0f32; 4]; 4]; 2];
    // 4 that neither LLVM nor ptxas can see (iters < 2^31): the groups stay a loop, as in the flat
    // kernels (tiles.rs), with or without the barrier (with a plain 4 LLVM unrolled them in the
    // barrier's form, and ptxas both forms when the 4 came from a `mov`).
    let groups = 4 + (iters >> 31);
    unsafe {
        let mut f = load(&p, 0);
        let m0 = mmas(&f);
        let mut m = m0;
        let mut fr = fragments(&p, 1);
        let mut lo = mmas_half(&f.af, &f.bf, 0);
        let mut bits = [[[0i32; 4]; 4]; 2];
        for _ in 0..iters {
            if FORM == UNROLLED {
                macro_rules! group {
                    ($g:expr) => {{
                        let f = load(&p, $g);
                        let m = mmas(&f);
                        epi(&m, &f, &mut acc);
                    }};
                }
                group!(0);
                group!(1);
                group!(2);
                group!(3);
                continue;
            }
            for g in 0..groups {
                if FORM == AHEAD2 {
                    let nm = mmas(&Frag {
                        af: fr.0,
                        bf: fr.1,
                        ..f
                    });
                    fr = fragments(&p, (g + 2) % 4);
                    let (da, off, db) = scales(&p, g);
                    epi(&m, &Frag { da, off, db, ..f }, &mut acc);
                    m = nm;
                } else if FORM == HALF {
                    let (da, off, db) = scales(&p, g);
                    let sc = Frag { da, off, db, ..f };
                    let hi = mmas_half(&f.af, &f.bf, 1);
                    epi_half(&lo, &sc, 0, &mut acc);
                    let (af, bf) = fragments(&p, (g + 1) % 4);
                    f.af = af;
                    f.bf = bf;
                    lo = mmas_half(&f.af, &f.bf, 0);
                    epi_half(&hi, &sc, 1, &mut acc);
                } else if FORM == AHEAD {
                    let nf = load(&p, (g + 1) % 4);
                    let nm = mmas(&nf);
                    epi(&m, &f, &mut acc);
                    m = nm;
                    f = nf;
                } else if FORM == PREFETCH {
                    let m = mmas(&f);
                    let nf = load(&p, (g + 1) % 4);
                    epi(&m, &f, &mut acc);
                    f = nf;
                } else if FORM == FFMA_ONLY {
                    let (da, off, db) = scales(&p, g);
                    let fg = Frag { da, off, db, ..f };
                    epi(&m0, &fg, &mut acc);
                } else if FORM == MMA_ONLY {
                    let f = load(&p, g);
                    let m = mmas(&f);
                    for mt in 0..2 {
                        for nt in 0..4 {
                            for i in 0..4 {
                                bits[mt][nt][i] ^= m[mt][nt][i];
                            }
                        }
                    }
                } else {
                    let f = load(&p, g);
                    let m = mmas(&f);
                    epi(&m, &f, &mut acc);
                }
            }
            if FORM == BARRIER {
                sync();
            }
        }
        if FORM != PREFETCH {
            acc[0][0][0] += f.da[0];
        }
        for mt in 0..2 {
            for nt in 0..4 {
                for i in 0..4 {
                    acc[mt][nt][i] += bits[mt][nt][i] as f32;
                }
            }
        }
    }
    let mut s = 0.0f32;
    for mt in 0..2 {
        for nt in 0..4 {
            for i in 0..4 {
                s += acc[mt][nt][i];
            }
        }
    }
    unsafe { *out.add((ctaid() * 256 + tid) as usize) = s };
}

/// A shared-memory matrix descriptor (no swizzle): start, leading 128 B, stride 256 B.
#[inline(always)]
fn desc(addr: u32) -> u64 {
    ((addr as u64 & 0x3_ffff) >> 4) | ((128u64 >> 4) << 16) | ((256u64 >> 4) << 32)
}

/// Two warpgroups, each 64 rows x 64 columns (the CTA 64 x 128, as the flat tile), `wgmma`
/// m64n64k32 a group with D = A * B into one of two accumulator sets while the other's
/// epilogue runs; 4 groups a step, `iters` steps. Each step starts with no `wgmma` pending and
/// ends with `wait_group 0` before its last epilogue: with a `wgmma` still pending across the
/// loop's back edge, ptxas 12.9 serialized every `wgmma` (note C7514) and put both sets in the
/// same registers.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_wgmma(out: *mut f32, iters: u32) {
    zero_smem();
    let tid = tid();
    let (lane, wg, w) = (tid % 32, tid / 128, (tid % 128) / 32);
    let base = smem_base();
    let a_at = |g: u32| base + g * 2048;
    let b_at = |g: u32| base + 8192 + g * 4096 + wg * 2048;
    let wsc = |g: u32| base + 24576 + (g * 64 + 16 * w + 2 * (lane / 4)) * 4;
    let xsc = |g: u32| base + 25600 + (g * 128 + wg * 64 + (lane % 4) * 16) * 4;
    let mut acc = [0f32; 32];
    let mut d0 = [0u32; 32];
    let mut d1 = [0u32; 32];
    unsafe {
        for _ in 0..iters {
            d0 = wgmma_fence(d0);
            d0 = wgmma_64x64x32(d0, desc(a_at(0)), desc(b_at(0)));
            d1 = wgmma_fence(d1);
            d1 = wgmma_64x64x32(d1, desc(a_at(1)), desc(b_at(1)));
            d0 = wgmma_wait::<1>(d0);
            acc = epilogue(d0, acc, wsc(0), xsc(0));
            d0 = wgmma_fence(d0);
            d0 = wgmma_64x64x32(d0, desc(a_at(2)), desc(b_at(2)));
            d1 = wgmma_wait::<1>(d1);
            acc = epilogue(d1, acc, wsc(1), xsc(1));
            d1 = wgmma_fence(d1);
            d1 = wgmma_64x64x32(d1, desc(a_at(3)), desc(b_at(3)));
            d0 = wgmma_wait::<1>(d0);
            acc = epilogue(d0, acc, wsc(2), xsc(2));
            d1 = wgmma_wait::<0>(d1);
            acc = epilogue(d1, acc, wsc(3), xsc(3));
        }
    }
    let mut s = 0.0f32;
    for i in 0..32 {
        s += acc[i];
    }
    unsafe { *out.add((ctaid() * 256 + tid) as usize) = s };
}
