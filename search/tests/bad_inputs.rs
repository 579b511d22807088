//! The bad-input corpus (`tests/data/bad-inputs/`, plus cases too large to commit, generated
//! here): every case runs through the built `ndvm-search` and must end in a located error (or the
//! stated success), never a panic, an abort (exit 101 or a signal) or a hang.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

/// One case: a folder, the command lines to run (each in a working folder, when it has one),
/// and what they must print.
struct Case {
    name: String,
    dir: PathBuf,
    commands: Vec<Command>,
    expect: Expect,
}

/// One command line of a case.
struct Command {
    args: Vec<String>,
    /// The working folder (a fresh one, so a task's `output:` lands there), else the test's.
    cwd: Option<PathBuf>,
    /// For an accepted task: exit 0 is enough (the expected text is another command's output).
    success_only: bool,
}

impl Command {
    fn plain(args: Vec<String>) -> Command {
        Command {
            args,
            cwd: None,
            success_only: false,
        }
    }
}

enum Expect {
    /// Non-zero exit (not 101), stderr containing the text.
    Error(String),
    /// Exit 0, stdout containing the text.
    Ok(String),
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bad-inputs")
}

fn scratch() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("bad-inputs")
}

const CSV: &str = "x,y\n0.1,1.0\n0.2,0.9\n0.3,0.8\n0.4,0.7\n0.5,0.6\n0.6,0.5\n";

/// A task over `data.csv` with `data` as the `data:` block's body.
fn task(name: &str, data: &str) -> String {
    format!(
        "name: {name}\ndata:\n{data}inputs: [x]\ntarget: y\nsplit: {{train: 4, validation: 2}}\nparams:\n  - {{name: a}}\n"
    )
}

/// Writes the generated cases (too large to commit) into the scratch folder.
fn generated(root: &Path) -> Vec<(String, PathBuf, Expect)> {
    let mut out = Vec::new();
    let mut make = |name: &str, files: Vec<(&str, Vec<u8>)>, expect: Expect| {
        let dir = root.join("generated").join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (f, bytes) in files {
            std::fs::write(dir.join(f), bytes).unwrap();
        }
        out.push((name.to_string(), dir, expect));
    };
    // 100 MB of valid rows, no `max_rows`: refused by size before it is parsed.
    let row = "0.123456789,0.987654321\n";
    let big = format!("x,y\n{}", row.repeat(100_000_000 / row.len() + 1));
    assert!(big.len() > 100_000_000);
    make(
        "csv-100mb",
        vec![
            ("task.yaml", task("big", "  csv: big.csv\n").into_bytes()),
            ("big.csv", big.into_bytes()),
        ],
        Expect::Error(
            "big.csv: larger than the limit of 67108864 bytes; raise it with `data.max_bytes`"
                .into(),
        ),
    );
    // A YAML document nested 100,000 deep.
    let deep_yaml = format!(
        "name: deep\ndescription: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    make(
        "yaml-100000-deep",
        vec![("task.yaml", deep_yaml.into_bytes())],
        Expect::Error("task.yaml:2:".into()),
    );
    // A whole YAML document nested 100,000 deep.
    let deep_doc = format!("{}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    make(
        "yaml-100000-deep-document",
        vec![("task.yaml", deep_doc.into_bytes())],
        Expect::Error("task.yaml:1:".into()),
    );
    // A generating formula nested 10,000 deep.
    let formula = format!("{}x{}", "(+ 1 ".repeat(10_000), ")".repeat(10_000));
    let gen_task = format!(
        "name: deep-formula\ndata:\n  generate: {{formula: \"{formula}\", from: 0, to: 1, n: 8}}\ninputs: [x]\ntarget: y\nparams:\n  - {{name: a}}\n"
    );
    make(
        "formula-10000-deep",
        vec![("task.yaml", gen_task.into_bytes())],
        Expect::Error(
            "formula: the program nests parentheses 10000 deep, over the limit of 256".into(),
        ),
    );
    // A cache line nested 100,000 deep under a key serde skips (skipped without recursing).
    let deep_json = format!(
        "{{\"src\": \"(* a x)\", \"note\": {}{}}}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    make(
        "cache-100000-deep",
        vec![("cache.jsonl", deep_json.into_bytes())],
        Expect::Ok("cache.jsonl: 1 candidates".into()),
    );
    // Replaying candidates nested 10,000 deep and 100 KB long: rejected, the run goes on.
    // Candidates exactly at the nesting limit (256 levels, and 84 nested `let`s of three levels
    // each) are evaluated on the calibration threads without overflowing their stacks.
    let mut nested_lets = "(* a x)".to_string();
    for i in 0..84 {
        nested_lets = format!("(let ((v{i} {nested_lets})) (+ v{i} 1))");
    }
    let cache = format!(
        "{{\"src\": \"{}a{}\"}}\n{{\"src\": \"(+ a {})\"}}\n{{\"src\": \"(* a x)\"}}\n\
         {{\"src\": \"{}(* a x){}\"}}\n{{\"src\": \"{nested_lets}\"}}\n",
        "(+ x ".repeat(10_000),
        ")".repeat(10_000),
        "x ".repeat(50_000),
        "(+ x ".repeat(255),
        ")".repeat(255),
    );
    let replay_task = format!(
        "{}proposer: {{cache: cache.jsonl}}\ncalibrator: {{starts: 2, max_iters: 20}}\nbudget: {{calibrations: 5}}\n",
        task("deep-candidates", "  csv: data.csv\n")
    );
    make(
        "replay-deep-candidates",
        vec![
            ("task.yaml", replay_task.into_bytes()),
            ("data.csv", CSV.as_bytes().to_vec()),
            ("cache.jsonl", cache.into_bytes()),
        ],
        Expect::Ok("results in".into()),
    );
    out
}

fn cases() -> Vec<Case> {
    let root = scratch();
    std::fs::create_dir_all(&root).unwrap();
    let mut dirs: Vec<(String, PathBuf, Option<Expect>)> = Vec::new();
    for entry in std::fs::read_dir(corpus()).unwrap() {
        let dir = entry.unwrap().path();
        if dir.is_dir() {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            dirs.push((name, dir, None));
        }
    }
    dirs.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(dirs.len() >= 25, "{} cases", dirs.len());
    dirs.extend(
        generated(&root)
            .into_iter()
            .map(|(n, d, e)| (n, d, Some(e))),
    );
    let mut cases = Vec::new();
    for (name, dir, expect) in dirs {
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
        let expect = expect.unwrap_or_else(|| match (read("expect.txt"), read("expect-ok.txt")) {
            (Some(e), None) => Expect::Error(e.trim_end().to_string()),
            (None, Some(o)) => Expect::Ok(o.trim_end().to_string()),
            _ => panic!("{name}: needs expect.txt or expect-ok.txt"),
        });
        let out = root.join("runs").join(&name);
        let _ = std::fs::remove_dir_all(&out);
        let d = dir.display().to_string();
        let o = out.display().to_string();
        let split = |line: &str| -> Vec<String> {
            line.split_whitespace()
                .map(|w| w.replace("{dir}", &d).replace("{out}", &o))
                .collect()
        };
        let commands = if let Some(args) = read("args.txt") {
            vec![Command::plain(split(args.trim()))]
        } else if dir.join("task.yaml").is_file() {
            // `check` and `run` agree on every task: refused by both with the same error (before
            // anything is written), or accepted by both. `run` works in a fresh folder without
            // `--out`, so the task's own output folder is made as a user's run makes it.
            let check = Command::plain(split("check {dir}/task.yaml"));
            let work = root.join("work").join(&name);
            let _ = std::fs::remove_dir_all(&work);
            std::fs::create_dir_all(&work).unwrap();
            let run = Command {
                args: split("run {dir}/task.yaml -q --threads 1 --budget-calibrations 4"),
                cwd: Some(work),
                success_only: matches!(expect, Expect::Ok(_)),
            };
            match expect {
                Expect::Error(_) => vec![check, run],
                Expect::Ok(_) if name.starts_with("replay") => {
                    vec![
                        Command {
                            success_only: true,
                            ..check
                        },
                        Command::plain(split("run {dir}/task.yaml --out {out} -q --threads 1")),
                    ]
                }
                Expect::Ok(_) => vec![check, run],
            }
        } else {
            vec![Command::plain(split("check {dir}/cache.jsonl"))]
        };
        cases.push(Case {
            name,
            dir,
            commands,
            expect,
        });
    }
    cases
}

/// Runs `ndvm-search` with `args`, killed after a minute (a hang fails the test).
fn ndvm(args: &[String]) -> Output {
    ndvm_in(args, None)
}

/// [`ndvm`] in the working folder `cwd` (the test's own when `None`).
fn ndvm_in(args: &[String], cwd: Option<&Path>) -> Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ndvm-search"));
    if let Some(dir) = cwd {
        command.current_dir(dir);
    }
    let mut child = command
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("ndvm-search {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn every_bad_input_is_a_located_error_and_never_a_panic() {
    let mut transcript = String::new();
    let mut failures = Vec::new();
    for case in cases() {
        for command in &case.commands {
            let args = &command.args;
            let out = ndvm_in(args, command.cwd.as_deref());
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let code = out.status.code();
            transcript.push_str(&format!(
                "== {} {:?}\nexit {code:?}\n{stdout}{stderr}\n",
                case.name, args
            ));
            let verdict = match &case.expect {
                Expect::Error(text) => {
                    code.is_some_and(|c| c != 0 && c != 101) && stderr.contains(text.as_str())
                }
                Expect::Ok(_) if command.success_only => code == Some(0),
                Expect::Ok(text) => code == Some(0) && stdout.contains(text.as_str()),
            };
            // A refused task left no run folder behind.
            if let (Expect::Error(_), Some(cwd)) = (&case.expect, &command.cwd) {
                let left = std::fs::read_dir(cwd).unwrap().count();
                if left != 0 {
                    failures.push(format!("{}: a refused run left {left} entries", case.name));
                }
            }
            if !verdict || stderr.contains("panicked") {
                failures.push(format!(
                    "{} ({}) {args:?}: exit {code:?}\nstdout: {stdout}\nstderr: {stderr}",
                    case.name,
                    case.dir.display()
                ));
            }
        }
    }
    // The replayed deep and long candidates were rejected with their classes; the others ran.
    let run = scratch().join("runs/replay-deep-candidates");
    let summary = std::fs::read_to_string(run.join("summary.json")).unwrap();
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    assert_eq!(events.matches("\"status\":\"ok\"").count(), 3, "{events}");
    assert!(summary.contains("\"too-deep\""), "{summary}");
    assert!(summary.contains("\"too-large\""), "{summary}");
    // A hand-edited run folder asking for a budget `Duration` cannot hold.
    let meta = std::fs::read_to_string(run.join("run.json")).unwrap();
    let edited = meta.replace("\"budget_seconds\": null", "\"budget_seconds\": 1e300");
    assert_ne!(meta, edited);
    std::fs::write(run.join("run.json"), edited).unwrap();
    let out = ndvm(&[
        "run".into(),
        "--resume".into(),
        run.display().to_string(),
        "-q".into(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    transcript.push_str(&format!(
        "== resume 1e300\nexit {:?}\n{stderr}\n",
        out.status.code()
    ));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "replay-deep-candidates: a budget in seconds must be a positive number of at most 31536000"
        ),
        "{stderr}"
    );
    std::fs::write(scratch().join("transcript.txt"), &transcript).unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The whole transcript, every case together: no exit 101, no panic message, no signal.
    assert!(!transcript.contains("exit Some(101)"), "{transcript}");
    assert!(!transcript.contains("exit None"), "{transcript}");
    assert!(!transcript.contains("panicked at"), "{transcript}");
}

/// A fresh scratch folder `name` holding `data.csv` (the corpus's small table).
fn fresh_with_csv(name: &str) -> PathBuf {
    let dir = scratch().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("data.csv"), CSV).unwrap();
    dir
}

/// `ndvm-search run TASK --out OUT` with `extra` arguments.
fn run_into(task: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "run".to_string(),
        task.display().to_string(),
        "--out".to_string(),
        out.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    ndvm(&args)
}

#[test]
fn an_undefined_validation_score_ranked_by_the_training_loss_is_said_out_loud() {
    let dir = fresh_with_csv("undefined-validation-loss");
    let task = dir.join("task.yaml");
    std::fs::write(
        &task,
        "name: one-validation-row\ndata:\n  csv: data.csv\ninputs: [x]\ntarget: y\n\
         split: {train: 5, validation: 1}\nparams:\n  - {name: a}\n  - {name: b}\n\
         proposer: {kind: grammar, max_terms: 1}\nsuccess: {metric: loss}\n",
    )
    .unwrap();
    let out_dir = dir.join("run");
    let out = run_into(
        &task,
        &out_dir,
        &["--budget-calibrations", "6", "--threads", "1"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let warning = "the validation part has 1 row(s): R² and NMSE need at least 2; candidates are \
                   ranked by the training loss (success.metric: loss)";
    assert!(stderr.contains(&format!("warning: {warning}")), "{stderr}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["warnings"][0], warning, "{summary}");
    // The winner is the lowest training loss, not the first candidate.
    let best = summary["best"]["train_loss"].as_f64().unwrap();
    let board: Vec<f64> = summary["leaderboard"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["train_loss"].as_f64().unwrap())
        .collect();
    assert!(board.len() >= 2, "{board:?}");
    assert!(board.iter().all(|&l| l >= best), "{best} {board:?}");
}

#[test]
fn a_run_whose_every_candidate_is_rejected_says_so_even_when_quiet() {
    let dir = fresh_with_csv("all-rejected");
    std::fs::write(
        dir.join("cache.jsonl"),
        "{\"src\": \"(* a z)\"}\n{\"src\": \"(+ a w)\"}\n{\"src\": \"(* a (\"}\n",
    )
    .unwrap();
    let path = dir.join("task.yaml");
    std::fs::write(
        &path,
        task("all-rejected", "  csv: data.csv\n") + "proposer: {cache: cache.jsonl}\n",
    )
    .unwrap();
    let out = run_into(&path, &dir.join("run"), &["-q"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: every one of the 3 candidates was rejected before calibration (2 free-variable, 1 parse); the first: 0: free-variable: free variable `z`"),
        "{stderr}"
    );
}
