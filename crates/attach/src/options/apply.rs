//! [`ProfilerOptions::apply`]: the tracing, filter, summary and output options.

use super::*;

impl ProfilerOptions {
    /// Split the `--pmc` values into one group per `--pmc` flag, from the matches clap produced for
    /// the command these options are flattened into. Call once after `from_arg_matches`.
    pub fn fill_pmc_groups(&mut self, matches: &clap::ArgMatches) {
        self.pmc = match matches.get_occurrences::<String>("pmc") {
            Some(occ) => occ.map(|o| o.cloned().collect()).collect(),
            None => Vec::new(),
        };
        if self.pmc.is_empty()
            && matches.value_source("pmc") == Some(clap::parser::ValueSource::CommandLine)
        {
            self.pmc.push(Vec::new());
        }
    }

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

        // MPI rank/size variable names (read by the tool from the target's own environment).
        match (&self.mpi_world_rank_variable, &self.mpi_world_size_variable) {
            (Some(r), Some(s)) => {
                env.set("ROCPROF_MPI_RANK_VAR", r);
                env.set("ROCPROF_MPI_SIZE_VAR", s);
            }
            (None, None) => {
                const PAIRS: [(&str, &str); 8] = [
                    ("PBS_NODENUM", "PBS_O_TASKNUM"),
                    ("SLURM_PROCID", "SLURM_NTASKS"),
                    ("PMI_RANK", "PMI_SIZE"),
                    ("MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"),
                    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                    ("MPI_RANKID", "MPI_NRANKS"),
                    ("MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
                    ("MPI_RANK", "MPI_SIZE"),
                ];
                if let Some((r, s)) = PAIRS
                    .iter()
                    .find(|(r, s)| env.contains(r) && env.contains(s))
                {
                    env.set("ROCPROF_MPI_RANK_VAR", r);
                    env.set("ROCPROF_MPI_SIZE_VAR", s);
                }
            }
            _ => return Err(Error::usage(
                "--mpi-world-rank-variable and --mpi-world-size-variable must be given together",
            )),
        }

        env.set("ROCPROFILER_LIBRARY_CTOR", "1");

        // ---------------------------------------------------------------- output
        if let Some(name) = &self.output_file {
            if name.is_empty() {
                return Err(Error::usage(
                    "-o/--output-file is empty: give a file name template such as %hostname%/%pid% or leave the option out",
                ));
            }
            env.set("ROCPROF_OUTPUT_FILE_NAME", name);
        }
        let dir = match &self.output_directory {
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
        if self.output_config == Some(true) {
            env.set("ROCPROF_OUTPUT_CONFIG_FILE", "1");
        }

        let mut formats = parse_formats(&self.output_format)?;
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
        let mut effective = formats.clone();
        if format_tokens(&existing).next().is_some() {
            effective.extend(existing_formats);
        }
        if self.stats == Some(true)
            && !effective
                .iter()
                .any(|f| matches!(f, OutputFormat::Csv | OutputFormat::Json))
        {
            warnings.push(
                "--stats has no effect for the requested output formats; add `-f csv` or `-f json`, or run `rocprof-attach summary` on the rocpd database afterwards".to_string(),
            );
        }
        if (self.hipfile_trace == Some(true) || self.rocshmem_trace == Some(true))
            && effective.iter().any(|f| {
                matches!(
                    f,
                    OutputFormat::Csv | OutputFormat::Pftrace | OutputFormat::Otf2
                )
            })
        {
            warnings.push(
                "direct csv, pftrace and otf2 output is deprecated and may miss hipFILE and rocSHMEM records; use rocpd (the default) and `rocprof-attach convert`".to_string(),
            );
        }

        // ---------------------------------------------------------------- tracing switches
        let mut sw = Switches(vec![
            ("sys_trace", self.sys_trace),
            ("runtime_trace", self.runtime_trace),
            ("hip_trace", self.hip_trace),
            ("hsa_trace", self.hsa_trace),
            ("kfd_trace", self.kfd_trace),
            ("hip_compiler_trace", self.hip_compiler_trace),
            ("hip_runtime_trace", self.hip_runtime_trace),
            ("hsa_core_trace", self.hsa_core_trace),
            ("hsa_amd_trace", self.hsa_amd_trace),
            ("hsa_image_trace", self.hsa_image_trace),
            ("hsa_finalizer_trace", self.hsa_finalizer_trace),
            ("marker_trace", self.marker_trace),
            ("rccl_trace", self.rccl_trace),
            ("ompt_trace", ompt),
            ("rocdecode_trace", self.rocdecode_trace),
            ("rocjpeg_trace", self.rocjpeg_trace),
            ("rocshmem_trace", self.rocshmem_trace),
            ("hipfile_trace", self.hipfile_trace),
            ("kernel_trace", self.kernel_trace),
            ("hip_graph_trace", self.hip_graph_trace),
            ("memory_copy_trace", self.memory_copy_trace),
            ("memory_allocation_trace", self.memory_allocation_trace),
            ("kfd_page_migration_trace", self.kfd_page_migration_trace),
            ("kfd_page_mapping_trace", self.kfd_page_mapping_trace),
            ("kfd_queue_trace", self.kfd_queue_trace),
            ("kfd_dropped_events_trace", self.kfd_dropped_events_trace),
            ("scratch_memory_trace", self.scratch_memory_trace),
            ("hip_event_trace", self.hip_event_trace),
            ("group_by_queue", self.group_by_queue),
            ("kernel_rename", self.kernel_rename),
        ]);
        if self.kokkos_trace == Some(true) {
            sw.set_if_none("marker_trace");
            sw.set_if_none("kernel_rename");
            warnings.push(
                "--kokkos-trace: the Kokkos Tools library cannot be added to a running process (KOKKOS_TOOLS_LIBS is read at start-up); only --marker-trace and --kernel-rename are applied".to_string(),
            );
        }
        if sw.on("sys_trace") {
            SYS_TRACE_IMPLIES.iter().for_each(|n| sw.set_if_none(n));
        }
        if sw.on("runtime_trace") {
            RUNTIME_TRACE_IMPLIES.iter().for_each(|n| sw.set_if_none(n));
        }
        if sw.on("hip_trace") {
            sw.set_if_none("hip_compiler_trace");
            sw.set_if_none("hip_runtime_trace");
        }
        if sw.on("hip_runtime_trace") {
            sw.set_if_none("hip_graph_trace");
            sw.set_if_none("hip_event_trace");
        }
        if sw.on("hsa_trace") {
            for n in [
                "hsa_core_trace",
                "hsa_amd_trace",
                "hsa_image_trace",
                "hsa_finalizer_trace",
            ] {
                sw.set_if_none(n);
            }
        }
        if sw.on("kfd_trace") {
            for n in [
                "kfd_page_migration_trace",
                "kfd_page_mapping_trace",
                "kfd_queue_trace",
                "kfd_dropped_events_trace",
            ] {
                sw.set_if_none(n);
            }
        }
        // Written only when true: a ROCPROF_*_TRACE=1 the user exported is never cleared.
        for (opt, var) in TRACE_VARS {
            if sw.on(opt) {
                env.set(&format!("ROCPROF_{var}"), "1");
            }
        }
        if !ompt_ops.is_empty() {
            env.set("ROCPROF_OMPT_TRACE_OPERATIONS", &ompt_ops);
        }

        // ---------------------------------------------------------------- summary, naming
        let summary = self.summary == Some(true);
        let summary_output = match &self.summary_output_file {
            None if summary => Some("stderr".to_string()),
            Some(f)
                if summary && matches!(f.to_ascii_lowercase().as_str(), "stdout" | "stderr") =>
            {
                Some(f.to_ascii_lowercase())
            }
            other => other.clone(),
        };
        if self.stats == Some(true) {
            env.set("ROCPROF_STATS", "1");
        }
        if summary {
            env.set("ROCPROF_STATS_SUMMARY", "1");
        }
        if let Some(u) = &self.summary_units {
            env.set("ROCPROF_STATS_SUMMARY_UNITS", &u.to_ascii_lowercase());
        }
        if let Some(o) = &summary_output {
            env.set("ROCPROF_STATS_SUMMARY_OUTPUT", o);
        }
        if !self.summary_groups.is_empty() {
            env.set(
                "ROCPROF_STATS_SUMMARY_GROUPS",
                &self.summary_groups.join("##@@##"),
            );
        }
        if self.summary_per_domain == Some(true) {
            env.set("ROCPROF_STATS_SUMMARY_PER_DOMAIN", "1");
        }
        if self.mangled_kernels == Some(true) {
            env.set("ROCPROF_DEMANGLE_KERNELS", "0");
        }
        if self.truncate_kernels == Some(true) {
            env.set("ROCPROF_TRUNCATE_KERNELS", "1");
        }
        if self.selected_regions == Some(true) {
            env.set("ROCPROF_SELECTED_REGIONS", "1");
        }
        if self.selected_regions_ref_count == Some(true) {
            env.set("ROCPROF_SELECTED_REGIONS_REF_COUNT", "1");
        }

        if let Some(level) = &self.log_level {
            let level = level.to_ascii_lowercase();
            if level != "env" && level != "config" {
                for p in ["ROCPROF", "ROCPROFILER", "ROCTX"] {
                    env.set(&format!("{p}_LOG_LEVEL"), &level);
                }
            }
        }

        if let Some(mode) = &self.benchmark_mode {
            let mode = mode.to_ascii_lowercase();
            if mode == "execution-profile" {
                match self.group_by_queue {
                    None => env.set("ROCPROF_GROUP_BY_QUEUE", "0"),
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
        if sw.on("kernel_rename") {
            env.set("ROCPROF_KERNEL_RENAME", "1");
        }

        // ---------------------------------------------------------------- perfetto
        if let Some(kb) = self.perfetto_buffer_size {
            env.set("ROCPROF_PERFETTO_BUFFER_SIZE_KB", &kb.to_string());
        }
        if let Some(kb) = self.perfetto_shmem_size_hint {
            env.set("ROCPROF_PERFETTO_SHMEM_SIZE_HINT_KB", &kb.to_string());
        }
        if let Some(p) = &self.perfetto_buffer_fill_policy {
            env.set(
                "ROCPROF_PERFETTO_BUFFER_FILL_POLICY",
                &p.to_ascii_lowercase(),
            );
        }
        if let Some(b) = &self.perfetto_backend {
            env.set("ROCPROF_PERFETTO_BACKEND", &b.to_ascii_lowercase());
        }

        // ---------------------------------------------------------------- filters
        if let Some(r) = self
            .kernel_include_regex
            .as_deref()
            .filter(|r| !r.is_empty())
        {
            env.set("ROCPROF_KERNEL_FILTER_INCLUDE_REGEX", r);
        }
        if let Some(r) = self
            .kernel_exclude_regex
            .as_deref()
            .filter(|r| !r.is_empty())
        {
            env.set("ROCPROF_KERNEL_FILTER_EXCLUDE_REGEX", r);
        }
        if !self.kernel_iteration_range.is_empty() {
            env.set(
                "ROCPROF_KERNEL_FILTER_RANGE",
                &self.kernel_iteration_range.join(", "),
            );
        }
        if let Some(a) = &self.agent_index {
            env.set("ROCPROF_AGENT_INDEX", a);
        }
        if let Some(path) = &self.extra_counters {
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

        // ---------------------------------------------------------------- counters
        self.apply_counters(env)?;
        self.apply_pc_sampling(env)?;
        self.apply_spm(env)?;

        if let Some(v) = self.disable_signal_handlers {
            env.set("ROCPROF_SIGNAL_HANDLERS", b01(!v));
        }
        if let Some(v) = self.process_sync {
            env.set("ROCPROF_PROCESS_SYNC", b01(v));
        }
        if let Some(kb) = self.minimum_output_data.filter(|kb| *kb != 0) {
            let bytes = kb.checked_mul(1024).ok_or_else(|| {
                Error::usage(format!(
                    "--minimum-output-data {kb} KB is too large: give a size in KB below 2^54"
                ))
            })?;
            env.set("ROCPROF_MINIMUM_OUTPUT_BYTES", &bytes.to_string());
        }

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
}
