//! The tune table as text: what `moe-prefill tune` writes and `--path auto` reads.
//!
//! ```text
//! # comment lines start with '#'; blank lines are ignored
//! moe-prefill-tune v1 | gpu NVIDIA H200 | driver 13000 | build 0.1.0+ptx:0123456789abcdef
//! # gate_up down rows gate_up_mmq gate_up_ws swiglu_quant down_mmq down_ws fused
//! q2_0 q2_0 10 1.5018 - 0.0338 0.8262 - 1.4440
//! ```
//!
//! The first line that is not a comment is the key (GPU name as the driver reports it, the
//! driver's CUDA version as `cuDriverGetVersion` gives it, the build id of `key.rs`); then one
//! line per entry: gate/up type, down type (as ggml spells them), rows per routed expert, and
//! the six columns of `COLUMNS` in ms, `-` where not measured. Values are written with 4
//! decimals. Any other line is an error naming its line number.

use std::fmt::Write as _;

use gpu::layout::WType;

use super::{COLUMNS, Times, TuneKey, TuneTable};

/// The first token of the key line (a future format changes the version).
pub const MAGIC: &str = "moe-prefill-tune v1";

/// A parse error: the 1-based line number and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub msg: String,
}

impl TuneKey {
    /// The key line of the text format (also what the cache file's name is hashed from).
    pub fn line(&self) -> String {
        format!(
            "{MAGIC} | gpu {} | driver {} | build {}",
            self.gpu, self.driver, self.build
        )
    }

    fn parse(line: &str) -> Result<TuneKey, String> {
        let wrong = || {
            format!(
                "the key line should read \"{MAGIC} | gpu NAME | driver VERSION | build ID\", \
                 found {line:?}"
            )
        };
        let parts: Vec<&str> = line.split(" | ").collect();
        if parts.len() != 4 || parts[0] != MAGIC {
            return Err(wrong());
        }
        let field = |part: &str, name: &str| -> Result<String, String> {
            part.strip_prefix(name)
                .and_then(|v| v.strip_prefix(' '))
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
                .ok_or_else(wrong)
        };
        Ok(TuneKey {
            gpu: field(parts[1], "gpu")?,
            driver: field(parts[2], "driver")?,
            build: field(parts[3], "build")?,
        })
    }
}

impl TuneTable {
    /// The table as text, with `comments` (one '#' line each) before the key line.
    pub fn to_text(&self, comments: &[String]) -> String {
        let mut s = String::new();
        for c in comments {
            for l in c.lines() {
                let _ = writeln!(s, "# {l}");
            }
        }
        let _ = writeln!(s, "{}", self.key.line());
        let _ = writeln!(s, "# gate_up down rows {}", COLUMNS.join(" "));
        for (&(g, d, rows), t) in &self.entries {
            let _ = write!(s, "{} {} {rows}", g.name(), d.name());
            for v in t.0 {
                match v {
                    Some(v) => {
                        let _ = write!(s, " {v:.4}");
                    }
                    None => s.push_str(" -"),
                }
            }
            s.push('\n');
        }
        s
    }

    /// Parses the text format; the error names the first bad line.
    pub fn parse(text: &str) -> Result<TuneTable, ParseError> {
        let mut table: Option<TuneTable> = None;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |msg: String| ParseError { line: i + 1, msg };
            let Some(t) = table.as_mut() else {
                table = Some(TuneTable::new(TuneKey::parse(line).map_err(err)?));
                continue;
            };
            let (k, times) = parse_entry(line).map_err(err)?;
            if t.entries.insert(k, times).is_some() {
                return Err(err(format!(
                    "a second entry for {}/{} at {} rows per routed expert",
                    k.0.name(),
                    k.1.name(),
                    k.2
                )));
            }
        }
        table.ok_or(ParseError {
            line: text.lines().count().max(1),
            msg: format!("no key line (\"{MAGIC} | gpu ... | driver ... | build ...\")"),
        })
    }
}

fn wtype(s: &str) -> Result<WType, String> {
    WType::ALL
        .into_iter()
        .find(|w| w.name() == s)
        .ok_or_else(|| format!("unknown weight type {s:?}"))
}

/// One entry line: `gate_up down rows` and the six columns.
fn parse_entry(line: &str) -> Result<((WType, WType, usize), Times), String> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != 3 + COLUMNS.len() {
        return Err(format!(
            "an entry has {} fields (gate_up down rows {}), this line {}",
            3 + COLUMNS.len(),
            COLUMNS.join(" "),
            f.len()
        ));
    }
    let rows: usize = f[2].parse().ok().filter(|&r| r > 0).ok_or_else(|| {
        format!(
            "rows per routed expert {:?} is not a positive integer",
            f[2]
        )
    })?;
    let mut times = Times::default();
    for (c, v) in f[3..].iter().enumerate() {
        times.0[c] = match *v {
            "-" => None,
            v => Some(
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| format!("{} {v:?} is not a time in ms (or - )", COLUMNS[c]))?,
            ),
        };
    }
    Ok(((wtype(f[0])?, wtype(f[1])?, rows), times))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> TuneTable {
        let mut t = TuneTable::new(TuneKey {
            gpu: "NVIDIA H200".into(),
            driver: "13000".into(),
            build: "0.1.0+ptx:0123456789abcdef".into(),
        });
        t.entries.insert(
            (WType::Q2_0, WType::Q2_0, 10),
            Times([
                Some(1.5018),
                None,
                Some(0.0338),
                Some(0.8262),
                None,
                Some(1.444),
            ]),
        );
        t.entries.insert(
            (WType::Iq2Xxs, WType::Iq4Nl, 320),
            Times([
                Some(8.5),
                Some(7.25),
                Some(0.284),
                Some(4.9),
                Some(0.0),
                None,
            ]),
        );
        t
    }

    #[test]
    fn round_trips() {
        let t = table();
        let text = t.to_text(&["made by a test".into(), "two\nlines".into()]);
        assert!(
            text.starts_with("# made by a test\n# two\n# lines\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "moe-prefill-tune v1 | gpu NVIDIA H200 | driver 13000 | build 0.1.0+ptx:0123456789abcdef\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("q2_0 q2_0 10 1.5018 - 0.0338 0.8262 - 1.4440\n"),
            "{text}"
        );
        let back = TuneTable::parse(&text).expect("parses");
        assert_eq!(back, t);
        assert_eq!(back.to_text(&[]), t.to_text(&[]));
    }

    #[test]
    fn errors_name_the_line() {
        let good = table().to_text(&[]);
        let key = good.lines().next().unwrap();
        let bad = |text: &str, line: usize, what: &str| {
            let e = TuneTable::parse(text).expect_err(text);
            assert_eq!(e.line, line, "{text}: {e:?}");
            assert!(e.msg.contains(what), "{text}: {e:?}");
        };
        bad("", 1, "no key line");
        bad("# only a comment\n", 1, "no key line");
        bad("q2_0 q2_0 10 1 - 1 1 - 1\n", 1, "the key line should read");
        bad(
            "moe-prefill-tune v2 | gpu X | driver 1 | build b\n",
            1,
            "key line",
        );
        bad("moe-prefill-tune v1 | gpu X | driver 1\n", 1, "key line");
        bad(
            "moe-prefill-tune v1 | gpu  | driver 1 | build b\n",
            1,
            "key line",
        );
        bad(&format!("{key}\n\nq2_0 q2_0 10 1 - 1\n"), 3, "9 fields");
        bad(
            &format!("{key}\nq2_1 q2_0 10 1 - 1 1 - 1\n"),
            2,
            "unknown weight type \"q2_1\"",
        );
        bad(
            &format!("{key}\nq2_0 q2_0 0 1 - 1 1 - 1\n"),
            2,
            "not a positive integer",
        );
        bad(
            &format!("{key}\nq2_0 q2_0 ten 1 - 1 1 - 1\n"),
            2,
            "not a positive integer",
        );
        bad(
            &format!("{key}\nq2_0 q2_0 10 1 - x 1 - 1\n"),
            2,
            "swiglu_quant \"x\"",
        );
        bad(
            &format!("{key}\nq2_0 q2_0 10 1 - 1 1 - -2\n"),
            2,
            "fused \"-2\"",
        );
        bad(&format!("{key}\nq2_0 q2_0 10 1 - 1 1 - NaN\n"), 2, "fused");
        bad(
            &format!("{key}\nq2_0 q2_0 10 1 - 1 1 - 1\n# c\nq2_0 q2_0 10 2 - 1 1 - 1\n"),
            4,
            "a second entry for q2_0/q2_0 at 10",
        );
        // Blank lines, comments and surrounding spaces are fine.
        let t = TuneTable::parse(&format!(
            "\n# c\n  {key}  \n\n  q2_0 q2_0 10 1 - 1 1 - 1  \n"
        ))
        .expect("parses");
        assert_eq!(t.entries.len(), 1);
    }
}
