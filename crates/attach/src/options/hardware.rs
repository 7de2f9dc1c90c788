//! Counter collection, PC sampling, SPM and thread trace options, and the refusals of options
//! rocprofv3 does not support when attaching.

use super::*;

impl ProfilerOptions {
    /// Refusals that depend only on the options: things rocprofv3 itself refuses in attach mode.
    pub(super) fn refuse_attach_incompatible(&self) -> Result<()> {
        if !self.collection_period.is_empty() {
            return Err(Error::usage(
                "--collection-period is not compatible with attach mode: remove -P/--collection-period and bound the profiling window with --attach-duration-msec",
            ));
        }
        let kernel_replay = self
            .replay_mode
            .as_deref()
            .is_some_and(|m| m.eq_ignore_ascii_case("kernel"));
        if let Some(idx) = self.pmc.iter().position(|g| g.is_empty()) {
            return Err(Error::usage(if self.pmc.len() > 1 {
                format!("empty counter group in --pmc flag {}: each --pmc needs at least one counter name", idx + 1)
            } else {
                "--pmc needs at least one counter name, e.g. --pmc SQ_WAVES GRBM_COUNT".to_string()
            }));
        }
        if self.pmc.len() > 1 && !kernel_replay {
            return Err(Error::usage(
                "multi-pass counter collection (multiple --pmc flags) is not compatible with attach mode: it needs the application to rerun its kernels from the start; pass a single --pmc group (or --replay-mode kernel --kernel-replay-beta-enabled)",
            ));
        }
        if self.selected_regions == Some(true)
            && self
                .att_consecutive_kernels
                .as_deref()
                .is_some_and(|s| !s.is_empty())
        {
            return Err(Error::usage(
                "--selected-regions and --att-consecutive-kernels are mutually exclusive: drop one of them",
            ));
        }
        Ok(())
    }

    pub(super) fn apply_counters(&self, env: &mut EnvList) -> Result<()> {
        let kernel_replay = self
            .replay_mode
            .as_deref()
            .is_some_and(|m| m.eq_ignore_ascii_case("kernel"));
        if kernel_replay {
            if self.kernel_replay_beta_enabled != Some(true) {
                return Err(Error::usage(
                    "--replay-mode kernel is a beta feature: add --kernel-replay-beta-enabled to acknowledge it",
                ));
            }
            if self.pmc.is_empty() {
                return Err(Error::usage(
                    "--replay-mode kernel requires counter collection: add --pmc COUNTER ...",
                ));
            }
            let mut conflicts = Vec::new();
            if self.advanced_thread_trace == Some(true) || self.att_no_intercept == Some(true) {
                conflicts.push("--att");
            }
            if self.pc_sampling_beta_enabled == Some(true)
                || env.contains("ROCPROFILER_PC_SAMPLING_BETA_ENABLED")
            {
                conflicts.push("PC sampling");
            }
            if self.spm.as_ref().is_some_and(|s| !s.is_empty()) {
                conflicts.push("--spm");
            }
            if !conflicts.is_empty() {
                return Err(Error::usage(format!(
                    "--replay-mode kernel cannot be combined with {}: every other service would report each kernel once per pass; collect them in a separate session",
                    conflicts.join(" or ")
                )));
            }
            env.set("ROCPROF_KERNEL_REPLAY", "1");
            env.set("ROCPROF_COUNTER_COLLECTION", "1");
            let groups: Vec<String> = self
                .pmc
                .iter()
                .map(|g| format!("pmc: {}", g.join(" ")))
                .collect();
            env.set("ROCPROF_COUNTER_GROUPS", &groups.join("\n"));
        } else if let Some(group) = self.pmc.first() {
            env.set("ROCPROF_COUNTER_COLLECTION", "1");
            env.set("ROCPROF_COUNTERS", &format!("pmc: {}", group.join(" ")));
        }
        Ok(())
    }

    pub(super) fn apply_pc_sampling(&self, env: &mut EnvList) -> Result<()> {
        let interval = self.pc_sampling_interval.filter(|i| *i != 0);
        if self.pc_sampling_unit.is_none()
            && self.pc_sampling_method.is_none()
            && interval.is_none()
        {
            return Ok(());
        }
        let beta = self.pc_sampling_beta_enabled == Some(true);
        if !beta && !env.contains("ROCPROFILER_PC_SAMPLING_BETA_ENABLED") {
            return Err(Error::usage(
                "PC sampling is a beta feature and disabled: add --pc-sampling-beta-enabled (or set ROCPROFILER_PC_SAMPLING_BETA_ENABLED=ON)",
            ));
        }
        if beta {
            env.set("ROCPROFILER_PC_SAMPLING_BETA_ENABLED", "1");
        }
        let (Some(unit), Some(method), Some(interval)) =
            (&self.pc_sampling_unit, &self.pc_sampling_method, interval)
        else {
            return Err(Error::usage(
                "PC sampling needs all three of --pc-sampling-unit, --pc-sampling-method and --pc-sampling-interval",
            ));
        };
        if interval <= 0 {
            return Err(Error::usage(
                "--pc-sampling-interval must be a positive number",
            ));
        }
        env.set("ROCPROF_PC_SAMPLING_UNIT", &unit.to_ascii_lowercase());
        env.set("ROCPROF_PC_SAMPLING_METHOD", &method.to_ascii_lowercase());
        env.set("ROCPROF_PC_SAMPLING_INTERVAL", &interval.to_string());
        Ok(())
    }

    pub(super) fn apply_spm(&self, env: &mut EnvList) -> Result<()> {
        let counters = self.spm.as_ref().filter(|s| !s.is_empty());
        let interval = self.spm_sample_interval.filter(|i| *i != 0);
        if counters.is_none() && interval.is_none() && self.spm_sample_interval_unit.is_none() {
            return Ok(());
        }
        if self.spm_beta_enabled != Some(true) && !env.contains("ROCPROFILER_SPM_BETA_ENABLED") {
            return Err(Error::usage(
                "SPM is a beta feature and disabled: add --spm-beta-enabled",
            ));
        }
        if !self.pmc.is_empty()
            || self.pc_sampling_beta_enabled == Some(true)
            || env.contains("ROCPROFILER_PC_SAMPLING_BETA_ENABLED")
        {
            return Err(Error::usage(
                "SPM cannot be enabled together with PC sampling or --pmc counter collection: drop one of them",
            ));
        }
        let Some(counters) = counters else {
            return Err(Error::usage(
                "SPM needs the counters to sample: add --spm COUNTER ...",
            ));
        };
        env.set("ROCPROFILER_SPM_BETA_ENABLED", "1");
        env.set("ROCPROF_SPM_COUNTER_COLLECTION", "1");
        env.set(
            "ROCPROF_SPM_COUNTERS",
            &format!("spm: {}", counters.join(" ")),
        );
        if let Some(i) = interval {
            env.set("ROCPROF_SPM_SAMPLE_INTERVAL", &i.to_string());
        }
        if let Some(u) = &self.spm_sample_interval_unit {
            env.set("ROCPROF_SPM_SAMPLE_INTERVAL_UNIT", &u.to_ascii_lowercase());
        }
        Ok(())
    }

    pub(super) fn apply_att(&self, env: &mut EnvList, warnings: &mut Vec<String>) -> Result<()> {
        let att = self.advanced_thread_trace == Some(true) || self.att_no_intercept == Some(true);
        let nonempty = |o: &Option<String>| o.as_deref().is_some_and(|s| !s.is_empty());
        if self.selected_regions == Some(true) && self.att_no_intercept == Some(true) {
            warnings.push(
                "--selected-regions does not control --att-no-intercept captures; ATT no-intercept quick-scans after each GPU's first code-object upload".to_string(),
            );
        }
        if !att {
            let any_att = nonempty(&self.att_target_cu)
                || nonempty(&self.att_simd_select)
                || nonempty(&self.att_consecutive_kernels)
                || nonempty(&self.att_buffer_size)
                || self.att_resource_mode.is_some()
                || nonempty(&self.att_shader_engine_mask)
                || nonempty(&self.att_gpu_index)
                || nonempty(&self.att_perfcounters)
                || self.att_perfcounter_ctrl.is_some()
                || self.att_activity.is_some()
                || self.att_serialize_all.is_some()
                || self.att_no_detail.is_some()
                || self.att_perfcounter_target_only.is_some()
                || !self.att_library_path.is_empty();
            if any_att {
                warnings.push(
                    "--att-* options have no effect without --att (advanced thread trace)"
                        .to_string(),
                );
            }
            return Ok(());
        }
        env.set("ROCPROF_ADVANCED_THREAD_TRACE", "1");
        if let Some(v) = self.att_no_intercept {
            env.set("ROCPROF_ATT_NO_INTERCEPT", b01(v));
        }
        if let Some(m) = &self.att_resource_mode {
            env.set("ROCPROF_ATT_PARAM_RESOURCE_MODE", &m.to_ascii_lowercase());
        }
        if let Some(cu) = &self.att_target_cu {
            env.set(
                "ROCPROF_ATT_PARAM_TARGET_CU",
                &int_auto("--att-target-cu", cu)?,
            );
        }
        for (opt, value, var) in [
            (
                "--att-shader-engine-mask",
                &self.att_shader_engine_mask,
                "ROCPROF_ATT_PARAM_SHADER_ENGINE_MASK",
            ),
            (
                "--att-buffer-size",
                &self.att_buffer_size,
                "ROCPROF_ATT_PARAM_BUFFER_SIZE",
            ),
            (
                "--att-simd-select",
                &self.att_simd_select,
                "ROCPROF_ATT_PARAM_SIMD_SELECT",
            ),
            (
                "--att-consecutive-kernels",
                &self.att_consecutive_kernels,
                "ROCPROF_ATT_CONSECUTIVE_KERNELS",
            ),
        ] {
            if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
                env.set(var, &int_auto(opt, v)?);
            }
        }
        if self.att_serialize_all == Some(true) {
            env.set("ROCPROF_ATT_PARAM_SERIALIZE_ALL", "1");
        }
        if self.att_no_detail == Some(true) {
            env.set("ROCPROF_ATT_PARAM_NO_DETAIL", "1");
        }
        if let Some(g) = self.att_gpu_index.as_deref().filter(|g| !g.is_empty()) {
            env.set("ROCPROF_ATT_PARAM_GPU_INDEX", g);
        }
        if !self.att_library_path.is_empty() {
            env.set("ROCPROF_ATT_LIBRARY_PATH", &self.att_library_path.join(":"));
        } else if env
            .get("ROCPROF_ATT_LIBRARY_PATH")
            .is_some_and(|p| !p.is_empty())
        {
            // Already exported by the user: it travels as is.
        } else if let Some(dir) = find_att_decoder(env) {
            env.set("ROCPROF_ATT_LIBRARY_PATH", &dir);
        } else if self.att_no_intercept != Some(true) {
            warnings.push(
                "librocprof-trace-decoder.so was not found in LD_LIBRARY_PATH or /opt/rocm/lib; pass --att-library-path DIR (a directory as seen by the target) if thread trace decoding fails".to_string(),
            );
        }
        let has_pmc = !self.pmc.is_empty();
        if let Some(pc) = self.att_perfcounters.as_deref().filter(|s| !s.is_empty()) {
            if has_pmc {
                return Err(Error::usage(
                    "--att-perfcounters cannot be combined with --pmc: drop one of them",
                ));
            }
            env.set("ROCPROF_ATT_PARAM_PERFCOUNTERS", &pc.to_ascii_uppercase());
        }
        if let Some(ctrl) = self.att_perfcounter_ctrl.filter(|c| *c != 0) {
            if has_pmc {
                return Err(Error::usage(
                    "--att-perfcounter-ctrl cannot be combined with --pmc: drop one of them",
                ));
            }
            env.set("ROCPROF_ATT_PARAM_PERFCOUNTER_CTRL", &ctrl.to_string());
        }
        if self.att_perfcounter_target_only == Some(true) {
            env.set("ROCPROF_ATT_PARAM_TARGET_ONLY", "1");
        }
        if let Some(act) = self.att_activity.filter(|a| *a != 0) {
            if has_pmc {
                return Err(Error::usage(
                    "--att-activity cannot be combined with --pmc: drop one of them",
                ));
            }
            if self
                .att_perfcounters
                .as_deref()
                .is_some_and(|s| !s.is_empty())
                || self.att_perfcounter_ctrl.is_some_and(|c| c != 0)
            {
                return Err(Error::usage(
                    "--att-activity cannot be combined with --att-perfcounters or --att-perfcounter-ctrl: drop one of them",
                ));
            }
            env.set("ROCPROF_ATT_PARAM_PERFCOUNTER_CTRL", &act.to_string());
            env.set("ROCPROF_ATT_PARAM_PERFCOUNTERS", ATT_ACTIVITY_COUNTERS);
        }
        Ok(())
    }
}
