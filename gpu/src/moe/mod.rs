//! Kernel families of one MoE layer's prefill (see host/src/moe/ for their launchers).
//!
//! Under cfg `gpu_ws_only` (the sm_60 module: builder/src/lib.rs) only the families the
//! weight-stationary path runs are compiled; `mmq` and `fused` need `mma`, `ldmatrix` and
//! `cp.async` (sm_75 / sm_80) and are left out.

/// Expands `$body` once per listed value with `$i` bound to it: LLVM does not always unroll
/// loops with large bodies, and a register array indexed by a loop variable goes to local
/// memory.
macro_rules! unroll {
    ($i:ident in [$($v:literal),*] $body:block) => {
        $( { #[allow(clippy::identity_op, clippy::erasing_op)] let $i: usize = $v; $body } )*
    };
}

pub mod combine;
#[cfg(not(gpu_ws_only))]
pub mod fused;
#[cfg(not(gpu_ws_only))]
pub mod mmq;
pub mod q8_1;
pub mod route;
pub mod scan;
pub mod scatter;
pub mod swiglu_quant;
pub mod tiles;
pub mod ws;
