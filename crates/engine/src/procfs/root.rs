//! Paths inside a target's root directory (`/proc/PID/root`), with symlinks resolved inside it.

use super::{classify, proc_dir};
use crate::error::{Error, Result};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Maximum number of symlinks [`resolve_in_root`] follows (the kernel's `MAXSYMLINKS`).
pub const MAX_SYMLINKS: usize = 40;

/// `path` as seen inside the target's root: `/proc/PID/root/<path without leading />`.
///
/// This does not resolve symlinks inside the target root; use [`resolve_in_root`] for that.
pub fn in_root(pid: i32, path: &Path) -> PathBuf {
    let rel = path.strip_prefix("/").unwrap_or(path);
    proc_dir(pid).join("root").join(rel)
}

/// Resolve `path` inside the target's root directory, following symlinks component by component
/// inside `/proc/PID/root` (never against our own root).
///
/// Returns the resolved path as the target sees it, or `None` when some component is absent.
pub fn resolve_in_root(pid: i32, path: &Path) -> Result<Option<PathBuf>> {
    let root = proc_dir(pid).join("root");
    if let Err(e) =
        std::fs::symlink_metadata(&root).and_then(|_| std::fs::read_dir(&root).map(drop))
    {
        return Err(classify(pid, &root, e));
    }
    let resolved = resolve_under_root(&root, path).map_err(|(at, e)| classify(pid, &at, e))?;
    if resolved.is_none() && !proc_dir(pid).exists() {
        return Err(Error::ProcessGone { pid });
    }
    Ok(resolved)
}

/// [`resolve_in_root`] with an explicit root directory (any directory standing in for `/`).
///
/// Absolute link targets restart at `root`; `..` never leaves `root`; at most [`MAX_SYMLINKS`]
/// links are followed (ELOOP). Relative `path`s are taken relative to `/`. On error, returns the
/// host path that failed with the error.
pub fn resolve_under_root(
    root: &Path,
    path: &Path,
) -> std::result::Result<Option<PathBuf>, (PathBuf, io::Error)> {
    let mut pending: VecDeque<OsString> = components_of(path);
    let mut resolved: Vec<OsString> = Vec::new();
    let mut links = 0usize;
    while let Some(name) = pending.pop_front() {
        match name.as_bytes() {
            b"/" => resolved.clear(),
            b"." => {}
            b".." => {
                resolved.pop();
            }
            _ => {
                let host = host_path(root, &resolved).join(&name);
                let meta = match std::fs::symlink_metadata(&host) {
                    Ok(m) => m,
                    Err(e) if is_absent(&e) => return Ok(None),
                    Err(e) => return Err((host, e)),
                };
                if !meta.file_type().is_symlink() {
                    resolved.push(name);
                    continue;
                }
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err((host, io::Error::from_raw_os_error(libc::ELOOP)));
                }
                let target = std::fs::read_link(&host).map_err(|e| (host.clone(), e))?;
                let mut expanded = components_of_link(&target);
                expanded.extend(pending);
                pending = expanded;
            }
        }
    }
    let mut out = PathBuf::from("/");
    out.extend(resolved);
    Ok(Some(out))
}

fn is_absent(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR))
}

fn host_path(root: &Path, resolved: &[OsString]) -> PathBuf {
    let mut p = root.to_path_buf();
    p.extend(resolved);
    p
}

/// Components of a path to resolve from `/`: a leading "/" marker, then the names, `.` and `..`.
fn components_of(path: &Path) -> VecDeque<OsString> {
    let mut out = VecDeque::from([OsString::from("/")]);
    out.extend(link_components(path));
    out
}

/// Components of a symlink target: absolute targets start with a "/" marker (restart at root).
fn components_of_link(target: &Path) -> VecDeque<OsString> {
    let mut out = VecDeque::new();
    if target.is_absolute() {
        out.push_back(OsString::from("/"));
    }
    out.extend(link_components(target));
    out
}

fn link_components(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
}
