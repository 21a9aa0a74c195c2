//! The checking parser: bytes in, a [`GgufHeader`] or an [`Error::Gguf`] out.
//!
//! Every read goes through [`Cursor`] (gguf/cursor.rs), which refuses to step past the end. Every count read from
//! the file is checked against the bytes left (times the fewest bytes one item can occupy)
//! before anything is allocated for it, and every sum and product is checked arithmetic. The
//! checks and their order follow gguf.cpp's `gguf_init_from_reader`; see the module contract in
//! `gguf/mod.rs` for where this reader is stricter or looser.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::cursor::Cursor;
use super::{
    ALIGNMENT_KEY, DEFAULT_ALIGNMENT, GgufHeader, MAGIC, MAX_DIMS, MAX_NAME_BYTES, TensorInfo,
    Value, ValueType, align_up, tensor_bytes,
};
use crate::error::Result;

/// Fewest bytes a KV pair occupies: key length, value type, a one-byte value.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;
/// Fewest bytes a tensor info occupies: name length, n_dims, one dimension, type, offset.
const MIN_INFO_BYTES: u64 = 8 + 4 + 8 + 4 + 8;
/// Elements reserved up front for an array, whatever its count says; more grow on demand, so
/// memory follows the bytes actually parsed.
pub(super) const MAX_RESERVE: u64 = 1 << 16;

/// Checks `bytes` as a GGUF file and returns everything before its data section. `path` only
/// names the file in errors. Never panics; reads nothing past the tensor infos.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<GgufHeader> {
    let mut c = Cursor {
        path,
        bytes,
        pos: 0,
    };

    let magic = c.u32(|| "the magic".into())?;
    if magic != MAGIC {
        let shown: String = magic
            .to_le_bytes()
            .iter()
            .map(|&b| (b as char).escape_default().to_string())
            .collect();
        return Err(c.err(format!(
            "bad magic \"{shown}\" at byte 0; a GGUF file starts with \"GGUF\""
        )));
    }
    let version = c.u32(|| "the version".into())?;
    check_version(&c, version)?;

    let n_tensors = c.u64(|| "the tensor count".into())?;
    let n_kv = c.u64(|| "the KV count".into())?;
    c.plausible_count(n_kv, MIN_KV_BYTES, 16, "KV count", "KV pair")?;
    c.plausible_count(n_tensors, MIN_INFO_BYTES, 8, "tensor count", "tensor info")?;

    let metadata = read_metadata(&mut c, n_kv)?;
    let alignment = alignment_of(&c, &metadata)?;
    let (tensors, by_name, info_at) = read_tensor_infos(&mut c, n_tensors)?;

    let infos_end = c.pos as u64;
    let data_offset = align_up(infos_end, alignment).ok_or_else(|| {
        c.err(format!(
            "the data section start overflows (infos end at byte {infos_end})"
        ))
    })?;
    let file_len = bytes.len() as u64;
    if !tensors.is_empty() && data_offset > file_len {
        return Err(c.err(format!(
            "truncated: the data section would start at byte {data_offset} (tensor infos end at \
             byte {infos_end}, alignment {alignment}) but the file has {file_len} bytes"
        )));
    }
    check_offsets(&c, &tensors, &info_at, alignment, data_offset)?;

    Ok(GgufHeader {
        version,
        alignment,
        data_offset,
        metadata,
        tensors,
        by_name,
    })
}

/// Versions 2 and 3 share this layout (64-bit counts); version 1 had 32-bit counts.
fn check_version(c: &Cursor, version: u32) -> Result<()> {
    if version & 0xffff == 0 && version != 0 {
        return Err(c.err(format!(
            "unsupported GGUF version {version:#010x} at byte 4: a byte-swapped small number; is \
             this a big-endian file? (this reader accepts little-endian versions 2 and 3)"
        )));
    }
    if !(2..=3).contains(&version) {
        return Err(c.err(format!(
            "unsupported GGUF version {version} at byte 4 (this reader accepts versions 2 and 3)"
        )));
    }
    Ok(())
}

fn read_metadata(c: &mut Cursor, n_kv: u64) -> Result<Vec<(String, Value)>> {
    // `plausible_count` bounded n_kv by the file length, so the reservation is too.
    let mut metadata = Vec::with_capacity(n_kv.min(MAX_RESERVE) as usize);
    let mut seen = HashSet::new();
    for i in 0..n_kv {
        let at = c.pos;
        let key = c.string(|| format!("the key of KV pair {i}"))?;
        if key.is_empty() {
            return Err(c.err(format!("KV pair {i} at byte {at} has an empty key")));
        }
        if !seen.insert(key.clone()) {
            return Err(c.err(format!(
                "duplicate metadata key '{key}' (KV pair {i} at byte {at})"
            )));
        }
        let type_at = c.pos;
        let id = c.u32(|| format!("the value type of key '{key}'"))?;
        let Some(ty) = ValueType::from_u32(id) else {
            return Err(c.err(format!(
                "key '{key}' has unknown value type {id} at byte {type_at}"
            )));
        };
        let value = c.value(ty, &key, 0)?;
        metadata.push((key, value));
    }
    Ok(metadata)
}

/// `general.alignment` if present (a u32 power of two, as gguf.cpp requires), else 32.
fn alignment_of(c: &Cursor, metadata: &[(String, Value)]) -> Result<u64> {
    match metadata
        .iter()
        .find(|(k, _)| k == ALIGNMENT_KEY)
        .map(|(_, v)| v)
    {
        None => Ok(DEFAULT_ALIGNMENT),
        Some(Value::U32(a)) if a.is_power_of_two() => Ok(u64::from(*a)),
        Some(Value::U32(a)) => Err(c.err(format!("{ALIGNMENT_KEY} = {a} is not a power of two"))),
        Some(v) => Err(c.err(format!(
            "{ALIGNMENT_KEY} must be a u32, found {}",
            v.describe()
        ))),
    }
}

type Infos = (Vec<TensorInfo>, HashMap<String, usize>, Vec<usize>);

/// The tensor infos, each checked on its own (shape, type, size); also where each info starts.
fn read_tensor_infos(c: &mut Cursor, n_tensors: u64) -> Result<Infos> {
    // `plausible_count` bounded n_tensors by the file length, so the reservations are too.
    let reserve = n_tensors.min(MAX_RESERVE) as usize;
    let (mut tensors, mut by_name, mut info_at) = (
        Vec::with_capacity(reserve),
        HashMap::with_capacity(reserve),
        Vec::with_capacity(reserve),
    );
    for i in 0..n_tensors {
        let at = c.pos;
        let name = c.string(|| format!("the name of tensor {i}"))?;
        if name.is_empty() {
            return Err(c.err(format!("tensor {i} (info at byte {at}) has an empty name")));
        }
        if name.len() > MAX_NAME_BYTES {
            return Err(c.err(format!(
                "tensor '{name}' (info at byte {at}) has a name of {} bytes; ggml allows at most \
                 {MAX_NAME_BYTES}",
                name.len()
            )));
        }
        if by_name.contains_key(&name) {
            return Err(c.err(format!(
                "duplicate tensor name '{name}' (tensor {i}, info at byte {at})"
            )));
        }
        let n_dims_at = c.pos;
        let n_dims = c.u32(|| format!("n_dims of tensor '{name}'"))?;
        if n_dims == 0 || n_dims as usize > MAX_DIMS {
            return Err(c.err(format!(
                "tensor '{name}' has n_dims = {n_dims} at byte {n_dims_at}; GGUF allows 1 to {MAX_DIMS}"
            )));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for d in 0..n_dims {
            dims.push(c.u64(|| format!("ne{d} of tensor '{name}'"))?);
        }
        let ggml_type = c.u32(|| format!("the ggml type of tensor '{name}'"))?;
        let offset = c.u64(|| format!("the offset of tensor '{name}'"))?;
        let n_bytes = tensor_bytes(&dims, ggml_type)
            .map_err(|m| c.err(format!("tensor '{name}' (info at byte {at}) {m}")))?;
        by_name.insert(name.clone(), tensors.len());
        tensors.push(TensorInfo {
            name,
            dims,
            ggml_type,
            offset,
            n_bytes,
        });
        info_at.push(at);
    }
    Ok((tensors, by_name, info_at))
}

/// Offsets exactly as gguf.cpp requires: each a multiple of the alignment and equal to the sum
/// of the preceding sizes, each rounded up to the alignment; and every tensor inside the file.
fn check_offsets(
    c: &Cursor,
    tensors: &[TensorInfo],
    info_at: &[usize],
    alignment: u64,
    data_offset: u64,
) -> Result<()> {
    let file_len = c.bytes.len() as u64;
    let mut expected = 0u64;
    for (t, at) in tensors.iter().zip(info_at) {
        let name = &t.name;
        let offset = t.offset;
        if !offset.is_multiple_of(alignment) {
            return Err(c.err(format!(
                "tensor '{name}' (info at byte {at}) has offset {offset}, not a multiple of the \
                 alignment {alignment}"
            )));
        }
        if offset < expected {
            return Err(c.err(format!(
                "tensor '{name}' (info at byte {at}) has offset {offset}, before the end of the \
                 previous tensor ({expected}): tensors overlap or are out of order"
            )));
        }
        if offset > expected {
            return Err(c.err(format!(
                "tensor '{name}' (info at byte {at}) has offset {offset}, expected {expected}: it \
                 leaves a gap after the previous tensor, which gguf.cpp does not accept"
            )));
        }
        let end = data_offset
            .checked_add(offset)
            .and_then(|s| s.checked_add(t.n_bytes));
        match end {
            Some(end) if end <= file_len => {}
            _ => {
                return Err(c.err(format!(
                    "truncated: tensor '{name}' ({} bytes at data offset {offset}, file offset {}) \
                     ends past the end of the file ({file_len} bytes)",
                    t.n_bytes,
                    data_offset.saturating_add(offset)
                )));
            }
        }
        expected = offset
            .checked_add(t.n_bytes)
            .and_then(|e| align_up(e, alignment))
            .ok_or_else(|| {
                c.err(format!(
                    "tensor '{name}': the end of its data overflows u64"
                ))
            })?;
    }
    Ok(())
}
