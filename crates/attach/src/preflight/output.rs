//! Can the target create and write its output directory? Checked before any ptrace, as the
//! target's user (uid/gid from `/proc/PID/status`) and through the target's root
//! (`/proc/PID/root`), because the tool creates the directory from inside the target: a `-d`
//! that cannot work would otherwise only show up after the whole profiling window, as a rejected
//! detach and a lost profile.

use crate::error::{Error, Result};
use crate::outputs;
use rocprof_engine::procfs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

fn refuse(pid: i32, dir: &Path, why: String) -> Error {
    Error::Usage(format!(
        "output directory {} cannot be used by process {pid}: {why}. Fix: pass -d/--output-directory with a \
         directory that the target's user can create or write (as the target sees the filesystem)",
        dir.display()
    ))
}

/// Refuse an output directory that process `pid` cannot create or write. Template tokens
/// (`%pid%`, ...) are cut off first: only the fixed part of the path is checked. A relative path
/// (`%cwd%`-style, resolved by the target) is not checked.
pub fn check_output_dir(pid: i32, dir: &Path) -> Result<()> {
    let fixed = outputs::static_prefix(dir);
    if !fixed.is_absolute() {
        return Ok(());
    }
    let Some((ancestor, resolved)) = nearest_existing(pid, &fixed)? else {
        return Ok(());
    };
    let host = procfs::in_root(pid, &resolved);
    let meta = match std::fs::metadata(&host) {
        Ok(m) => m,
        Err(_) => return Ok(()),
    };
    let is_self = ancestor == fixed;
    let what = if is_self {
        "it".to_string()
    } else {
        format!(
            "{} (the nearest existing part of the path)",
            ancestor.display()
        )
    };
    if !meta.is_dir() {
        return Err(refuse(
            pid,
            dir,
            format!(
                "{} is not a directory{}",
                ancestor.display(),
                if is_self {
                    String::new()
                } else {
                    ", so nothing can be created beneath it".to_string()
                }
            ),
        ));
    }
    if let Some(why) = unwritable_filesystem(&host, &what) {
        return Err(refuse(pid, dir, why));
    }
    check_permissions(pid, dir, &meta, &what)
}

/// The first ancestor of `fixed` (or `fixed` itself) that exists in the target's root, and its
/// path there with links resolved; None when none exists or the target's root cannot be looked
/// at (permissions: the target will tell; do not guess).
fn nearest_existing(pid: i32, fixed: &Path) -> Result<Option<(PathBuf, PathBuf)>> {
    for a in fixed.ancestors() {
        match procfs::resolve_in_root(pid, a) {
            Ok(Some(resolved)) => return Ok(Some((a.to_path_buf(), resolved))),
            Ok(None) => continue,
            Err(rocprof_engine::Error::ProcessGone { pid }) => {
                return Err(Error::ProcessGone { pid })
            }
            Err(e) => {
                tracing::debug!(
                    "process {pid}: cannot check output directory {}: {e}",
                    a.display()
                );
                return Ok(None);
            }
        }
    }
    Ok(None)
}

/// Why no file can be created on the filesystem of `host` (a kernel or read-only one), if so;
/// `what` names the directory.
fn unwritable_filesystem(host: &Path, what: &str) -> Option<String> {
    if let Ok(fs) = nix::sys::statfs::statfs(host) {
        let t = fs.filesystem_type();
        if t == nix::sys::statfs::PROC_SUPER_MAGIC || t == nix::sys::statfs::SYSFS_MAGIC {
            return Some(format!(
                "{what} is on a kernel filesystem (/proc or /sys) where no files can be created"
            ));
        }
    }
    if nix::sys::statvfs::statvfs(host)
        .is_ok_and(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
    {
        return Some(format!("{what} is on a read-only filesystem"));
    }
    None
}

/// Refuse a directory (`meta`, named `what`) that the target's user cannot write and search.
fn check_permissions(pid: i32, dir: &Path, meta: &std::fs::Metadata, what: &str) -> Result<()> {
    let status = procfs::status(pid)?;
    let (uid, gid) = (status.uid[3], status.gid[3]);
    if uid == 0 {
        return Ok(());
    }
    let mode = meta.mode();
    let bits = if meta.uid() == uid {
        (mode >> 6) & 0o7
    } else if meta.gid() == gid || status.groups.contains(&meta.gid()) {
        (mode >> 3) & 0o7
    } else {
        mode & 0o7
    };
    if bits & 0o3 != 0o3 {
        return Err(refuse(
            pid,
            dir,
            format!(
                "{what} is not writable by the target's user (uid {uid}, gid {gid}; the directory is owned by \
                 uid {} gid {} with mode {:o})",
                meta.uid(),
                meta.gid(),
                mode & 0o7777
            ),
        ));
    }
    Ok(())
}
