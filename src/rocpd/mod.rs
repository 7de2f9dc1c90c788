//! rocpd databases: model, reader, writer, converters (work in progress).

/// Entry point of the `convert` and `summary` subcommands. `args[0]` is the subcommand name.
pub fn cli_main(args: &[std::ffi::OsString]) -> crate::ExitCode {
    let _ = args;
    crate::ExitCode::Failure
}

/// Convert rocpd databases to the given formats (placeholder until the rocpd work lands).
pub fn convert_outputs(
    inputs: &[std::path::PathBuf],
    formats: &[crate::format::OutputFormat],
    out_dir: &std::path::Path,
    out_name: &str,
) -> crate::Result<Vec<std::path::PathBuf>> {
    let _ = (inputs, formats, out_dir, out_name);
    Ok(Vec::new())
}

/// Print a summary of rocpd databases (placeholder until the rocpd work lands).
pub fn print_summary(inputs: &[std::path::PathBuf], top: usize) -> crate::Result<()> {
    let _ = (inputs, top);
    Ok(())
}
