//! Benchmark of the visual outputs: rocpd → Perfetto, rocpd → OTF2 and the HTML summary.
//!
//! `cargo run --release --example bench_trace [-- --db PATH --dir DIR --runs N]`
//!
//! Uses the database `bench_convert` generates (default `target/bench_convert/bench_results.db`,
//! 5 M dispatches + 5 M API calls; run `cargo run --release --example bench_convert` first). It
//! builds the release binary (with OTF2 wherever the OTF2 library is installed, as by default), runs
//! `convert -f pftrace`, `convert -f otf2` and `summary -f html` on it, each as a child process,
//! and reports wall time, CPU time (user + system, from the kernel's accounting of the child),
//! peak RSS and output size. CPU time is the figure to compare on a busy machine.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use nix::sys::resource::{getrusage, UsageWho};

fn cpu_secs(u: &nix::sys::resource::Usage) -> (f64, f64) {
    let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
    (t(u.user_time()), t(u.system_time()))
}

/// `--child CMD...`: runs CMD and prints "wall user sys maxrss_kib" for it alone.
fn child(cmd: &[String]) {
    let start = Instant::now();
    let status = Command::new(&cmd[0]).args(&cmd[1..]).status().expect("run");
    let wall = start.elapsed().as_secs_f64();
    if !status.success() {
        eprintln!("bench_trace: {cmd:?} failed");
        std::process::exit(1);
    }
    let u = getrusage(UsageWho::RUSAGE_CHILDREN).expect("getrusage");
    let (user, sys) = cpu_secs(&u);
    println!("{wall:.3} {user:.3} {sys:.3} {}", u.max_rss());
}

fn size_of(p: &Path) -> u64 {
    match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => std::fs::read_dir(p)
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| size_of(&e.path())).sum())
            .unwrap_or(0),
        Ok(m) => m.len(),
        Err(_) => 0,
    }
}

fn rows(db: &Path) -> u64 {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open database");
    let mut n = 0u64;
    for t in [
        "rocpd_kernel_dispatch",
        "rocpd_region",
        "rocpd_sample",
        "rocpd_memory_copy",
        "rocpd_memory_allocate",
    ] {
        n += conn
            .query_row(&format!("SELECT COUNT(*) FROM {t}"), [], |r| {
                r.get::<_, i64>(0)
            })
            .unwrap_or(0) as u64;
    }
    n
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        child(&args[2..]);
        return;
    }
    let get = |flag: &str, default: &str| -> String {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
            .unwrap_or_else(|| default.to_owned())
    };
    let db = PathBuf::from(get("--db", "target/bench_convert/bench_results.db"));
    let dir = PathBuf::from(get("--dir", "target/bench_trace"));
    let runs: usize = get("--runs", "1").parse().expect("--runs N");
    if !db.exists() {
        eprintln!(
            "bench_trace: {} does not exist; generate it with `cargo run --release --example bench_convert`",
            db.display()
        );
        std::process::exit(2);
    }
    // The release binary finds the OTF2 library as this example's build did (same build script).
    let otf2 = cfg!(have_otf2);
    let mut build = Command::new("cargo");
    build.args(["build", "--release", "--bin", "rocprof-attach"]);
    assert!(
        build.status().expect("cargo build").success(),
        "build failed"
    );
    let exe = PathBuf::from("target/release/rocprof-attach");
    std::fs::create_dir_all(&dir).expect("bench dir");
    let n = rows(&db);
    println!("database {} : {n} rows (events)", db.display());
    let me = std::env::current_exe().expect("current exe");
    let d = dir.display().to_string();
    let dbs = db.display().to_string();
    let mut cases: Vec<(&str, Vec<String>, PathBuf)> = vec![(
        "pftrace",
        vec![
            "convert", "-i", &dbs, "-f", "pftrace", "-d", &d, "-o", "bench", "--force",
        ]
        .into_iter()
        .map(String::from)
        .collect(),
        dir.join("bench_results.pftrace"),
    )];
    if otf2 {
        cases.push((
            "otf2",
            vec![
                "convert", "-i", &dbs, "-f", "otf2", "-d", &d, "-o", "bench", "--force",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
            dir.join("bench_results"),
        ));
    }
    cases.push((
        "summary html",
        vec!["summary", "-i", &dbs, "-f", "html", "-d", &d, "-o", "bench"]
            .into_iter()
            .map(String::from)
            .collect(),
        dir.join("bench_summary.html"),
    ));
    for (name, cmd, output) in cases {
        for _ in 0..runs {
            let out = Command::new(&me)
                .arg("--child")
                .arg(&exe)
                .args(&cmd)
                .output()
                .expect("run child");
            if !out.status.success() {
                eprintln!("{name} failed: {}", String::from_utf8_lossy(&out.stderr));
                std::process::exit(1);
            }
            let f: Vec<f64> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .last()
                .unwrap_or("")
                .split_whitespace()
                .filter_map(|v| v.parse().ok())
                .collect();
            let (wall, user, sys, rss) = (f[0], f[1], f[2], f[3]);
            println!(
                "{name:>12}: wall {wall:.2} s ({:.2} M events/s), CPU {:.2} s (user {user:.2} + sys {sys:.2}; {:.2} M events per CPU-s), \
                 peak RSS {:.1} MiB, output {:.0} MiB",
                n as f64 / wall / 1e6,
                user + sys,
                n as f64 / (user + sys) / 1e6,
                rss / 1024.0,
                size_of(&output) as f64 / 1048576.0
            );
        }
    }
}
