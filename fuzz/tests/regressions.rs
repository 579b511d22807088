//! Every shrunk failure kept in `fuzz/regressions/` replayed with every oracle: each must now be
//! checked (not skipped) and pass.

use std::path::Path;

use ndvm_fuzz::oracle::{self, Pool};
use ndvm_fuzz::run;

#[test]
fn every_regression_passes_every_oracle() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "scm"))
        .collect();
    paths.sort();
    assert!(
        paths.len() >= 4,
        "expected the kept regressions, found {paths:?}"
    );
    let mut pool = Pool::new();
    let mut failed = Vec::new();
    for path in &paths {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let reg = run::read_regression(path, &text).unwrap_or_else(|e| panic!("{e}"));
        assert!(reg.oracle.is_some(), "{}: no oracle line", path.display());
        let out = oracle::check(&reg.case, &mut pool, None);
        if out.skipped.is_some() || !out.failures.is_empty() {
            failed.push(format!(
                "{}: skipped {:?}, failures {:?}",
                path.display(),
                out.skipped,
                out.failures
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "regressions fail again:\n{}",
        failed.join("\n")
    );
}
