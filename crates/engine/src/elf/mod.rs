//! Finding a function in the target's copy of a shared library (docs/protocol.md section 5.8).
//!
//! Nothing here uses ptrace: the object is found in `/proc/PID/maps`, read through
//! `/proc/PID/map_files` (or the path inside the target's root, verified by GNU Build ID against
//! the target's memory), and its dynamic symbol table is searched the way the dynamic loader
//! does, through the hash table.
//!
//! Only the parts a lookup needs are read ([`file`](mod@file)): the ELF header, the program headers, the
//! dynamic section, the hash words, symbols and names on the lookup's path, and the notes for a
//! Build ID. A 4 MB library costs a few KiB of reads, not 4 MB.
//!
//! * [`locate`]: which mapped object is the library, opening it, its load bias;
//! * [`file`](mod@file): reading an object in parts (header, program headers, notes);
//! * [`symbols`]: the hash-table lookup (with a `.dynsym` scan as the fallback).

pub mod file;
pub mod locate;
pub mod symbols;

use crate::error::{Error, Result};
use crate::procfs::{self, Mapping};
use file::{ElfInfo, FileSource};
use locate::Image;
use object::elf;
use object::LittleEndian;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use file::is_loadable_shared_object;
pub use locate::{
    candidate_objects, dev_major_minor, library_matches, load_bias, MAX_LOADS, MAX_OBJECT_SIZE,
};

const LE: LittleEndian = LittleEndian;

/// Cap on symbol counts and hash-chain steps.
pub const MAX_SYMBOLS: u64 = 1 << 24;
/// Cap on a PT_NOTE segment we parse (file or memory).
pub const MAX_NOTE_SEGMENT: u64 = 1 << 20;
/// Cap on a GNU Build ID descriptor.
pub const MAX_BUILD_ID: usize = 4096;

#[cfg(target_arch = "aarch64")]
const EXPECTED_MACHINE: u16 = elf::EM_AARCH64;
#[cfg(not(target_arch = "aarch64"))]
const EXPECTED_MACHINE: u16 = elf::EM_X86_64;

/// A shared object mapped in the target, located and verified.
#[derive(Clone)]
pub struct RemoteLibrary {
    /// Process id.
    pub pid: i32,
    /// Path of the object as shown in maps (" (deleted)" stripped).
    pub path: String,
    /// Load bias (address = bias + st_value).
    pub bias: u64,
    /// The maps entry carried " (deleted)".
    pub deleted: bool,
    /// (major, minor, inode) of the mapped file.
    pub file_id: (u32, u32, u64),
    /// Where the ELF image was read from (`/proc/PID/map_files/...` or `/proc/PID/root/...`).
    pub opened: PathBuf,
    /// All mappings of this object in the target.
    pub mappings: Vec<Mapping>,
    image: Arc<Image>,
}

impl fmt::Debug for RemoteLibrary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteLibrary")
            .field("pid", &self.pid)
            .field("path", &self.path)
            .field("bias", &format_args!("{:#x}", self.bias))
            .field("deleted", &self.deleted)
            .field("file_id", &self.file_id)
            .field("opened", &self.opened)
            .finish()
    }
}

impl RemoteLibrary {
    /// Locate the unique object in `pid` matching `name` (basename, versioned soname, " (deleted)").
    pub fn locate(pid: i32, name: &str) -> Result<Self> {
        Self::locate_with(pid, name, true)
    }

    /// Like [`RemoteLibrary::locate`] but never reads `/proc/PID/map_files`: the object is read via
    /// its path inside the target's root and, when that is not the mapped inode, verified by Build
    /// ID. This is what an attacher without CAP_SYS_ADMIN gets; exposed for tests and diagnostics.
    pub fn locate_via_path(pid: i32, name: &str) -> Result<Self> {
        Self::locate_with(pid, name, false)
    }

    /// Like [`RemoteLibrary::locate`] with a `/proc/PID/maps` snapshot the caller already read.
    pub fn locate_in(pid: i32, name: &str, maps: &[Mapping]) -> Result<Self> {
        Self::locate_from(pid, name, maps, true)
    }

    fn locate_with(pid: i32, name: &str, map_files: bool) -> Result<Self> {
        Self::locate_from(pid, name, &procfs::maps(pid)?, map_files)
    }

    fn locate_from(pid: i32, name: &str, maps: &[Mapping], map_files: bool) -> Result<Self> {
        let group = locate::pick_one(pid, name, candidate_objects(maps, name))?;
        let first = &group[0];
        let path = first.path.clone().unwrap_or_default();
        let (image, opened, same_file) = locate::open_object(pid, first, map_files)?;
        let bias = load_bias(&image.info.loads(), &group).map_err(|why| {
            if same_file {
                Error::Symbol(format!(
                    "cannot compute the load address of {path} in process {pid}: {why}; restart the target \
                     or report a bug"
                ))
            } else {
                unverified(pid, &path, &opened, &format!("its segments do not match the mapped copy ({why})"))
            }
        })?;
        let lib = RemoteLibrary {
            pid,
            path,
            bias,
            deleted: first.deleted,
            file_id: first.file_id(),
            opened,
            mappings: group,
            image,
        };
        if !same_file {
            lib.verify_build_id()?;
        }
        Ok(lib)
    }

    /// Absolute address in the target of a defined global/weak function `symbol`.
    pub fn symbol(&self, symbol: &str) -> Result<u64> {
        let value = self
            .image
            .function(symbol)
            .map_err(|why| self.symbol_error(symbol, &why))?
            .ok_or_else(|| self.symbol_error(symbol, "no such exported function"))?;
        let addr = self.bias.wrapping_add(value);
        if !self.mappings.iter().any(|m| m.exec && m.contains(addr)) {
            return Err(self.symbol_error(
                symbol,
                &format!(
                    "its address {addr:#x} is not inside an executable mapping of this object"
                ),
            ));
        }
        Ok(addr)
    }

    /// Absolute address in the target of a defined global/weak variable `symbol` (such as the C
    /// library's `__environ`). Not checked against the maps: a variable in `.bss` may lie in the
    /// anonymous mapping after the object's own.
    pub fn variable(&self, symbol: &str) -> Result<u64> {
        let value = self
            .image
            .variable(symbol)
            .map_err(|why| self.symbol_error(symbol, &why))?
            .ok_or_else(|| self.symbol_error(symbol, "no such exported variable"))?;
        Ok(self.bias.wrapping_add(value))
    }

    /// GNU Build ID of the object as read from the file, if it has one.
    pub fn build_id(&self) -> Option<Vec<u8>> {
        self.image.info.build_id(&self.image.src).ok().flatten()
    }

    fn symbol_error(&self, symbol: &str, why: &str) -> Error {
        Error::Symbol(format!(
            "cannot use function `{symbol}` of {} in process {}: {why}. The target's copy of this library \
             does not provide it; start the target with a rocprofiler-register that supports attaching \
             (ROCm 7.2 or newer)",
            self.path, self.pid
        ))
    }

    fn verify_build_id(&self) -> Result<()> {
        let mismatch = |why: String| unverified(self.pid, &self.path, &self.opened, &why);
        let file = self
            .image
            .info
            .build_id(&self.image.src)
            .map_err(&mismatch)?
            .ok_or_else(|| mismatch("the file has no GNU Build ID note".into()))?;
        let memory = self.memory_build_id().map_err(&mismatch)?;
        if memory != file {
            return Err(mismatch(format!(
                "Build ID in the file is {} but the target's memory has {}",
                hex(&file),
                hex(&memory)
            )));
        }
        Ok(())
    }

    /// Build ID read from the PT_NOTE segments in the target's memory.
    fn memory_build_id(&self) -> std::result::Result<Vec<u8>, String> {
        let mut found: Option<Vec<u8>> = None;
        for note in self.image.info.notes() {
            let addr = self.bias.wrapping_add(note.vaddr);
            let len = note.filesz;
            let readable = self.mappings.iter().any(|m| {
                m.read && m.contains(addr) && addr.checked_add(len).is_some_and(|e| e <= m.end)
            });
            if !readable {
                continue;
            }
            let bytes = read_remote(self.pid, addr, len as usize)?;
            merge_build_id(&mut found, gnu_build_ids(&bytes))?;
        }
        found.ok_or_else(|| "no GNU Build ID note is readable in the target's memory".to_string())
    }
}

/// The object read by path is not provably the mapped copy.
fn unverified(pid: i32, path: &str, opened: &Path, why: &str) -> Error {
    Error::Symbol(format!(
        "{path} in process {pid} could not be verified: {why}. The file on disk ({}) may be a different build \
         than the mapped copy (replaced after the target started). Fix: run rocprof-attach as root so \
         /proc/{pid}/map_files can be read, or restart the target",
        opened.display()
    ))
}

fn read_remote(pid: i32, addr: u64, len: usize) -> std::result::Result<Vec<u8>, String> {
    use nix::sys::uio::{process_vm_readv, RemoteIoVec};
    let mut buf = vec![0u8; len];
    let remote = [RemoteIoVec {
        base: addr as usize,
        len,
    }];
    let n = process_vm_readv(
        nix::unistd::Pid::from_raw(pid),
        &mut [std::io::IoSliceMut::new(&mut buf)],
        &remote,
    )
    .map_err(|e| format!("process_vm_readv at {addr:#x} failed: {e}"))?;
    if n != len {
        return Err(format!(
            "process_vm_readv at {addr:#x} returned {n} of {len} bytes"
        ));
    }
    Ok(buf)
}

/// GNU Build IDs found in a block of ELF notes (4-byte aligned, as in ELF64 PT_NOTE).
pub fn gnu_build_ids(mut notes: &[u8]) -> Vec<Vec<u8>> {
    let align = |n: usize| n.checked_add(3).map(|v| v & !3);
    let word =
        |b: &[u8], i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]) as usize;
    let mut out = Vec::new();
    while notes.len() >= 12 {
        let (namesz, descsz, ntype) = (word(notes, 0), word(notes, 4), word(notes, 8) as u32);
        let Some(name_end) = align(namesz).and_then(|n| n.checked_add(12)) else {
            break;
        };
        let Some(desc_end) = align(descsz).and_then(|d| d.checked_add(name_end)) else {
            break;
        };
        if desc_end > notes.len() {
            break;
        }
        let name = &notes[12..12 + namesz];
        let desc = &notes[name_end..name_end + descsz];
        if ntype == elf::NT_GNU_BUILD_ID
            && name == b"GNU\0"
            && !desc.is_empty()
            && desc.len() <= MAX_BUILD_ID
        {
            out.push(desc.to_vec());
        }
        notes = &notes[desc_end..];
    }
    out
}

fn merge_build_id(
    found: &mut Option<Vec<u8>>,
    ids: Vec<Vec<u8>>,
) -> std::result::Result<(), String> {
    for id in ids {
        match found {
            Some(prev) if *prev != id => {
                return Err("the object carries two different Build IDs".into())
            }
            Some(_) => {}
            None => *found = Some(id),
        }
    }
    Ok(())
}

fn open_source(path: &Path) -> Result<FileSource> {
    let file = std::fs::File::open(path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let size = file
        .metadata()
        .map_err(|e| Error::io(format!("stat {}", path.display()), e))?
        .len();
    Ok(FileSource::new(file, size))
}

/// GNU Build ID of an ELF file on disk (None when it has none or is not a 64-bit ELF).
pub fn build_id(path: &Path) -> Result<Option<Vec<u8>>> {
    let src = open_source(path)?;
    Ok(ElfInfo::read(&src)
        .and_then(|info| info.build_id(&src))
        .ok()
        .flatten())
}

/// Does the ELF file at `path` export a defined global/weak function `symbol`?
///
/// Non-ELF files and other-format objects give `Ok(false)`; only failing to open is an error.
/// Reads only what the lookup needs, so huge libraries (e.g. `libtorch_cpu.so`) are cheap to
/// check.
pub fn exports_symbol(path: &Path, symbol: &str) -> Result<bool> {
    let src = open_source(path)?;
    let found = locate::info_and_tags(&src)
        .and_then(|(info, tags)| symbols::find_function(&info, tags.as_ref(), &src, symbol));
    Ok(matches!(found, Ok(Some(_))))
}

/// `st_value` of the exported function `symbol` in an ELF object held in memory (tests and
/// fuzzing use the same lookup as for files).
pub fn exported_function(bytes: &[u8], symbol: &str) -> std::result::Result<Option<u64>, String> {
    let info = ElfInfo::read(bytes)?;
    let tags = symbols::dyn_tags(&info, bytes)?;
    symbols::find_function(&info, tags.as_ref(), bytes, symbol)
}

/// Load bias of an ELF object held in memory mapped at `mappings` (tests and fuzzing).
pub fn image_load_bias(bytes: &[u8], mappings: &[Mapping]) -> std::result::Result<u64, String> {
    load_bias(&ElfInfo::read(bytes)?.loads(), mappings)
}

/// The address of the function `symbol` of an object whose bytes are `bytes` and which is mapped
/// at `mappings`: what [`RemoteLibrary::locate`] and [`RemoteLibrary::symbol`] compute (header
/// checks, load bias, symbol lookup, the address inside an executable mapping), without a process.
/// `path` only names the object in errors. Used by tests and the fuzz targets.
pub fn symbol_address(bytes: &[u8], path: &str, mappings: &[Mapping], symbol: &str) -> Result<u64> {
    let fail =
        |why: String| Error::Symbol(format!("cannot use function `{symbol}` of {path}: {why}"));
    let info = ElfInfo::read(bytes).map_err(fail)?;
    info.check_shared_object().map_err(fail)?;
    let bias = load_bias(&info.loads(), mappings).map_err(fail)?;
    let tags = symbols::dyn_tags(&info, bytes).map_err(fail)?;
    let value = symbols::find_function(&info, tags.as_ref(), bytes, symbol)
        .map_err(fail)?
        .ok_or_else(|| fail("no such exported function".into()))?;
    let addr = bias.wrapping_add(value);
    if !mappings.iter().any(|m| m.exec && m.contains(addr)) {
        return Err(fail(format!(
            "its address {addr:#x} is not inside an executable mapping of this object"
        )));
    }
    Ok(addr)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
