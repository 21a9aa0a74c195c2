//! The GGUF reader's cursor (gguf/read.rs): a read position in the file that never steps past
//! its end, and the reads of every value type, each failing with an [`Error::Gguf`] that names
//! what was read and where.

use std::path::Path;

use super::read::MAX_RESERVE;
use super::{MAX_ARRAY_DEPTH, Value, ValueType};
use crate::error::{Error, Result};

/// A read position in the file that never steps past its end.
pub(super) struct Cursor<'a> {
    pub(super) path: &'a Path,
    pub(super) bytes: &'a [u8],
    /// Invariant: `pos <= bytes.len()`.
    pub(super) pos: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn err(&self, msg: String) -> Error {
        Error::Gguf {
            path: self.path.to_path_buf(),
            msg,
        }
    }

    fn left(&self) -> u64 {
        self.bytes.len().saturating_sub(self.pos) as u64
    }

    /// The next `n` bytes; `what` (built only on failure) names them in the error.
    fn take(&mut self, n: u64, what: impl Fn() -> String) -> Result<&'a [u8]> {
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.pos.checked_add(n));
        match end.and_then(|end| self.bytes.get(self.pos..end).map(|s| (s, end))) {
            Some((s, end)) => {
                self.pos = end;
                Ok(s)
            }
            None => Err(self.err(format!(
                "truncated: {} at byte {} needs {n} bytes, the file has {} bytes left",
                what(),
                self.pos,
                self.left()
            ))),
        }
    }

    fn array<const N: usize>(&mut self, what: impl Fn() -> String) -> Result<[u8; N]> {
        let s = self.take(N as u64, what)?;
        let mut a = [0; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub(super) fn u32(&mut self, what: impl Fn() -> String) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    pub(super) fn u64(&mut self, what: impl Fn() -> String) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// Rejects a count of items that cannot fit in the rest of the file, read at byte `at`.
    pub(super) fn plausible_count(
        &self,
        n: u64,
        min_bytes: u64,
        at: usize,
        count: &str,
        item: &str,
    ) -> Result<()> {
        match n.checked_mul(min_bytes) {
            Some(need) if need <= self.left() => Ok(()),
            _ => Err(self.err(format!(
                "{count} {n} at byte {at} is impossible: each {item} needs at least {min_bytes} \
                 bytes and the file has {} bytes left",
                self.left()
            ))),
        }
    }

    /// A length-prefixed UTF-8 string; the length is checked before anything is allocated.
    pub(super) fn string(&mut self, what: impl Fn() -> String) -> Result<String> {
        let at = self.pos;
        let len = self.u64(|| format!("the length of {}", what()))?;
        if len > self.left() {
            return Err(self.err(format!(
                "{} at byte {at} is a string of {len} bytes, longer than the rest of the file \
                 ({} bytes)",
                what(),
                self.left()
            )));
        }
        let b = self.take(len, &what)?;
        match std::str::from_utf8(b) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(self.err(format!(
                "{} at byte {at} is not valid UTF-8 (bad byte at {})",
                what(),
                at + 8 + e.valid_up_to()
            ))),
        }
    }

    /// One value of type `ty` for `key`; `depth` arrays enclose it.
    pub(super) fn value(&mut self, ty: ValueType, key: &str, depth: usize) -> Result<Value> {
        let what = || format!("the value of key '{key}'");
        Ok(match ty {
            ValueType::U8 => Value::U8(u8::from_le_bytes(self.array(what)?)),
            ValueType::I8 => Value::I8(i8::from_le_bytes(self.array(what)?)),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.array(what)?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.array(what)?)),
            ValueType::U32 => Value::U32(u32::from_le_bytes(self.array(what)?)),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.array(what)?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.array(what)?)),
            ValueType::U64 => Value::U64(u64::from_le_bytes(self.array(what)?)),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.array(what)?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.array(what)?)),
            ValueType::Bool => {
                let at = self.pos;
                match self.array::<1>(what)? {
                    [0] => Value::Bool(false),
                    [1] => Value::Bool(true),
                    [b] => {
                        return Err(self.err(format!(
                            "key '{key}' has bool byte {b} at byte {at}; only 0 and 1 are valid"
                        )));
                    }
                }
            }
            ValueType::Str => Value::Str(self.string(what)?),
            ValueType::Array => self.array_value(key, depth)?,
        })
    }

    /// An array: u32 element type, u64 count, the elements.
    fn array_value(&mut self, key: &str, depth: usize) -> Result<Value> {
        let at = self.pos;
        if depth >= MAX_ARRAY_DEPTH {
            return Err(self.err(format!(
                "key '{key}' has arrays nested more than {MAX_ARRAY_DEPTH} deep (at byte {at})"
            )));
        }
        let id = self.u32(|| format!("the element type of array '{key}'"))?;
        let Some(elem) = ValueType::from_u32(id) else {
            return Err(self.err(format!(
                "key '{key}' is an array of unknown value type {id} at byte {at}"
            )));
        };
        let n_at = self.pos;
        let n = self.u64(|| format!("the length of array '{key}'"))?;
        match n.checked_mul(elem.min_bytes()) {
            Some(need) if need <= self.left() => {}
            _ => {
                return Err(self.err(format!(
                    "key '{key}' is an array of {n} {} (count at byte {n_at}), which needs at least \
                     {} bytes; the file has {} bytes left",
                    elem.name(),
                    n.saturating_mul(elem.min_bytes()),
                    self.left()
                )));
            }
        }
        let mut items = Vec::with_capacity(n.min(MAX_RESERVE) as usize);
        for _ in 0..n {
            items.push(self.value(elem, key, depth + 1)?);
        }
        Ok(Value::Array(elem, items))
    }
}
