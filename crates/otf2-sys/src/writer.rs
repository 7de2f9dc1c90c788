//! The writer: declarations of the OTF2 calls used and their safe wrappers (see the crate docs).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;

mod sys {
    use std::ffi::{c_char, c_int, c_void};

    pub enum Archive {}
    pub enum EvtWriter {}
    pub enum GlobalDefWriter {}
    pub enum DefWriter {}
    pub enum AttributeList {}

    #[repr(C)]
    pub struct FlushCallbacks {
        pub pre_flush: extern "C" fn(*mut c_void, u8, u64, *mut c_void, bool) -> u8,
        /// None: no BUFFER_FLUSH record is written after a flush.
        pub post_flush: Option<extern "C" fn(*mut c_void, u8, u64) -> u64>,
    }

    #[repr(C)]
    pub struct MemoryCallbacks {
        pub allocate: extern "C" fn(*mut c_void, u8, u64, *mut *mut c_void, u64) -> *mut c_void,
        pub free_all: extern "C" fn(*mut c_void, u8, u64, *mut *mut c_void, bool),
    }

    // Linked by build.rs (`cargo:rustc-link-lib`, the name the probe found).
    extern "C" {
        pub fn OTF2_Archive_Open(
            path: *const c_char,
            name: *const c_char,
            mode: u8,
            chunk_events: u64,
            chunk_defs: u64,
            substrate: u8,
            compression: u8,
        ) -> *mut Archive;
        pub fn OTF2_Archive_Close(a: *mut Archive) -> c_int;
        pub fn OTF2_Archive_SetFlushCallbacks(
            a: *mut Archive,
            cb: *const FlushCallbacks,
            data: *mut c_void,
        ) -> c_int;
        pub fn OTF2_Archive_SetMemoryCallbacks(
            a: *mut Archive,
            cb: *const MemoryCallbacks,
            data: *mut c_void,
        ) -> c_int;
        pub fn OTF2_Archive_SetSerialCollectiveCallbacks(a: *mut Archive) -> c_int;
        pub fn OTF2_Archive_SetCreator(a: *mut Archive, creator: *const c_char) -> c_int;
        pub fn OTF2_Archive_SetDescription(a: *mut Archive, d: *const c_char) -> c_int;
        pub fn OTF2_Archive_OpenEvtFiles(a: *mut Archive) -> c_int;
        pub fn OTF2_Archive_CloseEvtFiles(a: *mut Archive) -> c_int;
        pub fn OTF2_Archive_OpenDefFiles(a: *mut Archive) -> c_int;
        pub fn OTF2_Archive_CloseDefFiles(a: *mut Archive) -> c_int;
        pub fn OTF2_Archive_GetEvtWriter(a: *mut Archive, loc: u64) -> *mut EvtWriter;
        pub fn OTF2_Archive_CloseEvtWriter(a: *mut Archive, w: *mut EvtWriter) -> c_int;
        pub fn OTF2_Archive_GetDefWriter(a: *mut Archive, loc: u64) -> *mut DefWriter;
        pub fn OTF2_Archive_CloseDefWriter(a: *mut Archive, w: *mut DefWriter) -> c_int;
        pub fn OTF2_Archive_GetGlobalDefWriter(a: *mut Archive) -> *mut GlobalDefWriter;
        pub fn OTF2_EvtWriter_Enter(
            w: *mut EvtWriter,
            attrs: *mut AttributeList,
            time: u64,
            region: u32,
        ) -> c_int;
        pub fn OTF2_EvtWriter_Leave(
            w: *mut EvtWriter,
            attrs: *mut AttributeList,
            time: u64,
            region: u32,
        ) -> c_int;
        pub fn OTF2_EvtWriter_GetNumberOfEvents(w: *mut EvtWriter, n: *mut u64) -> c_int;
        pub fn OTF2_GlobalDefWriter_WriteClockProperties(
            w: *mut GlobalDefWriter,
            resolution: u64,
            offset: u64,
            length: u64,
            realtime: u64,
        ) -> c_int;
        pub fn OTF2_GlobalDefWriter_WriteString(
            w: *mut GlobalDefWriter,
            r: u32,
            s: *const c_char,
        ) -> c_int;
        pub fn OTF2_GlobalDefWriter_WriteSystemTreeNode(
            w: *mut GlobalDefWriter,
            r: u32,
            name: u32,
            class: u32,
            parent: u32,
        ) -> c_int;
        pub fn OTF2_GlobalDefWriter_WriteLocationGroup(
            w: *mut GlobalDefWriter,
            r: u32,
            name: u32,
            kind: u8,
            parent: u32,
            creator: u32,
        ) -> c_int;
        pub fn OTF2_GlobalDefWriter_WriteLocation(
            w: *mut GlobalDefWriter,
            r: u64,
            name: u32,
            kind: u8,
            events: u64,
            group: u32,
        ) -> c_int;
        #[allow(clippy::too_many_arguments)]
        pub fn OTF2_GlobalDefWriter_WriteRegion(
            w: *mut GlobalDefWriter,
            r: u32,
            name: u32,
            canonical: u32,
            description: u32,
            role: u8,
            paradigm: u8,
            flags: u32,
            file: u32,
            begin: u32,
            end: u32,
        ) -> c_int;
        pub fn OTF2_Error_GetName(code: c_int) -> *const c_char;
        pub fn OTF2_Error_GetDescription(code: c_int) -> *const c_char;
    }
}

/// "No string" reference.
pub const UNDEFINED_STRING: u32 = u32::MAX;
/// "No parent" system tree node.
pub const UNDEFINED_SYSTEM_TREE_NODE: u32 = u32::MAX;
/// "No creating group".
pub const UNDEFINED_LOCATION_GROUP: u32 = u32::MAX;

/// Region roles used here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RegionRole {
    /// A function (API call, kernel).
    Function = 1,
    /// A data transfer (memory copy).
    DataTransfer = 30,
    /// An allocation.
    Allocate = 35,
}

/// Paradigms used here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Paradigm {
    /// Unknown.
    Unknown = 0,
    /// User instrumentation (ROCTx markers).
    User = 1,
    /// HIP.
    Hip = 23,
}

/// Location group types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum GroupType {
    /// A process.
    Process = 1,
    /// An accelerator.
    Accelerator = 2,
}

/// Location types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum LocationType {
    /// A CPU thread.
    CpuThread = 1,
    /// An accelerator stream (queue).
    AcceleratorStream = 2,
}

/// An OTF2 error: the library's name and description of the code, and the call that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Otf2Error(pub String);

impl std::fmt::Display for Otf2Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Otf2Error {}

/// Result of an OTF2 call.
pub type Result<T> = std::result::Result<T, Otf2Error>;

fn c_str(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: OTF2 returns pointers to static NUL-terminated strings for error names.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn check(what: &str, code: c_int) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    // SAFETY: plain lookups in OTF2's static error tables, valid for any code.
    let (name, desc) = unsafe {
        (
            c_str(sys::OTF2_Error_GetName(code)),
            c_str(sys::OTF2_Error_GetDescription(code)),
        )
    };
    Err(Otf2Error(format!("{what} failed: {name} ({desc})")))
}

fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

extern "C" fn pre_flush(_: *mut c_void, _: u8, _: u64, _: *mut c_void, _: bool) -> u8 {
    1 // OTF2_FLUSH: write full chunks to disk
}

static FLUSH: sys::FlushCallbacks = sys::FlushCallbacks {
    pre_flush,
    post_flush: None,
};

/// How many chunks a location's event buffer may hold before OTF2 writes them to the location's
/// file (OTF2 asks for a chunk, we refuse, it flushes and asks again). One: a full chunk is written
/// at once. With chunks of [`FILE_BUFFER`] bytes or more OTF2 writes them straight to the file,
/// without its own 4 MiB write buffer per open file, so a location costs one chunk.
pub const EVT_CHUNKS_PER_LOCATION: usize = 1;

/// OTF2's write buffer per open file (`OTF2_FILE_BUFFER_SIZE`); writes of at least this size
/// bypass it.
pub const FILE_BUFFER: u64 = 4 << 20;

/// `OTF2_FILETYPE_EVENTS`.
const FILETYPE_EVENTS: u8 = 3;

/// The chunks of one OTF2 buffer (its `perBufferData`).
struct Chunks {
    size: usize,
    ptrs: Vec<*mut u8>,
}

/// OTF2's chunk allocator: a chunk of `size` bytes, or null to make OTF2 flush an event buffer
/// that already holds [`EVT_CHUNKS_PER_LOCATION`] chunks. Never unwinds.
extern "C" fn allocate(
    _: *mut c_void,
    file_type: u8,
    _: u64,
    per_buffer: *mut *mut c_void,
    size: u64,
) -> *mut c_void {
    let (Ok(size), false) = (usize::try_from(size), per_buffer.is_null()) else {
        return std::ptr::null_mut();
    };
    // SAFETY: `per_buffer` points to this buffer's slot, null on the first call and otherwise
    // the `Chunks` we stored there; OTF2 uses a buffer from one thread at a time.
    unsafe {
        if (*per_buffer).is_null() {
            let chunks = Box::new(Chunks {
                size,
                ptrs: Vec::new(),
            });
            *per_buffer = Box::into_raw(chunks).cast();
        }
        let chunks = &mut *(*per_buffer).cast::<Chunks>();
        if size == 0
            || chunks.size != size
            || (file_type == FILETYPE_EVENTS && chunks.ptrs.len() >= EVT_CHUNKS_PER_LOCATION)
        {
            return std::ptr::null_mut();
        }
        // Straight from the kernel and back on free: chunks of several MiB allocated and freed
        // over and over would otherwise fragment the heap and keep its pages resident.
        let p = libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return std::ptr::null_mut();
        }
        chunks.ptrs.push(p.cast());
        p
    }
}

/// OTF2's "free every chunk of this buffer" (after a flush, and with `last` when the buffer is
/// deleted).
extern "C" fn free_all(_: *mut c_void, _: u8, _: u64, per_buffer: *mut *mut c_void, last: bool) {
    if per_buffer.is_null() {
        return;
    }
    // SAFETY: as in `allocate`; every pointer in `ptrs` is a mapping of `size` bytes we made.
    unsafe {
        if (*per_buffer).is_null() {
            return;
        }
        let chunks = &mut *(*per_buffer).cast::<Chunks>();
        for p in chunks.ptrs.drain(..) {
            libc::munmap(p.cast(), chunks.size);
        }
        if last {
            drop(Box::from_raw((*per_buffer).cast::<Chunks>()));
            *per_buffer = std::ptr::null_mut();
        }
    }
}

static MEMORY: sys::MemoryCallbacks = sys::MemoryCallbacks { allocate, free_all };

/// An archive open for writing: `<dir>/<name>.otf2`, `<dir>/<name>.def` and `<dir>/<name>/`.
pub struct Archive {
    raw: *mut sys::Archive,
    evt_files_open: bool,
}

/// The event writer of one location.
pub struct EvtWriter {
    raw: *mut sys::EvtWriter,
    /// The location.
    pub location: u64,
}

/// The global definition writer of an archive.
pub struct GlobalDefs<'a> {
    raw: *mut sys::GlobalDefWriter,
    _archive: std::marker::PhantomData<&'a mut Archive>,
}

impl Archive {
    /// Creates the archive `name` in `dir` (which must exist) with `chunk` bytes per event
    /// chunk and per definition chunk (256 KiB to 16 MiB), POSIX files and no compression, and
    /// opens its event files.
    pub fn create(dir: &Path, name: &str, chunk: u64) -> Result<Archive> {
        let d = cstring(&dir.to_string_lossy());
        let n = cstring(name);
        // SAFETY: valid NUL-terminated strings; OTF2 copies them. Mode 0 = write, substrate 1 =
        // POSIX, compression 1 = none.
        let raw = unsafe { sys::OTF2_Archive_Open(d.as_ptr(), n.as_ptr(), 0, chunk, chunk, 1, 1) };
        if raw.is_null() {
            return Err(Otf2Error(format!(
                "OTF2_Archive_Open({}/{name}) failed; check that the directory is writable",
                dir.display()
            )));
        }
        let mut a = Archive {
            raw,
            evt_files_open: false,
        };
        // SAFETY: `raw` is a live archive; FLUSH and MEMORY are statics with 'static callbacks.
        unsafe {
            check(
                "OTF2_Archive_SetFlushCallbacks",
                sys::OTF2_Archive_SetFlushCallbacks(raw, &FLUSH, std::ptr::null_mut()),
            )?;
            check(
                "OTF2_Archive_SetMemoryCallbacks",
                sys::OTF2_Archive_SetMemoryCallbacks(raw, &MEMORY, std::ptr::null_mut()),
            )?;
            check(
                "OTF2_Archive_SetSerialCollectiveCallbacks",
                sys::OTF2_Archive_SetSerialCollectiveCallbacks(raw),
            )?;
            let creator = cstring("rocprof-attach");
            check(
                "OTF2_Archive_SetCreator",
                sys::OTF2_Archive_SetCreator(raw, creator.as_ptr()),
            )?;
            let desc = cstring("rocpd database converted by rocprof-attach");
            check(
                "OTF2_Archive_SetDescription",
                sys::OTF2_Archive_SetDescription(raw, desc.as_ptr()),
            )?;
            check(
                "OTF2_Archive_OpenEvtFiles",
                sys::OTF2_Archive_OpenEvtFiles(raw),
            )?;
        }
        a.evt_files_open = true;
        Ok(a)
    }

    /// The event writer of `location` (created on first use).
    pub fn evt_writer(&mut self, location: u64) -> Result<EvtWriter> {
        // SAFETY: live archive with open event files.
        let raw = unsafe { sys::OTF2_Archive_GetEvtWriter(self.raw, location) };
        if raw.is_null() {
            return Err(Otf2Error(format!(
                "OTF2_Archive_GetEvtWriter({location}) failed"
            )));
        }
        Ok(EvtWriter { raw, location })
    }

    /// Closes an event writer, returning its number of events.
    pub fn close_evt_writer(&mut self, w: EvtWriter) -> Result<u64> {
        let mut n = 0u64;
        // SAFETY: `w.raw` came from this archive and is closed exactly once (moved in).
        unsafe {
            check(
                "OTF2_EvtWriter_GetNumberOfEvents",
                sys::OTF2_EvtWriter_GetNumberOfEvents(w.raw, &mut n),
            )?;
            check(
                "OTF2_Archive_CloseEvtWriter",
                sys::OTF2_Archive_CloseEvtWriter(self.raw, w.raw),
            )?;
        }
        Ok(n)
    }

    /// Closes the event files and writes an (empty) local definition file per location.
    pub fn finish_events(&mut self, locations: &[u64]) -> Result<()> {
        // SAFETY: live archive; each def writer is closed right after it is obtained.
        unsafe {
            if self.evt_files_open {
                check(
                    "OTF2_Archive_CloseEvtFiles",
                    sys::OTF2_Archive_CloseEvtFiles(self.raw),
                )?;
                self.evt_files_open = false;
            }
            check(
                "OTF2_Archive_OpenDefFiles",
                sys::OTF2_Archive_OpenDefFiles(self.raw),
            )?;
            for &l in locations {
                let w = sys::OTF2_Archive_GetDefWriter(self.raw, l);
                if w.is_null() {
                    return Err(Otf2Error(format!("OTF2_Archive_GetDefWriter({l}) failed")));
                }
                check(
                    "OTF2_Archive_CloseDefWriter",
                    sys::OTF2_Archive_CloseDefWriter(self.raw, w),
                )?;
            }
            check(
                "OTF2_Archive_CloseDefFiles",
                sys::OTF2_Archive_CloseDefFiles(self.raw),
            )?;
        }
        Ok(())
    }

    /// The global definition writer.
    pub fn global_defs(&mut self) -> Result<GlobalDefs<'_>> {
        // SAFETY: live archive; the writer is owned by the archive and closed with it.
        let raw = unsafe { sys::OTF2_Archive_GetGlobalDefWriter(self.raw) };
        if raw.is_null() {
            return Err(Otf2Error("OTF2_Archive_GetGlobalDefWriter failed".into()));
        }
        Ok(GlobalDefs {
            raw,
            _archive: std::marker::PhantomData,
        })
    }

    /// Closes the archive, writing everything still buffered.
    pub fn close(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        // SAFETY: `raw` is live and closed exactly once (Drop sees null afterwards).
        check("OTF2_Archive_Close", unsafe {
            sys::OTF2_Archive_Close(raw)
        })
    }
}

impl Drop for Archive {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: live archive not yet closed.
            unsafe {
                sys::OTF2_Archive_Close(self.raw);
            }
        }
    }
}

impl EvtWriter {
    /// An Enter record.
    pub fn enter(&mut self, time: u64, region: u32) -> Result<()> {
        // SAFETY: live writer of a live archive; no attribute list.
        check("OTF2_EvtWriter_Enter", unsafe {
            sys::OTF2_EvtWriter_Enter(self.raw, std::ptr::null_mut(), time, region)
        })
    }

    /// A Leave record.
    pub fn leave(&mut self, time: u64, region: u32) -> Result<()> {
        // SAFETY: as for `enter`.
        check("OTF2_EvtWriter_Leave", unsafe {
            sys::OTF2_EvtWriter_Leave(self.raw, std::ptr::null_mut(), time, region)
        })
    }
}

impl GlobalDefs<'_> {
    /// Clock properties: ns resolution, offset and length of the trace.
    pub fn clock(&mut self, offset: u64, length: u64) -> Result<()> {
        // SAFETY: live global def writer.
        check("OTF2_GlobalDefWriter_WriteClockProperties", unsafe {
            sys::OTF2_GlobalDefWriter_WriteClockProperties(
                self.raw,
                1_000_000_000,
                offset,
                length,
                u64::MAX,
            )
        })
    }

    /// A string definition.
    pub fn string(&mut self, r: u32, s: &str) -> Result<()> {
        let c = cstring(s);
        // SAFETY: live writer; OTF2 copies the string.
        check("OTF2_GlobalDefWriter_WriteString", unsafe {
            sys::OTF2_GlobalDefWriter_WriteString(self.raw, r, c.as_ptr())
        })
    }

    /// A system tree node.
    pub fn system_tree_node(&mut self, r: u32, name: u32, class: u32, parent: u32) -> Result<()> {
        // SAFETY: live writer.
        check("OTF2_GlobalDefWriter_WriteSystemTreeNode", unsafe {
            sys::OTF2_GlobalDefWriter_WriteSystemTreeNode(self.raw, r, name, class, parent)
        })
    }

    /// A location group.
    pub fn location_group(
        &mut self,
        r: u32,
        name: u32,
        kind: GroupType,
        parent: u32,
        creator: u32,
    ) -> Result<()> {
        // SAFETY: live writer.
        check("OTF2_GlobalDefWriter_WriteLocationGroup", unsafe {
            sys::OTF2_GlobalDefWriter_WriteLocationGroup(
                self.raw, r, name, kind as u8, parent, creator,
            )
        })
    }

    /// A location.
    pub fn location(
        &mut self,
        r: u64,
        name: u32,
        kind: LocationType,
        events: u64,
        group: u32,
    ) -> Result<()> {
        // SAFETY: live writer.
        check("OTF2_GlobalDefWriter_WriteLocation", unsafe {
            sys::OTF2_GlobalDefWriter_WriteLocation(self.raw, r, name, kind as u8, events, group)
        })
    }

    /// A region.
    pub fn region(
        &mut self,
        r: u32,
        name: u32,
        role: RegionRole,
        paradigm: Paradigm,
    ) -> Result<()> {
        // SAFETY: live writer.
        check("OTF2_GlobalDefWriter_WriteRegion", unsafe {
            sys::OTF2_GlobalDefWriter_WriteRegion(
                self.raw,
                r,
                name,
                name,
                UNDEFINED_STRING,
                role as u8,
                paradigm as u8,
                0,
                UNDEFINED_STRING,
                0,
                0,
            )
        })
    }
}
