//! GPU launchers, one file per kernel family (see gpu/src/moe/ for the kernels), the expert
//! paths (`expert/`, chosen in `path`; auto's table in `tune`), and the layer pipeline
//! (`prefill`). Each family has a pure plan or check (grid, block, shared memory, buffer sizes,
//! every limit checked with the kernel name in the error) and a `launch` that checks buffers
//! against it.

pub mod combine;
pub mod expert;
pub mod layer;
pub mod model;
pub mod path;
pub mod prefill;
pub mod route;
pub mod router;
pub mod scatter;
pub mod swiglu_quant;
pub mod tune;
pub mod ws_down;
