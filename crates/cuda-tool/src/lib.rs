//! The CUDA tool library (skeleton; being written).
#![deny(missing_docs)]
