//! Gives the C ABI library the soname ROCm's tools expect.

/// Prints the cdylib's soname.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librocprofiler-sdk-rocattach.so.1");
}
