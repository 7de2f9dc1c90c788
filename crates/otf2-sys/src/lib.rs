//! A small, safe wrapper over the parts of the OTF2 writer API that rocprof-attach uses: one
//! archive, per-location event writers with Enter/Leave records, and the global definitions
//! (strings, regions, system tree, location groups, locations, clock properties).
//!
//! Declarations follow OTF2 3.0's headers (`/usr/include/otf2/*.h`). The archive is written
//! serially from one thread. Chunks come from our own allocator ([`EVT_CHUNKS_PER_LOCATION`]):
//! when a location's event buffer holds that many chunks, OTF2 writes them to its file and reuses
//! the memory, so memory stays bounded whatever the number of events (OTF2's own allocator lets
//! each buffer grow to 128 MiB before it writes anything).
//!
//! Built only where the OTF2 library is: build.rs finds it (`pkg-config otf2`, `otf2-config`, the
//! Debian paths) and links it, or, when it is missing or turned off (`ROCPROF_ATTACH_OTF2=off`),
//! builds this crate empty but for [`AVAILABLE`] (false) and [`BUILD_NOTE`] (why).

#![deny(missing_docs)]

#[cfg(have_otf2)]
mod writer;
#[cfg(have_otf2)]
pub use writer::*;

/// Whether this build has the OTF2 writer (build.rs found and linked the library).
pub const AVAILABLE: bool = cfg!(have_otf2);

/// How build.rs decided, in a few words: where it found the library, or why it built without it
/// ("the OTF2 library was not found (...)", "turned off with ROCPROF_ATTACH_OTF2=off", a static
/// build without the library's static archive).
pub const BUILD_NOTE: &str = env!("ROCPROF_OTF2_BUILD_NOTE");

// The build script's decision logic, compiled here too so its unit tests run with this crate's.
#[cfg(test)]
#[allow(dead_code)]
#[path = "../probe.rs"]
mod probe;
