//! ndvm-frontends: surface syntax to heap programs (placeholder).
#![forbid(unsafe_code)]
