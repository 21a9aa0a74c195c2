//! GGUF files: a reader that never trusts its input, a streaming writer, and the finder of a
//! model's MoE layers.
//!
//! Layout (little-endian; ggml/src/gguf.cpp is the authority, docs/ggml-reference.md §9 the
//! summary): u32 magic "GGUF", u32 version (2 or 3), u64 tensor count, u64 KV count; the KV pairs
//! (string key, u32 value type, value); the tensor infos (string name, u32 n_dims, n_dims x u64
//! `ne` with ne0 first, u32 ggml type, u64 offset); zero padding up to a multiple of the
//! alignment (`general.alignment`, a u32 power of two, else 32), which is where the data
//! section starts; then the tensors, tensor i at the data-section offset equal to the sum of the
//! sizes of tensors 0..i, each rounded up to the alignment.
//!
//! Contract of the reader ([`parse`], [`GgufFile::open`]):
//! - Every malformed input is an [`Error::Gguf`] whose message names what is wrong and where
//!   (byte offset, key or tensor name). It never panics, and it never allocates more than the
//!   input could hold: every count and length is checked against the bytes left before it is
//!   used.
//! - A file it accepts has: version 2 or 3; unique, non-empty keys; a valid `general.alignment`
//!   if present; unique, non-empty tensor names of at most [`MAX_NAME_BYTES`] bytes; 1 to 4
//!   dimensions, each in `1..=i64::MAX`; a known ggml type with `ne0` a multiple of its block;
//!   offsets exactly as gguf.cpp requires; every tensor's bytes inside the file.
//! - Opening reads the header region only: tensor data is mapped, never read or copied.
//!
//! Stricter than gguf.cpp, deliberately: zero-sized dimensions, `n_dims = 0`, empty tensor names
//! and bool bytes other than 0 and 1 are rejected. Looser: arrays of arrays are accepted (up to
//! [`MAX_ARRAY_DEPTH`] levels; gguf-py reads them, gguf.cpp refuses them).

mod cursor;
mod info;
mod model;
mod read;
mod value;
mod write;

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::error::{Error, Result};
use crate::ggml::{block_size, type_name};

pub use info::ModelInfo;
pub use model::{MoeLayer, TensorRef, is_moe_tensor_name};
pub use read::parse;
pub use value::{Value, ValueType};
pub use write::{TensorSpec, to_bytes, write_gguf, write_to};

/// "GGUF" read as a little-endian u32.
pub const MAGIC: u32 = 0x4655_4747;
/// The version the writer produces.
pub const VERSION: u32 = 3;
/// Alignment of the data section and of every tensor when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The metadata key that sets the alignment (a u32 power of two).
pub const ALIGNMENT_KEY: &str = "general.alignment";
/// Most dimensions a tensor may have (GGML_MAX_DIMS).
pub const MAX_DIMS: usize = 4;
/// Longest tensor name in bytes (ggml keeps names in a 64-byte C string: GGML_MAX_NAME - 1).
pub const MAX_NAME_BYTES: usize = 63;
/// Deepest nesting of arrays in a metadata value (1 = an array of scalars or strings).
pub const MAX_ARRAY_DEPTH: usize = 8;

/// One tensor's entry in the file's tensor-info table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Name, e.g. `blk.3.ffn_down_exps.weight`.
    pub name: String,
    /// `ne`, ne0 (the contiguous dimension) first; 1 to 4 entries.
    pub dims: Vec<u64>,
    /// ggml type id ([`crate::ggml::TYPES`]).
    pub ggml_type: u32,
    /// Byte offset of the data, relative to the start of the data section.
    pub offset: u64,
    /// Size of the data in bytes: `ne1 * ne2 * ne3 * (ne0 / QK) * block_bytes`.
    pub n_bytes: u64,
}

impl TensorInfo {
    /// `dims` padded with 1s to four entries, for comparing shapes that differ only in trailing
    /// unit dimensions.
    pub fn shape4(&self) -> [u64; MAX_DIMS] {
        let mut s = [1; MAX_DIMS];
        for (d, &n) in s.iter_mut().zip(&self.dims) {
            *d = n;
        }
        s
    }

    /// ggml's name of the type ("q8_0").
    pub fn type_name(&self) -> String {
        type_name(self.ggml_type)
    }
}

/// Everything a GGUF file says before its data section, checked (see the module contract).
#[derive(Clone, Debug)]
pub struct GgufHeader {
    version: u32,
    alignment: u64,
    data_offset: u64,
    metadata: Vec<(String, Value)>,
    tensors: Vec<TensorInfo>,
    by_name: HashMap<String, usize>,
}

impl GgufHeader {
    /// The file's GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }
    /// The alignment of the data section and of every tensor in it.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }
    /// Byte offset of the data section in the file: the end of the tensor infos rounded up to the
    /// alignment. (With no tensors this may lie past the end of the file.)
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }
    /// All key-value pairs, in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata
    }
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
    /// `key` as a u64, if it holds an integer >= 0 of any width or signedness.
    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(Value::as_u64)
    }
    /// `key` as an f32 (an f64 is rounded).
    pub fn get_f32(&self, key: &str) -> Option<f32> {
        self.get(key).and_then(Value::as_f32)
    }
    /// `key` as a bool.
    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.get(key).and_then(Value::as_bool)
    }
    /// `key` as a string.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }
    /// All tensor infos, in file order (which is also data order).
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }
    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.by_name.get(name).and_then(|&i| self.tensors.get(i))
    }
    /// Where `t`'s bytes lie in the file, if that range is inside `file_len` bytes (always so for
    /// a `t` of this header and the file it was parsed from).
    pub fn tensor_range(&self, t: &TensorInfo, file_len: usize) -> Option<std::ops::Range<usize>> {
        let start = self.data_offset.checked_add(t.offset)?;
        let end = start.checked_add(t.n_bytes)?;
        let (start, end) = (usize::try_from(start).ok()?, usize::try_from(end).ok()?);
        (end <= file_len).then_some(start..end)
    }
}

/// Where an open file's bytes live.
enum Bytes {
    Map(Mmap),
    Owned(Vec<u8>),
}

impl Bytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// A checked GGUF file with its bytes: memory-mapped by [`GgufFile::open`], or owned
/// ([`GgufFile::from_vec`], for files built in memory).
pub struct GgufFile {
    path: PathBuf,
    bytes: Bytes,
    header: GgufHeader,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("len", &self.bytes.as_slice().len())
            .field("header", &self.header)
            .finish()
    }
}

impl GgufFile {
    /// Maps `path` and checks everything up to the data section (see the module contract).
    /// Touches only the header region; tensor data is never read here.
    pub fn open(path: &Path) -> Result<GgufFile> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        // SAFETY: the map is read-only and lives as long as `self`. Like every reader of mapped
        // model files (llama.cpp included) we rely on no one truncating or rewriting the file
        // while it is open; that is memmap2's documented caveat and cannot be checked here.
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        let header = parse(path, &map)?;
        Ok(GgufFile {
            path: path.to_path_buf(),
            bytes: Bytes::Map(map),
            header,
        })
    }

    /// Checks the GGUF file held in `bytes`; `path` only names it in errors.
    pub fn from_vec(path: &Path, bytes: Vec<u8>) -> Result<GgufFile> {
        let header = parse(path, &bytes)?;
        Ok(GgufFile {
            path: path.to_path_buf(),
            bytes: Bytes::Owned(bytes),
            header,
        })
    }

    /// The path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The checked header.
    pub fn header(&self) -> &GgufHeader {
        &self.header
    }
    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_slice()
    }
    /// The file's GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.header.version
    }
    /// The alignment of the data section and of every tensor in it.
    pub fn alignment(&self) -> u64 {
        self.header.alignment
    }
    /// Byte offset of the data section in the file.
    pub fn data_offset(&self) -> u64 {
        self.header.data_offset
    }
    /// All key-value pairs, in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.header.metadata
    }
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.header.get(key)
    }
    /// `key` as a u64, if it holds an integer >= 0 of any width or signedness.
    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.header.get_u64(key)
    }
    /// `key` as an f32 (an f64 is rounded).
    pub fn get_f32(&self, key: &str) -> Option<f32> {
        self.header.get_f32(key)
    }
    /// `key` as a bool.
    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.header.get_bool(key)
    }
    /// `key` as a string.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.header.get_str(key)
    }
    /// All tensor infos, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.header.tensors
    }
    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.header.tensor(name)
    }
    /// `t`'s bytes: a slice of the map, never a copy (pages are read when first touched). For a
    /// `t` of this file the length is always `t.n_bytes`; a foreign `t` whose range falls
    /// outside the file gets an empty slice.
    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        let bytes = self.bytes.as_slice();
        self.header
            .tensor_range(t, bytes.len())
            .and_then(|r| bytes.get(r))
            .unwrap_or(&[])
    }

    /// An error about this file.
    pub(crate) fn err(&self, msg: impl Into<String>) -> Error {
        Error::Gguf {
            path: self.path.clone(),
            msg: msg.into(),
        }
    }
}

/// Bytes of a tensor of shape `dims` (ne0 first) and ggml type `ggml_type`, after checking what
/// both reader and writer require: 1 to [`MAX_DIMS`] dimensions, each in `1..=i64::MAX`, a
/// known type, ne0 a multiple of the type's block, element count and byte size without
/// overflow. The error is a message fragment; the caller adds the tensor's name and position.
pub(crate) fn tensor_bytes(dims: &[u64], ggml_type: u32) -> std::result::Result<u64, String> {
    if dims.is_empty() || dims.len() > MAX_DIMS {
        return Err(format!(
            "has {} dimensions; GGUF allows 1 to {MAX_DIMS}",
            dims.len()
        ));
    }
    for (i, &n) in dims.iter().enumerate() {
        if n == 0 {
            return Err(format!(
                "has dimension {i} = 0 (shape {dims:?}); empty tensors are not accepted"
            ));
        }
        if n > i64::MAX as u64 {
            return Err(format!(
                "has dimension {i} = {n}, more than ggml's limit i64::MAX"
            ));
        }
    }
    let Some((qk, block_bytes)) = block_size(ggml_type) else {
        return Err(format!("has unknown ggml type {ggml_type}"));
    };
    if !dims[0].is_multiple_of(qk) {
        return Err(format!(
            "has ne0 = {} elements per row, not a multiple of the {} block size {qk}",
            dims[0],
            type_name(ggml_type)
        ));
    }
    let overflow = || format!("has shape {dims:?} whose element count overflows i64");
    let mut n_elements: u64 = 1;
    for &n in dims {
        n_elements = n_elements
            .checked_mul(n)
            .filter(|&e| e <= i64::MAX as u64)
            .ok_or_else(overflow)?;
    }
    (n_elements / qk)
        .checked_mul(block_bytes)
        .ok_or_else(|| format!("has shape {dims:?} whose size in bytes overflows u64"))
}

/// `x` rounded up to a multiple of `align` (a power of two); None on overflow or `align == 0`.
pub(crate) fn align_up(x: u64, align: u64) -> Option<u64> {
    let mask = align.checked_sub(1)?;
    x.checked_add(mask).map(|v| v & !mask)
}
