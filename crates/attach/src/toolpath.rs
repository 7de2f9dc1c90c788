//! Choosing and validating the tool-library string sent to `rocprofiler_register_attach`
//! (docs/protocol.md sections 5.4 and 6.4).
//!
//! The string is used verbatim by the target's dynamic loader, so every check here happens inside
//! the target's root directory (`/proc/PID/root`), resolving symlinks there
//! ([`procfs::resolve_in_root`]) rather than against our own root.

use crate::error::{Error, Result};
use rocprof_engine::procfs::{self, Mapping};
use std::path::{Path, PathBuf};

/// The tool library string used when nothing better is known: a bare soname found by the
/// target's `dlopen` search path.
pub const DEFAULT_TOOL: &str = "librocprofiler-sdk-tool.so.1";

/// Where the chosen string came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSource {
    /// Given by the user (`-t` / `ROCPROF_ATTACH_TOOL_LIBRARY`).
    Explicit,
    /// Found in the rocprofiler-sdk installation the target has mapped.
    TargetInstall,
    /// The default bare soname ([`DEFAULT_TOOL`]).
    Default,
    /// rocprof-attach's own CUDA tool library (the CUDA backend, [`crate::cuda`]).
    Cuda,
}

impl ToolSource {
    /// Where the tool library came from, in words.
    pub fn describe(self) -> &'static str {
        match self {
            ToolSource::Explicit => "given with -t / ROCPROF_ATTACH_TOOL_LIBRARY",
            ToolSource::TargetInstall => "from the target's rocprofiler-sdk installation",
            ToolSource::Default => "default, resolved by the target's dynamic loader",
            ToolSource::Cuda => {
                "rocprof-attach's CUDA tool, beside it or from ROCPROF_ATTACH_CUDA_TOOL"
            }
        }
    }
}

/// The tool-library string to send, with what the user should know about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolChoice {
    /// The exact string written into the target (a path, a bare name or a colon list).
    pub string: String,
    /// Warnings to print (the choice is still usable).
    pub warnings: Vec<String>,
    /// Where the string came from.
    pub source: ToolSource,
    /// Informational notes (e.g. "resolved by the target's dynamic loader").
    pub notes: Vec<String>,
}

/// True when we run in a secure-execution context (setuid/setgid/file capabilities).
pub fn at_secure() -> bool {
    rocprof_engine::ptrace::sys::at_secure()
}

/// Choose the tool library for `pid` and validate it inside the target's root.
///
/// `explicit` is the user's string; it is ignored (with a warning) when `at_secure` is true.
pub fn choose(pid: i32, explicit: Option<&str>, at_secure: bool) -> Result<ToolChoice> {
    choose_with(pid, explicit, at_secure, None, None)
}

/// [`choose`] with the target's `/proc/PID/maps` already read (the preflight's), so it is not
/// read again, and reusing the clean tool checks of `checks` (one plan's).
pub fn choose_with(
    pid: i32,
    explicit: Option<&str>,
    at_secure: bool,
    maps: Option<&[Mapping]>,
    checks: Option<&ToolChecks>,
) -> Result<ToolChoice> {
    let mut warnings = Vec::new();
    let explicit = match explicit {
        Some(s) if at_secure => {
            warnings.push(format!(
                "ignoring the tool library override '{s}' because rocprof-attach runs in a secure-execution \
                 context (setuid, setgid or file capabilities); run it without those privileges to use -t"
            ));
            None
        }
        other => other,
    };
    let mut choice = match explicit {
        Some(s) => {
            let (w, notes) = validate_with(pid, s, checks)?;
            ToolChoice {
                string: s.to_string(),
                warnings: w,
                source: ToolSource::Explicit,
                notes,
            }
        }
        None => choose_automatic(pid, maps)?,
    };
    warnings.append(&mut choice.warnings);
    choice.warnings = warnings;
    crate::reattach::check_reattach(pid, &choice, maps)?;
    Ok(choice)
}

/// The target's maps: the ones given, else read now.
pub(crate) fn maps_of(
    pid: i32,
    given: Option<&[Mapping]>,
) -> rocprof_engine::Result<std::borrow::Cow<'_, [Mapping]>> {
    match given {
        Some(m) => Ok(std::borrow::Cow::Borrowed(m)),
        None => procfs::maps(pid).map(std::borrow::Cow::Owned),
    }
}

/// Validate a tool-library string for `pid` (docs/protocol.md section 5.4, fixed for colon lists).
///
/// Returns (warnings, notes). Empty strings and lists are usage errors; an absolute entry that does
/// not exist in the target's root (or is not a regular file) makes the target not attachable.
pub fn validate(pid: i32, string: &str) -> Result<(Vec<String>, Vec<String>)> {
    validate_with(pid, string, None)
}

/// [`validate`], reusing the clean checks of `checks` (one plan's).
pub fn validate_with(
    pid: i32,
    string: &str,
    checks: Option<&ToolChecks>,
) -> Result<(Vec<String>, Vec<String>)> {
    if string.contains('\0') {
        return Err(Error::usage(
            "the tool library string contains a NUL byte; pass a plain path with -t",
        ));
    }
    let entries: Vec<&str> = string
        .split(':')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    if entries.is_empty() {
        return Err(Error::usage(format!(
            "the tool library string '{string}' is empty. Fix: pass the tool with -t \
             /opt/rocm/lib/rocprofiler-sdk/librocprofiler-sdk-tool.so (a colon list is allowed), or omit -t \
             and unset ROCPROF_ATTACH_TOOL_LIBRARY to let rocprof-attach choose"
        )));
    }
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    for entry in entries {
        if !entry.starts_with('/') {
            notes.push(format!(
                "tool library '{entry}' will be resolved by the target's dynamic loader"
            ));
            continue;
        }
        if let Some(w) = check_absolute(pid, entry, checks)? {
            warnings.push(w);
        }
    }
    Ok((warnings, notes))
}

/// What makes an absolute tool path resolve the same in two processes: the entry, the mount
/// namespace and the root directory (device and inode of each).
type CheckKey = (String, (u64, u64), (u64, u64));

/// Absolute tool entries already found to be loadable shared objects during one plan: every rank
/// of a job names the same tool, so a session over many processes checks it once per mount
/// namespace and root instead of walking the path through each `/proc/PID/root`. Only clean
/// results are kept: an error or a warning is always worked out for its own process. Lives as
/// long as the plan that made it, so a tool removed between two sessions is noticed.
#[derive(Debug, Default)]
pub struct ToolChecks {
    clean: std::sync::Mutex<Vec<CheckKey>>,
}

impl ToolChecks {
    fn key(pid: i32, entry: &str) -> Option<CheckKey> {
        use std::os::unix::fs::MetadataExt;
        let id = |p: &str| {
            std::fs::metadata(procfs::proc_dir(pid).join(p))
                .ok()
                .map(|m| (m.dev(), m.ino()))
        };
        Some((entry.to_string(), id("ns/mnt")?, id("root")?))
    }
}

/// Check one absolute entry inside the target root; Ok(Some(warning)) when it cannot be checked.
/// With `checks`, a clean result for the same entry, mount namespace and root is reused.
fn check_absolute(pid: i32, entry: &str, checks: Option<&ToolChecks>) -> Result<Option<String>> {
    let Some(checks) = checks else {
        return check_absolute_now(pid, entry);
    };
    let key = ToolChecks::key(pid, entry);
    let lock = || checks.clean.lock().unwrap_or_else(|e| e.into_inner());
    if key.as_ref().is_some_and(|k| lock().contains(k)) {
        return Ok(None);
    }
    let checked = check_absolute_now(pid, entry);
    if let (Ok(None), Some(key)) = (&checked, key) {
        lock().push(key);
    }
    checked
}

/// [`check_absolute`] without the reuse.
fn check_absolute_now(pid: i32, entry: &str) -> Result<Option<String>> {
    let resolved = match procfs::resolve_in_root(pid, Path::new(entry)) {
        Ok(r) => r,
        Err(rocprof_engine::Error::ProcessGone { pid }) => return Err(Error::ProcessGone { pid }),
        Err(e) => {
            return Ok(Some(format!(
                "cannot check tool library {entry} inside process {pid}'s root: {e}"
            )))
        }
    };
    let Some(resolved) = resolved else {
        return Err(Error::NotAttachable {
            pid,
            reason: format!(
                "tool library {entry} does not exist as seen by the target (checked {} inside its root \
                 directory /proc/{pid}/root). The target may run in a container or chroot with a different \
                 filesystem. Fix: pass the path as the target sees it, install rocprofiler-sdk inside the \
                 target's root, or pass a bare name such as {DEFAULT_TOOL}",
                entry
            ),
        });
    };
    let host = procfs::in_root(pid, &resolved);
    match std::fs::metadata(&host) {
        Ok(m) if m.is_file() => match rocprof_engine::elf::is_loadable_shared_object(&host) {
            Ok(_) => Ok(None),
            Err(what) => Err(Error::NotAttachable {
                pid,
                reason: format!(
                    "tool library {entry} is {what}; the target's loader cannot load it. Fix: pass the path of \
                     librocprofiler-sdk-tool.so (or your own tool's .so) built for this machine"
                ),
            }),
        },
        Ok(_) => Err(Error::NotAttachable {
            pid,
            reason: format!(
                "tool library {entry} (resolved to {} in the target's root) is not a regular file. Fix: pass \
                 the path of librocprofiler-sdk-tool.so itself",
                resolved.display()
            ),
        }),
        Err(e) => Ok(Some(format!("cannot check tool library {entry} inside process {pid}'s root: {e}"))),
    }
}

/// Which rocprofiler-sdk library a maps entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SdkKind {
    /// `librocprofiler-register.so*`.
    Register,
    /// `librocprofiler-sdk.so*` (core).
    Core,
    /// `librocprofiler-sdk-attach.so*` (starts the listener).
    Attach,
    /// `librocprofiler-sdk-tool.so*` (rocprofv3's tool).
    Tool,
}

impl SdkKind {
    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            SdkKind::Register => "rocprofiler-register",
            SdkKind::Core => "rocprofiler-sdk",
            SdkKind::Attach => "rocprofiler-sdk-attach",
            SdkKind::Tool => "rocprofiler-sdk-tool",
        }
    }
}

/// A ROCm profiling library mapped in the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdkLibrary {
    /// Which library.
    pub kind: SdkKind,
    /// Path as shown in maps (" (deleted)" stripped).
    pub path: String,
    /// Dotted numeric suffix after ".so." (e.g. "1" or "1.0.0"), if any.
    pub suffix: Option<String>,
    /// The file was deleted (or replaced) on disk since the target mapped it.
    pub deleted: bool,
}

impl SdkLibrary {
    /// Version when the suffix has exactly three numbers (e.g. "1.0.0").
    pub fn version(&self) -> Option<&str> {
        self.suffix.as_deref().filter(|s| s.split('.').count() == 3)
    }

    /// Directory containing the library.
    pub fn dir(&self) -> &str {
        self.path.rsplit_once('/').map_or("", |(d, _)| d)
    }
}

/// Classify a basename as one of the ROCm profiling libraries, returning (kind, suffix).
pub fn classify_library(basename: &str) -> Option<(SdkKind, Option<String>)> {
    const NAMES: [(&str, SdkKind); 4] = [
        ("librocprofiler-register.so", SdkKind::Register),
        ("librocprofiler-sdk-attach.so", SdkKind::Attach),
        ("librocprofiler-sdk-tool.so", SdkKind::Tool),
        ("librocprofiler-sdk.so", SdkKind::Core),
    ];
    for (name, kind) in NAMES {
        let Some(rest) = basename.strip_prefix(name) else {
            continue;
        };
        if rest.is_empty() {
            return Some((kind, None));
        }
        let suffix = rest.strip_prefix('.')?;
        if suffix
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        {
            return Some((kind, Some(suffix.to_string())));
        }
        return None;
    }
    None
}

/// ROCm profiling libraries in a maps list, one entry per mapped file, in maps order.
pub fn sdk_libraries(maps: &[Mapping]) -> Vec<SdkLibrary> {
    let mut out: Vec<SdkLibrary> = Vec::new();
    let mut seen: Vec<(u32, u32, u64)> = Vec::new();
    for m in maps.iter().filter(|m| m.inode != 0) {
        let Some(path) = m.path.as_deref().filter(|p| p.starts_with('/')) else {
            continue;
        };
        let base = path.rsplit('/').next().unwrap_or(path);
        let Some((kind, suffix)) = classify_library(base) else {
            continue;
        };
        if seen.contains(&m.file_id()) {
            continue;
        }
        seen.push(m.file_id());
        out.push(SdkLibrary {
            kind,
            path: path.to_string(),
            suffix,
            deleted: m.deleted,
        });
    }
    out
}

/// The rocprofiler-sdk library directory the target uses: dir of the first attach library, else of
/// the first core library.
pub fn install_dir(libs: &[SdkLibrary]) -> Option<&str> {
    let first = |k| libs.iter().find(|l| l.kind == k);
    first(SdkKind::Attach)
        .or_else(|| first(SdkKind::Core))
        .map(SdkLibrary::dir)
}

fn choose_automatic(pid: i32, given: Option<&[Mapping]>) -> Result<ToolChoice> {
    let maps = match maps_of(pid, given) {
        Ok(m) => m,
        Err(rocprof_engine::Error::ProcessGone { pid }) => return Err(Error::ProcessGone { pid }),
        Err(e) => {
            return Ok(default_choice(vec![format!(
                "cannot read the target's maps ({e}); using {DEFAULT_TOOL}"
            )]))
        }
    };
    let libs = sdk_libraries(&maps);
    let Some(dir) = install_dir(&libs) else {
        return resolved_default(pid, &maps, Vec::new());
    };
    let soversion = libs
        .iter()
        .find(|l| l.kind == SdkKind::Attach)
        .and_then(|l| l.suffix.as_deref())
        .and_then(|s| s.split('.').next())
        .unwrap_or("1")
        .to_string();
    let mut warnings = Vec::new();
    match install_tool(pid, dir, &soversion, &libs)? {
        Some((path, mut w)) => {
            warnings.append(&mut w);
            Ok(ToolChoice {
                string: path,
                warnings,
                source: ToolSource::TargetInstall,
                notes: Vec::new(),
            })
        }
        None => {
            warnings.push(format!(
                "the target's rocprofiler-sdk installation {dir} has no rocprofiler-sdk/librocprofiler-sdk-tool.so*; \
                 using {DEFAULT_TOOL}, resolved by the target's dynamic loader"
            ));
            resolved_default(pid, &maps, warnings)
        }
    }
}

/// [`default_choice`], once the target's dynamic loader is known to find [`DEFAULT_TOOL`]: the
/// attach would otherwise fail in the target (register status 6) after a full injection, so a
/// bare name nobody can resolve makes the target not attachable, in `--check` too.
fn resolved_default(pid: i32, maps: &[Mapping], mut warnings: Vec<String>) -> Result<ToolChoice> {
    match crate::toolsearch::find_bare(pid, DEFAULT_TOOL, maps) {
        Ok(crate::toolsearch::Found::Yes(_)) => Ok(default_choice(warnings)),
        Ok(crate::toolsearch::Found::No(looked)) => Err(Error::NotAttachable {
            pid,
            reason: format!(
                "the default tool library {DEFAULT_TOOL} cannot be found by the target's dynamic loader \
                 (looked in {looked}), so the attach would be rejected. Fix: pass the tool's absolute path \
                 as the target sees it with -t, e.g. -t /opt/rocm/lib/rocprofiler-sdk/librocprofiler-sdk-tool.so"
            ),
        }),
        Err(e) => {
            warnings.push(format!(
                "cannot tell whether the target's dynamic loader finds {DEFAULT_TOOL} ({e}); pass -t with its absolute path if the attach is rejected"
            ));
            Ok(default_choice(warnings))
        }
    }
}

fn default_choice(warnings: Vec<String>) -> ToolChoice {
    ToolChoice {
        string: DEFAULT_TOOL.to_string(),
        warnings,
        source: ToolSource::Default,
        notes: vec![format!(
            "tool library '{DEFAULT_TOOL}' will be resolved by the target's dynamic loader"
        )],
    }
}

/// Regular file inside the target root? None = absent, Err = cannot tell.
fn is_regular_in_root(pid: i32, path: &str) -> Result<Option<bool>> {
    match procfs::resolve_in_root(pid, Path::new(path)) {
        Ok(Some(r)) => Ok(Some(
            std::fs::metadata(procfs::in_root(pid, &r)).is_ok_and(|m| m.is_file()),
        )),
        Ok(None) => Ok(Some(false)),
        Err(rocprof_engine::Error::ProcessGone { pid }) => Err(Error::ProcessGone { pid }),
        Err(_) => Ok(None),
    }
}

/// The tool library of the target's install: (string, warnings), or None when there is none.
fn install_tool(
    pid: i32,
    dir: &str,
    soversion: &str,
    libs: &[SdkLibrary],
) -> Result<Option<(String, Vec<String>)>> {
    let base = format!("{dir}/rocprofiler-sdk/librocprofiler-sdk-tool.so");
    let candidates = [base.clone(), format!("{base}.{soversion}")];
    for c in &candidates {
        match is_regular_in_root(pid, c)? {
            Some(true) => return Ok(Some((c.clone(), Vec::new()))),
            Some(false) => {}
            None => {
                let w = format!("cannot check {c} inside the target's root; using it anyway");
                return Ok(Some((candidates[0].clone(), vec![w])));
            }
        }
    }
    let attach_suffix = libs
        .iter()
        .find(|l| l.kind == SdkKind::Attach)
        .and_then(|l| l.suffix.clone());
    Ok(versioned_tool(pid, dir, attach_suffix.as_deref()).map(|p| {
        let w = format!(
            "the installation's tool library links are missing in {dir}/rocprofiler-sdk; using {p}"
        );
        (p, vec![w])
    }))
}

/// Versioned `librocprofiler-sdk-tool.so.X[.Y...]` regular files in `<dir>/rocprofiler-sdk` in the
/// target's root: the one matching `prefer` suffix, else the highest version.
fn versioned_tool(pid: i32, dir: &str, prefer: Option<&str>) -> Option<String> {
    let sub = format!("{dir}/rocprofiler-sdk");
    let resolved = procfs::resolve_in_root(pid, Path::new(&sub))
        .ok()
        .flatten()?;
    let host: PathBuf = procfs::in_root(pid, &resolved);
    let mut found: Vec<(Vec<u64>, String, String)> = Vec::new();
    for entry in std::fs::read_dir(&host).ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((SdkKind::Tool, Some(suffix))) = classify_library(&name) else {
            continue;
        };
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let key = suffix.split('.').filter_map(|p| p.parse().ok()).collect();
        found.push((key, suffix, format!("{sub}/{name}")));
    }
    if let Some(p) = prefer {
        if let Some((_, _, path)) = found.iter().find(|(_, s, _)| s == p) {
            return Some(path.clone());
        }
    }
    found
        .into_iter()
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, _, p)| p)
}
