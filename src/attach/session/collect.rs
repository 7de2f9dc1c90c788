//! Step five: which files the tool wrote (a snapshot of the output directory taken before the
//! attach, compared after the detach), conversions the user asked for that the tool did not
//! write, and the per-process results.

use super::attach::AttachOutcome;
use super::detach::DetachOutcome;
use super::events::{Event, Events};
use super::plan::Plan;
use super::report::{results_of, verdict, FileReport, Message, SessionReport, Severity};
use super::wait::WaitEnd;
use super::AttachRequest;
use crate::attach::outputs::{self, Snapshot, WrittenFile};
use crate::exit::ExitCode;
use crate::format::OutputFormat;
use std::collections::HashMap;
use std::path::PathBuf;

/// The output directory as it was before the attach, per distinct target root.
#[derive(Debug)]
pub struct Collector {
    snapshots: HashMap<(u64, u64), Snapshot>,
    prefixes: Vec<(i32, Option<String>)>,
}

impl Collector {
    /// Snapshot the output directory of every planned process (processes in one container share
    /// one), and the file-name prefix each is expected to write under (several processes only;
    /// a single process's is expanded after the session).
    pub fn before(plan: &Plan, req: &AttachRequest) -> Collector {
        // The preflight read each process's environment: the prefixes are expanded from it.
        let mut snapshots = HashMap::new();
        for p in &plan.targets {
            let pid = p.report.pid;
            let key = p.report.root_id;
            snapshots
                .entry(key)
                .and_modify(|s: &mut Snapshot| s.also_seen_by(pid))
                .or_insert_with(|| Snapshot::take(pid, &req.output_dir));
        }
        // Expanded before attaching: a process that exits during the session can still be
        // credited with its files. With a single process every file is its own: no need to read
        // its environment on the way to the attach.
        let several = plan.targets.len() > 1;
        let prefixes = plan
            .targets
            .iter()
            .map(|p| {
                let pid = p.report.pid;
                let prefix = several.then(|| {
                    outputs::expected_prefix_with(
                        pid,
                        &req.output_dir,
                        &req.output_file,
                        p.report.environ.as_deref(),
                        Some(p.report.own_pid),
                    )
                });
                (pid, prefix.flatten())
            })
            .collect();
        Collector {
            snapshots,
            prefixes,
        }
    }

    /// Find the files written, convert what the user asked for and the tool did not write, and
    /// build the session's report.
    pub fn collect(
        self,
        req: &AttachRequest,
        plan: &Plan,
        attach: &AttachOutcome,
        end: &WaitEnd,
        detach: &DetachOutcome,
        events: Events,
    ) -> SessionReport {
        let mut prefixes = self.prefixes;
        if let [only] = &plan.targets[..] {
            // Now that the session is over, the one target's name can be expanded too.
            let pid = only.report.pid;
            prefixes = vec![(
                pid,
                outputs::expected_prefix_with(
                    pid,
                    &req.output_dir,
                    &req.output_file,
                    only.report.environ.as_deref(),
                    Some(only.report.own_pid),
                ),
            )];
        }
        let mut files: Vec<WrittenFile> = self
            .snapshots
            .values()
            .flat_map(Snapshot::changes)
            .collect();
        // In a directory shared by several nodes, the other nodes' files appear too: not ours.
        let known = outputs::known_prefixes(&prefixes);
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
        files.extend(convert_missing_formats(req, &files, events));
        let owners = outputs::owners(&files, &prefixes);
        let mut processes = results_of(plan, attach, &end.exited, detach);
        for p in &mut processes {
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
            .map(|(f, pid)| FileReport {
                path: f.path,
                host_path: f.host_path,
                size: f.size,
                pid,
            })
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
        let output = outputs::static_prefix(&req.output_dir)
            .display()
            .to_string();
        let (mut messages, mut exit_code) = verdict(&processes, files.is_empty(), &output, || {
            no_output_hint(req, attach)
        });
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

/// If the user asked for CSV, JSON, Perfetto or OTF2 and the tool only wrote rocpd databases,
/// convert them.
fn convert_missing_formats(
    req: &AttachRequest,
    files: &[WrittenFile],
    events: Events,
) -> Vec<WrittenFile> {
    let dbs: Vec<PathBuf> = files
        .iter()
        .filter(|f| f.host_path.extension().is_some_and(|e| e == "db"))
        .map(|f| f.host_path.clone())
        .collect();
    if dbs.is_empty() {
        return Vec::new();
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
    let mut out = Vec::new();
    for db in dbs {
        let dir = db.parent().map(PathBuf::from).unwrap_or_default();
        let stem = db.file_name().map(|n| {
            n.to_string_lossy()
                .trim_end_matches("_results.db")
                .trim_end_matches(".db")
                .to_string()
        });
        let name = stem.unwrap_or_else(|| "results".into());
        // Converted files belong beside the database like the tool's own: same owner.
        let owner = std::fs::metadata(&db).ok().map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.uid(), m.gid())
        });
        // One format at a time: a format that cannot be written (OTF2 in a build without it)
        // does not cost the others.
        for format in &missing {
            tracing::debug!("converting {} to {format}", db.display());
            match crate::rocpd::convert_outputs(std::slice::from_ref(&db), &[*format], &dir, &name)
            {
                Ok(written) => out.extend(written.into_iter().map(|p| {
                    if let Some((uid, gid)) = owner {
                        if let Err(e) = chown_tree(&p, uid, gid) {
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
                    let size = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
                    WrittenFile {
                        path: p.clone(),
                        host_path: p,
                        size,
                    }
                })),
                Err(e) => events(Event::Warning {
                    pid: None,
                    message: format!("could not convert {} to {format}: {e}", db.display()),
                }),
            }
        }
    }
    out
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
    let why = if have_db {
        "converting the rocpd database to it failed (see the warning above; otf2 needs a build with \
         the OTF2 library)"
    } else {
        "there is no rocpd database to convert it from"
    };
    Some(format!(
        "no {} output was produced although it was asked for with --output-format: the tool wrote none and {why}. \
         Fix: add rocpd to --output-format (e.g. -f {} rocpd) so that rocprof-attach can convert the database, \
         or convert later with `rocprof-attach convert`",
        missing.join(", "),
        missing.join(" ")
    ))
}

fn no_output_hint(req: &AttachRequest, attach: &AttachOutcome) -> String {
    let tools: Vec<&str> = attach.attached.iter().map(|a| a.tool.as_str()).collect();
    let mut msg = format!(
        "the session ran but no output file appeared under {} (as seen by the target). Likely causes: \
         the tool library ({}) did not load in the target (check the target's stderr; pass an absolute path with -t); \
         no enabled service produced data during the window (choose tracing options that match what the target does, \
         or profile longer with --attach-duration-msec)",
        outputs::static_prefix(&req.output_dir).display(),
        tools.join(", ")
    );
    if !req.sync_output {
        msg.push_str(
            "; with --attach-sync-output=false the target writes output in the background after detach, so look again shortly",
        );
    }
    msg
}
