//! Which tune table `--path auto` uses: the one `moe-prefill tune` wrote for this GPU, driver and
//! build (in the user's cache directory), else the built-in one measured on the H200
//! (`tune_h200.txt`). Loaded once per process ([`for_gpu`]).
//!
//! The key: the GPU's name, the driver's CUDA version (`cuDriverGetVersion`) and the build id -
//! the crate version and an FNV-1a 64 hash of the embedded PTX text of every module
//! (`ptx::MODULES`), so that a rebuild with other kernels does not use figures measured on the
//! old ones. A table whose key differs is not used.
//!
//! Cache directory: `$MOE_TUNE_DIR`, else `$XDG_CACHE_HOME/moe-prefill`, else
//! `$HOME/.cache/moe-prefill`; the file `tune-<16 hex digits>.txt`, the digits the FNV-1a 64
//! hash of the key line.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::TuneTable;
use crate::device::Gpu;
use crate::error::{Error, Result};

/// The built-in table: measured on the H200 (see the file's header for how and when).
pub const BUILT_IN: &str = include_str!("../tune_h200.txt");

/// The build id of a table not made by `moe-prefill tune` (the built-in table until it is
/// regenerated on the H200): auto says "provisional" when it uses it.
pub const PROVISIONAL_BUILD: &str = "provisional";

/// Environment variable naming the directory of tune tables (before the XDG cache directory).
pub const DIR_VAR: &str = "MOE_TUNE_DIR";

/// What a table was measured on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TuneKey {
    pub gpu: String,
    pub driver: String,
    pub build: String,
}

impl TuneKey {
    /// The key of this process on `gpu`.
    pub fn current(gpu: &Gpu) -> TuneKey {
        TuneKey {
            // The text format separates fields with " | " and ends at the line's end.
            gpu: gpu
                .info
                .name
                .replace('|', "/")
                .replace(['\n', '\r'], " ")
                .trim()
                .to_string(),
            driver: gpu.info.driver_version.to_string(),
            build: build_id().to_string(),
        }
    }

    /// The cache file's name for this key.
    pub fn file_name(&self) -> String {
        format!("tune-{:016x}.txt", fnv1a64(self.line().as_bytes()))
    }

    /// "NVIDIA H200, driver 13000, build 0.1.0+ptx:..." for messages.
    pub fn describe(&self) -> String {
        format!("{}, driver {}, build {}", self.gpu, self.driver, self.build)
    }
}

/// FNV-1a, 64 bits (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// This build's id: `<crate version>+ptx:<FNV-1a 64 of every PTX module's target and text>`.
pub fn build_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let mut bytes = Vec::new();
        for (arch, text) in crate::ptx::MODULES {
            bytes.extend_from_slice(&arch.to_le_bytes());
            bytes.extend_from_slice(&(text.len() as u64).to_le_bytes());
            bytes.extend_from_slice(text.as_bytes());
        }
        format!("{}+ptx:{:016x}", env!("CARGO_PKG_VERSION"), fnv1a64(&bytes))
    })
}

/// The directory of tune tables from the environment (see the module docs); None when neither
/// `MOE_TUNE_DIR`, `XDG_CACHE_HOME` nor `HOME` is set.
pub fn cache_dir() -> Option<PathBuf> {
    cache_dir_from(|k| std::env::var_os(k))
}

/// [`cache_dir`] with the environment as a function (tests). Empty values count as unset.
pub fn cache_dir_from(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let var = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    var(DIR_VAR)
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("moe-prefill")))
        .or_else(|| var("HOME").map(|d| d.join(".cache").join("moe-prefill")))
}

/// Where `moe-prefill tune` writes, and auto looks for, the table of `key`.
pub fn cache_path(key: &TuneKey) -> Option<PathBuf> {
    cache_dir().map(|d| d.join(key.file_name()))
}

/// The table auto uses and where it came from.
#[derive(Clone, Debug)]
pub struct Tuning {
    pub table: TuneTable,
    /// Short, for each run's line: "built-in NVIDIA H200, provisional" or the file's path.
    pub source: String,
    /// Why not a measured table of this machine, when the built-in one is used.
    pub note: Option<String>,
}

impl Tuning {
    /// The built-in table (`note` says why it is used). An unreadable built-in table (a bug
    /// the unit tests catch) leaves the table empty: auto then takes its built-in rule.
    pub fn built_in(note: impl Into<String>) -> Tuning {
        let (table, source) = match TuneTable::parse(BUILT_IN) {
            Ok(t) => {
                let provisional = if t.key.build == PROVISIONAL_BUILD {
                    ", provisional"
                } else {
                    ""
                };
                let source = format!("built-in {}{provisional}", t.key.gpu);
                (t, source)
            }
            Err(e) => (
                TuneTable::new(TuneKey {
                    gpu: "-".into(),
                    driver: "-".into(),
                    build: "-".into(),
                }),
                format!("none: the built-in table, line {}: {}", e.line, e.msg),
            ),
        };
        Tuning {
            table,
            source,
            note: Some(note.into()),
        }
    }

    /// The table of `key` at `path` if it is there, readable and of that key; else the
    /// built-in one, with the reason.
    pub fn load(key: &TuneKey, path: Option<&Path>) -> Tuning {
        let Some(path) = path else {
            return Tuning::built_in(format!(
                "no cache directory ({DIR_VAR}, XDG_CACHE_HOME and HOME are unset)"
            ));
        };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Tuning::built_in(format!(
                    "no table of this GPU, driver and build at {} (`moe-prefill tune` writes one)",
                    path.display()
                ));
            }
            Err(e) => {
                return Tuning::built_in(format!("{}: {e}", path.display()));
            }
        };
        match TuneTable::parse(&text) {
            Ok(t) if t.key == *key => Tuning {
                table: t,
                source: path.display().to_string(),
                note: None,
            },
            Ok(t) => Tuning::built_in(format!(
                "{} is for {}, not this {}",
                path.display(),
                t.key.describe(),
                key.describe()
            )),
            Err(e) => Tuning::built_in(format!("{}: line {}: {}", path.display(), e.line, e.msg)),
        }
    }

    /// Where the table came from, with the note: for `explain` lines.
    pub fn describe(&self) -> String {
        match &self.note {
            Some(n) => format!("{}; {n}", self.source),
            None => self.source.clone(),
        }
    }
}

/// The table of this process on `gpu`, loaded once (the cache file of its key, else the
/// built-in one).
pub fn for_gpu(gpu: &Gpu) -> Arc<Tuning> {
    static LOADED: OnceLock<Arc<Tuning>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let key = TuneKey::current(gpu);
            Arc::new(Tuning::load(&key, cache_path(&key).as_deref()))
        })
        .clone()
}

/// The table without a GPU (no key to look one up by): the built-in one.
pub fn without_gpu() -> Arc<Tuning> {
    static BUILT: OnceLock<Arc<Tuning>> = OnceLock::new();
    BUILT
        .get_or_init(|| Arc::new(Tuning::built_in("no GPU to look up a measured table for")))
        .clone()
}

/// Writes `text` to `path` (creating its directory) through a temporary file and a rename, so
/// that a reader never sees half a table.
pub fn write_table(path: &Path, text: &str) -> Result<()> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::moe::tune::Times;
    use gpu::layout::WType;

    fn key() -> TuneKey {
        TuneKey {
            gpu: "Test GPU".into(),
            driver: "12080".into(),
            build: build_id().into(),
        }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("moe-tune-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn fnv_and_build_id() {
        // FNV-1a 64 test vectors (Fowler, Noll, Vo reference).
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
        let id = build_id();
        assert!(
            id.starts_with(concat!(env!("CARGO_PKG_VERSION"), "+ptx:")),
            "{id}"
        );
        assert_eq!(id.len(), env!("CARGO_PKG_VERSION").len() + 5 + 16);
        let f = key().file_name();
        assert!(
            f.starts_with("tune-") && f.ends_with(".txt") && f.len() == 25,
            "{f}"
        );
        let other = TuneKey {
            driver: "12090".into(),
            ..key()
        };
        assert_ne!(other.file_name(), f);
    }

    #[test]
    fn cache_dir_follows_the_environment() {
        fn env<'a>(vars: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<std::ffi::OsString> + 'a {
            move |k| vars.iter().find(|v| v.0 == k).map(|v| v.1.into())
        }
        let all = [
            (DIR_VAR, "/t/dir"),
            ("XDG_CACHE_HOME", "/x/cache"),
            ("HOME", "/home/u"),
        ];
        assert_eq!(cache_dir_from(env(&all)), Some("/t/dir".into()));
        assert_eq!(
            cache_dir_from(env(&all[1..])),
            Some("/x/cache/moe-prefill".into())
        );
        assert_eq!(
            cache_dir_from(env(&[
                (DIR_VAR, ""),
                ("XDG_CACHE_HOME", ""),
                ("HOME", "/home/u")
            ])),
            Some("/home/u/.cache/moe-prefill".into())
        );
        assert_eq!(cache_dir_from(env(&[])), None);
    }

    #[test]
    fn built_in_table_parses_and_is_measured() {
        let t = TuneTable::parse(BUILT_IN).expect("the built-in table parses");
        assert_ne!(t.key.build, PROVISIONAL_BUILD);
        for g in crate::problem::GATE_UP_TYPES {
            for d in crate::problem::DOWN_TYPES {
                assert!(t.has_pair(g, d), "{}/{}", g.name(), d.name());
            }
        }
        let b = Tuning::built_in("why");
        assert_eq!(b.source, "built-in NVIDIA H200");
        assert_eq!(b.describe(), "built-in NVIDIA H200; why");
    }

    #[test]
    fn loads_the_table_of_its_key_only() {
        let dir = temp_dir("load");
        let k = key();
        let path = dir.join(k.file_name());
        let none = Tuning::load(&k, Some(&path));
        assert!(none.source.starts_with("built-in"), "{none:?}");
        assert!(
            none.note
                .as_deref()
                .unwrap()
                .contains("no table of this GPU"),
            "{none:?}"
        );
        assert!(
            Tuning::load(&k, None)
                .note
                .unwrap()
                .contains("no cache directory")
        );

        let mut t = TuneTable::new(k.clone());
        t.entries.insert(
            (WType::Iq2Xxs, WType::Q8_0, 20),
            Times([Some(1.0), Some(0.5), Some(0.1), Some(1.0), None, Some(2.0)]),
        );
        write_table(&path, &t.to_text(&["test".into()])).expect("write");
        let got = Tuning::load(&k, Some(&path));
        assert_eq!(got.table, t);
        assert_eq!(got.source, path.display().to_string());
        assert!(got.note.is_none());

        // Another key's table at this path is not used.
        let other = TuneKey {
            build: "0.0.1+ptx:0000000000000000".into(),
            ..k.clone()
        };
        let got = Tuning::load(&other, Some(&path));
        assert!(got.source.starts_with("built-in"));
        assert!(
            got.note
                .unwrap()
                .contains("is for Test GPU, driver 12080, build")
        );

        // A malformed file: the built-in table, and the line.
        std::fs::write(&path, format!("{}\nq2_0 q2_0 10 1\n", k.line())).expect("write");
        let got = Tuning::load(&k, Some(&path));
        assert!(got.source.starts_with("built-in"));
        assert!(
            got.note
                .unwrap()
                .contains(": line 2: an entry has 9 fields")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
