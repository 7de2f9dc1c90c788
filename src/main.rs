//! `rocprof-attach` binary: all logic lives in the library; this only maps the result to an exit code.

fn main() {
    // A panic is one line and exit code 1 (src/cli/crash.rs); only the binary installs the hook.
    rocprof_attach::cli::crash::install();
    // Hidden: the injection agent spawned by the rocattach C library (docs/library.md).
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(
            rocprof_attach::engine::agent::exec::AGENT_ARG,
        ))
    {
        rocprof_attach::engine::agent::exec::agent_stdio_main();
    }
    // Hidden: the agent server the rocattach C library starts for each session it attaches.
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(
            rocprof_attach::engine::agent::server::SERVER_ARG,
        ))
    {
        rocprof_attach::engine::agent::server::serve_stdin();
    }
    // An attach session forks its agent server first thing, while the process is small.
    if rocprof_attach::cli::starts_a_session(std::env::args_os().skip(1)) {
        rocprof_attach::engine::agent::prestart();
    }
    std::process::exit(rocprof_attach::cli::main());
}
