//! Smoke tests of `ndvm-bench search` on a tiny budget, pyoperon skipped (`--no-pyoperon`)
//! or unavailable: the JSON's structure, finite NMSE values that match a recomputation of each
//! winner from the CSV files, and the refusals. No test needs Python or the network.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ndvm_core::Heap;
use ndvm_search::engine;
use ndvm_search::task::{self, Table};
use serde_json::Value;

use common::{nmse, read_json, root, scratch, testdata};

fn tasks_dir() -> PathBuf {
    root().join("bench/tests/data/bench-search")
}

fn bench(args: &[&str], out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ndvm-bench"))
        .args(["search"])
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn succeeded(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "bench search failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A headed CSV file as a table of `inputs` and `target`, read here without the task loader.
fn read_csv(path: &Path, inputs: &[String], target: &str) -> Table {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<f64>> = lines
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').map(|f| f.parse().unwrap()).collect())
        .collect();
    Table {
        columns: inputs
            .iter()
            .map(|i| rows.iter().map(|r| r[col(i)]).collect())
            .collect(),
        target: rows.iter().map(|r| r[col(target)]).collect(),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1e-300)
}

/// Recomputes a run's NMSE on the three CSV files from its program and parameters.
fn check_run(run: &Value, task_path: &Path) {
    let seed = run["seed"].as_u64().unwrap();
    let task = task::load_seeded(task_path, seed).unwrap();
    let src = run["model"].as_str().expect("model");
    let frontend = run["frontend"].as_str().expect("frontend");
    let params: BTreeMap<String, f64> = serde_json::from_value(run["params"].clone()).unwrap();
    let mut heap = Heap::new();
    let program = task
        .frontends
        .by_name(frontend)
        .unwrap()
        .parse(&mut heap, src)
        .unwrap();
    let dir = testdata("llmsr-data/oscillator1");
    for (key, file) in [
        ("train", "train.csv"),
        ("test_id", "test_id.csv"),
        ("test_ood", "test_ood.csv"),
    ] {
        let table = read_csv(&dir.join(file), &task.inputs, "a");
        assert_eq!(table.n_rows(), 1000, "{file}");
        let pred = engine::predict(&task, &mut heap, &program, &params, &table).unwrap();
        let want = nmse(&pred, &table.target);
        let got = run["nmse"][key]
            .as_f64()
            .unwrap_or_else(|| panic!("nmse.{key} of {run}"));
        assert!(got.is_finite() && got > 0.0, "nmse.{key} = {got}");
        assert!(close(got, want), "nmse.{key}: {got} vs recomputed {want}");
    }
}

fn check_spread(spread: &Value, values: &[f64]) {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    assert_eq!(spread["n"].as_u64().unwrap() as usize, v.len(), "{spread}");
    assert_eq!(spread["not_finite"], 0, "{spread}");
    let median = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        0.5 * (v[v.len() / 2 - 1] + v[v.len() / 2])
    };
    assert!(
        close(spread["median"].as_f64().unwrap(), median),
        "{spread}"
    );
    assert_eq!(spread["min"].as_f64().unwrap(), v[0], "{spread}");
    assert_eq!(spread["max"].as_f64().unwrap(), v[v.len() - 1], "{spread}");
}

#[test]
fn smoke_run_without_pyoperon() {
    let dir = scratch("bench-search", "smoke");
    let tasks = tasks_dir();
    let out = bench(
        &[
            "--seconds",
            "60",
            "--calibrations",
            "6",
            "--seeds",
            "0,1",
            "--problems",
            "oscillator1",
            "--threads",
            "2",
            "--no-pyoperon",
            "--tasks",
            tasks.to_str().unwrap(),
        ],
        &dir,
    );
    let stdout = succeeded(&out);
    assert!(
        stdout.contains("| oscillator1 | ndvm-search ")
            && stdout.contains("| oscillator1 | pyoperon 0.5.0 | skipped |"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("wrote {}", dir.join("search.json").display())),
        "{stdout}"
    );

    let json = read_json(&dir.join("search.json"));
    assert_eq!(json["suite"], "search");
    assert_eq!(
        json["command"],
        "ndvm-bench search --seconds 60 --threads 2 --seeds 0,1 --problems oscillator1 --calibrations 6 --no-pyoperon"
    );
    assert_eq!(json["seconds"], 60.0);
    assert_eq!(json["threads"], 2);
    assert_eq!(json["seeds"], serde_json::json!([0, 1]));
    for key in ["nproc", "os", "profile", "git_commit", "date_utc"] {
        assert!(json["machine"].get(key).is_some(), "machine has no {key}");
    }
    let problems = json["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1);
    let p = &problems[0];
    assert_eq!(p["problem"], "oscillator1");
    assert_eq!(
        p["task"],
        "bench/tests/data/bench-search/llmsr-oscillator1.yaml"
    );
    assert_eq!(
        p["rows"],
        serde_json::json!({"train": 1000, "test_id": 1000, "test_ood": 1000})
    );
    let task_path = tasks.join("llmsr-oscillator1.yaml");
    let tools = p["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2);

    let ours = &tools[0];
    assert_eq!(ours["tool"], "ndvm");
    assert_eq!(ours["status"], "ran");
    let runs = ours["runs"].as_array().unwrap();
    let seeds: Vec<u64> = runs.iter().map(|r| r["seed"].as_u64().unwrap()).collect();
    assert_eq!(seeds, [0, 1]);
    for run in runs {
        let calibrations = run["calibrations"].as_u64().unwrap();
        assert!((1..=6).contains(&calibrations), "{run}");
        assert!(run.get("error").is_none(), "{run}");
        check_run(run, &task_path);
    }
    for key in ["train", "test_id", "test_ood"] {
        let values: Vec<f64> = runs
            .iter()
            .map(|r| r["nmse"][key].as_f64().unwrap())
            .collect();
        check_spread(&ours["nmse"][key], &values);
    }

    let theirs = &tools[1];
    assert_eq!(theirs["tool"], "pyoperon");
    assert_eq!(theirs["status"], "skipped");
    assert_eq!(theirs["runs"], serde_json::json!([]));
    assert_eq!(theirs["nmse"]["test_ood"]["n"], 0);
    assert_eq!(theirs["nmse"]["test_ood"]["not_finite"], 0);
    assert_eq!(theirs["nmse"]["test_ood"]["median"], Value::Null);
}

/// A venv that cannot be created leaves pyoperon `unavailable`, with the reason, and this
/// project's numbers are written all the same.
#[test]
fn unavailable_pyoperon_still_writes_our_numbers() {
    let dir = scratch("bench-search", "unavailable");
    let tasks = tasks_dir();
    let out = bench(
        &[
            "--quick",
            "--calibrations",
            "2",
            "--problems",
            "oscillator1",
            "--pyoperon-venv",
            "/proc/ndvm-no-such-dir/venv",
            "--tasks",
            tasks.to_str().unwrap(),
        ],
        &dir,
    );
    let stdout = succeeded(&out);
    assert!(
        stdout.contains("| oscillator1 | pyoperon 0.5.0 | unavailable |")
            && stdout.contains("pyoperon 0.5.0 on oscillator1: unavailable: "),
        "{stdout}"
    );
    let json = read_json(&dir.join("search.json"));
    assert_eq!(json["seconds"], 5.0);
    assert_eq!(json["seeds"], serde_json::json!([0]));
    let tools = json["problems"][0]["tools"].as_array().unwrap();
    let ours = tools[0]["runs"].as_array().unwrap();
    assert_eq!(ours.len(), 1);
    check_run(&ours[0], &tasks.join("llmsr-oscillator1.yaml"));
    assert_eq!(tools[1]["status"], "unavailable");
    let note = tools[1]["note"].as_str().unwrap();
    assert!(note.contains("venv"), "{note}");
}

#[test]
fn search_options_belong_to_search() {
    let dir = scratch("bench-search", "other-suite");
    let out = Command::new(env!("CARGO_BIN_EXE_ndvm-bench"))
        .args(["kalman", "--quick", "--no-pyoperon", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("belong to `bench search`"), "{stderr}");
    assert!(!dir.join("kalman.json").exists());
}

#[test]
fn a_task_without_both_test_tables_is_refused_before_running() {
    let dir = scratch("bench-search", "bad-task");
    let tasks = root().join("bench/tests/data/bench-search-bad");
    let out = bench(
        &[
            "--quick",
            "--no-pyoperon",
            "--problems",
            "oscillator1",
            "--tasks",
            tasks.to_str().unwrap(),
        ],
        &dir.join("out"),
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("llmsr-oscillator1.yaml")
            && stderr.contains("test tables test_id and test_ood")
            && stderr.contains("`test_ood` is missing"),
        "{stderr}"
    );
    assert!(!dir.join("out").exists());
}

/// A problem without a task file names the file it looked for.
#[test]
fn an_unknown_problem_names_its_task_file() {
    let dir = scratch("bench-search", "unknown");
    let out = bench(
        &["--quick", "--no-pyoperon", "--problems", "oscilator1"],
        &dir.join("out"),
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("llmsr-oscilator1.yaml"), "{stderr}");
}
