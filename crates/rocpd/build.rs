//! Build script: generates the Perfetto trace messages (src/pftrace/protos/*.proto) with prost
//! (the `.proto` files are compiled by `protox`, a pure-Rust protobuf compiler, so no `protoc` is
//! needed), and sets `cfg(have_otf2)` when the OTF2 crate's build script found and linked the
//! library (crates/otf2-sys/build.rs).

/// Writes `$OUT_DIR/perfetto.protos.rs`; sets `cfg(have_otf2)`.
fn main() {
    // `convert -f otf2`: on where rocprof-otf2 found the OTF2 library (its `links` metadata).
    println!("cargo::rustc-check-cfg=cfg(have_otf2)");
    println!("cargo:rerun-if-env-changed=DEP_OPEN_TRACE_FORMAT2_ENABLED");
    if std::env::var("DEP_OPEN_TRACE_FORMAT2_ENABLED").as_deref() == Ok("1") {
        println!("cargo:rustc-cfg=have_otf2");
    }
    let protos = ["src/pftrace/protos/perfetto_trace_subset.proto"];
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    let fds = protox::compile(protos, ["src/pftrace/protos"])
        .unwrap_or_else(|e| panic!("compiling the Perfetto protos: {e}"));
    prost_build::Config::new()
        .compile_fds(fds)
        .unwrap_or_else(|e| panic!("generating the Perfetto messages: {e}"));
}
