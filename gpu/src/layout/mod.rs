//! Memory layouts both sides share: ggml block formats and the q8_1 "D4" activation block
//! (`blocks`), one `#[repr(C)]` parameter struct per kernel (`params`), and every tile size,
//! thread count and shared-memory layout (`tiles`). Everything is re-exported here: users name
//! `gpu::layout::X`.

macro_rules! host_pod {
    ($($t:ty),*) => {$(
        // SAFETY: every type listed is #[repr(C)], made only of integer/float arrays, and has no
        // padding (its size equals the sum of its fields, checked below).
        #[cfg(not(target_arch = "nvptx64"))]
        unsafe impl Zeroable for $t {}
        #[cfg(not(target_arch = "nvptx64"))]
        unsafe impl Pod for $t {}
    )*};
}

mod blocks;
mod mmq_pipe;
mod mmq_resident;
mod mmq_tma;
mod params;
mod tiles;

pub use blocks::*;
pub use mmq_pipe::*;
pub use mmq_resident::*;
pub use mmq_tma::*;
pub use params::*;
pub use tiles::*;
