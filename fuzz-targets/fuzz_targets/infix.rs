//! Fuzz target: the infix parser never panics, and a program it reads either prints back to
//! infix text that reads as the same heap forms, or is refused by the printer with an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ndvm_core::{Heap, print};
use ndvm_frontends::{Frontend, infix::Infix, render_parse_error};

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let mut heap = Heap::new();
    match Infix.parse(&mut heap, src) {
        Err(err) => {
            let _ = render_parse_error("fuzz.infix", src, &err);
        }
        Ok(program) => {
            let Ok(text) = Infix.print(&heap, &program) else {
                return;
            };
            let mut again = Heap::new();
            let back = Infix
                .parse(&mut again, &text)
                .expect("printed infix reads back");
            assert_eq!(
                print::program_to_string(&again, &back).ok(),
                print::program_to_string(&heap, &program).ok(),
            );
            assert_eq!(Infix.print(&again, &back).ok(), Some(text));
        }
    }
});
