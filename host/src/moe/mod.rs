//! GPU launchers, one file per kernel family (see gpu/src/moe/ for the kernels). Each family has a
//! pure plan (grid, block, shared memory, buffer sizes, every limit checked with the kernel name
//! in the error) and a `launch` that checks buffers against the plan.

pub mod shape;
pub mod swiglu_quant;
