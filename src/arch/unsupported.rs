//! Placeholder for architectures without an injection backend: every entry point refuses.

use crate::error::{Error, Result};

/// Fails with a clear "not supported" error on this architecture.
pub fn ensure_supported() -> Result<()> {
    Err(Error::UnsupportedArch {
        arch: std::env::consts::ARCH,
    })
}
