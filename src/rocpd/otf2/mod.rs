//! rocpd → OTF2 archive (`<name>_results.otf2` + `.def` + event directory) through the real OTF2
//! library (Debian's libopen-trace-format2-dev), behind the `otf2` cargo feature.

#[cfg(feature = "otf2")]
mod archive;

use super::output::OutputSet;
use super::pftrace::PftraceOptions;
use super::reader::Source;
use super::window::MaybeWindow;
use crate::rocpd::{Error, Result};

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
    if cfg!(feature = "otf2") {
        Ok(())
    } else {
        Err(Error::usage(
            "this rocprof-attach was built without OTF2 support; install the OTF2 library (Debian/Ubuntu: \
             apt-get install libopen-trace-format2-dev) and rebuild with `cargo build --release --features otf2`",
        ))
    }
}

/// Writes the OTF2 archive (`<name>_results.otf2`, `<name>_results.def`, `<name>_results/`)
/// into `out` (renamed into place on commit).
pub fn write(
    sources: &[Source<'_>],
    opts: PftraceOptions,
    window: MaybeWindow,
    out: &mut OutputSet,
    name: &str,
) -> Result<Counts> {
    check_available()?;
    #[cfg(feature = "otf2")]
    {
        archive::write(sources, opts, window, out, name)
    }
    #[cfg(not(feature = "otf2"))]
    {
        let _ = (sources, opts, window, out, name);
        unreachable!("check_available fails without the otf2 feature")
    }
}
