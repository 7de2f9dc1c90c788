//! `query` and `summary` in every format, time windows, and the HTML report rendered in headless
//! Chromium (Debian's chromium, installed by scripts/ci-deps.sh).

use crate::rocpd_common;

use std::path::Path;
use std::process::Command;

use rocpd_common::*;

fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs and expects a one-line error with `code`; returns the message.
fn fails(args: &[&str], code: i32) -> String {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: not one line: {err}"
    );
    assert!(err.starts_with("rocprof-attach: error: "), "{err}");
    err
}

#[test]
fn query_unions_the_views_of_several_databases() {
    let dir = tempdir();
    let a = full_db(&dir.path().join("a.db"), 100, 1);
    let b = full_db(&dir.path().join("b.db"), 200, 2);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let sql = "SELECT pid, COUNT(*) AS n FROM kernels GROUP BY pid ORDER BY pid";
    let csv = ok(&["query", "-i", a, b, "--query", sql, "--format", "csv"]);
    assert_eq!(csv, "pid,n\n100,3\n200,3\n");
    let json: serde_json::Value = serde_json::from_str(&ok(&[
        "query", "-i", a, b, "--query", sql, "--format", "json",
    ]))
    .unwrap();
    assert_eq!(json[1]["pid"], 200);
    assert_eq!(json[1]["n"], 3);
    let md = ok(&[
        "query",
        "-i",
        a,
        "--query",
        "SELECT name FROM top_kernels ORDER BY name",
        "--format",
        "md",
    ]);
    assert!(
        md.contains("| name |") && md.contains("| mul(float*, int) |"),
        "{md}"
    );
    let console = ok(&[
        "query",
        "-i",
        a,
        "--query",
        "SELECT name, total_calls FROM top_kernels ORDER BY name",
    ]);
    assert!(
        console.contains("void add<float>(float*, int)") && console.contains("(2 rows)"),
        "{console}"
    );
    let html = ok(&[
        "query",
        "-i",
        a,
        "--query",
        "SELECT '<b>' AS x",
        "--format",
        "html",
    ]);
    assert!(
        html.contains("&lt;b&gt;") && !html.contains("<script"),
        "{html}"
    );
    // The databases are attached read-only.
    let err = fails(
        &["query", "-i", a, "--query", "DELETE FROM rocpd_string"],
        2,
    );
    assert!(err.contains("SQL error"), "{err}");
}

#[test]
fn query_script_and_sql_errors_with_their_position() {
    let dir = tempdir();
    let a = full_db(&dir.path().join("a.db"), 100, 1);
    let a = a.to_str().unwrap();
    let script = dir.path().join("s.sql");
    std::fs::write(
        &script,
        "CREATE TEMP VIEW long_kernels AS SELECT * FROM kernels WHERE duration > 15;\nSELECT COUNT(*) AS n FROM long_kernels;\n",
    )
    .unwrap();
    let out = ok(&[
        "query",
        "-i",
        a,
        "--script",
        script.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    assert_eq!(out, "n\n2\n");
    let err = fails(&["query", "-i", a, "--query", "SELECT *\nFORM kernels"], 2);
    assert!(
        err.contains("line 2, column 1") && err.contains("FORM"),
        "{err}"
    );
    let err = fails(
        &["query", "-i", a, "--query", "SELECT nope FROM kernels"],
        2,
    );
    assert!(err.contains("no such column: nope"), "{err}");
    let not_db = dir.path().join("x.txt");
    std::fs::write(&not_db, "hello").unwrap();
    let err = fails(
        &[
            "query",
            "-i",
            not_db.to_str().unwrap(),
            "--query",
            "SELECT 1",
        ],
        10,
    );
    assert!(err.contains("not a SQLite database"), "{err}");
}

#[test]
fn windows_select_exactly_their_events() {
    let dir = tempdir();
    let a = full_db(&dir.path().join("a.db"), 100, 1);
    let a = a.to_str().unwrap();
    // Kernels run [1050,1060], [2050,2070], [3050,3080]; API calls [1000,1100], [2000,2200], [3000,3300].
    let q = |extra: &[&str]| -> String {
        let mut args = vec![
            "query",
            "-i",
            a,
            "--query",
            "SELECT id FROM rocpd_kernel_dispatch ORDER BY id",
            "--format",
            "csv",
        ];
        args.extend_from_slice(extra);
        ok(&args)
    };
    assert_eq!(q(&["--start", "2000", "--end", "3079"]), "id\n2\n");
    assert_eq!(
        q(&["--start", "2000", "--end", "3079", "--inclusive"]),
        "id\n2\n3\n"
    );
    assert_eq!(q(&["--start", "2060"]), "id\n3\n");
    assert_eq!(q(&["--start", "2060", "--inclusive"]), "id\n2\n3\n");
    // Percentages of the span [1000, 8300]: 25% is 2825.
    assert_eq!(q(&["--end", "25%"]), "id\n1\n2\n");
    // Markers: the only one, "checkpoint \"A\"", is at 5000.
    assert_eq!(q(&["--end-marker", "checkpoint \"A\""]), "id\n1\n2\n3\n");
    let err = fails(
        &[
            "query",
            "-i",
            a,
            "--query",
            "SELECT 1",
            "--start-marker",
            "nope",
        ],
        2,
    );
    assert!(
        err.contains("unknown marker 'nope'") && err.contains("checkpoint"),
        "{err}"
    );
    let err = fails(
        &[
            "query", "-i", a, "--query", "SELECT 1", "--start", "9000", "--end", "8000",
        ],
        2,
    );
    assert!(err.contains("empty time window"), "{err}");
    let err = fails(
        &[
            "query", "-i", a, "--query", "SELECT 1", "--start", "100", "--end", "200",
        ],
        2,
    );
    assert!(
        err.contains("empty time window") && err.contains("selects no events"),
        "{err}"
    );
    let err = fails(&["summary", "-i", a, "--start", "100", "--end", "200"], 2);
    assert!(err.contains("empty time window"), "{err}");
    // CSV and JSON follow the window too.
    let csv_dir = dir.path().join("csv");
    ok(&[
        "convert",
        "-i",
        a,
        "-f",
        "csv",
        "json",
        "-d",
        csv_dir.to_str().unwrap(),
        "--start",
        "2000",
        "--end",
        "3079",
    ]);
    let kernels = read(&csv_dir, "out_kernel_trace.csv");
    assert_eq!(kernels.lines().count(), 2, "header + dispatch 2: {kernels}");
    let hip = read(&csv_dir, "out_hip_api_trace.csv");
    assert_eq!(
        hip.lines().count(),
        2,
        "header + the call [2000,2200]: {hip}"
    );
    let inclusive_dir = dir.path().join("csv_inclusive");
    ok(&[
        "convert",
        "-i",
        a,
        "-f",
        "csv",
        "-d",
        inclusive_dir.to_str().unwrap(),
        "--start",
        "2000",
        "--end",
        "3079",
        "--inclusive",
    ]);
    assert_eq!(
        read(&inclusive_dir, "out_kernel_trace.csv").lines().count(),
        3
    );
    // Summary counts follow the window too.
    let out = dir.path().join("s");
    ok(&[
        "summary",
        "-i",
        a,
        "--start",
        "2000",
        "--end",
        "3079",
        "-f",
        "json",
        "-d",
        out.to_str().unwrap(),
    ]);
    let j: serde_json::Value = serde_json::from_str(&read(&out, "out_summary.json")).unwrap();
    let kernels = &j["KERNEL_DISPATCH SUMMARY"];
    assert_eq!(kernels.as_array().unwrap().len(), 1, "{j}");
    assert_eq!(kernels[0]["Name"], "mul(float*, int)");
    assert_eq!(kernels[0]["Calls"], 1);
}

#[test]
fn summary_formats_and_domain_and_rank_summaries() {
    let dir = tempdir();
    let a = full_db(&dir.path().join("a.db"), 100, 1);
    let b = full_db(&dir.path().join("b.db"), 200, 2);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let console = ok(&[
        "summary",
        "-i",
        a,
        b,
        "--domain-summary",
        "--summary-by-rank",
        "-f",
        "console",
        "md",
        "json",
        "csv",
        "-d",
        o,
    ]);
    assert!(console.contains("ROCPROFV3 DOMAIN SUMMARY"), "{console}");
    assert!(
        console.contains("=== Rank 0 (pid 100) ===")
            && console.contains("=== Rank 1 (pid 200) ==="),
        "{console}"
    );
    let md = read(&out, "out_summary.md");
    assert!(
        md.contains("## All processes: DOMAIN SUMMARY") && md.contains("| KERNEL_DISPATCH |"),
        "{md}"
    );
    let j: serde_json::Value = serde_json::from_str(&read(&out, "out_summary.json")).unwrap();
    assert_eq!(
        j["All processes: KERNEL_DISPATCH SUMMARY"][0]["Calls"], 4,
        "{j}"
    );
    assert_eq!(
        j["Rank 1 (pid 200): KERNEL_DISPATCH SUMMARY"][0]["Calls"], 2,
        "{j}"
    );
    assert!(listing(&out).contains(&"out_kernel_stats.csv".to_owned()));
}

/// Headless Chromium as Debian ships it.
fn chromium() -> &'static str {
    for c in ["chromium", "chromium-browser"] {
        if Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return c;
        }
    }
    panic!("chromium is not installed: run scripts/ci-deps.sh");
}

fn headless(html: &Path, profile: &Path, extra: &[String]) -> std::process::Output {
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(extra)
    .arg(format!("file://{}", html.display()));
    cmd.output().expect("run chromium")
}

#[test]
fn html_report_renders_in_headless_chromium() {
    let dir = tempdir();
    let a = full_db(&dir.path().join("a.db"), 100, 1);
    let out = dir.path().join("out");
    ok(&[
        "summary",
        "-i",
        a.to_str().unwrap(),
        "-f",
        "html",
        "--domain-summary",
        "-d",
        out.to_str().unwrap(),
    ]);
    let page = out.join("out_summary.html");
    let html = std::fs::read_to_string(&page).unwrap();
    for forbidden in ["http://", "https://", "<script", "<link", "@import"] {
        let allowed = forbidden == "http://"
            && html.matches(forbidden).count()
                == html.matches("http://www.w3.org/2000/svg").count();
        assert!(
            !html.contains(forbidden) || allowed,
            "the report must be self-contained: {forbidden}"
        );
    }
    assert!(html.contains("<svg") && html.contains("Timeline overview"));

    let profile = tempdir();
    let dom = headless(&page, profile.path(), &["--dump-dom".to_owned()]);
    let text = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.status.success(),
        "chromium --dump-dom failed: {}",
        String::from_utf8_lossy(&dom.stderr)
    );
    for k in [
        "void add&lt;float&gt;(float*, int)",
        "mul(float*, int)",
        "hipLaunchKernel",
        "KERNEL_DISPATCH",
    ] {
        assert!(text.contains(k), "{k} not in the rendered DOM");
    }

    let shot = dir.path().join("shot.png");
    let profile = tempdir();
    let r = headless(
        &page,
        profile.path(),
        &[format!("--screenshot={}", shot.display())],
    );
    assert!(
        r.status.success() && shot.exists(),
        "screenshot failed: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let colors = distinct_colors(&png);
    assert!(
        colors >= 4,
        "the screenshot looks blank: {colors} distinct colours"
    );
}

/// Distinct RGB colours in an 8-bit RGB(A) non-interlaced PNG (decoded with a minimal inflate
/// through zlib in Python's standard library, which the test environment has).
fn distinct_colors(png: &[u8]) -> usize {
    let script = r#"
import sys, zlib, struct
d = sys.stdin.buffer.read()
pos, idat, w, h, ct = 8, b"", 0, 0, 0
while pos < len(d):
    n, t = struct.unpack(">I4s", d[pos:pos+8]); body = d[pos+8:pos+8+n]; pos += 12 + n
    if t == b"IHDR": w, h, bd, ct = struct.unpack(">IIBB", body[:10])
    if t == b"IDAT": idat += body
raw = zlib.decompress(idat); bpp = 4 if ct == 6 else 3; stride = w * bpp
prev = bytearray(stride); seen = set(); i = 0
for y in range(h):
    f = raw[i]; line = bytearray(raw[i+1:i+1+stride]); i += 1 + stride
    for x in range(stride):
        a = line[x-bpp] if x >= bpp else 0; b = prev[x]; c = prev[x-bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p-a), abs(p-b), abs(p-c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    prev = line
    if y % 4 == 0:
        for x in range(0, stride, bpp * 4): seen.add(bytes(line[x:x+3]))
print(len(seen))
"#;
    use std::io::Write;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    child.stdin.take().unwrap().write_all(png).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("colour count")
}
