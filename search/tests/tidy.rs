//! Tidy: workspace-wide rules checked as tests (STYLE items 4 and 15, and the fresh-clone rule):
//! every `.rs` file opens with a `//!` doc, only the binaries name the CLI/error-context crates, and
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
    // The binaries: ndvm-search's and ndvm-bench's (the bench library is held to the rule too).
    let bin_dirs = ["search/src/bin", "bench/src/bin"].map(|d| workspace_root().join(d));
    let mut offenders = Vec::new();
    for path in rust_files() {
        if bin_dirs.iter().any(|d| path.starts_with(d)) {
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
        "only search/src/bin/ and bench/src/bin/ may use these crates (STYLE item 15):\n  {}",
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

/// The layers of `ndvm-search`, lowest first: a module may name modules of its own layer or
/// below, never above (ARCHITECTURE.md, "Layers inside search/").
const LAYERS: [&[&str]; 6] = [
    // The run's vocabulary and what everything reads with.
    &[
        "error",
        "events",
        "secret",
        "source",
        "textfile",
        "matrix_csv",
        "validate",
        "report",
        "begun",
        "interrupt",
        "selfhost",
    ],
    &["task"],
    &["propose"],
    &["observe", "engine"],
    &["select", "summary", "results", "plots"],
    // Subcommands.
    &[
        "runcmd",
        "evalcmd",
        "calibratecmd",
        "translatecmd",
        "batch",
        "slurmcmd",
    ],
];

/// The `crate::` modules a source file names outside comments and its test module.
fn named_modules(text: &str) -> Vec<String> {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    let mut out = Vec::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let names: Vec<&str> = match rest.strip_prefix('{') {
                Some(group) => group
                    .split('}')
                    .next()
                    .unwrap_or("")
                    .split(',')
                    .map(|p| {
                        p.trim()
                            .split(|c: char| !c.is_alphanumeric() && c != '_')
                            .next()
                            .unwrap_or("")
                    })
                    .collect(),
                None => vec![
                    rest.split(|c: char| !c.is_alphanumeric() && c != '_')
                        .next()
                        .unwrap_or(""),
                ],
            };
            out.extend(
                names
                    .into_iter()
                    .filter(|n| n.starts_with(|c: char| c.is_ascii_lowercase()))
                    .map(str::to_string),
            );
        }
    }
    out
}

#[test]
fn search_imports_point_down_its_layers() {
    let src = workspace_root().join("search/src");
    let layer_of = |m: &str| LAYERS.iter().position(|l| l.contains(&m));
    let mut problems = Vec::new();
    for path in files_under(&src) {
        let rel = path.strip_prefix(&src).unwrap();
        let top = rel
            .iter()
            .next()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "bin" {
            continue;
        }
        let Some(own) = layer_of(&top) else {
            problems.push(format!(
                "{}: module `{top}` is in no layer of tidy.rs",
                rel.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap();
        for m in named_modules(&text) {
            match layer_of(&m) {
                Some(l) if l > own => problems.push(format!(
                    "{}: `{top}` (layer {own}) names `crate::{m}` (layer {l})",
                    rel.display()
                )),
                None if m != top => problems.push(format!(
                    "{}: `crate::{m}` is in no layer of tidy.rs",
                    rel.display()
                )),
                _ => {}
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The longest a non-test function may be, in lines (its signature to its closing brace).
const MAX_FUNCTION_LINES: usize = 150;

/// `(name, first line, lines)` of every function with a body in `text` outside its test module:
/// a `fn` line and the closing brace at the same indentation.
fn function_lengths(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let stop = lines
        .windows(2)
        .position(|w| w[0].starts_with("#[cfg(test)]") && w[1].starts_with("mod tests"))
        .unwrap_or(lines.len());
    let mut out = Vec::new();
    for i in 0..stop {
        let line = lines[i];
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let after_vis = trimmed
            .strip_prefix("pub(crate) ")
            .or_else(|| trimmed.strip_prefix("pub(super) "))
            .or_else(|| trimmed.strip_prefix("pub "))
            .unwrap_or(trimmed);
        let after_mods = after_vis
            .trim_start_matches("const ")
            .trim_start_matches("unsafe ");
        let Some(rest) = after_mods.strip_prefix("fn ") else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The signature ends at `{` (a body) or `;` (a declaration).
        let Some(open) = (i..stop).find(|&j| {
            let t = lines[j].trim_end();
            t.ends_with('{') || t.ends_with(';')
        }) else {
            continue;
        };
        if lines[open].trim_end().ends_with(';') {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = (open + 1..stop).find(|&j| lines[j] == close) {
            out.push((name, i + 1, end - i + 1));
        }
    }
    out
}

#[test]
fn no_function_is_longer_than_the_limit() {
    let mut long = Vec::new();
    let mut seen = 0;
    for path in rust_files() {
        let rel = relative(&path);
        // Library and binary code; tests, benches and build scripts are not held to it.
        if !rel.contains("/src/") || rel.starts_with("fuzz-targets/") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (name, line, n) in function_lengths(&text) {
            seen += 1;
            if n > MAX_FUNCTION_LINES {
                long.push(format!("{rel}:{line}: fn {name} is {n} lines"));
            }
        }
    }
    assert!(seen > 1000, "the walk found only {seen} functions");
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (split them by what they decide):\n{}",
        long.join("\n")
    );
    // The measure itself: a known short function and a declaration.
    let sample = "fn a() {\n    let x = 1;\n}\ntrait T {\n    fn b(&self);\n}\n";
    assert_eq!(function_lengths(sample), vec![("a".to_string(), 1, 3)]);
}

/// The `.rs` names ARCHITECTURE.md writes in backticks.
fn architecture_names(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| s.ends_with(".rs") && !s.contains(char::is_whitespace))
        .map(str::to_string)
        .collect()
}

#[test]
fn architecture_names_every_module_of_search_and_core_and_only_real_ones() {
    let root = workspace_root();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let named = architecture_names(&text);
    let all: Vec<PathBuf> = rust_files();
    let mut problems = Vec::new();
    for krate in ["search", "core"] {
        let src = root.join(krate).join("src");
        for path in files_under(&src) {
            let rel = path.strip_prefix(&src).unwrap().display().to_string();
            let file = path.file_name().unwrap().to_string_lossy().to_string();
            if matches!(file.as_str(), "mod.rs" | "lib.rs" | "main.rs") {
                continue;
            }
            let suffix = |n: &String| rel == *n || rel.ends_with(&format!("/{n}")) || file == *n;
            if !named.iter().any(suffix) {
                problems.push(format!(
                    "{krate}/src/{rel} is not in ARCHITECTURE.md's codemap"
                ));
            }
        }
    }
    for n in &named {
        let exists = all
            .iter()
            .any(|p| relative(p).ends_with(n.trim_start_matches("./")));
        if !exists {
            problems.push(format!(
                "ARCHITECTURE.md names `{n}`, which is not in the repository"
            ));
        }
    }
    // `nothing_points_outside_the_repository` covers the shared folder itself.
    for outside in ["DESIGN.md", "/work/", "/root/"] {
        if text.contains(outside) {
            problems.push(format!(
                "ARCHITECTURE.md refers outside the repository: {outside}"
            ));
        }
    }
    assert!(named.len() > 50, "{} names", named.len());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
