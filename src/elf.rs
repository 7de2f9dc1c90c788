//! Finding a function in the target's copy of a shared library (section 5.8 of the protocol).
//!
//! Nothing here uses ptrace: the object is found in `/proc/PID/maps`, read through
//! `/proc/PID/map_files` (or the path inside the target's root, verified by GNU Build ID against
//! the target's memory), and its dynamic symbol table is searched.

use crate::error::{Error, Result};
use crate::procfs::{self, Mapping};
use object::elf;
use object::read::elf::{Dyn as _, FileHeader, ProgramHeader as _, Sym as _};
use object::read::{ReadCache, ReadRef, StringTable};
use object::LittleEndian;
use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

type Header = elf::FileHeader64<LittleEndian>;
type Sym64 = elf::Sym64<LittleEndian>;
const LE: LittleEndian = LittleEndian;

/// Largest library file we read into memory.
pub const MAX_OBJECT_SIZE: u64 = 512 << 20;
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
    image: Arc<Vec<u8>>,
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
            .field("image_len", &self.image.len())
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
        let group = pick_one(pid, name, candidate_objects(maps, name))?;
        let first = &group[0];
        let path = first.path.clone().unwrap_or_default();
        let (image, opened, same_file) = open_object(pid, first, map_files)?;
        check_header(&image, &path)?;
        let bias = load_bias(&image, &group).map_err(|why| {
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
        let value = find_function(self.image.as_slice(), symbol)
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

    /// GNU Build ID of the object as read from the file, if it has one.
    pub fn build_id(&self) -> Option<Vec<u8>> {
        file_build_id(self.image.as_slice()).ok().flatten()
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
        let file = file_build_id(self.image.as_slice())
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
        let data = self.image.as_slice();
        let mut found: Option<Vec<u8>> = None;
        for ph in program_headers(data)? {
            if ph.p_type(LE) != elf::PT_NOTE || ph.p_filesz(LE) > MAX_NOTE_SEGMENT {
                continue;
            }
            let addr = self.bias.wrapping_add(ph.p_vaddr(LE));
            let len = ph.p_filesz(LE);
            let readable = self
                .mappings
                .iter()
                .any(|m| m.read && m.contains(addr) && addr + len <= m.end);
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

/// True when a maps path names the library `name` (protocol 5.8 step 2).
///
/// Matches an equal path, an equal basename, or a basename starting with "`<basename>.`" (versioned
/// sonames). If `name` contains '/', the full path must also be equal.
pub fn library_matches(map_path: &str, name: &str) -> bool {
    let path = map_path.strip_suffix(" (deleted)").unwrap_or(map_path);
    if name.contains('/') {
        return path == name;
    }
    let base = basename(path);
    let want = basename(name);
    path == name
        || base == want
        || base
            .strip_prefix(want)
            .is_some_and(|rest| rest.starts_with('.'))
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// File-backed mappings matching `name`, grouped by (dev, inode) in order of first appearance.
pub fn candidate_objects(maps: &[Mapping], name: &str) -> Vec<Vec<Mapping>> {
    let mut groups: Vec<Vec<Mapping>> = Vec::new();
    for m in maps.iter().filter(|m| m.inode != 0) {
        let Some(path) = m.path.as_deref() else {
            continue;
        };
        if !library_matches(path, name) {
            continue;
        }
        match groups.iter_mut().find(|g| g[0].file_id() == m.file_id()) {
            Some(g) => g.push(m.clone()),
            None => groups.push(vec![m.clone()]),
        }
    }
    groups
}

fn describe(m: &Mapping) -> String {
    format!(
        "{}{} (dev {:x}:{:x}, inode {})",
        m.path.as_deref().unwrap_or("?"),
        if m.deleted { " (deleted)" } else { "" },
        m.dev_major,
        m.dev_minor,
        m.inode
    )
}

fn pick_one(pid: i32, name: &str, mut groups: Vec<Vec<Mapping>>) -> Result<Vec<Mapping>> {
    match groups.len() {
        1 => Ok(groups.remove(0)),
        0 => Err(Error::Symbol(format!(
            "process {pid} has no {name} mapped: it is not using ROCm's rocprofiler-register (yet). \
             Attach after the target initialized a ROCm runtime (HIP/HSA), and check `grep {name} \
             /proc/{pid}/maps`"
        ))),
        _ => {
            let list: Vec<String> = groups.iter().map(|g| describe(&g[0])).collect();
            Err(Error::Symbol(format!(
                "process {pid} maps {} different copies of {name}: {}; refusing to choose one implicitly. \
                 Make the target load a single ROCm installation (check LD_LIBRARY_PATH and RPATHs)",
                groups.len(),
                list.join("; ")
            )))
        }
    }
}

/// Split a Linux `st_dev` into (major, minor) like glibc's `major()`/`minor()`.
pub fn dev_major_minor(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}

fn same_file(meta: &std::fs::Metadata, m: &Mapping) -> bool {
    let (major, minor) = dev_major_minor(meta.dev());
    (major, minor, meta.ino()) == m.file_id()
}

/// Read the object: map_files first (accepted when dev/inode match), else the path in the target root.
/// Returns (bytes, path opened, opened file is the mapped inode).
fn open_object(
    pid: i32,
    m: &Mapping,
    try_map_files: bool,
) -> Result<(Arc<Vec<u8>>, PathBuf, bool)> {
    let map_file = procfs::proc_dir(pid).join(format!("map_files/{:x}-{:x}", m.start, m.end));
    if let Some(file) = try_map_files
        .then(|| std::fs::File::open(&map_file).ok())
        .flatten()
    {
        if let Some(meta) = file.metadata().ok().filter(|meta| same_file(meta, m)) {
            return Ok((cached_image(file, &meta, &map_file)?, map_file, true));
        }
    }
    let path = m.path.as_deref().unwrap_or_default();
    let in_root = procfs::in_root(pid, Path::new(path));
    let file = std::fs::File::open(&in_root).map_err(|e| open_error(pid, m, &in_root, e))?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io(format!("stat {}", in_root.display()), e))?;
    let same = same_file(&meta, m);
    if same {
        return Ok((cached_image(file, &meta, &in_root)?, in_root, true));
    }
    Ok((Arc::new(read_limited(file, &in_root)?), in_root, false))
}

/// Identity of a file's content for the image cache: device, inode, size, modification time.
type ImageKey = (u64, u64, u64, i64, i64);

/// Images of objects that are exactly the mapped inode, shared by every lookup of this process
/// (all ranks of a job map the same librocprofiler-register, and attach, detach and preflight
/// all look it up): read and keep once, keyed by file identity and modification time.
fn cached_image(
    file: std::fs::File,
    meta: &std::fs::Metadata,
    path: &Path,
) -> Result<Arc<Vec<u8>>> {
    static CACHE: Mutex<Option<HashMap<ImageKey, Arc<Vec<u8>>>>> = Mutex::new(None);
    let key = (
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
    );
    if let Some(hit) = CACHE
        .lock()
        .ok()
        .and_then(|c| c.as_ref().and_then(|m| m.get(&key).cloned()))
    {
        return Ok(hit);
    }
    let image = Arc::new(read_limited(file, path)?);
    if let Ok(mut c) = CACHE.lock() {
        let map = c.get_or_insert_with(HashMap::new);
        if map.len() >= 16 {
            map.clear();
        }
        map.insert(key, image.clone());
    }
    Ok(image)
}

fn open_error(pid: i32, m: &Mapping, tried: &Path, e: std::io::Error) -> Error {
    if !procfs::proc_dir(pid).exists() {
        return Error::ProcessGone { pid };
    }
    Error::Symbol(format!(
        "cannot read {} mapped by process {pid}: /proc/{pid}/map_files is not usable and {} failed ({e}){}. \
         Fix: run rocprof-attach as root (map_files needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE)",
        describe(m),
        tried.display(),
        if m.deleted { "; the file was deleted after the target loaded it" } else { "" }
    ))
}

fn read_limited(file: std::fs::File, path: &Path) -> Result<Vec<u8>> {
    let meta = file
        .metadata()
        .map_err(|e| Error::io(format!("stat {}", path.display()), e))?;
    if !meta.is_file() || meta.len() == 0 || meta.len() > MAX_OBJECT_SIZE {
        return Err(Error::Symbol(format!(
            "{} is not a usable shared library (regular file, 1 byte to 512 MiB; it has {} bytes)",
            path.display(),
            meta.len()
        )));
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_OBJECT_SIZE + 1)
        .read_to_end(&mut buf)
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    Ok(buf)
}

fn check_header(data: &[u8], path: &str) -> Result<()> {
    let bad = |why: &str| Error::Symbol(format!("{path} is not a usable shared library: {why}"));
    let header = Header::parse(data).map_err(|_| bad("not a 64-bit ELF file"))?;
    if header.e_ident().data != elf::ELFDATA2LSB {
        return Err(bad("not little-endian"));
    }
    if header.e_machine(LE) != EXPECTED_MACHINE {
        return Err(bad(&format!(
            "machine {} is not this CPU architecture",
            header.e_machine(LE)
        )));
    }
    if header.e_type(LE) != elf::ET_DYN {
        return Err(bad("not a shared object (ET_DYN)"));
    }
    if file_loads(data).map_err(|e| bad(&e))?.is_empty() {
        return Err(bad("no PT_LOAD segment"));
    }
    Ok(())
}

fn program_headers<'data, R: ReadRef<'data>>(
    data: R,
) -> std::result::Result<&'data [elf::ProgramHeader64<LittleEndian>], String> {
    let header = Header::parse(data).map_err(|e| e.to_string())?;
    header.program_headers(LE, data).map_err(|e| e.to_string())
}

/// (p_vaddr, p_offset, p_filesz) of file-backed PT_LOAD segments.
fn file_loads<'data, R: ReadRef<'data>>(
    data: R,
) -> std::result::Result<Vec<(u64, u64, u64)>, String> {
    Ok(program_headers(data)?
        .iter()
        .filter(|ph| ph.p_type(LE) == elf::PT_LOAD && ph.p_filesz(LE) > 0)
        .map(|ph| (ph.p_vaddr(LE), ph.p_offset(LE), ph.p_filesz(LE)))
        .collect())
}

fn page_size() -> u64 {
    const AT_PAGESZ: u64 = 6;
    procfs::auxv(std::process::id() as i32)
        .ok()
        .and_then(|a| a.into_iter().find(|&(t, _)| t == AT_PAGESZ).map(|(_, v)| v))
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096)
}

/// Load bias per protocol 5.8 step 6: exactly one candidate consistent with every file-backed PT_LOAD.
pub fn load_bias(data: &[u8], mappings: &[Mapping]) -> std::result::Result<u64, String> {
    let page = page_size();
    let down = |x: u64| x & !(page - 1);
    let loads = file_loads(data)?;
    let consistent = |bias: u64| {
        loads.iter().all(|&(vaddr, off, _)| {
            mappings
                .iter()
                .any(|m| m.start == bias.wrapping_add(down(vaddr)) && m.offset == down(off))
        })
    };
    let mut found: Vec<u64> = Vec::new();
    for m in mappings {
        for &(vaddr, off, _) in &loads {
            let bias = m.start.wrapping_sub(down(vaddr));
            if down(off) == m.offset && !found.contains(&bias) && consistent(bias) {
                found.push(bias);
            }
        }
    }
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err("no load address is consistent with every PT_LOAD segment".into()),
        many => Err(format!("{} load addresses are possible", many.len())),
    }
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

fn file_build_id<'data, R: ReadRef<'data>>(
    data: R,
) -> std::result::Result<Option<Vec<u8>>, String> {
    let mut found = None;
    for ph in program_headers(data)? {
        if ph.p_type(LE) != elf::PT_NOTE || ph.p_filesz(LE) > MAX_NOTE_SEGMENT {
            continue;
        }
        let Ok(bytes) = data.read_bytes_at(ph.p_offset(LE), ph.p_filesz(LE)) else {
            continue;
        };
        merge_build_id(&mut found, gnu_build_ids(bytes))?;
    }
    Ok(found)
}

/// GNU Build ID of an ELF file on disk (None when it has none or is not a 64-bit ELF).
pub fn build_id(path: &Path) -> Result<Option<Vec<u8>>> {
    let file = std::fs::File::open(path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let cache = ReadCache::new(file);
    Ok(file_build_id(&cache).ok().flatten())
}

/// Does the ELF file at `path` export a defined global/weak function `symbol`?
///
/// Non-ELF files and other-format objects give `Ok(false)`; only failing to open is an error.
/// Reads lazily, so huge libraries (e.g. `libtorch_cpu.so`) are cheap to check.
pub fn exports_symbol(path: &Path, symbol: &str) -> Result<bool> {
    let file = std::fs::File::open(path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let cache = ReadCache::new(file);
    Ok(matches!(find_function(&cache, symbol), Ok(Some(_))))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Accept only defined STT_FUNC with STB_GLOBAL/STB_WEAK and default/protected visibility.
fn acceptable(sym: &Sym64) -> bool {
    let shndx = sym.st_shndx(LE);
    sym.st_type() == elf::STT_FUNC
        && matches!(sym.st_bind(), elf::STB_GLOBAL | elf::STB_WEAK)
        && shndx != elf::SHN_UNDEF
        && shndx != elf::SHN_ABS
        && matches!(sym.st_visibility(), elf::STV_DEFAULT | elf::STV_PROTECTED)
}

/// st_value of an acceptable function `symbol`: `.dynsym` first, else the PT_DYNAMIC tables.
fn find_function<'data, R: ReadRef<'data>>(
    data: R,
    symbol: &str,
) -> std::result::Result<Option<u64>, String> {
    let header = Header::parse(data).map_err(|e| e.to_string())?;
    if header.e_ident().data != elf::ELFDATA2LSB {
        return Err("not a little-endian ELF file".into());
    }
    let from_sections = header
        .sections(LE, data)
        .and_then(|s| s.symbols(LE, data, elf::SHT_DYNSYM))
        .ok()
        .filter(|t| !t.is_empty());
    if let Some(table) = from_sections {
        if table.len() as u64 > MAX_SYMBOLS {
            return Err("the dynamic symbol table is larger than 2^24 entries".into());
        }
        let strings = table.strings();
        return Ok(search(
            table.symbols(),
            |s| strings.get(s.st_name(LE)).ok(),
            symbol,
        ));
    }
    let (syms, strings) = dynamic_tables(data)?;
    Ok(search(syms, |s| strings.get(s.st_name(LE)).ok(), symbol))
}

fn search<'a>(
    syms: &[Sym64],
    name_of: impl Fn(&Sym64) -> Option<&'a [u8]>,
    symbol: &str,
) -> Option<u64> {
    syms.iter()
        .find(|s| acceptable(s) && name_of(s) == Some(symbol.as_bytes()))
        .map(|s| s.st_value(LE))
}

/// Values of the dynamic tags we need.
#[derive(Default)]
struct DynTags {
    symtab: Option<u64>,
    strtab: Option<u64>,
    strsz: Option<u64>,
    syment: Option<u64>,
    hash: Option<u64>,
    gnu_hash: Option<u64>,
}

fn dyn_tags<'data, R: ReadRef<'data>>(data: R) -> std::result::Result<DynTags, String> {
    let dynamic = program_headers(data)?
        .iter()
        .find(|ph| ph.p_type(LE) == elf::PT_DYNAMIC)
        .ok_or("no .dynsym section and no PT_DYNAMIC segment")?
        .dynamic(LE, data)
        .map_err(|e| e.to_string())?
        .ok_or("empty PT_DYNAMIC segment")?;
    let mut t = DynTags::default();
    for d in dynamic {
        let value = Some(d.d_val(LE));
        match d.tag32(LE) {
            Some(elf::DT_NULL) => break,
            Some(elf::DT_SYMTAB) => t.symtab = value,
            Some(elf::DT_STRTAB) => t.strtab = value,
            Some(elf::DT_STRSZ) => t.strsz = value,
            Some(elf::DT_SYMENT) => t.syment = value,
            Some(elf::DT_HASH) => t.hash = value,
            Some(elf::DT_GNU_HASH) => t.gnu_hash = value,
            _ => {}
        }
    }
    Ok(t)
}

/// File offset of a virtual address inside a file-backed PT_LOAD.
fn vaddr_to_offset(loads: &[(u64, u64, u64)], vaddr: u64) -> std::result::Result<u64, String> {
    loads
        .iter()
        .find(|&&(v, _, size)| vaddr >= v && vaddr - v < size)
        .map(|&(v, off, _)| off + (vaddr - v))
        .ok_or_else(|| format!("dynamic table address {vaddr:#x} is outside every PT_LOAD"))
}

fn dynamic_tables<'data, R: ReadRef<'data>>(
    data: R,
) -> std::result::Result<(&'data [Sym64], StringTable<'data, R>), String> {
    let tags = dyn_tags(data)?;
    let loads = file_loads(data)?;
    let (Some(symtab), Some(strtab), Some(strsz)) = (tags.symtab, tags.strtab, tags.strsz) else {
        return Err("PT_DYNAMIC lacks DT_SYMTAB, DT_STRTAB or DT_STRSZ".into());
    };
    if tags
        .syment
        .is_some_and(|s| s != std::mem::size_of::<Sym64>() as u64)
    {
        return Err("unexpected DT_SYMENT".into());
    }
    let count = symbol_count(data, &loads, &tags)?;
    let sym_off = vaddr_to_offset(&loads, symtab)?;
    let str_off = vaddr_to_offset(&loads, strtab)?;
    let syms = data
        .read_slice_at::<Sym64>(sym_off, count as usize)
        .map_err(|_| "dynamic symbol table is truncated".to_string())?;
    Ok((
        syms,
        StringTable::new(data, str_off, str_off.saturating_add(strsz)),
    ))
}

fn read_u32<'data, R: ReadRef<'data>>(data: R, off: u64) -> std::result::Result<u32, String> {
    data.read_at::<object::U32<LittleEndian>>(off)
        .map(|v| v.get(LE))
        .map_err(|_| format!("hash table is truncated at offset {off:#x}"))
}

/// Number of dynamic symbols from DT_HASH (nchain) or a DT_GNU_HASH chain walk, capped at 2^24.
fn symbol_count<'data, R: ReadRef<'data>>(
    data: R,
    loads: &[(u64, u64, u64)],
    tags: &DynTags,
) -> std::result::Result<u64, String> {
    let count = if let Some(hash) = tags.hash {
        u64::from(read_u32(data, vaddr_to_offset(loads, hash)? + 4)?)
    } else if let Some(gnu) = tags.gnu_hash {
        gnu_hash_count(data, vaddr_to_offset(loads, gnu)?)?
    } else {
        return Err("PT_DYNAMIC has neither DT_HASH nor DT_GNU_HASH".into());
    };
    if count > MAX_SYMBOLS {
        return Err("the dynamic symbol table is larger than 2^24 entries".into());
    }
    Ok(count)
}

fn gnu_hash_count<'data, R: ReadRef<'data>>(data: R, off: u64) -> std::result::Result<u64, String> {
    let nbuckets = u64::from(read_u32(data, off)?);
    let symoffset = u64::from(read_u32(data, off + 4)?);
    let bloom_size = u64::from(read_u32(data, off + 8)?);
    if nbuckets > MAX_SYMBOLS || bloom_size > MAX_SYMBOLS {
        return Err("DT_GNU_HASH header is implausible".into());
    }
    let buckets = off + 16 + bloom_size * 8;
    let chains = buckets + nbuckets * 4;
    let mut count = symoffset;
    let mut steps = 0u64;
    for b in 0..nbuckets {
        let mut index = u64::from(read_u32(data, buckets + b * 4)?);
        if index < symoffset {
            continue;
        }
        loop {
            steps += 1;
            if steps > MAX_SYMBOLS {
                return Err("DT_GNU_HASH chains exceed 2^24 steps".into());
            }
            let value = read_u32(data, chains + (index - symoffset) * 4)?;
            if value & 1 == 1 {
                break;
            }
            index += 1;
        }
        count = count.max(index + 1);
    }
    Ok(count)
}
