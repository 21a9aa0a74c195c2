//! Checks and edits of PTX text: undefined calls (a module that would not load), `.maxnreg`
//! register caps before a kernel's body, the `.target` line of the sm_60 module.

/// `ptx` with its `.target <from>` directive [11.1.2] replaced by `.target <to>`; Err(the
/// directive found) when the module's `.target` line is not `.target <from>`. Everything else
/// (`.version` included: PTX ISA 6.0 and later know sm_60) stays as emitted.
pub fn relabel_target(ptx: &str, from: &str, to: &str) -> Result<String, String> {
    let mut at = 0;
    for line in ptx.split_inclusive('\n') {
        if line.trim_start().starts_with(".target") {
            if line.split_whitespace().nth(1) != Some(from) {
                return Err(line.trim().to_string());
            }
            let mut out = String::with_capacity(ptx.len());
            out.push_str(&ptx[..at]);
            out.push_str(&line.replacen(from, to, 1));
            out.push_str(&ptx[at + line.len()..]);
            return Ok(out);
        }
        at += line.len();
    }
    Err("no .target line".to_string())
}

/// Names of functions the PTX declares `.extern` or calls without defining. Empty for a module
/// that will load.
pub fn undefined_calls(ptx: &str) -> Vec<String> {
    let mut defined = Vec::new();
    let mut bad = Vec::new();
    let mut called = Vec::new();
    let mut lines = ptx.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim();
        if t.starts_with("//") {
            continue;
        }
        if (t.contains(".func") || t.contains(".entry")) && !t.starts_with("call") {
            let name = func_name(t, &mut lines);
            if t.starts_with(".extern") {
                bad.push(name);
            } else {
                defined.push(name);
            }
            continue;
        }
        if let Some(rest) = t.strip_prefix("call") {
            // call[.uni] [(ret),] name, (args);   or   call name;
            let rest = rest.trim_start_matches(".uni").trim();
            let rest = if rest.starts_with('(') {
                rest.split_once("),").map(|x| x.1).unwrap_or("")
            } else {
                rest
            };
            let name: String = rest
                .trim()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$' || *c == '.')
                .collect();
            if !name.is_empty() {
                called.push(name);
            }
        }
    }
    for c in called {
        if !defined.contains(&c) && !bad.contains(&c) {
            bad.push(c);
        }
    }
    bad.sort();
    bad.dedup();
    bad
}

/// The function name of a `.func`/`.entry` header, which may continue on the next lines.
fn func_name<'a>(
    first: &str,
    lines: &mut std::iter::Peekable<impl Iterator<Item = &'a str>>,
) -> String {
    let mut text = first.to_string();
    while !text.contains('(') && !text.trim_end().ends_with(';') {
        match lines.next() {
            Some(l) => {
                text.push(' ');
                text.push_str(l.trim());
            }
            None => break,
        }
    }
    // The name is the last word before the parameter list '(' (after an optional return
    // value list, which itself is in parentheses right after .func).
    let after_kw = text
        .split_once(".entry")
        .or_else(|| text.split_once(".func"))
        .map(|x| x.1)
        .unwrap_or("")
        .trim();
    let after_ret = if after_kw.starts_with('(') {
        after_kw.split_once(')').map(|x| x.1).unwrap_or("").trim()
    } else {
        after_kw
    };
    after_ret
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$' || *c == '.')
        .collect()
}

/// `ptx` with a `.maxnreg N` performance directive [11.4] added to each kernel of `caps`, between
/// its parameter list and its body. Err(name) when a kernel of `caps` is not in `ptx`.
pub fn with_max_registers(ptx: &str, caps: &[(&str, u32)]) -> Result<String, String> {
    let mut out = ptx.to_string();
    for &(name, regs) in caps {
        let head = format!(".entry {name}(");
        let at = out.find(&head).ok_or_else(|| name.to_string())?;
        let body = out[at..]
            .find("\n{")
            .map(|i| at + i)
            .ok_or_else(|| name.to_string())?;
        out.insert_str(body, &format!("\n.maxnreg {regs}"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_undefined_calls() {
        let ptx = "
.visible .entry k(
.param .u64 p
)
{
call.uni (retval0), helper, (param0);
call.uni missing, (param0);
}
.func (.param .b32 r) helper(
.param .b32 a
)
{ ret; }
.extern .func ext_fn
(
.param .b64 x
);
";
        assert_eq!(
            undefined_calls(ptx),
            vec!["ext_fn".to_string(), "missing".to_string()]
        );
        assert!(undefined_calls(".visible .entry k()\n{\nret;\n}\n").is_empty());
    }

    #[test]
    fn register_caps_go_before_the_body() {
        let ptx =
            ".visible .entry a(\n.param .u64 p\n)\n{\nret;\n}\n.visible .entry b(\n)\n{\nret;\n}\n";
        let got = with_max_registers(ptx, &[("b", 40)]).unwrap();
        assert_eq!(
            got,
            ".visible .entry a(\n.param .u64 p\n)\n{\nret;\n}\n.visible .entry b(\n)\n.maxnreg 40\n{\nret;\n}\n"
        );
        assert_eq!(with_max_registers(ptx, &[("c", 40)]), Err("c".to_string()));
        assert_eq!(with_max_registers(ptx, &[]).unwrap(), ptx);
    }

    #[test]
    fn relabels_only_the_target_line() {
        let ptx =
            "//\n// .target sm_70 in a comment\n.version 7.0\n.target sm_70\n.address_size 64\n";
        assert_eq!(
            relabel_target(ptx, "sm_70", "sm_60").unwrap(),
            "//\n// .target sm_70 in a comment\n.version 7.0\n.target sm_60\n.address_size 64\n"
        );
        assert_eq!(
            relabel_target(".target sm_75\n", "sm_70", "sm_60"),
            Err(".target sm_75".to_string())
        );
        assert!(relabel_target(".version 7.0\n", "sm_70", "sm_60").is_err());
    }
}
