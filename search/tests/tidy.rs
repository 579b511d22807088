//! Tidy: workspace-wide rules checked as tests (STYLE items 4 and 15, and the seed-data rule):
//! every `.rs` file opens with a `//!` doc, only the binary names the CLI/error-context crates, and
//! no file in the repository is a copy of a file in `../shared/seed-data`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The workspace root (the parent of `search/`).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("search/ has a parent")
        .to_path_buf()
}

/// The seed-data folder shared by all sessions; fails loudly when it is missing.
fn seed_data() -> PathBuf {
    let dir = workspace_root().join("../shared/seed-data");
    assert!(
        dir.is_dir(),
        "the shared seed data is missing: expected {} (the workspace must sit next to ../shared)",
        dir.display()
    );
    dir
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

#[test]
fn no_copies_of_seed_data() {
    let mut seeds: HashMap<u64, Vec<(PathBuf, Vec<u8>)>> = HashMap::new();
    for path in files_under(&seed_data()) {
        let bytes = std::fs::read(&path).unwrap();
        seeds
            .entry(bytes.len() as u64)
            .or_default()
            .push((path, bytes));
    }
    let mut copies = Vec::new();
    for path in files_under(&workspace_root()) {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let Some(candidates) = seeds.get(&meta.len()) else {
            continue;
        };
        let bytes = std::fs::read(&path).unwrap();
        for (seed, seed_bytes) in candidates {
            if *seed_bytes == bytes {
                copies.push(format!(
                    "{} is a copy of {}",
                    relative(&path),
                    seed.display()
                ));
            }
        }
    }
    assert!(
        copies.is_empty(),
        "point tests at ../shared/seed-data instead of copying it:\n  {}",
        copies.join("\n  ")
    );
}
