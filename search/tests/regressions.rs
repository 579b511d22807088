//! Regression tests for the run-report defects of issue 11, through the built `ndvm-search`:
//! `summary.md` tables with multi-line programs, time to first success after a resume, merge
//! throughput, a shard's calibrations to its first success, Ctrl-C with its resume hint, and one
//! name (`r2`) for R² in the CLI and JSON.

mod common;

use common::root;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use ndvm_search::engine::{Event, EventStatus, StopKind};
use ndvm_search::summary::Summary;

/// A fresh scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    common::scratch("regressions", name)
}

fn ndvm() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ndvm-search"));
    c.current_dir(root());
    c.env_remove("SLURM_ARRAY_TASK_ID");
    c.env_remove("SLURM_ARRAY_TASK_COUNT");
    c
}

fn run_ok(args: &[&str]) -> Output {
    let out = ndvm().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ndvm-search {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The winner: `a·exp(b·x)` written over two lines, with a comment holding `|`.
const WINNER: &str = "(* a ; the |scale|\n   (exp (* b x)))";

/// Index of the winner in the candidate stream.
const WINNER_AT: usize = 7;

/// A cache of `n` distinct candidates (`a + b·x^k`, none fits to R² 0.999) with [`WINNER`] at
/// [`WINNER_AT`], and a task that replays it one candidate per round on data `2·exp(−x/2)`.
fn task(dir: &Path, n: usize) -> PathBuf {
    task_with(dir, n, "")
}

/// [`task`] with `extra` lines of YAML.
fn task_with(dir: &Path, n: usize, extra: &str) -> PathBuf {
    let mut lines = String::new();
    for i in 0..n {
        let src = if i == WINNER_AT {
            WINNER.to_string()
        } else {
            let power = (0..=i).fold("x".to_string(), |acc, _| format!("(* x {acc})"));
            format!("(+ a (* b {power}))")
        };
        lines += &(serde_json::json!({ "src": src }).to_string() + "\n");
    }
    let cache = dir.join("cache.jsonl");
    std::fs::write(&cache, lines).unwrap();
    let path = dir.join("task.yaml");
    std::fs::write(
        &path,
        format!(
            "name: issue11\nseed: 5\ndata:\n  generate: {{formula: \"(* 2 (exp (* -0.5 x)))\", input: x, from: 0.1, to: 4, n: 40}}\n\
             inputs: [x]\ntarget: y\nsplit: {{train: 30, validation: 10}}\nparams: [{{name: a}}, {{name: b}}]\n\
             proposer: {{kind: replay, cache: {}, batch: 1}}\nsuccess: {{metric: r2, threshold: 0.999}}\n{extra}",
            cache.display()
        ),
    )
    .unwrap();
    path
}

fn summary(dir: &Path) -> Summary {
    ndvm_search::results::read_summary(dir).unwrap()
}

fn events(dir: &Path) -> Vec<Event> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn markdown(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("summary.md")).unwrap()
}

/// `|` that separate cells (not escaped with a backslash).
fn cell_separators(row: &str) -> usize {
    let b = row.as_bytes();
    (0..b.len())
        .filter(|&i| b[i] == b'|' && (i == 0 || b[i - 1] != b'\\'))
        .count()
}

#[test]
fn issue_11_multi_line_programs_keep_summary_tables_intact() {
    // Cause: a program's line breaks and `|` went into table cells as they were.
    let dir = scratch("tables");
    let task = task(&dir, 10);
    let out = dir.join("run");
    run_ok(&["run", p(&task), "--out", p(&out), "--threads", "1", "-q"]);
    let md = markdown(&out);
    let mut table_rows = 0;
    // Every row of a table has as many cell separators as the table's first row.
    let mut columns: Option<usize> = None;
    for line in md.lines() {
        if !line.starts_with('|') {
            columns = None;
            assert!(
                !line.contains("(exp (* b x)))`"),
                "a program broke out of its cell: {line:?}"
            );
            continue;
        }
        table_rows += 1;
        assert!(line.ends_with('|'), "a table row is cut: {line:?}\n{md}");
        let n = *columns.get_or_insert(cell_separators(line));
        assert_eq!(cell_separators(line), n, "{line:?}");
    }
    assert!(table_rows > 10, "{md}");
    assert!(
        md.contains("| `(* a ; the \\|scale\\| (exp (* b x)))` |"),
        "the winner's cell: {md}"
    );
    // The winner's own block keeps the program as written.
    assert!(md.contains(&format!("```scheme\n{WINNER}\n```")), "{md}");
    // summary.json keeps its key order (alphabetical at every level, as serde_json's map has it).
    let text = std::fs::read_to_string(out.join("summary.json")).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(serde_json::to_string_pretty(&value).unwrap() + "\n", text);
}

/// Runs the task, interrupts it with SIGINT once `after` calibrations are logged, and returns
/// the run folder and the interrupted process's output.
fn interrupted_run(dir: &Path, task: &Path, after: usize) -> (PathBuf, Output) {
    interrupt_run(dir, task, after, false)
}

/// [`interrupted_run`]; with `group`, the run gets a process group of its own and SIGINT goes to
/// the whole group, as Ctrl-C at a terminal does.
fn interrupt_run(dir: &Path, task: &Path, after: usize, group: bool) -> (PathBuf, Output) {
    use std::os::unix::process::CommandExt;
    let out = dir.join("run");
    let mut command = ndvm();
    command
        .args(["run", p(task), "--out", p(&out), "--threads", "1", "-q"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if group {
        command.process_group(0);
    }
    let child = command.spawn().unwrap();
    let log = out.join("events.jsonl");
    let started = Instant::now();
    let logged = || {
        std::fs::read_to_string(&log).map_or(0, |t| t.lines().filter(|l| l.ends_with('}')).count())
    };
    while logged() < after && started.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(2));
    }
    let target = if group {
        format!("-{}", child.id())
    } else {
        child.id().to_string()
    };
    let sent = Command::new("kill")
        .args(["-INT", "--", &target])
        .status()
        .unwrap();
    assert!(sent.success());
    let output = child.wait_with_output().unwrap();
    (out, output)
}

#[test]
fn issue_11_ctrl_c_stops_at_a_calibration_boundary_and_prints_the_resume_hint() {
    // Cause: SIGINT killed the run with no summary and no word on how to continue it.
    let dir = scratch("ctrl-c");
    let task = task(&dir, 200);
    let reference = dir.join("reference");
    run_ok(&[
        "run",
        p(&task),
        "--out",
        p(&reference),
        "--threads",
        "1",
        "-q",
    ]);
    let (out, output) = interrupted_run(&dir, &task, 12);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "interrupted; resume with: ndvm-search run --resume {}",
            out.display()
        )),
        "{stderr}"
    );
    let partial = summary(&out);
    assert_eq!(partial.stop, StopKind::Interrupted);
    let done = events(&out);
    let all = summary(&reference).calibrations;
    assert!(done.len() >= 12 && done.len() < all, "{}", done.len());
    assert_eq!(partial.calibrations, done.len());
    assert!(markdown(&out).contains("stop: `interrupted`"));
    // Every event is whole and in index order: the run stopped between calibrations.
    let indices: Vec<u64> = done.iter().map(|e| e.index).collect();
    assert_eq!(indices, (0..done.len() as u64).collect::<Vec<_>>());
    run_ok(&["run", "--resume", p(&out), "-q"]);
    let strip = |mut s: Summary| {
        s.run = summary(&reference).run;
        s
    };
    assert_eq!(strip(summary(&out)), strip(summary(&reference)));
    let core = |d: &Path| -> Vec<Event> {
        events(d)
            .into_iter()
            .map(|mut e| {
                (e.wall_ms, e.finished_s) = (0.0, None);
                e
            })
            .collect()
    };
    assert_eq!(core(&out), core(&reference));
    assert_eq!(
        summary(&out).run.fresh_calibrations as usize,
        all - done.len()
    );
}

#[test]
fn issue_11_ctrl_c_at_a_terminal_lets_worker_processes_finish() {
    // Cause: worker processes (`isolation: process`) shared the terminal's process group, so
    // Ctrl-C killed them too and their candidates were logged `crashed`, never to be retried.
    let dir = scratch("ctrl-c-workers");
    let task = task_with(&dir, 40, "isolation: process\n");
    let (out, output) = interrupt_run(&dir, &task, 3, true);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted; resume with:"), "{stderr}");
    let done = events(&out);
    assert!(done.len() >= 3, "{}", done.len());
    assert!(
        done.iter().all(|e| e.status == EventStatus::Ok),
        "{:?}",
        done.iter().map(|e| e.status).collect::<Vec<_>>()
    );
    run_ok(&["run", "--resume", p(&out), "-q"]);
    let s = summary(&out);
    assert_eq!(s.stop, StopKind::Exhausted);
    assert_eq!(s.statuses.get(&EventStatus::Ok).copied(), Some(40));
}

#[test]
fn issue_11_time_to_first_success_counts_the_sessions_before_a_resume() {
    // Cause: the time was measured from the start of the resumed process, which replays the
    // earlier success in milliseconds.
    let dir = scratch("ttfs");
    let task = task(&dir, 200);
    let (out, output) = interrupted_run(&dir, &task, WINNER_AT + 20);
    assert_eq!(output.status.code(), Some(130));
    let first = events(&out);
    // One thread: the calibrations up to the winner ran one after another.
    let to_winner_s: f64 = first[..=WINNER_AT].iter().map(|e| e.wall_ms).sum::<f64>() / 1e3;
    let winner_finished = first[WINNER_AT].finished_s.unwrap();
    assert!(
        winner_finished >= to_winner_s,
        "{winner_finished} < {to_winner_s}"
    );
    run_ok(&["run", "--resume", p(&out), "-q"]);
    let s = summary(&out);
    assert_eq!(
        s.first_success.as_ref().map(|f| f.index),
        Some(WINNER_AT as u64)
    );
    assert_eq!(s.run.time_to_first_success_s, Some(winner_finished));
    assert!(s.run.run_s > winner_finished);
    assert!(
        markdown(&out).contains(&format!(
            "after {} calibrations, {winner_finished:.6} s.",
            WINNER_AT + 1
        )),
        "{}",
        markdown(&out)
    );
}

#[test]
fn issue_11_shard_summary_counts_its_own_calibrations_to_first_success() {
    // Cause: the count was the candidate's index in the whole stream plus one.
    let dir = scratch("shard");
    let task = task(&dir, 12);
    let out = dir.join("shard1");
    run_ok(&["run", p(&task), "--out", p(&out), "--shard", "1/3", "-q"]);
    let s = summary(&out);
    // The winner (index 7) is the third candidate of shard 1/3 (indices 1, 4, 7).
    let f = s.first_success.unwrap();
    assert_eq!((f.index, f.calibrations), (WINNER_AT as u64, 3));
    let md = markdown(&out);
    assert!(md.contains("after 3 calibrations,"), "{md}");
}

#[test]
fn issue_11_merge_reports_the_shards_throughput() {
    // Cause: the merge divided its own fresh calibrations (none) by its own wall time.
    let dir = scratch("merge");
    let task = task(&dir, 12);
    let mut shards = Vec::new();
    for i in 0..3 {
        let out = dir.join(format!("shard{i}"));
        let shard = format!("{i}/3");
        run_ok(&["run", p(&task), "--out", p(&out), "--shard", &shard, "-q"]);
        shards.push(out);
    }
    let merged = dir.join("merged");
    let mut args = vec!["merge"];
    args.extend(shards.iter().map(|s| p(s)));
    args.extend(["--out", p(&merged)]);
    run_ok(&args);
    let s = summary(&merged);
    let longest = shards
        .iter()
        .flat_map(|d| events(d))
        .filter_map(|e| e.finished_s)
        .fold(0.0, f64::max);
    assert_eq!(s.calibrations, 12);
    assert_eq!(s.run.run_s, longest);
    assert_eq!(s.run.merged_shards, Some(3));
    assert!(s.run.calibrations_per_second > 0.0);
    assert_eq!(s.run.calibrations_per_second, 12.0 / longest);
    let md = markdown(&merged);
    assert!(!md.contains("0.000000 calibrations/s"), "{md}");
    assert!(
        md.contains(&format!(
            "Merged from 3 shard folders: 12 calibrations in {longest:.6} s of run time (the longest shard), {:.6} calibrations/s",
            12.0 / longest
        )),
        "{md}"
    );
}

#[test]
fn issue_11_r_squared_is_r2_in_the_cli_and_json() {
    // Cause: the Rust API said `r_squared`, the CLI and JSON `r2`.
    let dir = scratch("r2");
    let (program, data) = (dir.join("line.scm"), dir.join("data.csv"));
    std::fs::write(&program, "(+ a (* b x))").unwrap();
    std::fs::write(&data, "\"x\",\"y\"\n0,1\n1,3.1\n2,4.9\n3,7\n").unwrap();
    let base = [
        "calibrate",
        p(&program),
        "--data",
        p(&data),
        "--target",
        "y",
        "--params",
        "a,b",
    ];
    let human = String::from_utf8(run_ok(&base).stdout).unwrap();
    assert!(human.contains("\nr2 = 0.99"), "{human}");
    let mut args = base.to_vec();
    args.push("--json");
    let json: serde_json::Value = serde_json::from_slice(&run_ok(&args).stdout).unwrap();
    assert!(json["r2"].as_f64().unwrap() > 0.99, "{json}");
    assert!(json.get("r_squared").is_none());
}
