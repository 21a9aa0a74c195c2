//! MoE prefill with low-bit quantized experts on the GPU, from Rust.
//!
//! - `device`: driver, context, the PTX module and its kernels.
//! - `moe`: one launcher per kernel family (plans + launches).
//! - `problem`: what both sides share (shape, weights, routing, row order).
//! - `reference`: the CPU reference every GPU result must equal byte for byte.
//! - `par`: CPU thread-pool helpers.
//! - `ggml`: type ids and block sizes.
//! - `gguf`: GGUF reader (checks everything), streaming writer, MoE-layer finder.

pub mod device;
pub mod env;
pub mod error;
pub mod formats;
pub mod ggml;
pub mod gguf;
pub mod moe;
pub mod par;
pub mod problem;
pub mod ptx;
pub mod reference;
pub mod rng;
pub mod synth;
pub mod timing;

pub use error::{Error, Result};
