//! An ELF file read in parts: the header, the program headers and, on demand, the few ranges a
//! lookup needs (dynamic section, hash table entries, a handful of symbols and names, notes).
//!
//! Nothing here reads a whole library: a symbol lookup in a 4 MB `librocprofiler-register` reads
//! well under 16 KiB, in a few `pread`s, whatever the size of the file.

use super::{EXPECTED_MACHINE, LE, MAX_NOTE_SEGMENT};
use object::elf;
use object::read::elf::{FileHeader as _, ProgramHeader as _};
use std::borrow::Cow;
use std::os::unix::fs::FileExt;

type Header = elf::FileHeader64<object::LittleEndian>;
type Phdr = elf::ProgramHeader64<object::LittleEndian>;

/// Largest single range we read from an object (a dynamic section, a note segment, a symbol
/// table in the section-header fallback).
pub const MAX_READ: u64 = 64 << 20;
/// Cap on the number of program headers.
const MAX_PHDRS: u64 = 4096;

/// Where ELF bytes come from: a file read with `pread`, or bytes already in memory (tests and
/// fuzzing).
pub trait Source {
    /// Size of the object in bytes.
    fn size(&self) -> u64;
    /// Exactly `len` bytes at `offset`; an error (a sentence) when they are not all there.
    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>, String>;
}

impl Source for [u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>, String> {
        let end = offset.checked_add(len).filter(|&e| e <= self.len() as u64);
        match end {
            Some(end) => Ok(Cow::Borrowed(&self[offset as usize..end as usize])),
            None => Err(truncated(offset, len)),
        }
    }
}

/// A file read in parts with `pread`.
#[derive(Debug)]
pub struct FileSource {
    file: std::fs::File,
    size: u64,
}

impl FileSource {
    /// Wrap an open file of `size` bytes.
    pub fn new(file: std::fs::File, size: u64) -> Self {
        FileSource { file, size }
    }
}

impl Source for FileSource {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>, String> {
        if len > MAX_READ || offset.checked_add(len).is_none_or(|e| e > self.size) {
            return Err(truncated(offset, len));
        }
        let mut buf = vec![0u8; len as usize];
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(|e| format!("reading {len} bytes at offset {offset:#x} failed: {e}"))?;
        Ok(Cow::Owned(buf))
    }
}

fn truncated(offset: u64, len: u64) -> String {
    format!("the file is truncated ({len} bytes at offset {offset:#x} are outside it)")
}

/// Copy into an owned, allocator-aligned buffer, so `object`'s aligned types can view it.
fn aligned(bytes: Cow<'_, [u8]>) -> Vec<u8> {
    bytes.into_owned()
}

/// One file-backed `PT_LOAD` segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    /// Virtual address.
    pub vaddr: u64,
    /// File offset.
    pub offset: u64,
    /// Bytes in the file.
    pub filesz: u64,
}

/// One program header, the fields we use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// `p_type`.
    pub kind: u32,
    /// File offset.
    pub offset: u64,
    /// Virtual address.
    pub vaddr: u64,
    /// Bytes in the file.
    pub filesz: u64,
}

/// The parts of a 64-bit little-endian ELF object every lookup needs.
#[derive(Debug, Clone)]
pub struct ElfInfo {
    /// `e_type`.
    pub kind: u16,
    /// `e_machine`.
    pub machine: u16,
    /// Section header table offset and count (for the fallback lookup).
    pub sections: (u64, u16),
    /// All program headers.
    pub segments: Vec<Segment>,
}

impl ElfInfo {
    /// Read the ELF header and the program headers (two small reads).
    pub fn read(src: &(impl Source + ?Sized)) -> Result<ElfInfo, String> {
        let size = std::mem::size_of::<Header>() as u64;
        let head = aligned(
            src.read_at(0, size)
                .map_err(|_| "not a 64-bit ELF file".to_string())?,
        );
        let header = Header::parse(head.as_slice()).map_err(|_| "not a 64-bit ELF file")?;
        if header.e_ident().data != elf::ELFDATA2LSB {
            return Err("not a little-endian ELF file".into());
        }
        let count = u64::from(header.e_phnum(LE));
        let entsize = u64::from(header.e_phentsize(LE));
        if count > MAX_PHDRS || (count > 0 && entsize != std::mem::size_of::<Phdr>() as u64) {
            return Err("implausible program header table".into());
        }
        let table = aligned(src.read_at(header.e_phoff(LE), count * entsize)?);
        let (phdrs, _) = object::pod::slice_from_bytes::<Phdr>(&table, count as usize)
            .map_err(|_| "truncated program header table".to_string())?;
        let segments = phdrs
            .iter()
            .map(|ph| Segment {
                kind: ph.p_type(LE),
                offset: ph.p_offset(LE),
                vaddr: ph.p_vaddr(LE),
                filesz: ph.p_filesz(LE),
            })
            .collect();
        Ok(ElfInfo {
            kind: header.e_type(LE),
            machine: header.e_machine(LE),
            sections: (header.e_shoff(LE), header.e_shnum(LE)),
            segments,
        })
    }

    /// File-backed `PT_LOAD` segments.
    pub fn loads(&self) -> Vec<Load> {
        self.segments
            .iter()
            .filter(|s| s.kind == elf::PT_LOAD && s.filesz > 0)
            .map(|s| Load {
                vaddr: s.vaddr,
                offset: s.offset,
                filesz: s.filesz,
            })
            .collect()
    }

    /// Why this is not a shared object we can inject into on this CPU, if it is not.
    pub fn check_shared_object(&self) -> Result<(), String> {
        if self.machine != EXPECTED_MACHINE {
            return Err(format!(
                "machine {} is not this CPU architecture",
                self.machine
            ));
        }
        if self.kind != elf::ET_DYN {
            return Err("not a shared object (ET_DYN)".into());
        }
        if self.loads().is_empty() {
            return Err("no PT_LOAD segment".into());
        }
        Ok(())
    }

    /// File offset of a virtual address inside a file-backed `PT_LOAD`.
    pub fn offset_of(&self, vaddr: u64) -> Result<u64, String> {
        let load = self
            .loads()
            .into_iter()
            .find(|l| vaddr >= l.vaddr && vaddr - l.vaddr < l.filesz)
            .ok_or_else(|| format!("dynamic table address {vaddr:#x} is outside every PT_LOAD"))?;
        load.offset
            .checked_add(vaddr - load.vaddr)
            .ok_or_else(|| format!("the table at {vaddr:#x} lies past the end of any file"))
    }

    /// `PT_NOTE` segments small enough to parse.
    pub fn notes(&self) -> impl Iterator<Item = &Segment> {
        self.segments
            .iter()
            .filter(|s| s.kind == elf::PT_NOTE && s.filesz <= MAX_NOTE_SEGMENT)
    }

    /// GNU Build ID from the file's `PT_NOTE` segments (None when it has none).
    pub fn build_id(&self, src: &(impl Source + ?Sized)) -> Result<Option<Vec<u8>>, String> {
        let mut found = None;
        for note in self.notes() {
            let Ok(bytes) = src.read_at(note.offset, note.filesz) else {
                continue;
            };
            super::merge_build_id(&mut found, super::gnu_build_ids(&bytes))?;
        }
        Ok(found)
    }
}

/// The CPU architecture name of an ELF `e_machine` value, for messages.
fn machine_name(m: u16) -> String {
    match m {
        elf::EM_X86_64 => "x86-64".into(),
        elf::EM_AARCH64 => "AArch64".into(),
        elf::EM_386 => "i386".into(),
        elf::EM_PPC64 => "ppc64".into(),
        elf::EM_RISCV => "RISC-V".into(),
        other => format!("machine {other}"),
    }
}

/// Check that the file at `path` (a host path, e.g. through `/proc/PID/root`) is an ELF shared
/// object that the target's loader can load on this architecture: 64-bit, little-endian,
/// `ET_DYN`, our machine. Reads only the ELF header. `Err(what it is instead)` otherwise;
/// `Ok(false)` when it cannot be read (the caller decides whether that matters).
pub fn is_loadable_shared_object(path: &std::path::Path) -> Result<bool, String> {
    use std::io::Read;
    let Ok(file) = std::fs::File::open(path) else {
        return Ok(false);
    };
    let mut data = Vec::with_capacity(64);
    if file.take(64).read_to_end(&mut data).is_err() {
        return Ok(false);
    }
    match object::FileKind::parse(&*data) {
        Ok(object::FileKind::Elf64) => {}
        Ok(object::FileKind::Elf32) => {
            return Err("a 32-bit ELF file (the target is a 64-bit process)".into())
        }
        Ok(_) => return Err("not an ELF file".into()),
        Err(_) if data.is_empty() => return Err("an empty file, not an ELF shared object".into()),
        Err(_) if data.iter().take(32).all(|b| b.is_ascii()) => {
            return Err("a text file, not an ELF shared object".into())
        }
        Err(_) => return Err("not an ELF file".into()),
    }
    let header =
        Header::parse(&*data).map_err(|_| "a big-endian or damaged ELF file".to_string())?;
    let machine = header.e_machine(LE);
    if machine != EXPECTED_MACHINE {
        return Err(format!(
            "built for {}, but the target runs on {}",
            machine_name(machine),
            machine_name(EXPECTED_MACHINE)
        ));
    }
    match header.e_type(LE) {
        elf::ET_DYN => Ok(true),
        elf::ET_EXEC => Err("an executable program, not a shared library".into()),
        elf::ET_REL => Err("an object file (.o), not a linked shared library".into()),
        elf::ET_CORE => Err("a core dump, not a shared library".into()),
        t => Err(format!("an ELF file of type {t}, not a shared library")),
    }
}
