//! The rocpd crate's integration tests, in one binary (issue 18: one link, not one per file).
//! Each file is a module; the databases they convert are written with `rocprof_testkit::rocpd`,
//! and rocprofv3's sample files stay in the checkout's tests/rocpd_data. Tests that run the
//! `rocprof-attach` command (`convert`, `summary` and `query` as a user runs them: flags, exit
//! codes, messages, the OTF2 build) are the root package's (tests/rocpd_*.rs).

mod live;
mod merge;
mod scan;
mod schema;
mod to_csv;
mod to_json;
