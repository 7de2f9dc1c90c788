//! Values checked before they reach the target, each refusal with the rule it broke: the tool
//! reads them only inside the target, where a bad one aborts the process (`ROCP_FATAL`, an
//! uncaught `std::regex_error` or `std::stoul` exception) or is silently ignored.

use super::switches::Effect;
use super::*;

/// Check a kernel name filter the tool compiles with C++ `std::regex` in its ECMAScript grammar:
/// a pattern that grammar rejects is refused with why ([`super::ecmascript::error`]), whatever
/// other dialects accept (look-behind, `(?i)`, named groups), and one it accepts passes (look-ahead,
/// back-references), since the target would otherwise throw `std::regex_error`.
pub fn check_regex(option: &str, pattern: &str) -> Result<()> {
    let Some(problem) = super::ecmascript::error(pattern) else {
        return Ok(());
    };
    Err(Error::usage(format!(
        "{option} '{pattern}' is not a valid regular expression in the ECMAScript grammar the tool compiles it \
         with (C++ std::regex): {problem}. Rule: an ECMAScript regular expression matched against kernel \
         names, e.g. '^gemm_.*' or 'kernelA|kernelB' (escape a literal parenthesis, bracket or brace as \\(, \\[ \
         or \\{{)"
    )))
}

/// Check `--kernel-iteration-range` values the way the tool parses `ROCPROF_KERNEL_FILTER_RANGE`:
/// tokens separated by `[`, `]`, `,` or spaces, each a dispatch number `N` or a range `A-B`
/// (decimal, A <= B).
pub fn check_iteration_range(values: &[String]) -> Result<()> {
    let rule =
        "Rule: dispatch numbers N or ranges A-B (decimal, A <= B) separated by commas or spaces, \
                optionally in brackets, e.g. '[1-5],[7]' or '1-5 7'";
    let joined = values.join(", ");
    let tokens: Vec<&str> = joined
        .split(['[', ']', ',', ' '])
        .filter(|t| !t.is_empty())
        .collect();
    if tokens.is_empty() {
        return Err(Error::usage(format!(
            "--kernel-iteration-range '{joined}' names no dispatch. {rule}"
        )));
    }
    let number = |s: &str| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    for t in tokens {
        let ok = match t.split_once('-') {
            Some((a, b)) => matches!((number(a), number(b)), (Some(a), Some(b)) if a <= b),
            None => number(t).is_some(),
        };
        if !ok {
            return Err(Error::usage(format!(
                "--kernel-iteration-range: '{t}' is not a dispatch number or range. {rule}"
            )));
        }
    }
    Ok(())
}

/// Check the counter names of the `--pmc` groups: each value must name a counter (letters,
/// digits and `_`; the tool turns other punctuation into separators and drops a value without
/// any such character silently).
pub fn check_pmc(groups: &[Vec<String>]) -> Result<()> {
    for value in groups.iter().flatten() {
        if !value.chars().any(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Error::usage(format!(
                "--pmc: '{value}' is not a counter name. Rule: counter names are letters, digits and '_', \
                 given as separate arguments, e.g. --pmc SQ_WAVES GRBM_COUNT (list them with rocprofv3 --list-avail)"
            )));
        }
    }
    Ok(())
}

/// Check the values of the environment variables a session reads or sends that have a fixed
/// form, so a bad one is a usage error (exit 2) naming the variable and its rule, before any
/// target is looked at: the boolean `ROCPROF_*` variables of the switches, `ROCPROF_ATTACH_BACKEND`
/// and the CUDA tool's `ROCPROF_ATTACH_BUFFER_BYTES` and `ROCPROF_ATTACH_CUDA_DRIVER_API` (which
/// the tool would refuse only once loaded into the target).
pub fn check_environment(env: &EnvList) -> Result<()> {
    let set = |var: &str| env.get(var).map(str::trim).filter(|v| !v.is_empty());
    let bad = |var: &str, value: &str, rule: &str| {
        Err(Error::usage(format!(
            "{var}='{value}' in the environment: {rule}; fix or unset it"
        )))
    };
    let boolean = "not a boolean: use one of y, yes, t, true, on, 1 or n, no, f, false, off, 0";
    for s in Switch::ALL {
        let var = match s.def().effect {
            Effect::Trace(v) | Effect::Bool(v) | Effect::Negated(v) => v,
            Effect::Set(v, "1" | "0") => v,
            _ => continue,
        };
        if let Some(v) = set(var).filter(|v| parse_bool(v).is_err()) {
            return bad(var, v, boolean);
        }
    }
    if let Some(v) = set("ROCPROF_ATTACH_CUDA_DRIVER_API").filter(|v| parse_bool(v).is_err()) {
        return bad("ROCPROF_ATTACH_CUDA_DRIVER_API", v, boolean);
    }
    if let Some(v) = set(crate::preflight::backend::BACKEND_ENV)
        .filter(|v| !matches!(*v, "auto" | "rocm" | "cuda"))
    {
        return bad(
            crate::preflight::backend::BACKEND_ENV,
            v,
            "not a backend: use auto, rocm or cuda",
        );
    }
    if let Some(v) = set("ROCPROF_ATTACH_BUFFER_BYTES").filter(|v| {
        !v.parse::<u64>()
            .is_ok_and(|n| (64 << 10..=256 << 20).contains(&n))
    }) {
        return bad(
            "ROCPROF_ATTACH_BUFFER_BYTES",
            v,
            "the size of the CUDA tool's CUPTI buffers is a byte count from 65536 to 268435456 (default \
             8388608, 8 MiB)",
        );
    }
    Ok(())
}

impl ProfilerOptions {
    /// Every value check of this module that applies to these options.
    pub(super) fn validate_values(&self) -> Result<()> {
        if let Some(r) = self
            .values
            .kernel_include_regex
            .as_deref()
            .filter(|r| !r.is_empty())
        {
            check_regex("--kernel-include-regex", r)?;
        }
        if let Some(r) = self
            .values
            .kernel_exclude_regex
            .as_deref()
            .filter(|r| !r.is_empty())
        {
            check_regex("--kernel-exclude-regex", r)?;
        }
        if !self.values.kernel_iteration_range.is_empty() {
            check_iteration_range(&self.values.kernel_iteration_range)?;
        }
        check_pmc(&self.pmc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regexes() {
        for ok in [
            "^gemm_.*", "a|b", "(?=x)y", "(a)\\1", "[(]", "\\(", "a+?", "x{2}",
        ] {
            assert!(check_regex("--r", ok).is_ok(), "{ok}");
        }
        for bad in ["(", "a)", "[abc", "*a", "a|+", "a\\", "(?:a"] {
            let e = check_regex("--r", bad).unwrap_err().to_string();
            assert!(e.contains("Rule:"), "{bad}: {e}");
        }
    }

    #[test]
    fn environment_values() {
        let env = |k: &str, v: &str| EnvList::from_pairs([(k, v)]);
        for (k, v) in [
            ("ROCPROF_KERNEL_TRACE", "1"),
            ("ROCPROF_ATTACH_BUFFER_BYTES", "65536"),
            ("ROCPROF_ATTACH_BACKEND", "cuda"),
            ("ROCPROF_ATTACH_CUDA_DRIVER_API", "yes"),
            ("ROCPROF_KERNEL_TRACE", ""),
        ] {
            assert!(check_environment(&env(k, v)).is_ok(), "{k}={v}");
        }
        for (k, v) in [
            ("ROCPROF_KERNEL_TRACE", "maybe"),
            ("ROCPROF_ATTACH_BUFFER_BYTES", "abc"),
            ("ROCPROF_ATTACH_BUFFER_BYTES", "1024"),
            ("ROCPROF_ATTACH_BACKEND", "xyz"),
            ("ROCPROF_ATTACH_CUDA_DRIVER_API", "maybe"),
        ] {
            let e = check_environment(&env(k, v)).unwrap_err();
            assert_eq!(e.exit_code(), rocprof_exit::ExitCode::Usage, "{k}={v}");
            assert!(e.to_string().contains(k), "{e}");
        }
    }

    #[test]
    fn ranges() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        for ok in [&["[1-5],[7]"][..], &["1-5", "7"], &["[1-5] [7]"], &["3"]] {
            assert!(check_iteration_range(&v(ok)).is_ok(), "{ok:?}");
        }
        for bad in [
            &["abc"][..],
            &["5-1"],
            &["1-"],
            &["[]"],
            &["1-2-3"],
            &["-4"],
        ] {
            let e = check_iteration_range(&v(bad)).unwrap_err().to_string();
            assert!(e.contains("Rule:"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn counters() {
        assert!(check_pmc(&[vec!["SQ_WAVES".into(), "GRBM_COUNT".into()]]).is_ok());
        assert!(check_pmc(&[vec!["".into()]]).is_err());
        assert!(check_pmc(&[vec!["SQ_WAVES".into(), " , ".into()]]).is_err());
    }
}
