//! The `run` (default), `check` and `merge` commands: wire a task, its run folder, the observers
//! and the engine together, then write the summary and the plots. The binary only parses
//! arguments and prints.

use std::path::{Path, PathBuf};

use crate::engine::{self, RunOptions};
use crate::error::{Result, SearchError};
use crate::events::{Outcome, Shard};
use crate::interrupt::Interrupt;
use crate::observe::{self, EventLog, Fanout, Nothing, Observer, ProgressMode};
use crate::plots;
use crate::propose::replay;
use crate::results::{self, RunMeta};
use crate::summary::{RunSection, Summary};
use crate::task::{self, Task};

/// Arguments of `ndvm-search TASK.yaml` / `--resume DIR`.
#[derive(Clone, Debug)]
pub struct RunArgs {
    /// The task file (absent with `resume`).
    pub task: Option<PathBuf>,
    /// Continue the run in this folder.
    pub resume: Option<PathBuf>,
    /// The run folder to create (default `<output>/<task>-<timestamp>`).
    pub out: Option<PathBuf>,
    /// Calibration threads (default: the task's `threads:`, else every core). Results do not
    /// depend on it.
    pub threads: Option<usize>,
    /// Slice of the stream.
    pub shard: Option<Shard>,
    /// Budget override, seconds.
    pub budget_seconds: Option<f64>,
    /// Budget override, calibrations.
    pub budget_calibrations: Option<usize>,
    /// How progress shows on stderr (a bar on a terminal, plain lines otherwise, or nothing).
    pub progress: ProgressMode,
    /// Raised by Ctrl-C: the run stops after the calibrations in flight, summary written.
    pub interrupt: Option<Interrupt>,
}

/// What a finished run reports.
#[derive(Debug)]
pub struct RunReport {
    /// The run folder.
    pub dir: PathBuf,
    /// The summary's markdown.
    pub markdown: String,
    /// The engine's outcome.
    pub outcome: Outcome,
}

impl RunReport {
    /// The line a run whose every candidate was rejected before calibration ends with (counts by
    /// reason, and the first example), `None` otherwise.
    pub fn all_rejected(&self) -> Option<String> {
        let s = &self.outcome.stream;
        let rejected: u64 = s.rejected.values().sum();
        if !self.outcome.events.is_empty() || rejected == 0 {
            return None;
        }
        let counts: Vec<String> = s.rejected.iter().map(|(k, n)| format!("{n} {k}")).collect();
        Some(format!(
            "warning: every one of the {rejected} candidates was rejected before calibration ({}){}",
            counts.join(", "),
            s.rejection_examples
                .first()
                .map_or_else(String::new, |e| format!("; the first: {e}"))
        ))
    }
}

impl RunReport {
    /// The line a run whose language model gave unusable answers ends with: how many answers
    /// were usable and where each one's verdict is; `None` when every answer was usable.
    pub fn unusable_answers(&self) -> Option<String> {
        let llm = self.outcome.llm.as_ref()?;
        (llm.usable < llm.answered).then(|| {
            format!(
                "warning: {} of {} answers of the model gave a valid candidate; each answer's \
                 verdict and reason are in {}",
                llm.usable, llm.answered, llm.verdicts
            )
        })
    }
}

/// The shard named by the Slurm array variables, when `SLURM_ARRAY_TASK_ID` and
/// `SLURM_ARRAY_TASK_COUNT` are set and describe a whole array `0..N-1`; `None` when they are
/// absent. A partial array (`--array=1,3`, as a resubmission makes) has a count of 2, which says
/// nothing about N: an error then asks for `--shard I/N` (the scripts of `ndvm-search slurm`
/// pass it).
pub fn shard_from_env() -> Result<Option<Shard>> {
    let var = |k: &str| std::env::var(k).ok().map(|v| v.trim().to_string());
    let (Some(i), Some(n)) = (var("SLURM_ARRAY_TASK_ID"), var("SLURM_ARRAY_TASK_COUNT")) else {
        return Ok(None);
    };
    let whole = match (var("SLURM_ARRAY_TASK_MIN"), var("SLURM_ARRAY_TASK_MAX")) {
        (Some(min), Some(max)) => {
            let last = max.parse::<u64>().ok();
            min == "0"
                && last.and_then(|m| m.checked_add(1)).map(|m| m.to_string()) == Some(n.clone())
        }
        _ => true,
    };
    if !whole {
        return Err(SearchError::BadArgument {
            arg: format!("SLURM_ARRAY_TASK_ID={i} SLURM_ARRAY_TASK_COUNT={n}"),
            message: "this job array is not 0..N-1, so the shard count is unknown; pass \
                      --shard I/N (the scripts of `ndvm-search slurm` do)"
                .into(),
        });
    }
    Shard::parse(&format!("{i}/{n}")).map(Some)
}

fn apply_overrides(task: &mut Task, seconds: Option<f64>, calibrations: Option<usize>) {
    if seconds.is_some() {
        task.budget_seconds = seconds;
    }
    if calibrations.is_some() {
        task.budget_calibrations = calibrations;
    }
}

fn load_for(meta: &RunMeta, dir: &Path) -> Result<Task> {
    let mut task = task::load(&meta.task_path)?;
    // A folder's copy is redacted (folders written before redaction hold the text as it was).
    if crate::secret::task_text(&task.text) != meta.task_text && task.text != meta.task_text {
        return Err(SearchError::RunFolder {
            path: dir.to_path_buf(),
            message: format!(
                "the task file {} changed since this run started",
                meta.task_path.display()
            ),
        });
    }
    if let Some(s) = meta.budget_seconds {
        task::check_budget_seconds(s).map_err(|message| SearchError::RunFolder {
            path: dir.to_path_buf(),
            message,
        })?;
    }
    apply_overrides(&mut task, meta.budget_seconds, meta.budget_calibrations);
    Ok(task)
}

/// Everything `run` checks of a fresh run before its first calibration, writing nothing: the
/// proposer's inputs (a cache read whole, as the proposer reads it) and the run folder (each
/// missing folder of `run_dir` made and removed again, so a name the file system refuses is
/// refused here). `check` and `run` both call it.
pub fn preflight(task: &Task, run_dir: &Path) -> Result<()> {
    match task.llm() {
        // The llm proposer opens its cache for appending and needs its key: only the cache's
        // lines are read here.
        Some(llm) if llm.cache.is_file() => {
            crate::propose::replay::read_cache(&llm.cache)?;
        }
        Some(_) => {}
        None => drop(crate::propose::for_task(task)?),
    }
    probe_folder(run_dir)
}

/// Makes each missing folder of `dir` and removes them again; the first refusal is the error
/// `run` would give.
fn probe_folder(dir: &Path) -> Result<()> {
    let mut missing = Vec::new();
    let mut p = dir.to_path_buf();
    while !p.as_os_str().is_empty() && !p.exists() {
        missing.push(p.clone());
        if !p.pop() {
            break;
        }
    }
    let mut made = Vec::new();
    let mut outcome = Ok(());
    for m in missing.iter().rev() {
        match std::fs::create_dir(m) {
            Ok(()) => made.push(m),
            Err(e) => {
                outcome = Err(SearchError::RunFolder {
                    path: dir.to_path_buf(),
                    message: format!("cannot create the run folder: {e}"),
                });
                break;
            }
        }
    }
    for m in made.iter().rev() {
        let _ = std::fs::remove_dir(m);
    }
    outcome
}

/// Runs (or resumes) a task; progress lines go to `log`.
pub fn run(args: &RunArgs, log: &mut dyn FnMut(&str)) -> Result<RunReport> {
    let (mut task, dir, meta, known) = match (&args.resume, &args.task) {
        (Some(dir), _) => {
            let meta = results::load_meta(dir)?;
            let task = load_for(&meta, dir)?;
            let known = results::index_events(results::read_events(dir, true)?, dir)?;
            log(&format!(
                "resuming {} ({} calibrations already done)",
                dir.display(),
                known.len()
            ));
            (task, dir.clone(), meta, known)
        }
        (None, Some(path)) => {
            let mut task = task::load(path)?;
            apply_overrides(&mut task, args.budget_seconds, args.budget_calibrations);
            let shard = args.shard.unwrap_or(Shard::ALL);
            if shard.count > 1 && matches!(task.proposer, task::ProposerConfig::Evolve { .. }) {
                return Err(SearchError::BadArgument {
                    arg: format!("--shard {}/{}", shard.index, shard.count),
                    message: format!(
                        "{}: the evolve proposer breeds from every calibration, so its stream \
                         cannot be split into shards; give the task `proposer.kind: grammar` or a \
                         cache to replay for a sharded run",
                        path.display()
                    ),
                });
            }
            let dir = match &args.out {
                Some(d) => d.clone(),
                None if shard.count > 1 => results::new_run_dir(
                    &task.output,
                    &format!("{}-shard{}of{}", task.name, shard.index, shard.count),
                ),
                None => results::new_run_dir(&task.output, &task.name),
            };
            preflight(&task, &dir)?;
            let task_path = std::path::absolute(path).unwrap_or_else(|_| path.clone());
            let meta = RunMeta {
                task_path,
                task_text: crate::secret::task_text(&task.text),
                shard,
                budget_seconds: args.budget_seconds,
                budget_calibrations: args.budget_calibrations,
            };
            results::prepare(&dir, &task, &meta)?;
            log(&format!("run folder {}", dir.display()));
            (task, dir, meta, Default::default())
        }
        (None, None) => {
            return Err(SearchError::BadArgument {
                arg: String::new(),
                message: "give a task file or --resume DIR".to_string(),
            });
        }
    };
    for note in task.start_notes() {
        log(&note);
    }
    log(&crate::select::note(task.selection));
    for w in &task.warnings {
        log(&format!("warning: {w}"));
    }
    if let Some(llm) = task.proposer.llm_mut() {
        llm.failure_log = Some(dir.join(crate::propose::LLM_FAILURES_FILE));
    }
    let threads = args
        .threads
        .or(task.threads)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let mut opts = RunOptions::new(threads);
    opts.shard = meta.shard;
    if let Some(interrupt) = &args.interrupt {
        interrupt.set_run_dir(&dir);
    }
    opts.interrupt = args.interrupt.clone();
    let crashes = results::read_crashes(&dir, &known)?;
    if !crashes.crashed.is_empty() || !crashes.suspects.is_empty() {
        let list = |s: &std::collections::HashSet<u64>| {
            let mut v: Vec<u64> = s.iter().copied().collect();
            v.sort_unstable();
            v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        };
        log(&format!(
            "an earlier process died mid-calibration: crashed (skipped) [{}], retried alone [{}]",
            list(&crashes.crashed),
            list(&crashes.suspects)
        ));
    }
    opts.known = known;
    opts.crashed = crashes.crashed;
    opts.suspects = crashes.suspects;
    opts.begin_log = Some(std::sync::Arc::new(results::BeginLog::open(&dir)?));
    let mut event_log = EventLog::append(&dir.join("events.jsonl"))?;
    let outcome = {
        let mut progress = observe::progress(args.progress, &mut *log);
        let mut fan = Fanout(vec![&mut event_log as &mut dyn Observer, &mut *progress]);
        engine::run(&task, &opts, &mut fan)?
    };
    // Events were appended as calibrations finished; the finished run's log is in index order.
    drop(event_log);
    results::write_events(&dir, &outcome.events)?;
    let run = RunSection::new(&outcome, threads, meta.shard);
    let summary = Summary::new(&task, &outcome, run);
    let markdown = results::write_summary(&dir, &summary)?;
    plots::write_all(&dir, &task, &outcome.events, &summary)?;
    Ok(RunReport {
        dir,
        markdown,
        outcome,
    })
}

/// Merges shard folders into `out`: the events and summary the unsharded run would give.
pub fn merge(dirs: &[PathBuf], out: Option<&Path>) -> Result<RunReport> {
    let Some(first) = dirs.first() else {
        return Err(SearchError::BadArgument {
            arg: String::new(),
            message: "name at least one run folder".to_string(),
        });
    };
    let meta0 = results::load_meta(first)?;
    let mut all = Vec::new();
    for d in dirs {
        let meta = results::load_meta(d)?;
        if meta.task_text != meta0.task_text
            || meta.budget_calibrations != meta0.budget_calibrations
            || meta.budget_seconds != meta0.budget_seconds
        {
            return Err(SearchError::RunFolder {
                path: d.clone(),
                message: format!("ran a different task or budget than {}", first.display()),
            });
        }
        all.extend(results::read_events(d, false)?);
    }
    let task = load_for(&meta0, first)?;
    let known = results::index_events(all, first)?;
    let mut opts = RunOptions::new(1);
    opts.known = known;
    opts.calibrate_missing = false;
    let outcome = engine::run(&task, &opts, &mut Nothing)?;
    let dir = match out {
        Some(d) => d.to_path_buf(),
        None => results::new_run_dir(&task.output, &format!("{}-merged", task.name)),
    };
    let meta = RunMeta {
        shard: Shard::ALL,
        ..meta0
    };
    results::prepare(&dir, &task, &meta)?;
    results::write_events(&dir, &outcome.events)?;
    let mut run = RunSection::new(&outcome, 1, Shard::ALL);
    run.merged_shards = Some(dirs.len());
    let summary = Summary::new(&task, &outcome, run);
    let markdown = results::write_summary(&dir, &summary)?;
    plots::write_all(&dir, &task, &outcome.events, &summary)?;
    Ok(RunReport {
        dir,
        markdown,
        outcome,
    })
}

/// Shown unreadable programs of a cache, at most.
const SHOW_UNREADABLE: usize = 5;

fn check_cache(path: &Path, frontend: Option<&str>) -> Result<String> {
    let frontends = ndvm_frontends::Registry::default();
    let default =
        frontends
            .choose(frontend, Some(path))
            .map_err(|message| SearchError::BadArgument {
                arg: format!("--frontend {}", frontend.unwrap_or_default()),
                message,
            })?;
    let (sources, warnings) = replay::read_cache(path)?;
    let mut unreadable = Vec::new();
    for c in &sources {
        let name = c.frontend.as_deref().unwrap_or(default.name());
        let reader = frontends
            .by_name(name)
            .ok_or_else(|| SearchError::CacheLine {
                path: path.to_path_buf(),
                line: c.line,
                message: frontends.unknown(name),
            })?;
        let mut heap = ndvm_core::Heap::new();
        if let Err(e) = reader.parse(&mut heap, &c.src) {
            let at = ndvm_frontends::LineIndex::new(&c.src).line_col(e.span.start);
            unreadable.push(format!(
                "{}:{}: the {name} program does not read: {}:{}: {}",
                path.display(),
                c.line,
                at.0,
                at.1,
                e.message
            ));
        }
    }
    let mut s = format!(
        "{}: {} candidates, {} read",
        path.display(),
        sources.len(),
        sources.len() - unreadable.len()
    );
    for w in warnings
        .into_iter()
        .chain(unreadable.iter().take(SHOW_UNREADABLE).cloned())
    {
        s.push_str(&format!("\nwarning: {w}"));
    }
    if unreadable.len() > SHOW_UNREADABLE {
        s.push_str(&format!(
            "\nwarning: … and {} more that do not read",
            unreadable.len() - SHOW_UNREADABLE
        ));
    }
    Ok(s)
}

/// Checks a task file (`.yaml`/`.yml`) or a candidate cache (`.jsonl`); returns a one-line verdict.
/// A cache's programs are read by their front ends: the line's `frontend`, else `frontend`, else
/// the one for the cache's file name; a program that does not read is a warning (an LLM's
/// answer may be kept for the record), an unknown front end an error.
pub fn check(path: &Path, frontend: Option<&str>) -> Result<String> {
    if path.extension().is_some_and(|e| e == "jsonl") {
        return check_cache(path, frontend);
    }
    if let Some(name) = frontend {
        return Err(SearchError::BadArgument {
            arg: format!("--frontend {name}"),
            message: "applies to caches (.jsonl); a task names its front end with `frontend:`"
                .into(),
        });
    }
    let t = task::load_to_check(path)?;
    preflight(&t, &results::new_run_dir(&t.output, &t.name))?;
    let unbuilt = if t.llm().is_some() && !cfg!(feature = "llm") {
        " (running it needs a build with the `llm` feature: cargo install --path search --features llm)"
    } else {
        ""
    };
    Ok(format!(
        "{}: task `{}`: {} train / {} validation rows, {} test tables, {} parameters, proposer {}{unbuilt}",
        path.display(),
        t.name,
        t.train.n_rows(),
        t.validation.n_rows(),
        t.tests.len(),
        t.params.len(),
        match t.proposer {
            task::ProposerConfig::Evolve { .. } if t.llm().is_some() => "evolve (seeded by llm)",
            task::ProposerConfig::Evolve { .. } => "evolve",
            _ if t.llm().is_some() => "llm",
            task::ProposerConfig::Replay { .. } => "replay",
            task::ProposerConfig::Llm(_) => "llm",
            task::ProposerConfig::Grammar { .. } => "grammar",
        }
    ))
}
