//! Every `ROCPROF_*` variable the options cover, with the value that means "not asked for".
//!
//! The register `setenv`s each pair it receives into the target and keeps it after a successful
//! attach (docs/protocol.md section 3.1, step 5), and the tool builds its configuration from the target's whole
//! environment at every attach (docs/protocol.md section 8.2). A variable one session sent therefore applies to
//! every later session unless that session sends it again. [`fill_unset`] makes each session
//! stand alone: after the options are applied, every covered variable that is still absent gets
//! its "off" value, so the target sees exactly what this session asked for.
//!
//! The values follow how rocprofv3's tool reads each variable (`common::get_env` and the tool's
//! `config`/`output_config`):
//!
//! * booleans are sent as `0` (or `1` where the tool's default is true): an empty boolean is fatal
//!   in the tool ("No boolean value provided");
//! * strings the tool tests with `.empty()` (counter lists, the iteration range, the collection
//!   period, the benchmark mode) or whose default is empty (exclude regex, extra counters, ATT
//!   library path and GPU index, OMPT operations) are sent empty: for them empty means unset;
//! * strings the tool looks up in a table (PC sampling method and unit, SPM interval unit, ATT
//!   resource mode), numbers (an empty number is a conversion error) and names with a non-empty
//!   default (output file name, summary unit and output, Perfetto settings, agent indexing, the
//!   include regex) are sent as the tool's default.
//!
//! A variable already in the list (set by an option, or exported by the user in our environment)
//! is left as it is.

use crate::envbuf::EnvList;

/// `(variable, value sent when no option and no exported variable sets it)`.
pub const DEFAULTS: &[(&str, &str)] = &[
    // Trace switches (booleans, default false).
    ("ROCPROF_HIP_COMPILER_API_TRACE", "0"),
    ("ROCPROF_HIP_RUNTIME_API_TRACE", "0"),
    ("ROCPROF_HSA_CORE_API_TRACE", "0"),
    ("ROCPROF_HSA_AMD_EXT_API_TRACE", "0"),
    ("ROCPROF_HSA_IMAGE_EXT_API_TRACE", "0"),
    ("ROCPROF_HSA_FINALIZER_EXT_API_TRACE", "0"),
    ("ROCPROF_MARKER_API_TRACE", "0"),
    ("ROCPROF_RCCL_API_TRACE", "0"),
    ("ROCPROF_OMPT_TRACE", "0"),
    ("ROCPROF_ROCDECODE_API_TRACE", "0"),
    ("ROCPROF_ROCJPEG_API_TRACE", "0"),
    ("ROCPROF_ROCSHMEM_API_TRACE", "0"),
    ("ROCPROF_HIPFILE_API_TRACE", "0"),
    ("ROCPROF_KERNEL_TRACE", "0"),
    ("ROCPROF_HIP_GRAPH_TRACE", "0"),
    ("ROCPROF_MEMORY_COPY_TRACE", "0"),
    ("ROCPROF_MEMORY_ALLOCATION_TRACE", "0"),
    ("ROCPROF_KFD_PAGE_MIGRATION_TRACE", "0"),
    ("ROCPROF_KFD_PAGE_MAPPING_TRACE", "0"),
    ("ROCPROF_KFD_QUEUE_TRACE", "0"),
    ("ROCPROF_KFD_DROPPED_EVENTS_TRACE", "0"),
    ("ROCPROF_SCRATCH_MEMORY_TRACE", "0"),
    ("ROCPROF_HIP_EVENT_TRACE", "0"),
    ("ROCPROF_GROUP_BY_QUEUE", "0"),
    ("ROCPROF_OMPT_TRACE_OPERATIONS", ""),
    // Output.
    ("ROCPROF_OUTPUT_FILE_NAME", super::DEFAULT_OUTPUT_FILE),
    ("ROCPROF_OUTPUT_CONFIG_FILE", "0"),
    ("ROCPROF_KERNEL_RENAME", "0"),
    ("ROCPROF_DEMANGLE_KERNELS", "1"),
    ("ROCPROF_TRUNCATE_KERNELS", "0"),
    ("ROCPROF_AGENT_INDEX", "relative"),
    ("ROCPROF_MINIMUM_OUTPUT_BYTES", "0"),
    ("ROCPROF_PERFETTO_BUFFER_SIZE_KB", "1048576"),
    ("ROCPROF_PERFETTO_SHMEM_SIZE_HINT_KB", "64"),
    ("ROCPROF_PERFETTO_BUFFER_FILL_POLICY", "discard"),
    ("ROCPROF_PERFETTO_BACKEND", "inprocess"),
    // Summary.
    ("ROCPROF_STATS", "0"),
    ("ROCPROF_STATS_SUMMARY", "0"),
    ("ROCPROF_STATS_SUMMARY_PER_DOMAIN", "0"),
    ("ROCPROF_STATS_SUMMARY_UNITS", "nsec"),
    ("ROCPROF_STATS_SUMMARY_OUTPUT", "stderr"),
    ("ROCPROF_STATS_SUMMARY_GROUPS", ""),
    // Filters.
    ("ROCPROF_KERNEL_FILTER_INCLUDE_REGEX", ".*"),
    ("ROCPROF_KERNEL_FILTER_EXCLUDE_REGEX", ""),
    ("ROCPROF_KERNEL_FILTER_RANGE", ""),
    ("ROCPROF_COLLECTION_PERIOD", ""),
    ("ROCPROF_SELECTED_REGIONS", "0"),
    ("ROCPROF_SELECTED_REGIONS_REF_COUNT", "0"),
    ("ROCPROF_MPI_RANK_VAR", ""),
    ("ROCPROF_MPI_SIZE_VAR", ""),
    // Counters.
    ("ROCPROF_COUNTER_COLLECTION", "0"),
    ("ROCPROF_COUNTERS", ""),
    ("ROCPROF_COUNTER_GROUPS", ""),
    ("ROCPROF_KERNEL_REPLAY", "0"),
    ("ROCPROF_EXTRA_COUNTERS_CONTENTS", ""),
    ("ROCPROF_SPM_COUNTER_COLLECTION", "0"),
    ("ROCPROF_SPM_COUNTERS", ""),
    ("ROCPROF_SPM_SAMPLE_INTERVAL", "0"),
    ("ROCPROF_SPM_SAMPLE_INTERVAL_UNIT", "none"),
    // PC sampling.
    ("ROCPROF_PC_SAMPLING_METHOD", "none"),
    ("ROCPROF_PC_SAMPLING_UNIT", "none"),
    ("ROCPROF_PC_SAMPLING_INTERVAL", "1"),
    // Thread trace.
    ("ROCPROF_ADVANCED_THREAD_TRACE", "0"),
    ("ROCPROF_ATT_NO_INTERCEPT", "0"),
    ("ROCPROF_ATT_PARAM_RESOURCE_MODE", "code-object"),
    ("ROCPROF_ATT_PARAM_TARGET_CU", "1"),
    ("ROCPROF_ATT_PARAM_SHADER_ENGINE_MASK", "1"),
    ("ROCPROF_ATT_PARAM_BUFFER_SIZE", "402653184"),
    ("ROCPROF_ATT_PARAM_SIMD_SELECT", "15"),
    ("ROCPROF_ATT_PARAM_SERIALIZE_ALL", "0"),
    ("ROCPROF_ATT_PARAM_NO_DETAIL", "0"),
    ("ROCPROF_ATT_PARAM_GPU_INDEX", ""),
    ("ROCPROF_ATT_PARAM_PERFCOUNTERS", ""),
    ("ROCPROF_ATT_PARAM_PERFCOUNTER_CTRL", "0"),
    ("ROCPROF_ATT_PARAM_TARGET_ONLY", "0"),
    ("ROCPROF_ATT_CONSECUTIVE_KERNELS", "0"),
    ("ROCPROF_ATT_LIBRARY_PATH", ""),
    // Tool internals.
    ("ROCPROF_SIGNAL_HANDLERS", "1"),
    ("ROCPROF_PROCESS_SYNC", "0"),
    ("ROCPROF_BENCHMARK_MODE", ""),
];

/// Give every covered variable that `env` does not set its "not asked for" value (see the module
/// documentation), so nothing an earlier session sent to the target applies to this one.
pub fn fill_unset(env: &mut EnvList) {
    env.set_absent(DEFAULTS);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_only_what_is_absent() {
        let mut env = EnvList::from_pairs([("ROCPROF_KERNEL_TRACE", "1"), ("HOME", "/root")]);
        fill_unset(&mut env);
        assert_eq!(env.get("ROCPROF_KERNEL_TRACE"), Some("1"));
        assert_eq!(env.get("ROCPROF_HIP_RUNTIME_API_TRACE"), Some("0"));
        assert_eq!(
            env.get("ROCPROF_OUTPUT_FILE_NAME"),
            Some("%hostname%/%pid%")
        );
        assert_eq!(env.get("ROCPROF_PC_SAMPLING_METHOD"), Some("none"));
        assert_eq!(env.get("ROCPROF_COUNTERS"), Some(""));
    }

    #[test]
    fn no_boolean_is_empty_and_names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for (name, value) in DEFAULTS {
            assert!(seen.insert(*name), "{name} twice");
            assert!(name.starts_with("ROCPROF_"), "{name}");
            if name.ends_with("_TRACE") || *value == "0" || *value == "1" {
                assert!(
                    !value.is_empty(),
                    "{name}: an empty boolean is fatal in the tool"
                );
            }
        }
        // Every trace switch the options write has its off value.
        for s in super::super::Switch::ALL {
            if let super::super::switches::Effect::Trace(name) = s.def().effect {
                assert!(seen.contains(name), "{name} has no default");
            }
        }
    }
}
