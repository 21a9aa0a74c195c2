//! The tests that link the PTX modules, in one test binary: each binary that links them
//! embeds all four modules (about 8 MB gzipped), so one binary rather than five keeps what a GPU
//! machine is given small. Each module's tests keep its name as a prefix:
//! `cargo test --release -p tests --test device -- --ignored prefill::` runs the layer parity
//! tests (on a GPU).

mod model;
mod prefill;
mod probe;
mod ptx;
mod swiglu_quant;
