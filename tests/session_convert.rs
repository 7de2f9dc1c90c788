//! After detach, formats the tool did not write are produced locally from its rocpd output.

use crate::common;
use crate::rocpd_common;

use common::{rocprof_attach, tool_lib, Target, TargetOpts};

#[test]
fn csv_is_converted_from_the_tools_rocpd_output_and_summary_printed() {
    let scratch = tempfile::tempdir().unwrap();
    let db = rocpd_common::full_db(&scratch.path().join("source.db"), 4242, 7);
    let t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_TOOL_COPY_DB".into(), db.to_str().unwrap().into())],
        ..Default::default()
    });
    let out = t.dir.path().join("out");
    let pid = t.pid.to_string();
    let tool = tool_lib();
    let args = [
        "--attach",
        &pid,
        "--kernel-trace",
        "--hip-trace",
        "--output-format",
        "csv",
        "rocpd",
        "--summary",
        "-d",
        out.to_str().unwrap(),
        "-o",
        "run",
        "-t",
        tool.to_str().unwrap(),
        "--attach-duration-msec",
        "50",
    ];
    let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    let db_out = out.join(format!("run_{pid}_results.db"));
    let csv = out.join(format!("run_{pid}_kernel_trace.csv"));
    assert!(db_out.exists(), "{stdout}");
    assert!(csv.exists(), "kernel trace converted locally: {stdout}");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(
        text.starts_with("\"Kind\",\"Agent_Id\",\"Queue_Id\""),
        "{text}"
    );
    assert_eq!(text.lines().count(), 4, "3 dispatches + header: {text}");
    assert!(
        stdout.contains(&csv.display().to_string()),
        "converted file reported: {stdout}"
    );
    assert!(
        stdout.contains("add<float>") || stderr.contains("add<float>"),
        "summary names the top kernel:\n{stdout}\n{stderr}"
    );
}

#[test]
fn pftrace_and_otf2_are_converted_from_the_tools_rocpd_output() {
    let scratch = tempfile::tempdir().unwrap();
    let db = rocpd_common::full_db(&scratch.path().join("source.db"), 4242, 7);
    let t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_TOOL_COPY_DB".into(), db.to_str().unwrap().into())],
        ..Default::default()
    });
    let out = t.dir.path().join("out");
    let pid = t.pid.to_string();
    let tool = tool_lib();
    let args = [
        "--attach",
        &pid,
        "--kernel-trace",
        "--output-format",
        "pftrace",
        "otf2",
        "rocpd",
        "-d",
        out.to_str().unwrap(),
        "-o",
        "run",
        "-t",
        tool.to_str().unwrap(),
        "--attach-duration-msec",
        "50",
    ];
    let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
    // Without OTF2 in this build, the OTF2 output is missing: exit code 12 and a warning.
    assert_eq!(code, if cfg!(have_otf2) { 0 } else { 12 }, "{stderr}");
    let trace = out.join(format!("run_{pid}_results.pftrace"));
    assert!(
        trace.exists(),
        "Perfetto trace converted locally: {stdout}\n{stderr}"
    );
    assert!(stdout.contains(&trace.display().to_string()), "{stdout}");
    let bytes = std::fs::read(&trace).unwrap();
    assert_eq!(
        bytes[0], 0x0a,
        "a Trace message starts with its first packet (field 1)"
    );
    let archive = out.join(format!("run_{pid}_results.otf2"));
    if cfg!(have_otf2) {
        assert!(
            archive.exists(),
            "OTF2 archive converted locally: {stdout}\n{stderr}"
        );
    } else {
        assert!(!archive.exists());
        assert!(stderr.contains("libopen-trace-format2-dev"), "{stderr}");
    }
}
