//! The few system interfaces outside ptrace proper that need `unsafe`, kept here so that
//! `unsafe` code lives only in the ptrace and memory modules. Each wrapper is safe to call.

/// True when we run in a secure-execution context (setuid/setgid/file capabilities).
pub fn at_secure() -> bool {
    // SAFETY: getauxval only reads the auxiliary vector the kernel gave this process; it has no
    // preconditions and returns 0 for unknown types.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}
