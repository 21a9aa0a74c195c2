//! The `MOE_*` environment variables: a run prints those that are set, so that its figures say
//! how they were made, and warns of a `MOE_*` name that nothing reads (a typo, or a name an
//! older version read), which would otherwise change nothing without a word.

use std::ffi::OsString;

use host::device::{PDL_VAR, PTX_ARCH_VAR, PTX_OVERRIDE_VAR};
use host::moe::expert::fused::{NT_VAR, PREFETCH_VAR};
use host::moe::expert::mmq::{
    MMQ_FLAT_WS_VAR, MMQ_KERNEL_VAR, MMQ_ORDER_VAR, MMQ_TAILS_VAR, MMQ_TMA_VAR, MMQ_WEIGHT_L2_VAR,
};
use host::moe::expert::products::SWIGLU_VAR;
use host::moe::expert::ws::{WS_COLS_VAR, WS_FAST_VAR};
use host::moe::scatter::{GATHER_VAR, ONE_VAR};
use host::moe::tune::key::DIR_VAR;
use host::problem::NUMERICS_VAR;

use super::CEILINGS_VAR;

/// The prefix of every variable the binary and the tests read.
const PREFIX: &str = "MOE_";

/// Every variable the binary reads.
const READ: [&str; 19] = [
    MMQ_KERNEL_VAR,
    MMQ_FLAT_WS_VAR,
    MMQ_TAILS_VAR,
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
    PDL_VAR,
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

    /// Every name of the three lists: read, read by the tests only, retired.
    fn listed() -> Vec<&'static str> {
        READ.iter()
            .chain(TESTS_ONLY.iter())
            .chain(RETIRED.iter().map(|(old, _)| old))
            .copied()
            .collect()
    }

    #[test]
    fn every_name_read_once_with_the_prefix() {
        let all = listed();
        for (i, name) in all.iter().enumerate() {
            assert!(name.starts_with(PREFIX), "{name}");
            assert!(!all[i + 1..].contains(name), "{name} listed twice");
        }
    }

    /// The `"MOE_..."` string literals of the `.rs` files under `dir`, this file's excepted (its
    /// tests name misspelt variables on purpose), with the file each came from.
    fn literals_under(dir: &std::path::Path, out: &mut Vec<(String, String)>) {
        for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = e.unwrap().path();
            if path.is_dir() {
                literals_under(&path, out);
                continue;
            }
            if path.extension().is_none_or(|x| x != "rs") || path.ends_with("cli/env.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (at, _) in text.match_indices("\"MOE_") {
                let name: String = text[at + 1..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                out.push((name, path.display().to_string()));
            }
        }
    }

    /// A variable some code reads but `READ` leaves out would draw the warning that nothing
    /// reads it (so it was with `MOE_MMQ_FLAT_WS`): every `MOE_*` name the sources spell out is
    /// one of the lists.
    #[test]
    fn every_variable_the_sources_name_is_listed() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut found = Vec::new();
        for dir in ["host/src", "tests", "benches"] {
            literals_under(&root.join(dir), &mut found);
        }
        let all = listed();
        for (name, file) in &found {
            assert!(
                all.contains(&name.as_str()),
                "{name} (in {file}) is in none of READ, TESTS_ONLY, RETIRED"
            );
        }
        // The scan saw the names: each of READ's is spelt out where it is defined.
        for name in READ {
            assert!(
                found.iter().any(|(n, _)| n == name),
                "{name} not found by the scan"
            );
        }
    }
}
