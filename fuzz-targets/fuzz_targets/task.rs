//! Fuzz target: the task loader's YAML parse (`task::parse_spec`) never panics on any UTF-8 text.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use ndvm_search::task;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = task::parse_spec(Path::new("fuzz.yaml"), text) {
        let _ = e.to_string();
    }
});
