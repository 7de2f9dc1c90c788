//! Finding a function in the target's copy of a shared library (section 5.8 of the protocol).

use crate::error::Result;

/// A shared object mapped in the target, located and verified.
#[derive(Debug, Clone)]
pub struct RemoteLibrary {
    /// Process id.
    pub pid: i32,
    /// Path of the object as shown in maps.
    pub path: String,
    /// Load bias (address = bias + st_value).
    pub bias: u64,
}

impl RemoteLibrary {
    /// Locate the unique object in `pid` matching `name` (basename, versioned soname, " (deleted)").
    pub fn locate(pid: i32, name: &str) -> Result<Self> {
        let _ = (pid, name);
        todo!()
    }

    /// Absolute address in the target of a defined global/weak function `symbol`.
    pub fn symbol(&self, symbol: &str) -> Result<u64> {
        let _ = symbol;
        todo!()
    }
}
