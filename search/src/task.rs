//! `TaskSpec`: the YAML schema of a co-search task (`tasks/*.yaml`), read with serde-saphyr so that
//! unknown keys and bad values are errors with `file:line:column`, and its conversion into a
//! validated [`Task`]: data tables (generated from the seed or read from CSV), split, parameters,
//! calibrator settings, proposer, budget and success threshold.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ndvm_core::{Dialect, EvalOptions, Evaluator, Heap, Inputs, ParamKind, Precision};
use ndvm_frontends::{Frontend, Registry};
use ndvm_optimizers::{
    CalibrateConfig, ChoiceMode, Loss, Optimizer, ParamSpec, Polish, RaceCut, SoftChoiceConfig,
    race_problem,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;
use serde_saphyr::{Location, Spanned};

use crate::error::{CsvProblem, Result, SearchError};
use crate::select::Selection;
use crate::{matrix_csv, textfile, validate};

/// Longest wall-clock budget, in seconds (one year): longer is surely a typo, and `Duration`
/// cannot hold `1e300` or `.inf`.
pub const MAX_BUDGET_SECONDS: f64 = 365.0 * 24.0 * 3600.0;
/// Most points of a generated table (one evaluation lane per point).
pub const MAX_GENERATE_N: usize = 1_000_000;
/// Most calibrator starts (and polished starts) per candidate.
pub const MAX_STARTS: usize = 10_000;
/// Most Adam steps or L-BFGS iterations (and screen steps) per start.
pub const MAX_ITERS: usize = 1_000_000;
/// Most candidates per round (`batch`: the engine keeps up to `threads + batch` queued, and the
/// proposer's feedback lags one batch).
pub const MAX_BATCH: usize = 10_000;
/// Most calibration threads a task may ask for.
pub const MAX_THREADS: usize = 1024;
/// Most additive terms of a grammar candidate.
pub const MAX_TERMS: usize = 64;
/// Largest `proposer.max_depth` (nesting of a tree grammar's factor).
pub const MAX_TREE_DEPTH: usize = 16;
/// Largest `proposer.max_size` (nodes of an evolved program; the validator refuses past 256
/// levels or 20,000 cells anyway).
pub const MAX_TREE_SIZE: usize = 2_000;
/// Largest `proposer.population`.
pub const MAX_POPULATION: usize = 100_000;
/// Most llm requests in flight at once.
pub const MAX_CONCURRENCY: usize = 256;
/// Longest llm attempt, in seconds (one hour).
pub const MAX_LLM_TIMEOUT_S: f64 = 3600.0;
/// Most llm retries after a retryable failure.
pub const MAX_RETRIES: usize = 100;
/// Without `data.screen_rows`, a training table with more rows than this is screened …
pub const AUTO_SCREEN_ABOVE: usize = 2_000;
/// … on a seeded sample of this many rows.
pub const AUTO_SCREEN_ROWS: usize = 1_000;

/// Checks a wall-clock budget: finite, positive and at most [`MAX_BUDGET_SECONDS`].
pub fn check_budget_seconds(x: f64) -> std::result::Result<f64, String> {
    if x.is_finite() && x > 0.0 && x <= MAX_BUDGET_SECONDS {
        Ok(x)
    } else {
        Err(format!(
            "a budget in seconds must be a positive number of at most {MAX_BUDGET_SECONDS} (one year), not {x:?}"
        ))
    }
}

/// Parses `--budget-seconds S` (see [`check_budget_seconds`]).
pub fn parse_budget_seconds(s: &str) -> std::result::Result<f64, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    check_budget_seconds(x)
}

/// The YAML document of a task, as written. Every key is documented in `tasks/README.md`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// Task name; names the run folder `results/<name>-<timestamp>/`.
    pub name: Spanned<String>,
    /// Free text.
    #[serde(default)]
    pub description: Option<String>,
    /// The notation of candidate programs: a front end's name (default: the one for the
    /// cache's extension, as `symreg.infix.jsonl`, else the registry's first).
    #[serde(default)]
    pub frontend: Option<Spanned<String>>,
    /// Master seed: data generation, grammar proposals, and the default of the other seeds.
    #[serde(default)]
    pub seed: u64,
    /// Where the data comes from.
    pub data: DataSpec,
    /// Per-point input variables (columns), in order.
    #[serde(default)]
    pub inputs: Vec<Spanned<String>>,
    /// Target column (absent for `loss: program`).
    #[serde(default)]
    pub target: Option<Spanned<String>>,
    /// Train/validation split of the main table; the remaining rows are the test set.
    #[serde(default)]
    pub split: Option<SplitSpec>,
    /// Free parameters a candidate may use.
    #[serde(default)]
    pub params: Vec<Spanned<ParamEntry>>,
    /// What calibration minimises.
    #[serde(default)]
    pub loss: LossName,
    /// Numeric conventions of the evaluator.
    #[serde(default)]
    pub dialect: DialectName,
    /// The calibrator's lane type: `f64` (default) or `f32` (held-out scores are computed in
    /// `f64` either way).
    #[serde(default)]
    pub precision: PrecisionName,
    /// Calibrator settings (defaults: `CalibrateConfig::recommended()`).
    #[serde(default)]
    pub calibrator: CalibratorSpec,
    /// Where candidates come from.
    #[serde(default)]
    pub proposer: ProposerSpec,
    /// When to stop.
    #[serde(default)]
    pub budget: BudgetSpec,
    /// What counts as a success.
    #[serde(default)]
    pub success: SuccessSpec,
    /// How the run chooses its answer among the calibrated models: `simplest-equivalent`
    /// (default) or `lowest-error` (see `crate::select`).
    #[serde(default)]
    pub selection: Selection,
    /// Per-calibration resource limits (defaults: [`Limits::default`]).
    #[serde(default)]
    pub limits: LimitsSpec,
    /// Where calibrations run: `thread` (default) or `process` (one worker process each, under
    /// OS limits on memory and CPU time, so even an abort costs one candidate only).
    #[serde(default)]
    pub isolation: Isolation,
    /// Special forms a candidate may not use (for example `define`, `lambda`).
    #[serde(default)]
    pub forbidden_forms: Vec<String>,
    /// Parent folder of run folders (default `results`, relative to the working directory).
    #[serde(default)]
    pub output: Option<String>,
    /// Calibration threads (default: every core; `--threads` overrides it). Results do not
    /// depend on it.
    #[serde(default)]
    pub threads: Option<Spanned<usize>>,
}

/// `data:`: a seeded generator, or CSV files.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSpec {
    /// Generate the main table from a formula on a grid, plus Gaussian noise.
    #[serde(default)]
    pub generate: Option<Spanned<GenerateSpec>>,
    /// The main table, a CSV file with a header row (path relative to the task file).
    #[serde(default)]
    pub csv: Option<Spanned<String>>,
    /// Keep at most this many rows of the CSV table (a seeded sample, in file order).
    #[serde(default)]
    pub max_rows: Option<usize>,
    /// Fit each candidate on a seeded sample of this many training rows first, then refit it on
    /// all of them (`off`: always all rows; default: [`AUTO_SCREEN_ROWS`] when the training table
    /// has more than [`AUTO_SCREEN_ABOVE`] rows).
    #[serde(default)]
    pub screen_rows: Option<Spanned<ScreenRows>>,
    /// Largest CSV file read, in bytes (default [`textfile::MAX_CSV_BYTES`]).
    #[serde(default)]
    pub max_bytes: Option<Spanned<u64>>,
    /// Drop rows whose inputs or target are not finite (NaN, ±inf) instead of refusing the table.
    #[serde(default)]
    pub drop_nonfinite: bool,
    /// The field separator of every CSV file of the task, one ASCII character (default `,`;
    /// `";"`, `"\t"` for tab-separated files).
    #[serde(default)]
    pub delimiter: Option<Spanned<String>>,
    /// Extra test tables (CSV with the same columns), each scored separately.
    #[serde(default)]
    pub tests: Vec<TestFileSpec>,
    /// Inputs shared by every point: a name and a CSV file read as a matrix.
    #[serde(default)]
    pub shared: Vec<SharedSpec>,
}

/// `data.screen_rows`: a row count, or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScreenRows {
    /// Screen on a sample of this many training rows.
    Rows(u64),
    /// Never screen.
    Off,
}

impl<'de> Deserialize<'de> for ScreenRows {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = ScreenRows;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a row count or `off`")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<ScreenRows, E> {
                Ok(ScreenRows::Rows(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<ScreenRows, E> {
                u64::try_from(v)
                    .map(ScreenRows::Rows)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
            }
            // YAML 1.1 reads a bare `off` as false.
            fn visit_bool<E: serde::de::Error>(
                self,
                v: bool,
            ) -> std::result::Result<ScreenRows, E> {
                if v {
                    Err(E::invalid_value(serde::de::Unexpected::Bool(v), &self))
                } else {
                    Ok(ScreenRows::Off)
                }
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<ScreenRows, E> {
                match v {
                    "off" => Ok(ScreenRows::Off),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// `data.generate:` a 1-D grid `from..to` with `n` evenly spaced points of `input`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenerateSpec {
    /// The noiseless target as a program of `input`, in the task's front end's notation.
    pub formula: String,
    /// The input variable (default `x`).
    #[serde(default = "default_x")]
    pub input: String,
    /// First grid point.
    pub from: f64,
    /// Last grid point.
    pub to: f64,
    /// Number of points (at least 2).
    pub n: usize,
    /// Standard deviation of the additive Gaussian noise (ChaCha from the task seed).
    #[serde(default)]
    pub noise: f64,
}

fn default_x() -> String {
    "x".to_string()
}

/// `data.tests[]`: a named test table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestFileSpec {
    /// Name used in the summary.
    pub name: String,
    /// CSV file with a header row holding the inputs and the target.
    pub csv: Spanned<String>,
}

/// `data.shared[]`: a named matrix.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedSpec {
    /// Variable name in the program.
    pub name: String,
    /// CSV file read as a row-major matrix (an optional header line is skipped).
    pub csv: Spanned<String>,
}

/// `split:` row counts (whole numbers ≥ 1) or fractions (< 1) of the main table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitSpec {
    /// Rows used for fitting.
    pub train: Spanned<f64>,
    /// Rows used for scoring and ranking.
    pub validation: Spanned<f64>,
    /// Seed of the shuffle (default: the task seed).
    #[serde(default)]
    pub seed: Option<u64>,
}

/// `params[]`: one parameter candidates may use.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamEntry {
    /// Variable name.
    pub name: String,
    /// Domain.
    #[serde(default)]
    pub kind: KindName,
    /// First start (default 0.5, or the midpoint for bounded).
    #[serde(default)]
    pub init: Option<f64>,
    /// Lower bound (bounded only).
    #[serde(default)]
    pub lo: Option<f64>,
    /// Upper bound (bounded only).
    #[serde(default)]
    pub hi: Option<f64>,
}

/// Parameter domain names.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum KindName {
    /// Any real.
    #[default]
    Free,
    /// Strictly positive.
    Positive,
    /// In (0, 1).
    Unit,
    /// In (lo, hi).
    Bounded,
}

/// Loss names.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum LossName {
    /// Mean squared error.
    #[default]
    Mse,
    /// Gaussian negative log-likelihood.
    GaussianNll,
    /// The program returns its own loss.
    Program,
}

/// Dialect names.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DialectName {
    /// R7RS conventions.
    #[default]
    Default,
    /// The seed system's conventions.
    Reference,
}

/// Lane precision names.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PrecisionName {
    /// Double precision.
    #[default]
    F64,
    /// Single precision.
    F32,
}

/// `calibrator:` overrides of the recommended calibrator settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibratorSpec {
    /// `portfolio`, `adam` or `lbfgs`.
    #[serde(default)]
    pub optimizer: Option<OptimizerName>,
    /// Number of starts.
    #[serde(default)]
    pub starts: Option<Spanned<usize>>,
    /// Adam steps or L-BFGS iterations.
    #[serde(default)]
    pub max_iters: Option<Spanned<usize>>,
    /// Portfolio screen steps.
    #[serde(default)]
    pub screen_iters: Option<Spanned<usize>>,
    /// Portfolio polished starts.
    #[serde(default)]
    pub polish: Option<Spanned<usize>>,
    /// The portfolio's racing screen: cuts `{at: STEP, keep: K}`, `[]` for none.
    #[serde(default)]
    pub race: Option<Vec<Spanned<RaceCutSpec>>>,
    /// The portfolio's polish method, and the refit's after a screen: `lbfgs` (default) or `lm`.
    #[serde(default)]
    pub polish_method: Option<PolishName>,
    /// Adam step size.
    #[serde(default)]
    pub learning_rate: Option<Spanned<f64>>,
    /// Start-distribution seed (default: the task seed).
    #[serde(default)]
    pub seed: Option<u64>,
    /// How the candidates' `soft-choice` forms run (mode, annealed temperature, Gumbel noise).
    #[serde(default)]
    pub soft_choice: Option<SoftChoiceSpec>,
}

/// `calibrator.race[]`: after `at` screen steps, only the best `keep` starts go on.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RaceCutSpec {
    /// The screen step of the cut.
    pub at: usize,
    /// How many starts go on.
    pub keep: usize,
}

/// `calibrator.soft_choice:` the settings of every `soft-choice` of a calibration.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoftChoiceSpec {
    /// `soft` (default), `straight-through` or `hard`.
    #[serde(default)]
    pub mode: Option<ChoiceModeName>,
    /// Temperature of the first Adam step (default 1).
    #[serde(default)]
    pub temperature: Option<Spanned<f64>>,
    /// Temperature of the last Adam step, the polish and the read-out, reached linearly
    /// (default: `temperature`, no annealing).
    #[serde(default)]
    pub final_temperature: Option<Spanned<f64>>,
    /// Fresh Gumbel noise each Adam step, seeded by the calibrator seed (default false).
    #[serde(default)]
    pub gumbel: Option<bool>,
}

/// `soft-choice` modes.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ChoiceModeName {
    /// The softmax blend.
    Soft,
    /// Hard forward, soft backward.
    StraightThrough,
    /// Hard, no gradient to the logits.
    Hard,
}

/// Optimizer names.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerName {
    /// Adam screen then L-BFGS polish.
    Portfolio,
    /// Adam only.
    Adam,
    /// L-BFGS on every start.
    Lbfgs,
    /// Levenberg–Marquardt on every start.
    Lm,
}

/// Polish method names.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PolishName {
    /// L-BFGS.
    Lbfgs,
    /// Levenberg–Marquardt.
    Lm,
}

/// `proposer:` where candidates come from.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProposerSpec {
    /// `replay`, `grammar` or `llm` (default: replay when `cache` is given, else grammar; llm
    /// only when asked for).
    #[serde(default)]
    pub kind: Option<Spanned<ProposerName>>,
    /// JSONL cache replayed in file order (relative to the task file).
    #[serde(default)]
    pub cache: Option<Spanned<String>>,
    /// Grammar: unary operators to use.
    #[serde(default)]
    pub operators: Option<Vec<Spanned<String>>>,
    /// Grammar: most additive terms per candidate.
    #[serde(default)]
    pub max_terms: Option<Spanned<usize>>,
    /// Grammar and evolve: two-argument operators (`+ - * / pow`).
    #[serde(default)]
    pub binary: Option<Vec<Spanned<String>>>,
    /// Grammar and evolve: most levels of nesting of a term's factor (grammar: given, it
    /// switches to the tree grammar).
    #[serde(default)]
    pub max_depth: Option<Spanned<usize>>,
    /// Evolve: most nodes of a program.
    #[serde(default)]
    pub max_size: Option<Spanned<usize>>,
    /// Grammar (tree) and evolve: the shaped factors drawn (see [`FactorShape`]); given, each
    /// new factor starts from its input's centre and spread in the training rows, random
    /// programs are products one time in two, and evolution also replaces or drops a factor of a
    /// product.
    #[serde(default)]
    pub factors: Option<Vec<Spanned<String>>>,
    /// Evolve: programs kept over all islands.
    #[serde(default)]
    pub population: Option<Spanned<usize>>,
    /// Evolve: subpopulations exchanging their best.
    #[serde(default)]
    pub islands: Option<Spanned<usize>>,
    /// Candidates per round: a stop on success ends with its round, and the proposer hears of
    /// each calibration one batch later (workers never wait for a round).
    #[serde(default)]
    pub batch: Option<Spanned<usize>>,
    /// LLM: base URL of an OpenAI-compatible API (for example `http://127.0.0.1:8000/v1`).
    #[serde(default)]
    pub base_url: Option<Spanned<String>>,
    /// LLM: model name sent with each request.
    #[serde(default)]
    pub model: Option<Spanned<String>>,
    /// LLM: environment variable holding the API key (default `OPENAI_API_KEY`).
    #[serde(default)]
    pub api_key_env: Option<Spanned<String>>,
    /// LLM: the API key itself (takes precedence over `api_key_env`).
    #[serde(default)]
    pub api_key: Option<String>,
    /// LLM: sampling temperature (default 0.8).
    #[serde(default)]
    pub temperature: Option<Spanned<f64>>,
    /// LLM: requests in flight at once (default 4).
    #[serde(default)]
    pub concurrency: Option<Spanned<usize>>,
    /// LLM: most requests this run makes (default 64).
    #[serde(default)]
    pub max_requests: Option<Spanned<usize>>,
    /// LLM: prompt template (relative to the task file).
    #[serde(default)]
    pub prompt: Option<Spanned<String>>,
    /// LLM: seconds one attempt may take (default 60).
    #[serde(default)]
    pub timeout: Option<Spanned<f64>>,
    /// LLM: further attempts after a 429, a 5xx, a timeout or a transport error (default 3).
    #[serde(default)]
    pub retries: Option<usize>,
    /// LLM: delay before the first retry in seconds, doubled for each further one (default 1).
    #[serde(default)]
    pub backoff: Option<Spanned<f64>>,
    /// LLM: most completion tokens per answer (default: the server's).
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// LLM: previously valid programs shown in the prompt (default 3).
    #[serde(default)]
    pub examples: Option<usize>,
}

impl ProposerName {
    /// The name a task file writes.
    pub fn as_str(self) -> &'static str {
        match self {
            ProposerName::Replay => "replay",
            ProposerName::Grammar => "grammar",
            ProposerName::Evolve => "evolve",
            ProposerName::Llm => "llm",
        }
    }
}

/// Proposer names.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ProposerName {
    /// Replay a JSONL cache.
    Replay,
    /// Seeded random programs.
    Grammar,
    /// Evolution of calibrated programs.
    Evolve,
    /// An OpenAI-compatible chat endpoint.
    Llm,
}

/// `budget:` the run stops at whichever comes first.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSpec {
    /// Wall-clock seconds.
    #[serde(default)]
    pub seconds: Option<Spanned<f64>>,
    /// Calibrations (distinct valid candidates).
    #[serde(default)]
    pub calibrations: Option<usize>,
}

/// `limits:` what one candidate's calibration may use before it fails with a classified error.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsSpec {
    /// Work units per evaluation (steps weighted by the elements each step touches).
    #[serde(default)]
    pub work: Option<Spanned<u64>>,
    /// Mebibytes one evaluation may hold (payload arena, tape, heap).
    #[serde(default)]
    pub memory_mb: Option<Spanned<u64>>,
    /// Non-tail nesting depth.
    #[serde(default)]
    pub depth: Option<Spanned<u32>>,
    /// Wall-clock seconds of one calibration, checked inside the walk.
    #[serde(default)]
    pub seconds: Option<Spanned<f64>>,
}

/// Where calibrations run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// On the run's calibration threads (fast; the governor contains what a program does).
    #[default]
    Thread,
    /// Each calibration in a fresh `ndvm-search worker` process with `ulimit -v` (memory) and
    /// `ulimit -t` (CPU seconds) set, so even a native abort loses one candidate only.
    Process,
}

/// The resolved per-calibration limits. Work, memory and depth live in
/// [`Task::calibrate`](Task) (`max_work`, `max_memory`, `max_depth`); this holds the rest.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// Wall-clock seconds one calibration (and each prediction) may take.
    pub seconds: f64,
}

impl Limits {
    /// Default seconds per calibration: generous for real models (the Kalman task calibrates in
    /// well under a second per candidate), short enough that an endless candidate costs little.
    pub const DEFAULT_SECONDS: f64 = 60.0;
    /// The largest work budget a task may set (about an hour of walking).
    pub const MAX_WORK: u64 = 100_000_000_000;
    /// The largest memory a task may give one evaluation, in MiB (64 GiB).
    pub const MAX_MEMORY_MB: u64 = 65_536;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            seconds: Self::DEFAULT_SECONDS,
        }
    }
}

/// `success:` the threshold that counts as success.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuccessSpec {
    /// `r2` (validation R², higher is better; the default) or `loss` (training loss, lower is
    /// better; for `loss: program`).
    #[serde(default)]
    pub metric: Option<MetricName>,
    /// The threshold (default 0.99 for r2).
    #[serde(default)]
    pub threshold: Option<Spanned<f64>>,
    /// Stop after the round in which the first success happens (default false).
    #[serde(default)]
    pub stop: bool,
}

/// Metric names.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricName {
    /// Validation R².
    R2,
    /// Training loss.
    Loss,
}

/// A table of rows: input columns (in `Task::inputs` order) and the target.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// One column per input.
    pub columns: Vec<Vec<f64>>,
    /// The target (empty for program-loss tasks).
    pub target: Vec<f64>,
}

impl Table {
    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.target.len()
    }

    fn take(&self, rows: &[usize]) -> Table {
        Table {
            columns: self
                .columns
                .iter()
                .map(|c| rows.iter().map(|&r| c[r]).collect())
                .collect(),
            target: rows.iter().map(|&r| self.target[r]).collect(),
        }
    }
}

/// Row-subsample screening: each candidate is calibrated on `train` (a seeded sample of the
/// training rows, in file order) first, then refitted on every training row from that fit.
#[derive(Clone, Debug, PartialEq)]
pub struct Screen {
    /// The sampled training rows.
    pub train: Table,
    /// Whether the default chose it (no `data.screen_rows` in the task).
    pub automatic: bool,
}

impl Screen {
    /// Rows of the sample.
    pub fn rows(&self) -> usize {
        self.train.n_rows()
    }
}

/// `k` of the row indices `0..n` (all of them when `k ≥ n`), drawn with ChaCha8 from `seed`,
/// in increasing order.
pub(crate) fn sample_rows(n: usize, k: usize, seed: u64) -> Vec<usize> {
    if k >= n {
        return (0..n).collect();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut rows: Vec<usize> = rand::seq::index::sample(&mut rng, n, k).into_vec();
    rows.sort_unstable();
    rows
}

/// The screening of a training table of `train` rows under `data.screen_rows` (`spec`): `None`
/// when it does not apply (`off`, a small table, or no per-point table).
fn resolve_screen(
    path: &Path,
    spec: Option<&Spanned<ScreenRows>>,
    train: &Table,
    seed: u64,
) -> Result<Option<Screen>> {
    let n = train.n_rows();
    let (rows, automatic) = match spec {
        Some(s) => match s.value {
            ScreenRows::Off => return Ok(None),
            ScreenRows::Rows(k) if k < 2 => {
                return Err(task_err(
                    path,
                    Some(s.referenced),
                    format!(
                        "`screen_rows: {k}` is too few to fit on; give at least 2 rows, or `off`"
                    ),
                ));
            }
            ScreenRows::Rows(k) => (usize::try_from(k).unwrap_or(usize::MAX), false),
        },
        None if n > AUTO_SCREEN_ABOVE => (AUTO_SCREEN_ROWS, true),
        None => return Ok(None),
    };
    if rows >= n {
        return Ok(None);
    }
    Ok(Some(Screen {
        train: train.take(&sample_rows(n, rows, seed ^ 0x5eed_0002)),
        automatic,
    }))
}

/// The proposer a task uses, resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum ProposerConfig {
    /// Replay a JSONL cache in file order.
    Replay {
        /// The cache file.
        cache: PathBuf,
    },
    /// Seeded random programs.
    Grammar {
        /// Unary operators.
        operators: Vec<String>,
        /// Most additive terms.
        max_terms: usize,
        /// The tree grammar (`max_depth` or `factors` given): its shape; `None` is the sum-of-terms grammar.
        tree: Option<TreeShape>,
    },
    /// Evolution of calibrated programs, seeded from random programs of the tree grammar, the
    /// cache (replayed first) or an LLM (`Task::llm`).
    Evolve {
        /// Unary operators.
        operators: Vec<String>,
        /// The tree grammar's shape.
        tree: TreeShape,
        /// Population and islands.
        population: usize,
        /// Subpopulations.
        islands: usize,
        /// A cache whose programs are proposed first and join the population.
        seeds: Option<PathBuf>,
    },
}

/// The tree grammar's shape (`binary`, `max_terms`, `max_depth`, `max_size`).
#[derive(Clone, Debug, PartialEq)]
pub struct TreeShape {
    /// Two-argument operators by name (`+ - * / pow`).
    pub binary: Vec<String>,
    /// Most additive terms of a random program.
    pub max_terms: usize,
    /// Most levels of nesting of a term's factor.
    pub max_depth: usize,
    /// Most nodes of an evolved program.
    pub max_size: usize,
    /// The shaped factors named by `factors:` (`None`: the default draw, fresh constants).
    pub factors: Option<Vec<FactorShape>>,
}

/// A shaped factor of one input `u` the tree grammar draws (`proposer.factors:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FactorShape {
    /// `u / (u + p)` (needs `/`).
    Saturating,
    /// `exp(p·(u + q)²)` (needs `exp`).
    Bell,
    /// `1 / (1 + exp(p·(u + q)))` (needs `/` and `exp`).
    Switch,
    /// `u²` or `u³`.
    Power,
    /// `exp(p·|u + q|)`, a peak with exponential tails (needs `exp`).
    Cusp,
    /// `1 / ((1 + exp(p·(u + q)))·(1 + exp(r·(u + s))))`, a rising and a falling switch: an
    /// asymmetric plateau (needs `/` and `exp`).
    Bump,
}

impl FactorShape {
    /// Every shape, by its name in a task file.
    pub const ALL: [(&'static str, FactorShape); 6] = [
        ("saturating", FactorShape::Saturating),
        ("bell", FactorShape::Bell),
        ("switch", FactorShape::Switch),
        ("power", FactorShape::Power),
        ("cusp", FactorShape::Cusp),
        ("bump", FactorShape::Bump),
    ];
}

/// Settings of the `llm` proposer, resolved from the task (the prompt template already read).
/// Its `Debug` form redacts the API key.
#[derive(Clone, PartialEq)]
pub struct LlmConfig {
    /// Base URL of the API (`…/v1`).
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// Environment variable holding the key.
    pub api_key_env: String,
    /// A key given in the task itself.
    pub api_key: Option<String>,
    /// Sampling temperature.
    pub temperature: f64,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Most requests this run makes.
    pub max_requests: usize,
    /// The prompt template file.
    pub prompt_path: PathBuf,
    /// The template's text.
    pub prompt: String,
    /// The JSONL cache: replayed first, then every answer is appended to it.
    pub cache: PathBuf,
    /// Seconds one attempt may take.
    pub timeout_s: f64,
    /// Further attempts after a retryable failure.
    pub retries: usize,
    /// First retry delay in seconds (doubled each time).
    pub backoff_s: f64,
    /// Most completion tokens per answer.
    pub max_tokens: Option<u32>,
    /// Previously valid programs shown in the prompt.
    pub examples: usize,
    /// Unary operators named in the prompt.
    pub operators: Vec<String>,
    /// The target column (named in the prompt).
    pub target: String,
    /// The task's description (named in the prompt).
    pub description: String,
    /// Where failed requests are logged (the run folder's `llm-failures.jsonl`, set by the run;
    /// `None`: they are counted and reported, not logged).
    pub failure_log: Option<PathBuf>,
}

impl std::fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key_env", &self.api_key_env)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("temperature", &self.temperature)
            .field("concurrency", &self.concurrency)
            .field("max_requests", &self.max_requests)
            .field("prompt_path", &self.prompt_path)
            .field("prompt", &self.prompt)
            .field("cache", &self.cache)
            .field("timeout_s", &self.timeout_s)
            .field("retries", &self.retries)
            .field("backoff_s", &self.backoff_s)
            .field("max_tokens", &self.max_tokens)
            .field("examples", &self.examples)
            .field("operators", &self.operators)
            .field("target", &self.target)
            .field("description", &self.description)
            .field("failure_log", &self.failure_log)
            .finish()
    }
}

/// The validated task: everything the engine needs.
#[derive(Clone, Debug)]
pub struct Task {
    /// Name.
    pub name: String,
    /// The task file.
    pub path: PathBuf,
    /// The task file's text (copied into the run folder).
    pub text: String,
    /// Master seed.
    pub seed: u64,
    /// Per-point inputs.
    pub inputs: Vec<String>,
    /// Parameters candidates may use.
    pub params: Vec<ParamSpec>,
    /// Calibrator settings; `params` is filled per candidate.
    pub calibrate: CalibrateConfig,
    /// Proposer. For `kind: llm` this is `Replay` of the llm cache (which the llm proposer
    /// replays before asking for more) and [`Task::llm`] holds the endpoint settings.
    pub proposer: ProposerConfig,
    /// The `llm` proposer's settings when the task says `proposer.kind: llm`; `None` otherwise,
    /// and then nothing contacts the network.
    pub llm: Option<LlmConfig>,
    /// Candidates per round (see `ProposerSpec::batch`).
    pub batch: usize,
    /// Wall-clock budget.
    pub budget_seconds: Option<f64>,
    /// Calibration budget.
    pub budget_calibrations: Option<usize>,
    /// Success metric.
    pub metric: MetricName,
    /// Success threshold.
    pub threshold: f64,
    /// Stop after the first successful round.
    pub stop_on_success: bool,
    /// How the run chooses its answer.
    pub selection: Selection,
    /// Per-calibration wall-clock limit (work, memory and depth are in `calibrate`).
    pub limits: Limits,
    /// Where calibrations run.
    pub isolation: Isolation,
    /// Forbidden special forms.
    pub forbidden_forms: Vec<String>,
    /// Parent of run folders.
    pub output: PathBuf,
    /// Calibration threads the task asks for (`--threads` overrides it).
    pub threads: Option<usize>,
    /// The front ends programs may be written for.
    pub frontends: Arc<Registry>,
    /// The name of the front end of the task's programs (a cache line may name another).
    pub frontend: String,
    /// Fitting rows.
    pub train: Table,
    /// Row-subsample screening of each candidate (`data.screen_rows`), when it applies.
    pub screen: Option<Screen>,
    /// Scoring rows.
    pub validation: Table,
    /// Named test tables (the split's remainder is `test`).
    pub tests: Vec<(String, Table)>,
    /// Shared inputs (matrices).
    pub shared: Vec<(String, ndvm_optimizers::Shared)>,
    /// The generated table (all rows, with their split), to be written into the run folder.
    pub generated: Option<(Table, Vec<&'static str>)>,
    /// What the run should say about the task at its start (and record in `summary.json`).
    pub warnings: Vec<String>,
}

fn task_err(path: &Path, loc: Option<Location>, message: impl Into<String>) -> SearchError {
    let (line, column) = loc.map(|l| (l.line(), l.column())).unwrap_or((0, 0));
    SearchError::Task {
        path: path.to_path_buf(),
        line,
        column,
        message: message.into(),
    }
}

/// Parses the YAML text of a task without resolving it (no files read besides none).
pub fn parse_spec(path: &Path, text: &str) -> Result<TaskSpec> {
    serde_saphyr::from_str::<TaskSpec>(text).map_err(|e| {
        let loc = e.location();
        let full = e.to_string();
        // The crate's rendering may add a source excerpt after the first line; keep the message.
        let message = full.lines().next().unwrap_or("invalid task").to_string();
        let message = plain_words(&strip_location_prefix(&message));
        task_err(path, loc, message)
    })
}

/// The YAML library's messages in a user's words: its advice to a programmer (`set
/// DuplicateKeyPolicy in Options`) becomes what to change in the file.
fn plain_words(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(',').next().unwrap_or(rest).trim();
        return format!("`{key}` is given twice in this mapping; keep one");
    }
    message.to_string()
}

/// serde-saphyr may prefix `line N column M:`; we print our own `file:line:col:` instead.
fn strip_location_prefix(message: &str) -> String {
    let m = message.trim();
    let m = m.strip_prefix("error: ").unwrap_or(m);
    if let Some(rest) = m.strip_prefix("line ")
        && let Some(i) = rest.find(": ")
        && rest[..i].contains("column")
    {
        return rest[i + 2..].to_string();
    }
    m.to_string()
}

/// Reads and validates a task file, loading or generating its data; programs are read by the
/// shipped front ends.
pub fn load(path: &Path) -> Result<Task> {
    load_with(path, Arc::new(Registry::default()))
}

/// As [`load`], with the front ends of `frontends` (a registry with a front end of your own).
pub fn load_with(path: &Path, frontends: Arc<Registry>) -> Result<Task> {
    load_for(path, frontends, Purpose::Run)
}

/// As [`load`], with the master `seed:` replaced by `seed` before the task is resolved, so the
/// split, the row sample, the calibrator and the proposer follow it (a `split.seed` or
/// `calibrator.seed` written in the file still wins). `ndvm-search bench search` runs one task
/// over several seeds with it.
pub fn load_seeded(path: &Path, seed: u64) -> Result<Task> {
    let text = textfile::read(
        path,
        textfile::MAX_TASK_BYTES,
        "a task is a few KiB of YAML (put data in CSV files)",
    )?;
    let mut spec = parse_spec(path, &text)?;
    spec.seed = seed;
    resolve(
        path,
        text,
        spec,
        Arc::new(Registry::default()),
        Purpose::Run,
    )
}

/// As [`load`], for `check`: a task with `kind: llm` is valid in a build without the `llm`
/// feature too (only running it needs the feature).
pub fn load_to_check(path: &Path) -> Result<Task> {
    load_for(path, Arc::new(Registry::default()), Purpose::Check)
}

/// What a task is loaded for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    Run,
    Check,
}

fn load_for(path: &Path, frontends: Arc<Registry>, purpose: Purpose) -> Result<Task> {
    let text = textfile::read(
        path,
        textfile::MAX_TASK_BYTES,
        "a task is a few KiB of YAML (put data in CSV files)",
    )?;
    let spec = parse_spec(path, &text)?;
    resolve(path, text, spec, frontends, purpose)
}

/// The task's front end: `frontend:`, else the one for the cache's file name, else the
/// registry's fallback.
fn resolve_frontend(path: &Path, spec: &TaskSpec, frontends: &Registry) -> Result<String> {
    let cache = spec.proposer.cache.as_ref().map(|c| Path::new(&c.value));
    let named = spec.frontend.as_ref();
    frontends
        .choose(named.map(|n| n.value.as_str()), cache)
        .map(|f| f.name().to_string())
        .map_err(|m| task_err(path, named.map(|n| n.referenced), m))
}

/// The unary operators the grammar uses by default.
pub const DEFAULT_OPERATORS: &[&str] = &["exp", "sin", "cos", "log", "sqrt"];

/// Refuses an operator the runtime's vocabulary does not offer (`what`, `known` decide which):
/// the message lists the unary operators.
fn check_operators(
    path: &Path,
    ops: &[Spanned<String>],
    what: &str,
    known: impl Fn(&str) -> bool,
) -> Result<()> {
    match ops.iter().find(|o| !known(&o.value)) {
        None => Ok(()),
        Some(o) => {
            let list: Vec<&str> = ndvm_core::unary_operators().collect();
            Err(task_err(
                path,
                Some(o.referenced),
                format!("unknown {what} `{}` (known: {})", o.value, list.join(", ")),
            ))
        }
    }
}

/// The cache file `file` (named at `at`), which must exist.
fn existing_cache(path: &Path, file: &Path, at: &Spanned<String>) -> Result<PathBuf> {
    if !file.is_file() {
        return Err(task_err(
            path,
            Some(at.referenced),
            format!("cache {} does not exist", file.display()),
        ));
    }
    Ok(file.to_path_buf())
}

/// Refuses a generating proposer (`what`) without inputs or parameters to build from.
fn needs_vocabulary(
    path: &Path,
    what: &str,
    inputs: &[String],
    params: &[ParamSpec],
) -> Result<()> {
    if inputs.is_empty() || params.is_empty() {
        return Err(task_err(
            path,
            None,
            format!("the {what} proposer needs `inputs` and `params`"),
        ));
    }
    Ok(())
}

/// Refuses a generating proposer's key under a kind it does not apply to (`population` under
/// `replay`, say), at the key.
fn check_kind_keys(path: &Path, kind: ProposerName, p: &ProposerSpec) -> Result<()> {
    use ProposerName::{Evolve, Grammar, Llm};
    let at = |v: Option<Location>, key: &'static str, kinds: &'static [ProposerName]| {
        v.filter(|_| !kinds.contains(&kind))
            .map(|loc| (key, loc, kinds))
    };
    let misplaced = [
        at(
            p.population.as_ref().map(|v| v.referenced),
            "population",
            &[Evolve],
        ),
        at(
            p.islands.as_ref().map(|v| v.referenced),
            "islands",
            &[Evolve],
        ),
        at(
            p.max_size.as_ref().map(|v| v.referenced),
            "max_size",
            &[Evolve],
        ),
        at(
            p.max_depth.as_ref().map(|v| v.referenced),
            "max_depth",
            &[Grammar, Evolve],
        ),
        at(
            p.max_terms.as_ref().map(|v| v.referenced),
            "max_terms",
            &[Grammar, Evolve],
        ),
        at(
            p.factors
                .as_ref()
                .and_then(|f| f.first())
                .map(|v| v.referenced),
            "factors",
            &[Grammar, Evolve],
        ),
        at(
            p.binary
                .as_ref()
                .and_then(|b| b.first())
                .map(|v| v.referenced),
            "binary",
            &[Grammar, Evolve],
        ),
        at(
            p.operators
                .as_ref()
                .and_then(|o| o.first())
                .map(|v| v.referenced),
            "operators",
            &[Grammar, Evolve, Llm],
        ),
    ];
    match misplaced.into_iter().flatten().next() {
        None => Ok(()),
        Some((key, loc, kinds)) => {
            let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
            Err(task_err(
                path,
                Some(loc),
                format!(
                    "`proposer.{key}` only applies to `kind: {}`",
                    names.join("` or `kind: ")
                ),
            ))
        }
    }
}

/// A whole-number key `key` in 1..=`max`, `default` when absent.
fn count_key(
    path: &Path,
    value: Option<&Spanned<usize>>,
    key: &str,
    max: usize,
    default: usize,
) -> Result<usize> {
    match value {
        Some(v) if v.value == 0 || v.value > max => Err(task_err(
            path,
            Some(v.referenced),
            format!("`{key}` must be at least 1 and at most {max}"),
        )),
        Some(v) => Ok(v.value),
        None => Ok(default.min(max)),
    }
}

/// The unary operators of a grammar or evolve proposer (checked against the vocabulary).
fn resolve_unary(path: &Path, p: &ProposerSpec) -> Result<Vec<String>> {
    Ok(match &p.operators {
        Some(ops) => {
            check_operators(path, ops, "grammar operator", |o| {
                ndvm_core::unary_operators().any(|k| k == o)
            })?;
            ops.iter().map(|o| o.value.clone()).collect()
        }
        None => DEFAULT_OPERATORS.iter().map(|s| s.to_string()).collect(),
    })
}

/// The two-argument operators a tree grammar may use.
pub const BINARY_OPERATORS: &[&str] = &["+", "-", "*", "/", "pow", "expt"];

/// The tree grammar's shape from `binary`, `max_terms`, `max_depth` and `max_size`.
fn resolve_shape(path: &Path, p: &ProposerSpec) -> Result<TreeShape> {
    let binary = match &p.binary {
        Some(ops) => {
            if let Some(o) = ops
                .iter()
                .find(|o| !BINARY_OPERATORS.contains(&o.value.as_str()))
            {
                return Err(task_err(
                    path,
                    Some(o.referenced),
                    format!(
                        "unknown binary operator `{}` (known: {})",
                        o.value,
                        BINARY_OPERATORS.join(", ")
                    ),
                ));
            }
            ops.iter().map(|o| o.value.clone()).collect()
        }
        None => ["+", "-", "*", "/", "pow"].map(String::from).to_vec(),
    };
    Ok(TreeShape {
        binary,
        max_terms: count_key(path, p.max_terms.as_ref(), "max_terms", MAX_TERMS, 3)?,
        max_depth: count_key(path, p.max_depth.as_ref(), "max_depth", MAX_TREE_DEPTH, 3)?,
        max_size: count_key(path, p.max_size.as_ref(), "max_size", MAX_TREE_SIZE, 40)?,
        factors: resolve_factors(path, p)?,
    })
}

/// `proposer.factors:` checked: known shape names, each once, at least one.
fn resolve_factors(path: &Path, p: &ProposerSpec) -> Result<Option<Vec<FactorShape>>> {
    let Some(names) = &p.factors else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let err = |msg: String| Err(task_err(path, Some(name.referenced), msg));
        let Some(&(_, shape)) = FactorShape::ALL.iter().find(|(n, _)| *n == name.value) else {
            let known: Vec<&str> = FactorShape::ALL.iter().map(|(n, _)| *n).collect();
            return err(format!(
                "unknown factor shape `{}` (known: {})",
                name.value,
                known.join(", ")
            ));
        };
        if out.contains(&shape) {
            return err(format!("factor shape `{}` is named twice", name.value));
        }
        out.push(shape);
    }
    if out.is_empty() {
        return Err(task_err(path, None, "`proposer.factors` names no shape"));
    }
    Ok(Some(out))
}

/// Refuses `kind: llm` (at `loc`) in a build without the `llm` feature (`built` is false).
fn llm_feature(path: &Path, loc: Option<Location>, built: bool) -> Result<()> {
    if built {
        return Ok(());
    }
    Err(task_err(path, loc, crate::propose::LLM_FEATURE_MISSING))
}

/// Resolves `proposer:` for `kind: llm` (reads the prompt template; contacts nothing).
fn resolve_llm(path: &Path, base: &Path, spec: &TaskSpec, no_vars: bool) -> Result<LlmConfig> {
    let p = &spec.proposer;
    if let Some(ops) = &p.operators {
        check_operators(path, ops, "operator", ndvm_core::is_primitive)?;
    }
    let err = |loc: Location, msg: String| task_err(path, Some(loc), msg);
    let need = |key: &str| {
        task_err(
            path,
            None,
            format!("`proposer.kind: llm` needs `proposer.{key}`"),
        )
    };
    if no_vars {
        return Err(task_err(
            path,
            None,
            "the llm proposer needs `inputs` and `params`",
        ));
    }
    let base_url = p.base_url.as_ref().ok_or_else(|| need("base_url"))?;
    if !(base_url.value.starts_with("http://") || base_url.value.starts_with("https://")) {
        return Err(err(
            base_url.referenced,
            "`base_url` must start with http:// or https://".into(),
        ));
    }
    let model = p.model.as_ref().ok_or_else(|| need("model"))?;
    let prompt = p.prompt.as_ref().ok_or_else(|| need("prompt"))?;
    let cache = p.cache.as_ref().ok_or_else(|| need("cache"))?;
    let prompt_path = base.join(&prompt.value);
    let prompt_text = textfile::read(
        &prompt_path,
        textfile::MAX_PROMPT_BYTES,
        "a prompt template is a few KiB",
    )
    .map_err(|e| {
        let e = match e {
            SearchError::Read { source, .. } => source.to_string(),
            other => other.to_string(),
        };
        err(
            prompt.referenced,
            format!("cannot read prompt {}: {e}", prompt_path.display()),
        )
    })?;
    let positive = |v: &Option<Spanned<f64>>, key: &str, default: f64, max: f64| match v {
        Some(t) if !(t.value.is_finite() && t.value > 0.0 && t.value <= max) => Err(err(
            t.referenced,
            format!("`{key}` must be positive and at most {max}"),
        )),
        Some(t) => Ok(t.value),
        None => Ok(default),
    };
    let at_least_one = |v: &Option<Spanned<usize>>, key: &str, default: usize, max: usize| match v {
        Some(t) if t.value == 0 || t.value > max => Err(err(
            t.referenced,
            format!("`{key}` must be at least 1 and at most {max}"),
        )),
        Some(t) => Ok(t.value),
        None => Ok(default),
    };
    let temperature = match &p.temperature {
        Some(t) if !(t.value.is_finite() && (0.0..=2.0).contains(&t.value)) => {
            return Err(err(t.referenced, "`temperature` must be in [0, 2]".into()));
        }
        Some(t) => t.value,
        None => 0.8,
    };
    let backoff_s = match &p.backoff {
        Some(t) if !(t.value.is_finite() && (0.0..=60.0).contains(&t.value)) => {
            return Err(err(
                t.referenced,
                "`backoff` must be in [0, 60] seconds".into(),
            ));
        }
        Some(t) => t.value,
        None => 1.0,
    };
    // The secrets this task names, so that no path out of the process shows them.
    crate::secret::register_url(&base_url.value);
    if let Some(k) = &p.api_key {
        crate::secret::register(k);
    }
    let key_env = p.api_key_env.as_ref().map(|v| v.value.as_str());
    if let Ok(k) = std::env::var(key_env.unwrap_or("OPENAI_API_KEY")) {
        crate::secret::register(&k);
    }
    Ok(LlmConfig {
        base_url: base_url.value.trim_end_matches('/').to_string(),
        model: model.value.clone(),
        api_key_env: p
            .api_key_env
            .as_ref()
            .map_or_else(|| "OPENAI_API_KEY".to_string(), |v| v.value.clone()),
        api_key: p.api_key.clone(),
        temperature,
        concurrency: at_least_one(&p.concurrency, "concurrency", 4, MAX_CONCURRENCY)?,
        max_requests: at_least_one(&p.max_requests, "max_requests", 64, usize::MAX)?,
        prompt_path,
        prompt: prompt_text,
        cache: base.join(&cache.value),
        timeout_s: positive(&p.timeout, "timeout", 60.0, MAX_LLM_TIMEOUT_S)?,
        retries: match p.retries {
            Some(r) if r > MAX_RETRIES => {
                return Err(task_err(
                    path,
                    None,
                    format!("`proposer.retries` must be at most {MAX_RETRIES}"),
                ));
            }
            r => r.unwrap_or(3),
        },
        backoff_s,
        max_tokens: p.max_tokens,
        examples: p.examples.unwrap_or(3),
        operators: p.operators.as_ref().map_or_else(
            || DEFAULT_OPERATORS.iter().map(|s| s.to_string()).collect(),
            |ops| ops.iter().map(|o| o.value.clone()).collect(),
        ),
        target: spec
            .target
            .as_ref()
            .map_or_else(|| "y".to_string(), |t| t.value.clone()),
        description: spec.description.clone().unwrap_or_default(),
        failure_log: None,
    })
}

fn resolve(
    path: &Path,
    text: String,
    spec: TaskSpec,
    frontends: Arc<Registry>,
    purpose: Purpose,
) -> Result<Task> {
    let frontend = resolve_frontend(path, &spec, &frontends)?;
    let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let rel = |s: &str| base.join(s);
    let err = |loc: Location, msg: String| task_err(path, Some(loc), msg);
    let name = spec.name.value.clone();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(err(
            spec.name.referenced,
            "`name` must be non-empty and use only letters, digits, `-` and `_`".into(),
        ));
    }
    let program_loss = spec.loss == LossName::Program;
    let inputs: Vec<String> = spec.inputs.iter().map(|s| s.value.clone()).collect();
    for (i, s) in spec.inputs.iter().enumerate() {
        if inputs[..i].contains(&s.value) {
            return Err(err(
                s.referenced,
                format!("input `{}` is listed twice", s.value),
            ));
        }
    }
    if let Some(t) = &spec.target
        && inputs.contains(&t.value)
    {
        return Err(err(
            t.referenced,
            format!(
                "target `{}` is also listed as an input (target leakage)",
                t.value
            ),
        ));
    }
    // Parameters.
    let mut params = Vec::new();
    for p in &spec.params {
        let e = &p.value;
        let kind = match e.kind {
            KindName::Free => ParamKind::Free,
            KindName::Positive => ParamKind::Positive,
            KindName::Unit => ParamKind::Unit,
            KindName::Bounded => match (e.lo, e.hi) {
                (Some(lo), Some(hi)) if lo < hi && lo.is_finite() && hi.is_finite() => {
                    ParamKind::Bounded { lo, hi }
                }
                _ => {
                    return Err(err(
                        p.referenced,
                        format!("bounded parameter `{}` needs finite `lo` < `hi`", e.name),
                    ));
                }
            },
        };
        if e.kind != KindName::Bounded && (e.lo.is_some() || e.hi.is_some()) {
            return Err(err(
                p.referenced,
                format!("`lo`/`hi` are only for bounded parameters (`{}`)", e.name),
            ));
        }
        let init = e.init.unwrap_or(match kind {
            ParamKind::Bounded { lo, hi } => 0.5 * (lo + hi),
            _ => 0.5,
        });
        let ok = match kind {
            ParamKind::Free => init.is_finite(),
            ParamKind::Positive => init > 0.0 && init.is_finite(),
            ParamKind::Unit => init > 0.0 && init < 1.0,
            ParamKind::Bounded { lo, hi } => init > lo && init < hi,
        };
        if !ok {
            return Err(err(
                p.referenced,
                format!("`init` of `{}` lies outside its domain", e.name),
            ));
        }
        if params.iter().any(|q: &ParamSpec| q.name == e.name) || inputs.contains(&e.name) {
            return Err(err(
                p.referenced,
                format!(
                    "`{}` is declared twice (as a parameter or an input)",
                    e.name
                ),
            ));
        }
        params.push(ParamSpec::new(&e.name, kind, init));
    }

    // Data.
    let data = &spec.data;
    let csv_opts = csv_options(path, data)?;
    // A CSV table of the task (main or test), errors located at the key naming the file.
    let table_at = |file: &Spanned<String>| -> Result<Table> {
        let Some(target) = &spec.target else {
            return Err(err(file.referenced, "a table needs `target`".into()));
        };
        read_table(&rel(&file.value), &inputs, &target.value, csv_opts)
            .map_err(|e| err(file.referenced, crate::error::with_causes(&e)))
    };
    let mut generated = None;
    let mut shared = Vec::new();
    for s in &data.shared {
        let m = matrix_csv::read_limited(
            &rel(&s.csv.value),
            csv_opts.max_bytes,
            RAISE_CSV_LIMIT,
            csv_opts.delimiter,
        )
        .map_err(|e| err(s.csv.referenced, crate::error::with_causes(&e)))?;
        shared.push((
            s.name.clone(),
            ndvm_optimizers::Shared::Matrix {
                rows: m.rows,
                cols: m.cols,
                data: m.data,
            },
        ));
    }
    let main: Option<Table> = match (&data.generate, &data.csv) {
        (Some(_), Some(c)) => {
            return Err(err(
                c.referenced,
                "`data` takes `generate` or `csv`, not both".into(),
            ));
        }
        (Some(g), None) => {
            let gs = &g.value;
            if inputs != [gs.input.clone()] {
                return Err(err(
                    g.referenced,
                    format!(
                        "a generated table has one input, `{}`: set `inputs: [{}]`",
                        gs.input, gs.input
                    ),
                ));
            }
            let finite = gs.from.is_finite() && gs.to.is_finite() && gs.noise.is_finite();
            let ordered = gs.from < gs.to && gs.noise >= 0.0;
            if gs.n < 2 || !ordered || !finite {
                return Err(err(
                    g.referenced,
                    "`generate` needs n ≥ 2, finite from < to and finite noise ≥ 0".into(),
                ));
            }
            if gs.n > MAX_GENERATE_N {
                return Err(err(
                    g.referenced,
                    format!("`generate.n` must be at most {MAX_GENERATE_N}"),
                ));
            }
            Some(generate(gs, spec.seed, &frontends, &frontend).map_err(|m| err(g.referenced, m))?)
        }
        (None, Some(c)) => Some(table_at(c)?),
        (None, None) => None,
    };
    let (train, validation, mut tests) = match main {
        Some(mut table) => {
            if program_loss {
                return Err(task_err(
                    path,
                    None,
                    "`loss: program` takes no per-point table",
                ));
            }
            let Some(target) = &spec.target else {
                return Err(task_err(path, None, "a table needs a `target` column name"));
            };
            if data.generate.is_some() && target.value.is_empty() {
                return Err(err(target.referenced, "empty target name".into()));
            }
            if let Some(max) = data.max_rows
                && table.n_rows() > max
            {
                table = table.take(&sample_rows(table.n_rows(), max, spec.seed ^ 0x5eed_0001));
            }
            let n = table.n_rows();
            if n < 2 {
                let at = data
                    .csv
                    .as_ref()
                    .map(|c| c.referenced)
                    .or(data.generate.as_ref().map(|g| g.referenced));
                return Err(task_err(
                    path,
                    at,
                    format!(
                        "the table has {n} row(s); a train and a validation part need at least 2"
                    ),
                ));
            }
            let (n_train, n_val) = match &spec.split {
                Some(s) => {
                    let count = |v: &Spanned<f64>, key: &str| -> Result<usize> {
                        let x = v.value;
                        if x > 0.0 && x < 1.0 {
                            let k = (x * n as f64).round() as usize;
                            if k == 0 {
                                return Err(err(
                                    v.referenced,
                                    format!(
                                        "`{key}: {x}` of {n} rows rounds to an empty part; give a row count or a larger fraction"
                                    ),
                                ));
                            }
                            Ok(k)
                        } else if x >= 1.0 && x.fract() == 0.0 {
                            Ok(if x > n as f64 { n + 1 } else { x as usize })
                        } else {
                            Err(err(
                                v.referenced,
                                "a split is a whole row count ≥ 1 or a fraction in (0, 1)".into(),
                            ))
                        }
                    };
                    let (a, b) = (
                        count(&s.train, "train")?,
                        count(&s.validation, "validation")?,
                    );
                    if a + b > n {
                        return Err(err(
                            s.validation.referenced,
                            format!(
                                "train + validation = {} rows (fractions round to whole rows) but the table has {n}; the parts would overlap",
                                a + b
                            ),
                        ));
                    }
                    (a, b)
                }
                None => {
                    let a = ((0.7 * n as f64).round() as usize).clamp(1, n - 1);
                    (a, n - a)
                }
            };
            let split_seed = spec
                .split
                .as_ref()
                .and_then(|s| s.seed)
                .unwrap_or(spec.seed);
            let mut rng = ChaCha8Rng::seed_from_u64(split_seed);
            let mut order: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                let j = rng.random_range(0..=i);
                order.swap(i, j);
            }
            let mut tr = order[..n_train].to_vec();
            let mut va = order[n_train..n_train + n_val].to_vec();
            let mut te = order[n_train + n_val..].to_vec();
            tr.sort_unstable();
            va.sort_unstable();
            te.sort_unstable();
            if data.generate.is_some() {
                let mut labels = vec!["train"; n];
                for &r in &va {
                    labels[r] = "validation";
                }
                for &r in &te {
                    labels[r] = "test";
                }
                generated = Some((table.clone(), labels));
            }
            let mut tests = Vec::new();
            if !te.is_empty() {
                tests.push(("test".to_string(), table.take(&te)));
            }
            (table.take(&tr), table.take(&va), tests)
        }
        None => {
            if !program_loss {
                return Err(task_err(
                    path,
                    None,
                    "`data` needs `generate` or `csv` (only `loss: program` tasks can do without)",
                ));
            }
            (Table::default(), Table::default(), Vec::new())
        }
    };
    for t in &data.tests {
        tests.push((t.name.clone(), table_at(&t.csv)?));
    }
    let screen = resolve_screen(path, data.screen_rows.as_ref(), &train, spec.seed)?;

    // Calibrator.
    let mut calibrate = CalibrateConfig::recommended();
    let c = &spec.calibrator;
    calibrate.seed = c.seed.unwrap_or(spec.seed);
    calibrate.loss = match spec.loss {
        LossName::Mse => Loss::Mse,
        LossName::GaussianNll => Loss::GaussianNll,
        LossName::Program => Loss::ProgramLoss,
    };
    calibrate.dialect = match spec.dialect {
        DialectName::Default => Dialect::Default,
        DialectName::Reference => Dialect::Reference,
    };
    calibrate.precision = match spec.precision {
        PrecisionName::F64 => Precision::F64,
        PrecisionName::F32 => Precision::F32,
    };
    if let Some(o) = c.optimizer {
        calibrate.optimizer = match o {
            OptimizerName::Portfolio => Optimizer::Portfolio,
            OptimizerName::Adam => Optimizer::Adam,
            OptimizerName::Lbfgs => Optimizer::Lbfgs,
            OptimizerName::Lm => Optimizer::Lm,
        };
    }
    if let Some(m) = c.polish_method {
        calibrate.polish = match m {
            PolishName::Lbfgs => Polish::Lbfgs,
            PolishName::Lm => Polish::Lm,
        };
    }
    if let Some(k) = &c.starts {
        if k.value == 0 || k.value > MAX_STARTS {
            return Err(err(
                k.referenced,
                format!("`starts` must be at least 1 and at most {MAX_STARTS}"),
            ));
        }
        calibrate.n_starts = k.value;
    }
    if let Some(k) = &c.polish {
        if k.value == 0 || k.value > MAX_STARTS {
            return Err(err(
                k.referenced,
                format!("`polish` must be at least 1 and at most {MAX_STARTS}"),
            ));
        }
        calibrate.n_polish = k.value;
    }
    for (key, v) in [
        ("max_iters", &c.max_iters),
        ("screen_iters", &c.screen_iters),
    ] {
        if let Some(m) = v
            && m.value > MAX_ITERS
        {
            return Err(err(
                m.referenced,
                format!("`calibrator.{key}` must be at most {MAX_ITERS}"),
            ));
        }
    }
    if let Some(lr) = &c.learning_rate {
        if !(lr.value > 0.0 && lr.value.is_finite()) {
            return Err(err(
                lr.referenced,
                "`learning_rate` must be positive".into(),
            ));
        }
        calibrate.learning_rate = lr.value;
    }
    if let Some(sc) = &c.soft_choice {
        calibrate.soft_choice = soft_choice_config(path, sc)?;
    }
    if let Some(m) = &c.max_iters {
        calibrate.max_iters = m.value;
    }
    if let Some(m) = &c.screen_iters {
        calibrate.screen_iters = m.value;
    }
    if let Some(race) = &c.race {
        calibrate.race = race
            .iter()
            .map(|c| RaceCut::new(c.value.at, c.value.keep))
            .collect();
        if let Some((i, message)) = race_problem(&calibrate.race) {
            return Err(err(
                race[i].referenced,
                format!("`calibrator.race`: {message}"),
            ));
        }
    }

    // Proposer.
    let p = &spec.proposer;
    let kind = p
        .kind
        .as_ref()
        .map(|k| k.value)
        .unwrap_or(if p.cache.is_some() {
            ProposerName::Replay
        } else {
            ProposerName::Evolve
        });
    let mut llm = None;
    let proposer = match kind {
        ProposerName::Replay => {
            let Some(cache) = &p.cache else {
                return Err(task_err(
                    path,
                    None,
                    "`proposer.kind: replay` needs `proposer.cache`",
                ));
            };
            ProposerConfig::Replay {
                cache: existing_cache(path, &rel(&cache.value), cache)?,
            }
        }
        ProposerName::Grammar => {
            needs_vocabulary(path, "grammar", &inputs, &params)?;
            // `max_depth` or `factors` switches to the tree grammar.
            let tree = match p.max_depth.is_some() || p.factors.is_some() {
                true => Some(resolve_shape(path, p)?),
                false => None,
            };
            ProposerConfig::Grammar {
                operators: resolve_unary(path, p)?,
                max_terms: count_key(path, p.max_terms.as_ref(), "max_terms", MAX_TERMS, 2)?,
                tree,
            }
        }
        ProposerName::Evolve => {
            needs_vocabulary(path, "evolve", &inputs, &params)?;
            let population = count_key(
                path,
                p.population.as_ref(),
                "population",
                MAX_POPULATION,
                64,
            )?;
            let islands = count_key(path, p.islands.as_ref(), "islands", population, 4)?;
            let seeds = match (&p.cache, &p.base_url) {
                (_, Some(_)) => {
                    let config = resolve_llm(path, &base, &spec, false)?;
                    llm_feature(
                        path,
                        p.kind.as_ref().map(|k| k.referenced),
                        cfg!(feature = "llm") || purpose == Purpose::Check,
                    )?;
                    llm = Some(config);
                    None
                }
                (Some(cache), None) => Some(existing_cache(path, &rel(&cache.value), cache)?),
                (None, None) => None,
            };
            ProposerConfig::Evolve {
                operators: resolve_unary(path, p)?,
                tree: resolve_shape(path, p)?,
                population,
                islands,
                seeds,
            }
        }
        ProposerName::Llm => {
            let config = resolve_llm(path, &base, &spec, inputs.is_empty() || params.is_empty())?;
            llm_feature(
                path,
                p.kind.as_ref().map(|k| k.referenced),
                cfg!(feature = "llm") || purpose == Purpose::Check,
            )?;
            let cache = config.cache.clone();
            llm = Some(config);
            ProposerConfig::Replay { cache }
        }
    };
    if kind != ProposerName::Llm && llm.is_none() {
        let llm_only = [
            p.base_url.as_ref().map(|v| ("base_url", v.referenced)),
            p.model.as_ref().map(|v| ("model", v.referenced)),
            p.prompt.as_ref().map(|v| ("prompt", v.referenced)),
            p.temperature
                .as_ref()
                .map(|v| ("temperature", v.referenced)),
            p.concurrency
                .as_ref()
                .map(|v| ("concurrency", v.referenced)),
            p.max_requests
                .as_ref()
                .map(|v| ("max_requests", v.referenced)),
        ];
        if let Some((key, loc)) = llm_only.into_iter().flatten().next() {
            return Err(err(
                loc,
                format!(
                    "`proposer.{key}` only applies to `kind: llm` (or an LLM-seeded `kind: evolve`)"
                ),
            ));
        }
    }
    check_kind_keys(path, kind, p)?;
    let batch = match &p.batch {
        Some(b) if b.value == 0 || b.value > MAX_BATCH => {
            return Err(err(
                b.referenced,
                format!("`batch` must be at least 1 and at most {MAX_BATCH}"),
            ));
        }
        Some(b) => b.value,
        None => 8,
    };
    let budget_seconds = match &spec.budget.seconds {
        Some(s) if check_budget_seconds(s.value).is_err() => {
            return Err(err(
                s.referenced,
                format!(
                    "`budget.seconds` must be a positive number of at most {MAX_BUDGET_SECONDS} (one year)"
                ),
            ));
        }
        Some(s) => Some(s.value),
        None => None,
    };
    let limits = resolve_limits(path, &spec.limits, &mut calibrate)?;
    let threads = match &spec.threads {
        Some(t) if t.value == 0 || t.value > MAX_THREADS => {
            return Err(err(
                t.referenced,
                format!("`threads` must be at least 1 and at most {MAX_THREADS}"),
            ));
        }
        Some(t) => Some(t.value),
        None => None,
    };
    let metric = spec.success.metric.unwrap_or(if program_loss {
        MetricName::Loss
    } else {
        MetricName::R2
    });
    if metric == MetricName::R2 && program_loss {
        return Err(task_err(
            path,
            None,
            "`success.metric: r2` needs a target; use `loss`",
        ));
    }
    let warnings = check_scores(path, &spec, &train, &validation, &tests, metric)?;
    let threshold = match (&spec.success.threshold, metric) {
        (Some(t), _) if !t.value.is_finite() => {
            return Err(err(
                t.referenced,
                "`threshold` must be a finite number".into(),
            ));
        }
        (Some(t), MetricName::R2) if t.value > 1.0 => {
            return Err(err(
                t.referenced,
                "an r2 `threshold` above 1 can never be reached (r2 is at most 1)".into(),
            ));
        }
        (Some(t), _) => t.value,
        (None, MetricName::R2) => 0.99,
        (None, MetricName::Loss) => f64::NEG_INFINITY,
    };
    Ok(Task {
        name,
        path: path.to_path_buf(),
        text,
        seed: spec.seed,
        inputs,
        params,
        calibrate,
        proposer,
        llm,
        batch,
        budget_seconds,
        budget_calibrations: spec.budget.calibrations,
        metric,
        threshold,
        stop_on_success: spec.success.stop,
        selection: spec.selection,
        limits,
        isolation: spec.isolation,
        forbidden_forms: spec.forbidden_forms.clone(),
        output: PathBuf::from(spec.output.as_deref().unwrap_or("results")),
        threads,
        frontends,
        frontend,
        train,
        screen,
        validation,
        tests,
        shared,
        generated,
        warnings,
    })
}

/// Refuses data on which the ranking score is undefined: a constant target (at `target:`), or,
/// ranking by validation R², a validation part of fewer than 2 rows or with a constant target.
/// Ranking by the training loss (`success.metric: loss`), such a validation part only warns.
fn check_scores(
    path: &Path,
    spec: &TaskSpec,
    train: &Table,
    validation: &Table,
    tests: &[(String, Table)],
    metric: MetricName,
) -> Result<Vec<String>> {
    let Some(target) = &spec.target else {
        return Ok(Vec::new());
    };
    let split_rows = tests.iter().filter(|(n, _)| n == "test");
    let all = train
        .target
        .iter()
        .chain(&validation.target)
        .chain(split_rows.flat_map(|(_, t)| &t.target));
    if let Some(value) = constant(all) {
        return Err(task_err(
            path,
            Some(target.referenced),
            format!(
                "the target column `{}` holds the same value, {value}, in every row: no model can \
                 be scored against it (R² and NMSE are undefined)",
                target.value
            ),
        ));
    }
    let n = validation.n_rows();
    let problem = if n < 2 {
        Some(format!(
            "the validation part has {n} row(s): R² and NMSE need at least 2"
        ))
    } else {
        constant(validation.target.iter()).map(|v| {
            format!(
                "the validation part's target is {v} in each of its {n} rows: R² and NMSE are \
                 undefined on it"
            )
        })
    };
    let Some(problem) = problem else {
        return Ok(Vec::new());
    };
    let at = spec
        .split
        .as_ref()
        .map_or(target.referenced, |s| s.validation.referenced);
    match metric {
        MetricName::R2 => Err(task_err(
            path,
            Some(at),
            format!(
                "{problem}; give `split:` a larger validation part, or rank by the training loss \
                 with `success: {{metric: loss}}`"
            ),
        )),
        MetricName::Loss => Ok(vec![format!(
            "{problem}; candidates are ranked by the training loss (success.metric: loss)"
        )]),
    }
}

/// The one value every item equals (none for an empty sequence or two different values).
fn constant<'a>(mut values: impl Iterator<Item = &'a f64>) -> Option<f64> {
    let first = *values.next()?;
    values.all(|v| *v == first).then_some(first)
}

impl Task {
    /// The line a run prints when it screens candidates on a row sample, `None` when it does not.
    pub fn screen_note(&self) -> Option<String> {
        let s = self.screen.as_ref()?;
        Some(format!(
            "screening each candidate on {} of {} training rows{}, then refitting it on all of them (data.screen_rows; 'off' fits on all rows)",
            s.rows(),
            self.train.n_rows(),
            if s.automatic {
                format!(", the default above {AUTO_SCREEN_ABOVE} rows")
            } else {
                String::new()
            },
        ))
    }

    /// The registered front end called `name`.
    pub fn frontend_named(&self, name: &str) -> Result<&dyn Frontend> {
        self.frontends
            .by_name(name)
            .ok_or_else(|| SearchError::UnknownFrontend {
                message: self.frontends.unknown(name),
            })
    }
}

/// Checks `limits:` and applies work, memory and depth to the calibrator's settings.
fn resolve_limits(path: &Path, spec: &LimitsSpec, cfg: &mut CalibrateConfig) -> Result<Limits> {
    let err = |loc: Location, msg: String| task_err(path, Some(loc), msg);
    if let Some(w) = &spec.work {
        if w.value == 0 || w.value > Limits::MAX_WORK {
            let max = Limits::MAX_WORK;
            return Err(err(
                w.referenced,
                format!("`limits.work` must be at least 1 and at most {max}"),
            ));
        }
        cfg.max_work = w.value;
    }
    if let Some(m) = &spec.memory_mb {
        if m.value == 0 || m.value > Limits::MAX_MEMORY_MB {
            let max = Limits::MAX_MEMORY_MB;
            return Err(err(
                m.referenced,
                format!("`limits.memory_mb` must be at least 1 and at most {max}"),
            ));
        }
        cfg.max_memory = m.value * 1024 * 1024;
    }
    if let Some(d) = &spec.depth {
        if d.value == 0 {
            return Err(err(
                d.referenced,
                "`limits.depth` must be at least 1".into(),
            ));
        }
        cfg.max_depth = d.value;
    }
    let mut limits = Limits::default();
    if let Some(s) = &spec.seconds {
        if check_budget_seconds(s.value).is_err() {
            return Err(err(
                s.referenced,
                format!(
                    "`limits.seconds` must be a positive number of at most {MAX_BUDGET_SECONDS} (one year)"
                ),
            ));
        }
        limits.seconds = s.value;
    }
    Ok(limits)
}

/// `calibrator.soft_choice:` resolved; a temperature that is not a positive finite number is an
/// error at its line.
fn soft_choice_config(path: &Path, sc: &SoftChoiceSpec) -> Result<SoftChoiceConfig> {
    let mut out = SoftChoiceConfig::default();
    if let Some(m) = sc.mode {
        out.mode = match m {
            ChoiceModeName::Soft => ChoiceMode::Soft,
            ChoiceModeName::StraightThrough => ChoiceMode::StraightThrough,
            ChoiceModeName::Hard => ChoiceMode::Hard,
        };
    }
    for (key, t) in [
        ("temperature", &sc.temperature),
        ("final_temperature", &sc.final_temperature),
    ] {
        if let Some(t) = t
            && !(t.value > 0.0 && t.value.is_finite())
        {
            return Err(task_err(
                path,
                Some(t.referenced),
                format!("`calibrator.soft_choice.{key}` must be a positive number"),
            ));
        }
    }
    out.temperature = sc.temperature.as_ref().map_or(1.0, |t| t.value);
    out.final_temperature = sc
        .final_temperature
        .as_ref()
        .map_or(out.temperature, |t| t.value);
    out.gumbel = sc.gumbel.unwrap_or(false);
    Ok(out)
}

/// Evaluates the formula on the grid and adds N(0, noise²) noise drawn with ChaCha8 from `seed`
/// (Box–Muller on two uniforms per point, in grid order).
fn generate(
    g: &GenerateSpec,
    seed: u64,
    frontends: &Registry,
    frontend: &str,
) -> std::result::Result<Table, String> {
    let xs: Vec<f64> = (0..g.n)
        .map(|i| g.from + (g.to - g.from) * i as f64 / (g.n - 1) as f64)
        .collect();
    validate::precheck_source(&g.formula).map_err(|r| format!("formula: {}", r.message))?;
    let mut heap = Heap::new();
    let frontend = frontends
        .by_name(frontend)
        .ok_or_else(|| frontends.unknown(frontend))?;
    let program = frontend
        .parse(&mut heap, &g.formula)
        .map_err(|e| format!("formula: {}", e.message))?;
    let mut ev = Evaluator::new(EvalOptions::new(g.n));
    let inputs = Inputs::new().input_lanes(&g.input, xs.clone());
    let out = ev.eval(&mut heap, &program, &inputs).map_err(|e| {
        let hint = format!("the formula's only input is `{}` (generate.input)", g.input);
        format!("formula: {}", crate::evalcmd::hint_unbound(e, &hint))
    })?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut ys = Vec::with_capacity(g.n);
    #[allow(clippy::needless_range_loop)]
    for i in 0..g.n {
        let y = out
            .value
            .number(i)
            .filter(|y| y.is_finite())
            .ok_or_else(|| format!("formula: not a finite number at {} = {}", g.input, xs[i]))?;
        let u1: f64 = 1.0 - rng.random::<f64>();
        let u2: f64 = rng.random::<f64>();
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        ys.push(y + g.noise * z);
    }
    Ok(Table {
        columns: vec![xs],
        target: ys,
    })
}

/// How the CSV tables of a task are read.
#[derive(Clone, Copy, Debug)]
struct CsvOptions {
    /// Largest file read, in bytes.
    max_bytes: u64,
    /// Drop rows with a non-finite input or target instead of refusing the table.
    drop_nonfinite: bool,
    /// The field separator.
    delimiter: u8,
}

/// `data.max_bytes`, `data.drop_nonfinite` and `data.delimiter`, checked.
fn csv_options(path: &Path, data: &DataSpec) -> Result<CsvOptions> {
    let err = |loc: Location, msg: &str| task_err(path, Some(loc), msg);
    let max_bytes = match &data.max_bytes {
        Some(b) if b.value == 0 => return Err(err(b.referenced, "`max_bytes` must be at least 1")),
        Some(b) => b.value,
        None => textfile::MAX_CSV_BYTES,
    };
    let delimiter = match &data.delimiter {
        None => matrix_csv::COMMA,
        Some(d) => match d.value.as_bytes() {
            [b] if b.is_ascii() && !matches!(b, b'"' | b'\n' | b'\r') => *b,
            _ => {
                return Err(err(
                    d.referenced,
                    "`delimiter` must be one ASCII character other than a quote or a line break (`\";\"`, `\"\\t\"` for tab)",
                ));
            }
        },
    };
    Ok(CsvOptions {
        max_bytes,
        drop_nonfinite: data.drop_nonfinite,
        delimiter,
    })
}

/// How to raise the CSV size limit (the end of its error message).
const RAISE_CSV_LIMIT: &str = "raise it with `data.max_bytes` in the task, or sample the file down";

/// Reads a CSV table with a header naming `inputs` and `target`; a non-finite value in one of
/// those columns is an error naming the line and column, unless `drop_nonfinite` drops its row.
fn read_table(path: &Path, inputs: &[String], target: &str, opts: CsvOptions) -> Result<Table> {
    let m = matrix_csv::read_limited(path, opts.max_bytes, RAISE_CSV_LIMIT, opts.delimiter)?;
    let header = m.require_header(path)?;
    let csv_err = |line: Option<usize>, problem: CsvProblem| SearchError::Csv {
        path: path.to_path_buf(),
        line,
        problem,
    };
    let col = |name: &str, role: &'static str| -> Result<Vec<f64>> {
        let j = header.iter().position(|h| h == name).ok_or_else(|| {
            csv_err(
                Some(1),
                CsvProblem::MissingColumn {
                    role,
                    name: name.to_string(),
                    columns: header.to_vec(),
                },
            )
        })?;
        Ok(m.column(j))
    };
    let table = Table {
        columns: inputs
            .iter()
            .map(|n| col(n, "input"))
            .collect::<Result<_>>()?,
        target: col(target, "target")?,
    };
    let names: Vec<&str> = inputs.iter().map(String::as_str).chain([target]).collect();
    let mut keep = Vec::with_capacity(table.n_rows());
    for r in 0..table.n_rows() {
        let bad = table
            .columns
            .iter()
            .chain([&table.target])
            .position(|c| !c[r].is_finite());
        match bad {
            None => keep.push(r),
            Some(_) if opts.drop_nonfinite => {}
            Some(j) => {
                let value = table.columns.get(j).unwrap_or(&table.target)[r];
                return Err(csv_err(
                    Some(m.lines[r]),
                    CsvProblem::NonFinite {
                        column: names[j].to_string(),
                        row: r + 1,
                        value,
                    },
                ));
            }
        }
    }
    if keep.len() == table.n_rows() {
        return Ok(table);
    }
    if keep.is_empty() {
        return Err(csv_err(None, CsvProblem::AllNonFinite));
    }
    Ok(table.take(&keep))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soft_choice_keys_resolve_or_name_their_line() {
        let spec = |sc: &str| {
            let text = format!(
                "name: t\ndata:\n  generate: {{formula: x, from: 0, to: 1, n: 8}}\ninputs: [x]\ntarget: y\ncalibrator:\n  soft_choice: {sc}\n"
            );
            parse_spec(Path::new("t.yaml"), &text)
        };
        let resolved = |sc: &str| {
            let s = spec(sc).unwrap();
            soft_choice_config(
                Path::new("t.yaml"),
                s.calibrator.soft_choice.as_ref().unwrap(),
            )
        };
        let c = resolved(
            "{mode: straight-through, temperature: 2, final_temperature: 0.05, gumbel: true}",
        )
        .unwrap();
        assert_eq!(
            c,
            SoftChoiceConfig {
                mode: ChoiceMode::StraightThrough,
                temperature: 2.0,
                final_temperature: 0.05,
                gumbel: true
            }
        );
        let c = resolved("{mode: hard, temperature: 0.5}").unwrap();
        assert_eq!((c.mode, c.final_temperature), (ChoiceMode::Hard, 0.5));
        assert_eq!(resolved("{}").unwrap(), SoftChoiceConfig::default());
        let msg = resolved("{temperature: 0}").unwrap_err().to_string();
        assert!(
            msg.starts_with(
                "t.yaml:7:30: `calibrator.soft_choice.temperature` must be a positive number"
            ),
            "{msg}"
        );
        let msg = spec("{tau: 1}").unwrap_err().to_string();
        assert!(msg.starts_with("t.yaml:7:") && msg.contains("tau"), "{msg}");
        let msg = spec("{mode: gumbel}").unwrap_err().to_string();
        assert!(
            msg.starts_with("t.yaml:7:") && msg.contains("straight-through"),
            "{msg}"
        );
    }

    #[test]
    fn the_race_resolves_or_names_its_line() {
        let dir = std::env::temp_dir().join(format!("ndvm-race-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let load_with = |calibrator: &str| {
            let path = dir.join("t.yaml");
            let text = format!(
                "name: t\ndata:\n  generate: {{formula: x, from: 0, to: 1, n: 8}}\ninputs: [x]\ntarget: y\nparams: [{{name: a}}]\ncalibrator:\n  starts: 16\n  race: {calibrator}\n"
            );
            std::fs::write(&path, text).unwrap();
            load(&path)
        };
        let t = load_with("[{at: 10, keep: 8}, {at: 30, keep: 4}]").unwrap();
        assert_eq!(
            t.calibrate.race,
            vec![RaceCut::new(10, 8), RaceCut::new(30, 4)]
        );
        assert_eq!(t.calibrate.n_starts, 16);
        assert!(load_with("[]").unwrap().calibrate.race.is_empty());
        let msg = load_with("[{at: 10, keep: 8}, {at: 10, keep: 4}]")
            .unwrap_err()
            .to_string();
        assert!(
            msg.ends_with(
                "t.yaml:9:29: `calibrator.race`: cut 2 (step 10) must come after cut 1 (step 10)"
            ),
            "{msg}"
        );
        let msg = load_with("[{at: 10, keep: 0}]").unwrap_err().to_string();
        assert!(
            msg.contains("t.yaml:9:10: `calibrator.race`: cut 1 keeps no start"),
            "{msg}"
        );
        let msg = load_with("[{at: 10, keep: 4}, {at: 20, keep: 4}]")
            .unwrap_err()
            .to_string();
        assert!(
            msg.ends_with(
                "t.yaml:9:29: `calibrator.race`: cut 2 keeps 4 starts; it must keep fewer than cut 1 (4)"
            ),
            "{msg}"
        );
        let msg = load_with("[{at: 10, kept: 4}]").unwrap_err().to_string();
        assert!(msg.contains("t.yaml:9:") && msg.contains("kept"), "{msg}");
        let msg = load_with("[{at: -1, keep: 4}]").unwrap_err().to_string();
        assert!(msg.contains("t.yaml:9:"), "{msg}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_polish_method_and_lm_resolve_or_name_their_line() {
        let dir = std::env::temp_dir().join(format!("ndvm-polish-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let load_with = |calibrator: &str| {
            let path = dir.join("t.yaml");
            let text = format!(
                "name: t\ndata:\n  generate: {{formula: x, from: 0, to: 1, n: 8}}\ninputs: [x]\ntarget: y\nparams: [{{name: a}}]\ncalibrator: {calibrator}\n"
            );
            std::fs::write(&path, text).unwrap();
            load(&path)
        };
        let t = load_with("{polish_method: lm}").unwrap();
        assert_eq!(
            (t.calibrate.optimizer, t.calibrate.polish),
            (Optimizer::Portfolio, Polish::Lm)
        );
        let t = load_with("{optimizer: lm}").unwrap();
        assert_eq!(
            (t.calibrate.optimizer, t.calibrate.polish),
            (Optimizer::Lm, Polish::Lbfgs)
        );
        let msg = load_with("{polish_method: newton}")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("t.yaml:7:") && msg.contains("lbfgs") && msg.contains("lm"),
            "{msg}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_precision_resolves_or_names_its_line() {
        let dir = std::env::temp_dir().join(format!("ndvm-precision-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let load_with = |extra: &str| {
            let path = dir.join("t.yaml");
            let text = format!(
                "name: t\ndata:\n  generate: {{formula: x, from: 0, to: 1, n: 8}}\ninputs: [x]\ntarget: y\nparams: [{{name: a}}]\n{extra}"
            );
            std::fs::write(&path, text).unwrap();
            load(&path)
        };
        assert_eq!(load_with("").unwrap().calibrate.precision, Precision::F64);
        let t = load_with("precision: f32\n").unwrap();
        assert_eq!(t.calibrate.precision, Precision::F32);
        let msg = load_with("precision: f16\n").unwrap_err().to_string();
        assert!(
            msg.contains("t.yaml:7:") && msg.contains("f64") && msg.contains("f32"),
            "{msg}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unknown_key_names_line_and_column() {
        let text = "name: t\ndata:\n  generate: {formula: x, from: 0, to: 1, n: 8}\ninputs: [x]\ntarget: y\nbudgit: {seconds: 3}\n";
        let e = parse_spec(Path::new("t.yaml"), text).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("t.yaml:6:1: "), "{msg}");
        assert!(msg.contains("budgit"), "{msg}");
    }

    #[test]
    fn the_front_end_is_named_checked_at_its_line_or_taken_from_the_cache_name() {
        let registry = Registry::default();
        let spec = |extra: &str| {
            let text = format!(
                "name: t\ndata:\n  generate: {{formula: x, from: 0, to: 1, n: 8}}\ninputs: [x]\ntarget: y\n{extra}"
            );
            parse_spec(Path::new("t.yaml"), &text).unwrap()
        };
        let chosen = |extra: &str| resolve_frontend(Path::new("t.yaml"), &spec(extra), &registry);
        assert_eq!(chosen("").unwrap(), "scheme");
        assert_eq!(chosen("frontend: infix\n").unwrap(), "infix");
        assert_eq!(
            chosen("proposer: {cache: c/m.infix.jsonl}\n").unwrap(),
            "infix"
        );
        assert_eq!(
            chosen("frontend: scheme\nproposer: {cache: m.infix.jsonl}\n").unwrap(),
            "scheme"
        );
        let msg = chosen("frontend: cobol\n").unwrap_err().to_string();
        assert!(
            msg.starts_with("t.yaml:6:11: unknown front end `cobol` (known: scheme, infix"),
            "{msg}"
        );
    }

    #[test]
    fn threads_are_checked_at_their_line() {
        let dir = std::env::temp_dir().join(format!("ndvm-task-threads-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let load_text = |extra: &str| {
            let path = dir.join("t.yaml");
            let text = format!(
                "name: t\ndata:\n  generate: {{formula: x, from: 0, to: 1, n: 8}}\ninputs: [x]\ntarget: y\nparams: [{{name: a}}]\n{extra}"
            );
            std::fs::write(&path, text).unwrap();
            load(&path)
        };
        assert_eq!(load_text("").unwrap().threads, None);
        assert_eq!(load_text("threads: 3\n").unwrap().threads, Some(3));
        let msg = load_text("threads: 0\n").unwrap_err().to_string();
        assert!(
            msg.contains("t.yaml:7:10: `threads` must be at least 1"),
            "{msg}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_row_sampler_is_seeded_sorted_and_exact() {
        let a = sample_rows(7500, 1000, 42);
        assert_eq!(a.len(), 1000);
        assert!(a.windows(2).all(|w| w[0] < w[1]), "not strictly increasing");
        assert!(a.iter().all(|&r| r < 7500));
        assert_eq!(a, sample_rows(7500, 1000, 42));
        assert_ne!(a, sample_rows(7500, 1000, 43));
        assert_eq!(sample_rows(5, 9, 1), vec![0, 1, 2, 3, 4]);
        assert_eq!(sample_rows(5, 5, 1), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn screen_rows_defaults_by_table_size_and_is_checked_at_its_line() {
        let dir = std::env::temp_dir().join(format!("ndvm-task-screen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let load_text = |n: usize, extra: &str| {
            let path = dir.join("t.yaml");
            let text = format!(
                "name: t\ndata:\n  generate: {{formula: x, from: 0, to: 1, n: {n}}}\n{extra}inputs: [x]\ntarget: y\nparams: [{{name: a}}]\n"
            );
            std::fs::write(&path, text).unwrap();
            load(&path)
        };
        // 70 % of 3000 rows = 2100 > 2000: screened on 1000 by default.
        let t = load_text(3000, "").unwrap();
        let s = t.screen.as_ref().unwrap();
        assert_eq!(
            (s.rows(), s.automatic, t.train.n_rows()),
            (1000, true, 2100)
        );
        // Sampled rows are training rows, in file order.
        let xs = &t.train.columns[0];
        let mut at = 0;
        for x in &s.train.columns[0] {
            at += xs[at..].iter().position(|v| v == x).unwrap() + 1;
        }
        let note = t.screen_note().unwrap();
        assert!(note.starts_with("screening each candidate on 1000 of 2100 training rows, the default above 2000 rows"), "{note}");
        // 70 % of 2800 rows = 1960: not screened.
        assert_eq!(load_text(2800, "").unwrap().screen, None);
        assert_eq!(
            load_text(3000, "  screen_rows: off\n").unwrap().screen,
            None
        );
        let t = load_text(100, "  screen_rows: 20\n").unwrap();
        assert_eq!(
            t.screen.as_ref().map(|s| (s.rows(), s.automatic)),
            Some((20, false))
        );
        assert!(!t.screen_note().unwrap().contains("default"));
        // At least as many rows as the table: nothing to screen.
        assert_eq!(load_text(100, "  screen_rows: 70\n").unwrap().screen, None);
        for (bad, want) in [
            ("1", "t.yaml:4:16: `screen_rows: 1` is too few"),
            ("maybe", "t.yaml:4:3: invalid value: string \"maybe\""),
            ("-3", "t.yaml:4:3: invalid value"),
        ] {
            let msg = load_text(100, &format!("  screen_rows: {bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(msg.contains(want), "{bad}: {msg}");
            assert!(
                bad == "1" || msg.contains("a row count or `off`"),
                "{bad}: {msg}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn kind_llm_without_the_feature_is_refused_at_its_line_with_the_rebuild_command() {
        let text = "name: t\ndata:\n  generate: {formula: x, from: 0, to: 1, n: 8}\ninputs: [x]\n\
                    target: y\nproposer:\n  kind: llm\n  model: m\n";
        let spec = parse_spec(Path::new("t.yaml"), text).unwrap();
        let loc = spec.proposer.kind.as_ref().map(|k| k.referenced);
        let msg = llm_feature(Path::new("t.yaml"), loc, false)
            .unwrap_err()
            .to_string();
        assert!(msg.starts_with("t.yaml:7:9: `kind: llm` needs"), "{msg}");
        assert!(
            msg.contains("cargo install --path search --features llm"),
            "{msg}"
        );
        assert!(llm_feature(Path::new("t.yaml"), loc, true).is_ok());
    }

    /// Evolve is the default without a cache; its keys resolve with their defaults, are checked
    /// at their line, and a generating proposer's key under another kind is refused at the key.
    #[test]
    fn evolve_keys_resolve_and_misplaced_keys_are_refused_at_their_line() {
        let dir = std::env::temp_dir().join(format!("ndvm-task-evolve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("c.jsonl"), "{\"src\": \"(* a x)\"}\n").unwrap();
        let load_text = |proposer: &str| {
            let path = dir.join("t.yaml");
            let text = format!(
                "name: t\ndata:\n  generate: {{formula: x, from: 0, to: 1, n: 8}}\ninputs: [x]\ntarget: y\nparams: [{{name: a}}]\nproposer: {proposer}\n"
            );
            std::fs::write(&path, text).unwrap();
            load(&path)
        };
        let t = load_text("{}").unwrap();
        let ProposerConfig::Evolve {
            operators,
            tree,
            population,
            islands,
            seeds,
        } = t.proposer
        else {
            panic!("{:?}", t.proposer)
        };
        assert_eq!(operators, DEFAULT_OPERATORS);
        assert_eq!((population, islands, seeds), (64, 4, None));
        assert_eq!(tree.binary, ["+", "-", "*", "/", "pow"]);
        assert_eq!((tree.max_terms, tree.max_depth, tree.max_size), (3, 3, 40));
        assert_eq!(tree.factors, None);
        let t = load_text("{factors: [cusp, bell]}").unwrap();
        assert!(matches!(
            t.proposer,
            ProposerConfig::Evolve { ref tree, .. }
                if tree.factors == Some(vec![FactorShape::Cusp, FactorShape::Bell])
        ));
        // Under `kind: grammar`, `factors` switches to the tree grammar.
        let t = load_text("{kind: grammar, factors: [switch]}").unwrap();
        assert!(matches!(
            t.proposer,
            ProposerConfig::Grammar { tree: Some(ref tree), .. }
                if tree.factors == Some(vec![FactorShape::Switch])
        ));
        let t = load_text("{kind: evolve, cache: c.jsonl, binary: [/], islands: 2}").unwrap();
        assert!(matches!(
            t.proposer,
            ProposerConfig::Evolve { islands: 2, seeds: Some(_), ref tree, .. } if tree.binary == ["/"]
        ));
        for (proposer, message) in [
            (
                "{population: 0}",
                "t.yaml:7:24: `population` must be at least 1",
            ),
            (
                "{islands: 65}",
                "t.yaml:7:21: `islands` must be at least 1 and at most 64",
            ),
            (
                "{binary: [+, '%']}",
                "t.yaml:7:24: unknown binary operator `%`",
            ),
            (
                "{max_depth: 17}",
                "t.yaml:7:23: `max_depth` must be at least 1 and at most 16",
            ),
            (
                "{factors: [bell, frob]}",
                "t.yaml:7:28: unknown factor shape `frob` (known: saturating, bell, switch, power, cusp, bump)",
            ),
            (
                "{factors: [bell, bell]}",
                "t.yaml:7:28: factor shape `bell` is named twice",
            ),
            ("{factors: []}", "`proposer.factors` names no shape"),
            (
                "{cache: c.jsonl, factors: [bell]}",
                "t.yaml:7:38: `proposer.factors` only applies to `kind: grammar` or `kind: evolve`",
            ),
            (
                "{cache: c.jsonl, population: 8}",
                "t.yaml:7:40: `proposer.population` only applies to `kind: evolve`",
            ),
            (
                "{kind: grammar, islands: 2}",
                "t.yaml:7:36: `proposer.islands` only applies to `kind: evolve`",
            ),
            (
                "{cache: c.jsonl, max_depth: 2}",
                "t.yaml:7:39: `proposer.max_depth` only applies to `kind: grammar` or `kind: evolve`",
            ),
        ] {
            let msg = load_text(proposer).unwrap_err().to_string();
            assert!(msg.contains(message), "{proposer}: {msg}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Operators come from the runtime's vocabulary: the defaults are among its unary operators,
    /// and an unknown one is refused at its line with the known ones listed.
    #[test]
    fn operators_are_checked_against_the_vocabulary() {
        let unary: Vec<&str> = ndvm_core::unary_operators().collect();
        for op in DEFAULT_OPERATORS {
            assert!(unary.contains(op), "{op}");
        }
        let text = "name: t\ndata:\n  generate: {formula: x, from: 0, to: 1, n: 8}\ninputs: [x]\n\
                    target: y\nproposer:\n  kind: grammar\n  operators: [exp, sigmoid, frob]\n";
        let spec = parse_spec(Path::new("t.yaml"), text).unwrap();
        let ops = spec.proposer.operators.as_deref().unwrap_or_default();
        let known = |o: &str| ndvm_core::unary_operators().any(|k| k == o);
        let msg = check_operators(Path::new("t.yaml"), ops, "grammar operator", known)
            .unwrap_err()
            .to_string();
        assert!(msg.starts_with("t.yaml:8:"), "{msg}");
        assert!(msg.contains("unknown grammar operator `frob`"), "{msg}");
        assert!(msg.contains("sigmoid"), "{msg}");
        assert!(check_operators(Path::new("t.yaml"), &ops[..2], "grammar operator", known).is_ok());
    }
}
