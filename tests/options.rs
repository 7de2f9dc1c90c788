//! rocprofv3 option -> environment mapping (docs/protocol.md section 7.2), checked through the real
//! command-line parser without running a session.

use rocprof_attach::attach::envbuf::{decode, encode, EnvList};
use rocprof_attach::attach::options::defaults::DEFAULTS;
use rocprof_attach::attach::options::{Switch, Switches};
use rocprof_attach::attach::session::AttachRequest;
use rocprof_attach::attach::targets::TargetSelection;
use rocprof_attach::cli::Error;
use rocprof_attach::cli::{parse_request, Action};
use rocprof_attach::format::OutputFormat;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

const CWD: &str = "/work/here";

/// One refused command line: arguments, environment, a word the error must contain.
type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);

fn parse(args: &[&str], base: &[(&str, &str)]) -> Result<(AttachRequest, Vec<String>), Error> {
    let env = EnvList::from_pairs(base.iter().copied());
    let mut argv = vec!["rocprof-attach"];
    argv.extend_from_slice(args);
    let inv = parse_request(argv, &env, Path::new(CWD))?;
    match inv.action {
        Action::Attach(req) => Ok((*req, inv.warnings)),
        other => panic!("expected an attach request, got {other:?}"),
    }
}

/// Variables that are new or changed compared to `base`.
fn changed(req: &AttachRequest, base: &[(&str, &str)]) -> BTreeMap<String, String> {
    let base: BTreeMap<&str, &str> = base.iter().copied().collect();
    req.env
        .iter()
        .filter(|(n, v)| base.get(n) != Some(v))
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// What every attach with `-p 1` and nothing else sets.
fn always() -> BTreeMap<String, String> {
    [
        ("ROCPROFILER_LIBRARY_CTOR", "1"),
        ("ROCPROF_OUTPUT_PATH", CWD),
        ("ROCPROF_OUTPUT_FORMAT", "rocpd"),
        ("ROCPROF_ATTACH_OUTPUT_GENERATION_SYNC", "1"),
        ("ROCPROF_ATTACH_PID", "1"),
        ("ROCPROF_ATTACH_CHILDREN", "1"),
    ]
    .iter()
    .map(|(n, v)| (n.to_string(), v.to_string()))
    .collect()
}

/// Assert that `-p 1 <args>` on top of `base` changes exactly the always-set variables overridden
/// by `expect` (a value of `None` means the variable must not be set or changed).
fn check(args: &[&str], base: &[(&str, &str)], expect: &[(&str, Option<&str>)]) {
    let mut full = vec!["-p", "1"];
    full.extend_from_slice(args);
    let (req, _) = parse(&full, base).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let mut want = always();
    for (n, v) in expect {
        match v {
            Some(v) => want.insert(n.to_string(), v.to_string()),
            None => want.remove(*n),
        };
    }
    // Variables the base already had with the same value do not show up as changes.
    for (n, v) in base {
        if want.get(*n).map(String::as_str) == Some(*v) {
            want.remove(*n);
        }
    }
    // Variables sent with their "not asked for" value (so that no earlier session's value
    // applies) are not changes, unless the case names them.
    let mut got = changed(&req, base);
    for (n, v) in DEFAULTS {
        if !want.contains_key(*n) && got.get(*n).map(String::as_str) == Some(*v) {
            got.remove(*n);
        }
    }
    assert_eq!(got, want, "args {args:?} base {base:?}");
}

fn on(names: &[&'static str]) -> Vec<(&'static str, Option<&'static str>)> {
    names.iter().map(|n| (*n, Some("1"))).collect()
}

const SYS: [&str; 23] = [
    "ROCPROF_HIP_COMPILER_API_TRACE",
    "ROCPROF_HIP_RUNTIME_API_TRACE",
    "ROCPROF_HSA_CORE_API_TRACE",
    "ROCPROF_HSA_AMD_EXT_API_TRACE",
    "ROCPROF_HSA_IMAGE_EXT_API_TRACE",
    "ROCPROF_HSA_FINALIZER_EXT_API_TRACE",
    "ROCPROF_MARKER_API_TRACE",
    "ROCPROF_RCCL_API_TRACE",
    "ROCPROF_OMPT_TRACE",
    "ROCPROF_ROCDECODE_API_TRACE",
    "ROCPROF_ROCJPEG_API_TRACE",
    "ROCPROF_ROCSHMEM_API_TRACE",
    "ROCPROF_HIPFILE_API_TRACE",
    "ROCPROF_KERNEL_TRACE",
    "ROCPROF_HIP_GRAPH_TRACE",
    "ROCPROF_MEMORY_COPY_TRACE",
    "ROCPROF_MEMORY_ALLOCATION_TRACE",
    "ROCPROF_KFD_PAGE_MIGRATION_TRACE",
    "ROCPROF_KFD_PAGE_MAPPING_TRACE",
    "ROCPROF_KFD_QUEUE_TRACE",
    "ROCPROF_KFD_DROPPED_EVENTS_TRACE",
    "ROCPROF_SCRATCH_MEMORY_TRACE",
    "ROCPROF_HIP_EVENT_TRACE",
];

fn sys() -> Vec<&'static str> {
    SYS.to_vec()
}

#[test]
fn nothing_but_the_always_set_variables() {
    check(&[], &[], &[]);
}

#[test]
fn tracing_table() {
    let hip = [
        "ROCPROF_HIP_COMPILER_API_TRACE",
        "ROCPROF_HIP_RUNTIME_API_TRACE",
        "ROCPROF_HIP_GRAPH_TRACE",
        "ROCPROF_HIP_EVENT_TRACE",
    ];
    let hsa = [
        "ROCPROF_HSA_CORE_API_TRACE",
        "ROCPROF_HSA_AMD_EXT_API_TRACE",
        "ROCPROF_HSA_IMAGE_EXT_API_TRACE",
        "ROCPROF_HSA_FINALIZER_EXT_API_TRACE",
    ];
    let kfd = [
        "ROCPROF_KFD_PAGE_MIGRATION_TRACE",
        "ROCPROF_KFD_PAGE_MAPPING_TRACE",
        "ROCPROF_KFD_QUEUE_TRACE",
        "ROCPROF_KFD_DROPPED_EVENTS_TRACE",
    ];
    let runtime: Vec<&str> = sys()
        .into_iter()
        .filter(|n| !hsa.contains(n) && *n != "ROCPROF_HIP_COMPILER_API_TRACE")
        .collect();
    let sys_no_hsa: Vec<&str> = sys().into_iter().filter(|n| !hsa.contains(n)).collect();
    let sys_no_kernel: Vec<&str> = sys()
        .into_iter()
        .filter(|n| *n != "ROCPROF_KERNEL_TRACE")
        .collect();
    let table: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec!["--kernel-trace"], vec!["ROCPROF_KERNEL_TRACE"]),
        (vec!["--kernel-trace=true"], vec!["ROCPROF_KERNEL_TRACE"]),
        (vec!["--kernel-trace", "yes"], vec!["ROCPROF_KERNEL_TRACE"]),
        (vec!["--kernel-trace=OFF"], vec![]),
        (vec!["--kernel-trace=false"], vec![]),
        (vec!["--hip-trace"], hip.to_vec()),
        (vec!["--hip-runtime-trace"], hip[1..].to_vec()),
        (
            vec!["--hip-compiler-trace"],
            vec!["ROCPROF_HIP_COMPILER_API_TRACE"],
        ),
        (
            vec!["--hip-trace", "--hip-graph-trace=false"],
            vec![hip[0], hip[1], hip[3]],
        ),
        (vec!["--hip-trace", "--hip-runtime-trace=0"], vec![hip[0]]),
        (vec!["--hsa-trace"], hsa.to_vec()),
        (
            vec!["--hsa-trace", "--hsa-image-trace=n"],
            vec![hsa[0], hsa[1], hsa[3]],
        ),
        (
            vec!["--hsa-core-trace", "--hsa-amd-trace"],
            hsa[..2].to_vec(),
        ),
        (
            vec!["--hsa-image-trace", "--hsa-finalizer-trace"],
            hsa[2..].to_vec(),
        ),
        (vec!["--kfd-trace"], kfd.to_vec()),
        (vec!["--kfd-queue-trace"], vec![kfd[2]]),
        (
            vec![
                "--kfd-page-migration-trace",
                "--kfd-page-mapping-trace",
                "--kfd-dropped-events-trace",
            ],
            vec![kfd[0], kfd[1], kfd[3]],
        ),
        (vec!["-s"], sys()),
        (vec!["--sys-trace"], sys()),
        (vec!["-s", "--hsa-trace=false"], sys_no_hsa),
        (vec!["-s", "--kernel-trace=no"], sys_no_kernel),
        (vec!["-r"], runtime.clone()),
        (vec!["--runtime-trace"], runtime),
        (vec!["--marker-trace"], vec!["ROCPROF_MARKER_API_TRACE"]),
        (vec!["--rccl-trace"], vec!["ROCPROF_RCCL_API_TRACE"]),
        (
            vec!["--rocdecode-trace"],
            vec!["ROCPROF_ROCDECODE_API_TRACE"],
        ),
        (vec!["--rocjpeg-trace"], vec!["ROCPROF_ROCJPEG_API_TRACE"]),
        (vec!["--rocshmem-trace"], vec!["ROCPROF_ROCSHMEM_API_TRACE"]),
        (vec!["--hipfile-trace"], vec!["ROCPROF_HIPFILE_API_TRACE"]),
        (vec!["--hip-graph-trace"], vec!["ROCPROF_HIP_GRAPH_TRACE"]),
        (vec!["--hip-event-trace"], vec!["ROCPROF_HIP_EVENT_TRACE"]),
        (
            vec!["--memory-copy-trace"],
            vec!["ROCPROF_MEMORY_COPY_TRACE"],
        ),
        (
            vec!["--memory-allocation-trace"],
            vec!["ROCPROF_MEMORY_ALLOCATION_TRACE"],
        ),
        (
            vec!["--scratch-memory-trace"],
            vec!["ROCPROF_SCRATCH_MEMORY_TRACE"],
        ),
        (vec!["--group-by-queue"], vec!["ROCPROF_GROUP_BY_QUEUE"]),
        (vec!["--ompt-trace"], vec!["ROCPROF_OMPT_TRACE"]),
        (vec!["--ompt-trace", "all"], vec!["ROCPROF_OMPT_TRACE"]),
        (vec!["--ompt-trace", "true"], vec!["ROCPROF_OMPT_TRACE"]),
        (vec!["--ompt-trace", "false"], vec![]),
        (
            vec!["--kokkos-trace"],
            vec!["ROCPROF_MARKER_API_TRACE", "ROCPROF_KERNEL_RENAME"],
        ),
        (
            vec!["--kokkos-trace", "--kernel-rename=false"],
            vec!["ROCPROF_MARKER_API_TRACE"],
        ),
    ];
    for (args, vars) in table {
        check(&args, &[], &on(&vars));
    }
}

/// Every switch of the table, alone on the command line (with the switch it needs), sets exactly
/// the variables of its row and of what it implies; `=false` sets only what a false value writes.
#[test]
fn every_switch_sets_what_its_row_says() {
    // An exported decoder path keeps the thread trace switches from looking for one.
    let base = [("ROCPROF_ATT_LIBRARY_PATH", "/dec")];
    for s in Switch::ALL {
        let d = s.def();
        for value in [true, false] {
            let mut given = Switches::default().with(s, value);
            let mut args = Vec::new();
            if let Some(n) = d.needs {
                given = given.with(n, true);
                args.push(format!("--{}", n.def().long));
            }
            args.push(match value {
                true => format!("--{}", d.long),
                false => format!("--{}=false", d.long),
            });
            let sw = given.resolved();
            let expect: Vec<(&str, Option<&str>)> = Switch::ALL
                .into_iter()
                .filter_map(|t| sw.get(t).and_then(|v| t.pair(v)))
                .map(|(var, v)| (var, Some(v)))
                .collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            check(&args, &base, &expect);
        }
    }
}

#[test]
fn ompt_categories() {
    check(
        &["--ompt-trace", "parallel", "TASK"],
        &[],
        &[
            ("ROCPROF_OMPT_TRACE", Some("1")),
            ("ROCPROF_OMPT_TRACE_OPERATIONS", Some("parallel,task")),
        ],
    );
    for bad in [
        &["--ompt-trace", "parallel,task"][..],
        &["--ompt-trace", "gpu"][..],
    ] {
        let mut a = vec!["-p", "1"];
        a.extend_from_slice(bad);
        assert!(matches!(parse(&a, &[]), Err(Error::Usage(_))), "{bad:?}");
    }
}

#[test]
fn trace_booleans_are_only_written_when_true() {
    let base = [
        ("ROCPROF_KERNEL_TRACE", "1"),
        ("ROCPROF_HIP_RUNTIME_API_TRACE", "1"),
    ];
    let (req, _) = parse(
        &[
            "-p",
            "1",
            "--kernel-trace=false",
            "--hip-runtime-trace",
            "0",
        ],
        &base,
    )
    .unwrap();
    assert_eq!(req.env.get("ROCPROF_KERNEL_TRACE"), Some("1"));
    assert_eq!(req.env.get("ROCPROF_HIP_RUNTIME_API_TRACE"), Some("1"));
    // Explicit false also keeps the implication away.
    check(&["--hip-runtime-trace=false"], &base, &[]);
}

#[test]
fn output_options() {
    // -o: verbatim templates, default from the environment, never invented.
    check(
        &["-o", "%hostname%/%rank%_%job%_%pid%_%env{USER}%"],
        &[],
        &[(
            "ROCPROF_OUTPUT_FILE_NAME",
            Some("%hostname%/%rank%_%job%_%pid%_%env{USER}%"),
        )],
    );
    let (req, _) = parse(&["-p", "1"], &[]).unwrap();
    assert_eq!(req.output_file, "%hostname%/%pid%");
    // Sent explicitly: an earlier session's -o must not apply in the target.
    assert_eq!(
        req.env.get("ROCPROF_OUTPUT_FILE_NAME"),
        Some("%hostname%/%pid%")
    );
    let (req, _) = parse(&["-p", "1"], &[("ROCPROF_OUTPUT_FILE_NAME", "run_%pid%")]).unwrap();
    assert_eq!(req.output_file, "run_%pid%");

    // -d: absolute, default cwd, or ROCPROF_OUTPUT_PATH from the environment.
    check(&["-d", "/o"], &[], &[("ROCPROF_OUTPUT_PATH", Some("/o"))]);
    check(
        &["-d", "rel/dir"],
        &[],
        &[("ROCPROF_OUTPUT_PATH", Some("/work/here/rel/dir"))],
    );
    check(
        &["-d", "%env{SCRATCH}%/prof"],
        &[],
        &[("ROCPROF_OUTPUT_PATH", Some("%env{SCRATCH}%/prof"))],
    );
    check(
        &[],
        &[("ROCPROF_OUTPUT_PATH", "/e")],
        &[("ROCPROF_OUTPUT_PATH", Some("/e"))],
    );
    let (req, _) = parse(&["-p", "1", "-d", "/o/%hostname%"], &[]).unwrap();
    assert_eq!(req.output_dir, Path::new("/o/%hostname%"));

    // -f: comma join, appended to an existing value, default rocpd.
    check(
        &["-f", "csv", "JSON"],
        &[],
        &[("ROCPROF_OUTPUT_FORMAT", Some("csv,json"))],
    );
    check(
        &["--output-format", "pftrace,otf2"],
        &[],
        &[("ROCPROF_OUTPUT_FORMAT", Some("pftrace,otf2"))],
    );
    check(
        &["-f", "csv"],
        &[("ROCPROF_OUTPUT_FORMAT", "json")],
        &[("ROCPROF_OUTPUT_FORMAT", Some("json,csv"))],
    );
    check(
        &[],
        &[("ROCPROF_OUTPUT_FORMAT", "json")],
        &[("ROCPROF_OUTPUT_FORMAT", Some("json,rocpd"))],
    );
    let (req, _) = parse(
        &["-p", "1", "-f", "csv"],
        &[("ROCPROF_OUTPUT_FORMAT", "json")],
    )
    .unwrap();
    assert_eq!(req.formats, vec![OutputFormat::Json, OutputFormat::Csv]);

    check(
        &["--output-config"],
        &[],
        &on(&["ROCPROF_OUTPUT_CONFIG_FILE"]),
    );
    check(&["--output-config=false"], &[], &[]);
    check(&["-M"], &[], &[("ROCPROF_DEMANGLE_KERNELS", Some("0"))]);
    check(&["--mangled-kernels=false"], &[], &[]);
    check(&["-T"], &[], &on(&["ROCPROF_TRUNCATE_KERNELS"]));
    check(&["--kernel-rename"], &[], &on(&["ROCPROF_KERNEL_RENAME"]));
    check(
        &["--log-level", "INFO"],
        &[],
        &[
            ("ROCPROF_LOG_LEVEL", Some("info")),
            ("ROCPROFILER_LOG_LEVEL", Some("info")),
            ("ROCTX_LOG_LEVEL", Some("info")),
        ],
    );
    check(&["--log-level", "env"], &[], &[]);
    check(
        &[
            "--perfetto-backend",
            "system",
            "--perfetto-buffer-size",
            "2048",
            "--perfetto-shmem-size-hint",
            "128",
            "--perfetto-buffer-fill-policy",
            "ring_buffer",
        ],
        &[],
        &[
            ("ROCPROF_PERFETTO_BACKEND", Some("system")),
            ("ROCPROF_PERFETTO_BUFFER_SIZE_KB", Some("2048")),
            ("ROCPROF_PERFETTO_SHMEM_SIZE_HINT_KB", Some("128")),
            ("ROCPROF_PERFETTO_BUFFER_FILL_POLICY", Some("ring_buffer")),
        ],
    );
    check(
        &["--minimum-output-data", "4"],
        &[],
        &[("ROCPROF_MINIMUM_OUTPUT_BYTES", Some("4096"))],
    );
    check(
        &["-A", "type-relative"],
        &[],
        &[("ROCPROF_AGENT_INDEX", Some("type-relative"))],
    );
}

#[test]
fn summary_options() {
    check(&["--stats"], &[], &on(&["ROCPROF_STATS"]));
    check(&["--stats=0"], &[], &[]);
    check(
        &["-S"],
        &[],
        &[
            ("ROCPROF_STATS_SUMMARY", Some("1")),
            ("ROCPROF_STATS_SUMMARY_OUTPUT", Some("stderr")),
        ],
    );
    check(
        &["--summary", "--summary-output-file", "STDOUT"],
        &[],
        &[
            ("ROCPROF_STATS_SUMMARY", Some("1")),
            ("ROCPROF_STATS_SUMMARY_OUTPUT", Some("stdout")),
        ],
    );
    check(
        &["--summary-output-file", "s.txt"],
        &[],
        &[("ROCPROF_STATS_SUMMARY_OUTPUT", Some("s.txt"))],
    );
    check(&["-D"], &[], &on(&["ROCPROF_STATS_SUMMARY_PER_DOMAIN"]));
    check(
        &["--summary-groups", "KERNEL_DISPATCH|MEMORY_COPY", ".*_API"],
        &[],
        &[(
            "ROCPROF_STATS_SUMMARY_GROUPS",
            Some("KERNEL_DISPATCH|MEMORY_COPY##@@##.*_API"),
        )],
    );
    check(
        &["-u", "msec"],
        &[],
        &[("ROCPROF_STATS_SUMMARY_UNITS", Some("msec"))],
    );
    let (req, _) = parse(&["-p", "1", "-S"], &[]).unwrap();
    assert!(req.summary);
}

#[test]
fn filter_options() {
    check(
        &[
            "--kernel-include-regex",
            "gemm.*",
            "--kernel-exclude-regex",
            "copy",
            "--kernel-iteration-range",
            "[1-3]",
            "[5]",
        ],
        &[],
        &[
            ("ROCPROF_KERNEL_FILTER_INCLUDE_REGEX", Some("gemm.*")),
            ("ROCPROF_KERNEL_FILTER_EXCLUDE_REGEX", Some("copy")),
            ("ROCPROF_KERNEL_FILTER_RANGE", Some("[1-3], [5]")),
        ],
    );
    check(
        &["--selected-regions", "--selected-regions-ref-count"],
        &[],
        &on(&[
            "ROCPROF_SELECTED_REGIONS",
            "ROCPROF_SELECTED_REGIONS_REF_COUNT",
        ]),
    );
    check(
        &[
            "--mpi-world-rank-variable",
            "MY_RANK",
            "--mpi-world-size-variable",
            "MY_SIZE",
        ],
        &[],
        &[
            ("ROCPROF_MPI_RANK_VAR", Some("MY_RANK")),
            ("ROCPROF_MPI_SIZE_VAR", Some("MY_SIZE")),
        ],
    );
    check(
        &[],
        &[("OMPI_COMM_WORLD_RANK", "3"), ("OMPI_COMM_WORLD_SIZE", "8")],
        &[
            ("ROCPROF_MPI_RANK_VAR", Some("OMPI_COMM_WORLD_RANK")),
            ("ROCPROF_MPI_SIZE_VAR", Some("OMPI_COMM_WORLD_SIZE")),
        ],
    );
}

#[test]
fn counter_options() {
    check(
        &["--pmc", "SQ_WAVES", "GRBM_COUNT"],
        &[],
        &[
            ("ROCPROF_COUNTER_COLLECTION", Some("1")),
            ("ROCPROF_COUNTERS", Some("pmc: SQ_WAVES GRBM_COUNT")),
        ],
    );
    check(
        &[
            "--replay-mode",
            "kernel",
            "--kernel-replay-beta-enabled",
            "--pmc",
            "A",
            "--pmc",
            "B",
            "C",
        ],
        &[],
        &[
            ("ROCPROF_KERNEL_REPLAY", Some("1")),
            ("ROCPROF_COUNTER_COLLECTION", Some("1")),
            ("ROCPROF_COUNTER_GROUPS", Some("pmc: A\npmc: B C")),
        ],
    );
    // Iteration multiplexing (CUDA): the groups go to our tool, with our own setting.
    check(
        &[
            "--replay-mode",
            "iteration",
            "--pmc",
            "A",
            "--pmc",
            "B",
            "C",
        ],
        &[],
        &[
            ("ROCPROF_ATTACH_ITERATION_REPLAY", Some("1")),
            ("ROCPROF_COUNTER_COLLECTION", Some("1")),
            ("ROCPROF_COUNTER_GROUPS", Some("pmc: A\npmc: B C")),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("extra.yaml");
    std::fs::write(&file, "SQ_X:\n  expression: SQ_WAVES*2\n").unwrap();
    check(
        &["-E", file.to_str().unwrap(), "--pmc", "SQ_X"],
        &[],
        &[
            (
                "ROCPROF_EXTRA_COUNTERS_CONTENTS",
                Some("SQ_X:\n  expression: SQ_WAVES*2\n"),
            ),
            ("ROCPROF_COUNTER_COLLECTION", Some("1")),
            ("ROCPROF_COUNTERS", Some("pmc: SQ_X")),
        ],
    );
    check(
        &[
            "--spm-beta-enabled",
            "--spm",
            "GRBM_COUNT",
            "SQ_WAVES",
            "--spm-sample-interval",
            "100",
            "--spm-sample-interval-unit",
            "sclk_cycles",
        ],
        &[],
        &[
            ("ROCPROFILER_SPM_BETA_ENABLED", Some("1")),
            ("ROCPROF_SPM_COUNTER_COLLECTION", Some("1")),
            ("ROCPROF_SPM_COUNTERS", Some("spm: GRBM_COUNT SQ_WAVES")),
            ("ROCPROF_SPM_SAMPLE_INTERVAL", Some("100")),
            ("ROCPROF_SPM_SAMPLE_INTERVAL_UNIT", Some("sclk_cycles")),
        ],
    );
}

#[test]
fn advanced_options() {
    check(
        &[
            "--pc-sampling-beta-enabled",
            "--pc-sampling-unit",
            "time",
            "--pc-sampling-method",
            "host_trap",
            "--pc-sampling-interval",
            "10",
        ],
        &[],
        &[
            ("ROCPROFILER_PC_SAMPLING_BETA_ENABLED", Some("1")),
            ("ROCPROF_PC_SAMPLING_UNIT", Some("time")),
            ("ROCPROF_PC_SAMPLING_METHOD", Some("host_trap")),
            ("ROCPROF_PC_SAMPLING_INTERVAL", Some("10")),
        ],
    );
    // The beta switch may come from the environment instead.
    check(
        &[
            "--pc-sampling-unit",
            "cycles",
            "--pc-sampling-method",
            "stochastic",
            "--pc-sampling-interval",
            "1048576",
        ],
        &[("ROCPROFILER_PC_SAMPLING_BETA_ENABLED", "ON")],
        &[
            ("ROCPROF_PC_SAMPLING_UNIT", Some("cycles")),
            ("ROCPROF_PC_SAMPLING_METHOD", Some("stochastic")),
            ("ROCPROF_PC_SAMPLING_INTERVAL", Some("1048576")),
        ],
    );
    check(
        &[
            "--att",
            "--att-target-cu",
            "0x2",
            "--att-simd-select",
            "0xF",
            "--att-buffer-size",
            "0x1000",
            "--att-shader-engine-mask",
            "3",
            "--att-consecutive-kernels",
            "4",
            "--att-resource-mode",
            "hsa",
            "--att-gpu-index",
            "0,1",
            "--att-serialize-all",
            "--att-no-detail",
            "--att-perfcounters",
            "sq_waves",
            "--att-perfcounter-ctrl",
            "4",
            "--att-perfcounter-target-only",
            "--att-library-path",
            "/opt/rocm/lib",
        ],
        &[],
        &[
            ("ROCPROF_ADVANCED_THREAD_TRACE", Some("1")),
            ("ROCPROF_ATT_PARAM_TARGET_CU", Some("2")),
            ("ROCPROF_ATT_PARAM_SIMD_SELECT", Some("15")),
            ("ROCPROF_ATT_PARAM_BUFFER_SIZE", Some("4096")),
            ("ROCPROF_ATT_PARAM_SHADER_ENGINE_MASK", Some("3")),
            ("ROCPROF_ATT_CONSECUTIVE_KERNELS", Some("4")),
            ("ROCPROF_ATT_PARAM_RESOURCE_MODE", Some("hsa")),
            ("ROCPROF_ATT_PARAM_GPU_INDEX", Some("0,1")),
            ("ROCPROF_ATT_PARAM_SERIALIZE_ALL", Some("1")),
            ("ROCPROF_ATT_PARAM_NO_DETAIL", Some("1")),
            ("ROCPROF_ATT_PARAM_PERFCOUNTERS", Some("SQ_WAVES")),
            ("ROCPROF_ATT_PARAM_PERFCOUNTER_CTRL", Some("4")),
            ("ROCPROF_ATT_PARAM_TARGET_ONLY", Some("1")),
            ("ROCPROF_ATT_LIBRARY_PATH", Some("/opt/rocm/lib")),
        ],
    );
    check(
        &["--att-no-intercept", "--att-library-path", "/l"],
        &[],
        &[
            ("ROCPROF_ADVANCED_THREAD_TRACE", Some("1")),
            ("ROCPROF_ATT_NO_INTERCEPT", Some("1")),
            ("ROCPROF_ATT_LIBRARY_PATH", Some("/l")),
        ],
    );
    check(
        &["--advanced-thread-trace", "--att-activity", "8"],
        &[("ROCPROF_ATT_LIBRARY_PATH", "/dec")],
        &[
            ("ROCPROF_ADVANCED_THREAD_TRACE", Some("1")),
            ("ROCPROF_ATT_PARAM_PERFCOUNTER_CTRL", Some("8")),
            (
                "ROCPROF_ATT_PARAM_PERFCOUNTERS",
                Some("SQ_BUSY_CU_CYCLES SQ_VALU_MFMA_BUSY_CYCLES SQ_ACTIVE_INST_VALU SQ_ACTIVE_INST_LDS SQ_ACTIVE_INST_VMEM SQ_ACTIVE_INST_FLAT SQ_ACTIVE_INST_SCA SQ_ACTIVE_INST_MISC"),
            ),
        ],
    );
    check(
        &["--disable-signal-handlers"],
        &[],
        &[("ROCPROF_SIGNAL_HANDLERS", Some("0"))],
    );
    check(
        &["--disable-signal-handlers=false"],
        &[],
        &[("ROCPROF_SIGNAL_HANDLERS", Some("1"))],
    );
    check(
        &["--process-sync"],
        &[],
        &[("ROCPROF_PROCESS_SYNC", Some("1"))],
    );
    check(
        &["--process-sync=off"],
        &[],
        &[("ROCPROF_PROCESS_SYNC", Some("0"))],
    );
    check(
        &["--benchmark-mode", "execution-profile"],
        &[],
        &[
            ("ROCPROF_GROUP_BY_QUEUE", Some("0")),
            ("ROCPROF_BENCHMARK_MODE", Some("execution-profile")),
        ],
    );
}

#[test]
fn attach_options_and_fallbacks() {
    check(
        &["--attach-duration-msec", "2500"],
        &[],
        &[("ROCPROF_ATTACH_DURATION", Some("2500"))],
    );
    check(
        &["--attach-children=false"],
        &[],
        &[("ROCPROF_ATTACH_CHILDREN", Some("0"))],
    );
    check(
        &["--attach-sync-output=no"],
        &[],
        &[("ROCPROF_ATTACH_OUTPUT_GENERATION_SYNC", Some("0"))],
    );
    check(
        &["-t", "/x/tool.so"],
        &[],
        &[("ROCPROF_ATTACH_TOOL_LIBRARY", Some("/x/tool.so"))],
    );

    let (req, _) = parse(&["--attach", "12,13", "-p", "14", "--pid", "12"], &[]).unwrap();
    assert_eq!(req.targets, TargetSelection::Pids(vec![12, 13, 14]));
    assert_eq!(req.env.get("ROCPROF_ATTACH_PID"), Some("12,13,14"));
    assert!(
        req.children && req.sync_output && req.duration.is_none() && req.tool_library.is_none()
    );
    assert_eq!(req.parallelism, 16);

    let base = [
        ("ROCPROF_ATTACH_PID", "77"),
        ("ROCPROF_ATTACH_DURATION", "100"),
        ("ROCPROF_ATTACH_CHILDREN", "0"),
        ("ROCPROF_ATTACH_TOOL_LIBRARY", "/t.so"),
    ];
    let (req, _) = parse(&["--parallel", "3"], &base).unwrap();
    assert_eq!(req.targets, TargetSelection::Pids(vec![77]));
    assert_eq!(req.duration, Some(Duration::from_millis(100)));
    assert!(!req.children);
    assert_eq!(req.tool_library.as_deref(), Some("/t.so"));
    assert_eq!(req.parallelism, 3);
    // The command line wins over the environment.
    let (req, _) = parse(
        &[
            "-p",
            "5",
            "--attach-duration-msec",
            "7",
            "--attach-children",
            "-t",
            "/u.so",
        ],
        &base,
    )
    .unwrap();
    assert_eq!(req.targets, TargetSelection::Pids(vec![5]));
    assert_eq!(req.duration, Some(Duration::from_millis(7)));
    assert!(req.children);
    assert_eq!(req.env.get("ROCPROF_ATTACH_TOOL_LIBRARY"), Some("/u.so"));

    let (req, _) = parse(&["--match", "python.*train"], &base).unwrap();
    assert_eq!(req.targets, TargetSelection::Match("python.*train".into()));
    let (req, _) = parse(&["--job", "4242"], &[]).unwrap();
    assert_eq!(req.targets, TargetSelection::Job("4242".into()));
    let (req, _) = parse(&["--all"], &[]).unwrap();
    assert_eq!(req.targets, TargetSelection::All);
    assert_eq!(req.env.get("ROCPROF_ATTACH_PID"), None);
}

#[test]
fn env_buffer_carries_only_rocp_variables() {
    let base = [
        ("PATH", "/bin"),
        (
            "ROCP_TOOL_LIBRARIES",
            "/opt/rocm/lib/rocprofiler-sdk/librocprofiler-sdk-tool.so",
        ),
        (
            "ROCPROFILER_REGISTER_LIBRARY",
            "/host/librocprofiler-register.so",
        ),
        ("ROCP_TOOL_ATTACH", "1"),
        ("LD_PRELOAD", "x.so"),
    ];
    let (req, warnings) = parse(&["-p", "1", "--kernel-trace"], &base).unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("ignoring ROCP_TOOL_LIBRARIES")),
        "{warnings:?}"
    );
    assert_eq!(req.env.get("ROCP_TOOL_LIBRARIES"), None);
    let sent = decode(&encode(&req.env)).unwrap();
    let names: Vec<&str> = sent.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.iter().all(|n| n.starts_with("ROCP")), "{names:?}");
    assert!(!names.contains(&"ROCPROFILER_REGISTER_LIBRARY"));
    // environ order: pre-existing first, new variables appended in the order they were set.
    assert_eq!(names[0], "ROCP_TOOL_ATTACH");
    assert_eq!(names[1], "ROCPROFILER_LIBRARY_CTOR");
    assert!(names.contains(&"ROCPROF_KERNEL_TRACE"));
}

#[test]
fn warnings() {
    let (_, w) = parse(&["-p", "1"], &[]).unwrap();
    assert!(w.iter().any(|w| w.contains("record nothing")), "{w:?}");
    let (_, w) = parse(&["-p", "1"], &[("ROCPROF_KERNEL_TRACE", "1")]).unwrap();
    assert!(w.is_empty(), "{w:?}");
    let (_, w) = parse(&["-p", "1", "--kernel-trace", "--stats"], &[]).unwrap();
    assert!(w.iter().any(|w| w.contains("--stats")), "{w:?}");
    let (_, w) = parse(&["-p", "1", "--kernel-trace", "--att-target-cu", "1"], &[]).unwrap();
    assert!(w.iter().any(|w| w.contains("without --att")), "{w:?}");
    let (_, w) = parse(
        &["-p", "1", "--kernel-trace", "-q"],
        &[("ROCP_TOOL_LIBRARIES", "x")],
    )
    .unwrap();
    assert!(w.is_empty(), "quiet drops warnings: {w:?}");
}

#[test]
fn refusals_are_usage_errors() {
    let cases: Vec<Case> = vec![
        (
            vec!["-f", "xml"],
            vec![],
            "choose from csv, json, pftrace, otf2, rocpd",
        ),
        (
            vec![],
            vec![("ROCPROF_OUTPUT_FORMAT", "parquet")],
            "ROCPROF_OUTPUT_FORMAT",
        ),
        (
            vec!["--pmc", "A", "B", "--pmc", "C"],
            vec![],
            "rerun its kernels",
        ),
        (vec!["--pmc"], vec![], "at least one counter"),
        (
            vec!["-P", "1:2:0"],
            vec![],
            "not compatible with attach mode",
        ),
        (
            vec![
                "--collection-period",
                "1:2:0",
                "--collection-period-unit",
                "msec",
            ],
            vec![],
            "--attach-duration-msec",
        ),
        (
            vec!["--pc-sampling-unit", "time"],
            vec![],
            "--pc-sampling-beta-enabled",
        ),
        (
            vec!["--pc-sampling-beta-enabled", "--pc-sampling-unit", "time"],
            vec![],
            "all three",
        ),
        (
            vec![
                "--pc-sampling-beta-enabled",
                "--pc-sampling-unit",
                "time",
                "--pc-sampling-method",
                "host_trap",
                "--pc-sampling-interval",
                "-1",
            ],
            vec![],
            "positive",
        ),
        (vec!["--spm", "A"], vec![], "--spm-beta-enabled"),
        (
            vec!["--spm-beta-enabled", "--spm", "A", "--pmc", "B"],
            vec![],
            "SPM cannot",
        ),
        (
            vec!["--replay-mode", "kernel", "--pmc", "A"],
            vec![],
            "--kernel-replay-beta-enabled",
        ),
        (
            vec!["--replay-mode", "kernel", "--kernel-replay-beta-enabled"],
            vec![],
            "--pmc",
        ),
        (
            vec!["--att", "--att-target-cu", "zz", "--att-library-path", "/l"],
            vec![],
            "0x",
        ),
        (
            vec![
                "--att",
                "--att-activity",
                "8",
                "--pmc",
                "A",
                "--att-library-path",
                "/l",
            ],
            vec![],
            "--pmc",
        ),
        (vec!["--mpi-world-rank-variable", "R"], vec![], "together"),
        (
            vec!["-E", "/nonexistent/extra.yaml"],
            vec![],
            "readable YAML",
        ),
        (
            vec![
                "--selected-regions",
                "--att",
                "--att-consecutive-kernels",
                "2",
            ],
            vec![],
            "mutually exclusive",
        ),
        (
            vec!["--benchmark-mode", "execution-profile", "--group-by-queue"],
            vec![],
            "group-by-queue=false",
        ),
        (vec!["-o", ""], vec![], "file name template"),
        (vec!["-d", ""], vec![], "directory"),
        (
            vec!["--perfetto-buffer-size", "0"],
            vec![],
            "--perfetto-buffer-size",
        ),
        (vec!["--summary-units", "days"], vec![], "possible values"),
    ];
    for (args, base, needle) in cases {
        let mut a = vec!["-p", "1"];
        a.extend_from_slice(&args);
        match parse(&a, &base) {
            Err(Error::Usage(msg)) => {
                assert!(
                    msg.contains(needle),
                    "{args:?}: '{msg}' should mention '{needle}'"
                );
                assert!(!msg.contains('\n'), "{args:?}: multi-line message '{msg}'");
            }
            Err(e) => panic!("{args:?}: not a usage error: {e}"),
            Ok(_) => panic!("{args:?}: accepted"),
        }
    }
}

#[test]
fn subcommands_check_and_list() {
    let env = EnvList::new();
    let cwd = Path::new(CWD);
    let inv = parse_request(
        ["rocprof-attach", "summary", "-i", "x.db", "--help"],
        &env,
        cwd,
    )
    .unwrap();
    assert!(
        matches!(inv.action, Action::Print(ref t) if t.contains("Usage: rocprof-attach summary"))
    );
    let inv = parse_request(["rocprof-attach", "-v", "convert", "-i", "x.db"], &env, cwd).unwrap();
    assert!(matches!(inv.action, Action::Convert(ref c) if c.common.inputs == [Path::new("x.db")]));
    let inv = parse_request(
        ["rocprof-attach", "--check", "-p", "5,6", "-t", "/t.so"],
        &env,
        cwd,
    )
    .unwrap();
    assert!(
        matches!(inv.action, Action::Check { selection: TargetSelection::Pids(ref pids), ref tool_library, .. } if pids == &[5, 6] && tool_library.as_deref() == Some("/t.so"))
    );
    let inv = parse_request(["rocprof-attach", "--list"], &env, cwd).unwrap();
    assert!(matches!(inv.action, Action::List(TargetSelection::All)));
    let inv = parse_request(["rocprof-attach", "--list", "--match", "x"], &env, cwd).unwrap();
    assert!(matches!(inv.action, Action::List(TargetSelection::Match(ref m)) if m == "x"));
    let inv = parse_request(["rocprof-attach", "--help"], &env, cwd).unwrap();
    assert!(matches!(inv.action, Action::Print(ref t) if t.contains("Target selection")));
}

#[test]
fn repeated_format_options_accumulate() {
    check(
        &["-f", "csv", "-f", "json"],
        &[],
        &[("ROCPROF_OUTPUT_FORMAT", Some("csv,json"))],
    );
}

/// `-d/--output-directory` and `-f/--output-format` in every subcommand and the session, with
/// comma lists as well as separate words; the old spellings still work.
#[test]
fn one_spelling_for_output_directory_and_format() {
    use rocprof_attach::cli::rocpd_args::{Format, ReportFormat};
    let env = EnvList::new();
    let cwd = Path::new(CWD);
    let parse = |args: &[&str]| {
        let mut a = vec!["rocprof-attach"];
        a.extend_from_slice(args);
        parse_request(a, &env, cwd)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
            .action
    };
    for args in [
        &["convert", "-i", "a.db", "-f", "csv,json", "-d", "out"][..],
        &["convert", "-i", "a.db", "-f", "csv", "json", "-d", "out"],
        &[
            "convert",
            "-i",
            "a.db",
            "--output-format=csv,json",
            "--output-directory",
            "out",
        ],
        &[
            "convert",
            "-i",
            "a.db",
            "-f",
            "csv",
            "-f",
            "json",
            "--output-path",
            "out",
        ],
    ] {
        let Action::Convert(c) = parse(args) else {
            panic!("{args:?}: not convert")
        };
        assert_eq!(c.formats, [Format::Csv, Format::Json], "{args:?}");
        assert_eq!(c.out_dir, Path::new("out"), "{args:?}");
    }
    for args in [
        &["summary", "-i", "a.db", "-f", "md,html", "-d", "out"][..],
        &[
            "summary",
            "-i",
            "a.db",
            "--output-format",
            "md",
            "html",
            "--output-directory=out",
        ],
        &[
            "summary",
            "-i",
            "a.db",
            "--format",
            "md,html",
            "--output-path",
            "out",
        ],
    ] {
        let Action::Summary(c) = parse(args) else {
            panic!("{args:?}: not summary")
        };
        assert_eq!(
            c.formats,
            [ReportFormat::Md, ReportFormat::Html],
            "{args:?}"
        );
        assert_eq!(c.out_dir.as_deref(), Some(Path::new("out")), "{args:?}");
    }
    for args in [
        &["query", "-i", "a.db", "--query", "SELECT 1", "-f", "csv"][..],
        &[
            "query",
            "-i",
            "a.db",
            "--query",
            "SELECT 1",
            "--output-format",
            "csv",
        ],
        &[
            "query", "-i", "a.db", "--query", "SELECT 1", "--format", "csv",
        ],
    ] {
        let Action::Query(c) = parse(args) else {
            panic!("{args:?}: not query")
        };
        assert_eq!(c.format, ReportFormat::Csv, "{args:?}");
    }
    for args in [
        &[
            "-p",
            "1",
            "--kernel-trace",
            "-f",
            "csv,json",
            "-d",
            "/tmp/o",
        ][..],
        &[
            "-p",
            "1",
            "--kernel-trace",
            "-f",
            "csv",
            "json",
            "-d",
            "/tmp/o",
        ],
        &[
            "-p",
            "1",
            "--kernel-trace",
            "--output-format",
            "csv",
            "--output-format=json",
        ],
    ] {
        let Action::Attach(r) = parse(args) else {
            panic!("{args:?}: not a session")
        };
        assert_eq!(
            r.formats,
            [OutputFormat::Csv, OutputFormat::Json],
            "{args:?}"
        );
    }
    // The old spellings are hidden: `--help` shows one.
    let Action::Print(help) = parse(&["summary", "--help"]) else {
        panic!("summary --help")
    };
    assert!(help.contains("--output-directory") && help.contains("--output-format"));
    assert!(
        !help.contains("--output-path") && !help.contains("--format "),
        "{help}"
    );
}
