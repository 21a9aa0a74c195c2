//! Kernel families of one MoE layer's prefill (see host/src/moe/ for their launchers).

/// Expands `$body` once per listed value with `$i` bound to it: LLVM does not always unroll
/// loops with large bodies, and a register array indexed by a loop variable goes to local
/// memory.
macro_rules! unroll {
    ($i:ident in [$($v:literal),*] $body:block) => {
        $( { #[allow(clippy::identity_op, clippy::erasing_op)] let $i: usize = $v; $body } )*
    };
}

pub mod combine;
pub mod fused;
pub mod mmq;
pub mod q8_1;
pub mod route;
pub mod scatter;
pub mod swiglu_quant;
pub mod ws;
