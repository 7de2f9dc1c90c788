//! Every integration test of the `rocprof-attach` package, in one binary (issue 18: one link
//! instead of one per file; ripgrep's layout). Each file of tests/ is a module, named as the
//! file was; helpers live in the modules below them (`common`, `capi_common`, `rocpd_common`,
//! `prereq`, `cluster`) and in the crate `rocprof-testkit` (crates/testkit), which the crates'
//! own tests share. Select a file's tests with nextest's `-E 'test(/^trust::/)'`. The Python
//! package's tests need a venv and stay a binary of their own (tests/python.rs).
//!
//! Tests that use one crate alone live with it: the engine's (`inject`, `agent`, `lookup`) in
//! crates/engine/tests, the rocpd converters' and schema's (`to_csv`, `to_json`, `scan`,
//! `schema`) in crates/rocpd/tests. What is here runs the `rocprof-attach` binary or uses
//! several layers; the reason is given where it is not obvious.

mod capi_common;
mod cluster;
mod common;
mod prereq;
mod rocpd_common;

// Attaching: preflight, sessions, front ends, safety (faults, soak and storm run the binary)
mod capi;
mod capi_faults;
mod capi_kill;
mod checked_input;
mod claims;
mod cuda;
mod cuda_exit;
mod cuda_pmc;
mod cuda_sessions;
mod cuda_spm;
mod cuda_standins;
mod demo_tool;
mod detach_after_kill;
mod diagnostics;
mod faults;
mod lock;
mod messages;
mod mpi;
mod multi;
mod nodes;
mod outputs;
mod preflight;
mod security;
mod session;
mod session_convert;
mod soak;
mod standalone;
mod storm;
mod top;
mod top_spm;
mod trust;

// rocpd through the command: flags, exit codes, one-line errors, files it prints
// Replays the fuzz targets' corpora, which cover the engine's parsers and rocpd.
mod fuzz_corpus;
mod rocpd_cli;
// ROCPROF_ATTACH_THREADS and `--start`/`--end`, as the command reads them.
mod rocpd_json;
// `query`, `summary` and `convert` of the command over 64 and 256 databases.
mod rocpd_many;
// The OTF2 library in the default build of the binary, and its message when left out.
mod rocpd_otf2;
// The `perfetto` format alias, window flags and errors of the command.
mod rocpd_pftrace;
// `query` and `summary` output and exit codes of the command; the HTML report in Chromium.
mod rocpd_report;

// The command's surface, docs and builds
mod cli;
mod cli_docs;
mod docs;
mod options;
mod release_profile;
mod static_build;
