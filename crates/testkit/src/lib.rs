//! Test support shared by the workspace's integration tests (the root package's tests/, and
//! crates/engine/tests and crates/rocpd/tests): one copy of the helpers and of the fixtures,
//! which stay where they are in the checkout (tests/fixtures, tests/rocpd_data).
//!
//! * [`standins`]: the C stand-ins of tests/fixtures compiled with gcc, once per source change;
//! * [`cuda`]: the GPU-free CUDA stand-ins of tests/fixtures/cuda (a fake driver, a fake CUPTI on
//!   NVIDIA's real headers, a CUDA-like target);
//! * [`target`]: the stand-in target run as a real process, and what the tests read of it in /proc;
//! * [`records`](mod@records): the stand-in register library's log and the environment buffer it receives;
//! * [`lookup`]: the fixtures of tests/fixtures/lookup (library lookup and preflight);
//! * [`rocpd`]: rocpd databases written with the crate's writer, and rocprofv3's sample files.
//!
//! Cargo's build of the `rocprof-attach` binary is only the root package's tests' (tests/common
//! runs it); [`release_bin`] is what the benchmarks (examples/bench_*.rs) run.

#![deny(missing_docs)]

pub mod cuda;
pub mod lookup;
pub mod records;
pub mod rocpd;
pub mod standins;
pub mod target;

pub use records::*;
pub use standins::*;
pub use target::*;

use std::path::{Path, PathBuf};

/// The checkout's root directory (this crate is crates/testkit).
pub fn checkout() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Cargo's scratch directory for tests, `<target dir>/tmp` (what `CARGO_TARGET_TMPDIR` names to
/// an integration test), found from the running executable: a test in
/// `<target>/<profile>/deps/`, an example in `<target>/<profile>/examples/`.
pub fn target_tmp() -> PathBuf {
    let exe = std::env::current_exe().expect("current executable");
    exe.ancestors()
        .nth(3)
        .map(|target| target.join("tmp"))
        .unwrap_or_else(|| checkout().join("target/tmp"))
}

/// The `rocprof-attach` a benchmark (an example) runs: `ROCPROF_ATTACH_BIN`, else the checkout's
/// release build. The root package's tests run cargo's build of it instead (tests/common).
pub fn release_bin() -> PathBuf {
    std::env::var_os("ROCPROF_ATTACH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| checkout().join("target/release/rocprof-attach"))
}
