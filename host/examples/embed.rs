//! Embedding one MoE layer's prefill in an engine, with the `host` library:
//!
//! 1. describe the layer (`MoeShape`) and borrow its expert weights where they lie
//!    (`LayerWeights`: raw ggml blocks, from a GGUF file through `host::moe::model::file_layer`
//!    or from your own buffers through `host::formats::ExpertTensor`);
//! 2. open the GPU once (`Gpu::open`) and upload the weights once (`DeviceLayer::upload`);
//! 3. build a pipeline for the largest batch you will run (`Prefill::new`, expert path `auto`);
//! 4. per batch: activations `[n_tokens][hidden]` f32 on the device, router logits (or a routing
//!    you computed), `Prefill::run`, then `Prefill::output` (or keep using the device buffer).
//!
//! Every step returns `host::Result`: a shape that does not fit, a bad routing or a missing GPU
//! is an `Error` value, never a panic. Run it with `cargo run --release --example embed` (it
//! checks the GPU's output against the CPU reference; without a GPU it says so and stops).

use gpu::layout::WType;
use host::device::Gpu;
use host::moe::layer::DeviceLayer;
use host::moe::path::PathChoice;
use host::moe::prefill::{Prefill, RoutingInput};
use host::moe::router;
use host::problem::{MoeShape, Numerics, RouteRule};
use host::synth::SyntheticLayer;

fn main() -> host::Result<()> {
    // A layer of 64 experts (top-8), hidden 1024, expert FFN 512: IQ2_XXS gate/up, Q8_0 down.
    // Here the weights are synthetic; a GGUF model's come from `host::moe::model::file_layer`.
    let shape = MoeShape {
        n_experts: 64,
        top_k: 8,
        hidden: 1024,
        ffn: 512,
        gate_up_type: WType::Iq2Xxs,
        down_type: WType::Q8_0,
        numerics: Numerics::Mmq,
    };
    let layer = SyntheticLayer::new(shape, false, 7)?;
    let rule = RouteRule {
        n_experts: shape.n_experts,
        top_k: shape.top_k,
        norm: true,
        scale: 1.0,
    };

    let gpu = match Gpu::open() {
        Ok(gpu) => gpu,
        Err(e) => {
            println!("{e}: this example needs a CUDA GPU.");
            return Ok(());
        }
    };
    let dev = DeviceLayer::upload(&gpu, &layer.weights(), &shape)?;
    let max_tokens = 300;
    let mut prefill = Prefill::new(&gpu, &shape, max_tokens, PathChoice::Auto)?;

    // One batch: activations and router logits (the engine's; computed on the CPU here).
    let n_tokens = 300;
    let x = host::synth::normal_f32(1, n_tokens * shape.hidden, 1.0);
    let logits = router::logits(&x, &layer.router, shape.n_experts, shape.hidden);
    let (dx, dlogits) = (gpu.upload(&x)?, gpu.upload(&logits)?);
    let times = prefill.run(
        &gpu,
        &dev,
        &dx,
        n_tokens,
        RoutingInput::Logits(&dlogits, rule),
    )?;
    let out = prefill.output(&gpu)?;
    println!(
        "{n_tokens} tokens on the {} path in {:.3} ms; output [{} x {}]",
        prefill.path().name(),
        times.total,
        n_tokens,
        shape.hidden
    );

    // The same layer on the CPU reference: the bytes must be equal.
    let routing = host::reference::route::route(&logits, n_tokens, &rule);
    let want = host::reference::prefill(&x, &routing, &layer.weights(), &shape).out;
    let differ = out
        .iter()
        .zip(&want)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    println!(
        "values differing from the CPU reference: {differ} of {}",
        out.len()
    );
    if differ != 0 {
        return Err(host::Error::Mismatch(format!(
            "{differ} output values differ from the CPU reference"
        )));
    }
    Ok(())
}
