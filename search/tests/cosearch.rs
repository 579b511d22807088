//! End-to-end co-search tests through the `ndvm-search` binary: the shipped symreg task, replay of
//! the vendored candidate stream (determinism across threads and runs), resume after SIGKILL, shard
//! merge, `check` diagnostics, and the LLM-SR oscillator task with two test files.

mod common;

use common::{root, run_at, run_ok, summary, summary_core};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

fn test_task(name: &str) -> PathBuf {
    root().join("search/tests/data/tasks").join(name)
}

/// A fresh scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    common::scratch("cosearch", name)
}

fn ndvm() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ndvm-search"));
    c.current_dir(root());
    c.env_remove("SLURM_ARRAY_TASK_ID");
    c
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `events.jsonl` without the wall-clock fields (`wall_ms`, `finished_s`), line by line.
fn events_core(dir: &Path) -> Vec<String> {
    common::events_without(dir, &["wall_ms", "finished_s"])
        .iter()
        .map(Value::to_string)
        .collect()
}

#[test]
fn symreg_finds_validation_r2_above_099_within_its_default_budget() {
    let dir = scratch("symreg");
    let out = dir.join("run");
    run_ok(&["run", "tasks/symreg.yaml", "--out", p(&out), "-q"]);
    let s = summary(&out);
    let best = &s["best"];
    assert!(best["validation_r2"].as_f64().unwrap() > 0.99, "{best}");
    assert!(best["params"].as_object().is_some_and(|m| !m.is_empty()));
    assert!(s["first_success"]["calibrations"].as_u64().is_some());
    assert!(
        std::fs::read_to_string(out.join("data.csv"))
            .unwrap()
            .starts_with("x,y,split\n")
    );
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(md.contains(best["src"].as_str().unwrap()), "{md}");
}

#[test]
fn the_task_sets_the_threads_and_the_command_line_overrides_them() {
    let dir = scratch("threads");
    let text = std::fs::read_to_string(root().join("tasks/symreg.yaml")).unwrap();
    let task = dir.join("symreg-1.yaml");
    std::fs::write(&task, format!("{text}\nthreads: 1\n")).unwrap();
    let threads = |out: &Path| summary(out)["run"]["threads"].as_u64();
    let (a, b) = (dir.join("a"), dir.join("b"));
    let budget = ["--budget-calibrations", "4", "-q"];
    run_ok(&[&["run", p(&task), "--out", p(&a)], &budget[..]].concat());
    assert_eq!(threads(&a), Some(1));
    run_ok(
        &[
            &["run", p(&task), "--out", p(&b), "--threads", "2"],
            &budget[..],
        ]
        .concat(),
    );
    assert_eq!(threads(&b), Some(2));
    assert_eq!(events_core(&a), events_core(&b));
}

#[test]
fn replay_is_reproducible_across_threads_and_runs() {
    common::testdata("seed-data/cosearch_candidates_valid.jsonl");
    let dir = scratch("replay");
    let task = test_task("replay.yaml");
    let mut cores = Vec::new();
    for (name, threads) in [("t1", "1"), ("t2", "2"), ("t2b", "2")] {
        let out = dir.join(name);
        run_at(&task, &out, threads);
        cores.push((summary_core(&out), events_core(&out)));
    }
    assert_eq!(cores[0], cores[1], "--threads 1 and --threads 2 differ");
    assert_eq!(cores[1], cores[2], "two runs differ");
    let s = summary(&dir.join("t1"));
    assert_eq!(s["stream"]["proposed"], 247);
    let r2 = s["best"]["validation_r2"].as_f64().unwrap();
    assert!(r2 > 0.9, "held-out R² {r2}");
}

/// `finished_s` of each event of `dir`, by index.
fn finish_times(dir: &Path) -> Vec<f64> {
    common::events_without(dir, &[])
        .iter()
        .map(|e| e["finished_s"].as_f64().unwrap())
        .collect()
}

#[test]
fn a_slow_candidate_does_not_hold_back_the_others() {
    let dir = scratch("slow");
    // Index 0 loops until it hits the 128 MiB memory limit (about a second); the rest take
    // milliseconds. With stop on success, index 1 succeeds and its round is indices 0 to 3.
    let fast = [
        "(* a (exp (* b x)))",
        "(+ a (* b x))",
        "(+ a (* b (sin x)))",
        "(+ a (* b (cos x)))",
        "(* a (sin (* b x)))",
        "(+ a (* b (exp x)))",
        "(* a (log (+ 2 (* b x))))",
        "(+ a (* b (sqrt x)))",
    ];
    let mut cache =
        serde_json::json!({ "src": "(+ a (loop ((i 0)) (recur (+ i 1))))" }).to_string();
    for src in fast {
        cache.push('\n');
        cache.push_str(&serde_json::json!({ "src": src }).to_string());
    }
    std::fs::write(dir.join("cache.jsonl"), cache + "\n").unwrap();
    let task = dir.join("task.yaml");
    let text = "name: slow\nseed: 3\ndata:\n  generate: {formula: \"(* 2 (exp (* -0.5 x)))\", input: x, \
                from: 0.1, to: 4, n: 64}\ninputs: [x]\ntarget: y\nsplit: {train: 44, validation: 10}\n\
                params: [{name: a}, {name: b}]\nproposer: {kind: replay, cache: cache.jsonl, batch: 4}\n\
                limits: {memory_mb: 128}\n";
    for (name, extra) in [
        ("all", ""),
        ("stop", "success: {threshold: 0.99, stop: true}\n"),
    ] {
        std::fs::write(&task, format!("{text}{extra}")).unwrap();
        let mut cores = Vec::new();
        for threads in ["1", "2"] {
            let out = dir.join(format!("{name}-t{threads}"));
            run_at(&task, &out, threads);
            cores.push((summary_core(&out), events_core(&out)));
        }
        assert_eq!(
            cores[0], cores[1],
            "{name}: --threads 1 and --threads 2 differ"
        );
        let one = finish_times(&dir.join(format!("{name}-t1")));
        let two = finish_times(&dir.join(format!("{name}-t2")));
        assert!(one.windows(2).all(|w| w[0] <= w[1]), "{name}: {one:?}");
        // No round barrier: at 2 threads every other candidate finished before the slow one.
        let last_other = two[1..].iter().copied().fold(0.0, f64::max);
        assert!(two[0] > last_other, "{name}: {two:?}");
        let s = summary(&dir.join(format!("{name}-t2")));
        assert_eq!(s["failures"]["memory"], 1, "{name}: {s}");
        let n = if name == "stop" { 4 } else { 9 };
        assert_eq!(one.len(), n, "{name}");
    }
}

fn count_lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.matches('\n').count())
}

#[test]
fn resume_after_sigkill_equals_an_uninterrupted_run() {
    common::testdata("seed-data/cosearch_candidates_valid.jsonl");
    let dir = scratch("resume");
    let task = test_task("replay.yaml");
    let budget = ["--budget-calibrations", "64", "--threads", "1"];
    let reference = dir.join("reference");
    let mut args = vec!["run", p(&task), "--out", p(&reference), "-q"];
    args.extend(budget);
    run_ok(&args);
    for (i, kill_after) in [1usize, 17, 40].into_iter().enumerate() {
        let out = dir.join(format!("killed{i}"));
        let mut child = ndvm()
            .args(["run", p(&task), "--out", p(&out)])
            .args(budget)
            .arg("-q")
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let events = out.join("events.jsonl");
        let started = Instant::now();
        while count_lines(&events) < kill_after && started.elapsed() < Duration::from_secs(60) {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before the kill point"
        );
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        // Every calibration on disk at the kill is reused, never redone.
        let done = count_lines(&events);
        if i == 1 {
            // A kill in the middle of a write leaves a truncated last line.
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&events)
                .unwrap();
            f.write_all(b"{\"index\": 99, \"id\"").unwrap();
        }
        run_ok(&["run", "--resume", p(&out), "-q"]);
        let fresh = |d: &Path| summary(d)["run"]["fresh_calibrations"].as_u64().unwrap();
        assert_eq!(
            fresh(&out) as usize,
            fresh(&reference) as usize - done,
            "calibrations redone after kill {i}"
        );
        assert_eq!(
            events_core(&out),
            events_core(&reference),
            "events after kill {i}"
        );
        assert_eq!(
            summary_core(&out),
            summary_core(&reference),
            "summary after kill {i}"
        );
    }
}

#[test]
fn merged_shards_equal_the_unsharded_run() {
    common::testdata("seed-data/cosearch_candidates_valid.jsonl");
    let dir = scratch("shards");
    let task = test_task("replay.yaml");
    let whole = dir.join("whole");
    run_ok(&[
        "run",
        p(&task),
        "--out",
        p(&whole),
        "--budget-calibrations",
        "48",
        "-q",
    ]);
    let mut shards = Vec::new();
    for i in 0..3 {
        let out = dir.join(format!("shard{i}"));
        let shard = format!("{i}/3");
        run_ok(&[
            "run",
            p(&task),
            "--out",
            p(&out),
            "--budget-calibrations",
            "48",
            "--shard",
            &shard,
            "-q",
        ]);
        shards.push(out);
    }
    // Slurm array variables select the shard too.
    let slurm = dir.join("slurm1");
    let out = Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .current_dir(root())
        .args([
            "run",
            p(&task),
            "--out",
            p(&slurm),
            "--budget-calibrations",
            "48",
            "-q",
        ])
        .env("SLURM_ARRAY_TASK_ID", "1")
        .env("SLURM_ARRAY_TASK_COUNT", "3")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(events_core(&slurm), events_core(&shards[1]));
    let merged = dir.join("merged");
    run_ok(&[
        "merge",
        p(&shards[0]),
        p(&shards[1]),
        p(&shards[2]),
        "--out",
        p(&merged),
    ]);
    assert_eq!(events_core(&merged), events_core(&whole));
    assert_eq!(summary_core(&merged), summary_core(&whole));
    // A missing shard is an error, not a silently smaller summary.
    let out = Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .current_dir(root())
        .args([
            "merge",
            p(&shards[0]),
            p(&shards[2]),
            "--out",
            p(&dir.join("partial")),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no shard holds"));
}

/// Issue 11: options before the task path (`ndvm-search -q TASK.yaml`) were a usage error.
#[test]
fn issue_11_options_before_the_task_path_run_the_task() {
    let dir = scratch("options-first");
    let out_dir = dir.join("kalman");
    let out = ndvm()
        .args([
            "-q",
            "--threads",
            "1",
            "tasks/kalman.yaml",
            "--out",
            p(&out_dir),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr, "", "-q prints nothing on stderr");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.ends_with(&format!("results in {}\n", out_dir.display())),
        "{stdout}"
    );
    assert!(out_dir.join("summary.json").is_file());
}

#[test]
fn check_rejects_a_typo_naming_line_and_column() {
    let dir = scratch("check");
    let file = dir.join("typo.yaml");
    std::fs::write(
        &file,
        "name: t\ndata:\n  generate: {formula: x, from: 0, to: 1, n: 8}\ninputs: [x]\ntarget: y\nparams: [{name: a}]\nbudget:\n  secnds: 3\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .args(["check", p(&file)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:8:3: ", file.display())), "{err}");
    assert!(err.contains("secnds"), "{err}");
    // A bad value is located too.
    std::fs::write(
        &file,
        "name: t\ndata:\n  generate: {formula: x, from: 0, to: 1, n: 8}\ninputs: [x]\ntarget: y\nparams: [{name: a, kind: positive, init: -1}]\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .args(["check", p(&file)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:6:", file.display())), "{err}");
    assert!(err.contains("outside its domain"), "{err}");
}

#[test]
fn every_shipped_task_checks() {
    for entry in std::fs::read_dir(root().join("tasks")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let is_llm = std::fs::read_to_string(&path)
                .unwrap()
                .contains("kind: llm");
            let out = String::from_utf8(run_ok(&["check", p(&path)]).stdout).unwrap();
            if is_llm && !cfg!(feature = "llm") {
                // Valid, but a build without the `llm` feature cannot run it, and says how to
                // build one that can; running it is refused (`run` of the same task).
                assert!(out.contains("--features llm"), "{out}");
                let run = ndvm().args(["run", p(&path), "-q"]).output().unwrap();
                let err = String::from_utf8_lossy(&run.stderr);
                assert_eq!(run.status.code(), Some(1), "{err}");
                assert!(err.contains("--features llm"), "{err}");
            } else {
                assert!(!out.contains("--features llm"), "{out}");
            }
        }
    }
    for entry in std::fs::read_dir(root().join("caches")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            run_ok(&["check", p(&path)]);
        }
    }
}

#[test]
fn oscillator1_reports_nmse_on_both_test_files() {
    common::testdata("llmsr-data/oscillator1/train.csv");
    let dir = scratch("oscillator1");
    let out = dir.join("run");
    run_ok(&[
        "run",
        p(&test_task("oscillator1.yaml")),
        "--out",
        p(&out),
        "-q",
    ]);
    let s = summary(&out);
    assert_eq!(s["proposer"], "grammar");
    for name in ["test_id", "test_ood"] {
        let nmse = &s["best"]["test"][name]["nmse"];
        assert!(nmse.as_f64().is_some_and(f64::is_finite), "{name}: {nmse}");
    }
    // testdata keeps every 10th row of the LLM-SR files (testdata/README.md).
    assert_eq!(s["data"]["tests"]["test_id"], 1_000);
    assert_eq!(s["data"]["tests"]["test_ood"], 1_000);
}
