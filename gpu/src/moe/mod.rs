//! Kernel families of one MoE layer's prefill (see host/src/moe/ for their launchers).

pub mod combine;
pub mod mmq;
pub mod q8_1;
pub mod route;
pub mod scatter;
pub mod swiglu_quant;
