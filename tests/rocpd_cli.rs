//! `rocprof-attach convert` / `summary` as a user runs them: bad input, bad output locations,
//! exit codes, one-line errors, and no half-written files.

use crate::rocpd_common;

use std::path::Path;
use std::process::{Command, Output};

use rocpd_common::*;

const BAD_INPUT: i32 = 10;
const FAILURE: i32 = 1;
const USAGE: i32 = 2;

fn convert_raw(input: &Path, dir: &Path) -> Output {
    run(&[
        "convert",
        "-i",
        &input.display().to_string(),
        "-f",
        "csv",
        "json",
        "-d",
        &dir.display().to_string(),
        "-o",
        "out",
    ])
}

/// Asserts exit code, a single `rocprof-attach: error:` line containing `needle`, and no output.
fn assert_fails(out: &Output, code: i32, needle: &str, dir: &Path) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("rocprof-attach: error: "), "{err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
    let left: Vec<String> = listing(dir)
        .into_iter()
        .filter(|n| n.starts_with("out_") || n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "nothing half-written may remain: {left:?}");
}

#[test]
fn not_a_sqlite_file() {
    let tmp = tempdir();
    let input = tmp.path().join("notes.db");
    std::fs::write(&input, "this is a text file, not a database\n".repeat(10)).expect("write");
    assert_fails(
        &convert_raw(&input, tmp.path()),
        BAD_INPUT,
        "not a SQLite database",
        tmp.path(),
    );
    let empty = tmp.path().join("empty.db");
    std::fs::write(&empty, "").expect("write");
    assert_fails(
        &convert_raw(&empty, tmp.path()),
        BAD_INPUT,
        "not a SQLite database",
        tmp.path(),
    );
}

#[test]
fn missing_input_file() {
    let tmp = tempdir();
    assert_fails(
        &convert_raw(&tmp.path().join("nope.db"), tmp.path()),
        BAD_INPUT,
        "no such file",
        tmp.path(),
    );
}

#[test]
fn sqlite_but_not_rocpd() {
    let tmp = tempdir();
    let input = tmp.path().join("other.db");
    let conn = rusqlite::Connection::open(&input).expect("open");
    conn.execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")
        .expect("ddl");
    drop(conn);
    assert_fails(
        &convert_raw(&input, tmp.path()),
        BAD_INPUT,
        "not a rocpd one",
        tmp.path(),
    );
}

#[test]
fn unknown_schema_version() {
    let tmp = tempdir();
    let input = full_db(&tmp.path().join("v4.db"), 1, 1);
    let conn = rusqlite::Connection::open(&input).expect("open");
    let table: String = conn
        .query_row(
            "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'rocpd_metadata%'",
            [],
            |r| r.get(0),
        )
        .expect("metadata table");
    conn.execute(
        &format!("UPDATE \"{table}\" SET value = '4' WHERE tag = 'schema_version'"),
        [],
    )
    .expect("update");
    drop(conn);
    assert_fails(
        &convert_raw(&input, tmp.path()),
        BAD_INPUT,
        "unsupported rocpd schema version '4'",
        tmp.path(),
    );
}

#[test]
fn truncated_database() {
    let tmp = tempdir();
    let input = full_db(&tmp.path().join("cut.db"), 1, 1);
    let len = std::fs::metadata(&input).expect("stat").len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&input)
        .expect("open");
    f.set_len(len / 2).expect("truncate");
    drop(f);
    assert_fails(
        &convert_raw(&input, tmp.path()),
        BAD_INPUT,
        "truncated",
        tmp.path(),
    );
}

#[test]
fn output_directory_below_a_regular_file() {
    let tmp = tempdir();
    let input = full_db(&tmp.path().join("a.db"), 1, 1);
    let file = tmp.path().join("plain.txt");
    std::fs::write(&file, "x").expect("write");
    let out = convert_raw(&input, &file.join("sub"));
    assert_fails(
        &out,
        FAILURE,
        "cannot create the output directory",
        tmp.path(),
    );
    let out = convert_raw(&input, &file);
    assert_fails(&out, FAILURE, "is not a directory", tmp.path());
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "x");
}

#[test]
fn output_directory_that_cannot_be_created_even_by_root() {
    let tmp = tempdir();
    let input = full_db(&tmp.path().join("a.db"), 1, 1);
    let out = convert_raw(&input, Path::new("/proc/rocprof-attach-test-out"));
    assert_fails(
        &out,
        FAILURE,
        "cannot create the output directory",
        tmp.path(),
    );
}

#[test]
fn output_that_would_overwrite_an_input_is_refused() {
    let tmp = tempdir();
    let built = full_db(&tmp.path().join("a.db"), 1, 1);
    let input = tmp.path().join("out_kernel_trace.csv");
    std::fs::rename(&built, &input).expect("rename");
    let before = std::fs::read(&input).expect("read");
    let out = convert_raw(&input, tmp.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(USAGE), "{err}");
    assert!(
        err.contains("would overwrite the input") && err.lines().count() == 1,
        "{err}"
    );
    assert_eq!(std::fs::read(&input).expect("read"), before);
}

#[test]
fn full_disk_midway_leaves_nothing_behind() {
    // A file-size limit makes writes fail with EFBIG part-way, like a full disk would.
    let tmp = tempdir();
    let db = tmp.path().join("big.db");
    let mut w = writer(&db, 1, 1);
    agents(&mut w, (0, 0), (1, 1));
    kernel(&mut w, 1, 1, &"k".repeat(200), 8, 0, 16, 0);
    for i in 1..=2000 {
        w.kernel_dispatch(&rocprof_attach::rocpd::model::KernelDispatch {
            dispatch_id: i,
            tid: 1,
            agent_id: 1,
            kernel_id: 1,
            start: i * 10,
            end: i * 10 + 5,
            workgroup: [1, 1, 1],
            grid: [1, 1, 1],
            ..Default::default()
        })
        .expect("dispatch");
    }
    w.finish().expect("finish");
    let out_dir = tmp.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    // The shell sets a 64 KiB file-size limit (ulimit -f counts 512-byte blocks) and ignores
    // SIGXFSZ (ignored signals stay ignored across exec), then runs the converter: a "full disk"
    // for large files without mounting anything.
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "trap '' XFSZ; ulimit -f 128; exec \"$@\"", "sh"])
        .arg(env!("CARGO_BIN_EXE_rocprof-attach"))
        .args([
            "convert",
            "-i",
            &db.display().to_string(),
            "-f",
            "csv",
            "json",
            "-d",
            &out_dir.display().to_string(),
        ]);
    let out = cmd.output().expect("run");
    assert_fails(&out, FAILURE, "File too large", &out_dir);
    assert!(listing(&out_dir).is_empty(), "{:?}", listing(&out_dir));
}

#[test]
fn usage_errors_are_one_line() {
    let out = run(&["convert", "-f", "csv"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(USAGE));
    assert!(
        err.starts_with("rocprof-attach: error: ") && err.lines().count() == 1,
        "{err}"
    );
    let out = run(&["convert", "-i", "x.db", "-f", "pdf"]);
    assert_eq!(out.status.code(), Some(USAGE));
    let help = run(&["convert", "--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("--output-format"));
}

#[test]
fn the_same_database_twice_is_refused() {
    let tmp = tempdir();
    let a = full_db(&tmp.path().join("a.db"), 1, 1);
    let copy = tmp.path().join("copy.db");
    std::fs::copy(&a, &copy).expect("copy");
    let out = run(&[
        "convert",
        "-i",
        &a.display().to_string(),
        &copy.display().to_string(),
        "-d",
        &tmp.path().display().to_string(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(USAGE), "{err}");
    assert!(err.contains("pass each database once"), "{err}");
}

#[test]
fn convert_prints_the_files_it_wrote() {
    let tmp = tempdir();
    let a = full_db(&tmp.path().join("a.db"), 1, 1);
    let out_dir = tmp.path().join("o");
    let out = convert(&[&a], &out_dir, &["csv", "json"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut printed: Vec<String> = stdout
        .lines()
        .map(|l| {
            Path::new(l)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    printed.sort();
    assert_eq!(printed, listing(&out_dir));
    assert_eq!(
        listing(&out_dir),
        [
            "out_agent_info.csv",
            "out_counter_collection.csv",
            "out_hip_api_trace.csv",
            "out_kernel_trace.csv",
            "out_marker_api_trace.csv",
            "out_memory_allocation_trace.csv",
            "out_memory_copy_trace.csv",
            "out_results.json",
            "out_scratch_memory_trace.csv"
        ]
    );
    // agent_info.csv as rocprofv3 writes it: its 53-column header (output-formats.md, 2.3) and
    // one row per agent of the database.
    let info = std::fs::read_to_string(out_dir.join("out_agent_info.csv")).unwrap();
    let mut lines = info.lines();
    assert_eq!(
        lines.next(),
        Some(
            r#""Node_Id","Logical_Node_Id","Agent_Type","Cpu_Cores_Count","Simd_Count","Cpu_Core_Id_Base","Simd_Id_Base","Max_Waves_Per_Simd","Lds_Size_In_Kb","Gds_Size_In_Kb","Num_Gws","Wave_Front_Size","Num_Xcc","Cu_Count","Array_Count","Num_Shader_Banks","Simd_Arrays_Per_Engine","Cu_Per_Simd_Array","Simd_Per_Cu","Max_Slots_Scratch_Cu","Gfx_Target_Version","Vendor_Id","Device_Id","Location_Id","Domain","Drm_Render_Minor","Num_Sdma_Engines","Num_Sdma_Xgmi_Engines","Num_Sdma_Queues_Per_Engine","Num_Cp_Queues","Max_Engine_Clk_Ccompute","Max_Engine_Clk_Fcompute","Sdma_Fw_Version","Fw_Version","Capability","Cu_Per_Engine","Max_Waves_Per_Cu","Family_Id","Workgroup_Max_Size","Grid_Max_Size","Local_Mem_Size","Hive_Id","Gpu_Id","Workgroup_Max_Dim_X","Workgroup_Max_Dim_Y","Workgroup_Max_Dim_Z","Grid_Max_Dim_X","Grid_Max_Dim_Y","Grid_Max_Dim_Z","Name","Vendor_Name","Product_Name","Model_Name""#
        )
    );
    let agents: i64 = rusqlite::Connection::open(&a)
        .unwrap()
        .query_row("SELECT count(*) FROM rocpd_info_agent", [], |r| r.get(0))
        .unwrap();
    assert!(agents > 0);
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len() as i64, agents, "{info}");
    assert!(rows.iter().all(|r| r.split(',').count() == 53), "{info}");
}

#[test]
fn summary_into_a_pipe_keeps_every_column_and_full_names_and_json_is_one_document() {
    let tmp = tempdir();
    let a = full_db(&tmp.path().join("a.db"), 1, 1);
    let out = Command::new(env!("CARGO_BIN_EXE_rocprof-attach"))
        .args(["summary", "-i", &a.display().to_string()])
        .env_remove("COLUMNS")
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for header in [
        "NAME",
        "DOMAIN",
        "CALLS",
        "AVERAGE (nsec)",
        "MIN (nsec)",
        "MAX (nsec)",
        "STDDEV",
    ] {
        assert!(text.contains(header), "{header} in\n{text}");
    }
    assert!(!text.contains('…'), "no name is cut in a pipe:\n{text}");
    assert!(text.contains("void add<float>(float*, int)"), "{text}");

    let out = Command::new(env!("CARGO_BIN_EXE_rocprof-attach"))
        .args(["summary", "-i", &a.display().to_string(), "--json"])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["command"], "summary");
    assert_eq!(doc["exit_code"], 0);
    let kernels = doc["domains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["domain"] == "KERNEL_DISPATCH")
        .expect("kernel domain");
    let add = kernels["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "void add<float>(float*, int)")
        .expect("add row");
    assert_eq!(
        (add["calls"].as_u64(), add["total_ns"].as_u64()),
        (Some(2), Some(40))
    );
    assert_eq!(
        (add["min_ns"].as_u64(), add["max_ns"].as_u64()),
        (Some(10), Some(30))
    );
}

#[test]
fn summary_table_fits_the_terminal_and_writes_stats() {
    let tmp = tempdir();
    let a = full_db(&tmp.path().join("a.db"), 1, 1);
    for width in [72usize, 100, 220] {
        let out = Command::new(env!("CARGO_BIN_EXE_rocprof-attach"))
            .args(["summary", "-i", &a.display().to_string(), "--top", "1"])
            .env("COLUMNS", width.to_string())
            .output()
            .expect("run");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for l in text.lines() {
            assert!(l.chars().count() <= width, "{width}: {l}");
        }
        for needle in [
            "ROCPROFV3 KERNEL_DISPATCH SUMMARY:",
            "ROCPROFV3 HIP_API SUMMARY:",
            "ROCPROFV3 SUMMARY:",
            "hipLaunchKernel",
            "more not shown",
        ] {
            assert!(text.contains(needle), "{needle} in\n{text}");
        }
    }
    let stats = tmp.path().join("stats");
    let out = run(&[
        "summary",
        "-i",
        &a.display().to_string(),
        "-d",
        &stats.display().to_string(),
        "-o",
        "s",
    ]);
    assert!(out.status.success());
    let kernel = read(&stats, "s_kernel_stats.csv");
    let lines: Vec<&str> = kernel.lines().collect();
    assert_eq!(lines[0], "\"Name\",\"Calls\",\"TotalDurationNs\",\"AverageNs\",\"Percentage\",\"MinNs\",\"MaxNs\",\"StdDev\"");
    // add: durations 10 and 30; mul: 20.
    assert_eq!(
        lines[1],
        "\"void add<float>(float*, int)\",2,40,20.000000,66.67,10,30,14.142136"
    );
    assert_eq!(
        lines[2],
        "\"mul(float*, int)\",1,20,20.000000,33.33,20,20,0.00000000e+00"
    );
    assert!(listing(&stats).contains(&"s_domain_stats.csv".to_owned()));
}

#[test]
fn summary_json_on_bad_input_is_still_one_document_with_the_error() {
    let tmp = tempdir();
    let bad = tmp.path().join("bad.db");
    std::fs::write(&bad, "not a database").unwrap();
    let missing = tmp.path().join("missing.db");
    for input in [&bad, &missing] {
        let out = Command::new(env!("CARGO_BIN_EXE_rocprof-attach"))
            .args(["summary", "-i", &input.display().to_string(), "--json"])
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(10), "{err}");
        let doc: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("one JSON document on stdout");
        assert_eq!(doc["command"], "summary");
        assert_eq!(doc["exit_code"], 10);
        assert_eq!(doc["exit_name"], "bad_input");
        let msg = doc["error"].as_str().expect("error text");
        assert!(msg.contains(&input.display().to_string()), "{msg}");
        assert!(err.contains(msg), "the same message on stderr: {err}");
        assert_eq!(doc["domains"], serde_json::json!([]));
    }
}

#[test]
fn convert_never_overwrites_existing_files_without_force() {
    let tmp = tempdir();
    let a = full_db(&tmp.path().join("a.db"), 1, 1);
    let out_dir = tmp.path().join("o");
    std::fs::create_dir(&out_dir).unwrap();
    // The profiler's own CSV beside its database, under the name a conversion would use.
    let own = out_dir.join("out_kernel_trace.csv");
    std::fs::write(&own, "the tool's own file\n").unwrap();
    let (input, dir) = (a.display().to_string(), out_dir.display().to_string());
    let out = run(&[
        "convert", "-i", &input, "-f", "csv", "-d", &dir, "-o", "out",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(USAGE), "{err}");
    assert!(err.contains(&own.display().to_string()), "{err}");
    assert!(
        err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&own).unwrap(),
        "the tool's own file\n",
        "untouched"
    );
    assert_eq!(
        listing(&out_dir),
        ["out_kernel_trace.csv"],
        "nothing written"
    );
    convert(&[&a], &out_dir, &["csv"], &["--force"]);
    assert!(std::fs::read_to_string(&own)
        .unwrap()
        .starts_with("\"Kind\""));
}
