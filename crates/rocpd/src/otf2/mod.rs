//! rocpd → OTF2 archive (`<name>_results.otf2` + `.def` + event directory) through the real OTF2
//! library (Debian's libopen-trace-format2-dev), built wherever the build finds the library
//! (`cfg(have_otf2)`, set by this crate's build.rs from crates/otf2-sys/build.rs).

#[cfg(have_otf2)]
mod archive;

use super::output::OutputSet;
use super::pftrace::PftraceOptions;
use super::reader::Source;
use super::window::MaybeWindow;
use crate::{Error, Result};

/// What the archive holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Regions entered and left (kernels, API calls, copies).
    pub regions: u64,
    /// Locations (threads, streams, queues).
    pub locations: u64,
}

/// Names the archive occupies in the output directory.
pub fn file_names(name: &str) -> Vec<String> {
    vec![
        format!("{name}_results.otf2"),
        format!("{name}_results.def"),
        format!("{name}_results"),
    ]
}

/// Fails with the build instructions when this binary was built without OTF2 support.
pub fn check_available() -> Result<()> {
    if cfg!(have_otf2) {
        Ok(())
    } else {
        Err(Error::usage(missing_message(rocprof_otf2::BUILD_NOTE)))
    }
}

/// The one-line error of `-f otf2` in a build without OTF2: why (`note`, the build script's
/// words), how to get the library and how to rebuild. Compiled in every build, so it is tested
/// in builds with OTF2 as well.
pub fn missing_message(note: &str) -> String {
    format!(
        "this rocprof-attach was built without OTF2 support ({note}); install the OTF2 library \
         (Debian/Ubuntu: `apt-get install libopen-trace-format2-dev`; elsewhere OTF2 3.x from \
         https://www.vi-hps.org/projects/score-p, installed so that `pkg-config otf2` or \
         `otf2-config` finds it) and rebuild with `ROCPROF_ATTACH_OTF2=on` \
         (`ROCPROF_ATTACH_OTF2=on cargo install --path .`, `cargo build --release` or \
         `pip install .`; `on` makes a library still missing a build error)"
    )
}

/// Writes the OTF2 archive (`<name>_results.otf2`, `<name>_results.def`, `<name>_results/`)
/// into `out` (renamed into place on commit).
#[cfg_attr(not(have_otf2), allow(unused_variables))]
pub fn write(
    sources: &[Source<'_>],
    opts: PftraceOptions,
    window: MaybeWindow,
    out: &mut OutputSet,
    name: &str,
) -> Result<Counts> {
    check_available()?;
    #[cfg(have_otf2)]
    {
        archive::write(sources, opts, window, out, name)
    }
    #[cfg(not(have_otf2))]
    {
        unreachable!("check_available fails without OTF2")
    }
}
