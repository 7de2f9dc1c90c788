//! Reading and writing the target's memory.
//!
//! Data goes through `process_vm_readv`/`process_vm_writev` (one system call per buffer, no stop
//! needed). The code patch at the injection site goes through `/proc/PID/mem`, which can write
//! read-only text pages. `PTRACE_PEEKDATA`/`POKEDATA` are only a fallback, used when the other
//! paths are refused (for example by a seccomp filter or a kernel built without FOLL_FORCE).

use crate::error::{Error, Result};
use nix::errno::Errno;
use nix::sys::ptrace as nptrace;
use nix::sys::uio::{process_vm_readv, process_vm_writev, RemoteIoVec};
use nix::unistd::Pid;
use std::fs::{File, OpenOptions};
use std::io::{IoSlice, IoSliceMut};
use std::os::unix::fs::FileExt;

/// Write `data` at `addr` in process `pid`. `tid` is a stopped tracee used for the POKE fallback.
pub fn write(pid: i32, tid: i32, addr: u64, data: &[u8]) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    let remote = [RemoteIoVec {
        base: addr as usize,
        len: data.len(),
    }];
    match process_vm_writev(Pid::from_raw(pid), &[IoSlice::new(data)], &remote) {
        Ok(n) if n == data.len() => return Ok(()),
        Ok(_) | Err(Errno::EFAULT) | Err(Errno::EPERM) | Err(Errno::ENOSYS) => {}
        Err(Errno::ESRCH) => return Err(Error::ProcessGone { pid }),
        Err(e) => {
            return Err(Error::Sys {
                op: "process_vm_writev",
                tid,
                errno: e,
            })
        }
    }
    let mem = ProcMem::open(pid)?;
    match mem.write(addr, data) {
        Ok(()) => Ok(()),
        Err(_) => poke(pid, tid, addr, data),
    }
}

/// Read `len` bytes at `addr` in process `pid`.
pub fn read(pid: i32, tid: i32, addr: u64, len: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    if len == 0 {
        return Ok(buf);
    }
    let remote = [RemoteIoVec {
        base: addr as usize,
        len,
    }];
    match process_vm_readv(
        Pid::from_raw(pid),
        &mut [IoSliceMut::new(&mut buf)],
        &remote,
    ) {
        Ok(n) if n == len => return Ok(buf),
        Err(Errno::ESRCH) => return Err(Error::ProcessGone { pid }),
        _ => {}
    }
    let mem = ProcMem::open(pid)?;
    match mem.read(addr, &mut buf) {
        Ok(()) => Ok(buf),
        Err(_) => peek(pid, tid, addr, len),
    }
}

/// Read the `len` bytes at `addr` on a thread's stack if the stack has `margin` more bytes mapped
/// and readable below them (at every page); None otherwise.
///
/// One `process_vm_readv`: the data itself, then one byte per page of the margin, from `addr`
/// down. The kernel stops at the first address that is not readable (a stack's guard page), so
/// a short count means the margin is not there. Never falls back to `/proc/PID/mem`, which can
/// read through a guard page.
pub fn read_stack(pid: i32, addr: u64, len: usize, margin: u64) -> Option<Vec<u8>> {
    const PAGE: u64 = 4096;
    let pages = margin.div_ceil(PAGE) as usize;
    let mut remote = Vec::with_capacity(pages + 1);
    remote.push(RemoteIoVec {
        base: addr as usize,
        len,
    });
    for i in 1..=pages as u64 {
        let probe = addr.checked_sub(i * PAGE)?;
        remote.push(RemoteIoVec {
            base: probe as usize,
            len: 1,
        });
    }
    let mut buf = vec![0u8; len + pages];
    let n = process_vm_readv(
        Pid::from_raw(pid),
        &mut [IoSliceMut::new(&mut buf)],
        &remote,
    )
    .ok()?;
    if n != buf.len() {
        return None;
    }
    buf.truncate(len);
    Some(buf)
}

/// An open `/proc/PID/mem`, used for the code patch (it writes through page protections).
#[derive(Debug)]
pub struct ProcMem {
    pid: i32,
    file: File,
}

impl ProcMem {
    /// Open `/proc/PID/mem` read-write.
    pub fn open(pid: i32) -> Result<Self> {
        let path = format!("/proc/{pid}/mem");
        let file = OpenOptions::new().read(true).write(true).open(&path).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ESRCH) => Error::ProcessGone { pid },
            _ => Error::ProcRead {
                path: path.into(),
                source: e,
                hint: "rocprof-attach needs ptrace rights over the target (same user and Yama scope 0, or CAP_SYS_PTRACE)",
            },
        })?;
        Ok(ProcMem { pid, file })
    }

    /// Read exactly `buf.len()` bytes at `addr`.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.file
            .read_exact_at(buf, addr)
            .map_err(|e| self.err("read", addr, e))
    }

    /// Write all of `data` at `addr`.
    pub fn write(&self, addr: u64, data: &[u8]) -> Result<()> {
        self.file
            .write_all_at(data, addr)
            .map_err(|e| self.err("write", addr, e))
    }

    fn err(&self, what: &str, addr: u64, e: std::io::Error) -> Error {
        Error::io(format!("{what} of /proc/{}/mem at {addr:#x}", self.pid), e)
    }
}

/// Code patching with `/proc/PID/mem`, falling back to PEEK/POKE on the stopped tracee.
#[derive(Debug)]
pub struct CodeWriter {
    pid: i32,
    tid: i32,
    mem: Option<ProcMem>,
}

impl CodeWriter {
    /// Prepare to patch code in `pid`; `tid` must be a stopped tracee for the fallback.
    pub fn new(pid: i32, tid: i32) -> Self {
        CodeWriter {
            pid,
            tid,
            mem: ProcMem::open(pid).ok(),
        }
    }

    /// Read `len` bytes of code at `addr` through `/proc/PID/mem` only (no stopped thread needed);
    /// None when that is not possible.
    pub fn read_direct(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.mem.as_ref()?.read(addr, &mut buf).ok()?;
        Some(buf)
    }

    /// Read `len` bytes of code at `addr`.
    pub fn read(&self, addr: u64, len: usize) -> Result<Vec<u8>> {
        if let Some(mem) = &self.mem {
            let mut buf = vec![0u8; len];
            if mem.read(addr, &mut buf).is_ok() {
                return Ok(buf);
            }
        }
        peek(self.pid, self.tid, addr, len)
    }

    /// Write `data` over code at `addr`.
    pub fn write(&self, addr: u64, data: &[u8]) -> Result<()> {
        if let Some(mem) = &self.mem {
            if mem.write(addr, data).is_ok() {
                return Ok(());
            }
        }
        poke(self.pid, self.tid, addr, data)
    }
}

const WORD: u64 = std::mem::size_of::<libc::c_long>() as u64;

fn peek_word(pid: i32, tid: i32, addr: u64) -> Result<[u8; WORD as usize]> {
    nptrace::read(Pid::from_raw(tid), addr as nptrace::AddressType)
        .map(|w| w.to_ne_bytes())
        .map_err(|e| crate::ptrace::ptrace_error(pid, tid, "PTRACE_PEEKDATA", e))
}

/// Read with PTRACE_PEEKDATA, word by word, staying inside `[addr, addr+len)` rounded to words.
fn peek(pid: i32, tid: i32, addr: u64, len: usize) -> Result<Vec<u8>> {
    let start = addr & !(WORD - 1);
    let end = addr + len as u64;
    let mut out = Vec::with_capacity(len + 2 * WORD as usize);
    let mut a = start;
    while a < end {
        out.extend_from_slice(&peek_word(pid, tid, a)?);
        a += WORD;
    }
    let skip = (addr - start) as usize;
    Ok(out[skip..skip + len].to_vec())
}

/// Write with PTRACE_POKEDATA using aligned read-modify-write of whole words, so no byte outside
/// `[addr, addr+len)` changes.
fn poke(pid: i32, tid: i32, addr: u64, data: &[u8]) -> Result<()> {
    let start = addr & !(WORD - 1);
    let end = addr + data.len() as u64;
    let mut a = start;
    while a < end {
        let mut word = peek_word(pid, tid, a)?;
        for (i, b) in word.iter_mut().enumerate() {
            let at = a + i as u64;
            if at >= addr && at < end {
                *b = data[(at - addr) as usize];
            }
        }
        nptrace::write(
            Pid::from_raw(tid),
            a as nptrace::AddressType,
            libc::c_long::from_ne_bytes(word),
        )
        .map_err(|e| crate::ptrace::ptrace_error(pid, tid, "PTRACE_POKEDATA", e))?;
        a += WORD;
    }
    Ok(())
}
