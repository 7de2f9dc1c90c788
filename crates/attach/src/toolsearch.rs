//! Where a tool-library string leads before it reaches the target.
//!
//! * [`absolutize`]: an entry with a slash that is not absolute (`./lib.so`, `build/lib.so`) is
//!   a path the target's loader would resolve against *its* working directory; we make it
//!   absolute against the caller's, where the user meant it, or refuse it with the fix.
//! * [`find_bare`]: a bare name (no slash) is searched the way the target's dynamic loader would
//!   (libraries already loaded, the target's `LD_LIBRARY_PATH`, the directories of the libraries
//!   it has mapped (their `$ORIGIN` run paths), its `/etc/ld.so.cache`, the default directories),
//!   all inside the target's root, so `--check` and the attach refuse a name the target cannot
//!   load instead of the register rejecting it after a full injection.
//! * [`pip_package_dirs`] and [`shared_objects`]: where `pip install .` puts our own libraries
//!   beside a command it installed, under the names setuptools-rust gives them.

use crate::error::{Error, Result};
use rocprof_engine::procfs::{self, Mapping};
use std::path::{Path, PathBuf};

/// The loader's default directories (x86-64 glibc, Debian and Red Hat layouts).
const DEFAULT_DIRS: [&str; 6] = [
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];

/// Make every relative entry with a slash of a tool string (a colon list) absolute against `cwd`.
/// An entry that does not exist there is refused with the fix; bare names and absolute entries
/// are kept as typed. `what` names where the string came from, for the message.
pub fn absolutize(string: &str, cwd: &Path, what: &str) -> Result<String> {
    let mut out = Vec::new();
    for entry in string.split(':') {
        let e = entry.trim();
        if e.is_empty() || e.starts_with('/') || !e.contains('/') {
            out.push(entry.to_string());
            continue;
        }
        let abs = cwd.join(e.strip_prefix("./").unwrap_or(e));
        if !abs.is_file() {
            return Err(Error::usage(format!(
                "{what}: tool library '{e}' is a relative path and {} does not exist. The target would \
                 resolve it against its own working directory, not ours. Fix: pass the library's absolute \
                 path, e.g. -t /opt/rocm/lib/rocprofiler-sdk/librocprofiler-sdk-tool.so",
                abs.display()
            )));
        }
        let abs = std::fs::canonicalize(&abs).unwrap_or(abs);
        out.push(abs.to_string_lossy().into_owned());
    }
    Ok(out.join(":"))
}

/// The outcome of [`find_bare`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The loader finds the name here (a path as the target sees it).
    Yes(String),
    /// Found nowhere; the places looked at, in words.
    No(String),
}

/// Search the bare library `name` the way the target's dynamic loader would, inside its root.
/// An error means the search could not be done (the target's environment is unreadable).
pub fn find_bare(pid: i32, name: &str, maps: &[Mapping]) -> std::result::Result<Found, String> {
    // Already loaded: dlopen returns the loaded object.
    if let Some(m) = maps.iter().find(|m| {
        m.path
            .as_deref()
            .and_then(|p| Path::new(p).file_name())
            .is_some_and(|f| f == name)
    }) {
        return Ok(Found::Yes(m.path.clone().unwrap_or_default()));
    }
    let environ = procfs::environ(pid).map_err(|e| e.to_string())?;
    let ld_path: Vec<String> = environ
        .iter()
        .find(|(k, _)| k == "LD_LIBRARY_PATH")
        .map(|(_, v)| {
            v.split([':', ';'])
                .filter(|d| d.starts_with('/'))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let mut mapped: Vec<String> = maps
        .iter()
        .filter_map(|m| m.path.as_deref())
        .filter(|p| p.starts_with('/') && p.contains(".so"))
        .filter_map(|p| {
            Path::new(p)
                .parent()
                .map(|d| d.to_string_lossy().into_owned())
        })
        .collect();
    mapped.dedup();
    let dirs = ld_path
        .iter()
        .chain(mapped.iter())
        .map(String::as_str)
        .chain(DEFAULT_DIRS);
    for dir in dirs {
        let candidate = format!("{}/{name}", dir.trim_end_matches('/'));
        match procfs::resolve_in_root(pid, Path::new(&candidate)) {
            Ok(Some(r))
                if std::fs::metadata(procfs::in_root(pid, &r)).is_ok_and(|m| m.is_file()) =>
            {
                return Ok(Found::Yes(candidate))
            }
            Ok(_) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    // The loader's cache stores each soname NUL-terminated.
    let cache = procfs::proc_dir(pid).join("root/etc/ld.so.cache");
    if let Ok(bytes) = std::fs::read(&cache) {
        let mut needle = name.as_bytes().to_vec();
        needle.push(0);
        if bytes.windows(needle.len()).any(|w| w == needle.as_slice()) {
            return Ok(Found::Yes(format!("{name} (in /etc/ld.so.cache)")));
        }
    }
    let mut places = Vec::new();
    if !ld_path.is_empty() {
        places.push(format!("LD_LIBRARY_PATH={}", ld_path.join(":")));
    } else {
        places.push("LD_LIBRARY_PATH (unset)".to_string());
    }
    if !mapped.is_empty() {
        places.push(format!(
            "the directories of its libraries ({})",
            mapped.join(", ")
        ));
    }
    places.push("/etc/ld.so.cache".to_string());
    places.push(DEFAULT_DIRS.join(", "));
    Ok(Found::No(format!(
        "the loaded libraries, {} inside /proc/{pid}/root",
        places.join(", ")
    )))
}

/// The Python package a pip install puts beside a command in `<prefix>/bin`:
/// `<prefix>/lib/python3*/site-packages/rocprof_attach`, sorted (those that exist).
pub fn pip_package_dirs(bin: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(bin.join("../lib"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path().join("site-packages/rocprof_attach"))
        .filter(|d| d.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// The shared objects of `dir` whose name starts with `prefix` and ends in `.so`, sorted: how
/// setuptools-rust names a library it packages (`_rocattach.cpython-311-x86_64-linux-gnu.so`).
pub fn shared_objects(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix) && n.ends_with(".so"))
        })
        .collect();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_entries_become_absolute_or_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(cwd.join("lib.so"), b"x").unwrap();
        let got = absolutize("./lib.so:libbare.so:/abs/x.so", &cwd, "-t").unwrap();
        assert_eq!(
            got,
            format!("{}:libbare.so:/abs/x.so", cwd.join("lib.so").display())
        );
        let e = absolutize("./missing.so", &cwd, "-t")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("missing.so") && e.contains("absolute path"),
            "{e}"
        );
        assert_eq!(absolutize("libx.so", &cwd, "-t").unwrap(), "libx.so");
    }
}
