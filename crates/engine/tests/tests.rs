//! The engine crate's integration tests, in one binary (issue 18: one link, not one per file):
//! the engine against real processes, the C stand-ins of tests/fixtures built and run by
//! `rocprof_testkit`. Tests that run the `rocprof-attach` command (fault injection, soak,
//! storm) are the root package's.

mod agent;
mod inject;
mod lookup;
