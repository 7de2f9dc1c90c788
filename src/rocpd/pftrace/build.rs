//! Build step (called from src/build.rs): generates the Perfetto trace messages
//! (src/rocpd/pftrace/protos/*.proto) with prost. The `.proto` files are compiled by `protox`, a
//! pure-Rust protobuf compiler, so no `protoc` is needed.

/// Writes `$OUT_DIR/perfetto.protos.rs`.
pub fn generate() {
    let protos = ["src/rocpd/pftrace/protos/perfetto_trace_subset.proto"];
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    println!("cargo:rerun-if-changed=src/rocpd/pftrace/build.rs");
    let fds = protox::compile(protos, ["src/rocpd/pftrace/protos"])
        .unwrap_or_else(|e| panic!("compiling the Perfetto protos: {e}"));
    prost_build::Config::new()
        .compile_fds(fds)
        .unwrap_or_else(|e| panic!("generating the Perfetto messages: {e}"));
}
