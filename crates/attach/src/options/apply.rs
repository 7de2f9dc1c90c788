//! [`ProfilerOptions::apply`]: the tracing, filter, summary and output options, one stage per
//! group of variables, in the order rocprofv3 writes them.

use super::switches::{Effect, Switch, Switches};
use super::*;

/// The MPI rank/size variable pairs looked for in our environment, in rocprofv3's order.
const MPI_PAIRS: [(&str, &str); 8] = [
    ("PBS_NODENUM", "PBS_O_TASKNUM"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
    ("PMI_RANK", "PMI_SIZE"),
    ("MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("MPI_RANKID", "MPI_NRANKS"),
    ("MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("MPI_RANK", "MPI_SIZE"),
];

impl ProfilerOptions {
    /// Apply the options to `env` the way rocprofv3 prepares its environment in attach mode, using
    /// the current directory as the default output directory. Returns warnings for the user.
    pub fn apply(&self, env: &mut EnvList) -> Result<Vec<String>> {
        let cwd = std::env::current_dir().map_err(|e| {
            Error::io(
                "cannot determine the current directory for the default output directory (pass -d DIR)",
                e,
            )
        })?;
        self.apply_in(env, &cwd)
    }

    /// [`ProfilerOptions::apply`] with an explicit working directory (for tests and callers that
    /// already know it). On error `env` may be partly modified; discard it.
    pub fn apply_in(&self, env: &mut EnvList, cwd: &Path) -> Result<Vec<String>> {
        let mut warnings = Vec::new();
        let (ompt, ompt_ops) = parse_ompt(&self.ompt_trace, &mut warnings)?;
        self.refuse_attach_incompatible()?;
        self.validate_values()?;
        self.apply_mpi(env)?;
        env.set("ROCPROFILER_LIBRARY_CTOR", "1");
        self.apply_output(env, cwd, &mut warnings)?;
        let sw = self.apply_tracing(env, ompt, &ompt_ops, &mut warnings);
        self.apply_summary(env, &sw);
        self.apply_tool(env, &sw)?;
        self.apply_perfetto(env);
        self.apply_filters(env, &mut warnings)?;
        self.apply_counters(env)?;
        self.apply_pc_sampling(env)?;
        self.apply_spm(env)?;
        self.apply_internals(env)?;
        self.apply_att(env, &mut warnings)?;
        // Every session stands alone: what was not asked for is sent off, not left to whatever
        // an earlier session set in the target.
        defaults::fill_unset(env);
        if !records_something(env) {
            warnings.push(
                "no tracing or counter option was given: the tool will be loaded but record nothing (add e.g. --kernel-trace, --sys-trace or --pmc COUNTER)".to_string(),
            );
        }
        Ok(warnings)
    }

    /// Write what switch `s` writes for its value in `sw` (nothing when it is not given).
    pub(super) fn put(env: &mut EnvList, sw: &Switches, s: Switch) {
        if let Some((var, value)) = sw.get(s).and_then(|v| s.pair(v)) {
            env.set(var, value);
        }
    }

    /// MPI rank/size variable names (read by the tool from the target's own environment).
    fn apply_mpi(&self, env: &mut EnvList) -> Result<()> {
        let v = &self.values;
        let pair = match (&v.mpi_world_rank_variable, &v.mpi_world_size_variable) {
            (Some(r), Some(s)) => Some((r.as_str(), s.as_str())),
            (None, None) => MPI_PAIRS
                .iter()
                .find(|(r, s)| env.contains(r) && env.contains(s))
                .copied(),
            _ => return Err(Error::usage(
                "--mpi-world-rank-variable and --mpi-world-size-variable must be given together",
            )),
        };
        if let Some((r, s)) = pair {
            env.set("ROCPROF_MPI_RANK_VAR", r);
            env.set("ROCPROF_MPI_SIZE_VAR", s);
        }
        Ok(())
    }

    /// `-o`, `-d`, `--output-config` and `-f`, with the warnings about formats.
    fn apply_output(
        &self,
        env: &mut EnvList,
        cwd: &Path,
        warnings: &mut Vec<String>,
    ) -> Result<()> {
        let v = &self.values;
        if let Some(name) = &v.output_file {
            if name.is_empty() {
                return Err(Error::usage(
                    "-o/--output-file is empty: give a file name template such as %hostname%/%pid% or leave the option out",
                ));
            }
            env.set("ROCPROF_OUTPUT_FILE_NAME", name);
        }
        let dir = match &v.output_directory {
            Some(d) if d.is_empty() => {
                return Err(Error::usage(
                    "-d/--output-directory is empty: give a directory or leave the option out to use the current directory",
                ))
            }
            Some(d) => d.clone(),
            None => match env.get("ROCPROF_OUTPUT_PATH") {
                Some(d) if !d.is_empty() => d.to_string(),
                _ => cwd.to_string_lossy().into_owned(),
            },
        };
        env.set("ROCPROF_OUTPUT_PATH", &absolute_output_dir(&dir, cwd));
        Self::put(env, &self.switches, Switch::OutputConfig);
        let effective = self.apply_formats(env)?;
        self.warn_about_formats(&effective, warnings);
        Ok(())
    }

    /// Append the `-f` formats (default rocpd) to `ROCPROF_OUTPUT_FORMAT`; returns every format
    /// the tool will write (ours and those already exported).
    fn apply_formats(&self, env: &mut EnvList) -> Result<Vec<OutputFormat>> {
        let mut formats = parse_formats(&self.values.output_format)?;
        if formats.is_empty() {
            formats.push(OutputFormat::Rocpd);
        }
        let existing = env.get("ROCPROF_OUTPUT_FORMAT").unwrap_or("").to_string();
        let existing_formats = formats_of(&existing).map_err(|e| {
            Error::usage(format!(
                "ROCPROF_OUTPUT_FORMAT={existing} in your environment: {e}; fix or unset it (-f adds formats to it)"
            ))
        })?;
        let names: Vec<&str> = formats.iter().map(|f| f.name()).collect();
        env.append("ROCPROF_OUTPUT_FORMAT", &names.join(","), ",");
        let mut effective = formats;
        if format_tokens(&existing).next().is_some() {
            effective.extend(existing_formats);
        }
        Ok(effective)
    }

    /// Warnings about switches the output formats `effective` defeat.
    fn warn_about_formats(&self, effective: &[OutputFormat], warnings: &mut Vec<String>) {
        let sw = &self.switches;
        if sw.on(Switch::Stats)
            && !effective
                .iter()
                .any(|f| matches!(f, OutputFormat::Csv | OutputFormat::Json))
        {
            warnings.push(
                "--stats has no effect for the requested output formats; add `-f csv` or `-f json`, or run `rocprof-attach summary` on the rocpd database afterwards".to_string(),
            );
        }
        let direct = |f: &OutputFormat| {
            matches!(
                f,
                OutputFormat::Csv | OutputFormat::Pftrace | OutputFormat::Otf2
            )
        };
        if (sw.on(Switch::HipfileTrace) || sw.on(Switch::RocshmemTrace))
            && effective.iter().any(direct)
        {
            warnings.push(
                "direct csv, pftrace and otf2 output is deprecated and may miss hipFILE and rocSHMEM records; use rocpd (the default) and `rocprof-attach convert`".to_string(),
            );
        }
    }

    /// The trace switches after the implications: each [`Effect::Trace`] variable of a true
    /// switch is written, in rocprofv3's order (that of [`defaults::DEFAULTS`]), then the OMPT
    /// categories. Returns the switches after the implications.
    fn apply_tracing(
        &self,
        env: &mut EnvList,
        ompt: Option<bool>,
        ompt_ops: &str,
        warnings: &mut Vec<String>,
    ) -> Switches {
        let mut given = self.switches;
        given.set(Switch::OmptTrace, ompt);
        if given.on(Switch::KokkosTrace) {
            warnings.push(
                "--kokkos-trace: the Kokkos Tools library cannot be added to a running process (KOKKOS_TOOLS_LIBS is read at start-up); only --marker-trace and --kernel-rename are applied".to_string(),
            );
        }
        let sw = given.resolved();
        // Written only when true: a ROCPROF_*_TRACE=1 the user exported is never cleared.
        for (var, _) in defaults::DEFAULTS {
            let traced = Switch::ALL
                .into_iter()
                .find(|s| s.def().effect == Effect::Trace(var));
            if traced.is_some_and(|s| sw.on(s)) {
                env.set(var, "1");
            }
        }
        if !ompt_ops.is_empty() {
            env.set("ROCPROF_OMPT_TRACE_OPERATIONS", ompt_ops);
        }
        sw
    }

    /// Statistics, summaries, kernel naming and selected regions.
    fn apply_summary(&self, env: &mut EnvList, sw: &Switches) {
        let v = &self.values;
        let summary = sw.on(Switch::Summary);
        let summary_output = match &v.summary_output_file {
            None if summary => Some("stderr".to_string()),
            Some(f)
                if summary && matches!(f.to_ascii_lowercase().as_str(), "stdout" | "stderr") =>
            {
                Some(f.to_ascii_lowercase())
            }
            other => other.clone(),
        };
        Self::put(env, sw, Switch::Stats);
        Self::put(env, sw, Switch::Summary);
        if let Some(u) = &v.summary_units {
            env.set("ROCPROF_STATS_SUMMARY_UNITS", &u.to_ascii_lowercase());
        }
        if let Some(o) = &summary_output {
            env.set("ROCPROF_STATS_SUMMARY_OUTPUT", o);
        }
        if !v.summary_groups.is_empty() {
            env.set(
                "ROCPROF_STATS_SUMMARY_GROUPS",
                &v.summary_groups.join("##@@##"),
            );
        }
        for s in [
            Switch::SummaryPerDomain,
            Switch::MangledKernels,
            Switch::TruncateKernels,
            Switch::SelectedRegions,
            Switch::SelectedRegionsRefCount,
        ] {
            Self::put(env, sw, s);
        }
    }

    /// The tool's log level, the benchmark mode and `--kernel-rename`.
    fn apply_tool(&self, env: &mut EnvList, sw: &Switches) -> Result<()> {
        if let Some(level) = &self.values.log_level {
            let level = level.to_ascii_lowercase();
            if level != "env" && level != "config" {
                for p in ["ROCPROF", "ROCPROFILER", "ROCTX"] {
                    env.set(&format!("{p}_LOG_LEVEL"), &level);
                }
            }
        }
        if let Some(mode) = &self.values.benchmark_mode {
            let mode = mode.to_ascii_lowercase();
            if mode == "execution-profile" {
                match self.switches.get(Switch::GroupByQueue) {
                    None => env.set(Switch::GroupByQueue.var(), "0"),
                    Some(true) => {
                        return Err(Error::usage(
                            "--benchmark-mode=execution-profile requires --group-by-queue=false",
                        ))
                    }
                    Some(false) => {}
                }
            }
            env.set("ROCPROF_BENCHMARK_MODE", &mode);
        }
        Self::put(env, sw, Switch::KernelRename);
        Ok(())
    }

    /// The Perfetto settings.
    fn apply_perfetto(&self, env: &mut EnvList) {
        let v = &self.values;
        if let Some(kb) = v.perfetto_buffer_size {
            env.set("ROCPROF_PERFETTO_BUFFER_SIZE_KB", &kb.to_string());
        }
        if let Some(kb) = v.perfetto_shmem_size_hint {
            env.set("ROCPROF_PERFETTO_SHMEM_SIZE_HINT_KB", &kb.to_string());
        }
        if let Some(p) = &v.perfetto_buffer_fill_policy {
            env.set(
                "ROCPROF_PERFETTO_BUFFER_FILL_POLICY",
                &p.to_ascii_lowercase(),
            );
        }
        if let Some(b) = &v.perfetto_backend {
            env.set("ROCPROF_PERFETTO_BACKEND", &b.to_ascii_lowercase());
        }
    }

    /// Kernel filters, agent numbering and the extra counter definitions.
    fn apply_filters(&self, env: &mut EnvList, warnings: &mut Vec<String>) -> Result<()> {
        let v = &self.values;
        if let Some(r) = v.kernel_include_regex.as_deref().filter(|r| !r.is_empty()) {
            env.set("ROCPROF_KERNEL_FILTER_INCLUDE_REGEX", r);
        }
        if let Some(r) = v.kernel_exclude_regex.as_deref().filter(|r| !r.is_empty()) {
            env.set("ROCPROF_KERNEL_FILTER_EXCLUDE_REGEX", r);
        }
        if !v.kernel_iteration_range.is_empty() {
            env.set(
                "ROCPROF_KERNEL_FILTER_RANGE",
                &v.kernel_iteration_range.join(", "),
            );
        }
        if let Some(a) = &v.agent_index {
            env.set("ROCPROF_AGENT_INDEX", a);
        }
        if let Some(path) = &v.extra_counters {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Error::usage(format!(
                    "-E/--extra-counters: cannot read {path}: {e}; give a readable YAML file of counter definitions"
                ))
            })?;
            if text.trim().is_empty() {
                warnings.push(format!("extra counter file '{path}' is empty"));
            }
            env.set("ROCPROF_EXTRA_COUNTERS_CONTENTS", &text);
        }
        Ok(())
    }

    /// Signal handlers, process synchronisation and the minimum output size.
    fn apply_internals(&self, env: &mut EnvList) -> Result<()> {
        Self::put(env, &self.switches, Switch::DisableSignalHandlers);
        Self::put(env, &self.switches, Switch::ProcessSync);
        if let Some(kb) = self.values.minimum_output_data.filter(|kb| *kb != 0) {
            let bytes = kb.checked_mul(1024).ok_or_else(|| {
                Error::usage(format!(
                    "--minimum-output-data {kb} KB is too large: give a size in KB below 2^54"
                ))
            })?;
            env.set("ROCPROF_MINIMUM_OUTPUT_BYTES", &bytes.to_string());
        }
        Ok(())
    }
}
