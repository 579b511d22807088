//! The `ndvm-bench` command line: argument parsing, printing, and exit codes (0 success or closed
//! pipe, 1 failure, 2 usage error). The suites live in the `ndvm_bench` library;
//! `ndvm-search bench ARGS` runs this binary with the same arguments.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ndvm_bench::Selection;
use ndvm_bench::search::{Pyoperon, SearchOptions};
use ndvm_bench::suite::SuiteOptions;
use ndvm_search::SearchError;

/// Measure the runtime: the Kalman per-lane sweep beside a compiled Rust ceiling, and multicore
/// scaling; writes OUT/<suite>.json (raw samples, medians, machine) and prints the tables.
/// `search` runs the co-search beside pyoperon on the LLM-SR problems (NMSE of the selected
/// models; pyoperon is installed into results/bench/.venv-pyoperon on first use). `suite` runs
/// both on 24 problems with known ground truth (generated data, two noise levels) and the two
/// LLM-SR problems: NMSE in and out of range and on truth, recovery, model size, winners; each
/// finished run goes to OUT/suite-runs.jsonl, and a rerun into the same OUT reuses the runs
/// with the same key (pyoperon's always, this project's while its sources are unchanged and
/// committed; --no-ndvm runs pyoperon alone).
///
/// Examples:
///   ndvm-bench all --out results/bench
///   ndvm-bench search --out results/bench          # 2 problems × 3 seeds × 2 tools × 60 s
///   ndvm-bench search --quick --no-pyoperon        # 5 s, seed 0, this project only
///   ndvm-bench suite --out results/suite           # 26 problems, 50 cells × 3 seeds × 2 tools × 60 s
///   ndvm-bench suite --quick --no-pyoperon --problems arrhenius,nguyen-1
#[derive(Debug, Parser)]
#[command(name = "ndvm-bench", version, verbatim_doc_comment)]
struct Cli {
    /// Which suite: kalman, multicore, calibration, cosearch, firsteval, all (these five), search,
    /// suite or recovery.
    #[arg(default_value = "all", value_parser = |s: &str| usage(Selection::parse(s)))]
    suite: Selection,
    /// A few-second smoke run instead of the full measurement.
    #[arg(long)]
    quick: bool,
    /// Folder receiving the JSON reports (default `results/bench-<timestamp>/`, which git
    /// ignores; the committed reference run is written with `--out results/bench`).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// The seed-data folder (oracle_refs.json, cosearch_candidates_valid.jsonl); default: the
    /// testdata/seed-data folder of the checkout this binary was built from.
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    #[command(flatten)]
    search: SearchCli,
}

/// Options of `search` and `suite` (refused with the other suites).
#[derive(Debug, Default, clap::Args)]
struct SearchCli {
    /// search, suite: wall-clock seconds per run, both tools (default 60; 5 with --quick).
    #[arg(long, value_name = "S", value_parser = ndvm_search::task::parse_budget_seconds)]
    seconds: Option<f64>,
    /// search, suite: threads per run, both tools (default 2).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=4096))]
    threads: Option<u64>,
    /// search, suite: seeds, comma-separated (search: default 0,1,2, 0 with --quick; suite:
    /// default 1,2,3, 1 with --quick).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    seeds: Option<Vec<u64>>,
    /// search: problems, comma-separated; each is TASKS/llmsr-<problem>.yaml (default
    /// oscillator1,bactgrow). suite: problem names (default all 26, e.g. arrhenius,nguyen-1).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    problems: Option<Vec<String>>,
    /// search, suite: also stop this project's runs after N calibrations (smoke runs).
    #[arg(long, value_name = "N")]
    calibrations: Option<usize>,
    /// search: the folder of the llmsr-<problem>.yaml task files (default: the checkout's tasks/).
    #[arg(long, value_name = "DIR")]
    tasks: Option<PathBuf>,
    /// search, suite: run this project only (no Python, no network).
    #[arg(long)]
    no_pyoperon: bool,
    /// suite: run pyoperon only (its runs go to the journal, and a later run into the same OUT
    /// takes them from there).
    #[arg(long, conflicts_with = "no_pyoperon")]
    no_ndvm: bool,
    /// search, suite: the virtual environment pyoperon runs in, created when missing (default
    /// results/bench/.venv-pyoperon of the checkout).
    #[arg(
        long,
        visible_alias = "venv",
        value_name = "DIR",
        conflicts_with = "no_pyoperon"
    )]
    pyoperon_venv: Option<PathBuf>,
    /// suite: noise levels of the generated problems, fractions of the training target's RMS,
    /// comma-separated (default 0,0.01; 0 with --quick).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_noise)]
    noise: Option<Vec<f64>>,
    /// suite: a YAML file whose top-level keys (proposer:, calibrator:, selection: …) are added
    /// to every generated task, to measure a configuration against the defaults.
    #[arg(long, value_name = "FILE")]
    task_keys: Option<PathBuf>,
}

/// A noise level: a finite fraction, at least 0.
fn parse_noise(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!(
            "`{s}` is not a noise level (a fraction of the target's RMS, at least 0)"
        )),
    }
}

impl SearchCli {
    fn is_empty(&self) -> bool {
        self.seconds.is_none()
            && self.threads.is_none()
            && self.seeds.is_none()
            && self.problems.is_none()
            && self.calibrations.is_none()
            && self.tasks.is_none()
            && !self.no_pyoperon
            && !self.no_ndvm
            && self.pyoperon_venv.is_none()
            && self.noise.is_none()
            && self.task_keys.is_none()
    }

    /// The options of this suite that the other suite does not take, as the error names them.
    fn foreign_to(&self, suite: Selection) -> Option<SearchError> {
        let (arg, message) = match suite {
            Selection::Search
                if self.noise.is_some() || self.task_keys.is_some() || self.no_ndvm =>
            {
                (
                    "--noise, --task-keys, --no-ndvm",
                    "these options belong to `bench suite`",
                )
            }
            Selection::Suite if self.tasks.is_some() => {
                ("--tasks", "this option belongs to `bench search`")
            }
            Selection::Search | Selection::Suite => return None,
            _ if self.is_empty() => return None,
            _ => (
                "--seconds, --threads, --seeds, --problems, --calibrations, --tasks, \
                 --no-pyoperon, --no-ndvm, --pyoperon-venv, --noise, --task-keys",
                "these options belong to `bench search` and `bench suite`",
            ),
        };
        Some(SearchError::BadArgument {
            arg: arg.to_string(),
            message: message.to_string(),
        })
    }

    /// The `search` suite's options: the standard ones, --quick's, then the flags.
    fn options(&self, quick: bool) -> SearchOptions {
        let mut o = SearchOptions::standard();
        if quick {
            o.seconds = 5.0;
            o.seeds = vec![0];
        }
        o.seconds = self.seconds.unwrap_or(o.seconds);
        o.threads = self.threads.map_or(o.threads, |t| t as usize);
        o.seeds = self.seeds.clone().unwrap_or(o.seeds);
        o.problems = self.problems.clone().unwrap_or(o.problems);
        o.calibrations = self.calibrations;
        o.tasks = self.tasks.clone().unwrap_or(o.tasks);
        if self.no_pyoperon {
            o.pyoperon = Pyoperon::Skip;
        } else if let Some(venv) = &self.pyoperon_venv {
            o.pyoperon = Pyoperon::Venv(venv.clone());
        }
        o
    }

    /// The `suite` suite's options: the standard ones, --quick's, then the flags.
    fn suite_options(&self, quick: bool) -> SuiteOptions {
        let mut o = if quick {
            SuiteOptions::quick()
        } else {
            SuiteOptions::standard()
        };
        o.seconds = self.seconds.unwrap_or(o.seconds);
        o.threads = self.threads.map_or(o.threads, |t| t as usize);
        o.seeds = self.seeds.clone().unwrap_or(o.seeds);
        o.problems = self.problems.clone().unwrap_or(o.problems);
        o.noise = self.noise.clone().unwrap_or(o.noise);
        o.calibrations = self.calibrations;
        o.task_keys = self.task_keys.clone();
        o.ndvm = !self.no_ndvm;
        if self.no_pyoperon {
            o.pyoperon = Pyoperon::Skip;
        } else if let Some(venv) = &self.pyoperon_venv {
            o.pyoperon = Pyoperon::Venv(venv.clone());
        }
        o
    }
}

/// The argument parser names the argument itself; keep only what is wrong with it.
fn usage<T>(res: Result<T, SearchError>) -> Result<T, String> {
    res.map_err(|err| match err {
        SearchError::BadArgument { message, .. } => message,
        other => other.to_string(),
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // Every error text leaves redacted (a server's message may echo a key).
            let (line, code) = ndvm_search::error::exit_report(err.chain());
            if let Some(line) = line {
                eprintln!("{line}");
            }
            ExitCode::from(code)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let Cli {
        suite,
        quick,
        out,
        data,
        search,
    } = cli;
    if let Some(err) = search.foreign_to(suite) {
        return Err(err.into());
    }
    let cfg = ndvm_bench::BenchConfig {
        selection: suite,
        quick,
        out_dir: out.unwrap_or_else(|| {
            ndvm_search::results::new_run_dir(std::path::Path::new("results"), "bench")
        }),
        seed_data: data.unwrap_or_else(ndvm_bench::default_seed_data),
        search: search.options(quick),
        suite: search.suite_options(quick),
    };
    let reports = ndvm_bench::run(&cfg, &mut |line| eprintln!("{line}"))?;
    let mut stdout = io::stdout().lock();
    for report in reports {
        writeln!(
            stdout,
            "{}\nwrote {}\n",
            report.table,
            report.path.display()
        )
        .map_err(|source| SearchError::Write { source })?;
    }
    Ok(())
}
