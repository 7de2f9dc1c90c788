//! Facts about the host and the process the tool runs in: uname, machine hash, command line,
//! start time, CPU model, and C++ demangling through the process's own libstdc++.

/// `uname`: system name, node name, release, version, machine, domain name.
pub(crate) fn uname() -> [String; 6] {
    // SAFETY: utsname is plain data; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Default::default();
    }
    let f = |a: &[libc::c_char]| {
        let b: Vec<u8> = a
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    [
        f(&u.sysname),
        f(&u.nodename),
        f(&u.release),
        f(&u.version),
        f(&u.machine),
        f(&u.domainname),
    ]
}

/// FNV-1a of `s`, as a non-negative integer (the node id and hash).
pub(crate) fn fnv(s: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    (h & 0x7fff_ffff_ffff_ffff) as i64
}

/// `/proc/self/cmdline` with arguments joined by spaces.
pub fn command_line() -> String {
    let raw = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    raw.split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The process start time (CLOCK_BOOTTIME ns) from `/proc/self/stat`, 0 if unknown.
pub fn process_start_ns() -> i64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Field 22 (starttime, clock ticks since boot), counted after the ")" closing the name.
    let ticks = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(19))
        .and_then(|t| t.parse::<i64>().ok())
        .unwrap_or(0);
    // SAFETY: trivial getter.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1);
    ticks.saturating_mul(1_000_000_000 / hz)
}

type Demangle = unsafe extern "C" fn(
    *const libc::c_char,
    *mut libc::c_char,
    *mut usize,
    *mut libc::c_int,
) -> *mut libc::c_char;

/// Demangles a C++ name with the process's own `__cxa_demangle` (libstdc++ is mapped in any
/// CUDA runtime process; found globally or, for a library loaded `RTLD_LOCAL` as Python
/// extensions load theirs, through `dlopen(RTLD_NOLOAD)`); the name itself when there is none
/// or it does not demangle.
pub fn demangle(name: &str) -> String {
    static F: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let f = *F.get_or_init(|| {
        // SAFETY: dlsym/dlopen with valid C strings; RTLD_NOLOAD never loads anything, and the
        // handle it returns (a reference) is never closed.
        unsafe {
            let global = libc::dlsym(libc::RTLD_DEFAULT, c"__cxa_demangle".as_ptr());
            if !global.is_null() {
                return global as usize;
            }
            // Python extensions load libstdc++ RTLD_LOCAL: ask the mapped library itself.
            let h = libc::dlopen(
                c"libstdc++.so.6".as_ptr(),
                libc::RTLD_NOW | libc::RTLD_NOLOAD,
            );
            if h.is_null() {
                return 0;
            }
            libc::dlsym(h, c"__cxa_demangle".as_ptr()) as usize
        }
    });
    if f == 0 || !name.starts_with("_Z") {
        return name.to_owned();
    }
    let Ok(c) = std::ffi::CString::new(name) else {
        return name.to_owned();
    };
    // SAFETY: f is __cxa_demangle; a null buffer makes it malloc the result, freed below.
    unsafe {
        let f: Demangle = std::mem::transmute::<usize, Demangle>(f);
        let mut status = -1;
        let out = f(
            c.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut status,
        );
        if out.is_null() {
            return name.to_owned();
        }
        let s = std::ffi::CStr::from_ptr(out).to_string_lossy().into_owned();
        libc::free(out as *mut libc::c_void);
        if status == 0 {
            s
        } else {
            name.to_owned()
        }
    }
}

/// The CPU model name and vendor from `/proc/cpuinfo`.
pub(crate) fn cpu_model() -> (String, String) {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let get = |k: &str| {
        info.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_default()
    };
    (get("model name"), get("vendor_id"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_with_the_process_libstdcxx() {
        // Rust test binaries do not map libstdc++: the name comes back as it was.
        let d = demangle("_Z6kernelPf");
        assert!(d == "_Z6kernelPf" || d == "kernel(float*)", "{d}");
        assert_eq!(demangle("plain"), "plain");
        assert!(process_start_ns() > 0);
    }
}
