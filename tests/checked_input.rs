//! Issue 19, item 8: input is checked before it reaches the target (relative tool paths, the
//! default tool's resolution in `--check`, filters, ranges and counters), and converted files
//! belong to the target's user.

use crate::common;
use crate::prereq;
use crate::rocpd_common;

use common::{attach_pairs, hex, records, rocprof_attach, tool_lib, Target, TargetOpts};
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_relative_tool_path_is_made_absolute_against_our_directory() {
    // The stand-in register fails the attach (6) when it cannot load the tool, like the real one.
    let t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_REQUIRE_TOOL".into(), "1".into())],
        ..Default::default()
    });
    let out = t.dir.path().join("out");
    let pid = t.pid.to_string();
    let tool = std::fs::canonicalize(tool_lib()).unwrap();
    let cwd = std::fs::canonicalize(std::env::current_dir().unwrap()).unwrap();
    let rel = format!(
        "./{}",
        s(tool.strip_prefix(&cwd).expect("tool under the checkout"))
    );
    let args = [
        "--attach",
        &pid,
        "--kernel-trace",
        "-d",
        s(&out),
        "-o",
        "rel",
        "-t",
        &rel,
        "--attach-duration-msec",
        "50",
    ];
    let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    let recs = records(&t);
    assert_eq!(
        recs[0].get("tool"),
        hex(s(&tool)),
        "the absolute path is sent"
    );
    assert!(
        out.join(format!("rel_{pid}_standin_trace.csv")).is_file(),
        "{stdout}"
    );

    // One that does not exist here is refused before anything reaches the target.
    let args = [
        "--attach",
        &pid,
        "--kernel-trace",
        "-t",
        "./no/such/libtool.so",
    ];
    let (code, _, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("./no/such/libtool.so") && stderr.contains("absolute path"),
        "{stderr}"
    );
    assert_eq!(records(&t).len(), 2, "untouched: {:?}", records(&t));
}

#[test]
fn check_predicts_that_the_default_tool_cannot_be_found() {
    // A register with no tool beside it (the harness's has an inert one).
    let bare = tempfile::tempdir().unwrap();
    let reg = bare.path().join("librocprofiler-register.so.0");
    std::fs::copy(common::register_lib(), &reg).unwrap();
    let t = Target::spawn(TargetOpts {
        env: vec![
            ("STANDIN_REQUIRE_TOOL".into(), "1".into()),
            ("STANDIN_REGISTER_LIB".into(), s(&reg).into()),
        ],
        ..Default::default()
    });
    let pid = t.pid.to_string();
    let (code, stdout, stderr) = rocprof_attach(&["--check", "-p", &pid], &[]).finish();
    assert_eq!(code, 4, "{stderr}\n{stdout}");
    assert!(
        stderr.contains("librocprofiler-sdk-tool.so.1") && stderr.contains("-t"),
        "{stderr}"
    );
    // The attach agrees, and refuses before touching the target.
    let (code, _, stderr) = rocprof_attach(&["-p", &pid, "--kernel-trace"], &[]).finish();
    assert_eq!(code, 4, "{stderr}");
    assert!(records(&t).is_empty(), "{:?}", records(&t));

    // Where the target's loader finds it (its LD_LIBRARY_PATH), the check says attachable and
    // the attach succeeds.
    let libs = tempfile::tempdir().unwrap();
    std::fs::copy(tool_lib(), libs.path().join("librocprofiler-sdk-tool.so.1")).unwrap();
    let t = Target::spawn(TargetOpts {
        env: vec![
            ("STANDIN_REQUIRE_TOOL".into(), "1".into()),
            ("STANDIN_REGISTER_LIB".into(), s(&reg).into()),
            ("LD_LIBRARY_PATH".into(), s(libs.path()).into()),
        ],
        ..Default::default()
    });
    let pid = t.pid.to_string();
    let (code, stdout, stderr) = rocprof_attach(&["--check", "-p", &pid], &[]).finish();
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    let out = t.dir.path().join("out");
    let args = [
        "-p",
        &pid,
        "--kernel-trace",
        "-d",
        s(&out),
        "--attach-duration-msec",
        "50",
    ];
    let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    assert_eq!(records(&t)[0].get("status"), "0");
}

#[test]
fn filters_ranges_and_counters_are_validated_with_the_rule() {
    let cases: [(&[&str], &str); 6] = [
        (&["--kernel-include-regex", "("], "--kernel-include-regex"),
        (
            &["--kernel-exclude-regex", "[abc"],
            "--kernel-exclude-regex",
        ),
        (
            &["--kernel-iteration-range", "abc"],
            "--kernel-iteration-range",
        ),
        (
            &["--kernel-iteration-range", "5-1"],
            "--kernel-iteration-range",
        ),
        (&["--pmc", ""], "--pmc"),
        (&["--kernel-trace", "--pmc", "SQ_WAVES", ","], "--pmc"),
    ];
    // A real target: unchecked, these values would reach it.
    let t = Target::spawn(TargetOpts::default());
    let out = t.dir.path().join("out");
    let (pid, tool) = (t.pid.to_string(), tool_lib());
    for (extra, option) in cases {
        let mut args = vec!["-p", &pid, "-d", s(&out), "-t", s(&tool), "--kernel-trace"];
        args.extend(["--attach-duration-msec", "50"]);
        args.extend_from_slice(extra);
        let (code, _, stderr) = rocprof_attach(&args, &[]).finish();
        assert_eq!(code, 2, "{extra:?}: {stderr}");
        assert!(
            stderr.contains(option) && stderr.contains("Rule:"),
            "{extra:?}: {stderr}"
        );
        assert!(records(&t).is_empty(), "{extra:?} reached the target");
    }
    // Valid values pass, and reach the target as given.
    let args = [
        "-p",
        &pid,
        "--kernel-trace",
        "-d",
        s(&out),
        "-t",
        s(&tool),
        "--kernel-include-regex",
        "^(gemm|conv)_.*",
        "--kernel-iteration-range",
        "[1-5],[7]",
        "--attach-duration-msec",
        "50",
    ];
    let (code, _, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    let env = attach_pairs(&t, 0);
    assert_eq!(env["ROCPROF_KERNEL_FILTER_RANGE"], "[1-5],[7]");
    assert_eq!(
        env["ROCPROF_KERNEL_FILTER_INCLUDE_REGEX"],
        "^(gemm|conv)_.*"
    );
}

#[test]
fn converted_files_belong_to_the_targets_user() {
    if !prereq::root("to run the target as another user") {
        return;
    }
    // The target (nobody) copies this database as its rocpd output.
    use std::os::unix::fs::PermissionsExt;
    let scratch = common::public_dir();
    let db = rocpd_common::full_db(&scratch.path().join("source.db"), 4242, 7);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let t = Target::spawn(TargetOpts {
        uid: Some(65534),
        env: vec![("STANDIN_TOOL_COPY_DB".into(), s(&db).into())],
        ..Default::default()
    });
    let out = t.dir.path().join("out");
    let tool_dir = common::public_dir();
    let tool = common::public_copy(&tool_lib(), tool_dir.path());
    let pid = t.pid.to_string();
    let args = [
        "-p",
        &pid,
        "--kernel-trace",
        "-f",
        "csv",
        "json",
        "rocpd",
        "-d",
        s(&out),
        "-o",
        "run",
        "-t",
        s(&tool),
        "--attach-duration-msec",
        "50",
    ];
    let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    use std::os::unix::fs::MetadataExt;
    let db_out = out.join(format!("run_{pid}_results.db"));
    assert_eq!(
        std::fs::metadata(&db_out).unwrap().uid(),
        65534,
        "the tool's own output"
    );
    let mut converted = 0;
    for e in std::fs::read_dir(&out).unwrap() {
        let p = e.unwrap().path();
        let ext = p.extension().map(|e| e.to_string_lossy().into_owned());
        if matches!(ext.as_deref(), Some("csv") | Some("json")) {
            let m = std::fs::metadata(&p).unwrap();
            assert_eq!((m.uid(), m.gid()), (65534, 65534), "{}", p.display());
            converted += 1;
        }
    }
    assert!(converted >= 2, "{stdout}");
}
