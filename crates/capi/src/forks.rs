//! A fork of the host holds none of its sessions (issue 29).
//!
//! A host may fork without `exec` while it has sessions (Python's multiprocessing with the fork
//! start method, a C `fork`). The child inherits the library's memory and descriptors, but the
//! sessions stay the parent's: the library registers `pthread_atfork` handlers once (at its first
//! call) so that in the child
//!
//! * every claim file's descriptor is `/dev/null` ([`rocprof_attach_core::claims::forks`]): the
//!   child holds none of the parent's claim locks, so once the parent detaches, a new attach of
//!   those targets works at once however long the child lives;
//! * the session table is forgotten, never dropped ([`super::sessions`]): a `rocattach_detach` in
//!   the child finds no session of the parent's (it detaches nothing, releases no claim, and
//!   sends the parent's agent servers nothing: no job, no end), and the child's exit tells them
//!   nothing either ([`super::will`] acts in the process that attached only).
//!
//! What else the child inherits cannot touch the parent's sessions: its copies of the agent
//! servers' sockets are `SOCK_CLOEXEC`, and a server watches the host's process (a pidfd) as well
//! as its socket, so a copy kept open in a fork neither keeps a session of a dead host alive nor,
//! when the fork exits, ends a live host's session (the parent's copy is still open).
//!
//! The handlers hold the session table's lock and the claim descriptors' lock across the fork
//! (both are only ever held for a few statements), so the child never finds either held by a
//! thread it does not have.

use rocprof_attach_core::claims::forks as claims;

static REGISTER: std::sync::Once = std::sync::Once::new();

/// Register the fork handlers (once per process; glibc drops them if the library is unloaded).
pub fn register() {
    REGISTER.call_once(|| {
        // SAFETY: three functions of this library that never unwind.
        let r = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
        if r != 0 {
            tracing::warn!(
                "pthread_atfork failed ({r}): a fork of this process would hold its claim locks"
            );
        }
    });
}

extern "C" fn prepare() {
    super::sessions::fork_prepare();
    claims::prepare();
}

extern "C" fn parent() {
    claims::parent();
    super::sessions::fork_parent();
}

extern "C" fn child() {
    claims::child();
    super::sessions::fork_child();
    super::will::forget_owner();
}
