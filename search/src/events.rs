//! The run's vocabulary, beneath everything that proposes, runs, observes and reports: an
//! [`Event`] (one line of `events.jsonl`) and its parts, the [`Shard`] of a stream, why a run
//! stopped, the stream's counts, a run's [`Outcome`], and the ranking [`MetricName`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Result, SearchError};

/// The ranking metric (`success.metric`).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricName {
    /// Validation R².
    R2,
    /// Training loss.
    Loss,
}

/// One line of `events.jsonl`: the outcome of one calibration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Position of the distinct valid candidate in the stream (0-based); shards split on it.
    pub index: u64,
    /// The candidate's id (its position in the proposer's stream).
    pub id: u64,
    /// Program text.
    pub src: String,
    /// The front end that reads `src` (absent in folders written before this field existed:
    /// the registry's fallback).
    #[serde(default = "fallback_frontend")]
    pub frontend: String,
    /// Canonical skeleton.
    pub skeleton: String,
    /// Atoms and pairs in the program.
    pub complexity: usize,
    /// Calibrator seed.
    pub seed: u64,
    /// Fitted parameters.
    pub params: BTreeMap<String, f64>,
    /// The structure the fit chose: each `soft-choice` site's `argmax` option at the fitted
    /// parameters (absent for a program without one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<ChoiceEvent>,
    /// Training loss of the best start (absent when not finite).
    pub train_loss: Option<f64>,
    /// Validation R² (absent when not finite or not applicable).
    pub validation_r2: Option<f64>,
    /// Validation normalised MSE (MSE / variance of the validation target).
    pub validation_nmse: Option<f64>,
    /// How the calibration ended.
    pub status: EventStatus,
    /// The calibrator's stop reason.
    pub stop_reason: Option<String>,
    /// Error message for status `error` or `crashed`.
    pub error: Option<String>,
    /// The failure's stable class for status `error` or `crashed`: a limit (`work`, `memory`,
    /// `depth`, `deadline`), an evaluation error (`type`, `unbound`, …), `parse`, a calibrator
    /// setting (`no-parameters`, …) or `crashed` (the process died while it ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<String>,
    /// The limit that was hit, as `name=value` (`max_memory=536870912`), for limit classes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// Training rows of the screen (`data.screen_rows`) when the candidate was first fitted on a
    /// row sample and then refitted on every training row (`params`, `train_loss` and
    /// `stop_reason` are the refit's); absent when it was fitted on all rows at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screen_rows: Option<u64>,
    /// Loss evaluations the calibration made (the screen's and the refit's, when screened).
    pub n_evals: u64,
    /// Wall-clock milliseconds of this calibration (varies between runs, like `finished_s`).
    pub wall_ms: f64,
    /// Seconds into the run when this calibration finished, counting every session of its run
    /// folder (a resumed session starts where the events on disk end); absent in folders written
    /// before this field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_s: Option<f64>,
}

/// One `soft-choice` site's pick in an [`Event`] (fields in alphabetical order).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChoiceEvent {
    /// The index of the picked option.
    pub index: usize,
    /// The number of options.
    pub n_options: usize,
    /// The picked option's source (as an s-expression).
    pub option: String,
    /// The site: the soft-choice's ordinal in the program.
    pub site: u32,
    /// softmax(logits / τ) at the final temperature, per option.
    pub weights: Vec<f64>,
}

impl From<&ndvm_optimizers::Choice> for ChoiceEvent {
    fn from(c: &ndvm_optimizers::Choice) -> Self {
        ChoiceEvent {
            index: c.index,
            n_options: c.n_options,
            option: c.option.clone(),
            site: c.site,
            weights: c.weights.clone(),
        }
    }
}

/// The front end of an event written before events named theirs.
pub fn fallback_frontend() -> String {
    ndvm_frontends::Registry::default()
        .fallback()
        .map(|f| f.name().to_string())
        .unwrap_or_default()
}

/// How a calibration ended (`status` in `events.jsonl`, keys of `statuses` in the summary).
/// Declared in alphabetical order, the order of the summary's keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventStatus {
    /// The process died while it ran (twice, or its worker process died).
    Crashed,
    /// The calibrator or the prediction failed (see `error_class`).
    Error,
    /// No finite fit or prediction.
    NonFinite,
    /// Fitted and scored.
    Ok,
}

impl Event {
    /// The ranking score, higher is better: validation R², or minus the training loss.
    pub fn score(&self, metric: MetricName) -> Option<f64> {
        if self.status != EventStatus::Ok {
            return None;
        }
        match metric {
            MetricName::R2 => self.validation_r2,
            MetricName::Loss => self.train_loss.map(|l| -l),
        }
    }

    /// Whether this event meets the success threshold.
    pub fn is_success(&self, metric: MetricName, threshold: f64) -> bool {
        match metric {
            MetricName::R2 => self.score(metric).is_some_and(|s| s > threshold),
            MetricName::Loss => self.score(metric).is_some_and(|s| -s < threshold),
        }
    }
}

/// A deterministic slice of the distinct-candidate stream: index `i` belongs to shard `i % count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// This shard (0-based).
    pub index: u64,
    /// Number of shards.
    pub count: u64,
}

impl Shard {
    /// The whole stream.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// Parses `i/n`.
    pub fn parse(s: &str) -> Result<Shard> {
        let bad = |m: &str| SearchError::BadArgument {
            arg: s.to_string(),
            message: m.to_string(),
        };
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| bad("expected i/n, e.g. 0/3"))?;
        let i: u64 = i
            .trim()
            .parse()
            .map_err(|_| bad("i is not a whole number"))?;
        let n: u64 = n
            .trim()
            .parse()
            .map_err(|_| bad("n is not a whole number"))?;
        if n == 0 || i >= n {
            return Err(bad("need 0 ≤ i < n"));
        }
        Ok(Shard { index: i, count: n })
    }

    /// Whether the candidate with this index belongs to this shard.
    pub(crate) fn owns(self, index: u64) -> bool {
        index % self.count == self.index
    }
}

/// Why the run stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopKind {
    /// The proposer has no more candidates.
    Exhausted,
    /// The calibration budget is used.
    BudgetCalibrations,
    /// The wall-clock budget is used.
    BudgetSeconds,
    /// A candidate met the success threshold and the task stops on success.
    Success,
    /// Ctrl-C (or SIGTERM): no new calibration started; those in flight finished (the CLI) or
    /// were cut and left unfinished (`Interrupt::cancel_in_flight`).
    Interrupted,
}

impl StopKind {
    /// The name written in the summary (`exhausted`, `budget-calibrations`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            StopKind::Exhausted => "exhausted",
            StopKind::BudgetCalibrations => "budget-calibrations",
            StopKind::BudgetSeconds => "budget-seconds",
            StopKind::Success => "success",
            StopKind::Interrupted => "interrupted",
        }
    }
}

/// Counts of the candidate stream up to where the run stopped (fields in alphabetical order, the
/// order of `summary.json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamStats {
    /// Distinct valid candidates (calibrated by this run or its shards).
    pub distinct: u64,
    /// Valid candidates whose skeleton was already seen.
    pub duplicates: u64,
    /// Candidates taken from the proposer.
    pub proposed: u64,
    /// Rejected by validation, by class.
    pub rejected: BTreeMap<String, u64>,
    /// The first few rejections: `id: class: message`.
    pub rejection_examples: Vec<String>,
}

/// What a run produced.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Events of this shard, in index order.
    pub events: Vec<Event>,
    /// Stream counts.
    pub stream: StreamStats,
    /// Why it stopped.
    pub stop: StopKind,
    /// Index of the first successful candidate (over the whole stream).
    pub first_success: Option<u64>,
    /// Seconds of run time (every session of the run folder; for a merge, each shard's own
    /// clock) to the end of the round with the first success: the latest `finished_s` of the
    /// events up to that round. `None` when one of them predates `finished_s`.
    pub time_to_first_success: Option<f64>,
    /// Wall-clock seconds of this process's run.
    pub elapsed: f64,
    /// Seconds of run time behind the events: the latest `finished_s` (every session of the run
    /// folder; for a merge, the longest shard).
    pub run_s: f64,
    /// Calibrations this process performed (not reused).
    pub n_fresh: u64,
    /// Proposer warnings.
    pub warnings: Vec<String>,
    /// Proposer name.
    pub proposer: &'static str,
    /// Seconds the calibration threads of this process spent without a calibration to run
    /// (threads × the stream's wall time, less the calibrations' time).
    pub idle_s: f64,
    /// What the proposer's language model did, when it asked one.
    pub llm: Option<LlmReport>,
}

/// The language model's part in a run (`summary.json`'s `run.llm`): requests, answers, the
/// programs they gave and the tokens they cost, per model (fields in alphabetical order, the
/// order of `summary.json`). It varies between identical runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmReport {
    /// Requests answered.
    pub answered: usize,
    /// Programs the answers gave (valid or not), handed to the search.
    pub candidates: usize,
    /// Requests that failed for good.
    pub failed: usize,
    /// Requests sent by this process.
    pub requests: usize,
    /// Answers that gave a valid candidate.
    pub usable: usize,
    /// Tokens used, summed per answering model.
    pub usage: BTreeMap<String, TokenUsage>,
    /// Where each answer's verdict is: the cache.
    pub verdicts: String,
}

/// A candidate's score on one test table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestScore {
    /// Normalised MSE.
    pub nmse: Option<f64>,
    /// R².
    pub r2: Option<f64>,
}

/// A chat completion's `usage`: tokens of the answer, of the prompt, and both (alphabetical, as
/// `summary.json` orders keys).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Tokens of the answer.
    #[serde(default)]
    pub completion_tokens: u64,
    /// Tokens of the prompt.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Both.
    #[serde(default)]
    pub total_tokens: u64,
}
