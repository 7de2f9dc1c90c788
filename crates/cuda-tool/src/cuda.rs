//! The CUDA devices of the process, read through the libcuda it already maps (`RTLD_NOLOAD`):
//! no context is created or needed.

use std::ffi::{c_char, c_int, c_void};
use std::path::PathBuf;

use crate::cupti::{mapped, open, sym};

/// One CUDA device.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Device {
    /// Device ordinal (what CUPTI records call `deviceId`).
    pub ordinal: i32,
    /// `cuDeviceGetName`.
    pub name: String,
    /// 16 UUID bytes (`cuDeviceGetUuid_v2`).
    pub uuid: [u8; 16],
    /// Streaming multiprocessors.
    pub sm_count: i64,
    /// Compute capability (major, minor).
    pub cc: (i64, i64),
    /// Total memory in bytes.
    pub memory: i64,
    /// Warp size.
    pub warp_size: i64,
    /// Max threads per block.
    pub max_threads_per_block: i64,
    /// Max block dimensions.
    pub max_block: [i64; 3],
    /// Max grid dimensions.
    pub max_grid: [i64; 3],
    /// Shared memory per block (bytes).
    pub shared_per_block: i64,
    /// Max threads per SM.
    pub max_threads_per_sm: i64,
    /// PCI bus, device and domain ids.
    pub pci: [i64; 3],
    /// Clock rate in kHz.
    pub clock_khz: i64,
}

impl Device {
    /// The UUID as `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (nvidia-smi's form).
    pub fn uuid_text(&self) -> String {
        let h: String = self.uuid.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "GPU-{}-{}-{}-{}-{}",
            &h[..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..]
        )
    }

    /// The last 8 UUID bytes as an integer (rocpd's agent `uuid` column).
    pub fn uuid_int(&self) -> i64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.uuid[8..]);
        i64::from_be_bytes(b)
    }
}

/// Driver version and devices as seen by the process's libcuda.
#[derive(Debug, Clone, Default)]
pub struct CudaInfo {
    /// libcuda path (empty if not mapped).
    pub path: Option<PathBuf>,
    /// `cuDriverGetVersion` (0 if unknown).
    pub driver_version: i32,
    /// The devices (empty if unknown).
    pub devices: Vec<Device>,
}

type GetInt = unsafe extern "C" fn(*mut c_int) -> c_int;
type DevGet = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
type DevName = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;
type DevUuid = unsafe extern "C" fn(*mut u8, c_int) -> c_int;
type DevAttr = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int;
type DevMem = unsafe extern "C" fn(*mut usize, c_int) -> c_int;

/// The libcuda functions [`query`] calls, each null where missing.
struct Functions {
    ver: *mut c_void,
    count: *mut c_void,
    get: *mut c_void,
    name: *mut c_void,
    uuid: *mut c_void,
    attr: *mut c_void,
    mem: *mut c_void,
}

/// Queries the mapped libcuda; never loads one and never fails (unknowns stay 0/empty).
pub fn query() -> CudaInfo {
    let mut info = CudaInfo::default();
    let Some(path) = mapped("libcuda.so").into_iter().next() else {
        return info;
    };
    let h = match open(&path, libc::RTLD_NOLOAD) {
        Ok(h) => h,
        Err(_) => return info,
    };
    info.path = Some(path);
    // SAFETY: h came from dlopen and is never closed.
    let f = |n: &str| -> *mut c_void { unsafe { sym(h, n) } };
    let fns = Functions {
        ver: f("cuDriverGetVersion"),
        count: f("cuDeviceGetCount"),
        get: f("cuDeviceGet"),
        name: f("cuDeviceGetName"),
        uuid: f("cuDeviceGetUuid_v2"),
        attr: f("cuDeviceGetAttribute"),
        mem: f("cuDeviceTotalMem_v2"),
    };
    // SAFETY: each non-null pointer is the libcuda function of the declared signature.
    unsafe {
        if !fns.ver.is_null() {
            let v: GetInt = std::mem::transmute::<*mut c_void, GetInt>(fns.ver);
            let mut n = 0;
            if v(&mut n) == 0 {
                info.driver_version = n;
            }
        }
        info.devices = devices(&fns);
    }
    info
}

/// The devices (at most 64), empty when they cannot be counted.
///
/// # Safety
/// Each non-null pointer of `fns` is the libcuda function of the declared signature.
unsafe fn devices(fns: &Functions) -> Vec<Device> {
    let mut devices = Vec::new();
    if fns.count.is_null() || fns.get.is_null() {
        return devices;
    }
    let count: GetInt = std::mem::transmute::<*mut c_void, GetInt>(fns.count);
    let get: DevGet = std::mem::transmute::<*mut c_void, DevGet>(fns.get);
    let mut n = 0;
    if count(&mut n) != 0 {
        return devices;
    }
    for ordinal in 0..n.clamp(0, 64) {
        let mut dev = 0;
        if get(&mut dev, ordinal) == 0 {
            devices.push(device(fns, ordinal, dev));
        }
    }
    devices
}

/// What libcuda tells of device `dev` (the `ordinal`th).
///
/// # Safety
/// As for [`devices`].
unsafe fn device(fns: &Functions, ordinal: c_int, dev: c_int) -> Device {
    let mut d = Device {
        ordinal,
        ..Default::default()
    };
    if !fns.name.is_null() {
        let name: DevName = std::mem::transmute::<*mut c_void, DevName>(fns.name);
        let mut buf = [0 as c_char; 256];
        if name(buf.as_mut_ptr(), 255, dev) == 0 {
            d.name = std::ffi::CStr::from_ptr(buf.as_ptr())
                .to_string_lossy()
                .into_owned();
        }
    }
    if !fns.uuid.is_null() {
        let uuid: DevUuid = std::mem::transmute::<*mut c_void, DevUuid>(fns.uuid);
        let mut b = [0u8; 16];
        if uuid(b.as_mut_ptr(), dev) == 0 {
            d.uuid = b;
        }
    }
    if !fns.mem.is_null() {
        let mem: DevMem = std::mem::transmute::<*mut c_void, DevMem>(fns.mem);
        let mut m = 0usize;
        if mem(&mut m, dev) == 0 {
            d.memory = m as i64;
        }
    }
    if !fns.attr.is_null() {
        let attr: DevAttr = std::mem::transmute::<*mut c_void, DevAttr>(fns.attr);
        let a = |which: c_int| {
            let mut v = 0;
            if attr(&mut v, which, dev) == 0 {
                v as i64
            } else {
                0
            }
        };
        // CUdevice_attribute values from cuda.h.
        d.max_threads_per_block = a(1);
        d.max_block = [a(2), a(3), a(4)];
        d.max_grid = [a(5), a(6), a(7)];
        d.shared_per_block = a(8);
        d.warp_size = a(10);
        d.clock_khz = a(13);
        d.sm_count = a(16);
        d.pci = [a(33), a(34), a(50)];
        d.max_threads_per_sm = a(39);
        d.cc = (a(75), a(76));
    }
    d
}

/// The active primary contexts (`cuDevicePrimaryCtxGetState`), each retained
/// (`cuDevicePrimaryCtxRetain`: the context the runtime API and PyTorch use; retaining one in use
/// creates nothing), as `(device ordinal, context)`; a device whose primary context is not active
/// is left alone (retaining it would create a context there). The counters need them; no context
/// becomes current on any thread.
pub fn active_primary_contexts() -> Result<Vec<(i32, *mut c_void)>, String> {
    let path = mapped("libcuda.so")
        .into_iter()
        .next()
        .ok_or("the process maps no libcuda")?;
    let h = open(&path, libc::RTLD_NOLOAD)?;
    // SAFETY: h came from dlopen and is never closed.
    let f = |n: &str| unsafe { sym(h, n) };
    let (count, get, state, retain) = (
        f("cuDeviceGetCount"),
        f("cuDeviceGet"),
        f("cuDevicePrimaryCtxGetState"),
        f("cuDevicePrimaryCtxRetain"),
    );
    if [count, get, state, retain].iter().any(|p| p.is_null()) {
        return Err(format!(
            "{} lacks the primary context functions",
            path.display()
        ));
    }
    type State = unsafe extern "C" fn(c_int, *mut u32, *mut c_int) -> c_int;
    type Retain = unsafe extern "C" fn(*mut *mut c_void, c_int) -> c_int;
    let mut out = Vec::new();
    // SAFETY: the libcuda functions of these signatures (cuda.h).
    unsafe {
        let count = std::mem::transmute::<*mut c_void, GetInt>(count);
        let get = std::mem::transmute::<*mut c_void, DevGet>(get);
        let state = std::mem::transmute::<*mut c_void, State>(state);
        let retain = std::mem::transmute::<*mut c_void, Retain>(retain);
        let mut n = 0;
        if count(&mut n) != 0 {
            return Err("cuDeviceGetCount failed".into());
        }
        for ordinal in 0..n.clamp(0, 64) {
            let (mut dev, mut flags, mut active) = (0, 0u32, 0);
            if get(&mut dev, ordinal) != 0
                || state(dev, &mut flags, &mut active) != 0
                || active == 0
            {
                continue;
            }
            let mut ctx = std::ptr::null_mut();
            match retain(&mut ctx, dev) {
                0 if !ctx.is_null() => out.push((ordinal, ctx)),
                r => {
                    return Err(format!(
                        "cuDevicePrimaryCtxRetain({ordinal}) returned CUresult {r}"
                    ))
                }
            }
        }
    }
    Ok(out)
}

/// Releases the primary context of device `ordinal` once (`cuDevicePrimaryCtxRelease_v2`): the
/// retain of [`active_primary_contexts`] undone, for a caller that keeps no context.
pub fn release_primary_context(ordinal: i32) {
    let Some(path) = mapped("libcuda.so").into_iter().next() else {
        return;
    };
    let Ok(h) = open(&path, libc::RTLD_NOLOAD) else {
        return;
    };
    // SAFETY: h came from dlopen and is never closed.
    let (get, release) = unsafe {
        (
            sym(h, "cuDeviceGet"),
            sym(h, "cuDevicePrimaryCtxRelease_v2"),
        )
    };
    if get.is_null() || release.is_null() {
        return;
    }
    type Release = unsafe extern "C" fn(c_int) -> c_int;
    // SAFETY: the libcuda functions of these signatures (cuda.h).
    unsafe {
        let get = std::mem::transmute::<*mut c_void, DevGet>(get);
        let release = std::mem::transmute::<*mut c_void, Release>(release);
        let mut dev = 0;
        if get(&mut dev, ordinal) == 0 {
            release(dev);
        }
    }
}
