//! Shared helpers of the ndvm-bench integration tests: the workspace root, scratch folders, and
//! the path of the workspace's vendored test data (copied from search/tests/common/mod.rs). Every
//! test that reads `testdata/` goes through [`testdata`], which panics with the path when the file
//! is missing: missing data is a failure, never a silent skip.

use std::path::{Path, PathBuf};

/// Absolute path of `testdata/<rel>` under the workspace root; panics loudly when it is missing.
#[allow(dead_code)] // each test binary compiles this module and uses part of it
pub(crate) fn testdata(rel: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata")
        .join(rel);
    assert!(
        path.exists(),
        "required test data is missing: {} (see testdata/README.md; tests never skip)",
        path.display()
    );
    path
}

/// The workspace root (the parent of `bench/`).
#[allow(dead_code)] // each test binary compiles this module and uses part of it
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("bench/ has a parent")
        .to_path_buf()
}

/// A fresh, empty scratch folder `<suite>-<name>` under the target's temporary folder.
#[allow(dead_code)] // each test binary compiles this module and uses part of it
pub(crate) fn scratch(suite: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{suite}-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A JSON file, parsed; panics with the path when it cannot be read.
#[allow(dead_code)] // each test binary compiles this module and uses part of it
pub(crate) fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// MSE / population variance of the target, computed here (not by the code under test).
#[allow(dead_code)] // each test binary compiles this module and uses part of it
pub(crate) fn nmse(pred: &[f64], y: &[f64]) -> f64 {
    let n = y.len() as f64;
    let mean = y.iter().sum::<f64>() / n;
    let mse = pred
        .iter()
        .zip(y)
        .map(|(p, t)| (p - t).powi(2))
        .sum::<f64>()
        / n;
    let var = y.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / n;
    mse / var
}
