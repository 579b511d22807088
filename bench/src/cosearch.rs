//! Co-search throughput: the whole engine (validation, skeleton dedup, calibration with the task's
//! calibrator settings, scoring) replaying the 247-candidate stream of the seed experiment
//! (`search/tests/data/tasks/replay.yaml`), at 1, 2, … threads: calibrations per second, and
//! time and calibrations to the first held-out R² > 0.9.

use std::path::{Path, PathBuf};

use serde::Serialize;

use ndvm_search::Result;
use ndvm_search::observe::ProgressMode;
use ndvm_search::runcmd::{self, RunArgs};

/// One thread count.
#[derive(Clone, Debug, Serialize)]
pub struct CosearchRow {
    /// Calibration threads.
    pub n_threads: usize,
    /// Distinct candidates calibrated (the same in every pass).
    pub calibrations: u64,
    /// Wall-clock seconds of the median pass.
    pub elapsed_s: f64,
    /// `calibrations / elapsed_s` of the median pass.
    pub calibrations_per_s: f64,
    /// Calibrations per second of every pass, in order.
    pub passes_calibrations_per_s: Vec<f64>,
    /// Seconds until the round holding the first success ended (median pass).
    pub time_to_first_success_s: Option<f64>,
    /// Calibrations up to and including the first success (its index in the distinct stream + 1).
    pub calibrations_to_first_success: Option<u64>,
    /// Best validation R² of the run (the same in every pass).
    pub best_validation_r2: Option<f64>,
}

/// Passes of the stream per thread count in a full run: one pass is ≈ 0.65 s on one thread and
/// swings by ± 10 % on a shared machine, so the median of several is reported.
pub const PASSES: usize = 5;

/// The replay task the suite runs: `search/tests/data/tasks/replay.yaml` of the checkout this
/// binary was built from.
pub fn replay_task() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .unwrap_or(manifest)
        .join("search/tests/data/tasks/replay.yaml")
}

/// Runs the replay task `passes` times per thread count, the thread counts round-robin within
/// each pass so that load from elsewhere falls on all alike (`budget` caps calibrations for a
/// quick run); each row reports the median pass. Every pass must calibrate the same candidates
/// to the same best validation R² (bit for bit): the engine is deterministic at any thread count.
pub fn replay(
    threads: &[usize],
    budget: Option<usize>,
    passes: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<CosearchRow>> {
    let mut runs: Vec<Vec<CosearchRow>> = vec![Vec::new(); threads.len()];
    for pass in 0..passes.max(1) {
        for (&n_threads, runs) in threads.iter().zip(&mut runs) {
            progress(&format!(
                "cosearch: replay stream on {n_threads} thread(s), pass {}",
                pass + 1
            ));
            runs.push(one_pass(n_threads, budget)?);
        }
    }
    Ok(runs.into_iter().map(median_pass).collect())
}

/// One pass of the replay task on `n_threads` threads.
fn one_pass(n_threads: usize, budget: Option<usize>) -> Result<CosearchRow> {
    let out = std::env::temp_dir().join(format!(
        "ndvm-bench-cosearch-{}-{n_threads}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&out);
    let args = RunArgs {
        task: Some(replay_task()),
        resume: None,
        out: Some(out.clone()),
        threads: Some(n_threads),
        shard: None,
        budget_seconds: None,
        budget_calibrations: budget,
        progress: ProgressMode::Quiet,
        interrupt: None,
    };
    let report = runcmd::run(&args, &mut |_| {});
    let _ = std::fs::remove_dir_all(&out);
    let outcome = report?.outcome;
    let best = outcome
        .events
        .iter()
        .filter_map(|e| e.validation_r2)
        .fold(None, |b: Option<f64>, r| Some(b.map_or(r, |b| b.max(r))));
    let rate = if outcome.elapsed > 0.0 {
        outcome.n_fresh as f64 / outcome.elapsed
    } else {
        0.0
    };
    Ok(CosearchRow {
        n_threads,
        calibrations: outcome.n_fresh,
        elapsed_s: outcome.elapsed,
        calibrations_per_s: rate,
        passes_calibrations_per_s: vec![rate],
        time_to_first_success_s: outcome.time_to_first_success,
        calibrations_to_first_success: outcome.first_success.map(|i| i + 1),
        best_validation_r2: best,
    })
}

/// The pass of median speed among `runs` (one thread count), with every pass's speed.
fn median_pass(mut runs: Vec<CosearchRow>) -> CosearchRow {
    let rates: Vec<f64> = runs.iter().map(|r| r.calibrations_per_s).collect();
    let same = |r: &CosearchRow| {
        (
            r.calibrations,
            r.calibrations_to_first_success,
            r.best_validation_r2.map(f64::to_bits),
        )
    };
    assert!(
        runs.windows(2).all(|w| same(&w[0]) == same(&w[1])),
        "co-search passes on {} thread(s) differ in what they calibrated",
        runs[0].n_threads
    );
    runs.sort_by(|a, b| a.calibrations_per_s.total_cmp(&b.calibrations_per_s));
    let mut row = runs.swap_remove(runs.len() / 2);
    row.passes_calibrations_per_s = rates;
    row
}

/// A Markdown table of the rows.
pub fn table(rows: &[CosearchRow]) -> String {
    let passes = rows
        .first()
        .map_or(0, |r| r.passes_calibrations_per_s.len());
    let mut s = format!(
        "co-search: replay of the 247-candidate stream (task search/tests/data/tasks/replay.yaml), \
         median of {passes} pass(es)\n\n\
         | threads | calibrations | elapsed (s) | calibrations/s | time to first success (s) | calibrations to first success | best validation R² |\n\
         |--:|--:|--:|--:|--:|--:|--:|\n",
    );
    let opt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.3}"));
    for r in rows {
        s += &format!(
            "| {} | {} | {:.3} | {:.1} | {} | {} | {} |\n",
            r.n_threads,
            r.calibrations,
            r.elapsed_s,
            r.calibrations_per_s,
            opt(r.time_to_first_success_s),
            r.calibrations_to_first_success
                .map_or("-".to_string(), |c| c.to_string()),
            r.best_validation_r2
                .map_or("-".to_string(), |v| format!("{v:.4}")),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rate: f64, r2: f64) -> CosearchRow {
        CosearchRow {
            n_threads: 1,
            calibrations: 192,
            elapsed_s: 192.0 / rate,
            calibrations_per_s: rate,
            passes_calibrations_per_s: vec![rate],
            time_to_first_success_s: Some(0.1),
            calibrations_to_first_success: Some(30),
            best_validation_r2: Some(r2),
        }
    }

    #[test]
    fn the_median_pass_is_reported_with_every_pass() {
        let runs = [300.0, 250.0, 310.0, 290.0, 200.0].map(|r| row(r, 0.9963));
        let m = median_pass(runs.to_vec());
        assert_eq!(m.calibrations_per_s, 290.0);
        assert_eq!(m.elapsed_s, 192.0 / 290.0);
        assert_eq!(
            m.passes_calibrations_per_s,
            [300.0, 250.0, 310.0, 290.0, 200.0]
        );
    }

    #[test]
    #[should_panic(expected = "differ in what they calibrated")]
    fn passes_that_calibrate_differently_stop_the_suite() {
        median_pass(vec![row(300.0, 0.9963), row(290.0, 0.9962)]);
    }
}
