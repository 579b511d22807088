//! The co-search engine: pulls candidates from a proposer, validates and deduplicates them by
//! skeleton, calibrates them on a pool of worker threads with no round barrier (the `stream`
//! scheduler; results put back in index order so any thread count gives the same outcome),
//! scores on validation, and stops on budget, exhaustion or success. Shards take every n-th
//! distinct candidate; known events (resume, merge) are reused, not redone.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use ndvm_core::{Cancel, EvalOptions, Evaluation, Evaluator, Heap, Inputs, Program};
use ndvm_optimizers::{
    CalibrateConfig, Calibration, Calibrator, Dataset, Optimizer, ParamSpec, Polish, Shared,
};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::observe::Observer;
use crate::propose::{self, Candidate};
use crate::task::{Table, Task};
use crate::validate::Checked;

mod stream;
pub mod worker;

pub use crate::events::{
    ChoiceEvent, Event, EventStatus, Outcome, Shard, StopKind, StreamStats, TestScore,
    fallback_frontend,
};

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Worker threads for calibration.
    pub threads: usize,
    /// Which slice of the stream to calibrate.
    pub shard: Shard,
    /// Results already known by candidate index (from `events.jsonl` on resume, or all shards on
    /// merge); they are reused, not recalibrated.
    pub known: HashMap<u64, Event>,
    /// When false, a needed result that is not known is an error (merge).
    pub calibrate_missing: bool,
    /// Where a `begin` record is written before each calibration (see [`crate::begun::BeginLog`]).
    pub begin_log: Option<std::sync::Arc<crate::begun::BeginLog>>,
    /// Candidate indices whose calibration killed an earlier process: each gets a `crashed`
    /// event and is not calibrated again.
    pub crashed: HashSet<u64>,
    /// Candidate indices that were running together when an earlier process died: each is
    /// calibrated again alone (one at a time, nothing else in flight), so that a culprit
    /// dies alone and is marked `crashed` by the next resume.
    pub suspects: HashSet<u64>,
    /// When raised (Ctrl-C), no new calibration starts; the run stops after those in flight.
    pub interrupt: Option<crate::interrupt::Interrupt>,
}

impl RunOptions {
    /// Options for a fresh run of the whole stream on `threads` threads.
    pub fn new(threads: usize) -> Self {
        RunOptions {
            threads,
            shard: Shard::ALL,
            known: HashMap::new(),
            calibrate_missing: true,
            begin_log: None,
            crashed: HashSet::new(),
            suspects: HashSet::new(),
            interrupt: None,
        }
    }
}

/// A validated candidate on its way to a worker.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub(crate) index: u64,
    pub(crate) cand: Candidate,
    pub(crate) checked: Checked,
}

/// Runs a task on the streaming scheduler (see [`stream`]).
pub fn run(task: &Task, opts: &RunOptions, observer: &mut dyn Observer) -> Result<Outcome> {
    let mut proposer = propose::for_task(task)?;
    let attempt = |p: &Pending, deadline: Option<Instant>| attempt(task, opts, p, deadline);
    stream::run(task, opts, &mut *proposer, observer, &attempt)
}

/// The run's clock: seconds since this session started plus where the events on disk end.
#[derive(Clone, Copy, Debug)]
struct RunClock {
    started: Instant,
    offset: f64,
}

impl RunClock {
    fn now(self) -> f64 {
        self.offset + self.started.elapsed().as_secs_f64()
    }
}

/// The latest `finished_s` of `events`, or `None` when one of them has none (written before the
/// field existed).
fn latest_finish(events: &[Event]) -> Option<f64> {
    events
        .iter()
        .try_fold(0.0, |latest: f64, e| e.finished_s.map(|f| latest.max(f)))
}

/// The calibrator's dataset of `table` (columns named by the task's inputs, shared inputs added).
pub fn dataset(task: &Task, table: &Table) -> Dataset {
    let mut d = Dataset::new();
    for (name, col) in task.inputs.iter().zip(&table.columns) {
        d = d.column(name, col.clone());
    }
    if !table.target.is_empty() {
        d = d.target(table.target.clone());
    }
    for (name, value) in &task.shared {
        d.shared.push((name.clone(), value.clone()));
    }
    d
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Environment variable of a test-only hook: the process aborts (as on a native crash) when it
/// starts calibrating the candidate with this index. Tests use it to show that resume marks the
/// candidate `crashed`; nothing else sets it.
pub const TEST_ABORT_HOOK: &str = "NDVM_TEST_ABORT_AT_INDEX";

/// Test-only: milliseconds to sleep before each calibration, so that a test can signal a run
/// surely mid-way (the Slurm test cancels a shard). Results do not change; nothing else sets it.
pub const TEST_PAUSE_HOOK: &str = "NDVM_TEST_PAUSE_MS";

/// One calibration as the run sees it: nothing once the run is interrupted; a known crash becomes
/// a `crashed` event; otherwise the `begin` record is written first (so a process death names
/// the candidate), then it runs.
fn attempt(
    task: &Task,
    opts: &RunOptions,
    p: &Pending,
    deadline: Option<Instant>,
) -> Option<Event> {
    pause_if_hooked();
    if opts.interrupt.as_ref().is_some_and(|i| i.is_raised()) {
        return None;
    }
    if opts.crashed.contains(&p.index) {
        let mut ev = blank_event(task, p);
        ev.status = EventStatus::Crashed;
        ev.error_class = Some("crashed".to_string());
        ev.error = Some("the process died while calibrating this candidate".to_string());
        return Some(ev);
    }
    if let Some(log) = &opts.begin_log {
        log.begin(p.index, p.cand.id);
    }
    let cancel = opts.interrupt.as_ref().map(|i| i.in_flight());
    let ev = match task.isolation {
        crate::task::Isolation::Thread => {
            abort_if_hooked(p.index);
            calibrate_one(task, p, deadline, cancel)
        }
        crate::task::Isolation::Process => worker::calibrate_in_process(task, p, deadline, cancel),
    };
    if let Some(log) = &opts.begin_log {
        log.end(p.index);
    }
    if cancel.is_some_and(Cancel::is_raised) {
        // Cut in flight (`Interrupt::cancel_in_flight`): not a result; a resume calibrates it.
        return None;
    }
    if ev.status == EventStatus::Crashed && opts.interrupt.as_ref().is_some_and(|i| i.is_raised()) {
        // The interrupt's signal may reach a worker being spawned (before it leaves the run's
        // process group): that death is not the candidate's, so it stays unfinished for a resume.
        return None;
    }
    Some(ev)
}

/// The test-only pause (see [`TEST_PAUSE_HOOK`]).
fn pause_if_hooked() {
    if let Some(ms) = std::env::var(TEST_PAUSE_HOOK)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// The test-only hook (see [`TEST_ABORT_HOOK`]).
pub(crate) fn abort_if_hooked(index: u64) {
    if std::env::var(TEST_ABORT_HOOK).is_ok_and(|v| v.trim() == index.to_string()) {
        std::process::abort();
    }
}

pub(crate) fn blank_event(task: &Task, p: &Pending) -> Event {
    Event {
        index: p.index,
        id: p.cand.id,
        src: p.cand.src.clone(),
        frontend: p.cand.frontend.clone(),
        skeleton: p.checked.skeleton.clone(),
        complexity: p.checked.complexity,
        seed: task.calibrate.seed,
        params: BTreeMap::new(),
        choices: Vec::new(),
        train_loss: None,
        validation_r2: None,
        validation_nmse: None,
        status: EventStatus::Ok,
        stop_reason: None,
        error: None,
        error_class: None,
        limit: None,
        screen_rows: None,
        n_evals: 0,
        wall_ms: 0.0,
        finished_s: None,
    }
}

/// A failed calibration or prediction: its stable class and message.
#[derive(Debug)]
pub struct Failure {
    /// See [`Event::error_class`].
    pub class: &'static str,
    /// What went wrong.
    pub message: String,
}

impl From<ndvm_core::CoreError> for Failure {
    fn from(e: ndvm_core::CoreError) -> Self {
        Failure {
            class: e.kind.class(),
            message: e.to_string(),
        }
    }
}

/// The `limit` field of a failure of class `class` under `cfg` and a deadline of `seconds`.
fn limit_hit(class: &str, cfg: &ndvm_optimizers::CalibrateConfig, seconds: f64) -> Option<String> {
    match class {
        "work" => Some(format!("max_work={}", cfg.max_work)),
        "memory" => Some(format!("max_memory={}", cfg.max_memory)),
        "depth" => Some(format!("max_depth={}", cfg.max_depth)),
        "deadline" => Some(format!("seconds={seconds}")),
        _ => None,
    }
}

/// Calibrates one candidate under the run's `deadline`; a raised `cancel` stops it at its next
/// evaluation (the caller then discards the event).
pub(crate) fn calibrate_one(
    task: &Task,
    p: &Pending,
    deadline: Option<Instant>,
    cancel: Option<&Cancel>,
) -> Event {
    let started = Instant::now();
    let mut cfg = task.calibrate.clone();
    cfg.cancel = cancel.cloned();
    cfg.params = p
        .checked
        .params
        .iter()
        .filter_map(|n| task.params.iter().find(|s| &s.name == n).cloned())
        .map(|mut spec| {
            // An inherited fitted value is the first start (if it is a valid start for its kind).
            if let Some(&v) = p.cand.init.get(&spec.name)
                && spec.kind.admits(v)
            {
                spec.init = v;
            }
            spec
        })
        .collect::<Vec<ParamSpec>>();
    let own = Duration::from_secs_f64(task.limits.seconds);
    let time_limit = match deadline {
        Some(d) => own.min(d.saturating_duration_since(Instant::now())),
        None => own,
    };
    cfg.time_limit = Some(time_limit);
    // `cfg.seed` is the task's calibrator seed, as in `blank_event`.
    let mut ev = blank_event(task, p);
    let res = (|| -> std::result::Result<(), Failure> {
        let mut heap = Heap::new();
        let program = parse(task, &mut heap, &p.cand.frontend, &p.cand.src)?;
        let fit = match &task.screen {
            None => fit(&mut heap, &program, &cfg, &dataset(task, &task.train))?,
            Some(screen) => {
                ev.screen_rows = Some(screen.rows() as u64);
                let first = fit(&mut heap, &program, &cfg, &dataset(task, &screen.train))?;
                if first.loss.is_finite() {
                    let again = refit_config(&cfg, &first, &heap, &program, started)?;
                    let mut second = fit(&mut heap, &program, &again, &dataset(task, &task.train))?;
                    second.n_evals += first.n_evals;
                    second
                } else {
                    first
                }
            }
        };
        ev.n_evals = fit.n_evals;
        ev.stop_reason = Some(fit.stop_reason.to_string());
        ev.params = fit
            .names
            .iter()
            .cloned()
            .zip(fit.params.iter().copied())
            .collect();
        ev.choices = fit.choices.iter().map(ChoiceEvent::from).collect();
        ev.train_loss = finite(fit.loss);
        if ev.train_loss.is_none() {
            ev.status = EventStatus::NonFinite;
            return Ok(());
        }
        if !task.validation.target.is_empty() {
            let pred = predict(task, &mut heap, &program, &ev.params, &task.validation)?;
            match metrics(&pred, &task.validation.target) {
                Some((r2, nmse)) => {
                    ev.validation_r2 = Some(r2);
                    ev.validation_nmse = Some(nmse);
                }
                None => ev.status = EventStatus::NonFinite,
            }
        }
        Ok(())
    })();
    if let Err(e) = res {
        ev.status = EventStatus::Error;
        ev.limit = limit_hit(e.class, &cfg, time_limit.as_secs_f64());
        ev.error_class = Some(e.class.to_string());
        ev.error = Some(e.message);
    }
    ev.wall_ms = started.elapsed().as_secs_f64() * 1e3;
    ev
}

thread_local! {
    /// This thread's calibrator: its pooled evaluators serve every calibration the thread runs.
    static CALIBRATOR: std::cell::RefCell<Option<Calibrator>> = const { std::cell::RefCell::new(None) };
}

/// One calibration of `program` under `cfg` on `data`, by this thread's calibrator.
fn fit(
    heap: &mut Heap,
    program: &Program,
    cfg: &CalibrateConfig,
    data: &Dataset,
) -> std::result::Result<Calibration, Failure> {
    CALIBRATOR.with_borrow_mut(|slot| fit_with(slot, heap, program, cfg, data))
}

/// One calibration by the calibrator in `slot` (made there when it is empty), reconfigured to
/// `cfg`.
fn fit_with(
    slot: &mut Option<Calibrator>,
    heap: &mut Heap,
    program: &Program,
    cfg: &CalibrateConfig,
    data: &Dataset,
) -> std::result::Result<Calibration, Failure> {
    let failure = |e: ndvm_optimizers::CalibrateError| Failure {
        class: e.class(),
        message: e.to_string(),
    };
    let cal = match slot {
        Some(cal) => {
            cal.reconfigure(cfg.clone()).map_err(failure)?;
            cal
        }
        None => slot.insert(Calibrator::new(cfg.clone()).map_err(failure)?),
    };
    cal.calibrate(heap, program, data).map_err(failure)
}

/// Most L-BFGS iterations of the refit on every training row after a screen.
pub const REFIT_ITERS: usize = 50;

/// The refit after a screen that ended at `screened`: one L-BFGS start (at most
/// [`REFIT_ITERS`] iterations, and `cfg.max_iters`) from the screen's fitted values, in what is
/// left of `cfg`'s time limit since `started`.
fn refit_config(
    cfg: &CalibrateConfig,
    screened: &Calibration,
    heap: &Heap,
    program: &Program,
    started: Instant,
) -> std::result::Result<CalibrateConfig, Failure> {
    let mut again = cfg.clone();
    again.optimizer = if cfg.optimizer == Optimizer::Lm || cfg.polish == Polish::Lm {
        Optimizer::Lm
    } else {
        Optimizer::Lbfgs
    };
    again.n_starts = 1;
    again.max_iters = cfg.max_iters.min(REFIT_ITERS);
    again.time_limit = cfg.time_limit.map(|t| t.saturating_sub(started.elapsed()));
    // Every fitted parameter, the task's or the program's own `(params …)`, starts where the
    // screen ended (its kind: the task's spec replaces the program's declaration).
    let declared = ndvm_core::params::declarations(heap, program)?;
    for (name, &value) in screened.names.iter().zip(&screened.params) {
        let i = match again.params.iter().position(|s| &s.name == name) {
            Some(i) => i,
            None => match declared.iter().find(|d| &d.name == name) {
                Some(d) => {
                    again.params.push(ParamSpec::new(&d.name, d.kind, d.init));
                    again.params.len() - 1
                }
                None => continue,
            },
        };
        let spec = &mut again.params[i];
        if spec.kind.admits(value) {
            spec.init = value;
        }
    }
    Ok(again)
}

/// `ev`'s program calibrated again on `table` with `starts` starts, the first from its fitted
/// constants, without a racing screen (a finalist's refit before model selection): the fitted
/// parameters and the training loss, `None` when the fit fails or is not finite.
pub(crate) fn refit(
    task: &Task,
    ev: &Event,
    table: &Table,
    starts: usize,
) -> Option<(BTreeMap<String, f64>, f64)> {
    let mut heap = Heap::new();
    let program = parse(task, &mut heap, &ev.frontend, &ev.src).ok()?;
    let declared = ndvm_core::params::declarations(&heap, &program).ok()?;
    let mut cfg = task.calibrate.clone();
    cfg.params = ev
        .params
        .iter()
        .filter_map(|(name, &value)| {
            let mut spec = task
                .params
                .iter()
                .find(|s| &s.name == name)
                .cloned()
                .or_else(|| {
                    let d = declared.iter().find(|d| &d.name == name)?;
                    Some(ParamSpec::new(&d.name, d.kind, d.init))
                })?;
            if spec.kind.admits(value) {
                spec.init = value;
            }
            Some(spec)
        })
        .collect();
    cfg.n_starts = starts;
    cfg.race = Vec::new();
    cfg.time_limit = Some(Duration::from_secs_f64(task.limits.seconds));
    let fit = fit(&mut heap, &program, &cfg, &dataset(task, table)).ok()?;
    let loss = finite(fit.loss)?;
    Some((fit.names.into_iter().zip(fit.params).collect(), loss))
}

/// Forward predictions of a program with fixed parameters on a table.
pub fn predict(
    task: &Task,
    heap: &mut Heap,
    program: &Program,
    params: &BTreeMap<String, f64>,
    table: &Table,
) -> std::result::Result<Vec<f64>, Failure> {
    let n = table.n_rows().max(1);
    let c = &task.calibrate;
    let deadline = Instant::now() + Duration::from_secs_f64(task.limits.seconds);
    let mut ev = Evaluator::new(
        EvalOptions::new(n)
            .with_dialect(c.dialect)
            .with_max_steps(c.max_work)
            .with_max_memory(c.max_memory)
            .with_max_depth(c.max_depth)
            .with_deadline(Some(deadline))
            .with_soft_choice(c.soft_choice.settled()),
    );
    let mut inputs = Inputs::new();
    for (name, col) in task.inputs.iter().zip(&table.columns) {
        inputs = inputs.input_lanes(name, col.clone());
    }
    for (name, v) in params {
        inputs = inputs.input(name, *v);
    }
    for (name, value) in &task.shared {
        inputs = match value {
            Shared::Scalar(x) => inputs.input(name, *x),
            Shared::Vector(v) => inputs.vector(name, v.clone()),
            Shared::Matrix { rows, cols, data } => inputs.matrix(name, *rows, *cols, data.clone()),
        };
    }
    let mut out = Evaluation::empty();
    ev.eval_into(heap, program, &inputs, false, &mut out)?;
    Ok((0..n)
        .map(|i| out.value.number(i).unwrap_or(f64::NAN))
        .collect())
}

/// R² and NMSE of predictions against a target; `None` when a prediction is not finite.
pub fn metrics(pred: &[f64], target: &[f64]) -> Option<(f64, f64)> {
    if pred.iter().any(|p| !p.is_finite()) || target.is_empty() {
        return None;
    }
    let n = target.len() as f64;
    let mean = target.iter().sum::<f64>() / n;
    let ss_res: f64 = pred
        .iter()
        .zip(target)
        .map(|(p, y)| (p - y) * (p - y))
        .sum();
    let ss_tot: f64 = target.iter().map(|y| (y - mean) * (y - mean)).sum();
    Some((1.0 - ss_res / ss_tot, ss_res / ss_tot))
}

/// Reads `src` with the front end called `frontend`; an unknown name or a parse error is a
/// `parse` failure of the candidate.
pub fn parse(
    task: &Task,
    heap: &mut Heap,
    frontend: &str,
    src: &str,
) -> std::result::Result<Program, Failure> {
    let failure = |message| Failure {
        class: "parse",
        message,
    };
    let frontend = task
        .frontends
        .by_name(frontend)
        .ok_or_else(|| failure(task.frontends.unknown(frontend)))?;
    frontend.parse(heap, src).map_err(|e| failure(e.message))
}

/// The scores of `e` on every test table.
pub fn test_table(task: &Task, e: &Event) -> BTreeMap<String, TestScore> {
    test_scores(task, e)
        .into_iter()
        .map(|(k, (r2, nmse))| (k, TestScore { nmse, r2 }))
        .collect()
}

/// Test metrics of one event on every test table: name → (R², NMSE).
pub fn test_scores(task: &Task, ev: &Event) -> BTreeMap<String, (Option<f64>, Option<f64>)> {
    let mut out = BTreeMap::new();
    for (name, table) in &task.tests {
        let mut heap = Heap::new();
        let res = parse(task, &mut heap, &ev.frontend, &ev.src)
            .and_then(|program| predict(task, &mut heap, &program, &ev.params, table));
        let m = res.ok().and_then(|p| metrics(&p, &table.target));
        out.insert(name.clone(), (m.map(|m| m.0), m.map(|m| m.1)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndvm_core::ParamKind;

    /// One thread's calibrator serving a run of candidates (different programs, parameters,
    /// optimizers, data sizes and limits, failures among them) gives each the result a fresh
    /// calibrator gives, bit for bit.
    #[test]
    fn a_reused_calibrator_equals_a_fresh_one_bit_for_bit() {
        let programs = [
            "(* a (exp (* b x)))",
            "(+ a (* b x))",
            "(* a (sin (+ (* b x) c)))",
            "(+ c (* a (exp (- 0.0 (* b x)))))",
            "(/ a (+ x b))",
            "(* a (cos (* b x)) (exp (* c x)))",
            "(+ (* a x x) (* b x) c)",
            "(log (* a x))",
            "(* a (sqrt (+ (* b b) x)))",
        ];
        let table = |n: usize| {
            let x: Vec<f64> = (0..n).map(|i| 0.1 + 6.0 * i as f64 / n as f64).collect();
            let y = x
                .iter()
                .map(|x| (-0.3 * x).exp() * (2.0 * x).cos())
                .collect();
            Dataset::new().column("x", x).target(y)
        };
        let mut shared = None;
        let mut results = 0;
        for round in 0..2 {
            for (i, src) in programs.iter().enumerate() {
                let mut cfg = CalibrateConfig::recommended();
                cfg.n_starts = 4 + i % 3;
                cfg.max_iters = 40;
                cfg.screen_iters = 30;
                cfg.seed = i as u64;
                cfg.optimizer = [Optimizer::Portfolio, Optimizer::Adam, Optimizer::Lbfgs][i % 3];
                // A tiny work limit now and then: the pooled evaluators are re-armed each time.
                cfg.max_work = if (i + round) % 4 == 3 {
                    50
                } else {
                    cfg.max_work
                };
                cfg.params = ["a", "b", "c"]
                    .iter()
                    .filter(|p| src.split(|c: char| !c.is_alphanumeric()).any(|t| t == **p))
                    .map(|p| ParamSpec::new(p, ParamKind::Free, 0.5))
                    .collect();
                let data = table(if (i + round) % 2 == 0 { 24 } else { 40 });
                let run = |slot: &mut Option<Calibrator>| {
                    let mut heap = Heap::new();
                    let program = ndvm_frontends::scheme::parse(&mut heap, src).unwrap();
                    fit_with(slot, &mut heap, &program, &cfg, &data).map_err(|e| e.message)
                };
                let fresh = run(&mut None);
                let reused = run(&mut shared);
                match (fresh, reused) {
                    (Ok(f), Ok(r)) => {
                        let bits = |c: &Calibration| {
                            let mut v: Vec<u64> = c.params.iter().map(|x| x.to_bits()).collect();
                            v.push(c.loss.to_bits());
                            v.extend(
                                c.starts
                                    .iter()
                                    .flat_map(|s| s.params.iter().map(|x| x.to_bits())),
                            );
                            (v, c.n_evals, c.stop_reason, c.names.clone())
                        };
                        assert_eq!(bits(&f), bits(&r), "{src}");
                        results += 1;
                    }
                    (f, r) => assert_eq!(f.err(), r.err(), "{src}"),
                }
            }
        }
        // Most of them fitted (the comparison is not only of errors).
        assert!(results >= 12, "{results} fits");
    }
}
