//! The streaming writer: a GGUF v3 file from metadata, tensor specs and a callback that writes
//! each tensor's bytes, so a multi-GB model never has to be in memory at once.
//!
//! Contract: everything is validated before the first byte is written (alignment, keys, array
//! element types, tensor names, shapes and types, sizes). The output is what gguf.cpp writes:
//! header, KV pairs, tensor infos, zero padding to the alignment, then each tensor followed by
//! zero padding to the alignment. The callback must write exactly the tensor's size; anything
//! else is an error naming the tensor, and [`write_gguf`] then removes the partial file.
//! Whatever [`super::parse`] derives from the output (alignment, offsets, metadata) is what was
//! asked for.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use super::{
    ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAGIC, MAX_ARRAY_DEPTH, MAX_NAME_BYTES, VERSION, Value,
    ValueType, align_up, tensor_bytes,
};
use crate::error::{Error, Result};

/// A tensor to write: its data comes from the `fill` callback.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// Name, unique, 1 to [`MAX_NAME_BYTES`] bytes.
    pub name: String,
    /// `ne`, ne0 first; 1 to 4 entries, each >= 1, ne0 a multiple of the type's block.
    pub dims: Vec<u64>,
    /// ggml type id.
    pub ggml_type: u32,
}

impl TensorSpec {
    /// A spec from its parts.
    pub fn new(name: impl Into<String>, dims: &[u64], ggml_type: u32) -> TensorSpec {
        TensorSpec {
            name: name.into(),
            dims: dims.to_vec(),
            ggml_type,
        }
    }

    /// Size of the tensor's data in bytes, if the shape and type are valid.
    pub fn n_bytes(&self) -> Option<u64> {
        tensor_bytes(&self.dims, self.ggml_type).ok()
    }
}

/// Writes a GGUF v3 file at `path` (see the module contract). `alignment` must be a power of two;
/// when it is not 32 and `metadata` lacks `general.alignment`, that key is appended to the
/// metadata; when `metadata` has it, it must be a u32 equal to `alignment`. `fill(i, out)` must
/// write exactly the bytes of `tensors[i]`. On any error the partial file is removed.
pub fn write_gguf(
    path: &Path,
    metadata: &[(String, Value)],
    tensors: &[TensorSpec],
    alignment: u64,
    fill: impl FnMut(usize, &mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    let header = encode_header(path, metadata, tensors, alignment)?;
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::create(path).map_err(io)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let written = write_body(path, &mut out, &header, tensors, alignment, fill)
        .and_then(|_| out.flush().map_err(io));
    if written.is_err() {
        // Best effort: a partial file must not be mistaken for a model. The original error is
        // the one worth reporting.
        let _ = std::fs::remove_file(path);
    }
    written
}

/// [`write_gguf`] into any writer; `path` only names the output in errors. Returns the number of
/// bytes written.
pub fn write_to<W: Write>(
    out: &mut W,
    path: &Path,
    metadata: &[(String, Value)],
    tensors: &[TensorSpec],
    alignment: u64,
    fill: impl FnMut(usize, &mut dyn Write) -> io::Result<()>,
) -> Result<u64> {
    let header = encode_header(path, metadata, tensors, alignment)?;
    write_body(path, out, &header, tensors, alignment, fill)
}

/// [`write_gguf`] into memory, for tests and small files.
pub fn to_bytes(
    metadata: &[(String, Value)],
    tensors: &[TensorSpec],
    alignment: u64,
    fill: impl FnMut(usize, &mut dyn Write) -> io::Result<()>,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    write_to(
        &mut out,
        Path::new("<memory>"),
        metadata,
        tensors,
        alignment,
        fill,
    )?;
    Ok(out)
}

/// Everything before the data section, padding included, after validating all inputs.
fn encode_header(
    path: &Path,
    metadata: &[(String, Value)],
    tensors: &[TensorSpec],
    alignment: u64,
) -> Result<Vec<u8>> {
    let err = |msg: String| Error::Gguf {
        path: path.to_path_buf(),
        msg,
    };
    if !alignment.is_power_of_two() || alignment > u64::from(u32::MAX) {
        return Err(err(format!(
            "alignment {alignment} is not a power of two that fits a u32"
        )));
    }

    let mut keys = HashSet::new();
    for (key, value) in metadata {
        if key.is_empty() {
            return Err(err("a metadata key is empty".into()));
        }
        if !keys.insert(key.as_str()) {
            return Err(err(format!("duplicate metadata key '{key}'")));
        }
        check_value(value, 0).map_err(|m| err(format!("metadata key '{key}': {m}")))?;
    }
    let extra = match metadata.iter().find(|(k, _)| k == ALIGNMENT_KEY) {
        Some((_, Value::U32(a))) if u64::from(*a) == alignment => None,
        Some((_, v)) => {
            return Err(err(format!(
                "metadata sets {ALIGNMENT_KEY} to {} but alignment {alignment} was asked for",
                v.describe()
            )));
        }
        None if alignment == DEFAULT_ALIGNMENT => None,
        None => u32::try_from(alignment)
            .ok()
            .map(|a| (ALIGNMENT_KEY.to_string(), Value::U32(a))),
    };

    let mut names = HashSet::new();
    let mut offsets = Vec::with_capacity(tensors.len());
    let mut next = 0u64;
    for t in tensors {
        let name = &t.name;
        if name.is_empty() || name.len() > MAX_NAME_BYTES {
            return Err(err(format!(
                "tensor name '{name}' must have 1 to {MAX_NAME_BYTES} bytes"
            )));
        }
        if !names.insert(name.as_str()) {
            return Err(err(format!("duplicate tensor name '{name}'")));
        }
        let n_bytes =
            tensor_bytes(&t.dims, t.ggml_type).map_err(|m| err(format!("tensor '{name}' {m}")))?;
        offsets.push(next);
        next = next
            .checked_add(n_bytes)
            .and_then(|e| align_up(e, alignment))
            .ok_or_else(|| {
                err(format!(
                    "tensor '{name}': the data section size overflows u64"
                ))
            })?;
    }

    let mut h = Vec::new();
    h.extend_from_slice(&MAGIC.to_le_bytes());
    h.extend_from_slice(&VERSION.to_le_bytes());
    h.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    h.extend_from_slice(&((metadata.len() + usize::from(extra.is_some())) as u64).to_le_bytes());
    for (key, value) in metadata.iter().chain(extra.as_ref()) {
        put_str(&mut h, key);
        h.extend_from_slice(&value.value_type().id().to_le_bytes());
        put_value(&mut h, value);
    }
    for (t, offset) in tensors.iter().zip(offsets) {
        put_str(&mut h, &t.name);
        h.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        for &d in &t.dims {
            h.extend_from_slice(&d.to_le_bytes());
        }
        h.extend_from_slice(&t.ggml_type.to_le_bytes());
        h.extend_from_slice(&offset.to_le_bytes());
    }
    let padded = align_up(h.len() as u64, alignment)
        .ok_or_else(|| err("the header size overflows".into()))?;
    h.resize(padded as usize, 0);
    Ok(h)
}

/// Every array element has the declared element type, and nesting stays within the limit the
/// reader accepts.
fn check_value(value: &Value, depth: usize) -> std::result::Result<(), String> {
    let Value::Array(elem, items) = value else {
        return Ok(());
    };
    if depth >= MAX_ARRAY_DEPTH {
        return Err(format!("arrays nested more than {MAX_ARRAY_DEPTH} deep"));
    }
    for (i, item) in items.iter().enumerate() {
        if item.value_type() != *elem {
            return Err(format!(
                "element {i} of an array of {} is a {}",
                elem.name(),
                item.value_type().name()
            ));
        }
        check_value(item, depth + 1)?;
    }
    Ok(())
}

fn put_str(h: &mut Vec<u8>, s: &str) {
    h.extend_from_slice(&(s.len() as u64).to_le_bytes());
    h.extend_from_slice(s.as_bytes());
}

/// A value without its type tag (array elements carry none).
fn put_value(h: &mut Vec<u8>, value: &Value) {
    match value {
        Value::U8(v) => h.push(*v),
        Value::I8(v) => h.extend_from_slice(&v.to_le_bytes()),
        Value::U16(v) => h.extend_from_slice(&v.to_le_bytes()),
        Value::I16(v) => h.extend_from_slice(&v.to_le_bytes()),
        Value::U32(v) => h.extend_from_slice(&v.to_le_bytes()),
        Value::I32(v) => h.extend_from_slice(&v.to_le_bytes()),
        Value::F32(v) => h.extend_from_slice(&v.to_le_bytes()),
        Value::Bool(v) => h.push(u8::from(*v)),
        Value::Str(s) => put_str(h, s),
        Value::Array(elem, items) => {
            h.extend_from_slice(&ValueType::id(*elem).to_le_bytes());
            h.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for item in items {
                put_value(h, item);
            }
        }
        Value::U64(v) => h.extend_from_slice(&v.to_le_bytes()),
        Value::I64(v) => h.extend_from_slice(&v.to_le_bytes()),
        Value::F64(v) => h.extend_from_slice(&v.to_le_bytes()),
    }
}

/// The header, then each tensor from `fill` followed by its padding. Returns the bytes written.
fn write_body<W: Write>(
    path: &Path,
    out: &mut W,
    header: &[u8],
    tensors: &[TensorSpec],
    alignment: u64,
    mut fill: impl FnMut(usize, &mut dyn Write) -> io::Result<()>,
) -> Result<u64> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let err = |msg: String| Error::Gguf {
        path: path.to_path_buf(),
        msg,
    };
    out.write_all(header).map_err(io)?;
    let mut total = header.len() as u64;
    let zeros = [0u8; 256];
    for (i, t) in tensors.iter().enumerate() {
        // encode_header validated every spec, so the size exists.
        let n_bytes = t
            .n_bytes()
            .ok_or_else(|| err(format!("tensor '{}' has no valid size", t.name)))?;
        let mut sink = TensorSink {
            out: &mut *out,
            left: n_bytes,
            overflow: false,
        };
        let filled = fill(i, &mut sink);
        let (left, overflow) = (sink.left, sink.overflow);
        if overflow {
            return Err(err(format!(
                "fill for tensor '{}' (index {i}) wrote more than the tensor's {n_bytes} bytes",
                t.name
            )));
        }
        filled.map_err(io)?;
        if left != 0 {
            return Err(err(format!(
                "fill for tensor '{}' (index {i}) wrote {} bytes; the tensor has {n_bytes} bytes",
                t.name,
                n_bytes - left
            )));
        }
        let end = total
            .checked_add(n_bytes)
            .ok_or_else(|| err("the file size overflows u64".into()))?;
        let padded =
            align_up(end, alignment).ok_or_else(|| err("the file size overflows u64".into()))?;
        let mut pad = padded - end;
        while pad > 0 {
            let n = pad.min(zeros.len() as u64) as usize;
            out.write_all(&zeros[..n]).map_err(io)?;
            pad -= n as u64;
        }
        total = padded;
    }
    Ok(total)
}

/// Passes one tensor's bytes through, refusing any beyond its size.
struct TensorSink<'w, W: Write> {
    out: &'w mut W,
    /// Bytes the tensor still needs.
    left: u64,
    /// The callback tried to write past the tensor's end.
    overflow: bool,
}

impl<W: Write> Write for TensorSink<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() as u64 > self.left {
            self.overflow = true;
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "more bytes than the tensor's size",
            ));
        }
        let n = self.out.write(buf)?;
        self.left -= n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}
