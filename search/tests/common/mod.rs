//! Shared helper of the ndvm-search integration tests: the path of the workspace's vendored test
//! data. Every test that reads `testdata/` goes through [`testdata`], which panics with the path
//! when the file is missing: missing data is a failure, never a silent skip.

use std::path::{Path, PathBuf};

/// Absolute path of `testdata/<rel>` under the workspace root; panics loudly when it is missing.
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
