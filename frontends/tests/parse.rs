//! Data-driven Scheme reader tests: every file under `tests/data/scheme/{success,failure}` is a case.
//!
//! A success file `x.scm` has a sidecar `x.expect` holding the printed program; a failure file
//! starts with `;; error: P00N at LINE:COL` and has a sidecar `x.expect` holding the rendered
//! diagnostic. `UPDATE_EXPECT=1 cargo test -p ndvm-frontends --test parse` rewrites the sidecars.

use std::fs;
use std::path::{Path, PathBuf};

use ndvm_core::{Heap, print};
use ndvm_frontends::{LineIndex, render_parse_error, scheme};

fn data_dir(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/scheme")
        .join(kind)
}

/// The `.scm` files of one folder, sorted; fails loudly when there are none.
fn cases(kind: &str) -> Vec<PathBuf> {
    let dir = data_dir(kind);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "scm"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .scm files in {}", dir.display());
    files
}

fn update_expect() -> bool {
    std::env::var_os("UPDATE_EXPECT").is_some_and(|v| v == "1")
}

/// Compares `actual` with the sidecar `.expect` of `path` (or rewrites it); returns a failure line.
fn check_expect(path: &Path, actual: &str) -> Option<String> {
    let expect_path = path.with_extension("expect");
    let actual = format!("{actual}\n");
    if update_expect() {
        fs::write(&expect_path, &actual)
            .unwrap_or_else(|e| panic!("{}: {e}", expect_path.display()));
        return None;
    }
    match fs::read_to_string(&expect_path) {
        Ok(expected) if expected == actual => None,
        Ok(expected) => Some(format!(
            "{}: output differs from {}\n--- expected\n{expected}--- actual\n{actual}",
            path.display(),
            expect_path.display()
        )),
        Err(e) => Some(format!(
            "{}: {e} (run with UPDATE_EXPECT=1)",
            expect_path.display()
        )),
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

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

/// One failure case: the error has the code and position named in the first line, and its
/// rendering matches the sidecar.
fn check_parse_error(path: &Path) -> Option<String> {
    let src = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let header = src
        .lines()
        .next()
        .and_then(|line| line.strip_prefix(";; error: "));
    let Some((code, at)) = header.and_then(|h| h.split_once(" at ")) else {
        return Some(format!(
            "{}: first line must be `;; error: P00N at LINE:COL`",
            path.display()
        ));
    };
    let mut heap = Heap::new();
    let err = match scheme::parse(&mut heap, &src) {
        Ok(program) => {
            return Some(format!(
                "{}: expected {code}, parsed as\n{:?}",
                path.display(),
                print::program_to_string(&heap, &program)
            ));
        }
        Err(err) => err,
    };
    let (line, col) = LineIndex::new(&src).line_col(err.span.start);
    let actual = format!("{} at {line}:{col}", err.kind.code());
    let expected = format!("{code} at {}", at.trim());
    if actual != expected {
        return Some(format!(
            "{}: expected {expected}, got {actual}: {}",
            path.display(),
            err.message
        ));
    }
    if err.message.is_empty() || err.message.ends_with('.') {
        return Some(format!(
            "{}: message must be non-empty without a trailing period",
            path.display()
        ));
    }
    check_expect(path, &render_parse_error(&file_name(path), &src, &err))
}

fn run(kind: &str, check: fn(&Path) -> Option<String>) {
    let failures: Vec<String> = cases(kind).iter().filter_map(|path| check(path)).collect();
    assert!(
        failures.is_empty(),
        "{} failing case(s):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn success_files_parse_and_print_as_expected() {
    run("success", check_parse);
}

#[test]
fn failure_files_report_the_expected_error() {
    run("failure", check_parse_error);
}
