//! `ndvm-bench search`: this project's co-search side by side with pyoperon on the LLM-SR
//! problems (`tasks/llmsr-<problem>.yaml`, data in `tasks/data/llmsr/`): each problem × seed runs
//! for the same seconds at the same threads with both tools, and the NMSE of the model each selects
//! is scored on the training file and on the in-distribution and out-of-distribution test files.
//! Medians and spreads (min–max over seeds) go to `<out>/search.json` and a Markdown table.
//!
//! pyoperon runs in its own virtual environment (`results/bench/.venv-pyoperon`, created on first
//! use with pip), one `results/bench/pyoperon_search.py` process per run, which prints one JSON
//! line. When the environment cannot be made, the file says why and still holds this project's
//! numbers; `--no-pyoperon` skips that side on purpose (the tests, offline machines).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use indexmap::IndexMap;
use ndvm_core::Heap;
use serde::{Deserialize, Serialize};

use crate::{Machine, loadavg, write_json};
use ndvm_search::engine::{self, RunOptions, Shard};
use ndvm_search::observe::Nothing;
use ndvm_search::summary::{RunSection, Summary};
use ndvm_search::task::{self, Table, Task};
use ndvm_search::{Result, SearchError};

/// The LLM-SR problems the suite runs by default (`tasks/llmsr-<problem>.yaml`).
pub const PROBLEMS: [&str; 2] = ["oscillator1", "bactgrow"];

/// The pyoperon release the suite installs and compares against.
pub const PYOPERON_VERSION: &str = "0.5.0";

/// The test tables every bench task names (the LLM-SR layout).
pub const TEST_TABLES: [&str; 2] = ["test_id", "test_ood"];

/// The tables `bench search` scores: the training file, then [`TEST_TABLES`].
pub const SEARCH_TABLES: [&str; 3] = ["train", "test_id", "test_ood"];

/// Whether and where the pyoperon side runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Pyoperon {
    /// Skipped on purpose (`--no-pyoperon`).
    Skip,
    /// Run with the Python of this virtual environment (created when missing).
    Venv(PathBuf),
}

/// What `bench search` runs.
#[derive(Clone, Debug)]
pub struct SearchOptions {
    /// Problem names; each is `<tasks>/llmsr-<name>.yaml`.
    pub problems: Vec<String>,
    /// Seeds: the task's master seed for this project, `random_state` for pyoperon.
    pub seeds: Vec<u64>,
    /// Wall-clock seconds per run, both tools.
    pub seconds: f64,
    /// Threads per run, both tools.
    pub threads: usize,
    /// Also stop this project's runs after this many calibrations (smoke runs).
    pub calibrations: Option<usize>,
    /// The folder holding the task files.
    pub tasks: PathBuf,
    /// The pyoperon side.
    pub pyoperon: Pyoperon,
    /// The pyoperon script.
    pub script: PathBuf,
}

/// The checkout this binary was built from (the parent of `bench/`).
pub(crate) fn workspace() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// `path` relative to the checkout when it lies inside it (so the JSON names no home folder).
pub(crate) fn shown(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    abs.strip_prefix(workspace())
        .map_or_else(|_| path.to_path_buf(), Path::to_path_buf)
}

impl SearchOptions {
    /// The defaults: both problems, seeds 0, 1, 2, 60 s at 2 threads, the checkout's `tasks/`
    /// and pyoperon in `results/bench/.venv-pyoperon`.
    pub fn standard() -> SearchOptions {
        let root = workspace();
        SearchOptions {
            problems: PROBLEMS.iter().map(|p| p.to_string()).collect(),
            seeds: vec![0, 1, 2],
            seconds: 60.0,
            threads: 2,
            calibrations: None,
            tasks: root.join("tasks"),
            pyoperon: Pyoperon::Venv(root.join("results/bench/.venv-pyoperon")),
            script: root.join("results/bench/pyoperon_search.py"),
        }
    }

    /// The task file of `problem`.
    pub fn task_path(&self, problem: &str) -> PathBuf {
        self.tasks.join(format!("llmsr-{problem}.yaml"))
    }

    /// What each run of both tools is given.
    fn settings(&self) -> RunSettings<'_> {
        RunSettings {
            seconds: self.seconds,
            threads: self.threads,
            calibrations: self.calibrations,
            script: &self.script,
        }
    }
}

/// What one run of either tool is given (`bench search` and `bench suite` alike).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunSettings<'a> {
    /// Wall-clock seconds.
    pub(crate) seconds: f64,
    /// Threads.
    pub(crate) threads: usize,
    /// Also stop this project's run after this many calibrations.
    pub(crate) calibrations: Option<usize>,
    /// The pyoperon script.
    pub(crate) script: &'a Path,
}

/// The two tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tool {
    /// This project's co-search.
    Ndvm,
    /// pyoperon's `SymbolicRegressor`.
    Pyoperon,
}

impl Tool {
    /// The tool and its version, as the tables name it.
    pub fn label(self) -> String {
        match self {
            Tool::Ndvm => format!("ndvm-search {}", env!("CARGO_PKG_VERSION")),
            Tool::Pyoperon => format!("pyoperon {PYOPERON_VERSION}"),
        }
    }
}

/// Whether a tool ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    /// Every run was attempted (a run may still have failed: see its `error`).
    Ran,
    /// Skipped on purpose (`--no-pyoperon`).
    Skipped,
    /// Its environment could not be made (see `note`).
    Unavailable,
}

/// One value per named table, in order: `train` (every row of the training file; for this
/// project its train and validation rows) and then test files by name (`bench search`:
/// [`SEARCH_TABLES`]; `bench suite` adds `truth`). Written as a JSON object in that order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Tables<T>(pub IndexMap<String, T>);

impl<T> Default for Tables<T> {
    fn default() -> Self {
        Tables(IndexMap::new())
    }
}

impl<T> Tables<T> {
    /// One value per name, in the order of `names`.
    pub fn from_names(names: &[&str], mut f: impl FnMut(&str) -> T) -> Tables<T> {
        Tables(names.iter().map(|&n| (n.to_string(), f(n))).collect())
    }

    /// The value of table `name`.
    pub fn get(&self, name: &str) -> Option<&T> {
        self.0.get(name)
    }

    /// The same names with `f` of each value.
    pub fn map<U>(&self, f: impl Fn(&T) -> U) -> Tables<U> {
        Tables(self.0.iter().map(|(k, v)| (k.clone(), f(v))).collect())
    }
}

/// The spread of each named table's NMSE over `runs` (a run without the table counts as not
/// finite).
pub(crate) fn spreads<'a>(
    runs: impl Iterator<Item = &'a SeedRun> + Clone,
    names: &[&str],
) -> Tables<Spread> {
    Tables::from_names(names, |name| {
        let values: Vec<Option<f64>> = runs
            .clone()
            .map(|r| r.nmse.get(name).copied().flatten())
            .collect();
        Spread::of(&values)
    })
}

/// Median and range of one metric over the seeds whose value is finite.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Runs with a finite value.
    pub n: usize,
    /// Runs whose model gave no finite value (a non-finite prediction or no model): left out of
    /// the median and range, and shown beside them.
    pub not_finite: usize,
    /// Their median (mean of the middle two for an even count).
    pub median: Option<f64>,
    /// Their minimum.
    pub min: Option<f64>,
    /// Their maximum.
    pub max: Option<f64>,
}

impl Spread {
    /// The spread of the finite values among `values`.
    pub fn of(values: &[Option<f64>]) -> Spread {
        let mut v: Vec<f64> = values.iter().flatten().copied().collect();
        v.retain(|x| x.is_finite());
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = match n {
            0 => None,
            _ if n % 2 == 1 => Some(v[n / 2]),
            _ => Some(0.5 * (v[n / 2 - 1] + v[n / 2])),
        };
        Spread {
            n,
            not_finite: values.len() - n,
            median,
            min: v.first().copied(),
            max: v.last().copied(),
        }
    }
}

/// One run of one tool on one problem.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeedRun {
    /// The seed.
    pub seed: u64,
    /// NMSE (MSE / variance of the target) of the selected model; absent when not finite.
    pub nmse: Tables<Option<f64>>,
    /// Wall-clock seconds of the search.
    pub wall_s: f64,
    /// The selected model: this project's program text, or pyoperon's infix formula.
    pub model: Option<String>,
    /// The front end that reads `model` (this project).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontend: Option<String>,
    /// The winner's fitted parameters (this project).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<BTreeMap<String, f64>>,
    /// Candidates calibrated (this project).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibrations: Option<u64>,
    /// Model evaluations (pyoperon).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluations: Option<u64>,
    /// Generations (pyoperon).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generations: Option<u64>,
    /// Why the run gave no model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SeedRun {
    /// A run that gave no model: no value for any of `names`.
    pub(crate) fn failed(seed: u64, wall_s: f64, names: &[&str], error: String) -> SeedRun {
        SeedRun {
            seed,
            nmse: Tables::from_names(names, |_| None),
            wall_s,
            model: None,
            frontend: None,
            params: None,
            calibrations: None,
            evaluations: None,
            generations: None,
            error: Some(error),
        }
    }
}

/// One tool on one problem.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The tool.
    pub tool: Tool,
    /// Whether it ran.
    pub status: ToolStatus,
    /// Why it did not run, or the versions it ran with.
    pub note: Option<String>,
    /// One per seed (empty when it did not run).
    pub runs: Vec<SeedRun>,
    /// Median and range over the runs, per table.
    pub nmse: Tables<Spread>,
}

impl ToolResult {
    fn new(tool: Tool, status: ToolStatus, note: Option<String>, runs: Vec<SeedRun>) -> Self {
        let nmse = spreads(runs.iter(), &SEARCH_TABLES);
        ToolResult {
            tool,
            status,
            note,
            runs,
            nmse,
        }
    }
}

/// One problem: its task, table sizes and both tools.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProblemResult {
    /// The problem name.
    pub problem: String,
    /// Its task file.
    pub task: PathBuf,
    /// Rows per table as this project read them.
    pub rows: Tables<usize>,
    /// This project, then pyoperon.
    pub tools: Vec<ToolResult>,
}

/// `search.json`.
#[derive(Serialize)]
pub struct SearchFile<'a> {
    /// `search`.
    pub suite: &'static str,
    /// The command that reproduces it.
    pub command: String,
    /// Seconds per run.
    pub seconds: f64,
    /// Threads per run.
    pub threads: usize,
    /// The seeds.
    pub seeds: &'a [u64],
    /// Calibration cap of this project's runs, when set.
    pub calibrations: Option<usize>,
    /// How NMSE is computed.
    pub metric: &'static str,
    /// The machine.
    pub machine: &'a Machine,
    /// `/proc/loadavg` when the suite finished.
    pub loadavg_at_end: Option<String>,
    /// Per problem.
    pub problems: &'a [ProblemResult],
}

/// The loaded bench task of a problem, checked for its two test tables.
pub(crate) fn load_task(path: &Path, seed: u64) -> Result<Task> {
    let task = task::load_seeded(path, seed)?;
    for name in TEST_TABLES {
        if !task.tests.iter().any(|(n, _)| n == name) {
            return Err(SearchError::BadArgument {
                arg: path.display().to_string(),
                message: format!(
                    "a bench task needs the test tables {} (`data.tests`); `{name}` is missing",
                    TEST_TABLES.join(" and ")
                ),
            });
        }
    }
    Ok(task)
}

/// The rows the task fits and validates on: with no `max_rows` and a split that uses every row,
/// the whole training file.
pub fn train_table(task: &Task) -> Table {
    let mut t = task.train.clone();
    for (col, extra) in t.columns.iter_mut().zip(&task.validation.columns) {
        col.extend_from_slice(extra);
    }
    t.target.extend_from_slice(&task.validation.target);
    t
}

/// Rows of the test table `name` (0 when the task has none of that name).
pub(crate) fn test_rows(task: &Task, name: &str) -> usize {
    task.tests
        .iter()
        .find(|(n, _)| n == name)
        .map_or(0, |(_, t)| t.n_rows())
}

/// NMSE of a program with fixed parameters on a table; `None` when it fails or is not finite.
pub fn nmse_of(
    task: &Task,
    frontend: &str,
    src: &str,
    params: &BTreeMap<String, f64>,
    table: &Table,
) -> Option<f64> {
    let mut heap = Heap::new();
    let program = engine::parse(task, &mut heap, frontend, src).ok()?;
    let pred = engine::predict(task, &mut heap, &program, params, table).ok()?;
    engine::metrics(&pred, &table.target).map(|(_, nmse)| nmse)
}

/// One run of this project's co-search on the task file at `path`, scored on `names` (`train`:
/// the training file, every other name a test table of the task); also returns the size of its
/// answer (`complexity`: atoms and pairs of the program).
pub(crate) fn run_ndvm(
    path: &Path,
    seed: u64,
    settings: &RunSettings<'_>,
    names: &[&str],
) -> Result<(SeedRun, Option<u64>)> {
    let mut task = load_task(path, seed)?;
    task.budget_seconds = Some(settings.seconds);
    if settings.calibrations.is_some() {
        task.budget_calibrations = settings.calibrations;
    }
    let outcome = engine::run(&task, &RunOptions::new(settings.threads), &mut Nothing)?;
    let summary = Summary::new(
        &task,
        &outcome,
        RunSection::new(&outcome, settings.threads, Shard::ALL),
    );
    let Some(best) = summary.best else {
        let failed = SeedRun {
            calibrations: Some(outcome.n_fresh),
            ..SeedRun::failed(
                seed,
                outcome.elapsed,
                names,
                format!(
                    "no candidate scored ({} calibrated, stop: {})",
                    outcome.n_fresh,
                    outcome.stop.as_str()
                ),
            )
        };
        return Ok((failed, None));
    };
    let nmse = Tables::from_names(names, |name| match name {
        "train" => nmse_of(
            &task,
            &best.frontend,
            &best.src,
            &best.params,
            &train_table(&task),
        ),
        _ => {
            let t = best.test.as_ref().and_then(|m| m.get(name));
            t.and_then(|s| s.nmse)
        }
    });
    let size = u64::try_from(best.complexity).ok();
    let run = SeedRun {
        seed,
        nmse,
        wall_s: outcome.elapsed,
        model: Some(best.src),
        frontend: Some(best.frontend),
        params: Some(best.params),
        calibrations: Some(outcome.n_fresh),
        evaluations: None,
        generations: None,
        error: None,
    };
    Ok((run, size))
}

/// The line `pyoperon_search.py` prints.
#[derive(Debug, Deserialize)]
struct PyoperonLine {
    wall_s: f64,
    model: String,
    nmse: BTreeMap<String, Option<f64>>,
    generations: u64,
    evaluations: u64,
    /// Nodes of the model's tree (`reg.model_.Length`); absent from older scripts.
    #[serde(default)]
    length: Option<u64>,
}

/// Where a task's CSV files are (the Python side reads the same files).
pub(crate) struct CsvFiles {
    /// The training file.
    pub(crate) train: PathBuf,
    /// The test files by name.
    pub(crate) tests: Vec<(String, PathBuf)>,
    /// The input columns.
    pub(crate) inputs: Vec<String>,
    /// The target column.
    pub(crate) target: String,
}

/// The CSV files, inputs and target of the task file at `path`.
pub(crate) fn csv_files(path: &Path) -> Result<CsvFiles> {
    let text = ndvm_search::textfile::read(
        path,
        ndvm_search::textfile::MAX_TASK_BYTES,
        "a task is small",
    )?;
    let spec = task::parse_spec(path, &text)?;
    let base = path.parent().unwrap_or(Path::new("."));
    let no_csv = || SearchError::BadArgument {
        arg: path.display().to_string(),
        message: "a bench task reads its table from `data.csv`".to_string(),
    };
    let train = spec.data.csv.as_ref().ok_or_else(no_csv)?;
    Ok(CsvFiles {
        train: base.join(&train.value),
        tests: spec
            .data
            .tests
            .iter()
            .map(|t| (t.name.clone(), base.join(&t.csv.value)))
            .collect(),
        inputs: spec.inputs.iter().map(|i| i.value.clone()).collect(),
        target: spec.target.map(|t| t.value).unwrap_or_default(),
    })
}

/// The tail of a process's stderr, for an error message.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

/// Runs `cmd`; `Err` carries what it printed on failure.
fn run_checked(cmd: &mut Command, what: &str) -> std::result::Result<Vec<u8>, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot start: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!(
            "{what} failed ({}): {}",
            out.status,
            tail(&out.stderr)
        ))
    }
}

/// The venv's Python with pyoperon importable, creating the venv and installing into it when
/// needed; the `Ok` also carries the versions it found.
pub(crate) fn ensure_venv(
    venv: &Path,
    progress: &mut dyn FnMut(&str),
) -> std::result::Result<(PathBuf, String), String> {
    let python = venv.join("bin/python");
    let probe = |python: &Path| {
        run_checked(
            Command::new(python).args([
                "-c",
                "import sys, numpy, sklearn, pyoperon.sklearn; from importlib.metadata import version; \
                 print('python', sys.version.split()[0], 'numpy', numpy.__version__, \
                 'scikit-learn', sklearn.__version__, 'pyoperon', version('pyoperon'))",
            ]),
            "importing pyoperon",
        )
        .map(|out| String::from_utf8_lossy(&out).trim().to_string())
    };
    if python.is_file()
        && let Ok(versions) = probe(&python)
    {
        return Ok((python, versions));
    }
    progress(&format!(
        "search: installing pyoperon {PYOPERON_VERSION} into {} (once)",
        venv.display()
    ));
    if !python.is_file() {
        run_checked(
            Command::new("python3").args(["-m", "venv"]).arg(venv),
            "python3 -m venv",
        )?;
    }
    let pip = venv.join("bin/pip");
    // pyoperon's wheel declares jupyter, matplotlib, seaborn and more, which its regressor never
    // imports; only numpy and scikit-learn are needed (its own lower bounds).
    run_checked(
        Command::new(&pip).args([
            "install",
            "--disable-pip-version-check",
            "numpy>=2.0.2",
            "scikit-learn>=1.6.1",
        ]),
        "pip install numpy scikit-learn",
    )?;
    run_checked(
        Command::new(&pip).args([
            "install",
            "--disable-pip-version-check",
            "--no-deps",
            &format!("pyoperon=={PYOPERON_VERSION}"),
        ]),
        "pip install pyoperon",
    )?;
    let versions = probe(&python)?;
    Ok((python, versions))
}

/// One pyoperon run, scored on `names` (`train` and test tables of `files`); also returns the
/// size of its model (`length`: nodes of its tree) when the script printed it.
pub(crate) fn run_pyoperon(
    python: &Path,
    files: &CsvFiles,
    seed: u64,
    settings: &RunSettings<'_>,
    names: &[&str],
) -> (SeedRun, Option<u64>) {
    let started = std::time::Instant::now();
    let mut cmd = Command::new(python);
    cmd.arg(settings.script)
        .arg("--train")
        .arg(&files.train)
        .args(["--inputs", &files.inputs.join(",")])
        .args(["--target", &files.target])
        .args(["--seconds", &settings.seconds.to_string()])
        .args(["--threads", &settings.threads.to_string()])
        .args(["--seed", &seed.to_string()]);
    for (name, path) in &files.tests {
        cmd.arg("--test")
            .arg(format!("{name}={}", path.to_string_lossy()));
    }
    let elapsed = || started.elapsed().as_secs_f64();
    let stdout = match run_checked(&mut cmd, "pyoperon_search.py") {
        Ok(out) => out,
        Err(e) => return (SeedRun::failed(seed, elapsed(), names, e), None),
    };
    let text = String::from_utf8_lossy(&stdout);
    let last = text.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
    let line: PyoperonLine = match serde_json::from_str(last) {
        Ok(l) => l,
        Err(e) => {
            let why = format!("unreadable output `{last}`: {e}");
            return (SeedRun::failed(seed, elapsed(), names, why), None);
        }
    };
    let run = SeedRun {
        seed,
        nmse: Tables::from_names(names, |name| line.nmse.get(name).copied().flatten()),
        wall_s: line.wall_s,
        model: Some(line.model),
        frontend: None,
        params: None,
        calibrations: None,
        evaluations: Some(line.evaluations),
        generations: Some(line.generations),
        error: None,
    };
    (run, line.length)
}

/// The pyoperon side of one problem.
fn pyoperon_side(
    path: &Path,
    opts: &SearchOptions,
    env: &std::result::Result<(PathBuf, String), String>,
    progress: &mut dyn FnMut(&str),
    problem: &str,
) -> Result<ToolResult> {
    let (python, versions) = match (&opts.pyoperon, env) {
        (Pyoperon::Skip, _) => {
            let note = Some("skipped (--no-pyoperon)".to_string());
            return Ok(ToolResult::new(
                Tool::Pyoperon,
                ToolStatus::Skipped,
                note,
                vec![],
            ));
        }
        (Pyoperon::Venv(_), Err(why)) => {
            return Ok(ToolResult::new(
                Tool::Pyoperon,
                ToolStatus::Unavailable,
                Some(why.clone()),
                vec![],
            ));
        }
        (Pyoperon::Venv(_), Ok(pair)) => pair,
    };
    let files = csv_files(path)?;
    let mut runs = Vec::new();
    for &seed in &opts.seeds {
        progress(&format!("search: {problem}, pyoperon, seed {seed}"));
        let (run, _) = run_pyoperon(python, &files, seed, &opts.settings(), &SEARCH_TABLES);
        runs.push(run);
    }
    Ok(ToolResult::new(
        Tool::Pyoperon,
        ToolStatus::Ran,
        Some(versions.clone()),
        runs,
    ))
}

/// Runs every problem × seed with both tools and returns the results.
pub fn compare(opts: &SearchOptions, progress: &mut dyn FnMut(&str)) -> Result<Vec<ProblemResult>> {
    let paths: Vec<PathBuf> = opts.problems.iter().map(|p| opts.task_path(p)).collect();
    // Every task loads before anything runs: a typo costs no minutes.
    let mut rows = Vec::new();
    for path in &paths {
        let task = load_task(path, opts.seeds.first().copied().unwrap_or(0))?;
        rows.push(Tables::from_names(&SEARCH_TABLES, |name| match name {
            "train" => train_table(&task).n_rows(),
            _ => test_rows(&task, name),
        }));
    }
    let env = match &opts.pyoperon {
        Pyoperon::Skip => Err(String::new()),
        Pyoperon::Venv(venv) => {
            let env = ensure_venv(venv, progress);
            if let Err(why) = &env {
                progress(&format!("search: pyoperon unavailable: {why}"));
            }
            env
        }
    };
    let mut out = Vec::new();
    for ((problem, path), rows) in opts.problems.iter().zip(&paths).zip(rows) {
        let mut runs = Vec::new();
        for &seed in &opts.seeds {
            progress(&format!("search: {problem}, ndvm-search, seed {seed}"));
            let (run, _) = run_ndvm(path, seed, &opts.settings(), &SEARCH_TABLES)?;
            runs.push(run);
        }
        let ours = ToolResult::new(Tool::Ndvm, ToolStatus::Ran, None, runs);
        let theirs = pyoperon_side(path, opts, &env, progress, problem)?;
        out.push(ProblemResult {
            problem: problem.clone(),
            task: shown(path),
            rows,
            tools: vec![ours, theirs],
        });
    }
    Ok(out)
}

/// The command line that reproduces a run with these options.
pub fn command(opts: &SearchOptions) -> String {
    let list = |v: Vec<String>| v.join(",");
    let mut s = format!(
        "ndvm-bench search --seconds {} --threads {} --seeds {} --problems {}",
        opts.seconds,
        opts.threads,
        list(opts.seeds.iter().map(u64::to_string).collect()),
        list(opts.problems.clone()),
    );
    if let Some(c) = opts.calibrations {
        s += &format!(" --calibrations {c}");
    }
    if opts.pyoperon == Pyoperon::Skip {
        s += " --no-pyoperon";
    }
    s
}

/// Runs the suite and writes `<out>/search.json`; returns its path and the Markdown table.
pub fn run(
    opts: &SearchOptions,
    out_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<(PathBuf, String)> {
    let machine = Machine::probe();
    let problems = compare(opts, progress)?;
    std::fs::create_dir_all(out_dir).map_err(|source| SearchError::Write { source })?;
    let file = SearchFile {
        suite: "search",
        command: command(opts),
        seconds: opts.seconds,
        threads: opts.threads,
        seeds: &opts.seeds,
        calibrations: opts.calibrations,
        metric: "NMSE = MSE / variance of the target (population), of the model each tool selects \
                 (this project: best validation R²; pyoperon: the model it returns, best training R²)",
        machine: &machine,
        loadavg_at_end: loadavg(),
        problems: &problems,
    };
    let path = write_json(out_dir, "search", &file)?;
    Ok((path, table(opts, &problems)))
}

/// A spread as the tables show it: `median (min–max)`, and how many runs had no finite value.
pub(crate) fn cell(s: &Spread) -> String {
    let spread = match (s.median, s.min, s.max) {
        (Some(m), Some(lo), Some(hi)) => format!("{m:.2e} ({lo:.2e}–{hi:.2e})"),
        _ => "–".to_string(),
    };
    match s.not_finite {
        0 => spread,
        k => format!("{spread}, {k} not finite"),
    }
}

/// The Markdown tables: medians and ranges per problem and tool, then every run.
pub fn table(opts: &SearchOptions, problems: &[ProblemResult]) -> String {
    let seeds: Vec<String> = opts.seeds.iter().map(u64::to_string).collect();
    let mut s = format!(
        "search: NMSE of the selected model, {} s per run at {} thread(s), seeds {}: median \
         (min–max) over the runs with a finite value (those without one are counted beside it)\n\n\
         | problem | tool | runs | train | test_id (in distribution) | test_ood (out of distribution) |\n\
         |---|---|--:|--:|--:|--:|\n",
        opts.seconds,
        opts.threads,
        seeds.join(", ")
    );
    for p in problems {
        for t in &p.tools {
            let runs = match t.status {
                ToolStatus::Ran => t.runs.len().to_string(),
                ToolStatus::Skipped => "skipped".to_string(),
                ToolStatus::Unavailable => "unavailable".to_string(),
            };
            let c = t.nmse.map(cell);
            let at = |name: &str| c.get(name).map_or("–", String::as_str);
            s += &format!(
                "| {} | {} | {runs} | {} | {} | {} |\n",
                p.problem,
                t.tool.label(),
                at("train"),
                at("test_id"),
                at("test_ood")
            );
        }
    }
    s += "\n| problem | tool | seed | train | test_id | test_ood | wall (s) | calibrations / evaluations |\n\
          |---|---|--:|--:|--:|--:|--:|--:|\n";
    for p in problems {
        for t in &p.tools {
            for r in &t.runs {
                let work = r.calibrations.or(r.evaluations);
                let opt = |name: &str| {
                    let x = r.nmse.get(name).copied().flatten();
                    x.map_or("–".to_string(), |v| format!("{v:.3e}"))
                };
                s += &format!(
                    "| {} | {} | {} | {} | {} | {} | {:.1} | {} |\n",
                    p.problem,
                    t.tool.label(),
                    r.seed,
                    opt("train"),
                    opt("test_id"),
                    opt("test_ood"),
                    r.wall_s,
                    work.map_or("–".to_string(), |w| w.to_string()),
                );
            }
        }
    }
    for p in problems {
        for t in p
            .tools
            .iter()
            .filter(|t| t.status == ToolStatus::Unavailable)
        {
            s += &format!(
                "\n{} on {}: unavailable: {}\n",
                t.tool.label(),
                p.problem,
                t.note.as_deref().unwrap_or("")
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_take_finite_values_only() {
        let s = Spread::of(&[Some(3.0), None, Some(1.0), Some(f64::NAN), Some(2.0)]);
        assert_eq!(
            s,
            Spread {
                n: 3,
                not_finite: 2,
                median: Some(2.0),
                min: Some(1.0),
                max: Some(3.0)
            }
        );
        assert_eq!(Spread::of(&[Some(4.0), Some(1.0)]).median, Some(2.5));
        assert_eq!(
            Spread::of(&[None]),
            Spread {
                not_finite: 1,
                ..Spread::default()
            }
        );
        assert_eq!(
            cell(&Spread::of(&[Some(0.5), None])),
            "5.00e-1 (5.00e-1–5.00e-1), 1 not finite"
        );
        assert_eq!(cell(&Spread::of(&[None, None])), "–, 2 not finite");
    }

    #[test]
    fn the_command_names_every_option() {
        let mut o = SearchOptions::standard();
        assert_eq!(
            command(&o),
            "ndvm-bench search --seconds 60 --threads 2 --seeds 0,1,2 --problems oscillator1,bactgrow"
        );
        o.pyoperon = Pyoperon::Skip;
        o.calibrations = Some(4);
        o.seconds = 2.5;
        assert_eq!(
            command(&o),
            "ndvm-bench search --seconds 2.5 --threads 2 --seeds 0,1,2 --problems oscillator1,bactgrow --calibrations 4 --no-pyoperon"
        );
    }
}
