//! `--json`: one JSON document on stdout at the end of a session, `--list`, `--check` or
//! `summary` (progress and warnings stay on stderr). The schema is documented in docs/json.md
//! and versioned by [`SCHEMA_VERSION`].

use crate::attach::preflight::Report;
use crate::attach::session::{AttachRequest, SessionReport};
use crate::attach::targets::{ListEntry, TargetSelection};
use crate::attach::toolpath::{SdkLibrary, ToolSource};
use crate::cli::stdio::outln;
use crate::exit::ExitCode;
use serde_json::{json, Value};

/// Version of the documents' schema: bumped when a field changes meaning or disappears (new
/// fields may be added without a bump).
pub const SCHEMA_VERSION: u32 = 1;

/// Print `body` (an object) with the common fields: `schema_version`, `command`, `exit_code`,
/// `exit_name`.
pub fn print(command: &str, code: ExitCode, mut body: Value) {
    if let Value::Object(map) = &mut body {
        map.insert("schema_version".into(), json!(SCHEMA_VERSION));
        map.insert("command".into(), json!(command));
        map.insert("exit_code".into(), json!(code.code()));
        map.insert("exit_name".into(), json!(code.name()));
    }
    outln!(
        "{}",
        serde_json::to_string_pretty(&body).unwrap_or_else(|_| "{}".into())
    );
}

/// The document of an attach session.
pub fn print_session(req: &AttachRequest, report: &SessionReport) {
    let mut body = serde_json::to_value(report).unwrap_or_else(|_| json!({}));
    if let Value::Object(map) = &mut body {
        map.insert("selection".into(), selection(&req.targets));
        map.insert("output_directory".into(), json!(req.output_dir));
        map.insert(
            "duration_ms".into(),
            json!(req.duration.map(|d| d.as_millis() as u64)),
        );
    }
    print("attach", report.exit_code, body);
}

/// The selection as an object: `{"kind": "pids", "value": [...]}`, `{"kind": "match", ...}`.
pub fn selection(s: &TargetSelection) -> Value {
    serde_json::to_value(s).unwrap_or(Value::Null)
}

fn library(l: &SdkLibrary) -> Value {
    json!({
        "kind": l.kind.name(),
        "path": l.path,
        "version": l.suffix,
        "deleted": l.deleted,
    })
}

/// One `--list` row.
pub fn list_entry(e: &ListEntry) -> Value {
    json!({
        "pid": e.pid,
        "listener": e.listener,
        "cuda": e.cuda,
        "backend": e.backend.0.name(),
        "backend_reason": e.backend.1,
        "state": e.state.to_string(),
        "attachable": e.refusal.is_none(),
        "reason": e.refusal.as_ref().map(|r| &r.reason),
        "job": e.job,
        "command": e.command,
        "libraries": e.libraries.iter().map(library).collect::<Vec<_>>(),
    })
}

/// One `--check` result: the preflight report, or the error that refused the process.
pub fn check_result(pid: i32, r: &Result<Report, crate::attach::Error>) -> Value {
    match r {
        Ok(r) => json!({
            "pid": r.pid,
            "attachable": true,
            "exit_code": 0,
            "command": r.command,
            "backend": r.backend.name(),
            "backend_reason": r.backend_reason,
            "cuda": r.cuda,
            "listener_tid": r.listener_tid,
            "register_library": r.register_path,
            "register_attach_address": format!("{:#x}", r.register_attach_addr),
            "register_detach_address": format!("{:#x}", r.register_detach_addr),
            "tool_library": r.tool.string,
            "tool_source": match r.tool.source {
                ToolSource::Explicit => "explicit",
                ToolSource::TargetInstall => "target_install",
                ToolSource::Default => "default",
                ToolSource::Cuda => "cuda",
            },
            "libraries": r.sdk_libraries.iter().map(library).collect::<Vec<_>>(),
            "warnings": r.warnings.iter().chain(&r.tool.warnings).collect::<Vec<_>>(),
            "notes": r.tool.notes,
        }),
        Err(e) => json!({
            "pid": pid,
            "attachable": false,
            "exit_code": e.exit_code().code(),
            "error": e.to_string(),
        }),
    }
}
