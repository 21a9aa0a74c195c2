//! ggml's tensor type ids (`enum ggml_type`, ggml.h) with their block sizes
//! (`GGML_QUANT_SIZES`, gguf-py constants.py): what a GGUF reader needs to size any tensor,
//! including types this project does not run.

/// (id, name, values per block, bytes per block) of every type a GGUF file may carry.
pub const TYPES: &[(u32, &str, u64, u64)] = &[
    (0, "f32", 1, 4),
    (1, "f16", 1, 2),
    (2, "q4_0", 32, 18),
    (3, "q4_1", 32, 20),
    (6, "q5_0", 32, 22),
    (7, "q5_1", 32, 24),
    (8, "q8_0", 32, 34),
    (9, "q8_1", 32, 36),
    (10, "q2_K", 256, 84),
    (11, "q3_K", 256, 110),
    (12, "q4_K", 256, 144),
    (13, "q5_K", 256, 176),
    (14, "q6_K", 256, 210),
    (15, "q8_K", 256, 292),
    (16, "iq2_xxs", 256, 66),
    (17, "iq2_xs", 256, 74),
    (18, "iq3_xxs", 256, 98),
    (19, "iq1_s", 256, 50),
    (20, "iq4_nl", 32, 18),
    (21, "iq3_s", 256, 110),
    (22, "iq2_s", 256, 82),
    (23, "iq4_xs", 256, 136),
    (24, "i8", 1, 1),
    (25, "i16", 1, 2),
    (26, "i32", 1, 4),
    (27, "i64", 1, 8),
    (28, "f64", 1, 8),
    (29, "iq1_m", 256, 56),
    (30, "bf16", 1, 2),
    (34, "tq1_0", 256, 54),
    (35, "tq2_0", 256, 66),
    (39, "mxfp4", 32, 17),
    (40, "nvfp4", 64, 36),
    (41, "q1_0", 128, 18),
    (42, "q2_0", 64, 18),
];

/// (values per block, bytes per block) of type `id`, if ggml defines it.
pub fn block_size(id: u32) -> Option<(u64, u64)> {
    TYPES.iter().find(|t| t.0 == id).map(|t| (t.2, t.3))
}

/// ggml's name of type `id` ("q4_K"), or `"type <id>"` for an id ggml does not define.
pub fn type_name(id: u32) -> String {
    TYPES
        .iter()
        .find(|t| t.0 == id)
        .map(|t| t.1.to_string())
        .unwrap_or_else(|| format!("type {id}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn agrees_with_gpu_layout() {
        for w in gpu::layout::WType::ALL {
            let (v, b) = super::block_size(w.id()).unwrap();
            assert_eq!(
                (v as usize, b as usize),
                (w.block_values(), w.block_bytes()),
                "{}",
                w.name()
            );
            assert_eq!(super::type_name(w.id()), w.name());
        }
    }
}
