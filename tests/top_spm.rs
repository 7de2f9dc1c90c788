//! `rocprof-attach top --spm` (issue 28, docs/top.md "Sampled counters") on the CUDA stand-ins:
//! the CUDA tool commits the PM samples at every tick, so each interval shows the counters of
//! the samples read. The fake CUPTI's PM sampling gives `gpc__cycles_elapsed.max` = the
//! sample's length in ns x 1.98 (1 ms samples: exactly 1,980,000) and `sm__cycles_active.avg`
//! = the ns kernels ran in it x 1.98 (tests/fixtures/cuda/fake_cupti_profiler.c), so SM activity
//! is the stand-in's kernel duty cycle: at most 4 kernels of at most 9 µs (run one after the
//! other) per step of at least 400 µs, at most 3 steps' kernels in a millisecond: under 12 % in
//! any sample, above 0 once a kernel ran. (The fake records the first 65,536 kernels of a
//! sampling run, 6.5 s at this rate, and samples none after: every check here comes sooner.) Every wait ends on what it
//! waits for (a line of output, a screen's text).

use crate::common;
use crate::top::{databases, row, table, tool, Target, Tmux, Top};

/// The stand-in's arguments: 4 kernels every 400 µs (or more, on a loaded machine).
const BUSY: [&str; 4] = ["--kernels-per-step", "4", "--step-us", "400"];

/// Most SM activity any sample or interval may show (see the module's comment), in %.
const MOST: f64 = 12.0;

/// The spm series of a JSON process object, by name.
fn series<'a>(p: &'a serde_json::Value, key: &str, name: &str) -> Option<&'a serde_json::Value> {
    p[key].as_array()?.iter().find(|s| s["series"] == name)
}

fn f(v: &serde_json::Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"))
}

#[test]
fn json_intervals_show_sm_activity_while_attached_and_the_totals_at_the_end() {
    let t = Target::spawn(&BUSY);
    let pid = t.pid.to_string();
    let mut top = Top::spawn(&["-p", &pid, "--json", "--spm", "--interval", "300ms"]);
    // An interval, while attached, whose samples saw a kernel run.
    let (obj, sm) = loop {
        let l = top.line().expect("an interval's JSON");
        let o: serde_json::Value = serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}"));
        assert_eq!(o["type"], "interval", "{o}");
        let p = &o["processes"][0];
        assert!(p["spm"].is_array(), "spm asked for: {p}");
        if let Some(sm) =
            series(p, "spm", "SM active %").filter(|s| s["samples"].as_u64() > Some(0))
        {
            if f(sm, "mean") > 0.0 {
                break (o.clone(), sm.clone());
            }
        }
    };
    let p = &obj["processes"][0];
    let elapsed = series(p, "spm", "gpc__cycles_elapsed.max").expect("elapsed sampled");
    let active = series(p, "spm", "sm__cycles_active.avg").expect("active sampled");
    assert!(
        series(p, "spm", "GR active %").is_some(),
        "the default set: {p}"
    );
    // 1 ms samples: exactly 1.98 M elapsed cycles each.
    for k in ["mean", "min", "max", "last"] {
        assert_eq!(f(elapsed, k), 1_980_000.0, "{k}: {elapsed}");
    }
    assert_eq!(elapsed["samples"], sm["samples"], "{p}");
    // SM activity: active over elapsed of the same samples, as summary computes it.
    let ratio = f(active, "mean") / f(elapsed, "mean") * 100.0;
    assert!((f(&sm, "mean") - ratio).abs() < 1e-6, "{sm} vs {ratio}");
    assert!(f(&sm, "min") >= 0.0 && f(&sm, "max") <= MOST, "{sm}");
    assert!(
        f(&sm, "mean") <= MOST && f(&sm, "mean") >= f(&sm, "min"),
        "{sm}"
    );
    top.signal(nix::sys::signal::Signal::SIGTERM);
    let (rest, code, stderr) = top.finish();
    assert_eq!(code, 0, "{stderr}");
    let last: serde_json::Value = serde_json::from_str(rest.last().expect("the totals")).unwrap();
    assert_eq!(last["type"], "final", "{last}");
    let total = series(&last["processes"][0], "spm_since_start", "SM active %").expect("totals");
    assert!(
        total["samples"].as_u64() >= sm["samples"].as_u64(),
        "{total} {sm}"
    );
    assert!(f(total, "max") <= MOST && f(total, "mean") > 0.0, "{total}");
    assert!(common::pid_alive(t.pid));
}

/// The batch table's spm rows: leading numbers (samples, mean, min, max, last) and the series.
fn spm_rows(lines: &[String]) -> Vec<(Vec<f64>, String)> {
    table(lines, "SAMPLES").unwrap_or_default()
}

#[test]
fn batch_tables_show_the_counters_and_the_totals_equal_summary() {
    let t = Target::spawn(&BUSY);
    let keep = tempfile::tempdir().unwrap();
    let pid = t.pid.to_string();
    let mut top = Top::spawn(&[
        "-p",
        &pid,
        "--batch",
        "--spm",
        "sm__cycles_active.avg,gpc__cycles_elapsed.max",
        "--interval",
        "300ms",
        "-d",
        keep.path().to_str().unwrap(),
    ]);
    // An interval whose table shows the asked counters and SM activity with samples.
    loop {
        top.until("an spm table", |l| l.trim_start().starts_with("SAMPLES"));
        let mut rows = Vec::new();
        while let Some((n, name)) = top.line().as_deref().and_then(row) {
            rows.push((n, name));
        }
        let sm = rows.iter().find(|r| r.1.starts_with("SM active % (AGENT"));
        if let Some((n, _)) = sm.filter(|r| r.0[0] > 0.0) {
            assert!(n[1] >= 0.0 && n[3] <= MOST, "{rows:?}");
            let names: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
            assert_eq!(
                names.len(),
                3,
                "SM activity and the two counters: {names:?}"
            );
            let el = rows
                .iter()
                .find(|r| r.1.starts_with("gpc__cycles_elapsed.max"))
                .unwrap();
            assert_eq!(el.0[1..], [1_980_000.0; 4], "{el:?}");
            break;
        }
    }
    top.signal(nix::sys::signal::Signal::SIGTERM);
    let (rest, code, stderr) = top.finish();
    assert_eq!(code, 0, "{stderr}");
    let at = rest
        .iter()
        .position(|l| l.starts_with("rocprof-attach top - totals since the start"))
        .unwrap_or_else(|| panic!("a final table: {rest:#?}"));
    let finals: Vec<String> = rest[at..]
        .iter()
        .take_while(|l| !l.trim_start().starts_with("ALL_LAUNCHES"))
        .cloned()
        .collect();
    let totals = spm_rows(&finals);
    assert_eq!(totals.len(), 3, "{finals:#?}");
    // The totals are every sample of the kept database, each once, with the figures of
    // `summary -f html`'s table (the same code).
    let dbs = databases(keep.path());
    assert_eq!(dbs.len(), 1, "{dbs:?}");
    let samples = crate::cuda::count(
        &dbs[0],
        "SELECT COUNT(DISTINCT start) FROM rocpd_spm_sample",
    );
    let rows = crate::cuda::count(&dbs[0], "SELECT COUNT(*) FROM rocpd_spm_sample");
    assert_eq!(rows, 2 * samples, "each sample once, both counters");
    let out = tempfile::tempdir().unwrap();
    crate::cuda::run_on_db("summary", &dbs[0], &["html"], out.path());
    let html = std::fs::read_to_string(out.path().join("out_summary.html")).unwrap();
    for l in &finals {
        if let Some((n, name)) = row(l).filter(|r| r.1.contains("(AGENT")) {
            assert_eq!(n[0] as i64, samples, "{l}");
            let cells: Vec<&str> = l.split_whitespace().take(5).collect();
            let expect = format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{name}</td></tr>",
                cells[0], cells[1], cells[2], cells[3], cells[4]
            );
            assert!(
                html.contains(&expect),
                "{expect} in summary's table:\n{html}"
            );
        }
    }
    assert!(common::pid_alive(t.pid));
}

#[test]
fn without_spm_nothing_changes() {
    let t = Target::spawn(&BUSY);
    let pid = t.pid.to_string();
    let top = Top::spawn(&["-p", &pid, "--json", "--interval", "200ms", "-n", "2"]);
    let (lines, code, stderr) = top.finish();
    assert_eq!(code, 0, "{stderr}");
    for l in &lines {
        let o: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(o["processes"][0].get("spm").is_none(), "{o}");
    }
}

#[test]
fn the_screen_shows_the_counters_panel() {
    if !crate::prereq::tmux() {
        return;
    }
    let t = Target::spawn(&BUSY);
    let tmux = Tmux::new("spm");
    let command = format!(
        "env ROCPROF_ATTACH_CUDA_TOOL={} {} top -p {} --spm --interval 300ms",
        tool().display(),
        common::bin().display(),
        t.pid
    );
    tmux.session(120, 40, &command);
    let s = tmux.wait_screen("the counters panel with SM activity", |s| {
        s.contains("sampled counters of AGENT [1] (GPU) (last interval)")
            && s.contains("SM active %")
            && s.contains("gpc__cycles_elapsed.max")
            && s.contains("1980000")
    });
    assert!(s.contains("MEAN") && s.contains("COUNTER"), "{s}");
    // The terminal goes away under the view (tmux's server killed, as a closed window): top
    // ends and detaches rather than spin on a dead terminal (it did, at 40 % of a core).
    let pane = tmux.cmd(&["list-panes", "-t", "top", "-F", "#{pane_pid}"]);
    let pid: i32 = String::from_utf8_lossy(&pane.stdout)
        .trim()
        .parse()
        .expect("pane pid");
    tmux.cmd(&["kill-server"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| st.contains(") Z "))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "top (pid {pid}) still runs 30 s after its terminal went away"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let state = std::fs::read_to_string(format!("/proc/{}/stat", t.pid)).unwrap_or_default();
    assert!(
        !state.is_empty() && !state.contains(") Z "),
        "the target lives on"
    );
}

/// A ROCm process is watched as without `--spm` (a session per refresh, no counters) and `top`
/// says so: in the header's sampling and in a note naming it.
#[test]
fn rocm_targets_say_spm_is_not_shown() {
    let scratch = tempfile::tempdir().unwrap();
    let db = crate::rocpd_common::full_db(&scratch.path().join("source.db"), 4242, 7);
    let t = common::Target::spawn(common::TargetOpts {
        env: vec![("STANDIN_TOOL_COPY_DB".into(), db.to_str().unwrap().into())],
        ..Default::default()
    });
    let pid = t.pid.to_string();
    let tool = common::tool_lib();
    let top = Top::spawn(&[
        "-p",
        &pid,
        "-t",
        tool.to_str().unwrap(),
        "--batch",
        "--spm",
        "--interval",
        "200ms",
        "-n",
        "2",
    ]);
    let (lines, code, stderr) = top.finish();
    assert_eq!(code, 0, "{stderr}");
    let headers: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("rocprof-attach top - interval"))
        .collect();
    assert_eq!(headers.len(), 2, "{lines:#?}");
    for h in headers {
        assert!(h.contains("no --spm counters"), "{h}");
    }
    let note = format!("note: --spm is not shown for ROCm processes ({pid})");
    assert!(
        lines.iter().any(|l| l.starts_with(&note)),
        "{note}: {lines:#?}"
    );
    // Its kernels are shown as without --spm, and no counters' table (no CUDA process).
    assert!(lines.iter().any(|l| l.trim_start().starts_with("LAUNCHES")));
    assert!(!lines.iter().any(|l| l.trim_start().starts_with("SAMPLES")));
    assert!(t.alive());
}
