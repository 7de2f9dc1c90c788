//! Where libcupti is looked for when a process maps none: one list for the tool inside the
//! process ([`crate::cupti::load`]) and the front end's preflight, which includes this file by
//! path (`crates/attach/src/cuda/preflight.rs`) so that the two can never disagree. Plain
//! functions of paths: no I/O here.

use std::path::{Path, PathBuf};

/// The file names tried in each place, newest CUDA first.
const NAMES: [&str; 3] = ["libcupti.so.13", "libcupti.so.12", "libcupti.so"];

/// The libcupti paths to try, in order: `override_path` (`ROCPROF_ATTACH_CUPTI`), beside each
/// mapped libcudart and in the `cuda_cupti` wheel next to it, in the nvidia Python packages
/// mapped, then the CUDA toolkit under /usr/local/cuda. `mapped` is the process's mapped files
/// in map order (repeats allowed), as the process sees them.
pub fn cupti_candidates<'a>(
    mapped: impl IntoIterator<Item = &'a str>,
    override_path: Option<&Path>,
) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = override_path.map(Path::to_path_buf).into_iter().collect();
    let mut seen: Vec<&str> = Vec::new();
    let mut roots: Vec<PathBuf> = Vec::new();
    for path in mapped {
        if seen.contains(&path) {
            continue;
        }
        seen.push(path);
        let file = path.rsplit('/').next().unwrap_or(path);
        if file.starts_with("libcudart.so") {
            let dir = Path::new(path).parent().unwrap_or(Path::new("/"));
            v.extend(NAMES.iter().map(|n| dir.join(n)));
            v.extend(
                NAMES
                    .iter()
                    .map(|n| dir.join("../../cuda_cupti/lib").join(n)),
            );
        }
        if let Some(i) = path.find("/site-packages/nvidia/") {
            let root = PathBuf::from(&path[..i + "/site-packages/nvidia".len()]);
            if !roots.contains(&root) {
                roots.push(root);
            }
        }
    }
    for r in roots {
        v.push(r.join("cu13/lib/libcupti.so.13"));
        v.push(r.join("cuda_cupti/lib/libcupti.so.12"));
    }
    for dir in [
        "/usr/local/cuda/lib64",
        "/usr/local/cuda/targets/x86_64-linux/lib",
        "/usr/local/cuda/extras/CUPTI/lib64",
    ] {
        v.extend(NAMES.iter().map(|n| Path::new(dir).join(n)));
    }
    v
}
