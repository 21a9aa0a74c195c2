//! GPU launchers, one file per kernel family (see gpu/src/moe/ for the kernels), and the layer
//! pipeline (`prefill`). Each family has a pure plan or check (grid, block, shared memory,
//! buffer sizes, every limit checked with the kernel name in the error) and a `launch` that
//! checks buffers against it.

pub mod combine;
pub mod mmq;
pub mod model;
pub mod prefill;
pub mod route;
pub mod router;
pub mod scatter;
pub mod shape;
pub mod swiglu_quant;
