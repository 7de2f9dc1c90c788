//! Every integration test of the `rocprof-attach` package, in one binary (issue 18: one link
//! instead of one per file; ripgrep's layout). Each file of tests/ is a module, named as the
//! file was; helpers live in the modules below them (`common`, `capi_common`, `rocpd_common`,
//! `common_lookup`, `prereq`, `cluster`). Select a file's tests with nextest's
//! `-E 'test(/^trust::/)'`. The Python package's tests need a venv and stay a binary of their
//! own (tests/python.rs).

mod capi_common;
mod cluster;
mod common;
mod prereq;
mod rocpd_common;

// Attaching: the engine, the agent, preflight, sessions, front ends, safety
mod capi;
mod capi_faults;
mod checked_input;
mod claims;
mod cuda;
mod cuda_standins;
mod demo_tool;
mod diagnostics;
mod faults;
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
mod trust;

// rocpd: databases, conversions, reports
mod fuzz_corpus;
mod rocpd_cli;
mod rocpd_json;
mod rocpd_many;
mod rocpd_otf2;
mod rocpd_pftrace;
mod rocpd_report;

// The command's surface, docs and builds
mod cli;
mod cli_docs;
mod docs;
mod options;
mod release_profile;
mod static_build;
