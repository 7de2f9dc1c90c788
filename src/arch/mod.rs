//! Architecture-specific register frames and stubs.
