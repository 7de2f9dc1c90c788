//! The environment a process has now, as its C library sees it: `setenv` changes it in the
//! process's memory, where `/proc/PID/environ` (the block the process started with) never shows
//! it. rocprofiler-register applies an attach's environment buffer with `setenv` and keeps it when
//! the attach succeeds, so this is where the first attach's tool string and settings can be read
//! again (docs/protocol.md section 3.1, step 5).
//!
//! Read through `/proc/PID/mem` only: the target is never stopped nor changed. A process changing
//! its environment while it is read can give a torn answer, so callers treat what they find as
//! evidence for a message, not as a certainty; every read is bounded.

use crate::elf::RemoteLibrary;
use crate::error::{Error, Result};
use crate::procfs::{self, Mapping};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// At most this many environment entries are read.
const MAX_ENTRIES: usize = 16_384;
/// At most this many bytes of one entry are read.
const MAX_ENTRY: usize = 128 * 1024;
/// Memory is read a page at a time: the pointer array and the strings of an environment lie in
/// a few pages (the initial block on the stack, `setenv`'s copies on the heap), so a whole
/// environment takes a handful of reads.
const PAGE: u64 = 4096;

/// The entries of `pid`'s live environment whose name starts with one of `prefixes`, in order.
/// `maps`: a snapshot of its maps (the C library is found there).
pub fn read(pid: i32, maps: &[Mapping], prefixes: &[&str]) -> Result<Vec<(String, String)>> {
    let libc = RemoteLibrary::locate_in(pid, "libc.so.6", maps)?;
    let environ = libc.variable("__environ")?;
    let path = procfs::proc_dir(pid).join("mem");
    let file = File::open(&path).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ESRCH) => Error::ProcessGone { pid },
        _ => Error::io(format!("opening {}", path.display()), e),
    })?;
    let mut mem = Pages {
        file,
        pages: Vec::new(),
    };
    let word = |mem: &mut Pages, addr: u64| -> Result<u64> {
        mem.word(addr).ok_or_else(|| {
            Error::io(
                format!("reading {} at {addr:#x}", path.display()),
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            )
        })
    };
    let mut envp = word(&mut mem, environ)?;
    let mut out = Vec::new();
    for _ in 0..MAX_ENTRIES {
        let entry = word(&mut mem, envp)?;
        if entry == 0 {
            break;
        }
        envp += 8;
        if let Some(pair) = read_entry(&mut mem, entry, prefixes) {
            out.push(pair);
        }
    }
    Ok(out)
}

/// The pages of the target's memory read so far: a handful, looked up from the most recent one
/// (the pointer array and the strings are read in address order, mostly).
struct Pages {
    file: File,
    pages: Vec<(u64, Option<Box<[u8]>>)>,
}

impl Pages {
    /// The page holding `addr`, read once (None when it cannot be read).
    fn page(&mut self, addr: u64) -> Option<&[u8]> {
        let start = addr - addr % PAGE;
        let at = match self.pages.iter().rposition(|(s, _)| *s == start) {
            Some(at) => at,
            None => {
                let mut buf = vec![0u8; PAGE as usize].into_boxed_slice();
                let read = self.file.read_exact_at(&mut buf, start).ok().map(|()| buf);
                self.pages.push((start, read));
                self.pages.len() - 1
            }
        };
        self.pages[at].1.as_deref()
    }

    /// The 8-byte word at `addr`.
    fn word(&mut self, addr: u64) -> Option<u64> {
        let off = (addr % PAGE) as usize;
        let bytes: [u8; 8] = match self.page(addr)?.get(off..off + 8) {
            Some(b) => b.try_into().ok()?,
            // Across two pages.
            None => self.bytes(addr, 8)?.try_into().ok()?,
        };
        Some(u64::from_ne_bytes(bytes))
    }

    /// `len` bytes at `addr`, across pages.
    fn bytes(&mut self, mut addr: u64, len: usize) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let off = (addr % PAGE) as usize;
            let page = self.page(addr)?;
            let take = (len - out.len()).min(page.len() - off);
            out.extend_from_slice(&page[off..off + take]);
            addr += take as u64;
        }
        Some(out)
    }
}

/// One `NAME=value` entry at `addr`, when its name starts with one of `prefixes` (checked on the
/// first bytes, before anything is copied).
fn read_entry(mem: &mut Pages, mut addr: u64, prefixes: &[&str]) -> Option<(String, String)> {
    let wanted = |head: &[u8]| {
        prefixes.iter().any(|p| {
            let p = p.as_bytes();
            head.starts_with(p) || (head.len() < p.len() && p.starts_with(head))
        })
    };
    let mut bytes: Vec<u8> = Vec::new();
    loop {
        let off = (addr % PAGE) as usize;
        let page = mem.page(addr)?;
        let chunk = &page[off..];
        let end = chunk.iter().position(|b| *b == 0);
        let part = &chunk[..end.unwrap_or(chunk.len())];
        if bytes.is_empty() && !wanted(part) {
            return None;
        }
        bytes.extend_from_slice(part);
        if end.is_some() {
            break;
        }
        if bytes.len() > MAX_ENTRY {
            return None;
        }
        addr += chunk.len() as u64;
    }
    let text = String::from_utf8(bytes).ok()?;
    let (name, value) = text.split_once('=')?;
    prefixes
        .iter()
        .any(|p| name.starts_with(p))
        .then(|| (name.to_string(), value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's own live environment has what `setenv` put there, which
    /// `/proc/self/environ` does not show.
    #[test]
    fn a_variable_set_at_run_time_is_read() {
        // nextest runs each test in its own process: no other thread reads the environment.
        std::env::set_var("ROCPROF_LIVE_ENV_TEST", "set at run time");
        let pid = std::process::id() as i32;
        let maps = procfs::maps(pid).unwrap();
        let found = read(pid, &maps, &["ROCPROF_LIVE_ENV_"]).unwrap();
        assert_eq!(
            found,
            vec![(
                "ROCPROF_LIVE_ENV_TEST".to_string(),
                "set at run time".to_string()
            )]
        );
    }
}
