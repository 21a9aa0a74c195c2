//! Shared-memory loads, stores and atomics on 32-bit shared-window addresses (from
//! [`super::smem_base`]).

use core::arch::asm;

/// `st.shared.v4.b32` [9.7.9.9].
///
/// # Safety
/// `addr` must be a 16-byte aligned shared address inside the launch's dynamic shared memory.
#[inline(always)]
pub unsafe fn st_shared_v4(addr: u32, v: [u32; 4]) {
    // SAFETY: the caller guarantees the address.
    unsafe {
        asm!("st.shared.v4.b32 [{a}], {{{x}, {y}, {z}, {w}}};", a = in(reg32) addr,
             x = in(reg32) v[0], y = in(reg32) v[1], z = in(reg32) v[2], w = in(reg32) v[3],
             options(nostack));
    }
}

/// `st.shared.b32`.
///
/// # Safety
/// `addr` must be a 4-byte aligned shared address inside the dynamic shared memory.
#[inline(always)]
pub unsafe fn st_shared_u32(addr: u32, v: u32) {
    // SAFETY: the caller guarantees the address.
    unsafe {
        asm!("st.shared.b32 [{a}], {v};", a = in(reg32) addr, v = in(reg32) v, options(nostack))
    };
}

/// `ld.shared.b32`.
///
/// # Safety
/// `addr` must be a 4-byte aligned shared address inside the dynamic shared memory.
#[inline(always)]
pub unsafe fn ld_shared_u32(addr: u32) -> u32 {
    let r: u32;
    // SAFETY: the caller guarantees the address.
    unsafe {
        asm!("ld.shared.b32 {r}, [{a}];", r = out(reg32) r, a = in(reg32) addr, options(readonly, nostack))
    };
    r
}

/// `ld.shared.u16`, zero-extended (the compiler is told so). `pure` (as [`ld_shared_u8`]): the
/// compiler may merge two loads of one address with no store or barrier between them (every
/// store and barrier here is an asm or intrinsic that writes memory, so none is crossed).
///
/// # Safety
/// `addr` must be a 2-byte aligned shared address inside the dynamic shared memory.
#[inline(always)]
pub unsafe fn ld_shared_u16(addr: u32) -> u32 {
    let r: u32;
    // SAFETY: the caller guarantees the address.
    unsafe {
        asm!("ld.shared.u16 {r}, [{a}];", r = out(reg32) r, a = in(reg32) addr, options(pure, readonly, nostack))
    };
    // SAFETY: `ld.shared.u16` zero-extends into the 32-bit register. Telling the compiler lets
    // it drop masks and the bounds checks of table lookups by the loaded value.
    unsafe { core::hint::assert_unchecked(r <= 0xffff) };
    r
}

/// `ld.shared.u8`, zero-extended (the compiler is told so); `pure`, as [`ld_shared_u16`].
///
/// # Safety
/// `addr` must be a shared address inside the dynamic shared memory.
#[inline(always)]
pub unsafe fn ld_shared_u8(addr: u32) -> u32 {
    let r: u32;
    // SAFETY: the caller guarantees the address.
    unsafe {
        asm!("ld.shared.u8 {r}, [{a}];", r = out(reg32) r, a = in(reg32) addr, options(pure, readonly, nostack))
    };
    // SAFETY: `ld.shared.u8` zero-extends (as `ld_shared_u16`).
    unsafe { core::hint::assert_unchecked(r <= 0xff) };
    r
}

/// `ld.shared.f32`.
///
/// # Safety
/// As [`ld_shared_u32`].
#[inline(always)]
pub unsafe fn ld_shared_f32(addr: u32) -> f32 {
    // SAFETY: forwarded contract.
    f32::from_bits(unsafe { ld_shared_u32(addr) })
}

/// `ld.shared.v4.b32`.
///
/// # Safety
/// `addr` must be a 16-byte aligned shared address inside the dynamic shared memory.
#[inline(always)]
pub unsafe fn ld_shared_v4_u32(addr: u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller guarantees the address.
    unsafe {
        asm!("ld.shared.v4.b32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b,
             c = out(reg32) c, d = out(reg32) d, p = in(reg32) addr, options(readonly, nostack));
    }
    [a, b, c, d]
}

/// `ld.shared.v2.b32`.
///
/// # Safety
/// `addr` must be an 8-byte aligned shared address inside the dynamic shared memory.
#[inline(always)]
pub unsafe fn ld_shared_v2_u32(addr: u32) -> [u32; 2] {
    let (a, b): (u32, u32);
    // SAFETY: the caller guarantees the address.
    unsafe {
        asm!("ld.shared.v2.b32 {{{a}, {b}}}, [{p}];", a = out(reg32) a, b = out(reg32) b,
             p = in(reg32) addr, options(readonly, nostack));
    }
    [a, b]
}

/// `ld.shared.v2` of two f32.
///
/// # Safety
/// As [`ld_shared_v2_u32`].
#[inline(always)]
pub unsafe fn ld_shared_v2_f32(addr: u32) -> [f32; 2] {
    // SAFETY: forwarded contract.
    let [a, b] = unsafe { ld_shared_v2_u32(addr) };
    [f32::from_bits(a), f32::from_bits(b)]
}

/// `atom.shared.add.u32` [9.7.13.3]: returns the old value.
///
/// # Safety
/// As [`ld_shared_u32`].
#[inline(always)]
pub unsafe fn atomic_add_shared_u32(addr: u32, v: u32) -> u32 {
    let r: u32;
    // SAFETY: the caller guarantees the address.
    unsafe {
        asm!("atom.shared.add.u32 {r}, [{a}], {v};", r = out(reg32) r, a = in(reg32) addr,
             v = in(reg32) v, options(nostack));
    }
    r
}

/// `red.shared.or.b32` [9.7.13.4]: `*addr |= v`, atomically.
///
/// # Safety
/// As [`ld_shared_u32`].
#[inline(always)]
pub unsafe fn red_or_shared_u32(addr: u32, v: u32) {
    // SAFETY: the caller guarantees the address.
    unsafe {
        asm!("red.shared.or.b32 [{a}], {v};", a = in(reg32) addr, v = in(reg32) v,
             options(nostack));
    }
}
