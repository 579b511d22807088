//! ndvm-search: the outer loop and the only crate that touches files (placeholder).
#![forbid(unsafe_code)]
