//! Fuzz target: the Scheme reader never panics, and what it reads prints back to text that reads
//! as the same program.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ndvm_core::{Heap, print};
use ndvm_frontends::{Frontend, render_parse_error, scheme::Scheme};

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let mut heap = Heap::new();
    match Scheme.parse(&mut heap, src) {
        Err(err) => {
            let _ = render_parse_error("fuzz.scm", src, &err);
        }
        Ok(program) => {
            let text = Scheme
                .print(&heap, &program)
                .expect("a read program prints");
            let mut again = Heap::new();
            let back = Scheme
                .parse(&mut again, &text)
                .expect("printed text reads back");
            assert_eq!(
                print::program_to_string(&again, &back).ok(),
                print::program_to_string(&heap, &program).ok(),
            );
        }
    }
});
