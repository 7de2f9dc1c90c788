//! Architecture-specific parts of injection: the register frame, the stub bytes, syscall numbers.
//!
//! Everything the injector needs from a CPU lives behind this module so another architecture
//! (aarch64: `svc #0; brk #0` and `blr x8; brk #0`, no red zone) can be added beside x86-64.

#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
pub use x86_64::*;

#[cfg(not(target_arch = "x86_64"))]
mod unsupported;
#[cfg(not(target_arch = "x86_64"))]
pub use unsupported::*;

/// Result of a raw syscall return value: a value in -4095..-1 is `-errno` (Linux convention on
/// every architecture).
pub fn syscall_result(raw: u64) -> std::result::Result<u64, i32> {
    let v = raw as i64;
    if (-4095..0).contains(&v) {
        Err((-v) as i32)
    } else {
        Ok(raw)
    }
}
