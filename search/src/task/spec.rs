//! The YAML schema of a task (`TaskSpec` and its sections), read with serde-saphyr so that
//! unknown keys and bad values are errors with `file:line:column`.

use super::*;

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
    /// How the run chooses its answer among the calibrated models: `cross-validated` (default),
    /// `simplest-equivalent` or `lowest-error` (see `crate::select`).
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
    /// The main table as columns in memory (a task built in code; no YAML key).
    #[serde(skip)]
    pub columns: Option<Columns>,
    /// Extra test tables as columns in memory, each scored separately (no YAML key).
    #[serde(skip)]
    pub test_columns: Vec<(String, Columns)>,
}

/// A table held in memory: named columns of equal length (the inputs and the target among them,
/// in any order; other columns are ignored).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Columns {
    /// Column names.
    pub names: Vec<String>,
    /// One vector per name.
    pub values: Vec<Vec<f64>>,
}

impl Columns {
    /// Columns from `(name, values)` pairs.
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = (S, Vec<f64>)>) -> Columns {
        let (names, values) = columns.into_iter().map(|(n, v)| (n.into(), v)).unzip();
        Columns { names, values }
    }
}

/// A value of a task built in code: it has no place in a file.
pub fn at<T>(value: T) -> Spanned<T> {
    Spanned::new(value, Location::UNKNOWN, Location::UNKNOWN)
}

impl TaskSpec {
    /// A task named `name` with every other key at its default (no data yet): the start of a
    /// task built in code, resolved by [`build`](super::build).
    pub fn new(name: &str) -> TaskSpec {
        TaskSpec {
            name: at(name.to_string()),
            description: None,
            frontend: None,
            seed: 0,
            data: DataSpec::default(),
            inputs: Vec::new(),
            target: None,
            split: None,
            params: Vec::new(),
            loss: LossName::default(),
            dialect: DialectName::default(),
            precision: PrecisionName::default(),
            calibrator: CalibratorSpec::default(),
            proposer: ProposerSpec::default(),
            budget: BudgetSpec::default(),
            success: SuccessSpec::default(),
            selection: Selection::default(),
            limits: LimitsSpec::default(),
            isolation: Isolation::default(),
            forbidden_forms: Vec::new(),
            output: None,
            threads: None,
        }
    }

    /// `inputs:` and `target:`.
    pub fn with_variables(mut self, inputs: &[&str], target: &str) -> TaskSpec {
        self.inputs = inputs.iter().map(|s| at(s.to_string())).collect();
        self.target = Some(at(target.to_string()));
        self
    }

    /// A free parameter starting at `init` (`None`: the default start).
    pub fn with_param(mut self, name: &str, init: Option<f64>) -> TaskSpec {
        self.params.push(at(ParamEntry {
            name: name.to_string(),
            kind: KindName::Free,
            init,
            lo: None,
            hi: None,
        }));
        self
    }
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

pub(super) fn default_x() -> String {
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

/// `proposer.models[]`: one model of an ensemble.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// Base URL of its OpenAI-compatible API.
    pub base_url: String,
    /// Model name sent with its requests.
    pub model: String,
    /// Its share of the requests, relative to the others' (default 1).
    #[serde(default)]
    pub weight: Option<f64>,
    /// Environment variable holding its key (default: the proposer's `api_key_env`).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Its key (default: the proposer's `api_key`).
    #[serde(default)]
    pub api_key: Option<String>,
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
    /// LLM: several models (OpenEvolve's ensemble) instead of `base_url` and `model`: each
    /// request draws one by its weight, from the task's seed.
    #[serde(default)]
    pub models: Option<Vec<Spanned<ModelEntry>>>,
    /// LLM: whether the model's programs seed the evolutionary search (default true: the model
    /// proposes, evolution refines, the best programs go back into the prompt); `false` runs the
    /// model's candidates alone.
    #[serde(default)]
    pub evolve: Option<Spanned<bool>>,
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

/// Parses the YAML text of a task without resolving it (no files read besides none).
pub fn parse_spec(path: &Path, text: &str) -> Result<TaskSpec> {
    serde_saphyr::from_str::<TaskSpec>(text).map_err(|e| {
        let loc = e.location();
        let full = e.to_string();
        // The crate's rendering may add a source excerpt after the first line; keep the message.
        let message = full.lines().next().unwrap_or("invalid task").to_string();
        let message = plain_words(&strip_location_prefix(&message));
        named(spec_err(loc, message), path)
    })
}

/// The YAML library's messages in a user's words: its advice to a programmer (`set
/// DuplicateKeyPolicy in Options`) becomes what to change in the file.
pub(super) fn plain_words(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(',').next().unwrap_or(rest).trim();
        return format!("`{key}` is given twice in this mapping; keep one");
    }
    message.to_string()
}

/// serde-saphyr may prefix `line N column M:`; we print our own `file:line:col:` instead.
pub(super) fn strip_location_prefix(message: &str) -> String {
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

/// `selection:` in the task: how the run chooses its answer among the calibrated models.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Selection {
    /// The simplest model on the front that the validation data cannot tell apart from the one
    /// with the lowest error (the rule in `crate::select`).
    SimplestEquivalent,
    /// The model with the lowest validation error (or training loss), as calibrated.
    LowestError,
    /// The `simplest-equivalent` rule on K-fold cross-validated errors over the training and
    /// validation rows, each finalist refitted on the other folds: less of the winner's curse of
    /// a search that scored many candidates on the same validation rows.
    #[default]
    CrossValidated,
}

impl Selection {
    /// The task key's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Selection::SimplestEquivalent => "simplest-equivalent",
            Selection::LowestError => "lowest-error",
            Selection::CrossValidated => "cross-validated",
        }
    }
}
