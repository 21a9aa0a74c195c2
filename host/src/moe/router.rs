//! Router logits `[n_tokens][n_experts]` = router weights `[n_experts][hidden]` x activations,
//! on the CPU (all cores), each logit one fma chain in ascending K from +0. The GPU routes from
//! these logits (`moe_route`). Router weights of a GGUF file are f32, f16 or bf16.

use crate::error::{Error, Result};
use crate::par::par_chunks_mut;

/// Whether router weights of ggml type `ty` can be read: f32 (0), f16 (1) and bf16 (30).
pub fn check_router_type(ty: u32) -> Result<()> {
    match ty {
        0 | 1 | 30 => Ok(()),
        _ => Err(Error::Unsupported(format!(
            "router weights of type {} are not supported (f32, f16 and bf16 are)",
            crate::ggml::type_name(ty)
        ))),
    }
}

/// Router weights as f32 from a GGUF tensor's bytes of ggml type `ty` (0 f32, 1 f16, 30 bf16).
pub fn router_weights_f32(ty: u32, bytes: &[u8]) -> Result<Vec<f32>> {
    check_router_type(ty)?;
    Ok(match ty {
        0 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        1 => bytes
            .chunks_exact(2)
            .map(|b| gpu::quant::f16_to_f32(u16::from_le_bytes([b[0], b[1]])))
            .collect(),
        _ => bytes
            .chunks_exact(2)
            .map(|b| f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16))
            .collect(),
    })
}

/// Logits of `n_tokens` rows of `x` (`[n_tokens][hidden]`).
pub fn logits(x: &[f32], w: &[f32], n_experts: usize, hidden: usize) -> Vec<f32> {
    let n_tokens = x.len() / hidden;
    let mut out = vec![0.0f32; n_tokens * n_experts];
    par_chunks_mut(&mut out, n_experts, |t, row| {
        let xt = &x[t * hidden..(t + 1) * hidden];
        for (e, o) in row.iter_mut().enumerate() {
            let we = &w[e * hidden..(e + 1) * hidden];
            let mut acc = 0.0f32;
            for k in 0..hidden {
                acc = gpu::quant::fma(xt[k], we[k], acc);
            }
            *o = acc;
        }
    });
    out
}
