//! A fresh thread in the target that loads a tool library: the CUDA backend's injection
//! (docs/cuda.md, "How a tool gets into a process").
//!
//! The thread we stop must be parked in a blocking system call ([`Spawn::parked_in`]): a thread
//! waiting in `poll` or `epoll_wait` holds none of the C library's internal locks, so the only
//! code run on it, `pthread_create`, cannot wait for a lock it holds itself. Its state is checked
//! again at the stop (the kernel's `orig_rax`); a thread that woke up in between is released
//! untouched ([`Error::NotParked`]).
//!
//! The injection maps two pages and keeps them: the [`arch::SPAWN_TRAMPOLINE`] (read and
//! execute) and the [`Block`] (read and write). `pthread_create(&t, NULL, trampoline, block)`
//! returns at once; the thread it made then runs `dlopen`, `dlsym` and the tool's start function
//! on its own, long after the stopped thread went back to its wait. Everything the loader and the
//! tool do happens on that fresh thread, which holds no lock of anyone's.

use super::{Outcome, Target};
use crate::arch;
use crate::error::{Error, Result};
use crate::faults::{self, Step};
use crate::inject::Injection;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// Page size assumed for the two pages (the kernel rounds `mprotect` to pages anyway).
const PAGE: u64 = 4096;

/// What a spawn needs besides the [`Target`] (whose `function` is `pthread_create`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spawn {
    /// `dlopen` in the target.
    pub dlopen: u64,
    /// `dlsym` in the target.
    pub dlsym: u64,
    /// `dlerror` in the target.
    pub dlerror: u64,
    /// Path of the tool library as the target sees it.
    pub tool: String,
    /// The tool's start function, called with `payload` on the fresh thread.
    pub symbol: String,
    /// The start function's argument (a NUL is added).
    pub payload: String,
    /// System call numbers the stopped thread may be parked in.
    pub parked_in: Vec<u64>,
}

/// Offsets in the data page the trampoline reads and writes (see [`arch::SPAWN_TRAMPOLINE`]).
pub mod block {
    /// `dlopen`, `dlsym`, `dlerror`: three function pointers.
    pub const FUNCTIONS: u64 = 0;
    /// Pointer to the tool path.
    pub const TOOL: u64 = 24;
    /// Pointer to the symbol name.
    pub const SYMBOL: u64 = 32;
    /// Pointer to the payload.
    pub const PAYLOAD: u64 = 40;
    /// State written by the thread: 0 not started, 1 `dlopen` failed, 2 `dlsym` failed, 3 the
    /// start function runs, 4 it returned.
    pub const STATE: u64 = 48;
    /// `dlerror()`'s message after a failure (a pointer into the target).
    pub const ERROR: u64 = 56;
    /// The `pthread_t` of the fresh thread.
    pub const THREAD: u64 = 64;
    /// What the start function returned (state 4).
    pub const RESULT: u64 = 72;
    /// Where the strings start.
    pub const STRINGS: u64 = 128;
}

/// The state of a spawned thread, read back from its block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    /// The thread has not got past `dlopen` yet.
    Starting,
    /// `dlopen` failed with this message.
    OpenFailed(String),
    /// `dlsym` failed with this message.
    SymbolMissing(String),
    /// The start function runs (it does not return while the tool serves).
    Running,
    /// The start function returned this value.
    Returned(i64),
}

/// Read the block at `addr` in process `pid` (no stop: `/proc/PID/mem`).
pub fn read_block(pid: i32, addr: u64) -> Result<Block> {
    let words = crate::memory::read(pid, pid, addr, 80)?;
    let word = |off: u64| {
        let o = off as usize;
        u64::from_le_bytes(words[o..o + 8].try_into().expect("8 bytes"))
    };
    let message = || {
        let at = word(block::ERROR);
        if at == 0 {
            return "no message".to_string();
        }
        let bytes = crate::memory::read(pid, pid, at, 512).unwrap_or_default();
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        String::from_utf8_lossy(&bytes[..end]).into_owned()
    };
    Ok(match word(block::STATE) {
        1 => Block::OpenFailed(message()),
        2 => Block::SymbolMissing(message()),
        3 => Block::Running,
        4 => Block::Returned(word(block::RESULT) as i64),
        _ => Block::Starting,
    })
}

/// The bytes of the data page for a block at `base`.
fn block_bytes(base: u64, s: &Spawn) -> Vec<u8> {
    let mut data = vec![0u8; block::STRINGS as usize];
    let mut strings = Vec::new();
    let mut put = |text: &str| {
        let at = base + block::STRINGS + strings.len() as u64;
        strings.extend_from_slice(text.as_bytes());
        strings.push(0);
        at
    };
    let pointers = [
        (block::FUNCTIONS, s.dlopen),
        (block::FUNCTIONS + 8, s.dlsym),
        (block::FUNCTIONS + 16, s.dlerror),
        (block::TOOL, put(&s.tool)),
        (block::SYMBOL, put(&s.symbol)),
        (block::PAYLOAD, put(&s.payload)),
    ];
    for (off, value) in pointers {
        data[off as usize..off as usize + 8].copy_from_slice(&value.to_le_bytes());
    }
    data.extend_from_slice(&strings);
    data
}

/// Check the stopped thread is parked, map and fill the two pages, and call `pthread_create`.
/// Returns `pthread_create`'s result; the block's address goes to `out.spawn_block`.
pub(super) fn run(
    inj: &mut Injection,
    t: &Target,
    s: &Spawn,
    timeout: Duration,
    out: &mut Outcome,
) -> Result<i32> {
    arch::ensure_supported()?;
    match arch::interrupted_syscall(inj.saved_regs()) {
        Some(nr) if s.parked_in.contains(&nr) => {}
        found => {
            return Err(Error::NotParked {
                pid: t.pid,
                tid: t.tid,
                found: match found {
                    Some(nr) => format!("in system call {nr}"),
                    None => "running".into(),
                },
            })
        }
    }
    let base = inj.mmap(2 * PAGE)?;
    let data = base + PAGE;
    let bytes = block_bytes(data, s);
    if bytes.len() as u64 > PAGE {
        return Err(Error::usage("internal: spawn block larger than a page"));
    }
    inj.write(base, &arch::SPAWN_TRAMPOLINE)?;
    inj.write(data, &bytes)?;
    inj.mprotect(base, PAGE, libc::PROT_READ | libc::PROT_EXEC)
        .map_err(|e| match e {
            Error::RemoteSyscall { pid, errno, .. } => Error::Agent {
                pid,
                message: format!(
                    "the target may not map executable memory (mprotect: {errno}; SELinux `execmem` \
                     or a similar policy): start it with the launch-time path instead \
                     (docs/cuda.md, \"Without ptrace\")"
                ),
            },
            e => e,
        })?;
    faults::point(Step::Call);
    let start = Instant::now();
    let status = inj.call_int(
        t.function,
        [data + block::THREAD, 0, base, data, 0, 0],
        Some(timeout),
    );
    out.call_us = start.elapsed().as_micros() as u64;
    let status = status?;
    if status == 0 {
        // The fresh thread runs the trampoline from now on: the pages stay.
        inj.keep(base);
        out.spawn_block = Some(data);
    }
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_points_at_its_own_strings() {
        let s = Spawn {
            dlopen: 1,
            dlsym: 2,
            dlerror: 3,
            tool: "/t.so".into(),
            symbol: "start".into(),
            payload: "k=v".into(),
            parked_in: vec![7],
        };
        let b = block_bytes(0x1000, &s);
        let word = |o: u64| u64::from_le_bytes(b[o as usize..o as usize + 8].try_into().unwrap());
        assert_eq!(
            [word(0), word(8), word(16)],
            [1, 2, 3],
            "dlopen, dlsym, dlerror"
        );
        let at = |p: u64| (word(p) - 0x1000) as usize;
        assert_eq!(&b[at(block::TOOL)..at(block::TOOL) + 6], b"/t.so\0");
        assert_eq!(&b[at(block::SYMBOL)..at(block::SYMBOL) + 6], b"start\0");
        assert_eq!(&b[at(block::PAYLOAD)..at(block::PAYLOAD) + 4], b"k=v\0");
        assert_eq!(word(block::STATE), 0, "not started");
    }
}
