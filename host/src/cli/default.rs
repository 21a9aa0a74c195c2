//! The embedded default run (no arguments).

use super::swiglu::{self, SwigluArgs};

pub fn run() -> host::Result<()> {
    let a = SwigluArgs {
        rows: vec![20_480, 81_920, 163_840],
        ffn: 640,
        interleaved: false,
        seed: 1,
    };
    swiglu::run(&a)
}
