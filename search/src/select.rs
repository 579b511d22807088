//! Model selection: which model of a run's Pareto front is its answer (`selection:`). The
//! finalists (the front's models near the lowest validation error) are refitted with more starts,
//! their constants that act as switches are found, and the rule picks the simplest model the
//! validation data cannot tell apart from the best. The one place the rule lives.
//!
//! The rule (`simplest-equivalent`), over the finalists' refitted fits:
//! 1. the *best* is the finalist with the lowest validation MSE;
//! 2. a finalist is *equivalent* to it when its validation MSE exceeds the best's by at most
//!    [`Rule::tolerance`] of the best's, or by at most [`Rule::standard_errors`] standard errors
//!    of the paired difference of squared residuals (the one-standard-error rule: a difference
//!    the validation rows cannot resolve);
//! 3. among the equivalent finalists, the one without switches (a fitted constant that makes
//!    `exp`, `tanh` or `sigmoid` a step over the data, see [`SWITCH_SPREAD`]) and then the
//!    smallest complexity wins (then the lower error, then the earlier candidate).
//!
//! `cross-validated` (the default) applies the same rule to K-fold cross-validated errors ([`CV_FOLDS`] folds
//! of the training and validation rows together, drawn from the task's seed; each finalist is
//! refitted on the other folds from its fitted constants and predicts the held-out fold), so
//! that the luck of one validation split, on which the search scored every candidate, does not
//! pick the answer.
//!
//! `lowest-error` keeps the run's old answer: the first of the leaderboard, as calibrated.

use std::collections::BTreeMap;

use ndvm_core::{Heap, Node, NodeId, Program};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::engine;
use crate::events::Event;
use crate::task::{MetricName, Selection, Table, Task};

/// The line a run prints once at its start: the rule and its thresholds.
pub fn note(selection: Selection) -> String {
    match selection {
        Selection::SimplestEquivalent => format!(
            "selection: simplest-equivalent (the simplest model on the front within {:.0} % or \
             {} standard error of the lowest validation error, switch-free first, after a \
             refit of the finalists; 'selection: lowest-error' for the lowest error alone)",
            RULE.tolerance * 100.0,
            RULE.standard_errors
        ),
        Selection::LowestError => {
            "selection: lowest-error (the model with the lowest validation error wins)".to_string()
        }
        Selection::CrossValidated => format!(
            "selection: cross-validated (the simplest model on the front within {:.0} % or {} \
             standard error of the lowest {CV_FOLDS}-fold cross-validated error over the training \
             and validation rows, switch-free first, after a refit of the finalists)",
            RULE.tolerance * 100.0,
            RULE.standard_errors
        ),
    }
}

/// The thresholds of the `simplest-equivalent` rule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule {
    /// Relative excess of validation MSE over the best's that still counts as equivalent.
    pub tolerance: f64,
    /// Standard errors of the paired difference of squared residuals that still count as
    /// equivalent.
    pub standard_errors: f64,
}

/// The rule's thresholds, chosen on the selection suite (`results/selection/`).
pub const RULE: Rule = Rule {
    tolerance: 0.25,
    standard_errors: 1.0,
};

/// Front models whose validation error is within this factor of the lowest are finalists.
pub const FINALIST_RATIO: f64 = 4.0;

/// At most this many finalists are refitted (the simplest of them, and the lowest-error one).
pub const MAX_FINALISTS: usize = 8;

/// A finalist's refit uses this many times the task's starts (at least [`MIN_REFIT_STARTS`]).
pub const REFIT_START_FACTOR: usize = 2;

/// The fewest starts of a finalist's refit.
pub const MIN_REFIT_STARTS: usize = 8;

/// Folds of the `cross-validated` rule.
pub const CV_FOLDS: usize = 5;

/// Starts of each fold's refit under `cross-validated` (the first from the finalist's fitted
/// constants).
pub const CV_STARTS: usize = 2;

/// Mixed into the task's seed for the fold assignment (a stream of its own).
const CV_SEED_SALT: u64 = 0x6376_666f_6c64_7321;

/// An `exp`, `tanh` or `sigmoid` whose argument spans more than this over the data rows (with a
/// fitted constant and an input in it) acts as a step there: a switch. (`tanh` is flat to 1e-16
/// past ±19, `exp` of a span of 50 covers 21 decades.)
pub const SWITCH_SPREAD: f64 = 50.0;

/// The functions whose argument is checked for switches.
const SWITCH_FUNCTIONS: [&str; 3] = ["exp", "tanh", "sigmoid"];

/// At most this many call sites of one program are checked for switches.
const MAX_SWITCH_SITES: usize = 32;

/// At most this many heap cells of one program are walked looking for them.
const MAX_WALK: usize = 100_000;

/// A call whose fitted constants make it a step over the data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Switch {
    /// The function (`exp`, `tanh`, `sigmoid`).
    pub function: String,
    /// The fitted constants in its argument.
    pub params: Vec<String>,
    /// Its argument's span (max − min) over the training and validation rows.
    pub spread: f64,
}

/// One finalist: a front model refitted and compared (fields in alphabetical order).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finalist {
    /// Chosen by the rule.
    pub chosen: bool,
    /// Atoms and pairs in the program.
    pub complexity: usize,
    /// NMSE of the cross-validated predictions over the training and validation rows (under
    /// `cross-validated`; the rule compares these).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_validated_nmse: Option<f64>,
    /// Equivalent to the best (see the module's rule).
    pub equivalent: bool,
    /// Candidate id.
    pub id: u64,
    /// Index in the distinct-candidate stream.
    pub index: u64,
    /// The lowest validation error among the finalists (after the refit).
    pub lowest_error: bool,
    /// Fitted parameters after the refit.
    pub params: BTreeMap<String, f64>,
    /// Whether the refit improved on the search's fit (else the search's fit is kept).
    pub refit_improved: bool,
    /// The selection score: the excess of its validation MSE over the best's, in units of what
    /// the rule still calls equivalent (≤ 1: equivalent; 0 for the best).
    pub score: f64,
    /// Constants that act as switches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub switches: Vec<Switch>,
    /// Test scores (computed after the choice; absent without test tables).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<BTreeMap<String, crate::events::TestScore>>,
    /// Training loss after the refit.
    pub train_loss: Option<f64>,
    /// Validation NMSE after the refit.
    pub validation_nmse: f64,
    /// The paired difference of squared validation residuals from the best's, in standard errors.
    pub z: f64,
}

/// `selection` in `summary.json`: how the answer was chosen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SelectionReport {
    /// The chosen candidate's id.
    pub chosen: Option<u64>,
    /// The finalists compared, simplest first (empty under `lowest-error`).
    pub finalists: Vec<Finalist>,
    /// The lowest-error candidate's id (the leaderboard's first, as calibrated).
    pub lowest_error: Option<u64>,
    /// Why the chosen model won, in one line.
    pub reason: String,
    /// The rule.
    pub rule: Selection,
}

/// The outcome of [`choose`]: the report and the chosen model's event (refitted).
pub struct Choice {
    /// What `summary.json` says.
    pub report: SelectionReport,
    /// The chosen event, with the refit's parameters and scores.
    pub chosen: Option<Event>,
}

/// An event's error on the front: NMSE (1 − R²) or the training loss.
fn error_of(e: &Event, metric: MetricName) -> f64 {
    let s = e.score(metric).unwrap_or(f64::NAN);
    match metric {
        MetricName::R2 => 1.0 - s,
        MetricName::Loss => -s,
    }
}

/// The Pareto front of `ranked` (events with a score): by complexity, those with strictly lower
/// error than every simpler one, simplest first.
pub fn front<'a>(ranked: &[&'a Event], metric: MetricName) -> Vec<&'a Event> {
    let mut by_cx = ranked.to_vec();
    by_cx.sort_by(|a, b| a.complexity.cmp(&b.complexity).then(a.index.cmp(&b.index)));
    let mut out = Vec::new();
    let mut best = f64::INFINITY;
    for e in by_cx {
        let error = error_of(e, metric);
        if error < best {
            best = error;
            out.push(e);
        }
    }
    out
}

/// Chooses the run's answer among `ranked` (events with a score, best first) by the task's rule.
pub fn choose(task: &Task, ranked: &[&Event]) -> Choice {
    let lowest = ranked.first().map(|e| e.id);
    let plain = |reason: String| Choice {
        report: SelectionReport {
            chosen: lowest,
            finalists: Vec::new(),
            lowest_error: lowest,
            reason,
            rule: task.selection,
        },
        chosen: ranked.first().map(|e| (*e).clone()),
    };
    if ranked.is_empty() {
        return plain("no candidate has a score".to_string());
    }
    if task.selection == Selection::LowestError {
        return plain("the lowest validation error (selection: lowest-error)".to_string());
    }
    if task.metric != MetricName::R2 || task.validation.n_rows() < 2 {
        return plain(
            "the lowest error: without validation rows there is nothing to compare models on"
                .to_string(),
        );
    }
    let finalists = finalists(ranked, task.metric);
    let fits: Vec<Option<Fit>> = finalists.par_iter().map(|e| refitted(task, e)).collect();
    let mut compared: Vec<(Event, Fit)> = finalists
        .iter()
        .zip(fits)
        .filter_map(|(e, f)| f.map(|f| ((*e).clone(), f)))
        .collect();
    if task.selection == Selection::CrossValidated {
        compared = cross_validate(task, compared);
    }
    if compared.is_empty() {
        return plain("the lowest error: no finalist could be refitted".to_string());
    }
    compared.sort_by(|a, b| {
        a.0.complexity
            .cmp(&b.0.complexity)
            .then(a.0.index.cmp(&b.0.index))
    });
    decide(task, compared, lowest)
}

/// The front's models within [`FINALIST_RATIO`] of the lowest error: the lowest-error one and
/// the simplest others, [`MAX_FINALISTS`] in all.
fn finalists<'a>(ranked: &[&'a Event], metric: MetricName) -> Vec<&'a Event> {
    let front = front(ranked, metric);
    let best = front
        .iter()
        .map(|e| error_of(e, metric))
        .fold(f64::INFINITY, f64::min);
    let near: Vec<&Event> = front
        .into_iter()
        .filter(|e| error_of(e, metric) <= best * FINALIST_RATIO)
        .collect();
    let mut out: Vec<&Event> = near.iter().take(MAX_FINALISTS - 1).copied().collect();
    if let Some(last) = near.last()
        && !out.iter().any(|e| e.index == last.index)
    {
        out.push(last);
    }
    out
}

/// A finalist's fit after its refit: parameters, losses, validation residuals, switches.
struct Fit {
    params: BTreeMap<String, f64>,
    train_loss: f64,
    improved: bool,
    /// The residuals the rule compares: on the validation rows, or (`cross-validated`) the
    /// cross-validated ones on the pooled rows.
    residuals: Vec<f64>,
    nmse: f64,
    /// NMSE of the cross-validated residuals (`cross-validated` only).
    cv_nmse: Option<f64>,
    r2: f64,
    switches: Vec<Switch>,
}

/// Refits `e` on the training rows with more starts (the first from its fitted constants), keeps
/// the better of the two fits by training loss, and scores it on the validation rows.
fn refitted(task: &Task, e: &Event) -> Option<Fit> {
    let starts = (task.calibrate.n_starts * REFIT_START_FACTOR).max(MIN_REFIT_STARTS);
    let original = e.train_loss?;
    let (params, train_loss, improved) = match engine::refit(task, e, &task.train, starts) {
        Some((p, loss)) if loss < original => (p, loss, true),
        _ => (e.params.clone(), original, false),
    };
    let mut heap = Heap::new();
    let program = engine::parse(task, &mut heap, &e.frontend, &e.src).ok()?;
    let pred = engine::predict(task, &mut heap, &program, &params, &task.validation).ok()?;
    let (r2, nmse) = engine::metrics(&pred, &task.validation.target)?;
    let residuals = pred
        .iter()
        .zip(&task.validation.target)
        .map(|(p, y)| p - y)
        .collect();
    let switches = switches(task, &mut heap, &program, &params);
    Some(Fit {
        params,
        train_loss,
        improved,
        residuals,
        nmse,
        cv_nmse: None,
        r2,
        switches,
    })
}

/// The training and validation rows together, and the fold of each: a ChaCha8 shuffle of the
/// rows from the task's seed, dealt round-robin into [`CV_FOLDS`] folds.
pub fn folds(task: &Task) -> (Table, Vec<usize>) {
    let pooled = task.train.concat(&task.validation);
    let mut order: Vec<usize> = (0..pooled.n_rows()).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(task.seed ^ CV_SEED_SALT));
    let mut fold = vec![0; order.len()];
    for (position, &row) in order.iter().enumerate() {
        fold[row] = position % CV_FOLDS;
    }
    (pooled, fold)
}

/// The finalists with their residuals replaced by cross-validated ones (see [`folds`]); a
/// finalist whose cross-validated predictions are not all finite drops out.
fn cross_validate(task: &Task, compared: Vec<(Event, Fit)>) -> Vec<(Event, Fit)> {
    let (pooled, fold) = folds(task);
    let n = pooled.n_rows().max(1) as f64;
    let mean = pooled.target.iter().sum::<f64>() / n;
    let var = pooled
        .target
        .iter()
        .map(|y| (y - mean) * (y - mean))
        .sum::<f64>()
        / n;
    compared
        .into_par_iter()
        .filter_map(|(e, mut f)| {
            let residuals = cross_validated(task, &e, &f.params, &pooled, &fold)?;
            let mse = residuals.iter().map(|r| r * r).sum::<f64>() / residuals.len() as f64;
            f.cv_nmse = Some(mse / var);
            f.residuals = residuals;
            Some((e, f))
        })
        .collect()
}

/// `e`'s residual on every pooled row, each predicted by a fit on the other folds (from
/// `params`; where a fold's fit fails, `params` themselves predict it).
fn cross_validated(
    task: &Task,
    e: &Event,
    params: &BTreeMap<String, f64>,
    pooled: &Table,
    fold: &[usize],
) -> Option<Vec<f64>> {
    let mut heap = Heap::new();
    let program = engine::parse(task, &mut heap, &e.frontend, &e.src).ok()?;
    let mut start = e.clone();
    start.params = params.clone();
    let mut residuals = vec![f64::NAN; pooled.n_rows()];
    for k in 0..CV_FOLDS {
        let (held, kept): (Vec<usize>, Vec<usize>) =
            (0..pooled.n_rows()).partition(|&r| fold[r] == k);
        if held.is_empty() {
            continue;
        }
        let fitted = engine::refit(task, &start, &pooled.take(&kept), CV_STARTS)
            .map_or_else(|| params.clone(), |(p, _)| p);
        let held_rows = pooled.take(&held);
        let pred = engine::predict(task, &mut heap, &program, &fitted, &held_rows).ok()?;
        for ((&row, p), y) in held.iter().zip(&pred).zip(&held_rows.target) {
            residuals[row] = p - y;
        }
    }
    residuals.iter().all(|r| r.is_finite()).then_some(residuals)
}

/// Mean and standard error of the paired differences `a_i² − b_i²`.
fn paired(a: &[f64], b: &[f64]) -> (f64, f64) {
    let n = a.len().min(b.len());
    if n < 2 {
        return (0.0, 0.0);
    }
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| x * x - y * y).collect();
    let mean = d.iter().sum::<f64>() / n as f64;
    let var = d.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1) as f64;
    (mean, (var / n as f64).sqrt())
}

/// Applies the rule to the refitted finalists (simplest first).
fn decide(task: &Task, compared: Vec<(Event, Fit)>, lowest: Option<u64>) -> Choice {
    let mse = |f: &Fit| f.residuals.iter().map(|r| r * r).sum::<f64>() / f.residuals.len() as f64;
    let best = (0..compared.len())
        .min_by(|&i, &j| {
            mse(&compared[i].1)
                .total_cmp(&mse(&compared[j].1))
                .then(i.cmp(&j))
        })
        .unwrap_or(0);
    let best_mse = mse(&compared[best].1);
    let mut rows: Vec<(f64, f64)> = Vec::new();
    for (_, f) in &compared {
        let (diff, se) = paired(&f.residuals, &compared[best].1.residuals);
        let allowed = (RULE.tolerance * best_mse).max(RULE.standard_errors * se);
        let score = if diff <= 0.0 {
            0.0
        } else if allowed > 0.0 {
            diff / allowed
        } else {
            f64::INFINITY
        };
        let z = if se > 0.0 { diff / se } else { 0.0 };
        rows.push((score, z));
    }
    let equivalent = |i: usize| rows[i].0 <= 1.0;
    let chosen = (0..compared.len())
        .filter(|&i| equivalent(i))
        .min_by(|&i, &j| {
            let (a, b) = (&compared[i], &compared[j]);
            (!a.1.switches.is_empty())
                .cmp(&!b.1.switches.is_empty())
                .then(a.0.complexity.cmp(&b.0.complexity))
                .then(mse(&a.1).total_cmp(&mse(&b.1)))
                .then(a.0.index.cmp(&b.0.index))
        })
        .unwrap_or(best);
    let reason = reason(&compared, chosen, best, rows[chosen]);
    let mut finalists = Vec::new();
    let mut chosen_event = None;
    for (i, (e, f)) in compared.into_iter().enumerate() {
        let mut refit = e.clone();
        refit.params = f.params.clone();
        refit.train_loss = Some(f.train_loss);
        refit.validation_nmse = Some(f.nmse);
        refit.validation_r2 = Some(f.r2);
        let test = (!task.tests.is_empty()).then(|| engine::test_table(task, &refit));
        finalists.push(Finalist {
            chosen: i == chosen,
            complexity: e.complexity,
            cross_validated_nmse: f.cv_nmse,
            equivalent: equivalent(i),
            id: e.id,
            index: e.index,
            lowest_error: i == best,
            params: f.params,
            refit_improved: f.improved,
            score: rows[i].0,
            switches: f.switches,
            test,
            train_loss: Some(f.train_loss),
            validation_nmse: f.nmse,
            z: rows[i].1,
        });
        if i == chosen {
            chosen_event = Some(refit);
        }
    }
    Choice {
        report: SelectionReport {
            chosen: chosen_event.as_ref().map(|e| e.id),
            finalists,
            lowest_error: lowest,
            reason,
            rule: task.selection,
        },
        chosen: chosen_event,
    }
}

/// The one line that says why `chosen` won over `best`.
fn reason(compared: &[(Event, Fit)], chosen: usize, best: usize, (score, z): (f64, f64)) -> String {
    let (c, b) = (&compared[chosen], &compared[best]);
    let n = compared.len();
    // The errors the rule compared: cross-validated ones, or on the validation rows.
    let (basis, rows) = match c.1.cv_nmse {
        Some(_) => ("cross-validated", "the cross-validated errors"),
        None => ("validation", "the validation rows"),
    };
    let shown = |f: &Fit| f.cv_nmse.unwrap_or(f.nmse);
    if chosen == best {
        let simpler = compared
            .iter()
            .filter(|(e, _)| e.complexity < c.0.complexity)
            .count();
        return format!(
            "candidate {} has the lowest {basis} error of {n} refitted finalists (NMSE {:.3e}); \
             none of the {simpler} simpler ones is within {:.0} % or {} standard error of it",
            c.0.id,
            shown(&c.1),
            RULE.tolerance * 100.0,
            RULE.standard_errors
        );
    }
    let switch_note = if b.1.switches.is_empty() {
        String::new()
    } else {
        format!(
            "; the lowest-error model uses {} switch constant(s)",
            b.1.switches.len()
        )
    };
    format!(
        "candidate {} (complexity {}, NMSE {:.3e}) is the simplest of {n} refitted finalists that \
         {rows} cannot tell apart from the lowest-error candidate {} (complexity {}, \
         NMSE {:.3e}): {:+.1} % error, {:.2} standard errors, score {:.2} ≤ 1{switch_note}",
        c.0.id,
        c.0.complexity,
        shown(&c.1),
        b.0.id,
        b.0.complexity,
        shown(&b.1),
        (shown(&c.1) / shown(&b.1) - 1.0) * 100.0,
        z,
        score
    )
}

/// The calls of `program` whose argument, a closed expression of inputs and fitted constants,
/// spans more than [`SWITCH_SPREAD`] over the training and validation rows.
pub fn switches(
    task: &Task,
    heap: &mut Heap,
    program: &Program,
    params: &BTreeMap<String, f64>,
) -> Vec<Switch> {
    let mut out = Vec::new();
    for (function, arg) in call_sites(heap, program) {
        let Some(names) = closed_params(task, heap, arg, params) else {
            continue;
        };
        let Some(spread) = spread(task, heap, arg, params) else {
            continue;
        };
        if spread > SWITCH_SPREAD {
            out.push(Switch {
                function,
                params: names,
                spread,
            });
        }
    }
    out
}

/// `(f arg)` sites of the switch functions, in walk order, at most [`MAX_SWITCH_SITES`].
fn call_sites(heap: &Heap, program: &Program) -> Vec<(String, NodeId)> {
    let mut out = Vec::new();
    let mut stack: Vec<NodeId> = program.forms().iter().rev().copied().collect();
    let mut walked = 0;
    while let Some(id) = stack.pop() {
        walked += 1;
        if walked > MAX_WALK || out.len() >= MAX_SWITCH_SITES {
            break;
        }
        let Node::Pair(head, rest) = heap.node(id) else {
            continue;
        };
        if let Node::Sym(s) = heap.node(head)
            && let Node::Pair(arg, tail) = heap.node(rest)
            && heap.node(tail) == Node::Nil
        {
            let name = heap.symbol_name(s);
            if SWITCH_FUNCTIONS.contains(&name) {
                out.push((name.to_string(), arg));
            }
        }
        stack.push(rest);
        stack.push(head);
    }
    out
}

/// The fitted constants in `arg` when it is a closed expression of inputs, fitted constants,
/// numbers and primitives with at least one of each of the first two; `None` otherwise.
fn closed_params(
    task: &Task,
    heap: &Heap,
    arg: NodeId,
    params: &BTreeMap<String, f64>,
) -> Option<Vec<String>> {
    let mut names = Vec::new();
    let mut has_input = false;
    let mut stack = vec![arg];
    let mut walked = 0;
    while let Some(id) = stack.pop() {
        walked += 1;
        if walked > MAX_WALK {
            return None;
        }
        match heap.node(id) {
            Node::Pair(a, d) => {
                stack.push(d);
                stack.push(a);
            }
            Node::Sym(s) => {
                let name = heap.symbol_name(s);
                if params.contains_key(name) {
                    if !names.iter().any(|n| n == name) {
                        names.push(name.to_string());
                    }
                } else if task.inputs.iter().any(|i| i == name) {
                    has_input = true;
                } else if !ndvm_core::is_primitive(name) {
                    return None;
                }
            }
            Node::Nil | Node::Num(_) => {}
            Node::Bool(_) => return None,
        }
    }
    (has_input && !names.is_empty()).then(|| {
        names.sort();
        names
    })
}

/// max − min of `arg` over the training and validation rows (`None` when not finite).
fn spread(
    task: &Task,
    heap: &mut Heap,
    arg: NodeId,
    params: &BTreeMap<String, f64>,
) -> Option<f64> {
    let probe = Program::new(heap, vec![arg]);
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for table in [&task.train, &task.validation] {
        if table.n_rows() == 0 {
            continue;
        }
        let values = engine::predict(task, heap, &probe, params, table).ok()?;
        for v in values {
            if !v.is_finite() {
                return None;
            }
            lo = lo.min(v);
            hi = hi.max(v);
        }
    }
    (hi >= lo).then_some(hi - lo)
}
