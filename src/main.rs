//! `rocprof-attach` binary: all logic lives in the library; this only maps the result to an exit code.

fn main() {
    std::process::exit(rocprof_attach::cli::main());
}
