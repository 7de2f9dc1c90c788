//! Which files did the tool write? A before/after snapshot of the output directory, seen
//! through the target's root (`/proc/PID/root`), so targets in containers are handled too.

use rocprof_engine::procfs;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub use crate::templates::{Facts, Pattern, Piece};

/// Limits of one scan, so a huge or looping directory can never stall a session.
const MAX_DEPTH: usize = 8;
const MAX_ENTRIES: usize = 200_000;

/// A file the tool wrote (new, or changed since the snapshot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenFile {
    /// Path as the target sees it (what the user asked for with `-d`/`-o`).
    pub path: PathBuf,
    /// Path through which we can read it (`/proc/PID/root/...`, or the same path).
    pub host_path: PathBuf,
    /// Size in bytes.
    pub size: u64,
}

/// The state of an output directory before a session: the files one expanded output template
/// can name ([`crate::templates`]), nothing else.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The processes sharing this root directory and template: any one still alive gives the view.
    pids: Vec<i32>,
    /// The directory the template's files lie under (as the target sees it).
    target_root: PathBuf,
    /// Whether the directory may be read in our own view: the processes share our root
    /// directory, or `/proc/PID/root` was refused from the start.
    own_view: bool,
    /// The expanded template: its path components below `target_root`, and the whole of it.
    components: Vec<crate::templates::Glob>,
    open_dir: bool,
    whole: crate::templates::Glob,
    /// Files by path relative to the scanned root.
    files: HashMap<PathBuf, (u64, Option<SystemTime>)>,
}

/// The part of an output path before the first `%...%` template token: everything the tool
/// writes lands below it.
pub fn static_prefix(dir: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in dir.components() {
        if c.as_os_str().to_string_lossy().contains('%') {
            break;
        }
        out.push(c);
    }
    if out.as_os_str().is_empty() {
        PathBuf::from("/")
    } else {
        out
    }
}

impl Snapshot {
    /// Record the files that `pattern` (the expanded `<dir>/<file>` template of process `pid`)
    /// can name, as seen by process `pid`.
    pub fn take(pid: i32, pattern: &Pattern) -> Snapshot {
        let target_root = pattern.base_dir();
        let via_proc = procfs::in_root(pid, &target_root);
        // Reading through /proc/PID/root needs ptrace-level access; fall back to our own view
        // (same mount namespace in the common case) when it is refused.
        let refused = std::fs::metadata(&via_proc).is_err() && target_root.exists();
        let root_id = |p: &str| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
        let shares_ours = root_id(&format!("/proc/{pid}/root")) == root_id("/proc/self/root");
        let mut snap = Snapshot {
            pids: vec![pid],
            target_root,
            own_view: refused || shares_ours,
            components: pattern.components(),
            open_dir: matches!(pattern.0.last(), Some(Piece::Text(t)) if t.ends_with('/')),
            whole: pattern.regex(),
            files: HashMap::new(),
        };
        if let Some(root) = snap.root_now() {
            let mut files = HashMap::new();
            snap.scan(&root, &root, 0, false, &mut files);
            snap.files = files;
        }
        snap
    }

    /// Another process with the same root directory and template: its view serves if the first
    /// one exits.
    pub fn also_seen_by(&mut self, pid: i32) {
        if !self.pids.contains(&pid) {
            self.pids.push(pid);
        }
    }

    /// The directory the template's files lie under, as the target sees it.
    pub fn dir(&self) -> &Path {
        &self.target_root
    }

    /// Where the directory can be read now: in our own view when the target shares it (a plain
    /// path, valid after the target exits), else through the root of a process that is alive.
    pub fn root_now(&self) -> Option<PathBuf> {
        if self.own_view {
            return Some(self.target_root.clone());
        }
        self.pids
            .iter()
            .map(|&pid| procfs::in_root(pid, &self.target_root))
            .find(|via| std::fs::metadata(via).is_ok())
    }

    /// Files created or modified since the snapshot, sorted by path.
    pub fn changes(&self) -> Vec<WrittenFile> {
        let Some(root) = self.root_now() else {
            return Vec::new();
        };
        let mut now = HashMap::new();
        self.scan(&root, &root, 0, false, &mut now);
        let mut out: Vec<WrittenFile> = now
            .into_iter()
            .filter(|(rel, meta)| self.files.get(rel) != Some(meta))
            .map(|(rel, (size, _))| WrittenFile {
                path: self.target_root.join(&rel),
                host_path: root.join(&rel),
                size,
            })
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    /// The files the template names that changed since the snapshot or were modified at or
    /// after `since` (a session's start: what it wrote before the snapshot was taken), sorted by
    /// path.
    pub fn modified_since(&self, since: SystemTime) -> Vec<WrittenFile> {
        let Some(root) = self.root_now() else {
            return Vec::new();
        };
        let mut now = HashMap::new();
        self.scan(&root, &root, 0, false, &mut now);
        let mut out: Vec<WrittenFile> = now
            .into_iter()
            .filter(|(rel, meta)| {
                self.files.get(rel) != Some(meta) || meta.1.is_some_and(|m| m >= since)
            })
            .map(|(rel, (size, _))| WrittenFile {
                path: self.target_root.join(&rel),
                host_path: root.join(&rel),
                size,
            })
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    /// Collect the files under `dir` (`depth` levels below the root) that the template names:
    /// only directories matching the template's component at their depth are entered; below a
    /// name matching the whole template (`<prefix>_results/` of OTF2), everything (`all`).
    fn scan(
        &self,
        root: &Path,
        dir: &Path,
        depth: usize,
        all: bool,
        files: &mut HashMap<PathBuf, (u64, Option<SystemTime>)>,
    ) {
        if depth > MAX_DEPTH || files.len() >= MAX_ENTRIES {
            return;
        }
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let n = self.components.len();
        for entry in rd.flatten() {
            let Ok(ft) = entry.file_type() else { continue };
            let path = entry.path();
            let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            let named = all
                || (self.open_dir && depth >= n)
                || (depth + 1 >= n
                    && self
                        .whole
                        .is_match(&self.target_root.join(&rel).to_string_lossy()));
            if ft.is_dir() {
                let on_path = depth + 1 < n || (self.open_dir && depth < n);
                let component_ok = self
                    .components
                    .get(depth)
                    .is_some_and(|c| c.is_match(&entry.file_name().to_string_lossy()));
                if named || (on_path && component_ok) {
                    self.scan(root, &path, depth + 1, named, files);
                }
            } else if ft.is_file() && named {
                if let Ok(m) = entry.metadata() {
                    files.insert(rel, (m.len(), m.modified().ok()));
                }
            }
            if files.len() >= MAX_ENTRIES {
                return;
            }
        }
    }
}

/// The size of a file, or of everything in a directory (an OTF2 archive): its contents summed.
pub fn disk_size(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|rd| rd.flatten().map(|e| disk_size(&e.path())).sum())
        .unwrap_or(0)
}

/// The PID among `pids` that a file belongs to, judged by a number token equal to the PID in
/// its path (the tool's default names are `<hostname>/<pid>_...`).
pub fn owner(path: &Path, pids: &[i32]) -> Option<i32> {
    let text = path.to_string_lossy();
    let tokens: Vec<&str> = text
        .split(|c: char| !c.is_ascii_digit())
        .filter(|t| !t.is_empty())
        .collect();
    pids.iter()
        .copied()
        .find(|p| tokens.contains(&p.to_string().as_str()))
}

/// The path prefix process `pid`'s tool will write under: `<dir>/<file>` with every key expanded
/// as the tool does ([`crate::templates`]). None when the template uses a key whose value
/// cannot be known from here, or the process cannot be read; callers then fall back to [`owner`].
pub fn expected_prefix(pid: i32, dir: &Path, file: &str) -> Option<String> {
    expected_prefix_with(pid, dir, file, None, None)
}

/// [`expected_prefix`] with the process's environment and its own PID already read (the
/// preflight's), so they are not read again.
pub fn expected_prefix_with(
    pid: i32,
    dir: &Path,
    file: &str,
    environ: Option<&[(String, String)]>,
    own_pid: Option<i32>,
) -> Option<String> {
    pattern_of(pid, dir, file, environ, own_pid, &[]).exact()
}

/// The expanded `<dir>/<file>` template of process `pid`, `sent` being the variables the attach
/// sets in it (they are in its environment when the tool expands `%env{...}%`).
pub fn pattern_of(
    pid: i32,
    dir: &Path,
    file: &str,
    environ: Option<&[(String, String)]>,
    own_pid: Option<i32>,
    sent: &[(String, String)],
) -> Pattern {
    let template = format!("{}/{}", dir.display(), file);
    if !crate::options::has_placeholder(&template) {
        return Pattern(vec![Piece::Text(template)]);
    }
    let facts = Facts::of(pid, environ, own_pid, sent);
    crate::templates::expand(&template, &facts)
}

/// Which process wrote each file: the one whose [`expected_prefix`] is the longest unique
/// prefix of the file's path (so `%rank%` and `%hostname%` names are attributed), else a number
/// token equal to one of the PIDs ([`owner`]).
pub fn owners(files: &[WrittenFile], prefixes: &[(i32, Option<String>)]) -> Vec<Option<i32>> {
    let pids: Vec<i32> = prefixes.iter().map(|(p, _)| *p).collect();
    if let [only] = pids[..] {
        return vec![Some(only); files.len()];
    }
    files
        .iter()
        .map(|f| {
            let path = f.path.to_string_lossy();
            let mut best: Option<(usize, i32)> = None;
            let mut tie = false;
            for (pid, prefix) in prefixes {
                let Some(prefix) = prefix else { continue };
                if !under_prefix(&path, prefix) {
                    continue;
                }
                match best {
                    Some((len, _)) if len > prefix.len() => {}
                    Some((len, _)) if len == prefix.len() => tie = true,
                    _ => {
                        best = Some((prefix.len(), *pid));
                        tie = false;
                    }
                }
            }
            match best {
                Some((_, pid)) if !tie => Some(pid),
                _ => owner(&f.path, &pids),
            }
        })
        .collect()
}

/// Whether `file` was written by a process other than the selected ones: every selected
/// process's [`expected_prefix`] is known (absolute, without `..`) and the file's path starts with
/// none of them. This happens when several rocprof-attach (one per node of a job) share one
/// output directory: each sees the others' files appear under it during its session.
pub fn written_by_others(file: &WrittenFile, prefixes: &[(i32, Option<String>)]) -> bool {
    known_prefixes(prefixes).is_some_and(|known| outside(file, &known))
}

/// Every selected process's prefix, normalized, when all of them are known (else None: then no
/// file can be said to be another's). Computed once for all the files of a session.
pub fn known_prefixes(prefixes: &[(i32, Option<String>)]) -> Option<Vec<String>> {
    if prefixes.is_empty() {
        return None;
    }
    prefixes
        .iter()
        .map(|(_, prefix)| prefix.as_deref().and_then(normalized_prefix))
        .collect()
}

/// `file` lies under none of the `known` prefixes ([`known_prefixes`]).
pub fn outside(file: &WrittenFile, known: &[String]) -> bool {
    let path = file.path.to_string_lossy();
    !known.iter().any(|p| under_prefix(&path, p))
}

/// Whether `path` is a file the tool writes under `prefix`: the tool names its files
/// `<prefix>_<name>.<ext>` (an OTF2 archive also `<prefix>_results/...`, a newer converter
/// `<prefix>.<ext>`), so the prefix must end at `_`, `.` or `/`. A process writing under
/// `rank1` does not own `rank10_results.db`.
pub fn under_prefix(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix).is_some_and(|rest| {
        prefix.ends_with('/') || rest.is_empty() || rest.starts_with(['_', '.', '/'])
    })
}

/// `prefix` with repeated and `.` separators removed (as the scanned paths have them), or None
/// when it cannot be compared reliably: relative, going up with `..`, or still holding a key
/// the tool expands and we do not (`{pid}`, `$env{NAME}`, `%h`).
fn normalized_prefix(prefix: &str) -> Option<String> {
    let p = Path::new(prefix);
    if !p.is_absolute()
        || p.components().any(|c| c == std::path::Component::ParentDir)
        || prefix.contains(['%', '{', '$'])
    {
        return None;
    }
    let mut out = p
        .components()
        .collect::<PathBuf>()
        .to_string_lossy()
        .into_owned();
    if prefix.ends_with('/') && !out.ends_with('/') {
        out.push('/');
    }
    Some(out)
}

/// Human-readable size.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_stops_at_templates() {
        assert_eq!(
            static_prefix(Path::new("/out/%hostname%/x")),
            PathBuf::from("/out")
        );
        assert_eq!(
            static_prefix(Path::new("/out/run1")),
            PathBuf::from("/out/run1")
        );
        assert_eq!(static_prefix(Path::new("%cwd%/x")), PathBuf::from("/"));
    }

    #[test]
    fn owner_by_pid_token() {
        assert_eq!(
            owner(Path::new("/o/host/1234_kernel_trace.csv"), &[12, 1234]),
            Some(1234)
        );
        assert_eq!(owner(Path::new("/o/host/12345_results.db"), &[1234]), None);
    }

    #[test]
    fn owners_by_expanded_prefix_then_pid_token() {
        let me = std::process::id() as i32;
        let file = |p: &str| WrittenFile {
            path: PathBuf::from(p),
            host_path: PathBuf::from(p),
            size: 0,
        };
        let prefix = expected_prefix(me, Path::new("/o/%pid%"), "r%rank%_%env{NO_SUCH_VAR_X}%x")
            .expect("known keys");
        assert_eq!(prefix, format!("/o/{me}/r0_x"));
        assert_eq!(expected_prefix(me, Path::new("/o"), "%argv%"), None);
        let prefixes = vec![
            (1, Some("/o/rank1".to_string())),
            (2, Some("/o/rank10".to_string())),
            (3, Some("/o/same".to_string())),
            (4, Some("/o/same".to_string())),
        ];
        let files = [
            file("/o/rank10_a.csv"),
            file("/o/rank1_a.csv"),
            file("/o/same_4_a.csv"),
            file("/o/other.csv"),
        ];
        assert_eq!(
            owners(&files, &prefixes),
            vec![Some(2), Some(1), Some(4), None]
        );
    }

    #[test]
    fn files_matching_no_selected_process_are_another_writers() {
        let file = |p: &str| WrittenFile {
            path: PathBuf::from(p),
            host_path: PathBuf::from(p),
            size: 0,
        };
        // Node n2's session, two ranks; n1's ranks have the same PIDs and share the directory.
        let n2 = vec![
            (13, Some("/shared//prof/n2/13".to_string())),
            (14, Some("/shared/prof/./n2/14".to_string())),
        ];
        assert!(!written_by_others(
            &file("/shared/prof/n2/13_results.db"),
            &n2
        ));
        assert!(!written_by_others(
            &file("/shared/prof/n2/14_results.db"),
            &n2
        ));
        assert!(written_by_others(
            &file("/shared/prof/n1/13_results.db"),
            &n2
        ));
        // Unknown, relative, `..` or unexpanded prefixes: no judgement, the file is kept.
        for unsure in [
            None,
            Some("prof/n2/13".to_string()),
            Some("/a/../n2/13".to_string()),
            Some("/shared/prof/{hostname}/13".to_string()),
            Some("/shared/prof/$env{HOST}/13".to_string()),
        ] {
            let p = vec![(13, Some("/shared/prof/n2/13".to_string())), (14, unsure)];
            assert!(!written_by_others(
                &file("/shared/prof/n1/13_results.db"),
                &p
            ));
        }
        assert!(!written_by_others(&file("/x"), &[]));
    }

    #[test]
    fn a_prefix_ends_where_the_tools_file_names_continue() {
        assert!(under_prefix("/o/rank1_results.db", "/o/rank1"));
        assert!(under_prefix("/o/rank1.pftrace", "/o/rank1"));
        assert!(under_prefix("/o/rank1_results/traces/0.evt", "/o/rank1"));
        assert!(under_prefix("/o/run/x_results.db", "/o/run/"));
        assert!(!under_prefix("/o/rank10_results.db", "/o/rank1"));
        assert!(!under_prefix("/o/host/12345_results.db", "/o/host/1234"));
        assert!(!under_prefix("/p/rank1_results.db", "/o/rank1"));
        // Only rank1 selected here: rank10's file, written by another session into the same
        // directory, is not ours and is not rank1's.
        let file = |p: &str| WrittenFile {
            path: PathBuf::from(p),
            host_path: PathBuf::from(p),
            size: 0,
        };
        let prefixes = vec![(1, Some("/o/rank1".to_string()))];
        assert!(written_by_others(&file("/o/rank10_results.db"), &prefixes));
        assert!(!written_by_others(&file("/o/rank1_results.db"), &prefixes));
        let two = vec![
            (1, Some("/o/rank1".to_string())),
            (7, Some("/o/other".to_string())),
        ];
        assert_eq!(owners(&[file("/o/rank10_results.db")], &two), vec![None]);
    }

    #[test]
    fn sizes() {
        assert_eq!(human_size(10), "10 B");
        assert_eq!(human_size(2048), "2.0 KiB");
    }
}
