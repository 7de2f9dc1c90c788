//! Step five: which files the tool wrote (a snapshot of the output directory taken before the
//! attach, compared after the detach), conversions the user asked for that the tool did not
//! write, and the per-process results.

use super::attach::AttachOutcome;
use super::detach::DetachOutcome;
use super::events::{Event, Events};
use super::output_wait::OutputWait;
use super::plan::Plan;
use super::report::{
    results_of, verdict, FileReport, Message, ProcessReport, ProcessStatus, SessionReport, Severity,
};
use super::wait::WaitEnd;
use super::AttachRequest;
use crate::outputs::{self, Snapshot, WrittenFile};
use rocprof_exit::ExitCode;
use rocprof_rocpd::format::OutputFormat;
use std::collections::HashMap;
use std::path::PathBuf;

/// The output directory as it was before the attach: one snapshot per target root and expanded
/// output template.
#[derive(Debug)]
pub struct Collector {
    snapshots: HashMap<((u64, u64), String), Snapshot>,
    pub(super) prefixes: Vec<(i32, Option<String>)>,
    /// The least free space of the output file systems from here to the collection.
    space: super::space::SpaceWatch,
}

impl Collector {
    /// Snapshot what the output template of every planned process can name (processes with the
    /// same root and the same expanded template share one), and the file-name prefix each is
    /// expected to write under (None where a key cannot be known from here).
    pub fn before(plan: &Plan, req: &AttachRequest) -> Collector {
        let sent: Vec<(String, String)> = req
            .env
            .forwarded()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut snapshots = HashMap::new();
        let mut prefixes = Vec::new();
        for p in &plan.targets {
            let pid = p.report.pid;
            // The preflight read each process's environment: the template is expanded from it.
            let pattern = outputs::pattern_of(
                pid,
                &req.output_dir,
                &req.output_file,
                p.report.environ.as_deref(),
                Some(p.report.own_pid),
                &sent,
            );
            let key = (p.report.root_id, pattern.regex().as_str());
            snapshots
                .entry(key)
                .and_modify(|s: &mut Snapshot| s.also_seen_by(pid))
                .or_insert_with(|| Snapshot::take(pid, &pattern));
            prefixes.push((pid, pattern.exact()));
        }
        let dirs: Vec<PathBuf> = snapshots.values().filter_map(Snapshot::root_now).collect();
        Collector {
            snapshots,
            prefixes,
            space: super::space::SpaceWatch::start(&dirs),
        }
    }

    /// The directories the tool's files lie under (as the targets see them), for messages.
    fn output_dirs(&self) -> String {
        let mut dirs: Vec<String> = self
            .snapshots
            .values()
            .map(|s| s.dir().display().to_string())
            .collect();
        dirs.sort();
        dirs.dedup();
        dirs.join(", ")
    }

    /// Where each snapshot's directory can be read now.
    pub(super) fn roots_now(&self) -> Vec<PathBuf> {
        self.snapshots
            .values()
            .filter_map(Snapshot::root_now)
            .collect()
    }

    /// The files written since the snapshots, less those of other nodes in a shared directory.
    pub(super) fn written(&self) -> Vec<WrittenFile> {
        let mut files: Vec<WrittenFile> = self
            .snapshots
            .values()
            .flat_map(Snapshot::changes)
            .collect();
        // In a directory shared by several nodes, the other nodes' files appear too: not ours.
        let known = outputs::known_prefixes(&self.prefixes);
        files.retain(|f| {
            let others = known.as_ref().is_some_and(|k| outputs::outside(f, k));
            if others {
                tracing::debug!(
                    "not reporting {}: it matches none of the selected processes' output names",
                    f.path.display()
                );
            }
            !others
        });
        files
    }

    /// Where the output of the detached processes will appear: the expanded output directory and
    /// file-name prefix of each (as the targets see them), for the "output not yet written"
    /// warning.
    fn pending_places(&self, detach: &DetachOutcome) -> String {
        let mut places: Vec<String> = self
            .prefixes
            .iter()
            .filter(|(pid, _)| detach.detached.iter().any(|d| d.pid == *pid))
            .map(|(pid, prefix)| match prefix {
                Some(p) => format!("{p}* (process {pid})"),
                None => format!("{} (process {pid})", self.output_dirs()),
            })
            .collect();
        places.dedup();
        places.join(", ")
    }

    /// Find the files written, convert what the user asked for and the tool did not write, and
    /// build the session's report. `waited` is how the wait for asynchronous output ended
    /// ([`Collector::await_output`]; [`OutputWait::NotWaited`] with synchronous output).
    #[allow(clippy::too_many_arguments)]
    pub fn collect(
        self,
        req: &AttachRequest,
        plan: &Plan,
        attach: &AttachOutcome,
        end: &WaitEnd,
        detach: &DetachOutcome,
        waited: OutputWait,
        events: Events,
    ) -> SessionReport {
        let prefixes = self.prefixes.clone();
        let output = self.output_dirs();
        let self_places = self.pending_places(detach);
        let mut files = recovered(self.written());
        let (converted, failed) = convert_missing_formats(req, &files, events);
        files.extend(converted);
        let least_free = self.space.stop();
        let owners = outputs::owners(&files, &prefixes);
        let mut processes = results_of(plan, attach, &end.exited, detach);
        let files = attribute(&mut processes, files, owners);
        // Asynchronous output not written yet when the wait ended: it is coming, not missing.
        let pending = files.is_empty()
            && !req.sync_output
            && !detach.detached.is_empty()
            && matches!(
                waited,
                OutputWait::TimedOut | OutputWait::Stopped | OutputWait::NotWaited
            );
        let reasons = detach_reasons(detach);
        let (mut messages, mut exit_code) = if pending {
            let mut messages: Vec<Message> =
                super::report::still_active(&processes, &reasons, &output, false)
                    .into_iter()
                    .collect();
            messages.push(not_yet_written(req, waited, &self_places));
            let code = super::report::aggregate(&processes, &mut messages);
            (messages, code)
        } else {
            verdict(&processes, &reasons, files.is_empty(), &output, || {
                no_output_hint(req, attach, &output)
            })
        };
        detail_exits(&mut messages, exited_with_data(&processes, &files, plan));
        if let Some(m) =
            incomplete(&files, least_free).or_else(|| out_of_space(&failed, least_free))
        {
            messages.push(m);
            if matches!(exit_code, ExitCode::Success | ExitCode::FormatMissing) {
                exit_code = ExitCode::NoOutput;
            }
        }
        messages.extend(capture_messages(req, attach, &files));
        if !files.is_empty() {
            if let Some(m) = missing_formats(req, &files) {
                messages.push(Message {
                    severity: Severity::Warning,
                    text: m,
                });
                if exit_code == ExitCode::Success {
                    exit_code = ExitCode::FormatMissing;
                }
            }
        }
        SessionReport {
            processes,
            files,
            end: Some(end.reason),
            messages,
            exit_code,
        }
    }
}

/// Why each process could not be detached, in full (the table keeps a short form).
fn detach_reasons(detach: &DetachOutcome) -> Vec<(i32, String)> {
    detach
        .failures
        .iter()
        .filter_map(|f| match &f.error {
            crate::error::Error::DetachFailed { reason, .. } => Some((f.pid, reason.clone())),
            _ => None,
        })
        .collect()
}

/// What the files hold compared with what was asked for: a warning per kind of event asked for
/// and not collected, and, for a CUDA session, where its API rows are.
fn capture_messages(
    req: &AttachRequest,
    attach: &AttachOutcome,
    files: &[FileReport],
) -> Vec<Message> {
    let cuda = !attach.attached.is_empty() && attach.attached.iter().all(|a| a.cuda.is_some());
    let mut out: Vec<Message> = super::verify::empty_captures(&req.env, &req.switches, cuda, files)
        .into_iter()
        .map(|text| Message {
            severity: Severity::Warning,
            text,
        })
        .collect();
    if let Some(text) = cuda_api_note(req, attach, files) {
        out.push(Message {
            severity: Severity::Note,
            text,
        });
    }
    out
}

/// Where a CUDA session's API rows are, when it traced API calls and wrote files: rocpd and
/// rocprofv3's formats have no CUDA API domain, so they are filed as HIP runtime API rows
/// (docs/cuda.md, "What is collected").
fn cuda_api_note(
    req: &AttachRequest,
    attach: &AttachOutcome,
    files: &[FileReport],
) -> Option<String> {
    let api = [
        "ROCPROF_HIP_RUNTIME_API_TRACE",
        "ROCPROF_HIP_COMPILER_API_TRACE",
    ]
    .iter()
    .any(|v| {
        req.env
            .get(v)
            .is_some_and(|v| crate::options::parse_bool(v) == Ok(true))
    });
    if !api || files.is_empty() || !attach.attached.iter().any(|a| a.cuda.is_some()) {
        return None;
    }
    Some(
        "CUDA API calls are filed as HIP runtime API rows: rocpd category HIP_RUNTIME_API_CUDA (driver \
         calls HIP_RUNTIME_API_CUDA_DRIVER), CSV *_hip_api_trace.csv (Domain column the same), JSON and \
         Perfetto under the HIP API"
            .to_string(),
    )
}

/// Give each process the files it wrote, and describe every file (whose it is, whether whole).
fn attribute(
    processes: &mut [ProcessReport],
    files: Vec<WrittenFile>,
    owners: Vec<Option<i32>>,
) -> Vec<FileReport> {
    for p in processes.iter_mut() {
        p.files = files
            .iter()
            .zip(&owners)
            .filter(|(_, o)| **o == Some(p.pid))
            .map(|(f, _)| f.path.clone())
            .collect();
    }
    let files: Vec<FileReport> = files
        .into_iter()
        .zip(owners)
        .map(|(f, pid)| super::verify::file_report(f.path, f.host_path, f.size, pid))
        .collect();
    for f in &files {
        tracing::debug!(
            "file {} ({} bytes, {})",
            f.path.display(),
            f.size,
            match f.pid {
                Some(pid) => format!("process {pid}"),
                None => "not attributed to a process".to_string(),
            }
        );
    }
    files
}

/// The warning for asynchronous output that was not written when the wait ended (`places`: where
/// it will appear).
fn not_yet_written(req: &AttachRequest, waited: OutputWait, places: &str) -> Message {
    Message {
        severity: Severity::Warning,
        text: format!(
            "output not yet written: with --attach-sync-output=false the tool writes its files in the \
             background, and none was complete {}; they will appear later under {} (as seen by the \
             target). Wait longer with --output-timeout, or use synchronous output",
            match waited {
                OutputWait::Stopped => "when the wait was interrupted".to_string(),
                OutputWait::NotWaited => "at the detach (--output-timeout 0: not waited)".to_string(),
                _ => format!("after --output-timeout {}", super::output_wait::describe(req.output_wait)),
            },
            places
        ),
    }
}

/// The error naming the files that are not whole, their state and the cause; None if all are.
fn incomplete(files: &[FileReport], least_free: Option<u64>) -> Option<Message> {
    let bad: Vec<&FileReport> = files.iter().filter(|f| f.problem.is_some()).collect();
    if bad.is_empty() {
        return None;
    }
    // Nothing written is not success: name the files, their state and the cause.
    let list: Vec<String> = bad
        .iter()
        .map(|f| {
            format!(
                "{} is {}",
                f.path.display(),
                f.problem.as_deref().unwrap_or("")
            )
        })
        .collect();
    let dir = bad[0]
        .host_path
        .parent()
        .unwrap_or(std::path::Path::new("/"));
    Some(Message {
        severity: Severity::Error,
        text: format!(
            "the output is incomplete: {} of {} file{} written {} not whole ({}); {}",
            bad.len(),
            files.len(),
            super::plural(files.len()),
            if bad.len() == 1 { "is" } else { "are" },
            list.join("; "),
            super::verify::space_cause(dir, least_free)
        ),
    })
}

/// The files written, a database left mid-commit (its process killed) rolled back to its last
/// commit; its journal is no output of its own.
fn recovered(mut files: Vec<WrittenFile>) -> Vec<WrittenFile> {
    for f in &files {
        if f.host_path.extension().is_some_and(|e| e == "db") {
            super::verify::recover_journal(&f.host_path);
        }
    }
    files.retain(|f| !f.host_path.to_string_lossy().ends_with("-journal") || f.host_path.exists());
    files
}

/// Adds the messages of [`exited_with_data`], in place of the generic "may be incomplete" of a
/// process whose database says what it holds.
fn detail_exits(messages: &mut Vec<Message>, detailed: Vec<(i32, Message)>) {
    messages.retain(|m| {
        !detailed.iter().any(|(pid, _)| {
            m.text.starts_with(&format!(
                "process {pid} exited before rocprof-attach detached;"
            ))
        })
    });
    messages.extend(detailed.into_iter().map(|(_, m)| m));
}

/// What each process that exited during the session left: its databases, what they hold and
/// whether its tool finished them, or, with none, what its profiler does on exit (docs/output.md,
/// "When the target ends").
fn exited_with_data(
    processes: &[ProcessReport],
    files: &[FileReport],
    plan: &Plan,
) -> Vec<(i32, Message)> {
    let mut out = Vec::new();
    for p in processes
        .iter()
        .filter(|p| p.status == ProcessStatus::Exited)
    {
        let cuda = plan
            .targets
            .iter()
            .any(|t| t.report.pid == p.pid && t.report.backend == crate::cuda::Backend::Cuda);
        let dbs: Vec<&FileReport> = files
            .iter()
            .filter(|f| f.pid == Some(p.pid) && f.problem.is_none())
            .filter(|f| f.host_path.extension().is_some_and(|e| e == "db"))
            .collect();
        for f in &dbs {
            let Some(c) = super::verify::contents(&f.host_path) else {
                continue;
            };
            out.push((p.pid, Message {
                severity: Severity::Warning,
                text: format!(
                    "process {} ended while attached; {} is a complete rocpd database and holds {} ({} rows) {}",
                    p.pid,
                    f.path.display(),
                    c.describe(),
                    super::verify::group(c.rows()),
                    how_it_ended(&c)
                ),
            }));
        }
        if dbs.is_empty() && !cuda {
            out.push((0, Message {
                severity: Severity::Warning,
                text: format!(
                    "process {}: rocprofiler-sdk writes the output of a session still attached when the process \
                     exits normally (exit() or a return from main), not when a signal kills it or it calls _exit",
                    p.pid
                ),
            }));
        }
    }
    out
}

/// How the writer of a database ended it, as the database says.
fn how_it_ended(c: &super::verify::Contents) -> String {
    match (c.finished, c.ended_by.as_deref()) {
        (Some(true), Some(how)) if how != "detach" => format!(
            "up to its end: the CUDA tool wrote every record and finished the database at its {how}"
        ),
        (Some(true), _) => "(finished by the tool)".to_string(),
        (Some(false), _) => format!(
            "committed up to {:.1} s into the session: the process ended without running any code \
             (SIGKILL, _exit, or a signal the tool could not wait for), so the records of about its last half second \
             are not in it",
            c.span_ns as f64 / 1e9
        ),
        (None, _) => "(written by the tool before the process ended)".to_string(),
    }
}

/// A conversion that could not be written: the database, the format, the error.
type Failed = (PathBuf, OutputFormat, String);

/// The error for conversions that failed for want of space (ENOSPC or a quota in the error, or
/// a file system seen full during the session): the output is incomplete, exit 9, with the
/// cause; None when no conversion failed so.
fn out_of_space(failed: &[Failed], least_free: Option<u64>) -> Option<Message> {
    let space = |e: &str| {
        [
            "No space left",
            "os error 28",
            "disk is full",
            "quota",
            "os error 122",
        ]
        .iter()
        .any(|w| e.contains(w))
    };
    let seen_full = least_free.is_some_and(|l| l < super::verify::FULL_BELOW);
    let hit: Vec<&Failed> = failed
        .iter()
        .filter(|(_, _, e)| space(e) || seen_full)
        .collect();
    let (db, _, _) = hit.first()?;
    let list: Vec<String> = hit
        .iter()
        .map(|(db, f, e)| format!("{} to {f}: {e}", db.display()))
        .collect();
    let dir = db.parent().unwrap_or(std::path::Path::new("/"));
    Some(Message {
        severity: Severity::Error,
        text: format!(
            "the output is incomplete: {} conversion{} could not be written ({}); {}",
            hit.len(),
            super::plural(hit.len()),
            list.join("; "),
            super::verify::space_cause(dir, least_free)
        ),
    })
}

/// If the user asked for CSV, JSON, Perfetto or OTF2 and the tool only wrote rocpd databases,
/// convert them: the files written, and the conversions that failed.
fn convert_missing_formats(
    req: &AttachRequest,
    files: &[WrittenFile],
    events: Events,
) -> (Vec<WrittenFile>, Vec<Failed>) {
    let dbs: Vec<&WrittenFile> = files
        .iter()
        .filter(|f| f.host_path.extension().is_some_and(|e| e == "db"))
        // A truncated database is reported as such, not converted.
        .filter(|f| super::verify::problem(&f.host_path).is_none())
        .collect();
    if dbs.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let has = |ext: &str| {
        files
            .iter()
            .any(|f| f.path.extension().is_some_and(|e| e == ext))
    };
    let missing: Vec<OutputFormat> = req
        .formats
        .iter()
        .copied()
        .filter(|f| match f {
            OutputFormat::Csv => !has("csv"),
            OutputFormat::Json => !has("json"),
            OutputFormat::Pftrace => !has("pftrace"),
            OutputFormat::Otf2 => !has("otf2"),
            OutputFormat::Rocpd => false,
        })
        .collect();
    let (mut out, mut failed) = (Vec::new(), Vec::new());
    for file in dbs {
        out.extend(convert_database(file, &missing, events, &mut failed));
    }
    (out, failed)
}

/// Convert one rocpd database to each of `formats`, beside it, as its owner.
fn convert_database(
    file: &WrittenFile,
    formats: &[OutputFormat],
    events: Events,
    failed: &mut Vec<Failed>,
) -> Vec<WrittenFile> {
    let db = &file.host_path;
    let dir = db.parent().map(PathBuf::from).unwrap_or_default();
    // Where the target sees that directory: what the user typed, not /proc/PID/root/...
    let plain_dir = file.path.parent().map(PathBuf::from).unwrap_or_default();
    let stem = db.file_name().map(|n| {
        n.to_string_lossy()
            .trim_end_matches("_results.db")
            .trim_end_matches(".db")
            .to_string()
    });
    let name = stem.unwrap_or_else(|| "results".into());
    // Converted files belong beside the database like the tool's own: same owner.
    let owner = std::fs::metadata(db).ok().map(|m| {
        use std::os::unix::fs::MetadataExt;
        (m.uid(), m.gid())
    });
    let mut out = Vec::new();
    // One format at a time: a format that cannot be written (OTF2 in a build without it)
    // does not cost the others.
    for format in formats {
        tracing::debug!("converting {} to {format}", db.display());
        match rocprof_rocpd::convert_outputs(std::slice::from_ref(db), &[*format], &dir, &name) {
            Ok(written) => out.extend(written.into_iter().map(|p| {
                if let Some((uid, gid)) = owner {
                    give_to_owner(&p, uid, gid, db, events);
                }
                WrittenFile {
                    path: p
                        .strip_prefix(&dir)
                        .map(|rel| plain_dir.join(rel))
                        .unwrap_or_else(|_| p.clone()),
                    // A directory (an OTF2 archive) is sized by its contents.
                    size: outputs::disk_size(&p),
                    host_path: p,
                }
            })),
            Err(e) => {
                events(Event::Warning {
                    pid: None,
                    message: format!("could not convert {} to {format}: {e}", db.display()),
                });
                failed.push((db.clone(), *format, e.to_string()));
            }
        }
    }
    out
}

/// Give a converted file to the owner of its database (`uid`:`gid`), with a warning if that fails.
fn give_to_owner(p: &std::path::Path, uid: u32, gid: u32, db: &std::path::Path, events: Events) {
    if let Err(e) = chown_tree(p, uid, gid) {
        events(Event::Warning {
            pid: None,
            message: format!(
                "could not give {} to the owner of {} (uid {uid}, gid {gid}): {e}",
                p.display(),
                db.display()
            ),
        });
    }
}

/// Give `path` (and everything under it, for a directory such as an OTF2 archive) to `uid`:`gid`
/// unless it already belongs to them. Links are changed themselves, never followed.
fn chown_tree(path: &std::path::Path, uid: u32, gid: u32) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path)?;
    if meta.uid() != uid || meta.gid() != gid {
        std::os::unix::fs::lchown(path, Some(uid), Some(gid))?;
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)? {
            chown_tree(&entry?.path(), uid, gid)?;
        }
    }
    Ok(())
}

/// Whether `path` is output in `format` (by its extension).
pub fn is_format(path: &std::path::Path, format: OutputFormat) -> bool {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    match format {
        OutputFormat::Rocpd => ext == "db",
        OutputFormat::Csv => ext == "csv",
        OutputFormat::Json => ext == "json",
        OutputFormat::Pftrace => ext == "pftrace" || ext == "proto",
        OutputFormat::Otf2 => matches!(ext.as_str(), "otf2" | "def" | "evt"),
    }
}

/// The warning when a requested format is among none of the files (the tool did not write it and
/// it could not be converted), else None. rocpd, the tool's default format that is always in
/// `ROCPROF_OUTPUT_FORMAT`, is left out: a custom tool (`-t`) writes what it writes.
fn missing_formats(req: &AttachRequest, files: &[FileReport]) -> Option<String> {
    let missing: Vec<&str> = req
        .formats
        .iter()
        .filter(|f| **f != OutputFormat::Rocpd)
        .filter(|f| !files.iter().any(|file| is_format(&file.path, **f)))
        .map(|f| f.name())
        .collect();
    if missing.is_empty() {
        return None;
    }
    let have_db = files
        .iter()
        .any(|f| is_format(&f.path, OutputFormat::Rocpd));
    let asked_rocpd = req.formats.contains(&OutputFormat::Rocpd);
    let (why, fix) = match (have_db, asked_rocpd) {
        (true, _) => (
            "converting the rocpd database to it failed (see the warning above; otf2 needs a build with \
             the OTF2 library)",
            "fix the cause in the warning and convert later with `rocprof-attach convert`",
        ),
        (false, true) => (
            "the tool wrote no rocpd database either, although rocpd was asked for, so there is nothing to \
             convert it from",
            "check that the tool library writes rocpd (rocprofv3's tool does) and that the target ran the \
             traced work during the window",
        ),
        (false, false) => (
            "there is no rocpd database to convert it from",
            "add rocpd to --output-format (e.g. -f FORMATS rocpd) so that rocprof-attach can convert the \
             database, or convert later with `rocprof-attach convert`",
        ),
    };
    Some(format!(
        "no {} output was produced although it was asked for with --output-format: the tool wrote none and {why}. \
         Fix: {}",
        missing.join(", "),
        fix.replace("FORMATS", &missing.join(" "))
    ))
}

/// Whether a tool library is mapped in process `pid` now (None when its maps cannot be read,
/// for instance because it exited).
fn tool_loaded(pid: i32) -> Option<bool> {
    let maps = rocprof_engine::procfs::maps(pid).ok()?;
    Some(!crate::reattach::loaded_tools(pid, &maps).is_empty())
}

/// Why no file appeared, from what is observed: whether the tool is loaded in each target.
fn no_output_hint(req: &AttachRequest, attach: &AttachOutcome, dirs: &str) -> String {
    let tools: Vec<&str> = attach.attached.iter().map(|a| a.tool.as_str()).collect();
    let tools = tools.join(", ");
    let loaded: Vec<(i32, Option<bool>)> = attach
        .attached
        .iter()
        .map(|a| (a.pid, tool_loaded(a.pid)))
        .collect();
    let not_loaded: Vec<i32> = loaded
        .iter()
        .filter(|(_, l)| *l == Some(false))
        .map(|(p, _)| *p)
        .collect();
    let all_loaded = loaded.iter().all(|(_, l)| *l == Some(true));
    let no_data =
        "no enabled service produced data during the window (choose tracing options that match \
                   what the target does, or profile longer with --attach-duration-msec)";
    let cause = if !not_loaded.is_empty() {
        format!(
            "the tool library ({tools}) is not loaded in process{} {}: it did not load (check the target's \
             stderr; pass an absolute path with -t)",
            super::plural(not_loaded.len()),
            super::join(&not_loaded)
        )
    } else if all_loaded {
        format!(
            "the tool library ({tools}) is loaded in the target but wrote no file there: {no_data}, or it \
             writes elsewhere than -d/-o say"
        )
    } else {
        format!(
            "the tool library ({tools}) did not load in the target (check the target's stderr; pass an \
             absolute path with -t); {no_data}"
        )
    };
    let mut msg = format!(
        "the session ran but no output file appeared under {dirs} (as seen by the target). Likely cause: {cause}"
    );
    if !req.sync_output {
        msg.push_str(
            "; with --attach-sync-output=false the target writes output in the background after detach, so look again shortly",
        );
    }
    msg
}
