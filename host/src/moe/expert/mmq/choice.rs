//! Which MMQ kernel a plan runs ([`MmqChoice`]): the plan's own choice or a forced one, from
//! `MOE_MMQ_KERNEL` ([`MMQ_KERNEL_VAR`]).

use crate::error::{Error, Result};

/// Environment variable that forces the MMQ kernel: `classic`, `pipelined` (wide tiles at every
/// row count), `narrow` (narrow tiles at every row count; a type whose narrow layout does not
/// fit runs the wide kernel over them), `narrow-streamed` (the same, never in the resident
/// form) or `flat` (flat tiles at every row count, where the type has them: `MmqKernel::flat`;
/// the wide kernel for the others); `auto` or unset lets the plan choose. All give the same
/// bytes.
pub const MMQ_KERNEL_VAR: &str = "MOE_MMQ_KERNEL";

/// Which MMQ kernel a plan runs: its choice (`Auto`: the narrow one at few rows per expert, else
/// the pipelined one where it fits), or
/// a forced one (tests reach the classic kernel this way on GPUs where the pipelined one fits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MmqChoice {
    #[default]
    Auto,
    Classic,
    Pipelined,
    Narrow,
    /// Narrow tiles as `Narrow`, never in the resident form (every K step's weights streamed
    /// through the copy ring).
    NarrowStreamed,
    /// Flat tiles at every row count (for each product whose flat layout fits the device).
    Flat,
}

impl MmqChoice {
    pub const ALL: [MmqChoice; 6] = [
        MmqChoice::Auto,
        MmqChoice::Classic,
        MmqChoice::Pipelined,
        MmqChoice::Narrow,
        MmqChoice::NarrowStreamed,
        MmqChoice::Flat,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MmqChoice::Auto => "auto",
            MmqChoice::Classic => "classic",
            MmqChoice::Pipelined => "pipelined",
            MmqChoice::Narrow => "narrow",
            MmqChoice::NarrowStreamed => "narrow-streamed",
            MmqChoice::Flat => "flat",
        }
    }

    pub fn parse(s: &str) -> Result<MmqChoice> {
        Self::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "unknown MMQ kernel `{s}` (expected auto, classic, pipelined, narrow, \
                     narrow-streamed or flat)"
                ))
            })
    }

    /// From `MOE_MMQ_KERNEL` (unset: `Auto`); an unknown value is an error, not ignored.
    pub fn from_env() -> Result<MmqChoice> {
        match std::env::var(MMQ_KERNEL_VAR) {
            Ok(v) => Self::parse(&v),
            Err(_) => Ok(MmqChoice::Auto),
        }
    }
}
