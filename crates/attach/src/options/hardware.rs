//! Counter collection, PC sampling, SPM and thread trace options, and the refusals of options
//! rocprofv3 does not support when attaching.

use super::switches::Switch;
use super::*;

/// The CUDA tool's setting of `--replay-mode iteration` (the tool's `metrics::ITERATION_REPLAY`).
pub const ITERATION_REPLAY: &str = "ROCPROF_ATTACH_ITERATION_REPLAY";

/// The variable naming the thread trace decoder's directories (exported values are kept).
const ATT_LIBRARY_PATH: &str = "ROCPROF_ATT_LIBRARY_PATH";

impl ProfilerOptions {
    /// Refusals that depend only on the options: things rocprofv3 itself refuses in attach mode.
    pub(super) fn refuse_attach_incompatible(&self) -> Result<()> {
        if !self.values.collection_period.is_empty() {
            return Err(Error::usage(
                "--collection-period is not compatible with attach mode: remove -P/--collection-period and bound the profiling window with --attach-duration-msec",
            ));
        }
        let kernel_replay = self
            .values
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
        if self.pmc.len() > 1 && !kernel_replay && !self.iteration_replay() {
            return Err(Error::usage(
                "multi-pass counter collection (multiple --pmc flags) is not compatible with attach mode: it needs the application to rerun its kernels from the start; pass a single --pmc group (or --replay-mode kernel --kernel-replay-beta-enabled; on a CUDA process, --replay-mode iteration)",
            ));
        }
        if self.switches.on(Switch::SelectedRegions)
            && self
                .values
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

    /// `--replay-mode iteration` (iteration multiplexing, CUDA processes).
    fn iteration_replay(&self) -> bool {
        self.values
            .replay_mode
            .as_deref()
            .is_some_and(|m| m.eq_ignore_ascii_case("iteration"))
    }

    pub(super) fn apply_counters(&self, env: &mut EnvList) -> Result<()> {
        if self.iteration_replay() {
            if self.pmc.is_empty() {
                return Err(Error::usage(
                    "--replay-mode iteration requires counter collection: add --pmc COUNTER ...",
                ));
            }
            // The CUDA tool reads the groups; a ROCm process is refused at attach.
            env.set(ITERATION_REPLAY, "1");
            env.set("ROCPROF_COUNTER_COLLECTION", "1");
            let groups: Vec<String> = self
                .pmc
                .iter()
                .map(|g| format!("pmc: {}", g.join(" ")))
                .collect();
            env.set("ROCPROF_COUNTER_GROUPS", &groups.join("\n"));
            return Ok(());
        }
        let kernel_replay = self
            .values
            .replay_mode
            .as_deref()
            .is_some_and(|m| m.eq_ignore_ascii_case("kernel"));
        if kernel_replay {
            if self.switches.get(Switch::KernelReplayBetaEnabled) != Some(true) {
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
            if self.switches.on(Switch::AdvancedThreadTrace)
                || self.switches.on(Switch::AttNoIntercept)
            {
                conflicts.push("--att");
            }
            if self.switches.on(Switch::PcSamplingBetaEnabled)
                || env.contains(Switch::PcSamplingBetaEnabled.var())
            {
                conflicts.push("PC sampling");
            }
            if self.values.spm.as_ref().is_some_and(|s| !s.is_empty()) {
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
        let interval = self.values.pc_sampling_interval.filter(|i| *i != 0);
        if self.values.pc_sampling_unit.is_none()
            && self.values.pc_sampling_method.is_none()
            && interval.is_none()
        {
            return Ok(());
        }
        let beta = self.switches.on(Switch::PcSamplingBetaEnabled);
        if !beta && !env.contains(Switch::PcSamplingBetaEnabled.var()) {
            return Err(Error::usage(
                "PC sampling is a beta feature and disabled: add --pc-sampling-beta-enabled (or set ROCPROFILER_PC_SAMPLING_BETA_ENABLED=ON)",
            ));
        }
        if beta {
            env.set(Switch::PcSamplingBetaEnabled.var(), "1");
        }
        let (Some(unit), Some(method), Some(interval)) = (
            &self.values.pc_sampling_unit,
            &self.values.pc_sampling_method,
            interval,
        ) else {
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
        // A bare --spm asks for the default set (CUDA's tool has one; rocprofiler-sdk wants names).
        let counters = self.values.spm.as_ref();
        let interval = self.values.spm_sample_interval.filter(|i| *i != 0);
        if counters.is_none()
            && interval.is_none()
            && self.values.spm_sample_interval_unit.is_none()
        {
            return Ok(());
        }
        if self.switches.get(Switch::SpmBetaEnabled) != Some(true)
            && !env.contains(Switch::SpmBetaEnabled.var())
        {
            return Err(Error::usage(
                "SPM is a beta feature and disabled: add --spm-beta-enabled",
            ));
        }
        if !self.pmc.is_empty()
            || self.switches.on(Switch::PcSamplingBetaEnabled)
            || env.contains(Switch::PcSamplingBetaEnabled.var())
        {
            return Err(Error::usage(
                "SPM cannot be enabled together with PC sampling or --pmc counter collection: drop one of them",
            ));
        }
        let Some(counters) = counters else {
            return Err(Error::usage(
                "--spm-sample-interval needs --spm: add --spm (CUDA: the default set) or --spm COUNTER ...",
            ));
        };
        env.set(Switch::SpmBetaEnabled.var(), "1");
        env.set("ROCPROF_SPM_COUNTER_COLLECTION", "1");
        if !counters.is_empty() {
            env.set(
                "ROCPROF_SPM_COUNTERS",
                &format!("spm: {}", counters.join(" ")),
            );
        }
        if let Some(i) = interval {
            env.set("ROCPROF_SPM_SAMPLE_INTERVAL", &i.to_string());
        }
        if let Some(u) = &self.values.spm_sample_interval_unit {
            env.set("ROCPROF_SPM_SAMPLE_INTERVAL_UNIT", &u.to_ascii_lowercase());
        }
        Ok(())
    }

    /// Advanced thread trace (`--att`, `--att-no-intercept` and the `--att-*` parameters).
    pub(super) fn apply_att(&self, env: &mut EnvList, warnings: &mut Vec<String>) -> Result<()> {
        let sw = &self.switches;
        let att = sw.on(Switch::AdvancedThreadTrace) || sw.on(Switch::AttNoIntercept);
        if sw.on(Switch::SelectedRegions) && sw.on(Switch::AttNoIntercept) {
            warnings.push(
                "--selected-regions does not control --att-no-intercept captures; ATT no-intercept quick-scans after each GPU's first code-object upload".to_string(),
            );
        }
        if !att {
            if self.any_att_parameter() {
                warnings.push(
                    "--att-* options have no effect without --att (advanced thread trace)"
                        .to_string(),
                );
            }
            return Ok(());
        }
        env.set(Switch::AdvancedThreadTrace.var(), "1");
        Self::put(env, sw, Switch::AttNoIntercept);
        self.apply_att_params(env)?;
        self.apply_att_library_path(env, warnings);
        self.apply_att_counters(env)
    }

    /// Whether an `--att-*` parameter (other than `--att-no-intercept`) was given.
    fn any_att_parameter(&self) -> bool {
        let v = &self.values;
        let nonempty = |o: &Option<String>| o.as_deref().is_some_and(|s| !s.is_empty());
        [
            &v.att_target_cu,
            &v.att_simd_select,
            &v.att_consecutive_kernels,
            &v.att_buffer_size,
            &v.att_shader_engine_mask,
            &v.att_gpu_index,
            &v.att_perfcounters,
        ]
        .into_iter()
        .any(nonempty)
            || v.att_resource_mode.is_some()
            || v.att_perfcounter_ctrl.is_some()
            || v.att_activity.is_some()
            || !v.att_library_path.is_empty()
            || self.switches.any_given(
                Switch::ALL
                    .into_iter()
                    .filter(|s| *s != Switch::AttNoIntercept)
                    .filter(|s| s.def().needs == Some(Switch::AdvancedThreadTrace)),
            )
    }

    /// The thread trace parameters: resource mode, numbers (`0x` hex or decimal), switches and
    /// GPU indices.
    fn apply_att_params(&self, env: &mut EnvList) -> Result<()> {
        let v = &self.values;
        if let Some(m) = &v.att_resource_mode {
            env.set("ROCPROF_ATT_PARAM_RESOURCE_MODE", &m.to_ascii_lowercase());
        }
        if let Some(cu) = &v.att_target_cu {
            env.set(
                "ROCPROF_ATT_PARAM_TARGET_CU",
                &int_auto("--att-target-cu", cu)?,
            );
        }
        for (opt, value, var) in [
            (
                "--att-shader-engine-mask",
                &v.att_shader_engine_mask,
                "ROCPROF_ATT_PARAM_SHADER_ENGINE_MASK",
            ),
            (
                "--att-buffer-size",
                &v.att_buffer_size,
                "ROCPROF_ATT_PARAM_BUFFER_SIZE",
            ),
            (
                "--att-simd-select",
                &v.att_simd_select,
                "ROCPROF_ATT_PARAM_SIMD_SELECT",
            ),
            (
                "--att-consecutive-kernels",
                &v.att_consecutive_kernels,
                "ROCPROF_ATT_CONSECUTIVE_KERNELS",
            ),
        ] {
            if let Some(value) = value.as_deref().filter(|s| !s.is_empty()) {
                env.set(var, &int_auto(opt, value)?);
            }
        }
        Self::put(env, &self.switches, Switch::AttSerializeAll);
        Self::put(env, &self.switches, Switch::AttNoDetail);
        if let Some(g) = v.att_gpu_index.as_deref().filter(|g| !g.is_empty()) {
            env.set("ROCPROF_ATT_PARAM_GPU_INDEX", g);
        }
        Ok(())
    }

    /// Where the target finds the thread trace decoder: `--att-library-path`, else an exported
    /// `ROCPROF_ATT_LIBRARY_PATH`, else the directory we find it in.
    fn apply_att_library_path(&self, env: &mut EnvList, warnings: &mut Vec<String>) {
        let paths = &self.values.att_library_path;
        if !paths.is_empty() {
            env.set(ATT_LIBRARY_PATH, &paths.join(":"));
        } else if env.get(ATT_LIBRARY_PATH).is_some_and(|p| !p.is_empty()) {
            // Already exported by the user: it travels as is.
        } else if let Some(dir) = find_att_decoder(env) {
            env.set(ATT_LIBRARY_PATH, &dir);
        } else if !self.switches.on(Switch::AttNoIntercept) {
            warnings.push(
                "librocprof-trace-decoder.so was not found in LD_LIBRARY_PATH or /opt/rocm/lib; pass --att-library-path DIR (a directory as seen by the target) if thread trace decoding fails".to_string(),
            );
        }
    }

    /// The (gfx9) thread trace performance counters: `--att-perfcounters`,
    /// `--att-perfcounter-ctrl`, `--att-perfcounter-target-only` and `--att-activity`.
    fn apply_att_counters(&self, env: &mut EnvList) -> Result<()> {
        let v = &self.values;
        let refuse_with_pmc = |opt: &str| -> Result<()> {
            if self.pmc.is_empty() {
                Ok(())
            } else {
                Err(Error::usage(format!(
                    "{opt} cannot be combined with --pmc: drop one of them"
                )))
            }
        };
        let perfcounters = v.att_perfcounters.as_deref().filter(|s| !s.is_empty());
        if let Some(pc) = perfcounters {
            refuse_with_pmc("--att-perfcounters")?;
            env.set("ROCPROF_ATT_PARAM_PERFCOUNTERS", &pc.to_ascii_uppercase());
        }
        let ctrl = v.att_perfcounter_ctrl.filter(|c| *c != 0);
        if let Some(ctrl) = ctrl {
            refuse_with_pmc("--att-perfcounter-ctrl")?;
            env.set("ROCPROF_ATT_PARAM_PERFCOUNTER_CTRL", &ctrl.to_string());
        }
        Self::put(env, &self.switches, Switch::AttPerfcounterTargetOnly);
        if let Some(act) = v.att_activity.filter(|a| *a != 0) {
            refuse_with_pmc("--att-activity")?;
            if perfcounters.is_some() || ctrl.is_some() {
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
