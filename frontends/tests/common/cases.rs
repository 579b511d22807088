//! Data-driven reader cases shared by every front end's tests: the case files of a folder, the
//! `.expect` sidecars (`UPDATE_EXPECT=1` rewrites them) and the failure-case check.

use std::fs;
use std::path::{Path, PathBuf};

use ndvm_core::{Heap, print};
use ndvm_frontends::{Frontend, LineIndex, render_parse_error};

/// The `.{ext}` files of `tests/data/{lang}/{kind}`, sorted; fails loudly when there are none.
pub(crate) fn cases(lang: &str, kind: &str, ext: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(lang)
        .join(kind);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .{ext} files in {}", dir.display());
    files
}

/// Compares `actual` with the sidecar `.expect` of `path` (or rewrites it); returns a failure line.
pub(crate) fn check_expect(path: &Path, actual: &str) -> Option<String> {
    let expect_path = path.with_extension("expect");
    let actual = format!("{actual}\n");
    if std::env::var_os("UPDATE_EXPECT").is_some_and(|v| v == "1") {
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

/// The file name of `path`, as error renderings show it.
pub(crate) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// One failure case: the first line is `{comment} error: P00N at LINE:COL`; reading the file
/// with `frontend` fails with that code at that position, with a lowercase message without a
/// trailing period, and the rendering matches the sidecar.
pub(crate) fn check_failure(frontend: &dyn Frontend, comment: &str, path: &Path) -> Option<String> {
    let src = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let prefix = format!("{comment} error: ");
    let header = src.lines().next().and_then(|l| l.strip_prefix(&prefix));
    let Some((code, at)) = header.and_then(|h| h.split_once(" at ")) else {
        return Some(format!(
            "{}: first line must be `{prefix}P00N at LINE:COL`",
            path.display()
        ));
    };
    let mut heap = Heap::new();
    let err = match frontend.parse(&mut heap, &src) {
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

/// Runs `check` on every file and fails once, listing every failing case.
pub(crate) fn run_cases(files: &[PathBuf], check: impl Fn(&Path) -> Option<String>) {
    let failures: Vec<String> = files.iter().filter_map(|p| check(p)).collect();
    assert!(
        failures.is_empty(),
        "{} failing case(s):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
