//! rocpd databases: model, reader, writer, converters (work in progress).

/// Entry point of the `convert` and `summary` subcommands. `args[0]` is the subcommand name.
pub fn cli_main(args: &[std::ffi::OsString]) -> crate::ExitCode {
    let _ = args;
    crate::ExitCode::Failure
}
