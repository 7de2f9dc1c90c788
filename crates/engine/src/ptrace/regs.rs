//! Saving and restoring what an injection changes in a stopped thread: general-purpose
//! registers, the FP/SSE/AVX state and the blocked-signal mask.

use super::{ptrace_error, Tracee};
use crate::arch::{self, Regs};
use crate::error::Result;
use nix::errno::Errno;
use nix::sys::ptrace as nptrace;
use nix::unistd::Pid;

/// Saved floating-point / vector state (XSAVE layout, or FXSAVE when XSAVE is unavailable).
#[derive(Clone)]
pub struct FpState {
    note: libc::c_int,
    data: Vec<u8>,
}

impl std::fmt::Debug for FpState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FpState {{ note: {:#x}, {} bytes }}",
            self.note,
            self.data.len()
        )
    }
}

impl FpState {
    /// A buffer for [`Tracee::get_fpstate_into`], allocated before the thread is stopped.
    pub fn buffer() -> Vec<u8> {
        vec![0u8; arch::XSTATE_MAX]
    }

    /// The raw bytes of the saved state.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }
}

impl Tracee {
    /// The blocked-signal mask of the stopped thread (PTRACE_GETSIGMASK).
    pub fn get_sigmask(&self) -> Result<u64> {
        let mut mask: u64 = 0;
        // SAFETY: addr is the size of the kernel sigset (8 bytes); data points to a u64 we own.
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_GETSIGMASK,
                self.tid,
                std::mem::size_of::<u64>(),
                &mut mask as *mut u64,
            )
        };
        if r == -1 {
            return Err(ptrace_error(
                self.pid,
                self.tid,
                "PTRACE_GETSIGMASK",
                Errno::last(),
            ));
        }
        Ok(mask)
    }

    /// Set the blocked-signal mask of the stopped thread (PTRACE_SETSIGMASK).
    pub fn set_sigmask(&self, mask: u64) -> Result<()> {
        let mut m = mask;
        // SAFETY: addr is the size of the kernel sigset (8 bytes); data points to a u64 we own.
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_SETSIGMASK,
                self.tid,
                std::mem::size_of::<u64>(),
                &mut m as *mut u64,
            )
        };
        if r == -1 {
            return Err(ptrace_error(
                self.pid,
                self.tid,
                "PTRACE_SETSIGMASK",
                Errno::last(),
            ));
        }
        Ok(())
    }

    /// General-purpose registers of the stopped thread.
    pub fn getregs(&self) -> Result<Regs> {
        nptrace::getregs(Pid::from_raw(self.tid))
            .map_err(|e| ptrace_error(self.pid, self.tid, "PTRACE_GETREGS", e))
    }

    /// Set the general-purpose registers of the stopped thread.
    pub fn setregs(&self, regs: &Regs) -> Result<()> {
        nptrace::setregs(Pid::from_raw(self.tid), *regs)
            .map_err(|e| ptrace_error(self.pid, self.tid, "PTRACE_SETREGS", e))
    }

    /// Save the FP/SSE/AVX state (PTRACE_GETREGSET NT_X86_XSTATE, falling back to NT_PRFPREG).
    pub fn get_fpstate(&self) -> Result<FpState> {
        self.get_fpstate_into(FpState::buffer())
    }

    /// Like [`Tracee::get_fpstate`], into a buffer from [`FpState::buffer`] (so nothing is
    /// allocated while the thread is stopped).
    pub fn get_fpstate_into(&self, mut data: Vec<u8>) -> Result<FpState> {
        let mut last = Errno::EINVAL;
        for (note, size) in [
            (arch::NT_X86_XSTATE, arch::XSTATE_MAX),
            (arch::NT_PRFPREG, 512),
        ] {
            data.resize(size, 0);
            let mut iov = libc::iovec {
                iov_base: data.as_mut_ptr().cast(),
                iov_len: data.len(),
            };
            // SAFETY: iov points to `data`, which is valid for iov_len bytes for the whole call;
            // the kernel writes at most iov_len bytes and updates iov_len.
            let r = unsafe {
                libc::ptrace(
                    libc::PTRACE_GETREGSET,
                    self.tid,
                    note as usize,
                    &mut iov as *mut libc::iovec,
                )
            };
            if r == 0 {
                data.truncate(iov.iov_len);
                return Ok(FpState { note, data });
            }
            last = Errno::last();
            if last == Errno::ESRCH {
                break;
            }
        }
        Err(ptrace_error(
            self.pid,
            self.tid,
            "PTRACE_GETREGSET (FP state)",
            last,
        ))
    }

    /// Restore a state saved by [`Tracee::get_fpstate`].
    pub fn set_fpstate(&self, fp: &FpState) -> Result<()> {
        // PTRACE_SETREGSET only reads the buffer: no copy is needed to hand it a `*mut`.
        let mut iov = libc::iovec {
            iov_base: fp.data.as_ptr() as *mut libc::c_void,
            iov_len: fp.data.len(),
        };
        // SAFETY: iov points to `fp.data`, valid for iov_len bytes for the whole call; the kernel
        // only reads from it (SETREGSET), so the shared borrow is never written through.
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_SETREGSET,
                self.tid,
                fp.note as usize,
                &mut iov as *mut libc::iovec,
            )
        };
        if r == -1 {
            return Err(ptrace_error(
                self.pid,
                self.tid,
                "PTRACE_SETREGSET (FP state)",
                Errno::last(),
            ));
        }
        Ok(())
    }
}
