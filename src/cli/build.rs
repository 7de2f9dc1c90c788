//! Build step for the command (called from src/build.rs):
//!
//! * links the `rocprof-attach` binary as a fixed-address executable (no PIE) unless
//!   `ROCPROF_ATTACH_PIE=1`. A position-independent executable is relocated at every start:
//!   16,000 pointers in 280 KiB of tables are rewritten, about 90 page faults and a fifth of the
//!   process's start-up, at every session. The code is still compiled position-independent, and
//!   the shared libraries, heap and stacks stay randomised; builds that want a PIE (hardened
//!   distributions) set `ROCPROF_ATTACH_PIE=1` (docs/performance.md, "Start-up"). A static
//!   build (`+crt-static`) stays a static PIE;
//! * links GCC's unwinder into the binary (`libgcc_eh.a`, as a `+crt-static` build does) instead
//!   of loading `libgcc_s.so.1` at every start, unless `ROCPROF_ATTACH_SHARED_LIBGCC=1`: one
//!   shared library fewer to map and relocate, and no libgcc_s constructor running `cpuid`
//!   (which hypervisors trap). Rust asks the linker for `-lgcc_s` by name; a linker script of
//!   that name, in a directory searched before the compiler's own, points it at `libgcc_eh.a`.
//!   Done only when the C compiler has `libgcc_eh.a`, and not in cross builds.

/// Prints the binary's link arguments: unless a PIE is asked for, `-no-pie`.
pub fn configure() {
    println!("cargo:rerun-if-changed=src/cli/build.rs");
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
    println!("cargo:rerun-if-env-changed=ROCPROF_ATTACH_SHARED_LIBGCC");
    let shared_libgcc = std::env::var("ROCPROF_ATTACH_SHARED_LIBGCC").is_ok_and(|v| v == "1");
    // The probe asks the host's `cc`: only for builds for this machine (not cross builds).
    let native = std::env::var("TARGET").ok() == std::env::var("HOST").ok();
    if linux && native && !static_crt && !shared_libgcc && has_libgcc_eh() {
        let dir =
            std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("libgcc");
        std::fs::create_dir_all(&dir).expect("create OUT_DIR/libgcc");
        std::fs::write(
            dir.join("libgcc_s.so"),
            "/* see src/cli/build.rs */\nGROUP ( -lgcc_eh )\n",
        )
        .expect("write the libgcc_s linker script");
        println!(
            "cargo:rustc-link-arg-bin=rocprof-attach=-L{}",
            dir.display()
        );
    }
}

/// True when the C compiler that links the binary (`cc`, as rustc runs it) has GCC's static
/// unwinder.
fn has_libgcc_eh() -> bool {
    std::process::Command::new("cc")
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .is_some_and(|p| {
            std::path::Path::new(&p).is_absolute() && std::path::Path::new(&p).exists()
        })
}
