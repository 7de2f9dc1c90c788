//! Benchmark of the rocpd → CSV / JSON converters.
//!
//! `cargo run --release --example bench_convert [-- --dispatches N --apis N --dir DIR --reuse --only csv|json]`
//!
//! Generates a rocpd database with N kernel dispatches and N API calls with the crate's writer
//! (one transaction, prepared statements), then converts it to CSV and to JSON, each in a child
//! process so that the generator's memory does not count, and reports rows/s, the child's CPU time
//! (user + system, all threads), rows per CPU second and the child's peak RSS (VmHWM).
//! `--reuse` keeps a database left by an earlier run with the same directory (it is not checked
//! against the counts); `--only` converts to one format.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use rocprof_attach::format::OutputFormat;
use rocprof_attach::rocpd::guid::Guid;
use rocprof_attach::rocpd::model::*;
use rocprof_attach::rocpd::{convert_with, ConvertOptions, Writer};

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// User and system CPU seconds of this process so far (all threads).
fn cpu_secs() -> (f64, f64) {
    let u = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF);
    match u {
        Ok(u) => {
            let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
            (t(u.user_time()), t(u.system_time()))
        }
        Err(_) => (0.0, 0.0),
    }
}

fn generate(path: &Path, dispatches: i64, apis: i64) -> rocprof_attach::rocpd::Result<()> {
    let pid = 4242;
    let mut w = Writer::create(path, &Guid::from_parts(0x0000_ddb5_8903, 7))?;
    w.node(&Node {
        id: 1,
        hash: 1,
        machine_id: "bench".into(),
        hostname: "bench".into(),
        ..Default::default()
    })?;
    w.process(&Process {
        pid,
        ppid: 1,
        init: 0,
        fini: 1,
        command: "./bench".into(),
        ..Default::default()
    })?;
    w.agent(&Agent {
        id: 0,
        agent_type: "CPU".into(),
        name: "cpu".into(),
        ..Default::default()
    })?;
    w.agent(&Agent {
        id: 1,
        agent_type: "GPU".into(),
        logical_index: 1,
        name: "gfx90a".into(),
        ..Default::default()
    })?;
    w.code_object(&CodeObject {
        id: 1,
        agent_id: 1,
        uri: "file:///bench".into(),
        ..Default::default()
    })?;
    let kernels = 64;
    for k in 0..kernels {
        w.kernel_symbol(&KernelSymbol {
            id: k + 1,
            code_object_id: 1,
            kernel_name: format!("_Z6kernelILi{k}EEvPfi"),
            display_name: format!("void kernel<{k}>(float*, int)"),
            arch_vgpr_count: 32,
            sgpr_count: 16,
            group_segment_size: 1024,
            ..Default::default()
        })?;
    }
    let ops = [
        "hipLaunchKernel",
        "hipMemcpyAsync",
        "hipStreamSynchronize",
        "hipMalloc",
        "hipFree",
        "hipEventRecord",
    ];
    let mut t = 1_000_000_000i64;
    let (mut corr, mut dispatch) = (1i64, 1i64);
    while corr <= apis || dispatch <= dispatches {
        let tid = pid + corr % 8;
        if corr <= apis {
            w.api_call(&ApiCall {
                kind: "HIP_RUNTIME_API_EXT".into(),
                operation: ops[(corr % ops.len() as i64) as usize].into(),
                tid,
                correlation: Correlation {
                    internal: corr,
                    external: 0,
                    ancestor: 0,
                },
                start: t,
                end: t + 500 + corr % 700,
                ..Default::default()
            })?;
        }
        if dispatch <= dispatches {
            w.kernel_dispatch(&KernelDispatch {
                dispatch_id: dispatch,
                tid,
                agent_id: 1,
                kernel_id: 1 + dispatch % kernels,
                queue_id: 1 + dispatch % 4,
                stream_id: dispatch % 4,
                correlation: Correlation {
                    internal: corr,
                    external: 0,
                    ancestor: 0,
                },
                start: t + 800,
                end: t + 800 + 2000 + dispatch % 5000,
                workgroup: [256, 1, 1],
                grid: [1 << 20, 1, 1],
                ..Default::default()
            })?;
        }
        corr += 1;
        dispatch += 1;
        t += 3000;
    }
    w.finish()?;
    Ok(())
}

fn child(db: &Path, dir: &Path, format: &str) {
    let fmt = if format == "json" {
        OutputFormat::Json
    } else {
        OutputFormat::Csv
    };
    let start = Instant::now();
    let (u0, s0) = cpu_secs();
    let report = match convert_with(
        &[db.to_path_buf()],
        &[fmt],
        dir,
        format,
        &ConvertOptions {
            replace: true,
            ..ConvertOptions::default()
        },
    ) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bench_convert: {e}");
            std::process::exit(1);
        }
    };
    let secs = start.elapsed().as_secs_f64();
    let (u1, s1) = cpu_secs();
    let rows = report.csv_rows + report.json_rows;
    let bytes: u64 = report
        .files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    println!(
        "{rows} {secs:.3} {} {bytes} {:.3} {:.3}",
        vm_hwm_kib(),
        u1 - u0,
        s1 - s0
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        child(Path::new(&args[2]), Path::new(&args[3]), &args[4]);
        return;
    }
    let get = |flag: &str, default: &str| -> String {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
            .unwrap_or_else(|| default.to_owned())
    };
    let dispatches: i64 = get("--dispatches", "5000000")
        .parse()
        .expect("--dispatches N");
    let apis: i64 = get("--apis", "5000000").parse().expect("--apis N");
    let dir = PathBuf::from(get("--dir", "target/bench_convert"));
    std::fs::create_dir_all(&dir).expect("create bench dir");
    let db = dir.join("bench_results.db");

    let reuse = args.iter().any(|a| a == "--reuse") && db.exists();
    if reuse {
        println!("reusing {}", db.display());
    } else {
        let _ = std::fs::remove_file(&db);
        let start = Instant::now();
        generate(&db, dispatches, apis).expect("generate database");
        let gen = start.elapsed().as_secs_f64();
        let db_size = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0);
        println!(
            "generated {dispatches} dispatches + {apis} API calls in {gen:.1} s ({:.0} rows/s), database {:.0} MiB",
            (dispatches + apis) as f64 / gen,
            db_size as f64 / 1048576.0
        );
    }
    let only = get("--only", "");
    let exe = std::env::current_exe().expect("current exe");
    for format in ["csv", "json"] {
        if !only.is_empty() && only != format {
            continue;
        }
        let out = Command::new(&exe)
            .args([
                "--child",
                &db.display().to_string(),
                &dir.display().to_string(),
                format,
            ])
            .output()
            .expect("run child");
        if !out.status.success() {
            eprintln!(
                "{format} conversion failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::process::exit(1);
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let f: Vec<f64> = text
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        if f.len() < 6 {
            eprintln!("unexpected child output: {text}");
            std::process::exit(1);
        }
        println!(
            "{format:>4}: {:.0} rows in {:.2} s = {:.2} M rows/s; CPU {:.2} s user + {:.2} s sys = {:.2} M rows/CPU-s; \
             output {:.0} MiB, peak RSS {:.1} MiB",
            f[0],
            f[1],
            f[0] / f[1] / 1e6,
            f[4],
            f[5],
            f[0] / (f[4] + f[5]) / 1e6,
            f[3] / 1048576.0,
            f[2] / 1024.0
        );
    }
}
