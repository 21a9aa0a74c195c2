//! Environment variables that choose one of a few named options (`MOE_FUSED_PREFETCH`,
//! `MOE_MMQ_ORDER`, `MOE_MMQ_TMA`, `MOE_MMQ_WEIGHT_L2`, `MOE_SCATTER_GATHER`, `MOE_SCATTER_ONE`,
//! `MOE_SWIGLU`):
//! one parser, one error for a value it does not know. (The CLI lists every `MOE_*` variable
//! it reads, and warns of the names it does not: host/src/cli/env.rs.)

use crate::error::{Error, Result};

/// The option that `value` of the variable `var` names among `choices` (name, option); unset
/// (`None`) takes the first. A name not among them is an error that names the variable, the
/// value and the choices, not ignored.
pub fn choice<T: Copy>(var: &str, value: Option<&str>, choices: &[(&str, T)]) -> Result<T> {
    let Some(v) = value else {
        return Ok(choices[0].1);
    };
    choices
        .iter()
        .find(|(name, _)| *name == v)
        .map(|&(_, option)| option)
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
            let expected = match names.split_last() {
                Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
                _ => names.concat(),
            };
            Error::Unsupported(format!("unknown {var} `{v}` (expected {expected})"))
        })
}

/// [`choice`] on the variable's value in the environment (unset, or not Unicode: the first).
pub fn choice_from_env<T: Copy>(var: &str, choices: &[(&str, T)]) -> Result<T> {
    choice(var, std::env::var(var).ok().as_deref(), choices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_its_option_unset_the_first_else_an_error() {
        let c = [("auto", 0), ("always", 1), ("never", 2)];
        assert_eq!(choice("V", None, &c).unwrap(), 0);
        assert_eq!(choice("V", Some("always"), &c).unwrap(), 1);
        assert_eq!(choice("V", Some("never"), &c).unwrap(), 2);
        let e = choice("V", Some("Never"), &c).unwrap_err().to_string();
        assert_eq!(e, "unknown V `Never` (expected auto, always or never)");
        let e = choice("V", Some("x"), &[("rows", 0), ("tiles", 1)]).unwrap_err();
        assert_eq!(e.to_string(), "unknown V `x` (expected rows or tiles)");
        let e = choice("V", Some("x"), &[("only", 0)]).unwrap_err();
        assert_eq!(e.to_string(), "unknown V `x` (expected only)");
    }
}
