//! What the agent server does by itself when its front end dies: a [`Will`].
//!
//! The server outlives the front end (it is a process of its own, deaf to terminal signals). A
//! front end that has something left to do in its targets should the front end die (a detach
//! after attaching) hands the server a will ([`super::server::AgentServer::set_will`]) and
//! takes it back once it has done that work itself ([`super::server::AgentServer::clear_will`]).
//! When the server's socket closes while a will is set, the front end died: the server
//!
//! 1. writes each file's `on_death` bytes (so whoever looks sees that the agent is finishing),
//! 2. lets every job in flight finish (a detach the front end had sent runs to its end),
//! 3. runs each of the will's jobs that did not already run to its end through this server
//!    (same target process, same kind of job), one after the other, with the will's timeouts;
//!    a job with a condition ([`WillItem::only_after`]) runs only once what it undoes ran,
//! 4. writes each file's `on_success` bytes when its job ran to its end (or its target is gone,
//!    or it has no job), `on_failure` otherwise, truncating the file to their length (padded
//!    with spaces to [`WillFile::pad_to`]),
//! 5. closes the files and exits.
//!
//! The engine knows nothing of what the jobs or the bytes mean: the attach layer fills the will
//! (its detach calls, the claim records: `rocprof_attach_core::session::will`). The files'
//! descriptors travel with the will (SCM_RIGHTS), so the server also holds whatever the front end
//! held through them (an `flock` lock stays held until the server closes them).

use super::{hex_bytes, CallTimeouts, Job, Target};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::FileExt;

/// One thing to finish: a job (none for a target that ends its session by itself) and a file to
/// rewrite as it goes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WillItem {
    /// Where to run the job.
    pub target: Target,
    /// The job, or None when nothing has to be injected (only the file is written).
    pub job: Option<Job>,
    /// Whether a file travels with this item (its descriptor, in item order).
    pub file: Option<WillFile>,
    /// Run the job only if a job of this kind (its [`Job::name`], e.g. `"attach"`) ran to its
    /// end on the same target process through this server and its function returned 0;
    /// otherwise nothing needs undoing and the item counts as done. None: always.
    #[serde(default)]
    pub only_after: Option<String>,
}

/// What to write into one file, at offset 0 (the file is then cut to that length).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WillFile {
    /// When the front end is found dead, before any job runs.
    #[serde(with = "hex_bytes")]
    pub on_death: Vec<u8>,
    /// When the item's job ran to its end, or its target is gone, or it has no job.
    #[serde(with = "hex_bytes")]
    pub on_success: Vec<u8>,
    /// When the item's job failed.
    #[serde(with = "hex_bytes")]
    pub on_failure: Vec<u8>,
    /// Each of the three is padded with spaces to at least this many bytes when it is written
    /// (so a rewrite is one write of the same length as the one before), which the front end
    /// then does not have to send.
    #[serde(default)]
    pub pad_to: usize,
}

/// What to finish if the front end dies.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Will {
    /// The items, in the order they are finished.
    pub items: Vec<WillItem>,
    /// Bounds for the will's jobs.
    pub timeouts: CallTimeouts,
}

impl Will {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Write `bytes`, padded with spaces to `pad_to`, at offset 0 of `file` and cut it there (best
/// effort: nobody is left to tell).
pub(super) fn rewrite(file: &std::fs::File, bytes: &[u8], pad_to: usize) {
    if bytes.is_empty() {
        return;
    }
    let mut padded = bytes.to_vec();
    padded.resize(bytes.len().max(pad_to), b' ');
    let _ = file.write_all_at(&padded, 0);
    let _ = file.set_len(padded.len() as u64);
}
