//! The build script: the C library's soname (src/capi/build.rs) and the Perfetto messages
//! generated from their `.proto` files (src/rocpd/pftrace/build.rs).

#[path = "capi/build.rs"]
mod capi;
#[path = "rocpd/pftrace/build.rs"]
mod pftrace;

fn main() {
    println!("cargo:rerun-if-changed=src/build.rs");
    capi::configure();
    pftrace::generate();
}
