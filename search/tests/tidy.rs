//! Tidy: workspace-wide rules checked as tests (STYLE items 4 and 15, and the fresh-clone rule):
//! every `.rs` file opens with a `//!` doc, only the binary names the CLI/error-context crates, and
//! no file in the repository points outside it at the predecessor's shared folder.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root (the parent of `search/`).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("search/ has a parent")
        .to_path_buf()
}

/// Every file under `dir`, skipping build output (`target/`) and version-control folders.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
            .map(|e| e.unwrap())
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let name = entry.file_name();
            let file_type = entry.file_type().unwrap();
            if file_type.is_dir() {
                if name != "target" && name != ".git" {
                    stack.push(path);
                }
            } else if file_type.is_file() {
                out.push(path);
            }
        }
    }
    out
}

fn rust_files() -> Vec<PathBuf> {
    let files: Vec<PathBuf> = files_under(&workspace_root())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    assert!(
        files.len() > 5,
        "the walk found too few .rs files: {files:?}"
    );
    files
}

fn relative(path: &Path) -> String {
    path.strip_prefix(workspace_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn every_rust_file_starts_with_a_module_doc() {
    let missing: Vec<String> = rust_files()
        .into_iter()
        .filter(|p| !std::fs::read_to_string(p).unwrap().starts_with("//!"))
        .map(|p| relative(&p))
        .collect();
    assert!(
        missing.is_empty(),
        "these files must start with a `//!` comment saying what they own:\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn cli_crates_only_in_the_binary() {
    // Spelled in pieces so this file does not trip its own check.
    let crates = [["any", "how"].concat(), ["cl", "ap"].concat()];
    let bin_dir = workspace_root().join("search/src/bin");
    let mut offenders = Vec::new();
    for path in rust_files() {
        if path.starts_with(&bin_dir) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (line_idx, line) in text.lines().enumerate() {
            let words = line.split(|c: char| !(c.is_alphanumeric() || c == '_'));
            if let Some(word) = words.into_iter().find(|w| crates.iter().any(|c| c == w)) {
                offenders.push(format!("{}:{}: `{word}`", relative(&path), line_idx + 1));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "only search/src/bin/ may use these crates (STYLE item 15):\n  {}",
        offenders.join("\n  ")
    );
}

/// The repository's files: tracked ones and untracked ones git does not ignore (`git ls-files`).
fn repository_files() -> Vec<PathBuf> {
    let root = workspace_root();
    let out = Command::new("git")
        .arg("-C")
        .arg(&root)
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .output()
        .unwrap_or_else(|e| panic!("cannot run git ls-files in {}: {e}", root.display()));
    assert!(
        out.status.success(),
        "git ls-files failed in {}: {}",
        root.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let files: Vec<PathBuf> = String::from_utf8(out.stdout)
        .expect("git ls-files prints UTF-8 paths")
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(|p| root.join(p))
        .collect();
    assert!(
        files.len() > 20,
        "git ls-files found too few files: {files:?}"
    );
    files
}

#[test]
fn nothing_points_outside_the_repository() {
    // Spelled in pieces so this file does not trip its own check.
    let needle = ["..", "/", "shared"].concat();
    // The one file allowed to name the origin of the vendored data.
    let provenance = workspace_root().join("testdata/README.md");
    let mut offenders = Vec::new();
    for path in repository_files() {
        if path == provenance {
            continue;
        }
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            // Deleted in the working tree but still in the index: nothing to check.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("cannot read {}: {e}", path.display()),
        };
        let text = String::from_utf8_lossy(&bytes);
        for (line_idx, line) in text.lines().enumerate() {
            if line.contains(&needle) {
                offenders.push(format!(
                    "{}:{}: {}",
                    relative(&path),
                    line_idx + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "a fresh clone has nothing beside it: read reference data from testdata/ (see testdata/README.md), \
         not from {needle}:\n  {}",
        offenders.join("\n  ")
    );
}
