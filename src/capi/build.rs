//! Build step for the front ends (called from src/build.rs):
//!
//! * gives the C ABI library (the crate's cdylib) the soname ROCm's tools expect;
//! * links the `rocprof-attach` binary as a fixed-address executable (no PIE) unless
//!   `ROCPROF_ATTACH_PIE=1`. A position-independent executable is relocated at every start:
//!   16,000 pointers in 280 KiB of tables are rewritten, about 90 page faults and a fifth of the
//!   process's start-up, at every session. The code is still compiled position-independent, and
//!   the shared libraries, heap and stacks stay randomised; builds that want a PIE (hardened
//!   distributions) set `ROCPROF_ATTACH_PIE=1` (docs/performance.md, "Start-up"). A static
//!   build (`+crt-static`) stays a static PIE.

/// Prints the link arguments: the cdylib's soname and, unless a PIE is asked for, `-no-pie` for
/// the binary.
pub fn configure() {
    // Only the cdylib gets this link argument; the rlib, the binary and the tests are unaffected.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librocprofiler-sdk-rocattach.so.1");
    println!("cargo:rerun-if-changed=src/capi/build.rs");
    println!("cargo:rerun-if-env-changed=ROCPROF_ATTACH_PIE");
    let pie = std::env::var("ROCPROF_ATTACH_PIE").is_ok_and(|v| v == "1");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    // A static build (`-C target-feature=+crt-static`) is linked as a static PIE by rustc, whose
    // start-up code relocates itself: left as it is.
    let static_crt = std::env::var("CARGO_CFG_TARGET_FEATURE")
        .is_ok_and(|f| f.split(',').any(|f| f == "crt-static"));
    if linux && !pie && !static_crt {
        println!("cargo:rustc-link-arg-bin=rocprof-attach=-no-pie");
    }
}
