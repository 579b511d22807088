//! The `ndvm-search` command line (placeholder).
fn main() {}
