//! Shared helpers of the ndvm-search integration tests: the workspace root, scratch folders, and
//! the path of the workspace's vendored test data. Every test that reads `testdata/` goes through [`testdata`], which panics with the path
//! when the file is missing: missing data is a failure, never a silent skip.

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

/// The workspace root (the parent of `search/`).
#[allow(dead_code)] // each test binary compiles this module and uses part of it
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("search/ has a parent")
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

/// Each line of `events.jsonl` in `dir` as JSON, without the fields named in `drop` (the
/// wall-clock ones, say, to compare two runs).
#[allow(dead_code)] // each test binary compiles this module and uses part of it
pub(crate) fn events_without(dir: &Path, drop: &[&str]) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if let Some(o) = v.as_object_mut() {
                for key in drop {
                    o.remove(*key);
                }
            }
            v
        })
        .collect()
}

/// Runs `ndvm-search ARGS` in the workspace root (no Slurm variables) and returns its output;
/// panics with its standard error when it fails.
#[allow(dead_code)] // each test binary compiles this module and uses part of it
pub(crate) fn run_ok(args: &[&str]) -> std::process::Output {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_ndvm-search"));
    c.current_dir(root()).args(args);
    c.env_remove("SLURM_ARRAY_TASK_ID");
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "ndvm-search {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `ndvm-search run TASK --out OUT --threads THREADS -q` (see [`run_ok`]).
#[allow(dead_code)] // each test binary compiles this module and uses part of it
pub(crate) fn run_at(task: &Path, out: &Path, threads: &str) -> std::process::Output {
    let (task, out) = (task.to_str().unwrap(), out.to_str().unwrap());
    run_ok(&["run", task, "--out", out, "--threads", threads, "-q"])
}

/// `summary.json` of the run folder `dir`.
#[allow(dead_code)] // each test binary compiles this module and uses part of it
pub(crate) fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

/// `summary.json` without its `run` (wall-clock) section, as text.
#[allow(dead_code)] // each test binary compiles this module and uses part of it
pub(crate) fn summary_core(dir: &Path) -> String {
    let mut v = summary(dir);
    v.as_object_mut().unwrap().remove("run");
    serde_json::to_string_pretty(&v).unwrap()
}
