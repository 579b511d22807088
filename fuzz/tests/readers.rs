//! Reader and loader fuzzing on the stable toolchain: the Scheme and infix readers, the task
//! loader, the cache (JSONL) reader and the CSV reader never panic, on arbitrary text and on
//! mutations of the repository's own files. (libFuzzer targets for the same live in
//! `fuzz-targets/`.)

use std::path::Path;

use ndvm_core::Heap;
use ndvm_frontends::{Frontend, infix::Infix, render_parse_error, scheme::Scheme};
use ndvm_search::{matrix_csv, propose::replay, task};
use proptest::prelude::*;

fn repo_file(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// `text` with `piece` written over it at `at` (a byte offset moved to a char boundary).
fn splice(text: &str, at: usize, cut: usize, piece: &str) -> String {
    let mut at = at % (text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let mut end = (at + cut).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    format!("{}{}{}", &text[..at], piece, &text[end..])
}

fn read_scheme(src: &str) {
    let mut heap = Heap::new();
    match Scheme.parse(&mut heap, src) {
        Ok(p) => {
            let _ = Scheme.print(&heap, &p);
        }
        Err(e) => {
            let _ = render_parse_error("fuzz.scm", src, &e);
        }
    }
}

fn read_infix(src: &str) {
    let mut heap = Heap::new();
    match Infix.parse(&mut heap, src) {
        Ok(p) => {
            let _ = Infix.print(&heap, &p);
        }
        Err(e) => {
            let _ = render_parse_error("fuzz.infix", src, &e);
        }
    }
}

fn load_task(text: &str) {
    let _ = task::parse_spec(Path::new("fuzz.yaml"), text);
}

fn read_cache(text: &str) {
    let _ = replay::parse_cache(Path::new("fuzz.jsonl"), text);
}

fn read_csv(text: &str) {
    for delimiter in [b',', b';'] {
        let _ = matrix_csv::parse(Path::new("fuzz.csv"), text, delimiter);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn scheme_reader_never_panics(src in "[()a-z0-9 .'`,@#;\"\\\\\n+-]{0,200}", any_text in ".{0,100}") {
        read_scheme(&src);
        read_scheme(&any_text);
    }

    #[test]
    fn infix_reader_never_panics(src in "[()a-z0-9 .,;=+*/^<>!&|{}\\[\\]\n-]{0,200}", any_text in ".{0,100}") {
        read_infix(&src);
        read_infix(&any_text);
    }

    #[test]
    fn task_loader_never_panics(
        at in 0usize..4000, cut in 0usize..40, piece in "[a-z_:\\- \n0-9\\[\\]{}\",.#&*!|>'%@]{0,30}",
        any_text in "[a-z_:\\- \n0-9\\[\\]{}\",.#&*!|>']{0,300}",
    ) {
        load_task(&any_text);
        for name in ["tasks/symreg.yaml", "tasks/kalman.yaml", "tasks/recovery.yaml"] {
            load_task(&splice(&repo_file(name), at, cut, &piece));
        }
    }

    #[test]
    fn cache_reader_never_panics(
        at in 0usize..20000, cut in 0usize..40, piece in "[{}\\[\\]\":,a-z0-9 \n.\\\\-]{0,30}",
        any_text in "[{}\\[\\]\":,a-z0-9 \n.\\\\-]{0,300}",
    ) {
        read_cache(&any_text);
        read_cache(&splice(&repo_file("caches/kalman.jsonl"), at, cut, &piece));
    }

    #[test]
    fn csv_reader_never_panics(
        at in 0usize..2000, cut in 0usize..20, piece in "[0-9,.;eE+\\- \n\"a-z]{0,20}",
        any_text in "[0-9,.;eE+\\- \n\"a-z]{0,300}",
    ) {
        read_csv(&any_text);
        let csv = repo_file("testdata/llmsr-data/oscillator1/train.csv");
        let head: String = csv.lines().take(40).map(|l| format!("{l}\n")).collect();
        read_csv(&splice(&head, at, cut, &piece));
    }
}
