//! Fuzz target: the proposal-cache (JSONL) reader never panics on any UTF-8 text.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use ndvm_search::propose::replay;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = replay::parse_cache(Path::new("fuzz.jsonl"), text) {
        let _ = e.to_string();
    }
});
