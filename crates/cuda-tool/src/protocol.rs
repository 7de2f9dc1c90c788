//! The attach protocol between the rocprof-attach front end and this tool library.
//!
//! # Start
//!
//! The front end makes the target process run, on a fresh thread,
//! `f = dlsym(dlopen(TOOL, RTLD_NOW), "rocprof_attach_cuda_start"); f(payload)`.
//! `payload` is UTF-8 text of `key=value` lines:
//!
//! - `socket=<name>`: the abstract unix socket (name without the leading NUL) the front end
//!   listens on (`SOCK_SEQPACKET`);
//! - `version=1`: the protocol version (any other version makes the start return 2).
//!
//! `rocprof_attach_cuda_start` blocks every signal on its thread, names it `rocp-cu-attach`,
//! and binds its own listening abstract socket `rocprof-attach-cuda.<pid>`
//! (`SOCK_SEQPACKET | SOCK_CLOEXEC`). If that name is taken (a tool instance already lives in
//! this process) it returns 1 at once; on a bad payload (no `socket=`, `version` other than 1)
//! or a socket failure it returns 2 (3 if it panicked, which it should not). Otherwise it
//! connects to the front end's `socket=` (if that fails it just goes on listening), serves that
//! connection, and then accepts on its own socket forever, one connection at a time: it never
//! returns, the thread stays blocked in `accept`/`poll`, the library stays loaded, and the next
//! attach connects straight to `rocprof-attach-cuda.<pid>`.
//!
//! One connection is served at a time, and it may carry several attach/detach rounds. While it
//! is open (attached or not), every other connection is accepted, checked (peer uid), sent
//! `error busy ...` and closed after its first message (if one comes within 2 s: a client that
//! sends `attach` first then reads the refusal instead of failing with EPIPE). The same goes for
//! `error permission`. The front end should close its connection after `detach`.
//!
//! # Peers
//!
//! Every connection (the one the tool makes and every accepted one) must have an
//! `SO_PEERCRED` uid of 0 or the tool's `geteuid()`; otherwise the tool sends
//! `error permission ...` and closes it.
//!
//! # Messages
//!
//! `SOCK_SEQPACKET` datagrams of UTF-8, at most 1 MiB (larger ones are refused with
//! `error internal`). Replies are one datagram each.
//!
//! - `attach\n` followed by `KEY=VALUE\n` lines: the rocprofv3 environment
//!   (`ROCPROF_KERNEL_TRACE`, `ROCPROF_MEMORY_COPY_TRACE`, `ROCPROF_MEMORY_ALLOCATION_TRACE`,
//!   `ROCPROF_HIP_RUNTIME_API_TRACE`, `ROCPROF_HIP_COMPILER_API_TRACE`,
//!   `ROCPROF_MARKER_API_TRACE`, `ROCPROF_HSA_*`, ...; values `1`/`0`/`true`/`false`/`yes`/
//!   `no`/`on`/`off`) plus `ROCPROF_ATTACH_DB=<absolute path>` (required),
//!   `ROCPROF_ATTACH_CUPTI=<path>`, `ROCPROF_ATTACH_CUDA_DRIVER_API=1` (the front end sends it
//!   for `--hip-trace`, i.e. with `ROCPROF_HIP_COMPILER_API_TRACE=1`) and
//!   `ROCPROF_ATTACH_BUFFER_BYTES=<n>` (default 8 MiB, 64 KiB to 256 MiB).
//!   CUPTI activity kinds enabled: kernel trace → `CONCURRENT_KERNEL`; memory copy trace →
//!   `MEMCPY` and `MEMSET`; HIP runtime API trace → `RUNTIME`;
//!   `ROCPROF_ATTACH_CUDA_DRIVER_API=1` → `DRIVER` (with or without the runtime); memory allocation trace → `MEMORY2`; marker trace →
//!   `MARKER` (NVTX). `ROCPROF_COUNTER_COLLECTION=1` with `ROCPROF_COUNTERS=pmc: A B` (or
//!   `ROCPROF_KERNEL_REPLAY=1` with `ROCPROF_COUNTER_GROUPS`) collects per-kernel counters
//!   through the range profiler ([`crate::pmc`], names by [`crate::metrics`]), the kernel filters
//!   (`ROCPROF_KERNEL_FILTER_INCLUDE_REGEX`, `_EXCLUDE_REGEX`, `_RANGE`) choosing what is kept.
//!   Reply: `ok {"cupti":path,"cupti_version":N,"driver_version":N,
//!   "kinds":[...],"enable_us":N,"notes":[...],"counters":[[name,metric],...]|null}`.
//! - `detach\n`: flush (`cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)`), disable
//!   every enabled kind, flush again, unsubscribe, write one rocpd database at
//!   `ROCPROF_ATTACH_DB`. Reply: `ok {"db":path,"kernels":N,"copies":N,"api":N,
//!   "allocations":N,"dropped":N,"flush_us":N,"write_us":N,"counters":{...}|null}` (what the
//!   counting window counted and cost: [`crate::pmc::Report`]).
//! - `metrics\n`, optionally followed by `ROCPROF_ATTACH_CUPTI=<path>\n` (the CUPTI to load
//!   when the process maps none), while no session is attached on the connection: the metrics
//!   the process's GPUs offer, through CUPTI's profiler host ([`crate::catalog`]); nothing is
//!   enabled, and CUPTI is torn down again as after a detach. Reply: `ok {"cupti":path,
//!   "cupti_version":N,"driver_version":N,"devices":[{"ordinal":N,"name":S}],"chips":[{"chip":S,
//!   "devices":[N],"availability":B,"metrics":[{"name":S,"type":"counter"|"ratio"|"throughput",
//!   "unit":S,"hw_unit":S,"description":S,"rocprofv3":[[name,metric]]}]}],"notes":[S]}`.
//!   Errors: `busy` while attached, `cupti-missing`, `cupti-old` (no profiler host API, CUPTI
//!   older than CUDA 12.6), `unsupported` (no device), `internal` (a CUPTI call failed).
//! - When the connection ends (EOF or error) while attached, the tool detaches anyway (flush,
//!   disable, write the database) and goes back to `accept`.
//!
//! Errors: `error <code> <one line: what happened, why, and the fix>`, codes `busy` (a second
//! concurrent connection, or a second `attach` on an attached connection), `cupti-missing`,
//! `cupti-held` (CUPTI error 39 from `cuptiSubscribe`, `cuptiActivityRegisterCallbacks` or
//! `cuptiActivityEnable`: another profiler holds CUPTI), `cupti-old` (`cuptiGetVersion` below
//! 18 = CUDA 12.0, or a CUPTI function missing), `counters-denied` (the driver or sandbox denies
//! GPU counters), `unsupported` (an option CUDA cannot do such as PC sampling, a counter
//! with no NVIDIA equivalent or a set needing several passes, no tracing option at all, a bad `ROCPROF_ATTACH_DB` or
//! `ROCPROF_ATTACH_BUFFER_BYTES`, an unknown message), `permission` (peer check), `internal`
//! (`detach` while not attached, the database directory not writable by the target, the
//! database write failed, a message over 1 MiB, any other CUPTI failure).
//!
//! A failed `attach` leaves nothing enabled or subscribed. Settings the CUDA backend has no
//! counterpart for (`ROCPROF_HSA_*_TRACE`, `ROCPROF_HIP_COMPILER_API_TRACE`,
//! `ROCPROF_SCRATCH_MEMORY_TRACE`, `ROCPROF_OMPT_TRACE` (all implied by `--sys-trace`), RCCL,
//! rocDecode, rocJPEG, ...) are accepted and named in `left_out`; kernel filters, collection
//! periods and kernel renaming, which the CUDA backend does not implement, are named in `notes`;
//! other unknown keys are ignored.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// Largest datagram accepted.
pub const MAX_MESSAGE: usize = 1 << 20;

/// Default CUPTI buffer size.
pub const DEFAULT_BUFFER_BYTES: usize = 8 << 20;

/// The thread name of the tool thread.
pub const THREAD_NAME: &str = "rocp-cu-attach";

/// The tool's listening abstract socket name for process `pid` (no leading NUL).
pub fn tool_socket_name(pid: u32) -> String {
    format!("rocprof-attach-cuda.{pid}")
}

/// An error reply code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// A session is already active.
    Busy,
    /// No libcupti could be loaded.
    CuptiMissing,
    /// Another profiler holds CUPTI (error 39).
    CuptiHeld,
    /// CUPTI is too old or lacks a function.
    CuptiOld,
    /// Something CUDA cannot do, or an unknown message.
    Unsupported,
    /// The driver or the sandbox denies GPU counters (`CUPTI_ERROR_INSUFFICIENT_PRIVILEGES`).
    CountersDenied,
    /// The peer's uid is neither 0 nor ours.
    Permission,
    /// Anything else.
    Internal,
}

impl Code {
    /// The code as sent on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Busy => "busy",
            Code::CuptiMissing => "cupti-missing",
            Code::CuptiHeld => "cupti-held",
            Code::CuptiOld => "cupti-old",
            Code::Unsupported => "unsupported",
            Code::CountersDenied => "counters-denied",
            Code::Permission => "permission",
            Code::Internal => "internal",
        }
    }
}

/// An error to send as `error <code> <message>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// The code.
    pub code: Code,
    /// The one-line message.
    pub message: String,
}

impl ToolError {
    /// An error with `code` and `message`.
    pub fn new(code: Code, message: impl Into<String>) -> ToolError {
        ToolError {
            code,
            message: message.into(),
        }
    }

    /// The reply datagram (newlines in the message become spaces).
    pub fn reply(&self) -> String {
        format!(
            "error {} {}",
            self.code.as_str(),
            self.message.replace('\n', " ")
        )
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reply())
    }
}

/// The `ok <json>` reply.
pub fn ok_reply(v: &serde_json::Value) -> String {
    format!("ok {v}")
}

/// A message from the front end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// `attach` with its settings.
    Attach(AttachRequest),
    /// `detach`.
    Detach,
    /// `metrics` (optionally with `ROCPROF_ATTACH_CUPTI=<path>`): list the metrics the
    /// process's GPUs offer; nothing is enabled ([`crate::catalog`]).
    Metrics(AttachRequest),
}

impl Message {
    /// Parses one datagram.
    pub fn parse(bytes: &[u8]) -> Result<Message, ToolError> {
        let text = std::str::from_utf8(bytes).map_err(|_| {
            ToolError::new(
                Code::Unsupported,
                "the message is not UTF-8; the front end must send UTF-8 text",
            )
        })?;
        let mut lines = text.lines();
        let first = lines.next().unwrap_or("").trim();
        match first {
            "attach" => Ok(Message::Attach(AttachRequest {
                env: key_values(lines)?,
            })),
            "detach" => Ok(Message::Detach),
            "metrics" => Ok(Message::Metrics(AttachRequest {
                env: key_values(lines)?,
            })),
            other => Err(ToolError::new(
                Code::Unsupported,
                format!("unknown message '{other}'; this tool understands 'attach', 'detach' and 'metrics' (protocol version 1)"),
            )),
        }
    }
}

/// The `KEY=VALUE` lines after a message's first line.
fn key_values<'a>(
    lines: impl Iterator<Item = &'a str>,
) -> Result<BTreeMap<String, String>, ToolError> {
    let mut env = BTreeMap::new();
    for line in lines {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(ToolError::new(
                Code::Unsupported,
                format!("line '{line}' is not KEY=VALUE; send one KEY=VALUE per line"),
            ));
        };
        env.insert(k.trim().to_owned(), v.to_owned());
    }
    Ok(env)
}

/// Parses a boolean setting the way rocprofv3 reads its environment.
pub fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on" | "y"
    )
}

/// The settings of an `attach` message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttachRequest {
    /// Every `KEY=VALUE` line.
    pub env: BTreeMap<String, String>,
}

/// What one attach asks CUPTI for.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Kernel trace.
    pub kernels: bool,
    /// Memory copy (and memset) trace.
    pub copies: bool,
    /// Runtime API trace.
    pub runtime_api: bool,
    /// Driver API trace.
    pub driver_api: bool,
    /// Memory allocation trace.
    pub allocations: bool,
    /// NVTX markers.
    pub markers: bool,
    /// The database to write.
    pub db: PathBuf,
    /// `ROCPROF_ATTACH_CUPTI`.
    pub cupti: Option<PathBuf>,
    /// CUPTI buffer size.
    pub buffer_bytes: usize,
    /// Demangle kernel names for display (`ROCPROF_DEMANGLE_KERNELS`, default on).
    pub demangle: bool,
    /// Caveats for the reply, which the front end shows as warnings (settings not
    /// implemented for CUDA, NVTX without injection at launch).
    pub notes: Vec<String>,
    /// Trace switches that were on but have no CUDA counterpart (`--sys-trace` implies
    /// several): named in the reply, shown by the front end at info level.
    pub left_out: Vec<&'static str>,
    /// Per-kernel counters (`--pmc`): [`crate::pmc`].
    pub counters: Option<crate::metrics::CounterPlan>,
    /// The `--spm` counters sampled over time (PM sampling).
    pub spm: Option<crate::spm::SpmPlan>,
}

impl Plan {
    /// The names of the enabled kinds as the reply lists them.
    pub fn kind_names(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        for (on, name) in [
            (self.kernels, "kernel"),
            (self.copies, "memcpy"),
            (self.copies, "memset"),
            (self.runtime_api, "runtime"),
            (self.driver_api, "driver"),
            (self.allocations, "memory"),
            (self.markers, "marker"),
        ] {
            if on {
                v.push(name);
            }
        }
        v
    }
}

/// Options that ask for something the CUDA backend cannot do: `(variable, what it asks for)`;
/// refused when the variable is set to anything but a false value, `none` or empty.
const UNSUPPORTED: [(&str, &str); 4] = [
    (
        "ROCPROF_PC_SAMPLING_METHOD",
        "PC sampling (--pc-sampling-*)",
    ),
    ("ROCPROF_PC_SAMPLING_BETA_ENABLED", "PC sampling"),
    ("ROCPROF_ADVANCED_THREAD_TRACE", "thread trace (--att)"),
    (
        "ROCPROF_SELECTED_REGIONS",
        "collection limited to selected ROCTx regions",
    ),
];

/// Trace switches accepted and left out (no CUDA counterpart here): `(prefix, what)`.
const IGNORED: [(&str, &str); 11] = [
    ("ROCPROF_HSA_", "HSA API"),
    ("ROCPROF_HIP_COMPILER_API_TRACE", "HIP compiler API"),
    ("ROCPROF_SCRATCH_MEMORY_TRACE", "scratch memory"),
    ("ROCPROF_RCCL_API_TRACE", "RCCL (NCCL is not traced)"),
    ("ROCPROF_ROCDECODE_API_TRACE", "rocDecode"),
    ("ROCPROF_ROCJPEG_API_TRACE", "rocJPEG"),
    ("ROCPROF_ROCSHMEM_API_TRACE", "rocSHMEM"),
    ("ROCPROF_HIPFILE_API_TRACE", "hipFile"),
    ("ROCPROF_KFD_", "KFD events"),
    ("ROCPROF_OMPT_TRACE", "OpenMP tools"),
    ("ROCPROF_HIP_", "HIP graphs and events"),
];

/// Whether a setting asks for something: not empty, not a false value, not `none`.
fn requested(v: &str) -> bool {
    let v = v.trim().to_ascii_lowercase();
    !matches!(v.as_str(), "" | "0" | "false" | "no" | "off" | "n" | "none")
}

impl AttachRequest {
    /// Whether `key` is set to a true value.
    pub fn flag(&self, key: &str) -> bool {
        self.env.get(key).is_some_and(|v| truthy(v))
    }

    /// Checks the settings and turns them into a [`Plan`].
    pub fn plan(&self) -> Result<Plan, ToolError> {
        self.refuse_unsupported()?;
        let db = self.db()?;
        let buffer_bytes = self.buffer_bytes()?;
        let mut plan = Plan {
            kernels: self.flag("ROCPROF_KERNEL_TRACE"),
            copies: self.flag("ROCPROF_MEMORY_COPY_TRACE"),
            runtime_api: self.flag("ROCPROF_HIP_RUNTIME_API_TRACE"),
            // The front end sets it for --hip-trace (the HIP compiler API switch).
            driver_api: self.flag("ROCPROF_ATTACH_CUDA_DRIVER_API"),
            allocations: self.flag("ROCPROF_MEMORY_ALLOCATION_TRACE"),
            markers: self.flag("ROCPROF_MARKER_API_TRACE"),
            db,
            cupti: self
                .env
                .get("ROCPROF_ATTACH_CUPTI")
                .filter(|s| !s.trim().is_empty())
                .map(|s| PathBuf::from(s.trim())),
            buffer_bytes,
            demangle: self
                .env
                .get("ROCPROF_DEMANGLE_KERNELS")
                .is_none_or(|v| truthy(v)),
            counters: crate::metrics::counter_plan(&self.env)?,
            spm: crate::spm::spm_plan(&self.env)?,
            notes: Vec::new(),
            left_out: self.left_out(),
        };
        plan.notes = self.filter_notes(plan.counters.is_some());
        if plan.markers {
            plan.notes.push("CUPTI sees NVTX ranges only when the process was started with NVTX injection (NVTX_INJECTION64_PATH); without it no marker rows may arrive".into());
        }
        if plan.kind_names().is_empty() && plan.counters.is_none() && plan.spm.is_none() {
            return Err(ToolError::new(
                Code::Unsupported,
                "attach enables no tracing: none of ROCPROF_KERNEL_TRACE, ROCPROF_MEMORY_COPY_TRACE, ROCPROF_HIP_RUNTIME_API_TRACE, ROCPROF_MEMORY_ALLOCATION_TRACE, ROCPROF_MARKER_API_TRACE is 1; pass a tracing option such as --kernel-trace",
            ));
        }
        Ok(plan)
    }

    /// Refuses a setting that asks for what the CUDA backend cannot do ([`UNSUPPORTED`]).
    fn refuse_unsupported(&self) -> Result<(), ToolError> {
        for (key, what) in UNSUPPORTED {
            if let Some(v) = self.env.get(key).filter(|v| requested(v)) {
                return Err(ToolError::new(
                    Code::Unsupported,
                    format!("{key}={v} asks for {what}, which the CUDA backend cannot do; drop that option when attaching to a CUDA process"),
                ));
            }
        }
        Ok(())
    }

    /// `ROCPROF_ATTACH_DB`: the absolute path of the database to write.
    fn db(&self) -> Result<PathBuf, ToolError> {
        match self.env.get("ROCPROF_ATTACH_DB").map(|s| s.trim()) {
            Some(p) if p.starts_with('/') => Ok(PathBuf::from(p)),
            Some(p) => Err(ToolError::new(
                Code::Unsupported,
                format!("ROCPROF_ATTACH_DB='{p}' is not an absolute path; the front end must send the absolute path of the database to write"),
            )),
            None => Err(ToolError::new(
                Code::Unsupported,
                "attach without ROCPROF_ATTACH_DB: the tool does not know where to write; send ROCPROF_ATTACH_DB=<absolute path>",
            )),
        }
    }

    /// `ROCPROF_ATTACH_BUFFER_BYTES`: the size of CUPTI's activity buffers (a multiple of 8).
    fn buffer_bytes(&self) -> Result<usize, ToolError> {
        match self.env.get("ROCPROF_ATTACH_BUFFER_BYTES") {
            None => Ok(DEFAULT_BUFFER_BYTES),
            Some(v) => match v.trim().parse::<usize>() {
                Ok(n) if (64 << 10..=256 << 20).contains(&n) => Ok(n & !7),
                _ => Err(ToolError::new(
                    Code::Unsupported,
                    format!("ROCPROF_ATTACH_BUFFER_BYTES='{v}' is not a byte count from 65536 to 268435456; send a number in that range or leave it out (8 MiB)"),
                )),
            },
        }
    }

    /// What of the [`IGNORED`] trace switches is asked for (and so left out).
    fn left_out(&self) -> Vec<&'static str> {
        let handled = [
            "ROCPROF_HIP_RUNTIME_API_TRACE",
            "ROCPROF_HIP_COMPILER_API_TRACE",
        ];
        // The HIP compiler API switch stands for the driver API when the front end asked for it.
        let driver = self.flag("ROCPROF_ATTACH_CUDA_DRIVER_API");
        let mut left_out = Vec::new();
        for (prefix, what) in IGNORED {
            let on = self.env.iter().any(|(k, v)| {
                k.starts_with(prefix)
                    && k.ends_with("_TRACE")
                    && (prefix == *k || !handled.contains(&k.as_str()))
                    && !(driver && k == "ROCPROF_HIP_COMPILER_API_TRACE")
                    && truthy(v)
            });
            if on {
                left_out.push(what);
            }
        }
        left_out
    }

    /// A note for each kernel filter set to something: not implemented for tracing, every record
    /// kept (with counters, the kernel filters choose the counted kernels).
    fn filter_notes(&self, counters: bool) -> Vec<String> {
        let filtered = [
            ("ROCPROF_KERNEL_FILTER_INCLUDE_REGEX", ".*"),
            ("ROCPROF_KERNEL_FILTER_EXCLUDE_REGEX", ""),
            ("ROCPROF_KERNEL_FILTER_RANGE", ""),
            ("ROCPROF_COLLECTION_PERIOD", ""),
            ("ROCPROF_KERNEL_RENAME", "0"),
        ];
        let mut notes = Vec::new();
        for (key, neutral) in filtered {
            if counters && key.starts_with("ROCPROF_KERNEL_FILTER_") {
                continue;
            }
            if let Some(v) = self.env.get(key).filter(|v| v.trim() != neutral) {
                notes.push(format!(
                    "{key}={v} is not implemented for CUDA; every record is kept"
                ));
            }
        }
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_attach() {
        let m = Message::parse(
            b"attach\nROCPROF_KERNEL_TRACE=1\nROCPROF_HIP_RUNTIME_API_TRACE=true\nROCPROF_ATTACH_CUDA_DRIVER_API=1\nROCPROF_HSA_CORE_API_TRACE=1\nROCPROF_ATTACH_DB=/tmp/x.db\n",
        )
        .unwrap();
        let Message::Attach(a) = m else { panic!() };
        let p = a.plan().unwrap();
        assert!(p.kernels && p.runtime_api && p.driver_api && !p.copies);
        assert_eq!(p.db, PathBuf::from("/tmp/x.db"));
        assert_eq!(p.buffer_bytes, DEFAULT_BUFFER_BYTES);
        assert_eq!(p.kind_names(), ["kernel", "runtime", "driver"]);
        assert_eq!(p.left_out, ["HSA API"]);
        assert!(p.notes.is_empty(), "{:?}", p.notes);
        assert!(p.demangle);
        // What the front end sends for --sys-trace: accepted, with notes, driver API on.
        let sys = "attach\nROCPROF_HIP_RUNTIME_API_TRACE=1\nROCPROF_HIP_COMPILER_API_TRACE=1\n\
            ROCPROF_OMPT_TRACE=1\nROCPROF_SCRATCH_MEMORY_TRACE=1\nROCPROF_KERNEL_TRACE=1\n\
            ROCPROF_HSA_CORE_API_TRACE=1\nROCPROF_ATTACH_CUDA_DRIVER_API=1\nROCPROF_ATTACH_DB=/x.db\n";
        let Message::Attach(a) = Message::parse(sys.as_bytes()).unwrap() else {
            panic!()
        };
        let p = a.plan().unwrap();
        assert!(p.runtime_api && p.driver_api && p.kernels);
        assert_eq!(
            p.left_out,
            ["HSA API", "scratch memory", "OpenMP tools"],
            "the compiler API switch stands for the driver API"
        );
        // rocprofv3's defaults ask for nothing unsupported and add no notes.
        let defaults = "attach\nROCPROF_KERNEL_TRACE=1\nROCPROF_ATTACH_DB=/x.db\nROCPROF_PC_SAMPLING_METHOD=none\n\
            ROCPROF_COUNTERS=\nROCPROF_KERNEL_FILTER_INCLUDE_REGEX=.*\nROCPROF_HIP_GRAPH_TRACE=0\n\
            ROCPROF_HIP_COMPILER_API_TRACE=0\nROCPROF_DEMANGLE_KERNELS=0\n";
        let Message::Attach(a) = Message::parse(defaults.as_bytes()).unwrap() else {
            panic!()
        };
        let p = a.plan().unwrap();
        assert!(p.notes.is_empty() && p.left_out.is_empty(), "{p:?}");
        assert!(!p.demangle);
    }

    #[test]
    fn refuses() {
        let e = |s: &str| match Message::parse(s.as_bytes()) {
            Ok(Message::Attach(a)) => a.plan().unwrap_err(),
            Ok(_) => panic!(),
            Err(e) => e,
        };
        assert_eq!(
            e("attach\nROCPROF_KERNEL_TRACE=1\n").code,
            Code::Unsupported
        );
        assert_eq!(
            e("attach\nROCPROF_KERNEL_TRACE=1\nROCPROF_ATTACH_DB=rel.db\n").code,
            Code::Unsupported
        );
        assert!(e(
            "attach\nROCPROF_ATTACH_DB=/a.db\nROCPROF_COUNTERS=pmc: SQ_INSTS_VALU\nROCPROF_KERNEL_TRACE=1"
        )
        .message
        .contains("smsp__inst_executed.sum"));
        assert_eq!(e("hello\n").code, Code::Unsupported);
        assert!(e("attach\nROCPROF_ATTACH_DB=/a.db\nROCPROF_PC_SAMPLING_METHOD=host_trap\nROCPROF_KERNEL_TRACE=1")
            .message
            .contains("ROCPROF_PC_SAMPLING_METHOD=host_trap"));
        assert_eq!(Message::parse(b"detach\n").unwrap(), Message::Detach);
        let Ok(Message::Metrics(m)) =
            Message::parse(b"metrics\nROCPROF_ATTACH_CUPTI=/x/libcupti.so\n")
        else {
            panic!("metrics")
        };
        assert_eq!(m.env["ROCPROF_ATTACH_CUPTI"], "/x/libcupti.so");
        assert_eq!(ToolError::new(Code::Busy, "a\nb").reply(), "error busy a b");
    }
}
