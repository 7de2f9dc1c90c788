//! Counter names as users type them: NVIDIA metric names (`ncu`'s, with `__`) pass through to
//! CUPTI, which validates them; rocprofv3 names map to the NVIDIA metric that means the same
//! thing ([`EQUIVALENTS`], the table of docs/cuda.md); any other rocprofv3 name is refused with
//! the nearest NVIDIA metrics ([`NEAREST`]). Nothing is substituted silently.

use crate::protocol::{Code, ToolError};

/// One counter the user asked for: the name written to the database and the NVIDIA metric
/// collected for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Counter {
    /// The name as typed (`SQ_WAVES`, `sm__warps_launched.sum`): `counter_collection.csv`'s
    /// `Counter_Name`.
    pub name: String,
    /// The NVIDIA metric CUPTI collects.
    pub metric: String,
    /// Value = metric value x `scale` (`FETCH_SIZE` is kB, `dram__bytes_read.sum` bytes).
    pub scale: f64,
    /// What the value means, for `rocpd_info_pmc.description`.
    pub description: String,
}

/// rocprofv3 names with an NVIDIA metric that counts the same thing:
/// `(rocprofv3 name, NVIDIA metric, scale, meaning)`.
pub const EQUIVALENTS: [(&str, &str, f64, &str); 9] = [
    (
        "SQ_WAVES",
        "sm__warps_launched.sum",
        1.0,
        "wavefronts (warps) launched",
    ),
    (
        "GRBM_COUNT",
        "gpc__cycles_elapsed.max",
        1.0,
        "free-running GPU cycles elapsed",
    ),
    (
        "GRBM_GUI_ACTIVE",
        "gr__cycles_active.avg",
        1.0,
        "cycles the GPU (graphics/compute engine) was busy",
    ),
    (
        "SQ_INSTS_SALU",
        "smsp__inst_executed_pipe_uniform.sum",
        1.0,
        "scalar (NVIDIA: uniform datapath) instructions executed, per warp",
    ),
    (
        "TCC_HIT",
        "lts__t_sectors_lookup_hit.sum",
        1.0,
        "L2 cache hits (NVIDIA counts 32-byte sectors)",
    ),
    (
        "TCC_MISS",
        "lts__t_sectors_lookup_miss.sum",
        1.0,
        "L2 cache misses (NVIDIA counts 32-byte sectors)",
    ),
    (
        "FETCH_SIZE",
        "dram__bytes_read.sum",
        1.0 / 1024.0,
        "kilobytes fetched from device memory",
    ),
    (
        "WRITE_SIZE",
        "dram__bytes_write.sum",
        1.0 / 1024.0,
        "kilobytes written to device memory",
    ),
    (
        "Wavefronts",
        "sm__warps_launched.sum",
        1.0,
        "wavefronts (warps) launched",
    ),
];

/// rocprofv3 names (or prefixes, ending in `_`) with no NVIDIA metric that means the same thing,
/// and the NVIDIA metrics nearest to them, named in the refusal.
pub const NEAREST: [(&str, &str); 12] = [
    ("SQ_INSTS_VALU", "smsp__inst_executed.sum (every warp instruction, memory and branches included), smsp__inst_executed_pipe_alu.sum, smsp__inst_executed_pipe_fma.sum"),
    ("SQ_INSTS_LDS", "smsp__inst_executed_op_shared_ld.sum, smsp__inst_executed_op_shared_st.sum"),
    ("SQ_INSTS_VMEM", "smsp__inst_executed_op_global_ld.sum, smsp__inst_executed_op_global_st.sum"),
    ("SQ_INSTS_SMEM", "smsp__inst_executed_op_uniform_ld.sum (no scalar memory unit on NVIDIA)"),
    ("SQ_WAVE_CYCLES", "sm__warps_active.avg, sm__cycles_active.avg"),
    ("SQ_BUSY", "sm__cycles_active.avg"),
    ("SQ_", "sm__warps_launched.sum, sm__cycles_active.avg, smsp__inst_executed.sum"),
    ("TCC_", "lts__t_sectors_lookup_hit.sum, lts__t_sectors_lookup_miss.sum, lts__t_bytes.sum"),
    ("TCP_", "l1tex__t_sectors.sum, l1tex__t_sector_hit_rate.pct"),
    ("GRBM_", "gpc__cycles_elapsed.max, gr__cycles_active.avg"),
    ("GPUBusy", "gr__cycles_active.avg and gpc__cycles_elapsed.max (their ratio)"),
    ("MemUnit", "dram__throughput.avg.pct_of_peak_sustained_elapsed, dram__bytes.sum"),
];

/// Whether `name` is an NVIDIA metric name (`unit__counter.rollup`): it is passed to CUPTI.
pub fn is_nvidia(name: &str) -> bool {
    name.contains("__")
}

/// The counter for `name`: an NVIDIA metric as is, a rocprofv3 name through [`EQUIVALENTS`];
/// refused with the nearest NVIDIA metrics otherwise.
pub fn resolve(name: &str) -> Result<Counter, ToolError> {
    if is_nvidia(name) {
        return Ok(Counter {
            name: name.into(),
            metric: name.into(),
            scale: 1.0,
            description: format!("NVIDIA metric {name}"),
        });
    }
    if let Some((_, metric, scale, meaning)) = EQUIVALENTS
        .iter()
        .find(|(r, ..)| r.eq_ignore_ascii_case(name))
    {
        return Ok(Counter {
            name: name.into(),
            metric: (*metric).into(),
            scale: *scale,
            description: format!("{meaning} (NVIDIA metric {metric})"),
        });
    }
    let nearest = NEAREST
        .iter()
        .find(|(r, _)| {
            if r.ends_with('_') {
                name.to_ascii_uppercase().starts_with(r)
            } else {
                name.eq_ignore_ascii_case(r) || name.to_ascii_uppercase().starts_with(r)
            }
        })
        .map(|(_, n)| *n)
        .unwrap_or("sm__warps_launched.sum, gpc__cycles_elapsed.max, sm__cycles_active.avg, dram__bytes_read.sum (rocprof-attach -L -p PID lists them all)");
    let known: Vec<&str> = EQUIVALENTS.iter().map(|(r, ..)| *r).collect();
    Err(ToolError::new(
        Code::Unsupported,
        format!(
            "counter {name} has no NVIDIA equivalent that counts the same thing, and none is substituted; nearest NVIDIA metrics: {nearest}. Fix: pass an NVIDIA metric name instead (as ncu takes it), or one of the rocprofv3 names with an equivalent: {} (docs/cuda.md, \"Counters\")",
            known.join(", ")
        ),
    ))
}

/// The counter names of `ROCPROF_COUNTERS` (`pmc: A B C`) or of one `pmc:` line of
/// `ROCPROF_COUNTER_GROUPS`: names split on spaces and commas.
pub fn parse_names(value: &str) -> Vec<String> {
    let v = value.trim();
    let v = v
        .strip_prefix("pmc:")
        .or(v.strip_prefix("spm:"))
        .unwrap_or(v);
    // Several groups may come on one line ("pmc: A B pmc: C"): each `pmc:` starts the next.
    v.split(|c: char| c.is_whitespace() || c == ',')
        .filter(|s| !s.is_empty() && *s != "pmc:" && *s != "spm:")
        .map(str::to_owned)
        .collect()
}

/// `ROCPROF_KERNEL_FILTER_RANGE` (`[1-5]`, `[1,3,7-9], [2]`): the 1-based launch numbers of
/// each kernel to keep, as inclusive ranges; `None` when empty (the default applies).
pub fn parse_iterations(value: &str) -> Result<Option<Vec<(u64, u64)>>, ToolError> {
    let bad = || {
        ToolError::new(
            Code::Unsupported,
            format!("--kernel-iteration-range '{value}' is not a list of launch numbers such as [1-5] or [1,3,7-9]; launches of each kernel are counted from 1"),
        )
    };
    let mut out = Vec::new();
    for part in value.split([',', '[', ']', ' ']).filter(|s| !s.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u64>(), b.trim().parse::<u64>()),
            None => (part.trim().parse::<u64>(), part.trim().parse::<u64>()),
        };
        match (a, b) {
            (Ok(a), Ok(b)) if a >= 1 && b >= a => out.push((a, b)),
            _ => return Err(bad()),
        }
    }
    Ok((!out.is_empty()).then_some(out))
}

/// Launches of each kernel counted by default, per window (`--kernel-iteration-range` not
/// given): the first few, so a training loop keeps moving.
pub const DEFAULT_LAUNCHES_PER_KERNEL: u64 = 5;

/// Counted launches per window at most (the range profiler's ranges per pass): counting
/// serialises kernels, so this bounds what a window costs.
pub const DEFAULT_MAX_RANGES: usize = 2000;

/// What `--pmc` asks the CUDA tool to count.
#[derive(Debug, Clone)]
pub struct CounterPlan {
    /// The counters, in the order given.
    pub counters: Vec<Counter>,
    /// `--replay-mode kernel`: CUPTI replays each kernel for every pass.
    pub kernel_replay: bool,
    /// `--replay-mode iteration`: a set of several passes is counted one pass per window, each
    /// launch with the metrics of its pass (iteration multiplexing, docs/cuda.md).
    pub iteration_replay: bool,
    /// `--kernel-include-regex`.
    pub include: Option<regex::Regex>,
    /// `--kernel-exclude-regex`.
    pub exclude: Option<regex::Regex>,
    /// Launches of each kernel to keep (1-based, inclusive ranges).
    pub iterations: Vec<(u64, u64)>,
    /// Whether [`CounterPlan::iterations`] is the default.
    pub default_iterations: bool,
    /// Ranges per window at most.
    pub max_ranges: usize,
}

impl CounterPlan {
    /// Whether launch number `n` (1-based) of kernel `name` is to be kept.
    pub fn keeps(&self, name: &str, n: u64) -> bool {
        self.include.as_ref().is_none_or(|r| r.is_match(name))
            && !self.exclude.as_ref().is_some_and(|r| r.is_match(name))
            && self.iterations.iter().any(|&(a, b)| (a..=b).contains(&n))
    }

    /// The last launch number any kernel keeps.
    pub fn last_kept(&self) -> u64 {
        self.iterations.iter().map(|&(_, b)| b).max().unwrap_or(0)
    }
}

fn regex_setting(
    env: &std::collections::BTreeMap<String, String>,
    key: &str,
    neutral: &str,
    option: &str,
) -> Result<Option<regex::Regex>, ToolError> {
    match env.get(key).map(|s| s.trim()) {
        None => Ok(None),
        Some(v) if v.is_empty() || v == neutral => Ok(None),
        Some(v) => regex::Regex::new(v).map(Some).map_err(|e| {
            ToolError::new(
                Code::Unsupported,
                format!("{option} '{v}' is not a regular expression ({e}); fix the pattern"),
            )
        }),
    }
}

/// The setting of `--replay-mode iteration` (the groups come in `ROCPROF_COUNTER_GROUPS`).
pub const ITERATION_REPLAY: &str = "ROCPROF_ATTACH_ITERATION_REPLAY";

/// The counter plan of an `attach` (`ROCPROF_COUNTER_COLLECTION=1` with `ROCPROF_COUNTERS`, or
/// `ROCPROF_KERNEL_REPLAY=1` with `ROCPROF_COUNTER_GROUPS`), `None` when no counter is asked
/// for; names are resolved here ([`resolve`]).
pub fn counter_plan(
    env: &std::collections::BTreeMap<String, String>,
) -> Result<Option<CounterPlan>, ToolError> {
    let on = |k: &str| env.get(k).is_some_and(|v| crate::protocol::truthy(v));
    let kernel_replay = on("ROCPROF_KERNEL_REPLAY");
    let iteration_replay = !kernel_replay && on(ITERATION_REPLAY);
    let mut names: Vec<String> = Vec::new();
    if kernel_replay || iteration_replay {
        for line in env.get("ROCPROF_COUNTER_GROUPS").map_or("", |s| s).lines() {
            names.extend(parse_names(line));
        }
    }
    names.extend(parse_names(env.get("ROCPROF_COUNTERS").map_or("", |s| s)));
    if names.is_empty() {
        return Ok(None);
    }
    let mut counters: Vec<Counter> = Vec::new();
    for n in names {
        if !counters.iter().any(|c| c.name == n) {
            counters.push(resolve(&n)?);
        }
    }
    let range = env.get("ROCPROF_KERNEL_FILTER_RANGE").map_or("", |s| s);
    let given = parse_iterations(range)?;
    Ok(Some(CounterPlan {
        counters,
        kernel_replay,
        iteration_replay,
        include: regex_setting(
            env,
            "ROCPROF_KERNEL_FILTER_INCLUDE_REGEX",
            ".*",
            "--kernel-include-regex",
        )?,
        exclude: regex_setting(
            env,
            "ROCPROF_KERNEL_FILTER_EXCLUDE_REGEX",
            "",
            "--kernel-exclude-regex",
        )?,
        default_iterations: given.is_none(),
        iterations: given.unwrap_or(vec![(1, DEFAULT_LAUNCHES_PER_KERNEL)]),
        max_ranges: DEFAULT_MAX_RANGES,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_pass_or_are_refused() {
        let c = resolve("SQ_WAVES").unwrap();
        assert_eq!(c.metric, "sm__warps_launched.sum");
        assert_eq!(c.name, "SQ_WAVES");
        assert_eq!(resolve("FETCH_SIZE").unwrap().scale, 1.0 / 1024.0);
        assert_eq!(
            resolve("dram__bytes_read.sum").unwrap().metric,
            "dram__bytes_read.sum"
        );
        let e = resolve("SQ_INSTS_VALU").unwrap_err();
        assert!(
            e.message.contains("smsp__inst_executed.sum") && e.message.contains("SQ_WAVES"),
            "{e}"
        );
        let e = resolve("TCC_EA0_RDREQ").unwrap_err();
        assert!(e.message.contains("lts__"), "{e}");
        assert!(resolve("NOT_A_COUNTER").is_err());
    }

    #[test]
    fn counter_lists_and_iterations() {
        assert_eq!(
            parse_names("pmc: SQ_WAVES GRBM_COUNT,x__y"),
            ["SQ_WAVES", "GRBM_COUNT", "x__y"]
        );
        assert_eq!(parse_iterations("[1-5]").unwrap(), Some(vec![(1, 5)]));
        assert_eq!(
            parse_iterations("[1,3-4], [9]").unwrap(),
            Some(vec![(1, 1), (3, 4), (9, 9)])
        );
        assert_eq!(parse_iterations("").unwrap(), None);
        assert!(parse_iterations("[0-2]").is_err());
        assert!(parse_iterations("[a]").is_err());
    }
}

#[cfg(test)]
mod iteration_tests {
    #[test]
    fn iteration_replay_reads_the_groups() {
        let env: std::collections::BTreeMap<String, String> = [
            ("ROCPROF_ATTACH_ITERATION_REPLAY", "1"),
            ("ROCPROF_COUNTER_COLLECTION", "1"),
            ("ROCPROF_KERNEL_REPLAY", "0"),
            ("ROCPROF_COUNTER_GROUPS", "pmc: SQ_WAVES pmc: TCC_HIT"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let p = super::counter_plan(&env).unwrap().unwrap();
        assert!(p.iteration_replay && !p.kernel_replay);
        assert_eq!(p.counters.len(), 2);
    }
}
