//! Smoke tests of `ndvm-bench suite` with pyoperon skipped: one small problem at a calibration
//! cap writes `suite.json` (each NMSE finite, the truth NMSE recomputed from the written CSV
//! file), its table row and the generated task with the `--task-keys` content; bad options are
//! refused before anything is written. No test needs Python or the network.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use ndvm_core::Heap;
use ndvm_search::engine;
use serde_json::{Value, json};

use common::{nmse, read_json, scratch};

fn suite(args: &[&str], out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ndvm-bench"))
        .arg("suite")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

/// The run's model scored here on the task's `truth` table.
fn truth_nmse(run: &Value, task_path: &Path) -> f64 {
    let task = ndvm_search::task::load_seeded(task_path, run["seed"].as_u64().unwrap()).unwrap();
    let (_, truth) = task.tests.iter().find(|(n, _)| n == "truth").unwrap();
    let params: BTreeMap<String, f64> = serde_json::from_value(run["params"].clone()).unwrap();
    let mut heap = Heap::new();
    let program = task
        .frontends
        .by_name(run["frontend"].as_str().unwrap())
        .unwrap()
        .parse(&mut heap, run["model"].as_str().unwrap())
        .unwrap();
    let pred = engine::predict(&task, &mut heap, &program, &params, truth).unwrap();
    nmse(&pred, &truth.target)
}

#[test]
fn smoke_run_without_pyoperon() {
    let dir = scratch("bench-suite", "smoke");
    let keys = dir.join("keys.yaml");
    let keys_text = "# measured against the defaults\nselection: lowest-error\n";
    std::fs::write(&keys, keys_text).unwrap();
    let out_dir = dir.join("out");
    let args = [
        "--quick",
        "--no-pyoperon",
        "--calibrations",
        "200",
        "--problems",
        "arrhenius",
        "--task-keys",
        keys.to_str().unwrap(),
    ];
    let out = suite(&args, &out_dir);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "bench suite failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("\n| arrhenius | 0 | "), "{stdout}");
    assert!(
        stdout.contains("ndvm wins in range on 0 of 0 cells")
            && stdout.contains("Recovery (truth NMSE < 1e-5): ndvm ")
            && stdout.contains("- pyoperon 0.5.0: skipped (--no-pyoperon)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("wrote {}", out_dir.join("suite.json").display())),
        "{stdout}"
    );
    let md = std::fs::read_to_string(out_dir.join("suite.md")).unwrap();
    assert!(stdout.starts_with(&md), "{md}");

    let json = read_json(&out_dir.join("suite.json"));
    assert_eq!(json["suite"], "suite");
    assert_eq!(
        json["command"],
        format!(
            "ndvm-bench suite --seconds 5 --threads 2 --seeds 1 --noise 0 --problems arrhenius \
             --calibrations 200 --task-keys {} --no-pyoperon",
            keys.display()
        )
    );
    assert_eq!(json["seeds"], json!([1]));
    assert_eq!(json["noise"], json!([0.0]));
    assert_eq!(json["recovered_below"], 1e-5);
    assert_eq!(json["task_keys"]["content"], keys_text);
    assert_eq!(json["task_keys"]["keys"], json!(["selection"]));
    for key in ["nproc", "os", "profile", "git_commit", "date_utc"] {
        assert!(json["machine"].get(key).is_some(), "machine has no {key}");
    }
    assert_eq!(
        json["problems"],
        json!([{
            "name": "arrhenius", "family": "selection", "reference": "selection_suite.py",
            "inputs": ["T"], "formula": "3*exp(-2/T)", "range": [[0.5, 3.0]],
            "ood": [[3.0, 5.0]], "data": null
        }])
    );

    // The generated data and task.
    let data = out_dir.join("suite-data");
    let truth = std::fs::read_to_string(data.join("arrhenius-n0-truth.csv")).unwrap();
    let rows: Vec<(f64, f64)> = truth
        .lines()
        .skip(1)
        .map(|l| {
            let (t, f) = l.split_once(',').unwrap();
            (t.parse().unwrap(), f.parse().unwrap())
        })
        .collect();
    assert_eq!(rows.len(), 200);
    assert!(rows[..100].iter().all(|&(t, _)| (0.5..=3.0).contains(&t)));
    assert!(rows[100..].iter().all(|&(t, _)| (3.0..=5.0).contains(&t)));
    for (t, f) in rows {
        assert_eq!(f, 3.0 * (-2.0 / t).exp());
    }
    let task_path = data.join("arrhenius-n0-s1.yaml");
    let task = std::fs::read_to_string(&task_path).unwrap();
    assert!(
        task.contains("name: arrhenius-n0-s1\nseed: 1\n")
            && task.contains("budget: {seconds: 5}\n")
            && task.ends_with(keys_text)
            && !task.contains("proposer"),
        "{task}"
    );

    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1);
    let cell = &cells[0];
    assert_eq!(cell["problem"], "arrhenius");
    assert_eq!(cell["noise"], 0.0);
    assert_eq!(
        cell["rows"],
        json!({"train": 200, "test_id": 100, "test_ood": 100, "truth": 200})
    );
    assert_eq!(
        cell["winner"],
        json!({"test_id": null, "test_ood": null, "truth": null})
    );
    let ours = &cell["tools"][0];
    assert_eq!(ours["tool"], "ndvm");
    assert_eq!(ours["status"], "ran");
    let runs = ours["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run["seed"], 1);
    assert!(run.get("error").is_none(), "{run}");
    let calibrations = run["calibrations"].as_u64().unwrap();
    assert!((1..=200).contains(&calibrations), "{run}");
    assert!(run["size"].as_u64().unwrap() > 0, "{run}");
    for table in ["train", "test_id", "test_ood", "truth"] {
        let v = run["nmse"][table].as_f64().unwrap_or(f64::NAN);
        assert!(v.is_finite() && v >= 0.0, "nmse.{table} of {run}");
        // One seed: the median is the run's value.
        assert_eq!(ours["median"][table].as_f64(), Some(v), "{table}");
    }
    let got = run["nmse"]["truth"].as_f64().unwrap();
    let want = truth_nmse(run, &task_path);
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1e-300),
        "truth NMSE {got} vs recomputed {want}"
    );
    assert_eq!(run["recovered"], got < 1e-5);
    assert_eq!(ours["recovered"], u64::from(got < 1e-5));
    assert_eq!(ours["median_size"].as_f64(), run["size"].as_f64());

    let theirs = &cell["tools"][1];
    assert_eq!(theirs["tool"], "pyoperon");
    assert_eq!(theirs["status"], "skipped");
    assert_eq!(theirs["runs"], json!([]));
    assert_eq!(theirs["recovered"], Value::Null);
    assert_eq!(json["totals"]["in_range"]["of"], 0);
    assert_eq!(
        json["totals"]["recovery_ndvm"],
        json!({"recovered": u64::from(got < 1e-5), "runs": 1})
    );

    // The journal: one line, the run's key and the result suite.json shows.
    let lines = journal_lines(&out_dir);
    assert_eq!(lines.len(), 1);
    let line = &lines[0];
    let key = [
        "tool",
        "problem",
        "noise",
        "seed",
        "seconds",
        "threads",
        "calibrations",
    ]
    .map(|k| line[k].clone());
    assert_eq!(
        key,
        [
            json!("ndvm"),
            json!("arrhenius"),
            json!("0"),
            json!(1),
            json!(5.0),
            json!(2),
            json!(200)
        ]
    );
    assert_eq!(line["inputs"].as_str().unwrap().len(), 16);
    assert_eq!(line["result"], *run);
    // A rerun into the same folder: with the sources committed the run comes from the journal,
    // the same to the bit, and no line is added; with uncommitted changes to them (no code
    // identity) it runs again.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let status = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["status", "--porcelain", "--untracked-files=no", "--"])
        .args(ndvm_bench::suite::BUILT_FROM)
        .output()
        .unwrap();
    assert!(status.status.success());
    let clean = status.stdout.is_empty();
    let code = ndvm_bench::suite::ndvm_code(json["machine"]["profile"].as_str().unwrap());
    assert_eq!(code.is_some(), clean);
    assert_eq!(line["code"], json!(code));
    if let Some(code) = &code {
        let (head, digest) = code.rsplit_once(" sources ").unwrap();
        assert_eq!(head, "ndvm-search 0.1.0 debug", "{code}");
        assert!(digest.len() == 16 && digest.chars().all(|c| c.is_ascii_hexdigit()));
    }
    let again = suite(&args, &out_dir);
    let stderr = String::from_utf8_lossy(&again.stderr).into_owned();
    assert!(again.status.success(), "{stderr}");
    let rerun = read_json(&out_dir.join("suite.json"));
    let rerun = &rerun["cells"][0]["tools"][0]["runs"][0];
    assert!(stderr.contains("holds 1 finished run(s)"), "{stderr}");
    assert_eq!(stderr.contains("(from the journal)"), clean, "{stderr}");
    assert_eq!(rerun == run, clean, "{rerun}");
    assert_eq!(journal_lines(&out_dir).len(), if clean { 1 } else { 2 });
}

fn journal_lines(out_dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(out_dir.join("suite-runs.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Unknown problems, task keys that set the suite's own keys, and options of the other suite are
/// refused with a usage error, and nothing is written.
#[test]
fn bad_options_are_refused_before_anything_is_written() {
    let dir = scratch("bench-suite", "refused");
    let keys = dir.join("keys.yaml");
    std::fs::write(&keys, "budget: {seconds: 1}\n").unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["suite", "--no-ndvm"], "cannot be used with"),
        (&["suite", "--problems", "arrhenus"], "no such problem"),
        (
            &["suite", "--task-keys", keys.to_str().unwrap()],
            "`budget` is written by the suite",
        ),
        (&["suite", "--tasks", "tasks"], "belongs to `bench search`"),
        (&["search", "--noise", "0"], "belong to `bench suite`"),
    ];
    for (args, message) in cases {
        let out_dir = dir.join("out");
        let out = Command::new(env!("CARGO_BIN_EXE_ndvm-bench"))
            .args(args)
            .args(["--quick", "--no-pyoperon", "--out"])
            .arg(&out_dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(!out_dir.exists(), "{args:?} wrote {}", out_dir.display());
    }
}
