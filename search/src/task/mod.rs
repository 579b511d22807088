//! The task layer: the YAML schema of a co-search task (`tasks/*.yaml`), read with serde-saphyr so that
//! unknown keys and bad values are errors with `file:line:column`, and its conversion into a
//! validated [`Task`]: data tables (generated from the seed or read from CSV), split, parameters,
//! calibrator settings, proposer, budget and success threshold.
//!
//! Stages: YAML text → [`TaskSpec`] (`spec.rs`, spans kept for errors) → a validated [`Task`],
//! resolved section by section in the order errors are reported: name, inputs and parameters
//! (`params.rs`), data (`data.rs`), calibrator (`calibrator.rs`), proposer (`proposer.rs`, with
//! `llm.rs` for an endpoint), then the budget, limits and success here.

mod calibrator;
mod data;
mod defaults;
mod llm;
mod params;
mod proposer;
mod spec;

pub use calibrator::*;
pub use data::*;
pub use defaults::ChosenDefault;
pub(crate) use defaults::spread;
pub use llm::*;
pub use proposer::*;
pub use spec::*;

pub use crate::events::MetricName;

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
use crate::{matrix_csv, textfile, validate};

/// Longest wall-clock budget, in seconds (one year): longer is surely a typo, and `Duration`
/// cannot hold `1e300` or `.inf`.
pub const MAX_BUDGET_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// Most candidates per round (`batch`: the engine keeps up to `threads + batch` queued, and the
/// proposer's feedback lags one batch).
pub const MAX_BATCH: usize = 10_000;

/// Most calibration threads a task may ask for.
pub const MAX_THREADS: usize = 1024;

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
    /// Proposer: each kind with only its own settings (`kind: llm` and an LLM-seeded evolve hold
    /// the endpoint, see [`Task::llm`]).
    pub proposer: ProposerConfig,
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
    /// The settings chosen from the data (printed once, recorded in `summary.json`).
    pub defaults: Vec<ChosenDefault>,
}

/// An error of the task at `loc` (none: the task as a whole). The task's file is named once,
/// where the error leaves the loader ([`named`]).
fn spec_err(loc: Option<Location>, message: impl Into<String>) -> SearchError {
    let (line, column) = loc.map(|l| (l.line(), l.column())).unwrap_or((0, 0));
    SearchError::Task {
        path: PathBuf::new(),
        line,
        column,
        message: message.into(),
    }
}

/// `e` with the task's file (or a built task's name) in a task error that has none yet.
fn named(e: SearchError, path: &Path) -> SearchError {
    match e {
        SearchError::Task {
            path: p,
            line,
            column,
            message,
        } if p.as_os_str().is_empty() => SearchError::Task {
            path: path.to_path_buf(),
            line,
            column,
            message,
        },
        e => e,
    }
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
/// `calibrator.seed` written in the file still wins). `ndvm-bench search` runs one task
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
    .map_err(|e| named(e, path))
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

/// A task built in code, resolved exactly as a task file with the same keys is (paths relative
/// to the working directory); errors name the key. Such a task has no file, so it cannot be
/// resumed from its run folder and runs its calibrations on threads (`isolation: process` is
/// refused: the workers load the task file).
pub fn build(spec: TaskSpec) -> Result<Task> {
    build_with(spec, Arc::new(Registry::default()))
}

/// [`build`] with your own front ends.
pub fn build_with(spec: TaskSpec, frontends: Arc<Registry>) -> Result<Task> {
    let path = PathBuf::from(format!("task `{}` (built in code)", spec.name.value));
    if spec.isolation == Isolation::Process {
        return Err(named(
            spec_err(
                None,
                "`isolation: process` needs a task file the worker processes can load; a task built \
             in code runs its calibrations on threads",
            ),
            &path,
        ));
    }
    let text = format!(
        "# task `{}` built in code (ndvm_search::task::build): there is no task file\n",
        spec.name.value
    );
    resolve(&path, text, spec, frontends, Purpose::Run).map_err(|e| named(e, &path))
}

fn load_for(path: &Path, frontends: Arc<Registry>, purpose: Purpose) -> Result<Task> {
    let text = textfile::read(
        path,
        textfile::MAX_TASK_BYTES,
        "a task is a few KiB of YAML (put data in CSV files)",
    )?;
    let spec = parse_spec(path, &text)?;
    resolve(path, text, spec, frontends, purpose).map_err(|e| named(e, path))
}

/// The task's front end: `frontend:`, else the one for the cache's file name, else the
/// registry's fallback.
fn resolve_frontend(spec: &TaskSpec, frontends: &Registry) -> Result<String> {
    let cache = spec.proposer.cache.as_ref().map(|c| Path::new(&c.value));
    let named = spec.frontend.as_ref();
    frontends
        .choose(named.map(|n| n.value.as_str()), cache)
        .map(|f| f.name().to_string())
        .map_err(|m| spec_err(named.map(|n| n.referenced), m))
}

fn resolve(
    path: &Path,
    text: String,
    spec: TaskSpec,
    frontends: Arc<Registry>,
    purpose: Purpose,
) -> Result<Task> {
    let frontend = resolve_frontend(&spec, &frontends)?;
    let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let err = |loc: Location, msg: String| spec_err(Some(loc), msg);
    let name = params::resolve_name(&spec)?;
    let program_loss = spec.loss == LossName::Program;
    let inputs = params::resolve_inputs(&spec)?;
    let params = params::resolve_params(&spec, &inputs)?;
    let cx = data::DataCx {
        base: &base,
        spec: &spec,
        inputs: &inputs,
    };
    let data::Data {
        train,
        validation,
        tests,
        screen,
        shared,
        generated,
    } = data::resolve_data(&cx, program_loss, &frontends, &frontend)?;
    let mut calibrate = calibrator::resolve_calibrator(&spec)?;
    let proposer::Proposed { proposer, batch } =
        proposer::resolve_proposer(&base, &spec, &inputs, &params, purpose)?;
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
    let limits = resolve_limits(&spec.limits, &mut calibrate)?;
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
        return Err(spec_err(
            None,
            "`success.metric: r2` needs a target; use `loss`",
        ));
    }
    let default_shapes = match (&proposer, &spec.proposer.factors) {
        (ProposerConfig::Evolve { tree, .. }, None) => tree.factors.as_deref(),
        _ => None,
    };
    let defaults = defaults::chosen(screen.as_ref(), &train, default_shapes, &inputs);
    let warnings = check_scores(&spec, &train, &validation, &tests, metric)?;
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
        defaults,
    })
}

impl Task {
    /// The line a run prints when it screens candidates on a row sample, `None` when it does not.
    pub fn screen_note(&self) -> Option<String> {
        let s = self.screen.as_ref()?;
        Some(defaults::screen_line(s, &self.train))
    }

    /// The lines a run prints once at its start: the defaults chosen from the data (see
    /// [`ChosenDefault`]), then a screen the task asked for itself.
    pub fn start_notes(&self) -> Vec<String> {
        let mut out: Vec<String> = self.defaults.iter().map(|d| d.note.clone()).collect();
        if let Some(s) = self.screen.as_ref().filter(|s| !s.automatic) {
            out.push(defaults::screen_line(s, &self.train));
        }
        out
    }

    /// The llm endpoint the task asks (`kind: llm`, or an LLM-seeded evolve); `None` otherwise,
    /// and then nothing contacts the network.
    pub fn llm(&self) -> Option<&LlmConfig> {
        self.proposer.llm()
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
            soft_choice_config(s.calibrator.soft_choice.as_ref().unwrap())
                .map_err(|e| named(e, Path::new("t.yaml")))
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
        // An evolving search polishes by LM by default (`CalibrateConfig::for_search`); the key
        // written wins.
        let t = load_with("{optimizer: lm}").unwrap();
        assert_eq!(
            (t.calibrate.optimizer, t.calibrate.polish),
            (Optimizer::Lm, Polish::Lm)
        );
        let t = load_with("{polish_method: lbfgs, starts: 9}").unwrap();
        assert_eq!(
            (
                t.calibrate.polish,
                t.calibrate.n_starts,
                t.calibrate.max_iters
            ),
            (Polish::Lbfgs, 9, 60)
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
        let chosen = |extra: &str| {
            resolve_frontend(&spec(extra), &registry).map_err(|e| named(e, Path::new("t.yaml")))
        };
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
        let msg = llm_feature(loc, false)
            .map_err(|e| named(e, Path::new("t.yaml")))
            .unwrap_err()
            .to_string();
        assert!(msg.starts_with("t.yaml:7:9: `kind: llm` needs"), "{msg}");
        assert!(
            msg.contains("cargo install --path search --features llm"),
            "{msg}"
        );
        assert!(llm_feature(loc, true).is_ok());
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
        assert_eq!(operators, EVOLVE_OPERATORS);
        assert_eq!((population, islands, seeds), (128, 4, Seeds::None));
        assert_eq!(tree.binary, ["+", "-", "*", "/", "pow"]);
        assert_eq!((tree.max_terms, tree.max_depth, tree.max_size), (4, 3, 40));
        assert_eq!(tree.factors, Some(EVOLVE_FACTORS.to_vec()));
        // Chosen from the data: recorded with the inputs' centres and spreads.
        assert_eq!(t.defaults.len(), 1, "{:?}", t.defaults);
        let chosen = &t.defaults[0];
        assert_eq!(chosen.key, "proposer.factors");
        assert_eq!(
            chosen.value,
            "[saturating, bell, switch, power, cusp, bump]"
        );
        // The six training rows of x = 0, 1/7, 2/7, 3/7, 6/7, 1: mean 0.452, population sd 0.363.
        assert!(chosen.note.contains("(x 0.452 ± 0.363)"), "{}", chosen.note);
        // `[]`: factors with fresh constants, and nothing chosen.
        let t = load_text("{factors: []}").unwrap();
        assert!(matches!(
            t.proposer,
            ProposerConfig::Evolve { ref tree, .. } if tree.factors.is_none()
        ));
        assert!(t.defaults.is_empty(), "{:?}", t.defaults);
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
            ProposerConfig::Evolve { islands: 2, seeds: Seeds::Cache(_), ref tree, .. } if tree.binary == ["/"]
        ));
        for (proposer, message) in [
            (
                "{population: 0}",
                "t.yaml:7:24: `population` must be at least 1",
            ),
            (
                "{islands: 129}",
                "t.yaml:7:21: `islands` must be at least 1 and at most 128",
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
        for op in DEFAULT_OPERATORS.iter().chain(EVOLVE_OPERATORS) {
            assert!(unary.contains(op), "{op}");
        }
        let text = "name: t\ndata:\n  generate: {formula: x, from: 0, to: 1, n: 8}\ninputs: [x]\n\
                    target: y\nproposer:\n  kind: grammar\n  operators: [exp, sigmoid, frob]\n";
        let spec = parse_spec(Path::new("t.yaml"), text).unwrap();
        let ops = spec.proposer.operators.as_deref().unwrap_or_default();
        let known = |o: &str| ndvm_core::unary_operators().any(|k| k == o);
        let msg = check_operators(ops, "grammar operator", known)
            .map_err(|e| named(e, Path::new("t.yaml")))
            .unwrap_err()
            .to_string();
        assert!(msg.starts_with("t.yaml:8:"), "{msg}");
        assert!(msg.contains("unknown grammar operator `frob`"), "{msg}");
        assert!(msg.contains("sigmoid"), "{msg}");
        assert!(check_operators(&ops[..2], "grammar operator", known).is_ok());
    }
}
