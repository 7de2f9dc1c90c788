//! Is what the tool wrote usable? Empty and truncated files (a full disk, a quota, a tool stopped
//! mid-write) are found here and named with their cause, never reported as success; and a rocpd
//! database that holds no event of a kind that was asked for is a warning naming the option.

use super::report::FileReport;
use crate::envbuf::EnvList;
use crate::options::{Switch, Switches};
use crate::outputs::human_size;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Free space below which a file system counts as full (bytes).
pub const FULL_BELOW: u64 = 64 * 1024;

/// What is wrong with a file that is not complete, or None when it looks complete. Checked by
/// content where the format allows it cheaply: a rocpd (SQLite) database is as long as its header
/// says, a JSON document ends with `}` or `]`, a CSV file with a newline; any file is non-empty.
pub fn problem(host_path: &Path) -> Option<String> {
    let meta = std::fs::metadata(host_path).ok()?;
    if meta.is_dir() {
        return None;
    }
    let size = meta.len();
    if size == 0 {
        return Some("empty (0 bytes)".into());
    }
    let ext = host_path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let mut f = std::fs::File::open(host_path).ok()?;
    match ext.as_str() {
        "db" => {
            let mut head = [0u8; 100];
            if size < 100 || f.read_exact(&mut head).is_err() || &head[..16] != b"SQLite format 3\0"
            {
                return Some(format!(
                    "truncated: {size} bytes, not even a whole SQLite header"
                ));
            }
            let page = match u16::from_be_bytes([head[16], head[17]]) {
                1 => 65536u64,
                p => p as u64,
            };
            let pages = u32::from_be_bytes([head[28], head[29], head[30], head[31]]) as u64;
            let valid = head[24..28] == head[92..96];
            let expected = page * pages;
            if (valid && pages > 0 && size < expected) || (page > 0 && size % page != 0) {
                return Some(format!(
                    "truncated: {} of the {} its SQLite header promises",
                    human_size(size),
                    human_size(expected.max(size.div_ceil(page.max(1)) * page))
                ));
            }
            drop(f);
            db_problem(host_path)
        }
        "json" | "csv" => {
            // The last bytes: a JSON document closes its top level, a CSV file ends its line.
            let tail = size.min(64);
            f.seek(SeekFrom::Start(size - tail)).ok()?;
            let mut buf = Vec::new();
            f.read_to_end(&mut buf).ok()?;
            let ok = if ext == "json" {
                matches!(
                    buf.iter().rev().find(|b| !b.is_ascii_whitespace()),
                    Some(b'}' | b']')
                )
            } else {
                buf.last() == Some(&b'\n')
            };
            (!ok).then(|| {
                format!(
                    "truncated: {} and the {} stops mid-{}",
                    human_size(size),
                    ext.to_ascii_uppercase(),
                    if ext == "json" { "document" } else { "line" }
                )
            })
        }
        _ => None,
    }
}

/// What is wrong with a rocpd database whose header is whole: None when it holds a process.
/// A database without one is what a tool leaves when its write failed and SQLite rolled the
/// transaction back (a full disk: the space is free again afterwards).
fn db_problem(path: &Path) -> Option<String> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .ok()?;
    // A database its tool still writes (a session not detached) is locked during a commit.
    let _ = conn.busy_timeout(std::time::Duration::from_millis(500));
    let tables: Vec<String> = match conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_%'")
        .and_then(|mut st| {
            st.query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()
        }) {
        Ok(t) => t,
        Err(e)
            if matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
            ) =>
        {
            return None; // being written: nothing to say
        }
        Err(e) => return Some(format!("not a readable SQLite database ({e})")),
    };
    let count = |t: &str| -> Option<i64> {
        conn.query_row(&format!("SELECT count(*) FROM \"{t}\""), [], |r| r.get(0))
            .ok()
    };
    // A count that cannot be made (a table being written) is no evidence: nothing is said.
    let metadata: i64 = tables
        .iter()
        .filter(|t| t.starts_with("rocpd_metadata"))
        .map(|t| count(t))
        .sum::<Option<i64>>()?;
    let processes: i64 = tables
        .iter()
        .filter(|t| t.starts_with("rocpd_info_process"))
        .map(|t| count(t))
        .sum::<Option<i64>>()?;
    if processes > 0 {
        return None;
    }
    Some(if metadata > 0 {
        format!(
            "not a complete rocpd database: it holds no process, only its schema and {metadata} metadata rows \
             (the tool's write failed and SQLite rolled it back)"
        )
    } else {
        "not a rocpd database: no process and no metadata (the tool's write failed before its first commit)"
            .to_string()
    })
}

/// The report of one file found written: its problem if it is not whole and, for a complete
/// rocpd database, the records it holds. The one check a session and `--detach` make.
pub fn file_report(
    path: std::path::PathBuf,
    host_path: std::path::PathBuf,
    size: u64,
    pid: Option<i32>,
) -> super::FileReport {
    let problem = problem(&host_path);
    let is_db = host_path.extension().is_some_and(|e| e == "db");
    let rows = (problem.is_none() && is_db)
        .then(|| contents(&host_path).map(|c| c.rows()))
        .flatten();
    super::FileReport {
        problem,
        rows,
        path,
        host_path,
        size,
        pid,
    }
}

/// A database left with a hot rollback journal beside it (the process was killed during a
/// commit) is rolled back to its last commit here, as any SQLite reader with write access
/// would on opening it: true if there was one.
pub fn recover_journal(path: &Path) -> bool {
    let mut journal = path.as_os_str().to_owned();
    journal.push("-journal");
    let hot = std::fs::metadata(&journal).is_ok_and(|m| m.len() > 0);
    if !hot {
        return false;
    }
    rusqlite::Connection::open(path)
        .and_then(|c| {
            c.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
                r.get::<_, i64>(0)
            })
        })
        .is_ok()
}

/// What a complete rocpd database holds: its records by kind, and how its writer ended it (the
/// CUDA tool's `finished` and `ended_by` in the process JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contents {
    /// Kernel dispatches.
    pub kernels: u64,
    /// Memory copies.
    pub copies: u64,
    /// API calls and markers (regions and samples).
    pub api: u64,
    /// Memory allocations.
    pub allocations: u64,
    /// Counter values.
    pub counters: u64,
    /// `finished` of the process JSON (None: the writer does not say).
    pub finished: Option<bool>,
    /// `ended_by` of the process JSON (`detach`, `exit`, `signal SIGTERM`).
    pub ended_by: Option<String>,
    /// The process's last recorded time minus its first (ns).
    pub span_ns: i64,
}

impl Contents {
    /// Every record.
    pub fn rows(&self) -> u64 {
        self.kernels + self.copies + self.api + self.allocations + self.counters
    }

    /// "1,234 kernel dispatches, 56 memory copies, ..." (kinds with records only).
    pub fn describe(&self) -> String {
        let parts: Vec<String> = [
            (self.kernels, "kernel dispatch", "kernel dispatches"),
            (self.copies, "memory copy", "memory copies"),
            (self.api, "API call", "API calls"),
            (self.allocations, "memory allocation", "memory allocations"),
            (self.counters, "counter value", "counter values"),
        ]
        .iter()
        .filter(|(n, _, _)| *n > 0)
        .map(|(n, one, many)| format!("{} {}", group(*n), if *n == 1 { one } else { many }))
        .collect();
        if parts.is_empty() {
            "no records".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// `n` with thousands separators.
pub fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Counts what the rocpd database at `path` holds (None if it cannot be read).
pub fn contents(path: &Path) -> Option<Contents> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .ok()?;
    let _ = conn.busy_timeout(std::time::Duration::from_millis(500));
    let n = |sql: &str| -> u64 {
        conn.query_row(sql, [], |r| r.get::<_, i64>(0))
            .map(|v| v.max(0) as u64)
            .unwrap_or(0)
    };
    let (finished, ended_by, span_ns) = conn
        .query_row(
            "SELECT json_extract(extdata, '$.finished'), json_extract(extdata, '$.ended_by'), \
             coalesce(\"end\", 0) - coalesce(start, 0) FROM rocpd_info_process LIMIT 1",
            [],
            |r| {
                Ok((
                    r.get::<_, Option<i64>>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, Option<i64>>(2)?,
                ))
            },
        )
        .ok()?;
    Some(Contents {
        kernels: n("SELECT count(*) FROM rocpd_kernel_dispatch"),
        copies: n("SELECT count(*) FROM rocpd_memory_copy"),
        api: n("SELECT count(*) FROM rocpd_region") + n("SELECT count(*) FROM rocpd_sample"),
        allocations: n("SELECT count(*) FROM rocpd_memory_allocate"),
        counters: n("SELECT count(*) FROM rocpd_pmc_event"),
        finished: finished.map(|f| f != 0),
        ended_by,
        span_ns: span_ns.unwrap_or(0),
    })
}

/// Why files came out incomplete, from the state of the file system holding `dir` now, and the
/// least free space seen on it during the session (`least_free`, bytes; None when not
/// watched): a write that fills a file system fails with ENOSPC, and SQLite then rolls its
/// transaction back, which frees the space again.
pub fn space_cause(dir: &Path, least_free: Option<u64>) -> String {
    match nix::sys::statvfs::statvfs(dir) {
        Ok(s) => {
            let free = s.blocks_available() * s.fragment_size();
            let total = s.blocks() * s.fragment_size();
            if let Some(least) = least_free.filter(|l| *l < FULL_BELOW && free >= FULL_BELOW) {
                return format!(
                    "the file system holding {} was full while the tool wrote (ENOSPC, No space left on device: \
                     {} free at the least, of {}; {} free now that the failed write was rolled back). Fix: free \
                     some space there or choose another directory with -d",
                    dir.display(),
                    human_size(least),
                    human_size(total),
                    human_size(free)
                );
            }
            if free < FULL_BELOW || s.files_available() == 0 {
                format!(
                    "the file system holding {} is full (ENOSPC, No space left on device: {} free of {}{}). \
                     Fix: free some space there or choose another directory with -d",
                    dir.display(),
                    human_size(free),
                    human_size(total),
                    if s.files_available() == 0 { ", no free inodes" } else { "" }
                )
            } else {
                format!(
                    "the file system holding {} has {} free now, so a disk quota (EDQUOT) or the tool stopping \
                     mid-write (the target exited or was killed) is the likely cause. Fix: check `quota -s` and the \
                     target's stderr",
                    dir.display(),
                    human_size(free)
                )
            }
        }
        Err(e) => format!(
            "the file system holding {} cannot be examined ({e})",
            dir.display()
        ),
    }
}

/// One kind of event an option asks for, and how to count it in a rocpd database.
struct Capture {
    vars: &'static [&'static str],
    /// The switches that ask for it, the widest first (`--hip-trace` before
    /// `--hip-runtime-trace`); `--pmc` is no switch (none).
    switches: &'static [Switch],
    option: &'static str,
    what: &'static str,
    /// What it is called in a CUDA process; None: CUDA has no counterpart (never collected).
    cuda_what: Option<&'static str>,
    sql: &'static str,
}

/// Counts by category of the API regions and samples (`HIP_RUNTIME_API_EXT`, ...).
const BY_CATEGORY: &str = "SELECT (SELECT count(*) FROM rocpd_region R JOIN rocpd_event E ON E.id = R.event_id \
     JOIN rocpd_string S ON S.id = E.category_id WHERE S.string LIKE ?1) + (SELECT count(*) FROM rocpd_sample R \
     JOIN rocpd_event E ON E.id = R.event_id JOIN rocpd_string S ON S.id = E.category_id WHERE S.string LIKE ?1)";

const CAPTURES: [Capture; 8] = [
    Capture {
        vars: &["ROCPROF_KERNEL_TRACE"],
        switches: &[Switch::KernelTrace],
        option: "--kernel-trace",
        what: "kernel dispatches",
        cuda_what: Some("kernel launches"),
        sql: "SELECT count(*) FROM rocpd_kernel_dispatch",
    },
    Capture {
        vars: &["ROCPROF_MEMORY_COPY_TRACE"],
        switches: &[Switch::MemoryCopyTrace],
        option: "--memory-copy-trace",
        what: "memory copies",
        cuda_what: Some("memory copies or memsets"),
        sql: "SELECT count(*) FROM rocpd_memory_copy",
    },
    Capture {
        vars: &["ROCPROF_MEMORY_ALLOCATION_TRACE"],
        switches: &[Switch::MemoryAllocationTrace],
        option: "--memory-allocation-trace",
        what: "memory allocations",
        cuda_what: Some("memory allocations"),
        sql: "SELECT count(*) FROM rocpd_memory_allocate WHERE level != 'SCRATCH'",
    },
    Capture {
        vars: &[
            "ROCPROF_HIP_RUNTIME_API_TRACE",
            "ROCPROF_HIP_COMPILER_API_TRACE",
        ],
        switches: &[
            Switch::HipTrace,
            Switch::HipRuntimeTrace,
            Switch::HipCompilerTrace,
        ],
        option: "--hip-trace",
        what: "HIP API calls",
        cuda_what: Some("CUDA API calls"),
        sql: "HIP_%",
    },
    Capture {
        vars: &[
            "ROCPROF_HSA_CORE_API_TRACE",
            "ROCPROF_HSA_AMD_EXT_API_TRACE",
        ],
        switches: &[Switch::HsaTrace, Switch::HsaCoreTrace, Switch::HsaAmdTrace],
        option: "--hsa-trace",
        what: "HSA API calls",
        cuda_what: None,
        sql: "HSA_%",
    },
    Capture {
        vars: &["ROCPROF_MARKER_API_TRACE"],
        switches: &[Switch::MarkerTrace],
        option: "--marker-trace",
        what: "ROCTx markers or ranges",
        cuda_what: Some("NVTX markers or ranges"),
        sql: "MARKER_%",
    },
    Capture {
        vars: &["ROCPROF_RCCL_API_TRACE"],
        switches: &[Switch::RcclTrace],
        option: "--rccl-trace",
        what: "RCCL calls",
        cuda_what: None,
        sql: "RCCL_%",
    },
    Capture {
        vars: &["ROCPROF_COUNTER_COLLECTION"],
        switches: &[],
        option: "--pmc",
        what: "counter values",
        cuda_what: None,
        sql: "SELECT count(*) FROM rocpd_pmc_event",
    },
];

fn on(env: &EnvList, var: &str) -> bool {
    env.get(var)
        .is_some_and(|v| crate::options::parse_bool(v) == Ok(true))
}

fn count(conn: &rusqlite::Connection, c: &Capture) -> Option<i64> {
    if c.sql.starts_with("SELECT") {
        conn.query_row(c.sql, [], |r| r.get(0)).ok()
    } else {
        conn.query_row(BY_CATEGORY, [c.sql], |r| r.get(0)).ok()
    }
}

/// How the user asked for capture `c`, in their words: the switch they typed (`--hip-trace`),
/// the switch an umbrella they typed turned on (`--hip-runtime-trace (implied by
/// --runtime-trace)`), or the variable set in the environment (`ROCPROF_KERNEL_TRACE=1 (from the
/// environment)`). `typed`: the switches as given on the command line, before implications.
fn asked_as(c: &Capture, typed: &Switches, env: &EnvList) -> String {
    if let Some(s) = c.switches.iter().find(|s| typed.on(**s)) {
        return format!("--{}", s.def().long);
    }
    for umbrella in Switch::ALL.iter().filter(|u| typed.on(**u)) {
        let implied = Switches::default().with(*umbrella, true).resolved();
        let found = c
            .switches
            .iter()
            .find(|s| implied.on(**s) && typed.get(**s).is_none());
        if let Some(s) = found {
            return format!("--{} (implied by --{})", s.def().long, umbrella.def().long);
        }
    }
    match c.vars.iter().find(|v| on(env, v)) {
        Some(v) if !c.switches.is_empty() => format!(
            "{v}={} (from the environment)",
            env.get(v).unwrap_or_default()
        ),
        _ => c.option.to_string(),
    }
}

/// A warning per option asked for (in `env`, the variables sent) whose kind of event is in none
/// of the complete databases among `files`, naming the option as the user asked for it
/// ([`asked_as`]; `typed`: the switches given on the command line). `cuda`: the databases come
/// from CUDA processes, so events are called by their CUDA names and kinds CUDA has no
/// counterpart for (RCCL, HSA) are not expected.
pub fn empty_captures(
    env: &EnvList,
    typed: &Switches,
    cuda: bool,
    files: &[FileReport],
) -> Vec<String> {
    let dbs: Vec<&FileReport> = files
        .iter()
        .filter(|f| f.problem.is_none() && f.host_path.extension().is_some_and(|e| e == "db"))
        .collect();
    if dbs.is_empty() {
        return Vec::new();
    }
    let conns: Vec<rusqlite::Connection> = dbs
        .iter()
        .filter_map(|f| {
            rusqlite::Connection::open_with_flags(
                &f.host_path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .ok()
        })
        .collect();
    let mut out = Vec::new();
    for c in CAPTURES
        .iter()
        .filter(|c| c.vars.iter().any(|v| on(env, v)))
    {
        let what = match (cuda, c.cuda_what) {
            (false, _) => c.what,
            (true, Some(w)) => w,
            (true, None) => continue,
        };
        let counts: Vec<Option<i64>> = conns.iter().map(|conn| count(conn, c)).collect();
        // Only a database that could be counted is evidence.
        if counts.iter().any(Option::is_some) && counts.iter().all(|n| n.unwrap_or(0) == 0) {
            out.push(format!(
                "{} collected nothing: the rocpd database{} {} no {what} (the target did not do that during the \
                 window, or a filter excluded it; profile longer or while it works)",
                asked_as(c, typed, env),
                if dbs.len() == 1 { "" } else { "s" },
                if dbs.len() == 1 { "holds" } else { "hold" },
            ));
        }
    }
    out
}
