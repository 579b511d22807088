//! `ndvm-search slurm` without a cluster: the scripts it writes, run by `bash` as Slurm would run
//! them (one array task per unfinished shard, then the merge), give the single-machine run's
//! events and summary; a shard killed mid-run is the only one the next render lists, and it
//! resumes its own folder under the variables of a partial array; folders of another shard count
//! and paths an `#SBATCH` line cannot hold are refused. `tests/slurm.rs` submits the same scripts
//! to a real Slurm.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{events_without, root, run_ok, summary, summary_core};
use serde_json::Value;

fn replay_task() -> PathBuf {
    common::testdata("seed-data/cosearch_candidates_valid.jsonl");
    root().join("search/tests/data/tasks/replay.yaml")
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn events_core(dir: &Path) -> Vec<Value> {
    events_without(dir, &["wall_ms", "finished_s"])
}

/// `ndvm-search slurm TASK --shards N --out DIR --budget-calibrations 48 EXTRA…`.
fn slurm(task: &Path, shards: &str, dir: &Path, extra: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ndvm-search"));
    c.current_dir(root())
        .args(["slurm", p(task), "--shards", shards, "--out", p(dir)])
        .args(["--budget-calibrations", "48"])
        .args(extra);
    for v in slurm_vars() {
        c.env_remove(v);
    }
    c.output().unwrap()
}

fn slurm_vars() -> [&'static str; 5] {
    [
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_COUNT",
        "SLURM_ARRAY_TASK_MIN",
        "SLURM_ARRAY_TASK_MAX",
        "SLURM_JOB_ID",
    ]
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Runs `script` with bash as the array task `i` of a submission of `count` tasks (as Slurm
/// sets the variables), with `env` added.
fn run_script(script: &Path, i: u64, count: u64, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new("bash");
    c.arg(script)
        .env("SLURM_ARRAY_TASK_ID", i.to_string())
        .env("SLURM_ARRAY_TASK_COUNT", count.to_string())
        .env("SLURM_CPUS_PER_TASK", "1")
        .envs(env.iter().copied());
    c.output().unwrap()
}

fn array_line(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("slurm/shards.sbatch")).unwrap();
    text.lines()
        .find(|l| l.starts_with("#SBATCH --array="))
        .unwrap_or_else(|| panic!("no --array line in\n{text}"))
        .to_string()
}

#[test]
fn the_scripts_run_every_shard_resume_a_killed_one_and_merge_to_the_local_run() {
    let task = replay_task();
    let dir = common::scratch("slurm-scripts", "array");
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
    let d = dir.join("cluster");
    let first = stdout(&slurm(&task, "4", &d, &["--cpus", "1"]));
    assert!(
        first.contains("shards to run: fresh 0, 1, 2, 3; to resume none; finished none"),
        "{first}"
    );
    assert!(
        first.contains("sbatch --dependency=afterok:$array"),
        "{first}"
    );
    assert_eq!(array_line(&d), "#SBATCH --array=0-3");
    let shards = d.join("slurm/shards.sbatch");
    for i in [0, 1, 3] {
        let out = run_script(&shards, i, 4, &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Shard 2 dies while calibrating candidate 10 (10 % 4 = 2): a folder without a summary.
    let killed = run_script(&shards, 2, 4, &[("NDVM_TEST_ABORT_AT_INDEX", "10")]);
    assert!(!killed.status.success());
    let s2 = d.join("shard-2");
    assert!(s2.join("run.json").exists() && !s2.join("summary.json").exists());
    let kept: Vec<u64> = events_core(&s2)
        .iter()
        .map(|e| e["index"].as_u64().unwrap())
        .collect();
    assert!(kept.iter().all(|i| i % 4 == 2 && *i < 10), "{kept:?}");

    // The next render lists shard 2 alone; as the one task of a resubmitted array (Slurm then
    // sets SLURM_ARRAY_TASK_COUNT=1) it resumes its folder and calibrates only what is left.
    let second = stdout(&slurm(&task, "4", &d, &["--cpus", "1"]));
    assert!(
        second.contains("fresh none; to resume 2; finished 0, 1, 3"),
        "{second}"
    );
    assert_eq!(array_line(&d), "#SBATCH --array=2");
    let resumed = run_script(&shards, 2, 1, &[]);
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let run = &summary(&s2)["run"];
    let fresh = run["fresh_calibrations"].as_u64().unwrap();
    let total = events_core(&s2).len() as u64;
    assert_eq!(fresh + kept.len() as u64, total, "{run}");
    assert!(total > kept.len() as u64 + 1, "{total} {kept:?}");

    // The merge job's script, then nothing left to do.
    let merge = Command::new("bash")
        .arg(d.join("slurm/merge.sbatch"))
        .env("SLURM_JOB_ID", "77")
        .output()
        .unwrap();
    assert!(
        merge.status.success(),
        "{}",
        String::from_utf8_lossy(&merge.stderr)
    );
    let merged = d.join("merged");
    assert!(!d.join("merged.77").exists());
    assert_eq!(events_core(&merged), events_core(&whole));
    assert_eq!(summary_core(&merged), summary_core(&whole));
    let third = stdout(&slurm(&task, "4", &d, &["--submit"]));
    assert!(third.contains("nothing to do"), "{third}");
    assert!(
        !d.join("slurm/jobs.jsonl").exists(),
        "nothing was submitted"
    );
}

#[test]
fn other_shard_counts_odd_paths_and_evolve_are_refused() {
    let task = replay_task();
    let dir = common::scratch("slurm-scripts", "refusals");
    let d = dir.join("four");
    stdout(&slurm(&task, "4", &d, &[]));
    let shards = d.join("slurm/shards.sbatch");
    let out = run_script(&shards, 0, 4, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let three = slurm(&task, "3", &d, &[]);
    assert_eq!(three.status.code(), Some(1));
    let err = String::from_utf8_lossy(&three.stderr);
    assert!(err.contains("shard-0: holds shard 0/4, not 0/3"), "{err}");

    let spaced = slurm(&task, "2", &dir.join("a b"), &[]);
    assert_eq!(spaced.status.code(), Some(2));
    let err = String::from_utf8_lossy(&spaced.stderr);
    assert!(
        err.contains("Slurm scripts need a path without spaces"),
        "{err}"
    );

    let time = slurm(&task, "2", &dir.join("t"), &["--time", "1 hour"]);
    assert_eq!(time.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&time.stderr).contains("is not a Slurm value"));

    let evolve = root().join("search/tests/data/tasks/evolve.yaml");
    let out = slurm(&evolve, "2", &dir.join("evolve"), &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("evolve proposer cannot be split"), "{err}");
}

#[test]
fn a_partial_array_needs_a_named_shard_but_resume_ignores_the_array_variables() {
    let task = replay_task();
    let dir = common::scratch("slurm-scripts", "env");
    let run = |args: &[&str], vars: &[(&str, &str)]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ndvm-search"));
        c.current_dir(root()).args(args).envs(vars.iter().copied());
        for v in slurm_vars() {
            if !vars.iter().any(|(k, _)| k == &v) {
                c.env_remove(v);
            }
        }
        c.output().unwrap()
    };
    // `--array=1,3`: the task with id 3 sees a count of 2.
    let partial = [
        ("SLURM_ARRAY_TASK_ID", "3"),
        ("SLURM_ARRAY_TASK_COUNT", "2"),
        ("SLURM_ARRAY_TASK_MIN", "1"),
        ("SLURM_ARRAY_TASK_MAX", "3"),
    ];
    let out_dir = dir.join("fresh");
    let args = [
        "run",
        p(&task),
        "--out",
        p(&out_dir),
        "--budget-calibrations",
        "8",
        "-q",
    ];
    let out = run(&args, &partial);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not 0..N-1") && err.contains("--shard I/N"),
        "{err}"
    );
    assert!(!out_dir.exists());

    // A whole array `0-3` names shard 1/4.
    let whole = [
        ("SLURM_ARRAY_TASK_ID", "1"),
        ("SLURM_ARRAY_TASK_COUNT", "4"),
        ("SLURM_ARRAY_TASK_MIN", "0"),
        ("SLURM_ARRAY_TASK_MAX", "3"),
    ];
    let out = run(&args, &whole);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(meta["shard"], serde_json::json!({"index": 1, "count": 4}));

    // Resuming under the partial array's variables continues the folder's own shard.
    let out = run(&["run", "--resume", p(&out_dir), "-q"], &partial);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(summary(&out_dir)["run"]["fresh_calibrations"], 0);
}
