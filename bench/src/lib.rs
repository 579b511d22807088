//! ndvm-bench: the benchmark suites behind the `ndvm-bench` binary (`ndvm-search bench` forwards to
//! it), kept out of the `ndvm_search` library so that the library a user links carries none of
//! them. Measured speed of the runtime, side by side with a compiled ceiling, written to
//! `<out>/<suite>.json` (raw samples, medians, ratios, machine) and returned as tables. The
//! binary's default `<out>` is a fresh `results/bench-<timestamp>/`; the committed reference run is
//! written with `--out results/bench`.
//!
//! Suites: `kalman` ([`kalman::sweep`]: per-lane time at B = 1 … 1024 against [`ceiling`] and the
//! lane-batched [`ceiling_lanes`]) and
//! `multicore` ([`multicore::scaling`]: candidates per second at 1 … all cores, identical results).
//! Speed is measured here and never asserted in tests.
//!
//! `calibration` ([`calibration::throughput`]): 50-step Adam calibrations per second on the 247
//! replayed symbolic-regression candidates and the `tasks/recurrence.yaml` loop/recur candidates
//! (44 data lanes; K = 1, 8, 32 multistarts). `cosearch`
//! ([`cosearch::replay`]): the whole engine replaying that stream at 1 … all threads. `firsteval`
//! ([`firsteval::run`]): reader + decoder + first walk of each new program of the fuzz corpus.
//!
//! `recovery` ([`recovery`], not part of `all`): the predecessor's structure-recovery experiment
//! (f(x) = α·outer(x, inner(x)), two 8-way `soft-choice`s, 12 tasks × 20 seeded restarts); recovery
//! rate, |α − α*| and seconds per restart (`--quick`: 2 tasks × 4 restarts).
//!
//! `search` ([`search::run`], not part of `all`): the co-search side by side with pyoperon on the
//! LLM-SR problems, NMSE of the selected models (minutes; pyoperon in its own virtual environment).
//!
//! `suite` ([`suite::run`], not part of `all`): the broad benchmark with known ground truth, the
//! co-search beside pyoperon on 24 generated problems (the selection suite's seven, Feynman,
//! Nguyen, Strogatz) at two noise levels and the two LLM-SR problems: NMSE in and out of range
//! and on noise-free truth, recovery, model size, who wins each problem (hours at the defaults).

pub mod calibration;
pub mod ceiling;
pub mod ceiling_cpp;
pub mod ceiling_lanes;
pub mod cosearch;
pub mod firsteval;
pub mod journal;
pub mod kalman;
pub mod multicore;
pub mod recovery;
pub mod search;
pub mod suite;
pub mod timing;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use ndvm_search::{Result, SearchError};
use timing::Budget;

/// Which suites to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// The Kalman per-lane sweep against the compiled ceiling.
    Kalman,
    /// Multicore scaling.
    Multicore,
    /// Calibration throughput on the replayed candidate stream.
    Calibration,
    /// The whole co-search engine replaying the candidate stream at 1 … all threads.
    Cosearch,
    /// First evaluations of new programs (reader, decoder, first walk) over the fuzz corpus.
    FirstEval,
    /// Every suite above.
    All,
    /// The co-search beside pyoperon on the LLM-SR problems (not part of `all`).
    Search,
    /// The structure-recovery experiment with `soft-choice` (not part of `all`).
    Recovery,
    /// The broad ground-truth suite beside pyoperon (not part of `all`).
    Suite,
}

impl Selection {
    /// Parses a suite name.
    pub fn parse(s: &str) -> Result<Selection> {
        match s {
            "kalman" => Ok(Selection::Kalman),
            "multicore" => Ok(Selection::Multicore),
            "calibration" => Ok(Selection::Calibration),
            "cosearch" => Ok(Selection::Cosearch),
            "firsteval" => Ok(Selection::FirstEval),
            "all" => Ok(Selection::All),
            "search" => Ok(Selection::Search),
            "recovery" => Ok(Selection::Recovery),
            "suite" => Ok(Selection::Suite),
            _ => Err(SearchError::BadArgument {
                arg: s.to_string(),
                message:
                    "expected one of kalman, multicore, calibration, cosearch, firsteval, all, \
                          search (beside pyoperon, not part of all), suite (beside pyoperon, not \
                          part of all) or recovery (not part of all)"
                        .to_string(),
            }),
        }
    }
}

/// What to run and where to write it.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// The suites.
    pub selection: Selection,
    /// A few-second smoke run instead of the full measurement.
    pub quick: bool,
    /// Folder receiving `<suite>.json` (created if missing).
    pub out_dir: PathBuf,
    /// The seed-data folder (`oracle_refs.json` and `cosearch_candidates_valid.jsonl` live there).
    pub seed_data: PathBuf,
    /// What the `search` suite runs.
    pub search: search::SearchOptions,
    /// What the `suite` suite runs.
    pub suite: suite::SuiteOptions,
}

/// The seed data vendored in the checkout this binary was built from: `<workspace>/testdata/seed-data`.
pub fn default_seed_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/seed-data")
}

/// Checks that `dir` holds the seed-data files the bench reads; the error names the `--data` flag.
pub fn check_seed_data(dir: &Path) -> Result<()> {
    for name in [
        "oracle_refs.json",
        "cosearch_candidates_valid.jsonl",
        firsteval::CORPUS,
    ] {
        if !dir.join(name).is_file() {
            return Err(SearchError::BadArgument {
                arg: format!("--data {}", dir.display()),
                message: format!(
                    "no {name} in this folder; pass --data DIR, the seed-data folder (testdata/seed-data in a checkout)"
                ),
            });
        }
    }
    Ok(())
}

/// One finished suite.
#[derive(Clone, Debug)]
pub struct SuiteReport {
    /// The suite name (`kalman`, `multicore`).
    pub name: &'static str,
    /// Where its JSON was written.
    pub path: PathBuf,
    /// Its summary table.
    pub table: String,
}

/// The machine and build a run happened on.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// Logical CPUs available to this process.
    pub nproc: usize,
    /// `model name` from `/proc/cpuinfo`, when readable.
    pub cpu_model: Option<String>,
    /// `/proc/loadavg` when the run started (other load skews the numbers).
    pub loadavg_at_start: Option<String>,
    /// Operating system and architecture.
    pub os: String,
    /// `release` or `debug` (debug numbers are meaningless).
    pub profile: &'static str,
    /// `rustc --version`, when a compiler is on the path.
    pub rustc: Option<String>,
    /// `git rev-parse HEAD`, when inside a checkout.
    pub git_commit: Option<String>,
    /// Whether the checkout had uncommitted changes.
    pub git_dirty: Option<bool>,
    /// Start of the run, seconds since the Unix epoch.
    pub unix_time: u64,
    /// Start of the run, UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub date_utc: String,
}

/// `/proc/loadavg`, trimmed, when readable.
fn loadavg() -> Option<String> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.trim().to_string())
}

fn command_output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl Machine {
    /// Describes this machine now; every probe that fails is left empty.
    pub fn probe() -> Machine {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        });
        let now = jiff::Timestamp::now();
        Machine {
            nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model,
            loadavg_at_start: loadavg(),
            os: format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
            profile: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
            rustc: command_output("rustc", &["--version"]),
            git_commit: command_output("git", &["rev-parse", "HEAD"]),
            git_dirty: command_output("git", &["status", "--porcelain", "--untracked-files=no"])
                .map(|s| !s.is_empty()),
            unix_time: u64::try_from(now.as_second()).unwrap_or(0),
            date_utc: utc_date(now),
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_date(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The JSON file of the `kalman` suite.
#[derive(Serialize)]
struct KalmanFile<'a> {
    suite: &'static str,
    command: String,
    quick: bool,
    program: &'static str,
    dialect: &'static str,
    ceiling: &'static str,
    /// The lane-batched ceiling: layout, block widths and the SIMD the build's target enables.
    ceiling_lanes: String,
    /// The same ceiling compiled at run time for the widest vectors the processor has
    /// (`lanes_wide_*` in the rows).
    ceiling_lanes_wide: String,
    /// The compiled C++ ceiling (`cpp_*` in the rows): compiler, flags and vector width, or why
    /// it was not built.
    ceiling_cpp: String,
    machine: &'a Machine,
    /// `/proc/loadavg` when the suite finished (with `machine.loadavg_at_start`: was it quiet?).
    loadavg_at_end: Option<String>,
    budget: &'a Budget,
    rows: &'a [kalman::SweepRow],
}

/// The JSON file of the `calibration` suite.
#[derive(Serialize)]
struct CalibrationFile<'a> {
    suite: &'static str,
    command: String,
    quick: bool,
    streams: &'static str,
    machine: &'a Machine,
    /// `/proc/loadavg` when the suite finished (with `machine.loadavg_at_start`: was it quiet?).
    loadavg_at_end: Option<String>,
    rows: &'a [calibration::ThroughputRow],
}

/// The JSON file of the `cosearch` suite.
#[derive(Serialize)]
struct CosearchFile<'a> {
    suite: &'static str,
    command: String,
    quick: bool,
    task: String,
    machine: &'a Machine,
    /// `/proc/loadavg` when the suite finished (with `machine.loadavg_at_start`: was it quiet?).
    loadavg_at_end: Option<String>,
    rows: &'a [cosearch::CosearchRow],
}

/// The JSON file of the `firsteval` suite.
#[derive(Serialize)]
struct FirstEvalFile<'a> {
    suite: &'static str,
    command: String,
    quick: bool,
    corpus: &'static str,
    machine: &'a Machine,
    /// `/proc/loadavg` when the suite finished (with `machine.loadavg_at_start`: was it quiet?).
    loadavg_at_end: Option<String>,
    budget_per_program: &'a Budget,
    report: &'a firsteval::FirstEvalReport,
}

/// The JSON file of the `multicore` suite.
#[derive(Serialize)]
struct MulticoreFile<'a> {
    suite: &'static str,
    command: String,
    quick: bool,
    program: &'static str,
    dialect: &'static str,
    machine: &'a Machine,
    /// `/proc/loadavg` when the suite finished (with `machine.loadavg_at_start`: was it quiet?).
    loadavg_at_end: Option<String>,
    budget: &'a Budget,
    scaling: &'a multicore::Scaling,
}

fn write_json(dir: &Path, name: &str, value: &impl Serialize) -> Result<PathBuf> {
    let path = dir.join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(value).map_err(|e| SearchError::RunFolder {
        path: path.clone(),
        message: e.to_string(),
    })? + "\n";
    ndvm_search::textfile::write_atomic(&path, text.as_bytes())?;
    Ok(path)
}

/// Runs the selected suites, writes their JSON files and returns their tables. `progress` receives
/// one line as each case starts.
pub fn run(cfg: &BenchConfig, progress: &mut dyn FnMut(&str)) -> Result<Vec<SuiteReport>> {
    match cfg.selection {
        Selection::Search => {
            let (path, table) = search::run(&cfg.search, &cfg.out_dir, progress)?;
            Ok(vec![SuiteReport {
                name: "search",
                path,
                table,
            }])
        }
        Selection::Suite => {
            let (path, table) = suite::run(&cfg.suite, &cfg.out_dir, progress)?;
            Ok(vec![SuiteReport {
                name: "suite",
                path,
                table,
            }])
        }
        Selection::Recovery => recovery_suite(cfg, progress),
        _ => runtime_suites(cfg, progress),
    }
}

/// What every suite of `all` shares: the configuration, the machine, the timing budget and the
/// `--quick` flag as the command line spells it.
struct Run<'a> {
    cfg: &'a BenchConfig,
    machine: Machine,
    budget: Budget,
    quick_flag: &'static str,
}

/// The suites of `all` the selection names, in order, after checking the seed data (nothing is
/// measured or written when it is missing).
fn runtime_suites(cfg: &BenchConfig, progress: &mut dyn FnMut(&str)) -> Result<Vec<SuiteReport>> {
    check_seed_data(&cfg.seed_data)?;
    let case = kalman::KalmanCase::load(&cfg.seed_data)?;
    std::fs::create_dir_all(&cfg.out_dir).map_err(|source| SearchError::Write { source })?;
    let run = Run {
        cfg,
        machine: Machine::probe(),
        budget: if cfg.quick {
            Budget::quick()
        } else {
            Budget::full()
        },
        quick_flag: if cfg.quick { " --quick" } else { "" },
    };
    let wants = |suite: Selection| cfg.selection == suite || cfg.selection == Selection::All;
    let mut reports = Vec::new();
    if wants(Selection::Kalman) {
        reports.push(kalman_suite(&run, &case, progress)?);
    }
    if wants(Selection::Multicore) {
        reports.push(multicore_suite(&run, &case, progress)?);
    }
    if wants(Selection::Calibration) {
        reports.push(calibration_suite(&run, progress)?);
    }
    if wants(Selection::Cosearch) {
        reports.push(cosearch_suite(&run, progress)?);
    }
    if wants(Selection::FirstEval) {
        reports.push(firsteval_suite(&run, progress)?);
    }
    Ok(reports)
}

/// `bench kalman`: the per-lane sweep against the scalar and lane-batched ceilings.
fn kalman_suite(
    run: &Run<'_>,
    case: &kalman::KalmanCase,
    progress: &mut dyn FnMut(&str),
) -> Result<SuiteReport> {
    let rows = kalman::sweep(case, &run.budget, progress)?;
    let file = KalmanFile {
        suite: "kalman",
        command: format!("ndvm-bench kalman{}", run.quick_flag),
        quick: run.cfg.quick,
        program: kalman::PROGRAM_NAME,
        dialect: "reference",
        ceiling: "plain Rust f64, 2×2 closed forms; gradient by forward-mode dual numbers (q, r)",
        ceiling_lanes: format!(
            "the same filter on structure-of-arrays packs of lanes (f64: {} lanes per block, \
             f32: {}), loops over lanes vectorised for the target ({})",
            ceiling_lanes::LANES_F64,
            ceiling_lanes::LANES_F32,
            ceiling_lanes::simd_target()
        ),
        ceiling_lanes_wide: format!(
            "the f64 lane-batched ceiling compiled at run time for the widest vectors this \
             processor has ({}; ndvm_core::widest), the same results bit for bit",
            ndvm_core::widest::widest_vectors()
        ),
        ceiling_cpp: match ceiling_cpp::built_with() {
            Ok(with) => format!(
                "bench/cpp/kalman_lanes.cpp, the lane ceiling's structure of arrays and math in \
                 C++ ({with}, {}-bit vectors); exact: -ffp-contract=off, the Rust ceiling's bits",
                ceiling_cpp::vector_bits().unwrap_or(0)
            ),
            Err(why) => format!("not built: {why}"),
        },
        machine: &run.machine,
        loadavg_at_end: loadavg(),
        budget: &run.budget,
        rows: &rows,
    };
    Ok(SuiteReport {
        name: "kalman",
        path: write_json(&run.cfg.out_dir, "kalman", &file)?,
        table: kalman::table(&rows),
    })
}

/// `bench multicore`: candidates per second at 1 … all cores.
fn multicore_suite(
    run: &Run<'_>,
    case: &kalman::KalmanCase,
    progress: &mut dyn FnMut(&str),
) -> Result<SuiteReport> {
    let n_candidates = if run.cfg.quick { 16 } else { 512 };
    let scaling = multicore::scaling(case, n_candidates, run.machine.nproc, &run.budget, progress)?;
    let file = MulticoreFile {
        suite: "multicore",
        command: format!("ndvm-bench multicore{}", run.quick_flag),
        quick: run.cfg.quick,
        program: kalman::PROGRAM_NAME,
        dialect: "reference",
        machine: &run.machine,
        loadavg_at_end: loadavg(),
        budget: &run.budget,
        scaling: &scaling,
    };
    Ok(SuiteReport {
        name: "multicore",
        path: write_json(&run.cfg.out_dir, "multicore", &file)?,
        table: multicore::table(&scaling),
    })
}

/// `bench calibration`: Adam calibrations per second on the two replayed streams.
fn calibration_suite(run: &Run<'_>, progress: &mut dyn FnMut(&str)) -> Result<SuiteReport> {
    let (limit, starts, passes): (usize, &[usize], usize) = if run.cfg.quick {
        (12, &[1, 8], 1)
    } else {
        (usize::MAX, &[1, 8, 32], 3)
    };
    let rows = calibration::throughput(&run.cfg.seed_data, limit, starts, passes, progress)?;
    let file = CalibrationFile {
        suite: "calibration",
        command: format!("ndvm-bench calibration{}", run.quick_flag),
        quick: run.cfg.quick,
        streams: "symreg: cosearch_candidates_valid.jsonl; recurrence: tasks/recurrence.yaml's cache (50 Adam steps, 44 train points)",
        machine: &run.machine,
        loadavg_at_end: loadavg(),
        rows: &rows,
    };
    Ok(SuiteReport {
        name: "calibration",
        path: write_json(&run.cfg.out_dir, "calibration", &file)?,
        table: calibration::table(&rows),
    })
}

/// `bench cosearch`: the whole engine replaying the candidate stream at 1 … all threads.
fn cosearch_suite(run: &Run<'_>, progress: &mut dyn FnMut(&str)) -> Result<SuiteReport> {
    let threads: Vec<usize> = (1..=run.machine.nproc.max(1)).collect();
    let passes = if run.cfg.quick { 1 } else { cosearch::PASSES };
    let rows = cosearch::replay(&threads, run.cfg.quick.then_some(16), passes, progress)?;
    let file = CosearchFile {
        suite: "cosearch",
        command: format!("ndvm-bench cosearch{}", run.quick_flag),
        quick: run.cfg.quick,
        task: cosearch::replay_task().display().to_string(),
        machine: &run.machine,
        loadavg_at_end: loadavg(),
        rows: &rows,
    };
    Ok(SuiteReport {
        name: "cosearch",
        path: write_json(&run.cfg.out_dir, "cosearch", &file)?,
        table: cosearch::table(&rows),
    })
}

/// `bench firsteval`: reader, decoder and first walk of each fuzz-corpus program.
fn firsteval_suite(run: &Run<'_>, progress: &mut dyn FnMut(&str)) -> Result<SuiteReport> {
    let corpus = firsteval::load(&run.cfg.seed_data)?;
    let budget = firsteval::budget(run.cfg.quick);
    let report = firsteval::run(&corpus, &budget, progress)?;
    let file = FirstEvalFile {
        suite: "firsteval",
        command: format!("ndvm-bench firsteval{}", run.quick_flag),
        quick: run.cfg.quick,
        corpus: firsteval::CORPUS,
        machine: &run.machine,
        loadavg_at_end: loadavg(),
        budget_per_program: &budget,
        report: &report,
    };
    Ok(SuiteReport {
        name: "firsteval",
        path: write_json(&run.cfg.out_dir, "firsteval", &file)?,
        table: firsteval::table(&report),
    })
}

/// The JSON file of the `recovery` suite.
#[derive(Serialize)]
struct RecoveryFile<'a> {
    suite: &'static str,
    command: String,
    quick: bool,
    program: String,
    settings: &'a recovery::RecoverySettings,
    machine: &'a Machine,
    /// `/proc/loadavg` when the suite finished (with `machine.loadavg_at_start`: was it quiet?).
    loadavg_at_end: Option<String>,
    totals: recovery::Totals,
    tasks: &'a [recovery::TaskResult],
}

/// `bench recovery`: 12 tasks × 20 restarts (`--quick`: the first 2 tasks × 4 restarts).
fn recovery_suite(cfg: &BenchConfig, progress: &mut dyn FnMut(&str)) -> Result<Vec<SuiteReport>> {
    std::fs::create_dir_all(&cfg.out_dir).map_err(|source| SearchError::Write { source })?;
    let machine = Machine::probe();
    let settings = recovery::RecoverySettings::standard();
    let (tasks, restarts) = if cfg.quick {
        (&recovery::TASKS[..2], 4)
    } else {
        (&recovery::TASKS[..], 20)
    };
    let results = recovery::run_tasks(tasks, restarts, &settings, progress)?;
    let file = RecoveryFile {
        suite: "recovery",
        command: format!(
            "ndvm-bench recovery{}",
            if cfg.quick { " --quick" } else { "" }
        ),
        quick: cfg.quick,
        program: recovery::program(),
        settings: &settings,
        machine: &machine,
        loadavg_at_end: loadavg(),
        totals: recovery::totals(&results, settings.starts),
        tasks: &results,
    };
    Ok(vec![SuiteReport {
        name: "recovery",
        path: write_json(&cfg.out_dir, "recovery", &file)?,
        table: recovery::table(&results, settings.starts),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(
            utc_date(jiff::Timestamp::from_second(0).unwrap()),
            "1970-01-01T00:00:00Z"
        );
        assert_eq!(
            utc_date(jiff::Timestamp::from_second(951_782_400).unwrap()),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            utc_date(jiff::Timestamp::from_second(1_700_000_000).unwrap()),
            "2023-11-14T22:13:20Z"
        );
    }

    #[test]
    fn selection_names() {
        assert_eq!(Selection::parse("all").unwrap(), Selection::All);
        assert_eq!(Selection::parse("search").unwrap(), Selection::Search);
        assert_eq!(Selection::parse("suite").unwrap(), Selection::Suite);
        assert_eq!(Selection::parse("firsteval").unwrap(), Selection::FirstEval);
        assert!(Selection::parse("fast").is_err());
    }
}
