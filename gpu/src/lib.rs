//! MoE prefill kernels and the rules both sides share.
//!
//! Built twice: for the host (an ordinary rlib: `layout`, `quant`, `formats`, `tables`), and by
//! `builder/` for `nvptx64-nvidia-cuda` as a cdylib whose LTO'd assembly is the PTX module the
//! host loads. Kernel modules exist only in the second build. Everything a kernel and the CPU
//! reference must agree on (block formats, scale and rounding rules, decoders) lives in the shared
//! modules and is compiled into both, so one expression gives the same bits on both sides.
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, asm_experimental_arch, stdarch_nvptx, core_float_math)
)]

#[cfg(not(target_arch = "nvptx64"))]
extern crate std;

pub mod formats;
pub mod layout;
pub mod pairs;
pub mod quant;
pub mod tables;

#[cfg(target_arch = "nvptx64")]
mod hold;
#[cfg(target_arch = "nvptx64")]
mod moe;
#[cfg(target_arch = "nvptx64")]
mod probe;
#[cfg(target_arch = "nvptx64")]
mod ptx;

/// Device-side panics (bounds checks the optimiser could not remove) end the kernel with `trap`;
/// `tests/tests/ptx.rs` checks that the hot kernels contain no such path.
#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; it has no operands and touches no memory.
    unsafe { core::arch::asm!("trap;", options(noreturn)) }
}
