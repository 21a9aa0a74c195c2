//! libFuzzer target: any bytes through the GGUF reader and the MoE-layer finder, then every
//! layer's tensors checked against its shape (`file_layer`). Nothing may panic, abort or read
//! out of bounds; a malformed file is an `Err`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::path::Path::new("fuzz-input.gguf");
    let Ok(f) = host::gguf::GgufFile::from_vec(path, data.to_vec()) else {
        return;
    };
    let _ = f.model_info();
    if let Ok(layers) = f.moe_layers() {
        for l in &layers {
            let _ = host::moe::model::file_layer(&f, l);
        }
    }
});
