//! Co-search throughput: the whole engine (validation, skeleton dedup, calibration with the task's
//! calibrator settings, scoring) replaying the 247-candidate stream of the seed experiment
//! (`search/tests/data/tasks/replay.yaml`), at 1, 2, … threads: calibrations per second, and
//! time and calibrations to the first held-out R² > 0.9.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::Result;
use crate::observe::ProgressMode;
use crate::runcmd::{self, RunArgs};

/// One thread count.
#[derive(Clone, Debug, Serialize)]
pub struct CosearchRow {
    /// Calibration threads.
    pub n_threads: usize,
    /// Distinct candidates calibrated.
    pub calibrations: u64,
    /// Wall-clock seconds of the run.
    pub elapsed_s: f64,
    /// `calibrations / elapsed_s`.
    pub calibrations_per_s: f64,
    /// Seconds until the round holding the first success ended.
    pub time_to_first_success_s: Option<f64>,
    /// Calibrations up to and including the first success (its index in the distinct stream + 1).
    pub calibrations_to_first_success: Option<u64>,
    /// Best validation R² of the run.
    pub best_validation_r2: Option<f64>,
}

/// The replay task the suite runs.
pub fn replay_task() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tasks/replay.yaml")
}

/// Runs the replay task once per thread count (`budget` caps calibrations for a quick run).
pub fn replay(
    threads: &[usize],
    budget: Option<usize>,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<CosearchRow>> {
    let mut rows = Vec::new();
    for &n_threads in threads {
        progress(&format!("cosearch: replay stream on {n_threads} thread(s)"));
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
        rows.push(CosearchRow {
            n_threads,
            calibrations: outcome.n_fresh,
            elapsed_s: outcome.elapsed,
            calibrations_per_s: if outcome.elapsed > 0.0 {
                outcome.n_fresh as f64 / outcome.elapsed
            } else {
                0.0
            },
            time_to_first_success_s: outcome.time_to_first_success,
            calibrations_to_first_success: outcome.first_success.map(|i| i + 1),
            best_validation_r2: best,
        });
    }
    Ok(rows)
}

/// A Markdown table of the rows.
pub fn table(rows: &[CosearchRow]) -> String {
    let mut s = String::from(
        "co-search: replay of the 247-candidate stream (task search/tests/data/tasks/replay.yaml)\n\n\
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
