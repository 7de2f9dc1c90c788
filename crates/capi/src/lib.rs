//! The rocattach C ABI front end: a drop-in for ROCm's `librocprofiler-sdk-rocattach.so.1`
//! (docs/protocol.md sections 5.1 and 5.2) and for the older `librocprofv3-attach.so`
//! (`void attach(uint32_t pid)` / `void detach(void)`, docs/protocol.md section 6.5). Header:
//! `crates/capi/include/rocattach.h`; how ROCm's tools pick it up: `docs/library.md`.
//!
//! The functions run inside someone else's process (rocprofv3's launcher, rocprof-compute, a
//! Python script), so they keep these rules:
//!
//! * the host's environment is read at each call: `ROCPROF_ATTACH_TOOL_LIBRARY`, the `ROCP*`
//!   variables sent to the target, `ROCATTACH_LOG_LEVEL`, with the AT_SECURE rules;
//! * the host is never forked without `exec`: each attached process has an agent server started
//!   with `exec` (`rocprof-attach __agent-server`, [`will`]) that runs its attach and detach,
//!   finishes and restores the target on its own if the host dies mid-sequence, and finishes the
//!   session (detach, output, claim) if the host is killed at any moment before its detach;
//! * a fork of the host holds none of its sessions: not their claim locks, not the right to
//!   detach them ([`forks`]);
//! * no thread of ours runs between calls and none spins during one;
//! * sessions live in a map under a mutex that is never held across ptrace work
//!   ([`sessions`]), so two host threads can attach different PIDs at once;
//! * bad input gets its status code and one log line ([`log`]) before anything touches the target.
//!
//! Status codes follow rocattach, except that a timeout is 1 and a target that exited is 6
//! instead of rocattach's "0 then a failing ptrace call" ([`status`]).

pub mod agent;
pub mod forks;
pub mod log;
pub mod sessions;
pub mod status;
pub mod will;

use status::Status;
use std::ffi::c_char;

/// Version reported by `rocattach_get_version`: the rocattach interface this library implements
/// (its major number is the soname's `.so.1`).
pub const VERSION: (u32, u32, u32) = (1, 0, 0);

/// `rocattach_version_triplet_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct VersionTriplet {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Patch version.
    pub patch: u32,
}

/// Run one entry point: a panic (a bug of ours) becomes status 1 and a log line instead of
/// unwinding into C.
fn guarded(what: &str, f: impl FnOnce(&log::Log) -> Status) -> i32 {
    forks::register();
    let log = log::Log::from_env();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&log))) {
        Ok(s) => s as i32,
        Err(_) => {
            log.error(&format!(
                "internal error in {what}; please report it with ROCATTACH_LOG_LEVEL=trace output"
            ));
            Status::Error as i32
        }
    }
}

/// `rocattach_status_t rocattach_attach(int pid)`: attach one process.
#[no_mangle]
pub extern "C" fn rocattach_attach(pid: i32) -> i32 {
    guarded("rocattach_attach", |log| sessions::attach(pid, false, log))
}

/// `rocattach_status_t rocattach_attach_tree(int pid)`: attach `pid` (mandatory) and, in a
/// snapshot taken now, its descendants that have a listener.
#[no_mangle]
pub extern "C" fn rocattach_attach_tree(pid: i32) -> i32 {
    guarded("rocattach_attach_tree", |log| {
        sessions::attach(pid, true, log)
    })
}

/// `rocattach_status_t rocattach_detach(int pid)`: detach one process; `0` detaches every
/// session and always succeeds.
#[no_mangle]
pub extern "C" fn rocattach_detach(pid: i32) -> i32 {
    guarded("rocattach_detach", |log| sessions::detach(pid, log))
}

/// `rocattach_status_t rocattach_detach_tree(int pid)`: detach the processes the matching
/// `rocattach_attach_tree(pid)` attached.
#[no_mangle]
pub extern "C" fn rocattach_detach_tree(pid: i32) -> i32 {
    guarded("rocattach_detach_tree", |log| {
        sessions::detach_tree(pid, log)
    })
}

/// `rocattach_status_t rocattach_get_version(uint32_t* major, uint32_t* minor, uint32_t* patch)`;
/// NULL pointers are skipped.
///
/// # Safety
/// Each non-NULL pointer must be valid for writing a `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn rocattach_get_version(
    major: *mut u32,
    minor: *mut u32,
    patch: *mut u32,
) -> i32 {
    for (p, v) in [(major, VERSION.0), (minor, VERSION.1), (patch, VERSION.2)] {
        if !p.is_null() {
            // SAFETY: the caller passes NULL or a pointer valid for writing a uint32_t.
            unsafe { p.write(v) };
        }
    }
    Status::Success as i32
}

/// `rocattach_status_t rocattach_get_version_triplet(rocattach_version_triplet_t* info)`.
///
/// # Safety
/// `info` must be NULL or valid for writing a `rocattach_version_triplet_t`.
#[no_mangle]
pub unsafe extern "C" fn rocattach_get_version_triplet(info: *mut VersionTriplet) -> i32 {
    if info.is_null() {
        log::Log::from_env().error("rocattach_get_version_triplet: pass a non-NULL pointer");
        return Status::InvalidArgument as i32;
    }
    let (major, minor, patch) = VERSION;
    // SAFETY: non-NULL, and the caller passes a pointer valid for writing the struct.
    unsafe {
        info.write(VersionTriplet {
            major,
            minor,
            patch,
        })
    };
    Status::Success as i32
}

/// `const char* rocattach_get_status_name(rocattach_status_t)`: the enum name, NULL when out of
/// range.
#[no_mangle]
pub extern "C" fn rocattach_get_status_name(status: i32) -> *const c_char {
    status::name(status).map_or(std::ptr::null(), |s| s.as_ptr())
}

/// `const char* rocattach_get_status_string(rocattach_status_t)`: the message, NULL when out of
/// range.
#[no_mangle]
pub extern "C" fn rocattach_get_status_string(status: i32) -> *const c_char {
    status::message(status).map_or(std::ptr::null(), |s| s.as_ptr())
}

/// Older ABI (`librocprofv3-attach.so`): `void attach(uint32_t pid)`, a single-process attach
/// whose status is only logged.
#[no_mangle]
pub extern "C" fn attach(pid: u32) {
    let pid = i32::try_from(pid).unwrap_or(-1);
    let status = guarded("attach", |log| sessions::attach(pid, false, log));
    if status != 0 {
        log::Log::from_env().error(&format!(
            "attach({pid}) failed with status {status} ({})",
            status::name(status).map_or("?".into(), |s| s.to_string_lossy())
        ));
    }
}

/// Older ABI: `void detach(void)`, detaches every process attached by this library.
#[no_mangle]
pub extern "C" fn detach() {
    guarded("detach", |log| sessions::detach(0, log));
}
