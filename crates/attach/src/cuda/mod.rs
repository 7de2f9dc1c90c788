//! The CUDA backend: a process that maps `libcuda.so.1` is profiled through CUPTI by our tool
//! library (crates/cuda-tool), loaded on a fresh thread of its own (docs/cuda.md).
//!
//! * [`preflight`]: what `--check` reports for a CUDA process and what the attach needs (the
//!   parked thread, `pthread_create`/`dlopen`/`dlsym` in the target, the tool library);
//! * [`channel`]: the socket the front end and the tool talk over;
//! * [`link`]: attach (load the tool or reuse it, then start tracing) and detach (stop tracing,
//!   the tool writes the rocpd database);
//! * [`catalog`]: `-L`/`--list-avail`, the metrics the process's GPUs offer (nothing enabled).
//!
//! Nothing here prints.

pub mod catalog;
pub mod channel;
pub mod link;
pub mod preflight;

pub use link::{attach, detach, Link};
pub use preflight::Facts;

use serde::Serialize;

/// comm of the tool's thread in a process it was loaded into (15 bytes at most).
pub const TOOL_COMM: &str = "rocp-cu-attach";
/// The tool's start function, called on its fresh thread.
pub const START_SYMBOL: &str = "rocprof_attach_cuda_start";
/// File name of the tool library.
pub const TOOL_FILE: &str = "librocprof_cuda_tool.so";
/// The library whose mapping makes a process a CUDA process.
pub const DRIVER_LIBRARY: &str = "libcuda.so.1";
/// comm of the CUDA driver's event thread, which `cuInit` starts (seen on the H100 with driver
/// 580: `../shared/spec/cuda-field-notes.md`).
pub const EVENT_THREAD: &str = "cuda-EvtHandlr";

/// Whether process `pid` has started the CUDA driver: it has the driver's [`EVENT_THREAD`] or
/// our tool's thread. A process that maps `libcuda.so.1` without either (a launcher such as
/// torchrun, which imports torch but runs no CUDA) has nothing to trace. True when the threads
/// cannot be read: the preflight then says why.
pub fn started(pid: i32) -> bool {
    let named =
        |comm| rocprof_engine::procfs::threads_named(pid, comm).map_or(true, |t| !t.is_empty());
    named(EVENT_THREAD) || named(TOOL_COMM)
}

/// Which profiler a process gets (`--backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// ROCm when the process has the `rocp-bg-attach` listener, else CUDA when it maps
    /// `libcuda.so.1`.
    #[default]
    Auto,
    /// rocprofiler-sdk through the `rocp-bg-attach` listener.
    Rocm,
    /// CUPTI through our tool library.
    Cuda,
}

impl Backend {
    /// "rocm", "cuda" or "auto".
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Rocm => "rocm",
            Backend::Cuda => "cuda",
        }
    }
}

/// The backend process `pid` gets, and why (for `--check`, `--list` and `--json`).
/// `has_listener`: it has a `rocp-bg-attach` thread; `maps_cuda`: it maps `libcuda.so.1`.
pub fn decide(asked: Backend, has_listener: bool, maps_cuda: bool) -> (Backend, &'static str) {
    match asked {
        Backend::Rocm => (Backend::Rocm, "--backend rocm"),
        Backend::Cuda => (Backend::Cuda, "--backend cuda"),
        Backend::Auto if has_listener && maps_cuda => (
            Backend::Rocm,
            "it has the rocp-bg-attach listener (ROCm wins when it also maps libcuda.so.1)",
        ),
        Backend::Auto if has_listener => (Backend::Rocm, "it has the rocp-bg-attach listener"),
        Backend::Auto if maps_cuda => (Backend::Cuda, "it maps libcuda.so.1"),
        Backend::Auto => (
            Backend::Rocm,
            "it has neither the rocp-bg-attach listener nor libcuda.so.1",
        ),
    }
}

/// True when a mapping's path is the CUDA driver library (`libcuda.so.1` or the versioned file
/// it links to, `libcuda.so.580.65.06`).
pub fn is_driver_path(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name == DRIVER_LIBRARY
        || name
            .strip_prefix("libcuda.so.")
            .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// True for a process the CUDA backend serves (no `rocp-bg-attach` listener; our tool's thread,
/// or the CUDA driver mapped): its sessions end by themselves when their front end goes away.
pub fn detaches_by_itself(pid: i32) -> bool {
    use rocprof_engine::procfs;
    let named = |n: &str| procfs::threads_named(pid, n).is_ok_and(|t| !t.is_empty());
    if named(crate::preflight::LISTENER_COMM) {
        return false;
    }
    named(TOOL_COMM)
        || procfs::maps(pid).is_ok_and(|m| {
            m.iter()
                .any(|m| m.path.as_deref().is_some_and(is_driver_path))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rocm_wins_when_both_and_the_override_decides() {
        assert_eq!(decide(Backend::Auto, true, true).0, Backend::Rocm);
        assert_eq!(decide(Backend::Auto, false, true).0, Backend::Cuda);
        assert_eq!(decide(Backend::Cuda, true, true).0, Backend::Cuda);
        assert_eq!(decide(Backend::Rocm, false, true).0, Backend::Rocm);
    }

    #[test]
    fn the_driver_is_known_by_its_versioned_name() {
        assert!(is_driver_path(
            "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04"
        ));
        assert!(is_driver_path("/tmp/x/libcuda.so.1"));
        assert!(!is_driver_path("/usr/lib/libcudart.so.13"));
        assert!(!is_driver_path("/usr/lib/libcuda.so.1.bak"));
    }
}
