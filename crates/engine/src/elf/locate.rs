//! Which mapped object is the library, where its bytes can be read from, and where it is loaded.

use super::file::{ElfInfo, FileSource, Load};
use super::symbols::{self, DynTags};
use crate::error::{Error, Result};
use crate::procfs::{self, Mapping};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Largest library file we accept.
pub const MAX_OBJECT_SIZE: u64 = 512 << 20;

/// An object file opened for lookups: its header and program headers are read, the rest is read
/// on demand. Symbols found once are remembered.
#[derive(Debug)]
pub struct Image {
    pub(super) src: FileSource,
    pub(super) info: ElfInfo,
    tags: Option<DynTags>,
    found: Mutex<HashMap<String, Option<u64>>>,
}

impl Image {
    fn open(file: std::fs::File, meta: &std::fs::Metadata, path: &Path) -> Result<Image> {
        if !meta.is_file() || meta.len() == 0 || meta.len() > MAX_OBJECT_SIZE {
            return Err(Error::Symbol(format!(
                "{} is not a usable shared library (regular file, 1 byte to 512 MiB; it has {} bytes)",
                path.display(),
                meta.len()
            )));
        }
        let src = FileSource::new(file, meta.len());
        let bad = |why: String| {
            Error::Symbol(format!(
                "{} is not a usable shared library: {why}",
                path.display()
            ))
        };
        let info = ElfInfo::read(&src).map_err(bad)?;
        info.check_shared_object().map_err(bad)?;
        let tags = symbols::dyn_tags(&info, &src).ok().flatten();
        Ok(Image {
            src,
            info,
            tags,
            found: Mutex::new(HashMap::new()),
        })
    }

    /// `st_value` of the exported variable `symbol` (None when the object has none); not cached.
    pub fn variable(&self, symbol: &str) -> std::result::Result<Option<u64>, String> {
        symbols::find_symbol(
            &self.info,
            self.tags.as_ref(),
            &self.src,
            symbol,
            object::elf::STT_OBJECT,
        )
    }

    /// `st_value` of the exported function `symbol` (None when the object has none).
    pub fn function(&self, symbol: &str) -> std::result::Result<Option<u64>, String> {
        if let Some(hit) = self.found.lock().ok().and_then(|m| m.get(symbol).copied()) {
            return Ok(hit);
        }
        let value = symbols::find_function(&self.info, self.tags.as_ref(), &self.src, symbol)?;
        if let Ok(mut m) = self.found.lock() {
            m.insert(symbol.to_string(), value);
        }
        Ok(value)
    }
}

/// True when a maps path names the library `name` (docs/protocol.md section 5.8, step 2).
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

pub(super) fn describe(m: &Mapping) -> String {
    format!(
        "{}{} (dev {:x}:{:x}, inode {})",
        m.path.as_deref().unwrap_or("?"),
        if m.deleted { " (deleted)" } else { "" },
        m.dev_major,
        m.dev_minor,
        m.inode
    )
}

pub(super) fn pick_one(
    pid: i32,
    name: &str,
    mut groups: Vec<Vec<Mapping>>,
) -> Result<Vec<Mapping>> {
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

/// Open the object: map_files first (accepted when dev/inode match), else the path in the target
/// root. Returns (image, path opened, opened file is the mapped inode).
pub(super) fn open_object(
    pid: i32,
    m: &Mapping,
    try_map_files: bool,
) -> Result<(Arc<Image>, PathBuf, bool)> {
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
    if same_file(&meta, m) {
        return Ok((cached_image(file, &meta, &in_root)?, in_root, true));
    }
    Ok((
        Arc::new(Image::open(file, &meta, &in_root)?),
        in_root,
        false,
    ))
}

/// Identity of a file's content for the image cache: device, inode, size, modification time.
type ImageKey = (u64, u64, u64, i64, i64);

/// Images of objects that are exactly the mapped inode, shared by every lookup of this process
/// (all ranks of a job map the same librocprofiler-register, and attach, detach and preflight
/// all look it up): opened, parsed and searched once, keyed by file identity and modification
/// time.
fn cached_image(file: std::fs::File, meta: &std::fs::Metadata, path: &Path) -> Result<Arc<Image>> {
    static CACHE: Mutex<Option<HashMap<ImageKey, Arc<Image>>>> = Mutex::new(None);
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
    let image = Arc::new(Image::open(file, meta, path)?);
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

fn page_size() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .map(|p| p as u64)
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096)
}

/// Cap on the file-backed PT_LOAD segments of an object (real shared libraries have 2 to 5).
pub const MAX_LOADS: usize = 64;

/// Load bias per docs/protocol.md section 5.8, step 6: exactly one candidate consistent with
/// every file-backed PT_LOAD.
///
/// Every consistent bias places the first PT_LOAD on a mapping of its page offset, so only those
/// mappings are candidates, each checked against a set of the mappings: linear in the number of
/// mappings times the number of segments (at most [`MAX_LOADS`]; found by fuzzing, the search
/// used to be O(n^4)).
pub fn load_bias(loads: &[Load], mappings: &[Mapping]) -> std::result::Result<u64, String> {
    let page = page_size();
    let down = |x: u64| x & !(page - 1);
    if loads.len() > MAX_LOADS {
        return Err(format!(
            "{} PT_LOAD segments, more than the {MAX_LOADS} any real shared library has",
            loads.len()
        ));
    }
    let Some(first) = loads.first() else {
        return Err("no PT_LOAD segment".into());
    };
    let placed: std::collections::HashSet<(u64, u64)> =
        mappings.iter().map(|m| (m.start, m.offset)).collect();
    let consistent = |bias: u64| {
        loads
            .iter()
            .all(|l| placed.contains(&(bias.wrapping_add(down(l.vaddr)), down(l.offset))))
    };
    let found: std::collections::BTreeSet<u64> = mappings
        .iter()
        .filter(|m| m.offset == down(first.offset))
        .map(|m| m.start.wrapping_sub(down(first.vaddr)))
        .filter(|&bias| consistent(bias))
        .collect();
    match found.len() {
        1 => Ok(*found.first().expect("one element")),
        0 => Err("no load address is consistent with every PT_LOAD segment".into()),
        many => Err(format!("{many} load addresses are possible")),
    }
}

/// The ELF info of an object without a usable hash table or dynamic section still answers
/// lookups (through the section headers); exposed for [`super::exports_symbol`].
pub(super) fn info_and_tags(
    src: &FileSource,
) -> std::result::Result<(ElfInfo, Option<DynTags>), String> {
    let info = ElfInfo::read(src)?;
    let tags = symbols::dyn_tags(&info, src)?;
    Ok((info, tags))
}
