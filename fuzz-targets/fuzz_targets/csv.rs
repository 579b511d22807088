//! Fuzz target: the numeric CSV reader never panics on any UTF-8 text, with either delimiter.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use ndvm_search::matrix_csv;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for delimiter in [b',', b';'] {
        if let Ok(m) = matrix_csv::parse(Path::new("fuzz.csv"), text, delimiter) {
            for j in 0..m.cols {
                let _ = m.column(j);
            }
        }
    }
});
