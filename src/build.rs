//! The build script: the C library's soname (src/capi/build.rs) and the Perfetto messages
//! generated from their `.proto` files (src/rocpd/pftrace/build.rs), and `cfg(have_otf2)` when
//! the OTF2 crate's build script found and linked the library (src/rocpd/otf2/sys/build.rs).

#[path = "capi/build.rs"]
mod capi;
#[path = "rocpd/pftrace/build.rs"]
mod pftrace;

fn main() {
    println!("cargo:rerun-if-changed=src/build.rs");
    capi::configure();
    pftrace::generate();
    // `convert -f otf2`: on where rocprof-otf2 found the OTF2 library (its `links` metadata).
    println!("cargo::rustc-check-cfg=cfg(have_otf2)");
    println!("cargo:rerun-if-env-changed=DEP_OPEN_TRACE_FORMAT2_ENABLED");
    if std::env::var("DEP_OPEN_TRACE_FORMAT2_ENABLED").as_deref() == Ok("1") {
        println!("cargo:rustc-cfg=have_otf2");
    }
}
