//! The `MOE_*` environment variables: a run prints those that are set, so that its figures say
//! how they were made, and warns of a `MOE_*` name that nothing reads (a typo, or a name an
//! older version read), which would otherwise change nothing without a word.

use std::ffi::OsString;

use host::device::{PTX_ARCH_VAR, PTX_OVERRIDE_VAR};
use host::moe::expert::fused::{NT_VAR, PREFETCH_VAR};
use host::moe::expert::mmq::{MMQ_KERNEL_VAR, MMQ_ORDER_VAR, MMQ_TMA_VAR, MMQ_WEIGHT_L2_VAR};
use host::moe::expert::products::SWIGLU_VAR;
use host::moe::expert::ws::{WS_COLS_VAR, WS_FAST_VAR};
use host::moe::scatter::{GATHER_VAR, ONE_VAR};
use host::moe::tune::key::DIR_VAR;
use host::problem::NUMERICS_VAR;

use super::CEILINGS_VAR;

/// The prefix of every variable the binary and the tests read.
const PREFIX: &str = "MOE_";

/// Every variable the binary reads.
const READ: [&str; 16] = [
    MMQ_KERNEL_VAR,
    MMQ_ORDER_VAR,
    MMQ_TMA_VAR,
    MMQ_WEIGHT_L2_VAR,
    SWIGLU_VAR,
    GATHER_VAR,
    ONE_VAR,
    WS_COLS_VAR,
    WS_FAST_VAR,
    NT_VAR,
    PREFETCH_VAR,
    PTX_ARCH_VAR,
    PTX_OVERRIDE_VAR,
    DIR_VAR,
    CEILINGS_VAR,
    NUMERICS_VAR,
];

/// Variables only the tests read (a run ignores them without a warning).
const TESTS_ONLY: [&str; 3] = ["MOE_TEST_SEED", "MOE_PTXAS", "MOE_FUZZ_ITERS"];

/// Names an older version read, and what took their place.
const RETIRED: [(&str, &str); 1] = [("MOE_MMQ_CLASSIC", "MOE_MMQ_KERNEL=classic")];

/// What the environment holds of the `MOE_*` variables.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct EnvReport {
    /// The variables the binary reads that are set, `NAME=value`, by name.
    pub set: Vec<String>,
    /// One line for each `MOE_*` name that nothing reads.
    pub warnings: Vec<String>,
}

impl EnvReport {
    /// The report of `vars` (the process's: `std::env::vars_os()`).
    pub fn of(vars: impl IntoIterator<Item = (OsString, OsString)>) -> EnvReport {
        let mut r = EnvReport::default();
        for (k, v) in vars {
            let k = k.to_string_lossy();
            if !k.starts_with(PREFIX) || TESTS_ONLY.contains(&k.as_ref()) {
                continue;
            }
            if READ.contains(&k.as_ref()) {
                r.set.push(format!("{k}={}", v.to_string_lossy()));
            } else if let Some((_, now)) = RETIRED.iter().find(|(old, _)| *old == k) {
                r.warnings.push(format!("{k} is no longer read: use {now}"));
            } else {
                r.warnings.push(format!(
                    "{k} is not a variable moe-prefill reads (it reads {})",
                    READ.join(", ")
                ));
            }
        }
        r.set.sort();
        r.warnings.sort();
        r
    }

    /// Prints the warnings to standard error and the set variables as one line
    /// (`environment: ...`; nothing when none is set).
    pub fn print(&self) {
        for w in &self.warnings {
            eprintln!("warning: {w}");
        }
        if !self.set.is_empty() {
            println!("environment: {}", self.set.join(" "));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(vars: &[(&str, &str)]) -> EnvReport {
        EnvReport::of(vars.iter().map(|&(k, v)| (k.into(), v.into())))
    }

    #[test]
    fn set_variables_listed_unknown_ones_warned() {
        assert_eq!(
            of(&[("PATH", "/bin"), ("HOME", "/root")]),
            EnvReport::default()
        );
        let r = of(&[
            ("MOE_SWIGLU", "kernel"),
            ("MOE_MMQ_WEIGHT_L2", "first"),
            ("MOE_TEST_SEED", "7"),
            ("PATH", "/bin"),
        ]);
        assert_eq!(r.set, ["MOE_MMQ_WEIGHT_L2=first", "MOE_SWIGLU=kernel"]);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        let r = of(&[("MOE_MMQ_WEIGTH_L2", "first"), ("MOE_MMQ_CLASSIC", "1")]);
        assert!(r.set.is_empty());
        assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
        assert_eq!(
            r.warnings[0],
            "MOE_MMQ_CLASSIC is no longer read: use MOE_MMQ_KERNEL=classic"
        );
        assert!(
            r.warnings[1].starts_with("MOE_MMQ_WEIGTH_L2 is not a variable moe-prefill reads")
                && r.warnings[1].contains("MOE_MMQ_WEIGHT_L2"),
            "{}",
            r.warnings[1]
        );
    }

    #[test]
    fn every_name_read_once_with_the_prefix() {
        let all: Vec<&str> = READ
            .iter()
            .chain(TESTS_ONLY.iter())
            .chain(RETIRED.iter().map(|(old, _)| old))
            .copied()
            .collect();
        for (i, name) in all.iter().enumerate() {
            assert!(name.starts_with(PREFIX), "{name}");
            assert!(!all[i + 1..].contains(name), "{name} listed twice");
        }
    }
}
