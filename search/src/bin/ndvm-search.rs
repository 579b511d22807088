//! The `ndvm-search` command line: argument parsing, printing, and exit codes (0 success or closed
//! pipe, 1 failure, 2 usage error). All logic lives in the `ndvm_search` library.
#![allow(clippy::print_stdout)]

use std::io::{self, BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use ndvm_core::{Dialect, Precision};
use ndvm_optimizers::{Optimizer, Polish};
use ndvm_search::calibratecmd::{self, CalibrateArgs};
use ndvm_search::evalcmd::{self, Binding, DataBinding, EvalArgs};
use ndvm_search::selfhost::SelfHost;
use ndvm_search::{SearchError, batch};

/// Differentiable batched evaluation of model programs, and program co-search.
#[derive(Debug, Parser)]
#[command(
    name = "ndvm-search",
    version,
    after_help = "`ndvm-search [OPTIONS] TASK.yaml` is short for `ndvm-search run [OPTIONS] TASK.yaml`."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a co-search task (the default: `ndvm-search TASK.yaml` means `ndvm-search run TASK.yaml`).
    ///
    /// Examples:
    ///   ndvm-search tasks/symreg.yaml
    ///   ndvm-search run tasks/symreg.yaml --threads 4 --budget-calibrations 500
    ///   ndvm-search run --resume results/symreg-20250101-120000
    ///   ndvm-search run tasks/symreg.yaml --shard 0/3
    #[command(verbatim_doc_comment)]
    Run(RunCli),

    /// Validate task files (`.yaml`) or candidate caches (`.jsonl`) without running anything.
    Check {
        /// The files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// The front end of cache lines without a "frontend" key (default: by the cache's file
        /// name, as `c.infix.jsonl`).
        #[arg(long, value_name = "NAME")]
        frontend: Option<String>,
    },

    /// Print a program in another front end's notation.
    ///
    /// Examples:
    ///   ndvm-search translate model.scm --to infix
    ///   ndvm-search translate model.infix --to scheme
    #[command(verbatim_doc_comment)]
    Translate {
        /// The program file.
        file: PathBuf,
        /// The front end that prints it.
        #[arg(long, value_name = "NAME")]
        to: String,
        /// The front end that reads it (default: by file extension).
        #[arg(long, value_name = "NAME")]
        from: Option<String>,
    },

    /// Merge shard run folders into the folder an unsharded run would have produced.
    Merge {
        /// The shard folders.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// The merged folder (default `<output>/<task>-merged-<timestamp>`).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },

    /// Write (and with --submit, submit) a Slurm job array of the task's shards and a merge job.
    ///
    /// Each array task runs `run TASK --shard I/N --out DIR/shard-I` (or resumes that folder);
    /// the merge job (`afterok` on the array) writes DIR/merged. Run the same command again
    /// after a failure: only the unfinished shards are submitted.
    ///
    /// Examples:
    ///   ndvm-search slurm tasks/decay2.yaml --shards 8 --time 1:00:00 --cpus 4 --mem 4G
    ///   ndvm-search slurm tasks/decay2.yaml --shards 8 --submit
    #[command(verbatim_doc_comment)]
    Slurm(SlurmCli),

    /// Evaluate one program (value and gradients), or a JSONL batch of programs.
    ///
    /// Examples:
    ///   ndvm-search eval model.scm --bind q=0.05 --bind r=0.1 --grad
    ///   ndvm-search eval model.scm --lanes 3 --bind q=0.05,0.06,0.07 --data obs=obs.csv --grad
    ///   ndvm-search eval --jsonl requests.jsonl > results.jsonl
    #[command(verbatim_doc_comment)]
    Eval(EvalCli),

    /// Fit a program's parameters to a CSV table (batched multistart Adam + L-BFGS).
    ///
    /// The table's first line names the columns; --target is what the program should return and
    /// every other column binds the program input of the same name.
    ///
    /// Examples:
    ///   ndvm-search calibrate mm.scm --data rates.csv --target v
    ///   ndvm-search calibrate mm.scm --data rates.csv --target v --params Vmax:positive=5,Km --json
    #[command(verbatim_doc_comment)]
    Calibrate(CalibrateCli),

    /// Internal: calibrate one candidate for a run with `isolation: process` (a JSON request on
    /// stdin, the event on stdout).
    #[command(hide = true)]
    Worker,

    /// Run the benchmark suites: forwards every argument to the `ndvm-bench` binary beside this
    /// one (`ndvm-bench --help` lists the suites and options) and exits with its status.
    ///
    /// Examples:
    ///   ndvm-search bench all --out results/bench     # the same as: ndvm-bench all --out results/bench
    ///   ndvm-search bench search --quick --no-pyoperon
    #[command(verbatim_doc_comment, disable_help_flag = true)]
    Bench {
        /// The arguments of `ndvm-bench` (a suite, --quick, --out DIR, …), passed on unchanged.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<std::ffi::OsString>,
    },
}

#[derive(Debug, clap::Args)]
struct CalibrateCli {
    /// The program file.
    file: PathBuf,

    /// The front end that reads the program (default: by file extension).
    #[arg(long, value_name = "NAME")]
    frontend: Option<String>,

    /// The data: a CSV table whose first line names the columns.
    #[arg(long, value_name = "FILE.csv")]
    data: PathBuf,

    /// The column the program's value is fitted to.
    #[arg(long, value_name = "COLUMN")]
    target: String,

    /// A column of per-point weights (the loss becomes the weighted MSE).
    #[arg(long, value_name = "COLUMN")]
    weights: Option<String>,

    /// Parameters to fit: NAME[:free|positive|unit][=INIT],… (default: the program's
    /// `(params …)` declarations; an undeclared name is free with initial value 1).
    #[arg(long, value_name = "LIST")]
    params: Option<String>,

    /// Number of starts K (default 32).
    #[arg(long, value_name = "K")]
    starts: Option<usize>,

    /// The optimizer (default portfolio: Adam screen of all starts, L-BFGS polish of the best).
    #[arg(long, value_enum)]
    optimizer: Option<OptimizerArg>,

    /// The portfolio's polish (default lbfgs; lm: Levenberg–Marquardt, for least squares).
    #[arg(long, value_enum)]
    polish_method: Option<PolishArg>,

    /// Seed of the start distribution (default 0).
    #[arg(long, value_name = "N")]
    seed: Option<u64>,

    /// Adam steps (adam) or iterations per polished start (lbfgs, lm, portfolio); default 200.
    #[arg(long, value_name = "N")]
    max_iters: Option<usize>,

    /// The portfolio's racing screen: cuts STEP:KEEP (after STEP screen steps only the KEEP
    /// starts with the lowest loss go on), e.g. 10:8,30:4; `off` screens every start to the end.
    #[arg(long, value_name = "CUTS")]
    race: Option<String>,

    /// Numeric and naming conventions.
    #[arg(long, value_enum, default_value_t = DialectArg::Default)]
    dialect: DialectArg,

    /// The lanes' element type.
    #[arg(long, value_enum, default_value_t = PrecisionArg::F64)]
    precision: PrecisionArg,

    /// Definitions put before the program (e.g. bootstrap/prelude.scm, the list library).
    #[arg(long, value_name = "FILE.scm")]
    prelude: Option<PathBuf>,

    /// Run the program through an evaluator written in the language (e.g.
    /// bootstrap/evaluator.scm), which receives it as quoted data.
    #[arg(long, value_name = "FILE.scm")]
    via: Option<PathBuf>,

    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    limits: LimitsCli,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum OptimizerArg {
    /// Adam on all starts at once.
    Adam,
    /// L-BFGS on each start.
    Lbfgs,
    /// Levenberg–Marquardt on each start (squared-error losses).
    Lm,
    /// Adam screen, then the polish method on the best starts.
    Portfolio,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum PolishArg {
    /// L-BFGS.
    Lbfgs,
    /// Levenberg–Marquardt.
    Lm,
}

impl From<PolishArg> for Polish {
    fn from(p: PolishArg) -> Polish {
        match p {
            PolishArg::Lbfgs => Polish::Lbfgs,
            PolishArg::Lm => Polish::Lm,
        }
    }
}

impl From<OptimizerArg> for Optimizer {
    fn from(o: OptimizerArg) -> Optimizer {
        match o {
            OptimizerArg::Adam => Optimizer::Adam,
            OptimizerArg::Lbfgs => Optimizer::Lbfgs,
            OptimizerArg::Lm => Optimizer::Lm,
            OptimizerArg::Portfolio => Optimizer::Portfolio,
        }
    }
}

#[derive(Debug, Default, clap::Args)]
struct LimitsCli {
    /// Work units one evaluation may use (steps weighted by the elements each touches;
    /// default 200000000).
    #[arg(long, value_name = "N")]
    max_work: Option<u64>,
    /// Mebibytes one evaluation may hold: payload arena, tape and heap (default 512).
    #[arg(long, value_name = "MIB")]
    max_memory_mb: Option<u64>,
    /// Non-tail nesting depth (default 10000).
    #[arg(long, value_name = "N")]
    max_depth: Option<u32>,
    /// Seconds one evaluation (eval, each --jsonl line; default 60) or one calibration
    /// (calibrate; default none) may take.
    #[arg(long, value_name = "S")]
    timeout: Option<f64>,
}

impl From<LimitsCli> for ndvm_search::evalcmd::LimitArgs {
    fn from(l: LimitsCli) -> Self {
        ndvm_search::evalcmd::LimitArgs {
            max_work: l.max_work,
            max_memory_mb: l.max_memory_mb,
            max_depth: l.max_depth,
            timeout: l.timeout,
        }
    }
}

#[derive(Debug, clap::Args)]
struct EvalCli {
    /// The program file.
    #[arg(required_unless_present = "jsonl", conflicts_with = "jsonl")]
    file: Option<PathBuf>,

    /// The front end that reads the program (default: by file extension; with --jsonl: for
    /// lines without a "frontend" key).
    #[arg(long, value_name = "NAME")]
    frontend: Option<String>,

    /// A differentiable parameter: one value for every lane, or one value per lane.
    #[arg(long = "bind", value_name = "NAME=V[,V...]", value_parser = |s: &str| usage(Binding::parse_param(s)))]
    binds: Vec<Binding>,

    /// A non-differentiated input: one value for every lane, or one value per lane.
    #[arg(long = "input", value_name = "NAME=V[,V...]", value_parser = |s: &str| usage(Binding::parse_input(s)))]
    inputs: Vec<Binding>,

    /// A shared matrix read from a numeric CSV file (optional header line).
    #[arg(long = "data", value_name = "NAME=FILE.csv", value_parser = |s: &str| usage(DataBinding::parse(s)))]
    data: Vec<DataBinding>,

    /// Compute gradients with respect to every --bind parameter (always on with --jsonl).
    #[arg(long)]
    grad: bool,

    /// Number of lanes B (default: the value count of per-lane bindings, else 1).
    #[arg(long, value_name = "B", conflicts_with = "jsonl")]
    lanes: Option<usize>,

    /// Numeric and naming conventions (with --jsonl: for lines without a "dialect" key).
    #[arg(long, value_enum, default_value_t = DialectArg::Default)]
    dialect: DialectArg,

    /// The lanes' element type.
    #[arg(long, value_enum, default_value_t = PrecisionArg::F64)]
    precision: PrecisionArg,

    /// Definitions put before the program (e.g. bootstrap/prelude.scm, the list library).
    #[arg(long, value_name = "FILE.scm", conflicts_with = "jsonl")]
    prelude: Option<PathBuf>,

    /// Run the program through an evaluator written in the language (e.g.
    /// bootstrap/evaluator.scm), which receives it as quoted data.
    #[arg(long, value_name = "FILE.scm", conflicts_with = "jsonl")]
    via: Option<PathBuf>,

    /// Print one JSON object instead of text.
    #[arg(long, conflicts_with = "jsonl")]
    json: bool,

    /// Batch mode: read one JSON request per line from FILE (`-` for stdin), write one result line each.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["binds", "inputs", "data"])]
    jsonl: Option<PathBuf>,

    #[command(flatten)]
    limits: LimitsCli,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum DialectArg {
    /// R7RS naming and truthiness.
    Default,
    /// The seed system's conventions (reproduces its oracle values).
    Reference,
}

/// `--precision`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum PrecisionArg {
    /// Double precision (the default).
    F64,
    /// Single precision: each operation rounds to f32; half the memory traffic per lane.
    F32,
}

impl From<PrecisionArg> for Precision {
    fn from(p: PrecisionArg) -> Precision {
        match p {
            PrecisionArg::F64 => Precision::F64,
            PrecisionArg::F32 => Precision::F32,
        }
    }
}

impl From<DialectArg> for Dialect {
    fn from(d: DialectArg) -> Dialect {
        match d {
            DialectArg::Default => Dialect::Default,
            DialectArg::Reference => Dialect::Reference,
        }
    }
}

/// The argument parser names the argument itself; keep only what is wrong with it.
fn usage<T>(res: Result<T, SearchError>) -> Result<T, String> {
    res.map_err(|err| match err {
        SearchError::BadArgument { message, .. } => message,
        other => other.to_string(),
    })
}

#[derive(Debug, clap::Args)]
struct RunCli {
    /// The task file.
    #[arg(required_unless_present = "resume", conflicts_with = "resume")]
    task: Option<PathBuf>,
    /// Continue the killed or finished run in DIR (its task file must be unchanged).
    #[arg(long, value_name = "DIR")]
    resume: Option<PathBuf>,
    /// The run folder to create (default `<output>/<task>-<timestamp>/`).
    #[arg(long, value_name = "DIR", conflicts_with = "resume")]
    out: Option<PathBuf>,
    /// Calibration threads (default: the task's `threads:`, else all cores). Results do not
    /// depend on it.
    #[arg(long)]
    threads: Option<usize>,
    /// Run slice i of n of the candidate stream (default from SLURM_ARRAY_TASK_ID/COUNT).
    #[arg(long, value_name = "I/N", value_parser = |s: &str| usage(ndvm_search::engine::Shard::parse(s)), conflicts_with = "resume")]
    shard: Option<ndvm_search::engine::Shard>,
    /// Override the task's budget in seconds.
    #[arg(long, value_name = "S", conflicts_with = "resume", value_parser = ndvm_search::task::parse_budget_seconds)]
    budget_seconds: Option<f64>,
    /// Override the task's budget in calibrations.
    #[arg(long, value_name = "N", conflicts_with = "resume")]
    budget_calibrations: Option<usize>,
    /// Print no progress bar or lines on stderr.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Debug, clap::Args)]
struct SlurmCli {
    /// The task file.
    task: PathBuf,
    /// Number of shards (array tasks).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    shards: u64,
    /// The folder of the shard folders, the merged folder and the scripts (default
    /// `<output>/<task>-slurm/`; give the same one to resubmit).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Slurm partition (`#SBATCH --partition`).
    #[arg(long, value_name = "P")]
    partition: Option<String>,
    /// Time limit per shard (`#SBATCH --time`, e.g. 1:00:00).
    #[arg(long, value_name = "T")]
    time: Option<String>,
    /// CPUs per shard (`--cpus-per-task`, and the shard's `--threads`).
    #[arg(long, value_name = "C", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    cpus: u32,
    /// Memory per shard (`#SBATCH --mem`, e.g. 4G).
    #[arg(long, value_name = "M")]
    mem: Option<String>,
    /// Override the task's budget in seconds (per shard).
    #[arg(long, value_name = "S", value_parser = ndvm_search::task::parse_budget_seconds)]
    budget_seconds: Option<f64>,
    /// Override the task's budget in calibrations.
    #[arg(long, value_name = "N")]
    budget_calibrations: Option<usize>,
    /// Submit the array and the merge job (`sbatch`) after writing the scripts.
    #[arg(long)]
    submit: bool,
}

/// `ndvm-search [OPTIONS] TASK.yaml [OPTIONS]` is short for `ndvm-search run …`: when the first
/// argument is neither a subcommand nor `-h`/`--help`/`-V`/`--version`, and a task file
/// (`.yaml`, `.yml`) or `--resume` appears among the arguments, `run` is inserted before them.
fn default_to_run(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let Some(first) = args.get(1).map(|a| a.to_string_lossy().into_owned()) else {
        return args;
    };
    let cli = <Cli as clap::CommandFactory>::command();
    let is_subcommand = first == "help" || cli.get_subcommands().any(|s| s.get_name() == first);
    let is_meta = matches!(first.as_str(), "-h" | "--help" | "-V" | "--version");
    let names_a_task = args[1..].iter().any(|a| {
        let a = a.to_string_lossy();
        a.ends_with(".yaml") || a.ends_with(".yml") || a == "--resume" || a.starts_with("--resume=")
    });
    if !is_subcommand && !is_meta && names_a_task {
        args.insert(1, "run".into());
    }
    args
}

fn slurm(args: SlurmCli) -> anyhow::Result<()> {
    use ndvm_search::slurmcmd::{self, ShardState, SlurmArgs, Tools};
    let report = slurmcmd::run(
        &SlurmArgs {
            task: args.task,
            shards: args.shards,
            out: args.out,
            partition: args.partition,
            time: args.time,
            mem: args.mem,
            cpus: args.cpus,
            budget_seconds: args.budget_seconds,
            budget_calibrations: args.budget_calibrations,
            submit: args.submit,
        },
        &Tools::default(),
    )?;
    let plan = &report.plan;
    let list = |want: ShardState| -> String {
        let ids: Vec<String> = (0..plan.shards)
            .filter(|&i| plan.states[i as usize] == want)
            .map(|i| i.to_string())
            .collect();
        if ids.is_empty() {
            "none".into()
        } else {
            ids.join(", ")
        }
    };
    let mut out = format!(
        "wrote {}\nwrote {}\nshards to run: fresh {}; to resume {}; finished {}\n",
        report.shards_script.display(),
        report.merge_script.display(),
        list(ShardState::Fresh),
        list(ShardState::Unfinished),
        list(ShardState::Finished),
    );
    for id in &report.cancelled {
        out.push_str(&format!(
            "cancelled merge job {id}: an earlier array had a failed or cancelled shard\n"
        ));
    }
    if report.done {
        out.push_str(&format!(
            "nothing to do: {} is complete\n",
            plan.dir.join("merged").display()
        ));
    } else if let Some(sub) = &report.submitted {
        match sub.array {
            Some(a) => out.push_str(&format!(
                "submitted array job {a} (shards {}) and merge job {} (afterok:{a})\n",
                slurmcmd::array_spec(&sub.shards),
                sub.merge
            )),
            None => out.push_str(&format!("submitted merge job {}\n", sub.merge)),
        }
    } else {
        out.push_str(&format!(
            "submit with:\n  array=$(sbatch --parsable {})\n  sbatch --dependency=afterok:$array {}\n\
             (or run this command again with --submit)\n",
            report.shards_script.display(),
            report.merge_script.display()
        ));
    }
    write_stdout(&out)
}

fn run_task(args: RunCli) -> anyhow::Result<()> {
    let shard = match (args.shard, &args.resume) {
        (Some(s), _) => Some(s),
        // A resumed folder knows its shard (`run.json`); the array variables of a resubmission
        // describe only the tasks resubmitted.
        (None, Some(_)) => None,
        (None, None) => ndvm_search::runcmd::shard_from_env()?,
    };
    let quiet = args.quiet;
    let mut log = |line: &str| {
        if !quiet {
            eprintln!("{}", redact(line));
        }
    };
    let interrupt = ndvm_search::interrupt::Interrupt::on_ctrl_c()?;
    let report = ndvm_search::runcmd::run(
        &ndvm_search::runcmd::RunArgs {
            task: args.task,
            resume: args.resume,
            out: args.out,
            threads: args.threads,
            shard,
            budget_seconds: args.budget_seconds,
            budget_calibrations: args.budget_calibrations,
            progress: if quiet {
                ndvm_search::observe::ProgressMode::Quiet
            } else {
                ndvm_search::observe::ProgressMode::Auto
            },
            interrupt: Some(interrupt),
        },
        &mut log,
    )?;
    print_report(&report)?;
    if let Some(line) = report.all_rejected() {
        // Shown even with -q: the run answered nothing.
        eprintln!("{}", redact(&line));
    }
    if let Some(line) = report.unusable_answers() {
        // Shown even with -q: the model's part in the run.
        eprintln!("{}", redact(&line));
    }
    if report.outcome.stop == ndvm_search::engine::StopKind::Interrupted {
        // Shown even with -q: the run is unfinished and this is how to finish it.
        eprintln!("{}", ndvm_search::interrupt::resume_hint(&report.dir));
        io::stdout()
            .flush()
            .map_err(|source| SearchError::Write { source })?;
        std::process::exit(130);
    }
    Ok(())
}

fn print_report(report: &ndvm_search::runcmd::RunReport) -> anyhow::Result<()> {
    let mut stdout = io::stdout().lock();
    writeln!(
        stdout,
        "{}
results in {}",
        redact(&report.markdown),
        report.dir.display()
    )
    .map_err(|source| SearchError::Write { source })?;
    Ok(())
}

use ndvm_search::secret::redact;

fn main() -> ExitCode {
    let cli = Cli::parse_from(default_to_run(std::env::args_os().collect()));
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
    match cli.command {
        Command::Run(args) => run_task(args),
        Command::Check { files, frontend } => {
            let mut failed = 0;
            for f in &files {
                match ndvm_search::runcmd::check(f, frontend.as_deref()) {
                    Ok(line) => println!("{line}"),
                    Err(err) => {
                        // With its causes (an OS reason), as `run` prints it.
                        eprintln!("{}", redact(&format!("{:#}", anyhow::Error::from(err))));
                        failed += 1;
                    }
                }
            }
            if failed > 0 {
                anyhow::bail!("{failed} of {} files failed the check", files.len());
            }
            Ok(())
        }
        Command::Merge { dirs, out } => {
            let report = ndvm_search::runcmd::merge(&dirs, out.as_deref())?;
            print_report(&report)
        }
        Command::Eval(args) => eval(args),
        Command::Slurm(args) => slurm(args),
        Command::Translate { file, to, from } => {
            let text = ndvm_search::translatecmd::run(&ndvm_search::translatecmd::TranslateArgs {
                program: file,
                from,
                to,
            })?;
            write_stdout(&text)
        }
        Command::Calibrate(args) => calibrate(args),
        Command::Worker => {
            let mut input = String::new();
            io::Read::read_to_string(&mut io::stdin(), &mut input).map_err(|source| {
                SearchError::Read {
                    path: "<stdin>".into(),
                    source,
                }
            })?;
            let line = ndvm_search::worker::serve(&input)?;
            println!("{line}");
            Ok(())
        }
        Command::Bench { args } => bench(&args),
    }
}

/// `ndvm-search bench ARGS`: runs `ndvm-bench ARGS` from this executable's folder (standard
/// streams inherited) and exits with its status.
fn bench(args: &[std::ffi::OsString]) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot locate the ndvm-search executable")?;
    let dir = exe.parent().unwrap_or(std::path::Path::new("."));
    let bench = dir.join(format!("ndvm-bench{}", std::env::consts::EXE_SUFFIX));
    if !bench.is_file() {
        anyhow::bail!(
            "`ndvm-search bench` runs `ndvm-bench`, which is not next to this binary ({}); build it \
             with `cargo build --release -p ndvm-bench`",
            dir.display()
        );
    }
    let status = std::process::Command::new(&bench)
        .args(args)
        .status()
        .with_context(|| format!("cannot run {}", bench.display()))?;
    // A child killed by a signal has no exit code: report a failure.
    std::process::exit(status.code().unwrap_or(1));
}

/// Writes `text` to standard output and flushes it.
fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|source| SearchError::Write { source })?;
    Ok(())
}

fn calibrate(args: CalibrateCli) -> anyhow::Result<()> {
    let report = calibratecmd::run(&CalibrateArgs {
        program: args.file,
        frontend: args.frontend,
        data: args.data,
        target: args.target,
        weights: args.weights,
        params: match &args.params {
            Some(list) => calibratecmd::ParamArg::parse_list(list)?,
            None => Vec::new(),
        },
        n_starts: args.starts,
        optimizer: args.optimizer.map(Optimizer::from),
        polish: args.polish_method.map(Polish::from),
        seed: args.seed,
        max_iters: args.max_iters,
        race: args
            .race
            .as_deref()
            .map(calibratecmd::parse_race)
            .transpose()?,
        dialect: Dialect::from(args.dialect),
        precision: args.precision.into(),
        limits: args.limits.into(),
        selfhost: SelfHost {
            prelude: args.prelude,
            via: args.via,
        },
    })?;
    let text = if args.json {
        report.to_json() + "\n"
    } else {
        report.to_human()
    };
    write_stdout(&text)
}

fn eval(args: EvalCli) -> anyhow::Result<()> {
    let dialect = Dialect::from(args.dialect);
    let limits: ndvm_search::evalcmd::LimitArgs = args.limits.into();
    if let Some(path) = args.jsonl {
        let stdout = io::stdout().lock();
        let frontends = ndvm_frontends::Registry::default();
        let settings = batch::BatchSettings {
            dialect,
            limits,
            frontends: &frontends,
            frontend: args.frontend,
            precision: args.precision.into(),
        };
        let summary = if path.as_os_str() == "-" {
            batch::run_with(io::stdin().lock(), stdout, &settings)?
        } else {
            let file = std::fs::File::open(&path).map_err(|source| SearchError::Read {
                path: path.clone(),
                source,
            })?;
            batch::run_with(BufReader::new(file), stdout, &settings)
                .with_context(|| format!("batch {}", path.display()))?
        };
        if summary.n_errors > 0 {
            eprintln!(
                "{} of {} lines gave an error",
                summary.n_errors, summary.n_lines
            );
        }
        return Ok(());
    }
    let Some(program) = args.file else {
        anyhow::bail!("no program file given");
    };
    let mut bindings = args.binds;
    bindings.extend(args.inputs);
    let report = evalcmd::run(&EvalArgs {
        program,
        frontend: args.frontend,
        bindings,
        data: args.data,
        n_lanes: args.lanes,
        grad: args.grad,
        dialect,
        precision: args.precision.into(),
        limits,
        selfhost: SelfHost {
            prelude: args.prelude,
            via: args.via,
        },
    })?;
    let text = if args.json {
        report.to_json() + "\n"
    } else {
        report.to_human()
    };
    write_stdout(&text)
}

#[cfg(test)]
mod tests {
    use super::default_to_run;

    fn sugar(args: &[&str]) -> Vec<String> {
        let args = std::iter::once("ndvm-search")
            .chain(args.iter().copied())
            .map(std::ffi::OsString::from)
            .collect();
        default_to_run(args)
            .into_iter()
            .skip(1)
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// Issue 11: `ndvm-search -q task.yaml` was rejected, the sugar only looked at the first
    /// argument.
    #[test]
    fn issue_11_options_before_the_task_path() {
        assert_eq!(sugar(&["-q", "t.yaml"]), ["run", "-q", "t.yaml"]);
        assert_eq!(
            sugar(&["--threads", "2", "t.yml", "--out", "o"]),
            ["run", "--threads", "2", "t.yml", "--out", "o"]
        );
        assert_eq!(sugar(&["t.yaml", "-q"]), ["run", "t.yaml", "-q"]);
        assert_eq!(
            sugar(&["-q", "--resume", "d"]),
            ["run", "-q", "--resume", "d"]
        );
        assert_eq!(sugar(&["--resume=d"]), ["run", "--resume=d"]);
        // Subcommands, help and version are left alone, and so is a typo without a task file.
        assert_eq!(sugar(&["check", "t.yaml"]), ["check", "t.yaml"]);
        assert_eq!(sugar(&["run", "t.yaml"]), ["run", "t.yaml"]);
        assert_eq!(sugar(&["--help"]), ["--help"]);
        assert_eq!(sugar(&["-V"]), ["-V"]);
        assert_eq!(sugar(&["help", "run"]), ["help", "run"]);
        assert_eq!(sugar(&["evl", "m.scm"]), ["evl", "m.scm"]);
        assert_eq!(sugar(&[]), Vec::<String>::new());
    }
}
