//! `README.md` is executable documentation: every ```` ```sh ```` block runs, in file order, in one
//! scratch copy of the folders the examples read, with the freshly built `ndvm-search` first on
//! `PATH`; a ```` ```text ```` block right after it (blank lines between at most) is its expected
//! stdout, line by line, where `[..]` matches any text within a line. A block that cannot run in
//! a test says why in its info string: ```` ```sh ignore-test: REASON ````.
//!
//! Oracle: the README's own text.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The folders the README's examples read, copied into the scratch folder (a fresh clone has
/// them all).
const DATA_DIRS: [&str; 4] = ["tasks", "caches", "bootstrap", "examples"];

/// Longest one block may run in a debug build before it counts as hung.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(120);

/// Shell dialects that must be written as `sh` so that this test sees them.
const OTHER_SHELLS: [&str; 5] = ["bash", "shell", "console", "zsh", "shell-session"];

/// One fenced block of a Markdown text.
#[derive(Debug)]
struct Block {
    /// One-based line of the opening fence.
    line: usize,
    /// The info string after the fence.
    info: String,
    /// The lines between the fences, each ending in a newline.
    body: String,
    /// Only blank lines separate it from the previous block.
    follows_block: bool,
}

/// One `sh` block to run and the stdout shown after it.
#[derive(Debug, PartialEq)]
struct Example {
    line: usize,
    script: String,
    expect: Option<String>,
}

/// What the README's blocks ask for.
#[derive(Debug, Default)]
struct Plan {
    examples: Vec<Example>,
    /// `(line, reason)` of every `sh ignore-test: REASON` block.
    skipped: Vec<(usize, String)>,
}

fn blocks(text: &str) -> Result<Vec<Block>, String> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    let mut only_blank_since_block = false;
    while let Some((idx, line)) = lines.next() {
        let Some(info) = line.strip_prefix("```") else {
            only_blank_since_block &= line.trim().is_empty();
            continue;
        };
        let mut body = String::new();
        let mut closed = false;
        for (_, inner) in lines.by_ref() {
            if inner.trim_end() == "```" {
                closed = true;
                break;
            }
            body.push_str(inner);
            body.push('\n');
        }
        if !closed {
            return Err(format!("line {}: the block is never closed", idx + 1));
        }
        out.push(Block {
            line: idx + 1,
            info: info.trim().to_string(),
            body,
            follows_block: only_blank_since_block,
        });
        only_blank_since_block = true;
    }
    Ok(out)
}

/// The examples of a Markdown text, or every misuse of the conventions.
fn plan(text: &str) -> Result<Plan, Vec<String>> {
    let mut plan = Plan::default();
    let mut errors = Vec::new();
    // Whether the previous block was an example to run (so a text block after it is its output).
    let mut after_example = false;
    for block in blocks(text).map_err(|e| vec![e])? {
        let (lang, attrs) = block
            .info
            .split_once(char::is_whitespace)
            .map_or((block.info.as_str(), ""), |(l, a)| (l, a.trim()));
        let was_after_example = std::mem::replace(&mut after_example, false);
        match lang {
            "sh" if attrs.is_empty() => {
                plan.examples.push(Example {
                    line: block.line,
                    script: block.body,
                    expect: None,
                });
                after_example = true;
            }
            "sh" => match attrs.strip_prefix("ignore-test:").map(str::trim) {
                Some(reason) if !reason.is_empty() => {
                    plan.skipped.push((block.line, reason.to_string()));
                }
                _ => errors.push(format!(
                    "line {}: `{attrs}`: the only attribute of a sh block is `ignore-test: REASON`",
                    block.line
                )),
            },
            "text" if was_after_example && block.follows_block => {
                if let Some(example) = plan.examples.last_mut() {
                    example.expect = Some(block.body);
                }
            }
            _ if OTHER_SHELLS.contains(&lang) => errors.push(format!(
                "line {}: write shell examples as ```sh so that search/tests/readme.rs runs them",
                block.line
            )),
            _ => {}
        }
    }
    if errors.is_empty() {
        Ok(plan)
    } else {
        Err(errors)
    }
}

/// Whether `line` matches `pattern`, in which each `[..]` stands for any text within the line.
fn line_matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return pattern == line;
    };
    if line.len() < first.len() + last.len() || !line.starts_with(first) || !line.ends_with(last) {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// Whether `actual` has as many lines as `expect` and each matches its pattern.
fn output_matches(expect: &str, actual: &str) -> bool {
    let expect: Vec<&str> = expect.lines().collect();
    let actual: Vec<&str> = actual.lines().collect();
    expect.len() == actual.len()
        && expect
            .iter()
            .zip(&actual)
            .all(|(pattern, line)| line_matches(pattern, line))
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("search/ has a parent")
        .to_path_buf()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Runs one example's script with bash (`-e -o pipefail`) in `dir`; its stdout and stderr go to
/// files beside `dir`. Returns the failure, if any.
fn run_example(example: &Example, dir: &Path, logs: &Path, path_var: &str) -> Option<String> {
    let stdout_path = logs.join(format!("{}.stdout", example.line));
    let stderr_path = logs.join(format!("{}.stderr", example.line));
    let mut child = Command::new("bash")
        .args(["--noprofile", "--norc", "-e", "-o", "pipefail", "-c"])
        .arg(&example.script)
        .current_dir(dir)
        .env("PATH", path_var)
        .env_remove("OPENAI_API_KEY")
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("SLURM_ARRAY_TASK_COUNT")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("bash runs");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > BLOCK_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Some(format!(
                "README.md:{}: still running after {BLOCK_TIMEOUT:?}:\n{}",
                example.line, example.script
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = std::fs::read_to_string(&stdout_path).unwrap();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    if !status.success() {
        return Some(format!(
            "README.md:{}: {status}\n{}--- stdout (end)\n{}--- stderr (end)\n{}",
            example.line,
            example.script,
            tail(&stdout),
            tail(&stderr)
        ));
    }
    match &example.expect {
        Some(expect) if !output_matches(expect, &stdout) => Some(format!(
            "README.md:{}: the output differs from the README\n{}--- README shows\n{expect}--- \
             printed\n{stdout}",
            example.line, example.script
        )),
        _ => None,
    }
}

/// The last 40 lines of a command's output.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(40);
    lines[start..].iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn every_readme_example_runs_and_prints_what_the_readme_shows() {
    let root = workspace_root();
    let text = std::fs::read_to_string(root.join("README.md")).unwrap();
    let plan = plan(&text).unwrap_or_else(|errors| panic!("README.md:\n{}", errors.join("\n")));
    // The README documents the co-search, eval, --jsonl and calibrate with runnable examples.
    assert!(plan.examples.len() >= 6, "{:?}", plan.examples);
    assert!(
        plan.examples.iter().filter(|e| e.expect.is_some()).count() >= 4,
        "{:?}",
        plan.examples
    );

    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("readme");
    let _ = std::fs::remove_dir_all(&scratch);
    let (dir, logs) = (scratch.join("repo"), scratch.join("logs"));
    for name in DATA_DIRS {
        copy_dir(&root.join(name), &dir.join(name));
    }
    std::fs::create_dir_all(&logs).unwrap();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .parent()
        .expect("the binary has a folder");
    let path_var = std::env::join_paths(std::iter::once(bin_dir.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let path_var = path_var.to_str().expect("PATH is UTF-8");

    let failures: Vec<String> = plan
        .examples
        .iter()
        .filter_map(|example| run_example(example, &dir, &logs, path_var))
        .collect();
    for (line, reason) in &plan.skipped {
        eprintln!("README.md:{line}: not run: {reason}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The harness itself: blocks, attributes, output attachment and wildcards.
#[test]
fn the_harness_reads_the_conventions_and_matches_wildcards() {
    let md = "# t\n\n```sh\necho hi\n```\n\n```text\nhi\n```\n\npara\n\n```text\nnot output\n```\n\n\
              ```sh ignore-test: needs a key\ncurl x\n```\n```text\nskipped output\n```\n\
              ```sh\ntrue\n```\n";
    let plan = plan(md).unwrap();
    assert_eq!(
        plan.examples,
        [
            Example {
                line: 3,
                script: "echo hi\n".into(),
                expect: Some("hi\n".into()),
            },
            Example {
                line: 23,
                script: "true\n".into(),
                expect: None,
            },
        ]
    );
    assert_eq!(plan.skipped, [(17, "needs a key".to_string())]);

    let errors =
        plan_errors("```bash\nls\n```\n```sh ignore-test:\nls\n```\n```sh quick\nls\n```\n");
    assert_eq!(
        errors,
        [
            "line 1: write shell examples as ```sh so that search/tests/readme.rs runs them",
            "line 4: `ignore-test:`: the only attribute of a sh block is `ignore-test: REASON`",
            "line 7: `quick`: the only attribute of a sh block is `ignore-test: REASON`",
        ]
    );
    assert_eq!(
        plan_errors("```sh\nls\n"),
        ["line 1: the block is never closed"]
    );

    assert!(line_matches("time = [..] s", "time = 0.002 s"));
    assert!(line_matches("[..]", ""));
    assert!(line_matches("a [..] b [..] c", "a 1 b 2 c"));
    assert!(!line_matches("a [..] b [..] c", "a 1 c"));
    assert!(!line_matches("ab[..]ba", "aba"));
    assert!(!line_matches("time = 0.001 s", "time = 0.002 s"));
    assert!(output_matches("x\ny = [..]\n", "x\ny = 3\n"));
    assert!(!output_matches("x\n", "x\nextra\n"));
}

fn plan_errors(md: &str) -> Vec<String> {
    match plan(md) {
        Ok(plan) => panic!("accepted: {plan:?}"),
        Err(errors) => errors,
    }
}
