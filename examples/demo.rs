//! rocprof-attach without a GPU: `cargo run --release --example demo`.
//!
//! Builds a small HIP-like runtime, an application using it, a profiling tool and the stand-in
//! rocprofiler-register (all C, with gcc, into `target/demo/`), starts the application, attaches to
//! it with rocprof-attach for a while and prints the rocprofv3-style CSV files the tool wrote from
//! the calls the application made meanwhile. See docs/demo.md.
//!
//! Options: `--duration-msec N` (default 2000), `--keep` (leave the application running and print
//! how to attach to it by hand), `--help`.

#[path = "demo/build_parts.rs"]
mod build_parts;

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

const USAGE: &str = "usage: cargo run --release --example demo -- [--duration-msec N] [--keep]";

struct Options {
    duration_ms: u64,
    keep: bool,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        duration_ms: 2000,
        keep: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--keep" => o.keep = true,
            "--duration-msec" => {
                let v = args.next().ok_or("--duration-msec needs a value")?;
                o.duration_ms = v
                    .parse()
                    .map_err(|_| format!("--duration-msec: not a number: {v}"))?;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    Ok(o)
}

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target"),
    }
}

/// The running demo application.
struct App {
    child: Child,
    pid: i32,
    stdin: Option<ChildStdin>,
}

impl App {
    fn start(parts: &build_parts::Parts, keep: bool) -> Result<App, String> {
        let mut lib_path = OsString::from(&parts.dir);
        if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|v| !v.is_empty()) {
            lib_path.push(":");
            lib_path.push(old);
        }
        let mut cmd = Command::new(&parts.app);
        cmd.env("ROCP_TOOL_ATTACH", "1")
            .env("LD_LIBRARY_PATH", lib_path)
            .stdout(Stdio::piped());
        if keep {
            // It must outlive us: no stdin to watch, stopped with SIGTERM (or kill) later, and
            // its stderr (the tool's notes) goes to a log file rather than holding our stderr open.
            let log_path = parts.dir.join("demo-app.log");
            let log = std::fs::File::create(&log_path)
                .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
            cmd.arg("--no-stdin").stdin(Stdio::null()).stderr(log);
        } else {
            // Closing our end of the pipe (or our death) stops it.
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", parts.app.display()))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let pid = child.id() as i32;
        let mut app = App { child, pid, stdin };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line == format!("ready {pid}") => break,
                Ok(_) => {}
                Err(_) => {
                    app.stop();
                    return Err("demo-app did not report ready within 10 s".into());
                }
            }
        }
        // The stand-in register library starts the listener thread when the runtime registers.
        let deadline = Instant::now() + Duration::from_secs(10);
        while listener_tid(pid).is_none() {
            if Instant::now() > deadline || !app.alive() {
                app.stop();
                return Err(
                    "demo-app has no rocp-bg-attach thread (is ROCP_TOOL_ATTACH honoured?)".into(),
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(app)
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Close stdin and wait; then SIGTERM; then SIGKILL. Every wait is bounded.
    fn stop(&mut self) {
        self.stdin.take();
        if self.wait_exit(Duration::from_secs(3)) {
            return;
        }
        let pid = nix::unistd::Pid::from_raw(self.pid);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        if self.wait_exit(Duration::from_secs(3)) {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn wait_exit(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

/// TID of the `rocp-bg-attach` thread of `pid`, if any.
fn listener_tid(pid: i32) -> Option<i32> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    dir.flatten().find_map(|e| {
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        if comm.trim_end() == "rocp-bg-attach" {
            e.file_name().to_str()?.parse().ok()
        } else {
            None
        }
    })
}

/// Runs rocprof-attach in this process, exactly as the command line would, and returns its exit
/// code.
fn rocprof_attach(args: Vec<OsString>) -> i32 {
    rocprof_attach::cli::main_with_args(args)
}

/// CSV files under `dir` modified at or after `since`, sorted.
fn csv_files_since(dir: &Path, since: SystemTime) -> Vec<PathBuf> {
    fn walk(d: &Path, since: SystemTime, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, since, out);
            } else if p.extension().is_some_and(|x| x == "csv")
                && e.metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|m| m >= since)
            {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, since, &mut out);
    out.sort();
    out
}

fn show(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let rows = text.lines().count().saturating_sub(1);
    println!("\n{} ({} bytes, {rows} rows)", path.display(), text.len());
    for line in text.lines().take(5) {
        if line.chars().count() > 150 {
            let cut: String = line.chars().take(147).collect();
            println!("  {cut}...");
        } else {
            println!("  {line}");
        }
    }
    if rows > 4 {
        println!("  ...");
    }
}

fn run(opts: &Options) -> Result<i32, String> {
    let build_dir = target_dir().join("demo");
    println!(
        "demo: building the demo runtime, app, tool and stand-in register library in {}",
        build_dir.display()
    );
    let parts = build_parts::build_all(&build_dir, false)?;
    let tool =
        std::fs::canonicalize(&parts.tool).map_err(|e| format!("{}: {e}", parts.tool.display()))?;
    let out_dir = build_dir.join("out");
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let out_dir =
        std::fs::canonicalize(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;

    let mut app = App::start(&parts, opts.keep)?;
    println!(
        "demo: demo-app is running as PID {} and has a rocp-bg-attach thread",
        app.pid
    );
    println!(
        "demo: attaching for {} ms (hip, kernel, memory copy and memory allocation traces)\n",
        opts.duration_ms
    );

    let since = SystemTime::now();
    let args: Vec<OsString> = [
        "rocprof-attach",
        "--attach",
        &app.pid.to_string(),
        "--hip-trace",
        "--kernel-trace",
        "--memory-copy-trace",
        "--memory-allocation-trace",
        "--output-format",
        "csv",
        "--attach-duration-msec",
        &opts.duration_ms.to_string(),
        "-d",
    ]
    .iter()
    .map(OsString::from)
    .chain([
        out_dir.clone().into_os_string(),
        "-t".into(),
        tool.into_os_string(),
    ])
    .collect();
    let code = rocprof_attach(args);

    let files = csv_files_since(&out_dir, since);
    println!(
        "\ndemo: rocprof-attach exited with {code}; {} CSV file(s) written under {}",
        files.len(),
        out_dir.display()
    );
    for f in &files {
        show(f);
    }
    if opts.keep {
        println!(
            "\ndemo: demo-app keeps running as PID {pid}. Try for example:",
            pid = app.pid
        );
        println!("  cargo run --release -- --attach {} --hip-trace --kernel-trace -f csv -t {} -d /tmp/demo-out", app.pid, parts.tool.display());
        println!("  kill {}    # when done", app.pid);
        println!(
            "Its stderr (the demo tool's messages) goes to {}.",
            parts.dir.join("demo-app.log").display()
        );
    } else {
        app.stop();
    }
    Ok(code)
}

fn main() {
    let code = match parse_args().and_then(|o| run(&o)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("demo: {e}");
            2
        }
    };
    std::process::exit(code);
}
