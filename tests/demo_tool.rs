//! The demo tool (examples/demo/tool.c) without ptrace: `demo-harness` loads the demo runtime, which
//! registers with the stand-in rocprofiler-register, and calls `rocprofiler_register_attach` /
//! `_detach` itself. The files written must follow rocprofv3's CSV layout and hold exactly the calls
//! the harness made while attached.

#[path = "../examples/demo/build_parts.rs"]
mod build_parts;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const HDR_API: &str = r#""Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp""#;
const HDR_KERNEL: &str = r#""Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp","LDS_Block_Size","Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z""#;
const HDR_COPY: &str = r#""Kind","Direction","Stream_Id","Source_Agent_Id","Destination_Agent_Id","Correlation_Id","Start_Timestamp","End_Timestamp""#;
const HDR_ALLOC: &str = r#""Kind","Operation","Agent_Id","Allocation_Size","Address","Correlation_Id","Start_Timestamp","End_Timestamp""#;

/// Calls per harness `work` iteration, by function.
const PER_ITERATION: &[(&str, usize)] = &[
    ("demoMalloc", 2),
    ("demoMemcpy", 2),
    ("demoLaunchKernel", 2),
    ("demoStreamSynchronize", 1),
    ("demoFree", 2),
];

fn parts() -> &'static build_parts::Parts {
    static PARTS: OnceLock<build_parts::Parts> = OnceLock::new();
    PARTS.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("demo-parts");
        build_parts::build_all(&dir, true).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// One harness run: its pid, stdout lines, stderr and exit status.
struct Run {
    pid: u32,
    lines: Vec<String>,
    stderr: String,
}

/// Runs the harness with `steps` (bounded: the harness is killed after 60 s).
fn harness(steps: &[&str]) -> Run {
    let p = parts();
    let mut child = Command::new(p.harness.as_ref().expect("harness built"))
        .arg(&p.tool)
        .args(steps)
        .env("ROCP_TOOL_ATTACH", "1")
        .env("LD_LIBRARY_PATH", &p.dir)
        .env_remove("ROCPROF_STANDIN_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn harness");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("harness did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().expect("harness output");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "harness failed: {:?}\n{stderr}",
        out.status
    );
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    Run { pid, lines, stderr }
}

/// Pairs for a CSV session into `dir` with the given services enabled.
fn env_steps(dir: &Path, services: &[&str], extra: &[&str]) -> Vec<String> {
    let mut v = Vec::new();
    for s in services {
        v.push("env".to_string());
        v.push(format!("ROCPROF_{s}=1"));
    }
    for e in [
        format!("ROCPROF_OUTPUT_PATH={}", dir.display()),
        "ROCPROF_OUTPUT_FORMAT=csv".to_string(),
    ]
    .into_iter()
    .chain(extra.iter().map(|s| s.to_string()))
    {
        v.push("env".to_string());
        v.push(e);
    }
    v
}

/// Lines the harness printed between its n-th `attach` and the following `detach` (n from 0).
fn window(run: &Run, n: usize) -> Vec<&str> {
    let starts: Vec<usize> = run
        .lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("attach "))
        .map(|(i, _)| i)
        .collect();
    let start = starts[n];
    let end = run.lines[start..]
        .iter()
        .position(|l| l.starts_with("detach "))
        .map(|p| start + p)
        .unwrap();
    run.lines[start + 1..end]
        .iter()
        .map(String::as_str)
        .collect()
}

fn statuses(run: &Run, what: &str) -> Vec<i32> {
    run.lines
        .iter()
        .filter_map(|l| l.strip_prefix(what))
        .map(|s| s.trim().parse().unwrap())
        .collect()
}

fn count_by<'a>(lines: impl IntoIterator<Item = &'a str>, prefix: &str) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for l in lines {
        if let Some(name) = l.strip_prefix(prefix) {
            *m.entry(name.to_string()).or_insert(0) += 1;
        }
    }
    m
}

/// All files under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("hostname")
        .trim()
        .to_string()
}

/// Splits a CSV row written by rocprofv3's rules: quoted strings (never containing `"`), bare
/// integers. Returns the cells with the quotes removed and whether each was quoted.
fn cells(row: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut rest = row;
    loop {
        if let Some(r) = rest.strip_prefix('"') {
            let end = r.find('"').expect("closing quote");
            out.push((r[..end].to_string(), true));
            rest = &r[end + 1..];
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            out.push((rest[..end].to_string(), false));
            rest = &rest[end..];
        }
        match rest.strip_prefix(',') {
            Some(r) => rest = r,
            None => {
                assert!(rest.is_empty(), "junk after a cell in {row:?}");
                return out;
            }
        }
    }
}

/// Reads a CSV file: checks the header line and the byte-level rules, returns the rows.
fn read_csv(path: &Path, header: &str) -> Vec<Vec<(String, bool)>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        text.ends_with('\n') && !text.contains('\r'),
        "rows end with \\n only"
    );
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(header), "header of {}", path.display());
    let n = header.split(',').count();
    lines
        .map(|l| {
            let c = cells(l);
            assert_eq!(c.len(), n, "column count in {l:?}");
            c
        })
        .collect()
}

fn int(c: &(String, bool)) -> u64 {
    assert!(!c.1, "integers are not quoted: {c:?}");
    c.0.parse()
        .unwrap_or_else(|_| panic!("not an integer: {c:?}"))
}

fn text(c: &(String, bool)) -> &str {
    assert!(c.1, "strings are quoted: {c:?}");
    &c.0
}

#[test]
fn c_sources_are_warning_free() {
    for src in ["runtime.c", "app.c", "tool.c", "harness.c"] {
        let out = Command::new("gcc")
            .args(["-fsyntax-only", "-O2", "-pthread", "-Werror"])
            .args(build_parts::WARN_FLAGS)
            .arg("-I")
            .arg(build_parts::demo_src())
            .arg("-I")
            .arg(build_parts::fixtures_src())
            .arg(build_parts::demo_src().join(src))
            .output()
            .expect("run gcc");
        assert!(
            out.status.success(),
            "{src}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn headers_are_rocprofv3_headers() {
    // The constants above must be the first lines of genuine rocprofv3 output: the reference
    // samples shipped beside the repository (../shared), or the copies kept in tests/rocpd_data.
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/reference/rocprofv3-csv");
    let dir = std::env::var_os("ROCPROF_REFERENCE_CSV_DIR")
        .map(PathBuf::from)
        .or_else(|| shared.is_dir().then_some(shared))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/rocpd_data"));
    for (file, header) in [
        ("hip_trace.csv", HDR_API),
        ("hip_runtime_trace.csv", HDR_API),
        ("kernel_trace.csv", HDR_KERNEL),
        ("memory_copy_trace.csv", HDR_COPY),
        ("memory_allocation_trace.csv", HDR_ALLOC),
    ] {
        let sample = std::fs::read_to_string(dir.join(file))
            .unwrap_or_else(|e| panic!("reference sample {}: {e}", dir.join(file).display()));
        assert_eq!(sample.lines().next(), Some(header), "{file}");
    }
}

#[test]
fn hip_and_kernel_trace_record_the_calls_made_while_attached() {
    let out = tempfile::tempdir().unwrap();
    let mut steps: Vec<String> = ["work", "1"].iter().map(|s| s.to_string()).collect();
    steps.extend(env_steps(
        out.path(),
        &["HIP_RUNTIME_API_TRACE", "KERNEL_TRACE"],
        &["ROCPROF_ATTACH_OUTPUT_GENERATION_SYNC=1"],
    ));
    steps.extend(
        [
            "attach",
            "work",
            "3",
            "thread-work",
            "2",
            "detach",
            "work",
            "1",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let run = harness(&steps);
    assert_eq!(statuses(&run, "attach "), vec![0]);
    assert_eq!(statuses(&run, "detach "), vec![0]);

    let prefix = format!("{}/{}", hostname(), run.pid);
    assert_eq!(
        files(out.path()),
        vec![
            format!("{prefix}_hip_api_trace.csv"),
            format!("{prefix}_kernel_trace.csv")
        ],
        "default name %hostname%/%pid%; disabled domains write nothing"
    );

    // HIP API: one row per call made while attached, nothing from before or after.
    let attached = window(&run, 0);
    let api = read_csv(
        &out.path().join(format!("{prefix}_hip_api_trace.csv")),
        HDR_API,
    );
    let want = count_by(attached.iter().copied(), "call ");
    assert_eq!(count_by(api.iter().map(|r| text(&r[1])), ""), want);
    for (f, per) in PER_ITERATION {
        assert_eq!(want[*f], per * 5, "{f}: 3 + 2 iterations while attached");
    }
    let main_tid = run.pid as u64;
    let mut tids = std::collections::BTreeSet::new();
    let mut corr = std::collections::BTreeSet::new();
    for r in &api {
        assert_eq!(text(&r[0]), "HIP_RUNTIME_API_EXT");
        assert_eq!(int(&r[2]), run.pid as u64);
        tids.insert(int(&r[3]));
        assert!(corr.insert(int(&r[4])), "correlation ids are unique");
        assert!(int(&r[5]) <= int(&r[6]), "start <= end in {r:?}");
    }
    assert_eq!(
        tids.len(),
        2,
        "calls from the main thread and the worker thread"
    );
    assert!(tids.contains(&main_tid));
    // Per thread the rows are in call order.
    for tid in &tids {
        let starts: Vec<u64> = api
            .iter()
            .filter(|r| int(&r[3]) == *tid)
            .map(|r| int(&r[5]))
            .collect();
        assert!(
            starts.windows(2).all(|w| w[0] <= w[1]),
            "rows of a thread are in call order"
        );
    }

    // Kernels: one row per launch, name and correlation id of the launching call.
    let kernels = read_csv(
        &out.path().join(format!("{prefix}_kernel_trace.csv")),
        HDR_KERNEL,
    );
    assert_eq!(
        count_by(kernels.iter().map(|r| text(&r[7])), ""),
        count_by(attached.iter().copied(), "kernel ")
    );
    let launches: BTreeMap<u64, (u64, u64, u64)> = api
        .iter()
        .filter(|r| text(&r[1]) == "demoLaunchKernel")
        .map(|r| (int(&r[4]), (int(&r[3]), int(&r[5]), int(&r[6]))))
        .collect();
    let mut dispatch_ids = std::collections::BTreeSet::new();
    let mut kernel_ids = BTreeMap::new();
    for r in &kernels {
        assert_eq!(text(&r[0]), "KERNEL_DISPATCH");
        assert_eq!(text(&r[1]), "Agent 1");
        assert_eq!(int(&r[2]), 1, "queue");
        assert_eq!(int(&r[3]), 0, "default stream");
        let (tid, launch_start, _) = launches[&int(&r[8])];
        assert_eq!(int(&r[4]), tid, "thread of the launch");
        assert!(dispatch_ids.insert(int(&r[5])));
        assert_eq!(
            *kernel_ids
                .entry(text(&r[7]).to_string())
                .or_insert(int(&r[6])),
            int(&r[6]),
            "one id per kernel"
        );
        let (start, end) = (int(&r[9]), int(&r[10]));
        assert!(
            start <= end && launch_start <= start,
            "kernel ran after its launch began"
        );
        for c in &r[11..16] {
            assert_eq!(int(c), 0);
        }
        let wg: Vec<u64> = r[16..19].iter().map(int).collect();
        let grid: Vec<u64> = r[19..22].iter().map(int).collect();
        assert_eq!(wg, vec![128, 1, 1]);
        assert_eq!(grid, vec![1024, 1, 1], "grid size in work-items");
    }
    assert_eq!(kernel_ids.len(), 2);
    let session = format!("/tmp/rocprofv3_attach_{}.session", run.pid);
    assert!(
        !Path::new(&session).exists(),
        "session counter removed at exit"
    );
}

#[test]
fn reattach_writes_numbered_files_and_only_the_second_session() {
    let out = tempfile::tempdir().unwrap();
    let mut steps = env_steps(
        out.path(),
        &["HIP_RUNTIME_API_TRACE", "KERNEL_TRACE"],
        &["ROCPROF_OUTPUT_FILE_NAME=trace"],
    );
    steps.extend(
        [
            "attach", "work", "2", "detach", "work", "1", "attach", "work", "1", "detach",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let run = harness(&steps);
    assert_eq!(statuses(&run, "attach "), vec![0, 0]);
    assert_eq!(statuses(&run, "detach "), vec![0, 0]);
    let p = run.pid;
    // No %pid% in the name: `_%pid%` is appended, then `_<session>` for a reattach.
    assert_eq!(
        files(out.path()),
        vec![
            format!("trace_{p}_1_hip_api_trace.csv"),
            format!("trace_{p}_1_kernel_trace.csv"),
            format!("trace_{p}_hip_api_trace.csv"),
            format!("trace_{p}_kernel_trace.csv"),
        ]
    );
    for (n, suffix, iterations) in [(0, "", 2), (1, "_1", 1)] {
        let api = read_csv(
            &out.path()
                .join(format!("trace_{p}{suffix}_hip_api_trace.csv")),
            HDR_API,
        );
        let want = count_by(window(&run, n), "call ");
        assert_eq!(
            count_by(api.iter().map(|r| text(&r[1])), ""),
            want,
            "session {n}"
        );
        assert_eq!(want["demoMalloc"], 2 * iterations);
        let kernels = read_csv(
            &out.path()
                .join(format!("trace_{p}{suffix}_kernel_trace.csv")),
            HDR_KERNEL,
        );
        assert_eq!(kernels.len(), 2 * iterations);
    }
}

#[test]
fn memory_copy_and_allocation_traces() {
    let out = tempfile::tempdir().unwrap();
    let mut steps = env_steps(
        out.path(),
        &["MEMORY_COPY_TRACE", "MEMORY_ALLOCATION_TRACE"],
        &["ROCPROF_OUTPUT_FILE_NAME=mem/%pid%"],
    );
    steps.extend(
        ["attach", "work", "2", "detach"]
            .iter()
            .map(|s| s.to_string()),
    );
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let run = harness(&steps);
    let p = run.pid;
    assert_eq!(
        files(out.path()),
        vec![
            format!("mem/{p}_memory_allocation_trace.csv"),
            format!("mem/{p}_memory_copy_trace.csv")
        ],
        "no hip/kernel files when those services are off"
    );
    let copies = read_csv(
        &out.path().join(format!("mem/{p}_memory_copy_trace.csv")),
        HDR_COPY,
    );
    let dirs: Vec<(&str, &str, &str)> = copies
        .iter()
        .map(|r| (text(&r[1]), text(&r[3]), text(&r[4])))
        .collect();
    let h2d = ("MEMORY_COPY_HOST_TO_DEVICE", "Agent 0", "Agent 1");
    let d2h = ("MEMORY_COPY_DEVICE_TO_HOST", "Agent 1", "Agent 0");
    assert_eq!(dirs, vec![h2d, d2h, h2d, d2h]);
    for r in &copies {
        assert_eq!(text(&r[0]), "MEMORY_COPY");
        assert_eq!(int(&r[2]), 0);
        assert!(int(&r[6]) <= int(&r[7]));
    }
    let allocs = read_csv(
        &out.path()
            .join(format!("mem/{p}_memory_allocation_trace.csv")),
        HDR_ALLOC,
    );
    assert_eq!(allocs.len(), 8, "2 x (2 allocations + 2 frees)");
    let mut live = std::collections::BTreeSet::new();
    for r in &allocs {
        assert_eq!(text(&r[0]), "MEMORY_ALLOCATION");
        let addr = text(&r[4]);
        assert!(
            addr.len() == 18
                && addr.starts_with("0x")
                && addr[2..]
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        match text(&r[1]) {
            "MEMORY_ALLOCATION_ALLOCATE" => {
                assert_eq!(text(&r[2]), "Agent 1");
                assert_eq!(int(&r[3]), 4000);
                assert!(live.insert(addr.to_string()));
            }
            "MEMORY_ALLOCATION_FREE" => {
                assert_eq!(text(&r[2]), "", "FREE has an empty agent");
                assert_eq!(int(&r[3]), 0);
                assert!(live.remove(addr), "freed address was allocated");
            }
            other => panic!("operation {other}"),
        }
        assert!(int(&r[6]) <= int(&r[7]));
    }
    assert!(live.is_empty());
}

#[test]
fn non_csv_format_still_writes_csv_with_a_note_and_async_output_completes() {
    let out = tempfile::tempdir().unwrap();
    let mut steps = env_steps(
        out.path(),
        &["HIP_RUNTIME_API_TRACE"],
        &["ROCPROF_OUTPUT_FORMAT=rocpd"],
    );
    // No ROCPROF_ATTACH_OUTPUT_GENERATION_SYNC: written on a thread, complete when the process exits.
    steps.extend(
        ["attach", "work", "1", "detach"]
            .iter()
            .map(|s| s.to_string()),
    );
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let run = harness(&steps);
    let notes: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("only writes CSV"))
        .collect();
    assert_eq!(notes.len(), 1, "one note: {}", run.stderr);
    let f = out
        .path()
        .join(format!("{}/{}_hip_api_trace.csv", hostname(), run.pid));
    assert_eq!(read_csv(&f, HDR_API).len(), 9);
}

#[test]
fn detach_reports_a_failed_write() {
    let out = tempfile::tempdir().unwrap();
    let blocker = out.path().join("not-a-dir");
    std::fs::write(&blocker, b"").unwrap();
    let mut steps = env_steps(
        &blocker,
        &["HIP_RUNTIME_API_TRACE"],
        &["ROCPROF_ATTACH_OUTPUT_GENERATION_SYNC=1"],
    );
    steps.extend(
        ["attach", "work", "1", "detach"]
            .iter()
            .map(|s| s.to_string()),
    );
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let run = harness(&steps);
    assert_eq!(statuses(&run, "attach "), vec![0]);
    assert_ne!(statuses(&run, "detach "), vec![0], "stderr: {}", run.stderr);
}
