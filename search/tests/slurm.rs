//! `ndvm-search slurm` against a real single-node Slurm (built with the `slurm-cluster` feature;
//! `.ci/run` starts the daemons with `.ci/slurm-up.sh` and runs this file): the generated scripts
//! pass `sbatch --test-only`, a 4-shard replay array and its `afterok` merge equal the local run,
//! and a shard cancelled mid-run (`scancel`) is completed by resubmitting it alone, with nothing
//! lost or calibrated twice. Without a running Slurm every test here fails, loudly.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{events_without, root, run_ok, summary, summary_core};
use serde_json::Value;

/// The bound of every wait.
const WAIT: Duration = Duration::from_secs(300);

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn events_core(dir: &Path) -> Vec<Value> {
    events_without(dir, &["wall_ms", "finished_s"])
}

/// Panics unless a Slurm controller answers (`.ci/slurm-up.sh` starts one).
fn require_slurm() {
    let conf = std::env::var("SLURM_CONF")
        .expect("SLURM_CONF is unset: start a Slurm with `.ci/slurm-up.sh DIR` (as .ci/run does)");
    let ping = Command::new("scontrol")
        .arg("ping")
        .output()
        .expect("scontrol is not on PATH: install slurm-wlm (.ci/slurm-up.sh does)");
    let text = String::from_utf8_lossy(&ping.stdout);
    assert!(
        text.contains("is UP"),
        "slurmctld is not up ({conf}): {text}"
    );
}

fn replay_task() -> PathBuf {
    common::testdata("seed-data/cosearch_candidates_valid.jsonl");
    root().join("search/tests/data/tasks/replay.yaml")
}

/// `ndvm-search slurm replay.yaml --shards 4 --out DIR --budget-calibrations 48 EXTRA…` with
/// `env` added (sbatch passes the submitting environment on to the jobs).
fn slurm(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> String {
    let task = replay_task();
    let mut c = Command::new(env!("CARGO_BIN_EXE_ndvm-search"));
    c.current_dir(root())
        .args(["slurm", p(&task), "--shards", "4", "--out", p(dir)])
        .args(["--budget-calibrations", "48", "--cpus", "1"])
        .args(extra)
        .env_remove("NDVM_TEST_PAUSE_MS")
        .envs(env.iter().copied());
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "ndvm-search slurm failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `(array, merge)` from "submitted array job A (shards …) and merge job M (afterok:A)".
fn submitted(stdout: &str) -> (u64, u64) {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("submitted array job "))
        .unwrap_or_else(|| panic!("no submission in\n{stdout}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let array = words[3].parse().unwrap();
    let merge = words[words.iter().position(|w| *w == "merge").unwrap() + 2]
        .parse()
        .unwrap();
    (array, merge)
}

/// Every job and array task of `ids`, finished ones included: id (`17_2`, `18`) → (state,
/// reason).
fn jobs(ids: &[u64]) -> BTreeMap<String, (String, String)> {
    let list: Vec<String> = ids.iter().map(u64::to_string).collect();
    let out = Command::new("squeue")
        .args([
            "-h",
            "-r",
            "-t",
            "all",
            "-o",
            "%i|%T|%r",
            "-j",
            &list.join(","),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.trim().split('|').collect();
            (f.len() == 3).then(|| (f[0].to_string(), (f[1].to_string(), f[2].to_string())))
        })
        .collect()
}

/// Polls until `done` holds for the jobs of `ids`; panics after [`WAIT`] with the queue and the
/// jobs' output files of `dir`.
fn wait_until(
    what: &str,
    ids: &[u64],
    dir: &Path,
    done: impl Fn(&BTreeMap<String, (String, String)>) -> bool,
) {
    let started = Instant::now();
    loop {
        let now = jobs(ids);
        if done(&now) {
            return;
        }
        if started.elapsed() > WAIT {
            let mut outs = String::new();
            for e in std::fs::read_dir(dir.join("slurm")).unwrap().flatten() {
                if e.path().extension().is_some_and(|x| x == "out") {
                    let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                    outs.push_str(&format!("--- {}\n{text}\n", e.path().display()));
                }
            }
            panic!("timed out waiting for {what}: {now:?}\n{outs}");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn state_of<'a>(jobs: &'a BTreeMap<String, (String, String)>, id: &str) -> &'a str {
    jobs.get(id).map_or("", |(s, _)| s.as_str())
}

fn all_completed(jobs: &BTreeMap<String, (String, String)>, ids: &[String]) -> bool {
    ids.iter().all(|id| state_of(jobs, id) == "COMPLETED")
}

#[test]
fn an_array_and_its_merge_equal_a_local_run_and_a_cancelled_shard_is_resubmitted_alone() {
    require_slurm();
    let dir = common::scratch("slurm", "cluster");
    let whole = dir.join("whole");
    let task = replay_task();
    let budget = ["--budget-calibrations", "48", "-q"];
    run_ok(&[&["run", p(&task), "--out", p(&whole)][..], &budget[..]].concat());

    // 1. Both scripts pass `sbatch --test-only`.
    let a = dir.join("a");
    slurm(&a, &[], &[]);
    for script in ["shards.sbatch", "merge.sbatch"] {
        let out = Command::new("sbatch")
            .arg("--test-only")
            .arg(a.join("slurm").join(script))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && err.contains("to start at"),
            "{script}: {err}"
        );
    }

    // 2. Submitted: four array tasks, then the merge; the merged folder is the local run.
    let started = Instant::now();
    let (array, merge) = submitted(&slurm(&a, &["--submit"], &[]));
    let mut ids: Vec<String> = (0..4).map(|i| format!("{array}_{i}")).collect();
    ids.push(merge.to_string());
    wait_until("the array and its merge", &[array, merge], &a, |j| {
        all_completed(j, &ids)
    });
    eprintln!(
        "4-shard array submitted to merged summary: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(events_core(&a.join("merged")), events_core(&whole));
    assert_eq!(summary_core(&a.join("merged")), summary_core(&whole));

    // 3. Each calibration paused 300 ms; shard 2 cancelled once it has two results.
    let b = dir.join("b");
    let (array2, merge2) = submitted(&slurm(&b, &["--submit"], &[("NDVM_TEST_PAUSE_MS", "300")]));
    let s2 = b.join("shard-2");
    wait_until("shard 2 to have two results", &[array2], &b, |_| {
        std::fs::read_to_string(s2.join("events.jsonl")).is_ok_and(|t| t.lines().count() >= 2)
    });
    let cancel = Command::new("scancel")
        .arg(format!("{array2}_2"))
        .output()
        .unwrap();
    assert!(
        cancel.status.success(),
        "{}",
        String::from_utf8_lossy(&cancel.stderr)
    );
    let others: Vec<String> = [0, 1, 3].iter().map(|i| format!("{array2}_{i}")).collect();
    wait_until(
        "the cancel and the stuck merge",
        &[array2, merge2],
        &b,
        |j| {
            state_of(j, &format!("{array2}_2")) == "CANCELLED"
                && all_completed(j, &others)
                && j.get(&merge2.to_string())
                    .is_some_and(|(s, r)| s == "PENDING" && r == "DependencyNeverSatisfied")
        },
    );
    if s2.join("summary.json").exists() {
        assert_eq!(summary(&s2)["stop"], "interrupted");
    }
    let kept = events_core(&s2).len();
    assert!(kept >= 2, "{kept}");
    assert!(!b.join("merged").exists());

    // 4. Resubmitted: the stale merge is cancelled, shard 2 alone runs, and resumes its folder.
    let again = slurm(&b, &["--submit"], &[]);
    assert!(
        again.contains(&format!("cancelled merge job {merge2}")),
        "{again}"
    );
    assert!(again.contains("(shards 2)"), "{again}");
    let (array3, merge3) = submitted(&again);
    let ids3 = vec![format!("{array3}_2"), merge3.to_string()];
    wait_until("the resubmission", &[array3, merge3], &b, |j| {
        all_completed(j, &ids3)
    });
    assert_eq!(jobs(&[array3]).len(), 1, "only shard 2 was resubmitted");
    assert_ne!(summary(&s2)["stop"], "interrupted");
    let fresh = summary(&s2)["run"]["fresh_calibrations"].as_u64().unwrap() as usize;
    let indices: Vec<u64> = events_core(&s2)
        .iter()
        .map(|e| e["index"].as_u64().unwrap())
        .collect();
    assert_eq!(fresh + kept, indices.len(), "nothing calibrated twice");
    assert!(
        fresh > 0 && kept < indices.len(),
        "cut mid-run: {kept} of {}",
        indices.len()
    );
    let mut unique = indices.clone();
    unique.dedup();
    assert_eq!(unique, indices);
    assert_eq!(events_core(&b.join("merged")), events_core(&whole));
    assert_eq!(summary_core(&b.join("merged")), summary_core(&whole));

    // 5. Once more: nothing to do, nothing submitted.
    assert!(slurm(&b, &["--submit"], &[]).contains("nothing to do"));
}
