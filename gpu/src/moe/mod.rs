//! Kernel families of one MoE layer's prefill (see host/src/moe/ for their launchers).

pub mod q8_1;
pub mod swiglu_quant;
