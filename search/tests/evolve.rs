//! End-to-end tests of the `evolve` proposer through the `ndvm-search` binary: it is the default
//! without a cache; its stream (and so `summary.json`) is the same at any thread count and after a
//! kill and resume; a cache's programs come first and seed the population; shards are refused;
//! and evolution beats random sampling at the same number of calibrations.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{root, run_at, run_ok, summary, summary_core};

fn test_task(name: &str) -> PathBuf {
    root().join("search/tests/data/tasks").join(name)
}

fn scratch(name: &str) -> PathBuf {
    common::scratch("evolve", name)
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `events.jsonl` without the wall-clock fields, line by line.
fn events_core(dir: &Path) -> Vec<String> {
    common::events_without(dir, &["wall_ms", "finished_s"])
        .iter()
        .map(|v| v.to_string())
        .collect()
}

#[test]
fn evolve_is_the_default_and_the_same_at_one_and_two_threads() {
    let dir = scratch("threads");
    let task = test_task("evolve.yaml");
    let (a, b, c) = (dir.join("t1"), dir.join("t2"), dir.join("t2b"));
    run_at(&task, &a, "1");
    run_at(&task, &b, "2");
    run_at(&task, &c, "2");
    assert_eq!(
        summary_core(&a),
        summary_core(&b),
        "--threads 1 and 2 differ"
    );
    assert_eq!(summary_core(&b), summary_core(&c), "two runs differ");
    assert_eq!(events_core(&a), events_core(&b));
    let s = summary(&a);
    assert_eq!(s["proposer"], "evolve", "{}", s["proposer"]);
    assert_eq!(s["calibrations"], 60);
    assert_eq!(common::events_without(&a, &[]).len(), 60);
    assert!(
        s["best"]["validation_r2"].as_f64().unwrap() > 0.9,
        "{}",
        s["best"]
    );
}

#[test]
fn a_killed_evolve_run_resumes_to_the_uninterrupted_result() {
    let dir = scratch("resume");
    let task = test_task("evolve.yaml");
    let reference = dir.join("reference");
    run_at(&task, &reference, "1");
    let out = dir.join("killed");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .current_dir(root())
        .args(["run", p(&task), "--out", p(&out), "--threads", "1", "-q"])
        .env_remove("SLURM_ARRAY_TASK_ID")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let events = out.join("events.jsonl");
    let lines = || std::fs::read_to_string(&events).map_or(0, |t| t.matches('\n').count());
    let started = Instant::now();
    while lines() < 15 && started.elapsed() < Duration::from_secs(120) {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(child.try_wait().unwrap().is_none(), "the run ended first");
    child.kill().unwrap();
    child.wait().unwrap();
    run_ok(&["run", "--resume", p(&out), "-q"]);
    assert_eq!(events_core(&out), events_core(&reference));
    assert_eq!(summary_core(&out), summary_core(&reference));
}

#[test]
fn a_cache_seeds_the_population_and_comes_first() {
    let dir = scratch("seeds");
    let cache = dir.join("seeds.jsonl");
    let seeds = [
        "(* a x)",
        "(/ (* a x) (+ b (* x x)))",
        "(+ (* a (exp (* b x))) c)",
    ];
    let lines: String = seeds
        .iter()
        .map(|s| format!("{{\"src\": \"{s}\"}}\n"))
        .collect();
    std::fs::write(&cache, lines).unwrap();
    let text = std::fs::read_to_string(test_task("evolve.yaml")).unwrap();
    let text = text
        .replace(
            "proposer: {batch: 6,",
            &format!("proposer: {{kind: evolve, cache: {},", p(&cache)),
        )
        .replace("from: 0.1", "from: 0.1\n    noise: 0.0");
    let task = dir.join("task.yaml");
    std::fs::write(&task, text).unwrap();
    let out = dir.join("run");
    run_ok(&["run", p(&task), "--out", p(&out), "-q"]);
    let events = common::events_without(&out, &[]);
    let srcs: Vec<&str> = events.iter().map(|e| e["src"].as_str().unwrap()).collect();
    assert_eq!(srcs[..3], seeds, "the cache comes first");
    // The second seed is the truth: it fits, and the population breeds from it: later
    // programs keep its numerator over another denominator, or the fraction times a factor.
    let r2 = events[1]["validation_r2"].as_f64().unwrap();
    assert!(r2 > 0.999_999, "{r2}");
    let descendants = srcs[3..]
        .iter()
        .filter(|s| s.contains("(/ (* a x) ("))
        .count();
    assert!(
        descendants >= 2,
        "{descendants} descendants of the seed: {srcs:?}"
    );
    assert_eq!(summary(&out)["proposer"], "evolve");
}

#[test]
fn shards_are_refused_with_evolve() {
    let dir = scratch("shards");
    let out = Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .current_dir(root())
        .args(["run", p(&test_task("evolve.yaml")), "--shard", "0/2"])
        .args(["--out", p(&dir.join("run"))])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("evolve proposer breeds from every calibration"),
        "{err}"
    );
}

/// The best validation NMSE of `task` run with its proposer line replaced by `proposer` and its
/// seed by `seed`.
fn best_nmse(dir: &Path, name: &str, proposer: &str, seed: u64) -> f64 {
    let text = std::fs::read_to_string(test_task("oscillator1-evolve.yaml"))
        .unwrap()
        .replace("  kind: evolve\n", proposer)
        .replace("seed: 1\n", &format!("seed: {seed}\n"))
        .replace("../../../../testdata", p(&root().join("testdata")));
    let task = dir.join(format!("{name}.yaml"));
    std::fs::write(&task, text).unwrap();
    let out = dir.join(name);
    run_at(&task, &out, "2");
    let s = summary(&out);
    assert_eq!(s["calibrations"], 1000, "{name}");
    s["best"]["validation_nmse"].as_f64().unwrap()
}

#[test]
fn evolution_beats_random_sampling_at_the_same_number_of_calibrations() {
    common::testdata("llmsr-data/oscillator1/train.csv");
    let dir = scratch("versus");
    // One seed's search is chaotic (a change in a calibration's last bit sends it elsewhere):
    // evolution finds a near-exact law on some seeds (NMSE 1e-10) and ends level with random
    // sampling on others, while the random streams end near 1e-4 on every seed. So the claim is
    // over ten seeds: on the median seed evolution ends at least 3× below the better random
    // stream, and it ends below both on most. Evolution runs with its defaults (the named factor
    // shapes, the adaptive choice of moves) but a population of 64: 1,000 calibrations are few
    // for the default 128 (median ratio 1.5, below both on 6 of 10). Measured (ratio = better
    // random ÷ evolve, seeds 1–10): 0.59, 9.4e5, 0.95, 40, 35, 5.3e5, 7.8, 16, 1.8e6, 1.5e6 —
    // median 37, below both on 8 of 10.
    let mut ratios = Vec::new();
    for seed in 1..=10 {
        let evolved = best_nmse(
            &dir,
            &format!("evolve{seed}"),
            "  kind: evolve\n  population: 64\n",
            seed,
        );
        let grammar = best_nmse(&dir, &format!("grammar{seed}"), "  kind: grammar\n", seed);
        let tree = best_nmse(
            &dir,
            &format!("tree{seed}"),
            "  kind: grammar\n  max_depth: 3\n",
            seed,
        );
        ratios.push((grammar.min(tree) / evolved, seed, evolved, grammar, tree));
    }
    let wins = ratios.iter().filter(|r| r.0 > 1.0).count();
    let mut sorted: Vec<f64> = ratios.iter().map(|r| r.0).collect();
    sorted.sort_by(f64::total_cmp);
    let median = (sorted[4] * sorted[5]).sqrt();
    assert!(
        median >= 3.0 && wins >= 6,
        "median ratio {median:.3}, evolution below both random streams on {wins} of 10 \
         (ratio, seed, evolve, grammar, tree grammar): {ratios:?}"
    );
}
