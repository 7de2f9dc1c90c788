//! `rocprof-attach install-library --prefix DIR`: put the C library under the names ROCm's tools
//! load, with its header and the agent executable it needs.
//!
//! ```text
//! DIR/lib/librocprofiler-sdk-rocattach.so.1                 the library (soname .so.1)
//! DIR/lib/librocprofiler-sdk-rocattach.so                   -> librocprofiler-sdk-rocattach.so.1
//! DIR/lib/librocprofv3-attach.so                            -> librocprofiler-sdk-rocattach.so.1
//! DIR/lib/rocprofiler-sdk/librocprofv3-attach.so            -> ../librocprofiler-sdk-rocattach.so.1
//! DIR/bin/rocprof-attach                                    the agent (and the CLI)
//! DIR/include/rocprofiler-sdk-rocattach/rocattach.h         the C header
//! DIR/lib/rocprof-attach/librocprof_cuda_tool.so             the CUDA tool, when it is found
//! ```
//! The links point at one file, so a process that loads two of the names still has one session
//! map. The library finds the agent in `../bin` (crates/capi/src/agent.rs).

#![deny(clippy::print_stdout, clippy::print_stderr)]

use crate::cli::stdio::{errln, outln};
use crate::exit::ExitCode;
use std::path::{Path, PathBuf};

/// The C header, as installed.
pub const HEADER: &str = include_str!("../../crates/capi/include/rocattach.h");

/// File name of the library under its soname.
pub const SONAME: &str = "librocprofiler-sdk-rocattach.so.1";

/// File name cargo gives the C ABI library (crates/capi).
pub const CARGO_NAME: &str = "librocattach.so";

/// The command line of `install-library` (a subcommand of [`crate::cli::Cli`]).
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// Install under DIR/lib, DIR/bin and DIR/include
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub prefix: PathBuf,
    /// The library to install (default: the one built or installed with this rocprof-attach)
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub library: Option<PathBuf>,
}

/// Runs `install-library`.
pub fn run(parsed: &InstallArgs) -> ExitCode {
    match install(&parsed.prefix, parsed.library.as_deref()) {
        Ok(files) => {
            for f in files {
                outln!("{}", f.display());
            }
            ExitCode::Success
        }
        Err(msg) => {
            errln!("rocprof-attach: error: {msg}");
            ExitCode::Failure
        }
    }
}

/// Install into `prefix`; returns the files and links created.
pub fn install(prefix: &Path, library: Option<&Path>) -> Result<Vec<PathBuf>, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find the rocprof-attach executable: {e}"))?;
    let library = match library {
        Some(l) => l.to_path_buf(),
        None => find_library(&exe)?,
    };
    let lib = prefix.join("lib");
    let sdk = lib.join("rocprofiler-sdk");
    let bin = prefix.join("bin");
    let inc = prefix.join("include/rocprofiler-sdk-rocattach");
    for d in [&lib, &sdk, &bin, &inc] {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    let mut done = Vec::new();
    done.push(copy(&library, &lib.join(SONAME), 0o755)?);
    for (dir, name, to) in [
        (&lib, "librocprofiler-sdk-rocattach.so", SONAME.to_string()),
        (&lib, "librocprofv3-attach.so", SONAME.to_string()),
        (&sdk, "librocprofv3-attach.so", format!("../{SONAME}")),
    ] {
        done.push(link(&to, &dir.join(name))?);
    }
    let agent = bin.join("rocprof-attach");
    if !same_file(&exe, &agent) {
        done.push(copy(&exe, &agent, 0o755)?);
    }
    let header = inc.join("rocattach.h");
    write_atomic(&header, HEADER.as_bytes(), 0o644)?;
    done.push(header);
    done.extend(install_cuda_tool(&lib)?);
    Ok(done)
}

/// The CUDA tool library, where `bin/rocprof-attach` looks for it (`../lib/rocprof-attach/`),
/// if this rocprof-attach finds one; a note on stderr if not (CUDA processes then need
/// `ROCPROF_ATTACH_CUDA_TOOL`).
fn install_cuda_tool(lib: &Path) -> Result<Option<PathBuf>, String> {
    use crate::attach::cuda::{preflight::tool_candidates, TOOL_FILE};
    let dest = lib.join("rocprof-attach").join(TOOL_FILE);
    let Some(tool) = tool_candidates()
        .into_iter()
        .find(|p| p.is_file() && !same_file(p, &dest))
    else {
        if dest.is_file() {
            return Ok(Some(dest));
        }
        errln!(
            "rocprof-attach: note: the CUDA tool library ({TOOL_FILE}) was not found beside this \
             executable, so it is not installed; build it with `cargo build --release -p rocprof-cuda-tool` \
             and run install-library again, or point ROCPROF_ATTACH_CUDA_TOOL at it"
        );
        return Ok(None);
    };
    let dir = lib.join("rocprof-attach");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    copy(&tool, &dest, 0o755).map(Some)
}

/// The library built or installed with this executable.
fn find_library(exe: &Path) -> Result<PathBuf, String> {
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let mut candidates = vec![dir.join(CARGO_NAME), dir.join("../lib").join(SONAME)];
    // A pip install: <venv>/bin/rocprof-attach and <venv>/lib/pythonX.Y/site-packages/rocprof_attach/.
    for pkg in crate::attach::toolsearch::pip_package_dirs(dir) {
        candidates.extend(crate::attach::toolsearch::shared_objects(
            &pkg,
            "_rocattach",
        ));
    }
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            format!(
                "cannot find the rocattach library next to {} (looked for {CARGO_NAME} and {SONAME}); build it \
                 with `cargo build --release` or pass --library FILE",
                exe.display()
            )
        })
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Copy through a temporary file and rename, so a process that has the old file mapped keeps it.
fn copy(from: &Path, to: &Path, mode: u32) -> Result<PathBuf, String> {
    let data = std::fs::read(from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
    write_atomic(to, &data, mode)?;
    Ok(to.to_path_buf())
}

fn write_atomic(to: &Path, data: &[u8], mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let tmp = to.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, data)
        .and_then(|()| std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)))
        .and_then(|()| std::fs::rename(&tmp, to))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write {}: {e}", to.display())
        })
}

fn link(target: &str, at: &Path) -> Result<PathBuf, String> {
    if std::fs::symlink_metadata(at).is_ok() {
        std::fs::remove_file(at).map_err(|e| format!("cannot replace {}: {e}", at.display()))?;
    }
    std::os::unix::fs::symlink(target, at)
        .map_err(|e| format!("cannot create the link {}: {e}", at.display()))?;
    Ok(at.to_path_buf())
}
