//! The one error type of the host library. Every message says what went wrong and, where there
//! is something to do about it, what.

use std::fmt;
use std::path::PathBuf;

use cudarc::driver::DriverError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug)]
pub enum Error {
    /// No CUDA driver library, or no CUDA device.
    NoGpu(String),
    /// A CUDA driver call failed.
    Driver {
        op: &'static str,
        source: DriverError,
    },
    /// The PTX module lacks a kernel the host expects (PTX and host out of step).
    MissingKernel(&'static str),
    /// A shape or size outside what a kernel supports.
    Shape {
        what: String,
        got: u64,
        limit: String,
    },
    /// A buffer handed to a launcher does not have the size its plan needs.
    Buffer {
        what: &'static str,
        got: usize,
        want: usize,
    },
    /// A weight or activation type a path cannot run.
    Unsupported(String),
    /// A malformed or unusable GGUF file.
    Gguf { path: PathBuf, msg: String },
    /// File i/o.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A GPU result differs from the CPU reference.
    Mismatch(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoGpu(why) => write!(f, "no CUDA GPU available: {why}"),
            Error::Driver { op, source } => write!(f, "CUDA driver error in {op}: {source}"),
            Error::MissingKernel(name) => write!(
                f,
                "kernel `{name}` is not in the loaded PTX module; rebuild (cargo build) so that \
                 host and gpu/ are in step"
            ),
            Error::Shape { what, got, limit } => write!(f, "{what} is {got}; {limit}"),
            Error::Buffer { what, got, want } => {
                write!(
                    f,
                    "buffer `{what}` has {got} elements; the plan needs {want}"
                )
            }
            Error::Unsupported(msg) => write!(f, "{msg}"),
            Error::Gguf { path, msg } => write!(f, "{}: {msg}", path.display()),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Mismatch(msg) => write!(f, "GPU result differs from the CPU reference: {msg}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Driver { source, .. } => Some(source),
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<DriverError> for Error {
    fn from(source: DriverError) -> Self {
        Error::Driver {
            op: "a driver call",
            source,
        }
    }
}

/// Attaches the operation's name to a driver error.
pub trait DriverOp<T> {
    fn op(self, op: &'static str) -> Result<T>;
}

impl<T> DriverOp<T> for std::result::Result<T, DriverError> {
    fn op(self, op: &'static str) -> Result<T> {
        self.map_err(|source| Error::Driver { op, source })
    }
}

/// Shorthand for a shape error.
pub fn shape(what: impl Into<String>, got: impl TryInto<u64>, limit: impl Into<String>) -> Error {
    Error::Shape {
        what: what.into(),
        got: got.try_into().unwrap_or(u64::MAX),
        limit: limit.into(),
    }
}
