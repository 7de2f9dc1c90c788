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

use super::sessions::{registry, Registry};
use rocprof_attach_core::claims::forks as claims;
use std::cell::RefCell;
use std::sync::MutexGuard;

thread_local! {
    /// The session table's lock, held by the forking thread from [`prepare`] to [`parent`] or
    /// [`child`].
    static HELD: RefCell<Option<MutexGuard<'static, Option<Registry>>>> =
        const { RefCell::new(None) };
}

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

/// Hold the session table's lock, then the claim descriptors', across the fork.
extern "C" fn prepare() {
    let guard = registry();
    HELD.with(|h| *h.borrow_mut() = Some(guard));
    claims::prepare();
}

/// Release both locks.
extern "C" fn parent() {
    claims::parent();
    HELD.with(|h| drop(h.borrow_mut().take()));
}

/// In the child: the claim descriptors become `/dev/null`; the session table is forgotten, never
/// dropped (a drop would end the parent's agent servers and remove its claim files), so this
/// process starts with none; the destructor has nothing to do here.
extern "C" fn child() {
    claims::child();
    HELD.with(|h| {
        if let Some(mut guard) = h.borrow_mut().take() {
            std::mem::forget(guard.take());
        }
    });
    super::will::forget_owner();
}
