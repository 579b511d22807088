//! `summary.json` as typed structs ([`Summary`]), built from a task and a run's outcome and read
//! back by plots, merge and resume, and `summary.md` rendered from it. Keys are in alphabetical
//! order, the order the file has always had. The `run` section holds every wall-clock and
//! machine-dependent field; the rest is a pure function of the task and the events,
//! byte-identical across thread counts, runs, resumes and shard merges.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::engine;
pub use crate::events::TestScore;
use crate::events::{ChoiceEvent, Event, EventStatus, Outcome, Shard, StopKind, StreamStats};
use crate::select::{self, SelectionReport};
use crate::task::{MetricName, Task};

/// How many leaderboard entries the summary keeps (each with its test scores).
pub const LEADERBOARD: usize = 10;

/// `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The answer: the model the task's `selection` rule chose (see [`crate::select`]), with the
    /// finalists' refit; under `lowest-error`, the first leaderboard entry.
    pub best: Option<Entry>,
    /// Calibrations in the summary (this shard's, or all of them for a merge).
    pub calibrations: usize,
    /// Table sizes.
    pub data: DataSizes,
    /// The settings chosen from the data (absent when none was).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub defaults: Vec<crate::task::ChosenDefault>,
    /// Failed calibrations by error class.
    pub failures: BTreeMap<String, u64>,
    /// The first candidate that met the success threshold.
    pub first_success: Option<FirstSuccess>,
    /// The best candidates by validation error (or training loss), best first, as calibrated.
    pub leaderboard: Vec<Entry>,
    /// The lowest-error candidate (the leaderboard's first), reported as such whichever model the
    /// rule chose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lowest_error: Option<Entry>,
    /// The complexity/error Pareto front, simplest first.
    pub pareto: Vec<ParetoPoint>,
    /// The proposer's name.
    pub proposer: String,
    /// Wall-clock and machine facts (the only part that varies between identical runs).
    pub run: RunSection,
    /// The task's seed.
    pub seed: u64,
    /// How `best` was chosen (absent in folders written before selection existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<SelectionReport>,
    /// The settings the run used.
    pub settings: Settings,
    /// Calibrations by status.
    pub statuses: BTreeMap<EventStatus, u64>,
    /// Why the run stopped.
    pub stop: StopKind,
    /// Counts of the candidate stream.
    pub stream: StreamStats,
    /// The task's name.
    pub task: String,
    /// The task's warnings (an undefined validation score), then the proposer's.
    pub warnings: Vec<String>,
}

/// `settings`: what the run was asked to do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Candidates per round.
    pub batch: usize,
    /// Budget in calibrations.
    pub budget_calibrations: Option<usize>,
    /// Budget in seconds.
    pub budget_seconds: Option<f64>,
    /// The calibrator's seed.
    pub calibrator_seed: u64,
    /// The ranking metric.
    pub metric: MetricName,
    /// The optimizer, lowercase.
    pub optimizer: String,
    /// Starts per calibration.
    pub starts: usize,
    /// Whether the run stops after the round with the first success.
    pub stop_on_success: bool,
    /// The success threshold.
    pub threshold: f64,
}

/// `data`: rows of each table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataSizes {
    /// Training rows each candidate was screened on before its refit on all of them
    /// (`data.screen_rows`); absent when candidates were fitted on all rows at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screen_rows: Option<usize>,
    /// Rows of each test table, by name.
    pub tests: BTreeMap<String, usize>,
    /// Training rows.
    pub train: usize,
    /// Validation rows.
    pub validation: usize,
}

/// `first_success`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FirstSuccess {
    /// Calibrations of this summary up to and including it (for a shard, the shard's own).
    pub calibrations: u64,
    /// Its candidate id.
    pub id: Option<u64>,
    /// Its index in the distinct-candidate stream.
    pub index: u64,
}

/// A leaderboard entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The structure the fit chose (`soft-choice` read-out; absent without one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<ChoiceEvent>,
    /// Atoms and pairs in the program.
    pub complexity: usize,
    /// The front end that reads `src`.
    #[serde(default = "crate::events::fallback_frontend")]
    pub frontend: String,
    /// Candidate id.
    pub id: u64,
    /// Index in the distinct-candidate stream.
    pub index: u64,
    /// Fitted parameters.
    pub params: BTreeMap<String, f64>,
    /// Canonical skeleton.
    pub skeleton: String,
    /// Program text.
    pub src: String,
    /// Scores on each test table (absent when the task has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<BTreeMap<String, TestScore>>,
    /// Training loss.
    pub train_loss: Option<f64>,
    /// Validation NMSE.
    pub validation_nmse: Option<f64>,
    /// Validation R².
    pub validation_r2: Option<f64>,
}

/// A point of the Pareto front.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParetoPoint {
    /// Atoms and pairs in the program.
    pub complexity: usize,
    /// 1 − validation R², or the training loss.
    pub error: f64,
    /// Candidate id.
    pub id: u64,
    /// Fitted parameters of the program.
    #[serde(default)]
    pub n_params: usize,
    /// Its selection score when it was a finalist (see [`crate::select::Finalist::score`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// How it stands in the selection: `chosen`, `lowest-error`, `chosen, lowest-error`, or
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected: Option<String>,
    /// Program text.
    pub src: String,
    /// Constants that act as switches in it, when it was a finalist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switches: Option<usize>,
}

/// `run`: the machine-dependent section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSection {
    /// Calibrations of the summary per second of `run_s`.
    pub calibrations_per_second: f64,
    /// Seconds the calibration threads of this process spent without a calibration to run.
    #[serde(default)]
    pub calibrator_idle_s: f64,
    /// Wall-clock seconds of this process.
    pub elapsed_s: f64,
    /// Calibrations this process performed (not reused).
    pub fresh_calibrations: u64,
    /// `$HOSTNAME`.
    pub host: Option<String>,
    /// What the language model did, when the proposer asked one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<crate::events::LlmReport>,
    /// For a merge: how many shard folders it read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_shards: Option<usize>,
    /// Seconds of run time behind the calibrations: every session of the run folder (for a
    /// merge, the longest shard).
    #[serde(default)]
    pub run_s: f64,
    /// The shard, `i/n`.
    pub shard: String,
    /// Calibration threads of this process.
    pub threads: usize,
    /// Seconds of run time to the end of the round with the first success.
    pub time_to_first_success_s: Option<f64>,
    /// The ndvm-search version.
    pub version: String,
}

impl RunSection {
    /// The `run` section of `outcome`, calibrated on `threads` threads as `shard`.
    pub fn new(outcome: &Outcome, threads: usize, shard: Shard) -> RunSection {
        let n = outcome.events.len() as f64;
        RunSection {
            calibrations_per_second: if outcome.run_s > 0.0 {
                n / outcome.run_s
            } else {
                0.0
            },
            calibrator_idle_s: outcome.idle_s,
            elapsed_s: outcome.elapsed,
            fresh_calibrations: outcome.n_fresh,
            host: std::env::var("HOSTNAME").ok(),
            llm: outcome.llm.clone(),
            merged_shards: None,
            run_s: outcome.run_s,
            shard: format!("{}/{}", shard.index, shard.count),
            threads,
            time_to_first_success_s: outcome.time_to_first_success,
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

fn entry(task: &Task, e: &Event) -> Entry {
    let test = (!task.tests.is_empty()).then(|| engine::test_table(task, e));
    Entry {
        choices: e.choices.clone(),
        complexity: e.complexity,
        frontend: e.frontend.clone(),
        id: e.id,
        index: e.index,
        params: e.params.clone(),
        skeleton: e.skeleton.clone(),
        src: e.src.clone(),
        test,
        train_loss: e.train_loss,
        validation_nmse: e.validation_nmse,
        validation_r2: e.validation_r2,
    }
}

/// Events with a score, best first (ties by index).
fn ranked(outcome: &Outcome, metric: MetricName) -> Vec<&Event> {
    let mut ranked: Vec<&Event> = outcome
        .events
        .iter()
        .filter(|e| e.score(metric).is_some())
        .collect();
    ranked.sort_by(|a, b| {
        let (sa, sb) = (
            a.score(metric).unwrap_or(f64::NAN),
            b.score(metric).unwrap_or(f64::NAN),
        );
        sb.total_cmp(&sa).then(a.index.cmp(&b.index))
    });
    ranked
}

/// The Pareto front, simplest first, with each point's standing in the selection.
fn pareto(ranked: &[&Event], metric: MetricName, sel: &SelectionReport) -> Vec<ParetoPoint> {
    select::front(ranked, metric)
        .into_iter()
        .map(|e| {
            let score = e.score(metric).unwrap_or(f64::NAN);
            let finalist = sel.finalists.iter().find(|f| f.id == e.id);
            let marks: Vec<&str> = [
                (sel.chosen == Some(e.id), "chosen"),
                (sel.lowest_error == Some(e.id), "lowest-error"),
            ]
            .into_iter()
            .filter_map(|(on, mark)| on.then_some(mark))
            .collect();
            ParetoPoint {
                complexity: e.complexity,
                error: match metric {
                    MetricName::R2 => 1.0 - score,
                    MetricName::Loss => -score,
                },
                id: e.id,
                n_params: e.params.len(),
                score: finalist.map(|f| f.score),
                selected: (!marks.is_empty()).then(|| marks.join(", ")),
                src: e.src.clone(),
                switches: finalist.map(|f| f.switches.len()),
            }
        })
        .collect()
}

impl Summary {
    /// The summary of `outcome` with its `run` section.
    pub fn new(task: &Task, outcome: &Outcome, run: RunSection) -> Summary {
        let ranked = ranked(outcome, task.metric);
        let choice = select::choose(task, &ranked);
        let leaderboard: Vec<Entry> = ranked
            .iter()
            .take(LEADERBOARD)
            .map(|e| entry(task, e))
            .collect();
        let mut statuses = BTreeMap::new();
        let mut failures = BTreeMap::new();
        for e in &outcome.events {
            *statuses.entry(e.status).or_insert(0) += 1;
            if let Some(c) = &e.error_class {
                *failures.entry(c.clone()).or_insert(0) += 1;
            }
        }
        let first_success = outcome.first_success.map(|i| FirstSuccess {
            calibrations: outcome.events.iter().filter(|e| e.index <= i).count() as u64,
            id: outcome.events.iter().find(|e| e.index == i).map(|e| e.id),
            index: i,
        });
        Summary {
            best: choice.chosen.as_ref().map(|e| entry(task, e)),
            calibrations: outcome.events.len(),
            data: DataSizes {
                screen_rows: task.screen.as_ref().map(|s| s.rows()),
                tests: task
                    .tests
                    .iter()
                    .map(|(n, t)| (n.clone(), t.n_rows()))
                    .collect(),
                train: task.train.n_rows(),
                validation: task.validation.n_rows(),
            },
            defaults: task.defaults.clone(),
            failures,
            first_success,
            pareto: pareto(&ranked, task.metric, &choice.report),
            lowest_error: leaderboard.first().cloned(),
            leaderboard,
            proposer: outcome.proposer.to_string(),
            run,
            seed: task.seed,
            selection: Some(choice.report),
            settings: Settings {
                batch: task.batch,
                budget_calibrations: task.budget_calibrations,
                budget_seconds: task.budget_seconds,
                calibrator_seed: task.calibrate.seed,
                metric: task.metric,
                optimizer: format!("{:?}", task.calibrate.optimizer).to_lowercase(),
                starts: task.calibrate.n_starts,
                stop_on_success: task.stop_on_success,
                threshold: task.threshold,
            },
            statuses,
            stop: outcome.stop,
            stream: outcome.stream.clone(),
            task: task.name.clone(),
            warnings: task
                .warnings
                .iter()
                .chain(&outcome.warnings)
                .cloned()
                .collect(),
        }
    }

    /// `summary.md`: the winner, the leaderboard, the Pareto front, the plots and the run.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let metric_name = match self.settings.metric {
            MetricName::R2 => "validation R²",
            MetricName::Loss => "training loss",
        };
        let _ = writeln!(s, "# Run of task `{}`\n", self.task);
        let _ = writeln!(
            s,
            "Proposer `{}`, seed {}, stop: `{}`, {} calibrations ({} proposed, {} duplicates, {} rejected).\n",
            self.proposer,
            self.seed,
            self.stop.as_str(),
            self.calibrations,
            self.stream.proposed,
            self.stream.duplicates,
            self.stream.rejected.values().sum::<u64>(),
        );
        if !self.failures.is_empty() {
            let parts: Vec<String> = self
                .failures
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect();
            let _ = writeln!(s, "Failed calibrations by class: {}.\n", parts.join(", "));
        }
        let threshold = self.settings.threshold;
        match &self.first_success {
            Some(f) => {
                let _ = writeln!(
                    s,
                    "First success ({metric_name} beyond {threshold}): candidate {} after {} calibrations, {} s.\n",
                    f.id.map_or_else(|| "–".to_string(), |id| id.to_string()),
                    f.calibrations,
                    fmt_opt(self.run.time_to_first_success_s)
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "No candidate reached the threshold ({metric_name} beyond {threshold}).\n"
                );
            }
        }
        if let Some(best) = &self.best {
            winner_markdown(&mut s, best);
        }
        if let Some(sel) = &self.selection {
            selection_markdown(&mut s, sel);
        }
        self.tables_markdown(&mut s);
        self.run_markdown(&mut s);
        s
    }

    fn tables_markdown(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "## Leaderboard\n\n| # | id | complexity | train loss | validation R² | program |\n|---|---|---|---|---|---|"
        );
        for (i, r) in self.leaderboard.iter().enumerate() {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} |",
                i + 1,
                r.id,
                r.complexity,
                fmt_opt(r.train_loss),
                fmt_opt(r.validation_r2),
                code_cell(&r.src)
            );
        }
        let _ = writeln!(
            s,
            "\n## Pareto front (complexity vs error)\n\n| complexity | error | parameters | selection score | switches | selected | program |\n|---|---|---|---|---|---|---|"
        );
        for r in &self.pareto {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.complexity,
                fmt_opt(Some(r.error)),
                r.n_params,
                fmt_opt(r.score),
                r.switches
                    .map_or_else(|| "–".to_string(), |n| n.to_string()),
                r.selected.as_deref().unwrap_or(""),
                code_cell(&r.src)
            );
        }
        let _ = writeln!(
            s,
            "\n## Plots\n\n| plot | files |\n|---|---|\n\
             | best fit vs data | [plot-fit.svg](plot-fit.svg), [plot-fit.png](plot-fit.png) |\n\
             | best score over calibrations and time | [plot-progress.svg](plot-progress.svg), [plot-progress.png](plot-progress.png) |\n\
             | complexity / error Pareto front | [plot-pareto.svg](plot-pareto.svg), [plot-pareto.png](plot-pareto.png) |\n\n\
             ![best fit](plot-fit.svg)"
        );
    }

    fn run_markdown(&self, s: &mut String) {
        let r = &self.run;
        let _ = match r.merged_shards {
            Some(k) => writeln!(
                s,
                "\n## Run\n\nMerged from {k} shard folders: {} calibrations in {} s of run time (the longest shard), {} calibrations/s, ndvm-search {}.",
                self.calibrations,
                fmt_opt(Some(r.run_s)),
                fmt_opt(Some(r.calibrations_per_second)),
                r.version
            ),
            None => writeln!(
                s,
                "\n## Run\n\n{} calibrations in {} s of run time ({} s wall clock in this session, {} fresh), {} calibrations/s, {} threads, shard {}, ndvm-search {}.",
                self.calibrations,
                fmt_opt(Some(r.run_s)),
                fmt_opt(Some(r.elapsed_s)),
                r.fresh_calibrations,
                fmt_opt(Some(r.calibrations_per_second)),
                r.threads,
                r.shard,
                r.version
            ),
        };
    }
}

fn winner_markdown(s: &mut String, best: &Entry) {
    let fence = "`".repeat(longest_backtick_run(&best.src).max(2) + 1);
    let _ = writeln!(
        s,
        "## Winner\n\n{fence}{}\n{}\n{fence}\n",
        best.frontend, best.src
    );
    let _ = writeln!(s, "| constant | value |\n|---|---|");
    for (k, x) in &best.params {
        let value = serde_json::to_string(x).unwrap_or_default();
        let _ = writeln!(s, "| {} | {value} |", code_cell(k));
    }
    let _ = writeln!(
        s,
        "\nTraining loss {}, validation R² {}, validation NMSE {}.",
        fmt_opt(best.train_loss),
        fmt_opt(best.validation_r2),
        fmt_opt(best.validation_nmse)
    );
    for c in &best.choices {
        let _ = writeln!(
            s,
            "Soft-choice {} picks option {} of {}: {}.",
            c.site,
            c.index,
            c.n_options,
            code_cell(&c.option)
        );
    }
    for (name, m) in best.test.iter().flatten() {
        let _ = writeln!(
            s,
            "Test {}: R² {}, NMSE {}.",
            code_cell(name),
            fmt_opt(m.r2),
            fmt_opt(m.nmse)
        );
    }
    s.push('\n');
}

/// The selection's one line and its finalists.
fn selection_markdown(s: &mut String, sel: &SelectionReport) {
    let _ = writeln!(
        s,
        "## Model selection ({})\n\nChosen: {}. Why: {}.\n",
        sel.rule.as_str(),
        sel.chosen
            .map_or_else(|| "–".to_string(), |id| format!("candidate {id}")),
        sel.reason
    );
    if sel.finalists.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "| id | complexity | parameters | validation NMSE (refit) | standard errors | score | switches | equivalent | selected |\n|---|---|---|---|---|---|---|---|---|"
    );
    for f in &sel.finalists {
        let switches: Vec<String> = f
            .switches
            .iter()
            .map(|w| {
                format!(
                    "{}({}) spans {:.3e}",
                    w.function,
                    w.params.join(" "),
                    w.spread
                )
            })
            .collect();
        let mark = match (f.chosen, f.lowest_error) {
            (true, true) => "chosen, lowest error",
            (true, false) => "chosen",
            (false, true) => "lowest error",
            (false, false) => "",
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.2} | {:.2} | {} | {} | {mark} |",
            f.id,
            f.complexity,
            f.params.len(),
            fmt_opt(Some(f.validation_nmse)),
            f.z,
            f.score,
            if switches.is_empty() {
                "–".to_string()
            } else {
                code_cell(&switches.join("; "))
            },
            if f.equivalent { "yes" } else { "no" },
        );
    }
    s.push('\n');
}

fn fmt_opt(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.6}"),
        _ => "–".to_string(),
    }
}

/// The longest run of backticks in `text`.
fn longest_backtick_run(text: &str) -> usize {
    text.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// `text` as inline code that cannot break a markdown table row: line breaks and other runs of
/// whitespace become one space, `|` is escaped, and the backtick fence is longer than any run of
/// backticks inside (padded with a space when the text starts or ends with one).
pub fn code_cell(text: &str) -> String {
    let flat = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|");
    let fence = "`".repeat(longest_backtick_run(&flat) + 1);
    let pad = if flat.starts_with('`') || flat.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{flat}{pad}{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_cells_keep_a_table_row_on_one_line() {
        assert_eq!(code_cell("(* a x)"), "`(* a x)`");
        assert_eq!(
            code_cell("(let ((u (* a x)))\n  ; |x| scaled\n  (+ u b))"),
            "`(let ((u (* a x))) ; \\|x\\| scaled (+ u b))`"
        );
        assert_eq!(code_cell("`(a ,x)"), "`` `(a ,x) ``");
        assert_eq!(code_cell("(f ``x)"), "```(f ``x)```");
    }
}
