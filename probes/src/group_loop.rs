//! The flat kernels' mma.sync group loop on operands in shared memory (`mma_loop`), in the
//! forms the `probe_mma*`, `probe_ffma` and `probe_imma` kernels of lib.rs select by `FORM`:
//! a group's loads ([`load`]), `mma`s ([`mmas`]) and MAGIC epilogue ([`epi`]), whole or by
//! halves.

use crate::mma::{ldmatrix_x4, mma_m16n8k32_s8};
use crate::{MAGIC, MAGIC_F, ROW, ctaid, fma, ld4, smem_base, sync, tid, zero_smem};

pub(crate) const ROLLED: u32 = 0;
pub(crate) const BARRIER: u32 = 1;
pub(crate) const PREFETCH: u32 = 2;
pub(crate) const UNROLLED: u32 = 3;
pub(crate) const FFMA_ONLY: u32 = 4;
pub(crate) const MMA_ONLY: u32 = 5;
pub(crate) const AHEAD: u32 = 6;
pub(crate) const AHEAD2: u32 = 7;
pub(crate) const HALF: u32 = 8;

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

/// A group's `mma`s on its fragments.
#[inline(always)]
fn mmas(af: &[[u32; 4]; 2], bf: &[[u32; 2]; 4]) -> [[[i32; 4]; 4]; 2] {
    let mut m = [[[0i32; 4]; 4]; 2];
    for nt in 0..4 {
        for mt in 0..2 {
            m[mt][nt] = mma_m16n8k32_s8(af[mt], bf[nt], MAGIC);
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

/// The `mma`s of 8-column tiles `2 h` and `2 h + 1` ([`mmas`]' half `h`). (With [`mmas`] and
/// [`epi`] written through these two, the measured probes' SASS changed: `probe_mma` 80 -> 96
/// registers.)
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
pub(crate) unsafe fn mma_loop<const FORM: u32>(out: *mut f32, iters: u32) {
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
        let m0 = mmas(&f.af, &f.bf);
        let mut m = m0;
        let mut fr = fragments(&p, 1);
        let mut lo = mmas_half(&f.af, &f.bf, 0);
        let mut bits = [[[0i32; 4]; 4]; 2];
        for _ in 0..iters {
            if FORM == UNROLLED {
                macro_rules! group {
                    ($g:expr) => {{
                        let f = load(&p, $g);
                        let m = mmas(&f.af, &f.bf);
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
                    let nm = mmas(&fr.0, &fr.1);
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
                    let nm = mmas(&nf.af, &nf.bf);
                    epi(&m, &f, &mut acc);
                    m = nm;
                    f = nf;
                } else if FORM == PREFETCH {
                    let m = mmas(&f.af, &f.bf);
                    let nf = load(&p, (g + 1) % 4);
                    epi(&m, &f, &mut acc);
                    f = nf;
                } else if FORM == FFMA_ONLY {
                    let (da, off, db) = scales(&p, g);
                    let fg = Frag { da, off, db, ..f };
                    epi(&m0, &fg, &mut acc);
                } else if FORM == MMA_ONLY {
                    let f = load(&p, g);
                    let m = mmas(&f.af, &f.bf);
                    for mt in 0..2 {
                        for nt in 0..4 {
                            for i in 0..4 {
                                bits[mt][nt][i] ^= m[mt][nt][i];
                            }
                        }
                    }
                } else {
                    let f = load(&p, g);
                    let m = mmas(&f.af, &f.bf);
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
