//! Finding and loading libcupti and libcuda at run time: `dlopen` plus a table of `dlsym`ed
//! functions (no link-time dependency, no bindgen).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};

use crate::protocol::{Code, ToolError};

/// `CUptiResult`.
pub type CuptiResult = c_int;
/// `CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED`.
pub const CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: CuptiResult = 39;
/// `CUPTI_ERROR_MAX_LIMIT_REACHED`.
pub const CUPTI_ERROR_MAX_LIMIT_REACHED: CuptiResult = 12;
/// `CUPTI_ACTIVITY_FLAG_FLUSH_FORCED`.
pub const CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: u32 = 1;
/// `CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER`: the client hands out zeroed buffers, so
/// CUPTI need not clear them on the thread that needs room (an application thread).
pub const CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER: c_int = 5;
/// `CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM`.
pub const CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM: c_int = 1;
/// `CUPTI_CB_DOMAIN_DRIVER_API`.
pub const CUPTI_CB_DOMAIN_DRIVER_API: c_int = 1;
/// `CUPTI_CB_DOMAIN_RUNTIME_API`.
pub const CUPTI_CB_DOMAIN_RUNTIME_API: c_int = 2;
/// Oldest CUPTI API version accepted (`CUPTI_API_VERSION` 18 = CUDA 12.0).
pub const MIN_CUPTI_VERSION: u32 = 18;

/// `CUpti_BuffersCallbackRequestFunc`.
pub type BufferRequested = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
/// `CUpti_BuffersCallbackCompleteFunc`.
pub type BufferCompleted = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
/// `CUpti_CallbackFunc`.
pub type CallbackFunc = unsafe extern "C" fn(*mut c_void, c_int, u32, *const c_void);

/// The CUPTI functions the tool calls.
#[allow(missing_docs)]
#[derive(Debug)]
pub struct Cupti {
    /// The path it was loaded from.
    pub path: PathBuf,
    pub get_version: unsafe extern "C" fn(*mut u32) -> CuptiResult,
    pub get_result_string: unsafe extern "C" fn(CuptiResult, *mut *const c_char) -> CuptiResult,
    pub subscribe: unsafe extern "C" fn(*mut *mut c_void, CallbackFunc, *mut c_void) -> CuptiResult,
    pub unsubscribe: unsafe extern "C" fn(*mut c_void) -> CuptiResult,
    pub register_callbacks: unsafe extern "C" fn(BufferRequested, BufferCompleted) -> CuptiResult,
    pub set_thread_id_type: unsafe extern "C" fn(c_int) -> CuptiResult,
    pub enable: unsafe extern "C" fn(c_int) -> CuptiResult,
    pub disable: unsafe extern "C" fn(c_int) -> CuptiResult,
    pub flush_all: unsafe extern "C" fn(u32) -> CuptiResult,
    pub get_next_record: unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> CuptiResult,
    pub get_num_dropped: unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> CuptiResult,
    pub get_timestamp: unsafe extern "C" fn(*mut u64) -> CuptiResult,
    pub get_callback_name: unsafe extern "C" fn(c_int, u32, *mut *const c_char) -> CuptiResult,
    /// `cuptiActivitySetAttribute`, where the library has it.
    pub set_attribute: Option<unsafe extern "C" fn(c_int, *mut usize, *mut c_void) -> CuptiResult>,
    /// `cuptiEnableCallback(enable, subscriber, domain, cbid)`.
    pub enable_callback: Option<EnableCallback>,
    /// `cuptiFinalize`, where the library has it ([`crate::teardown`]).
    pub finalize: Option<unsafe extern "C" fn() -> CuptiResult>,
    /// The API version `cuptiGetVersion` reported when the library was loaded (0: unknown).
    pub version: u32,
    /// The counter APIs (range profiler, PM sampling, profiler host), or the names missing.
    pub profiler: Result<crate::profiler::Profiler, Vec<&'static str>>,
}

/// `cuptiEnableCallback`.
pub type EnableCallback = unsafe extern "C" fn(u32, *mut c_void, c_int, u32) -> CuptiResult;

impl Cupti {
    /// CUPTI's text for `r`.
    pub fn describe(&self, r: CuptiResult) -> String {
        let mut s: *const c_char = std::ptr::null();
        // SAFETY: get_result_string writes a static string pointer or fails.
        let ok = unsafe { (self.get_result_string)(r, &mut s) } == 0;
        if ok && !s.is_null() {
            // SAFETY: CUPTI returns a NUL-terminated static string.
            format!("{} ({r})", unsafe { CStr::from_ptr(s) }.to_string_lossy())
        } else {
            format!("CUPTI error {r}")
        }
    }

    /// The name of callback `cbid` in `domain`.
    pub fn callback_name(&self, domain: c_int, cbid: u32) -> String {
        let mut s: *const c_char = std::ptr::null();
        // SAFETY: get_callback_name writes a static string pointer or fails.
        let ok = unsafe { (self.get_callback_name)(domain, cbid, &mut s) } == 0;
        if ok && !s.is_null() {
            // SAFETY: NUL-terminated static string.
            unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
        } else {
            format!("cbid_{cbid}")
        }
    }
}

fn dlerror_text() -> String {
    // SAFETY: dlerror returns a thread-local string or null.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: NUL-terminated.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

/// `dlopen(path, RTLD_NOW | extra)`; the handle is never closed.
pub fn open(path: &Path, extra: c_int) -> Result<*mut c_void, String> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| "NUL in path")?;
    // SAFETY: c is a valid C string.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | extra) };
    if h.is_null() {
        Err(dlerror_text())
    } else {
        Ok(h)
    }
}

/// `dlsym(h, name)` or null.
///
/// # Safety
/// `h` must be a live `dlopen` handle.
pub unsafe fn sym(h: *mut c_void, name: &str) -> *mut c_void {
    let c = CString::new(name).expect("symbol names have no NUL");
    libc::dlsym(h, c.as_ptr())
}

/// Mapped files of this process whose file name starts with `prefix`.
pub fn mapped(prefix: &str) -> Vec<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut out: Vec<PathBuf> = Vec::new();
    for line in maps.lines() {
        let Some(path) = line.split_whitespace().nth(5) else {
            continue;
        };
        let p = PathBuf::from(path);
        let hit = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(prefix));
        if hit && !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The places libcupti is looked for, in order (after the mapped one): the shared list of
/// [`crate::candidates`], over this process's mapped files.
pub fn candidates(override_path: Option<&Path>) -> Vec<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    crate::candidates::cupti_candidates(
        maps.lines().filter_map(|l| l.split_whitespace().nth(5)),
        override_path,
    )
}

/// Loads libcupti (the mapped one first, then `override_path`, then [`candidates`]) and
/// resolves its functions.
pub fn load(override_path: Option<&Path>) -> Result<Cupti, ToolError> {
    let mut tried = Vec::new();
    for p in mapped("libcupti.so") {
        let h = open(&p, libc::RTLD_NOLOAD).or_else(|_| open(&p, 0));
        match h {
            Ok(h) => return resolve(h, p),
            Err(e) => tried.push(format!("{} ({e})", p.display())),
        }
    }
    for p in candidates(override_path) {
        if !p.exists() {
            continue;
        }
        match open(&p, 0) {
            Ok(h) => return resolve(h, p),
            Err(e) => tried.push(format!("{} ({e})", p.display())),
        }
    }
    Err(ToolError::new(
        Code::CuptiMissing,
        format!(
            "no libcupti could be loaded into this process (tried: {}); CUPTI ships with the CUDA toolkit (extras/CUPTI) and in the nvidia-cuda-cupti wheel: install it and pass its path with ROCPROF_ATTACH_CUPTI",
            if tried.is_empty() { "no candidate exists".to_owned() } else { tried.join(", ") }
        ),
    ))
}

#[allow(clippy::missing_transmute_annotations)]
fn resolve(h: *mut c_void, path: PathBuf) -> Result<Cupti, ToolError> {
    let mut missing = Vec::new();
    let mut get = |name: &'static str| {
        // SAFETY: h came from dlopen and is never closed.
        let p = unsafe { sym(h, name) };
        if p.is_null() {
            missing.push(name);
        }
        p
    };
    let ptrs = [
        get("cuptiGetVersion"),
        get("cuptiGetResultString"),
        get("cuptiSubscribe"),
        get("cuptiUnsubscribe"),
        get("cuptiActivityRegisterCallbacks"),
        get("cuptiSetThreadIdType"),
        get("cuptiActivityEnable"),
        get("cuptiActivityDisable"),
        get("cuptiActivityFlushAll"),
        get("cuptiActivityGetNextRecord"),
        get("cuptiActivityGetNumDroppedRecords"),
        get("cuptiGetTimestamp"),
        get("cuptiGetCallbackName"),
    ];
    if !missing.is_empty() {
        return Err(ToolError::new(
            Code::CuptiOld,
            format!(
                "{} lacks {}; it is too old or not CUPTI: use the libcupti of CUDA 12 or 13 (ROCPROF_ATTACH_CUPTI)",
                path.display(),
                missing.join(", ")
            ),
        ));
    }
    // SAFETY: every pointer is a non-null symbol of libcupti with the declared C signature
    // (CUDA 13 headers); transmuting a data pointer to a function pointer is how dlsym works.
    unsafe {
        use std::mem::transmute as t;
        let get_version: unsafe extern "C" fn(*mut u32) -> CuptiResult = t(ptrs[0]);
        let mut version = 0u32;
        if get_version(&mut version) != 0 {
            version = 0;
        }
        Ok(Cupti {
            path,
            get_version,
            get_result_string: t::<*mut c_void, _>(ptrs[1]),
            subscribe: t::<*mut c_void, _>(ptrs[2]),
            unsubscribe: t::<*mut c_void, _>(ptrs[3]),
            register_callbacks: t::<*mut c_void, _>(ptrs[4]),
            set_thread_id_type: t::<*mut c_void, _>(ptrs[5]),
            enable: t::<*mut c_void, _>(ptrs[6]),
            disable: t::<*mut c_void, _>(ptrs[7]),
            flush_all: t::<*mut c_void, _>(ptrs[8]),
            get_next_record: t::<*mut c_void, _>(ptrs[9]),
            get_num_dropped: t::<*mut c_void, _>(ptrs[10]),
            get_timestamp: t::<*mut c_void, _>(ptrs[11]),
            get_callback_name: t::<*mut c_void, _>(ptrs[12]),
            set_attribute: {
                let p = sym(h, "cuptiActivitySetAttribute");
                (!p.is_null()).then(|| t::<*mut c_void, _>(p))
            },
            enable_callback: {
                let p = sym(h, "cuptiEnableCallback");
                (!p.is_null()).then(|| t::<*mut c_void, _>(p))
            },
            finalize: {
                let p = sym(h, "cuptiFinalize");
                (!p.is_null()).then(|| t::<*mut c_void, _>(p))
            },
            version,
            profiler: crate::profiler::Profiler::resolve(h, version),
        })
    }
}
