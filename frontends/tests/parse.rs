//! Data-driven Scheme reader tests: every file under `tests/data/scheme/{success,failure}` is a case.
//!
//! A success file `x.scm` has a sidecar `x.expect` holding the printed program; a failure file
//! starts with `;; error: P00N at LINE:COL` and has a sidecar `x.expect` holding the rendered
//! diagnostic. `UPDATE_EXPECT=1 cargo test -p ndvm-frontends --test parse` rewrites the sidecars.

mod common;

use std::fs;
use std::path::Path;

use common::cases::{cases, check_expect, check_failure, file_name, run_cases};
use ndvm_core::{Heap, print};
use ndvm_frontends::render_parse_error;
use ndvm_frontends::scheme::{self, Scheme};

/// One success case: the file parses, and its printed program matches the sidecar.
fn check_parse(path: &Path) -> Option<String> {
    let src = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut heap = Heap::new();
    match scheme::parse(&mut heap, &src) {
        Ok(program) => match print::program_to_string(&heap, &program) {
            Ok(printed) => check_expect(path, &printed),
            Err(err) => Some(format!("{}: {err}", path.display())),
        },
        Err(err) => Some(format!(
            "{}: expected success\n{}",
            path.display(),
            render_parse_error(&file_name(path), &src, &err)
        )),
    }
}

#[test]
fn success_files_parse_and_print_as_expected() {
    run_cases(&cases("scheme", "success", "scm"), check_parse);
}

#[test]
fn failure_files_report_the_expected_error() {
    run_cases(&cases("scheme", "failure", "scm"), |path| {
        check_failure(&Scheme, ";;", path)
    });
}
