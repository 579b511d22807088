//! `Calibrator`: resolves the parameters, draws the starts, runs the configured optimizer over the
//! batched objective, and picks the best start; `Calibration` and `StartResult` are what it
//! returns.

use std::time::{Duration, Instant};

use ndvm_core::{ErrorKind, Evaluator, Heap, ParamKind, Program, params};

use crate::adam::{self, Adam, AdamRun};
use crate::config::{CalibrateConfig, Loss, Optimizer, ParamSpec, Polish, RaceCut};
use crate::data::Dataset;
use crate::error::{CalibrateError, Result};
use crate::lbfgs::{self, LbfgsRun};
use crate::lm::{self, LmRun};
use crate::multistart;
use crate::objective::Objective;
use crate::stop::{StartState, StartStatus, StopReason, norm};
use crate::transform;

/// How many idle evaluators a calibrator keeps for its next calibration.
const POOL_SIZE: usize = 6;

/// Fits a program's parameters to data. Keep one per worker thread and reuse it: its evaluators
/// (and their decoded programs) survive from one calibration to the next.
#[derive(Debug)]
pub struct Calibrator {
    config: CalibrateConfig,
    pool: Vec<Evaluator>,
    /// The Levenberg–Marquardt system, reused by every polish.
    normal: lm::Normal,
}

/// What one start did.
#[derive(Clone, Debug, PartialEq)]
pub struct StartResult {
    /// Its initial parameters (user space, in `Calibration::names` order).
    pub init: Vec<f64>,
    /// Its best parameters (user space).
    pub params: Vec<f64>,
    /// Its loss there (NaN when it never had a finite loss).
    pub loss: f64,
    /// The norm of dLoss/du there, in the optimizer's unconstrained coordinates.
    pub grad_norm: f64,
    /// Optimizer iterations (Adam steps plus L-BFGS iterations).
    pub iters: usize,
    /// Loss-and-gradient evaluations of this start.
    pub n_evals: u64,
    /// Whether the portfolio polished it with L-BFGS.
    pub polished: bool,
    /// Why it stopped.
    pub status: StartStatus,
    /// The option each `soft-choice` site picks at its best parameters (on its first data
    /// point), in site order; empty for a program without one.
    pub picks: Vec<usize>,
}

/// The structure a calibration chose: one `soft-choice` site's pick at the best start's
/// parameters (the option of the largest logit, at the final temperature, without noise).
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// The site: the soft-choice's ordinal in the program.
    pub site: u32,
    /// The index of the picked option.
    pub index: usize,
    /// The picked option's source, printed as an s-expression.
    pub option: String,
    /// The number of options.
    pub n_options: usize,
    /// softmax(logits / τ) at the final temperature.
    pub weights: Vec<f64>,
}

/// The result of a calibration.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// Parameter names, in the order of every parameter vector here: declared ones first, then
    /// the configuration's additions.
    pub names: Vec<String>,
    /// The best start's parameters (user space, after the transforms).
    pub params: Vec<f64>,
    /// The best start's training loss (NaN when every start was non-finite).
    pub loss: f64,
    /// dLoss/dparams at the best point (user space).
    pub grad: Vec<f64>,
    /// dLoss/du at the best point, in the optimizer's unconstrained coordinates (u = the inverse
    /// transform of each parameter).
    pub grad_free: Vec<f64>,
    /// The norm of `grad_free`: the stationarity the optimizer drives to zero. It vanishes also
    /// at an optimum on the edge of a parameter's domain (a positive parameter tending to 0),
    /// where `grad` need not.
    pub grad_norm: f64,
    /// Coefficient of determination of the best fit, `1 − SS_res / SS_tot` (unweighted), for
    /// losses with a target.
    pub r2: Option<f64>,
    /// Index of the best start in `starts`.
    pub best_start: Option<usize>,
    /// Every start, in start order.
    pub starts: Vec<StartResult>,
    /// Evaluations: one start at one point over all its data points, with or without gradients.
    pub n_evals: u64,
    /// Evaluations that also computed gradients.
    pub n_grad_evals: u64,
    /// Evaluations served by replaying the recorded trace of an earlier one instead of walking the
    /// program (a subset of `n_evals`; see `ndvm_core::EvalOptions::replay`).
    pub n_replayed: u64,
    /// Wall-clock time of the calibration.
    pub wall_time: Duration,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// The `argmax` read-out of the best start's `soft-choice` sites, in site order (empty for a
    /// program without one).
    pub choices: Vec<Choice>,
}

impl Calibration {
    /// The fitted value of parameter `name`.
    pub fn param(&self, name: &str) -> Option<f64> {
        let i = self.names.iter().position(|n| n == name)?;
        Some(self.params[i])
    }
}

impl Calibrator {
    /// A calibrator for `config`, which is checked here.
    pub fn new(config: CalibrateConfig) -> Result<Calibrator> {
        config.validate()?;
        Ok(Calibrator {
            config,
            pool: Vec::new(),
            normal: lm::Normal::default(),
        })
    }

    /// Replaces the configuration (checked here; on an error the old one stays), keeping the
    /// pooled evaluators: one calibrator serves a thread's successive calibrations, whatever each
    /// one's parameters, optimizer and limits. Results equal a fresh calibrator's, bit for bit.
    pub fn reconfigure(&mut self, config: CalibrateConfig) -> Result<()> {
        config.validate()?;
        self.config = config;
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> &CalibrateConfig {
        &self.config
    }

    /// An evaluator for `n_lanes` lanes (pooled when one fits), armed with the configuration's
    /// limits and `deadline`.
    fn evaluator(&mut self, n_lanes: usize, deadline: Option<Instant>) -> Evaluator {
        let (dialect, precision) = (self.config.dialect, self.config.precision);
        let mut ev = match self.pool.iter().position(|e| {
            let o = e.options();
            o.n_lanes == n_lanes && o.dialect == dialect && o.precision == precision
        }) {
            Some(i) => self.pool.swap_remove(i),
            None => Objective::evaluator(n_lanes, dialect, precision),
        };
        let cfg = &self.config;
        ev.set_limits(cfg.max_work, cfg.max_depth, cfg.max_memory);
        ev.set_deadline(deadline);
        ev.set_cancel(cfg.cancel.clone());
        ev.set_soft_choice(cfg.soft_choice.settled());
        ev
    }

    fn give_back(&mut self, obj: Objective) {
        if self.pool.len() >= POOL_SIZE {
            self.pool.remove(0);
        }
        self.pool.push(obj.into_evaluator());
    }

    /// The parameters to fit: the program's declarations, replaced or extended by the
    /// configuration's.
    fn resolve_params(
        &self,
        heap: &Heap,
        program: &Program,
        data: &Dataset,
    ) -> Result<Vec<ParamSpec>> {
        let mut specs: Vec<ParamSpec> = params::declarations(heap, program)?
            .into_iter()
            .map(|d| ParamSpec::new(&d.name, d.kind, d.init))
            .collect();
        for p in &self.config.params {
            match specs.iter_mut().find(|s| s.name == p.name) {
                Some(s) => *s = p.clone(),
                None => specs.push(p.clone()),
            }
        }
        if specs.is_empty() {
            return Err(CalibrateError::NoParameters);
        }
        for name in data.input_names() {
            if specs.iter().any(|s| s.name == name) {
                return Err(CalibrateError::NameClash {
                    name: name.to_string(),
                });
            }
        }
        Ok(specs)
    }

    fn check_loss(&self, data: &Dataset) -> Result<()> {
        let bad = |message: &str| {
            Err(CalibrateError::InvalidData {
                message: message.to_string(),
            })
        };
        match self.config.loss {
            Loss::ProgramLoss if data.target.is_some() => {
                bad("the program-loss takes no target (the program returns the loss)")
            }
            Loss::ProgramLoss => Ok(()),
            _ if data.target.is_none() => bad("this loss needs a target"),
            Loss::WeightedMse if data.weights.is_none() => bad("the weighted MSE needs weights"),
            _ => Ok(()),
        }
    }

    /// Fits the parameters of `program` (on `heap`) to `data`.
    ///
    /// Errors are bad data, a configuration the data contradicts, or a program the evaluator
    /// rejects; running out of iterations or time, or every start going non-finite, ends in
    /// [`Calibration::stop_reason`].
    ///
    /// Every evaluation runs under the configuration's `max_work`, `max_memory` and `max_depth`,
    /// and, with a `time_limit`, under the deadline `start + time_limit`. An evaluation cut by
    /// that deadline ends the calibration with `StopReason::TimeLimit` and the best point so far
    /// when some start has already seen a finite loss; before that (the very first evaluation
    /// never finished in time: an endless loop, say) it is `CalibrateError::Eval` with
    /// `ErrorKind::Deadline`. The final prediction for R² gets a fresh `time_limit` of its own.
    pub fn calibrate(
        &mut self,
        heap: &mut Heap,
        program: &Program,
        data: &Dataset,
    ) -> Result<Calibration> {
        let started = Instant::now();
        data.validate()?;
        self.check_loss(data)?;
        let specs = self.resolve_params(heap, program, data)?;
        let cfg = self.config.clone();
        let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
        let kinds: Vec<ParamKind> = specs.iter().map(|s| s.kind).collect();
        let inits: Vec<f64> = specs.iter().map(|s| s.init).collect();
        let (k, p) = (cfg.n_starts, specs.len());
        let theta0 = multistart::start_points(&kinds, &inits, k, cfg.seed);
        let mut u: Vec<f64> = theta0
            .iter()
            .enumerate()
            .map(|(i, &x)| transform::to_free(kinds[i % p], x))
            .collect();
        let mut starts: Vec<StartState> = u.chunks(p).map(StartState::new).collect();
        let mut polished = vec![false; k];
        let mut n_replayed = 0u64;
        let mut has_choices = false;
        // Forward runs of every start for the soft-choice read-out.
        let mut readout_evals = 0u64;
        let deadline = cfg.time_limit.map(|t| started + t);
        let adam_run = |steps| AdamRun {
            steps,
            learning_rate: cfg.learning_rate,
            tol_grad: cfg.tol_grad,
            target_loss: cfg.target_loss,
            deadline,
            soft_choice: (cfg.soft_choice, cfg.seed),
        };
        let lbfgs_run = LbfgsRun {
            max_iters: cfg.max_iters,
            memory: cfg.lbfgs_memory,
            tol_grad: cfg.tol_grad,
            target_loss: cfg.target_loss,
            deadline,
        };

        if matches!(cfg.optimizer, Optimizer::Adam | Optimizer::Portfolio) {
            let (steps, race) = match cfg.optimizer {
                Optimizer::Adam => (cfg.max_iters, &[][..]),
                _ => (cfg.screen_iters, cfg.race.as_slice()),
            };
            let params = (names.as_slice(), kinds.as_slice());
            let mut tally = (0, false);
            let run = adam_run(steps);
            let res = self.screen(
                (heap, program),
                data,
                params,
                (&mut u, &mut starts),
                run,
                race,
                &mut tally,
            );
            n_replayed += tally.0;
            has_choices |= tally.1;
            absorb_deadline(res, &mut starts)?;
        }
        let params = (names.as_slice(), kinds.as_slice());
        let (to_polish, readout) =
            self.polish_order((heap, program), data, params, &starts, has_choices)?;
        readout_evals += readout;
        let use_lm = cfg.loss != Loss::ProgramLoss
            && match cfg.optimizer {
                Optimizer::Lm => true,
                Optimizer::Portfolio => cfg.polish == Polish::Lm,
                _ => false,
            };
        let lm_run = LmRun {
            max_iters: cfg.max_iters,
            tol_grad: cfg.tol_grad,
            target_loss: cfg.target_loss,
            deadline,
        };
        if !to_polish.is_empty() {
            let run = if use_lm {
                Polisher::Lm(lm_run)
            } else {
                Polisher::Lbfgs(lbfgs_run)
            };
            let each = (&mut starts[..], &mut polished[..]);
            let res = self.polish((heap, program), data, params, each, &to_polish, run);
            let (tally, res) = match res {
                Ok(tally) => (tally, Ok(())),
                Err((tally, e)) => (tally, Err(e)),
            };
            n_replayed += tally.0;
            has_choices |= tally.1;
            absorb_deadline(res, &mut starts)?;
        }

        let best = best_start(&starts);
        let mut n_evals: u64 = starts.iter().map(|s| s.n_evals).sum::<u64>() + readout_evals;
        let n_grad_evals = n_evals - readout_evals;
        let mut fit_r2 = None;
        if let Some(b) = best
            && let Some(target) = &data.target
        {
            let params = (names.as_slice(), kinds.as_slice());
            let (r2, replayed) =
                self.fit_r2((heap, program), data, params, &starts[b].best_u, target);
            n_replayed += replayed;
            fit_r2 = Some(r2?);
            n_evals += 1;
        }
        let (picks, choices) = if has_choices {
            n_evals += k as u64;
            let params = (names.as_slice(), kinds.as_slice());
            self.read_out(heap, program, data, params, &starts, best)?
        } else {
            (vec![Vec::new(); k], Vec::new())
        };
        let results = start_results(&starts, (&theta0, &kinds), &polished, picks);
        let (params, loss, grad, grad_free, stop_reason) =
            best_fit(&results, &starts, best, &inits);
        Ok(Calibration {
            names,
            grad_norm: norm(&grad_free),
            params,
            loss,
            grad,
            grad_free,
            r2: fit_r2,
            best_start: best,
            starts: results,
            n_evals,
            n_grad_evals,
            n_replayed,
            wall_time: started.elapsed(),
            stop_reason,
            choices,
        })
    }

    /// R² of the prediction at `best_u` against `target` (a fresh `time_limit` of its own), and
    /// the evaluations served by replay.
    fn fit_r2(
        &mut self,
        (heap, program): (&mut Heap, &Program),
        data: &Dataset,
        (names, kinds): (&[String], &[ParamKind]),
        best_u: &[f64],
        target: &[f64],
    ) -> (Result<f64>, u64) {
        let grace = self.config.time_limit.map(|t| Instant::now() + t);
        let ev = self.evaluator(data.n_points(), grace);
        let mut obj = Objective::new(ev, names, kinds, data, self.config.loss, 1);
        let res = obj
            .predict(heap, program, best_u)
            .map(|preds| r2(preds, target));
        let replayed = obj.n_replayed;
        self.give_back(obj);
        (res, replayed)
    }

    /// The starts the portfolio polishes: the finite ones that may still improve, best first,
    /// one per structure when the program has `soft-choice`s, at most `n_polish`; every start
    /// for L-BFGS or LM alone, none for Adam alone. Also the forward runs the read-out took.
    fn polish_order(
        &mut self,
        (heap, program): (&mut Heap, &Program),
        data: &Dataset,
        params: (&[String], &[ParamKind]),
        starts: &[StartState],
        has_choices: bool,
    ) -> Result<(Vec<usize>, u64)> {
        let k = starts.len();
        let mut readout_evals = 0;
        let order = match self.config.optimizer {
            Optimizer::Adam => Vec::new(),
            Optimizer::Lbfgs | Optimizer::Lm => (0..k).collect(),
            Optimizer::Portfolio => {
                let n_polish = self.config.n_polish;
                let mut order: Vec<usize> = (0..k)
                    .filter(|&i| {
                        starts[i].best_loss.is_finite()
                            && !matches!(
                                starts[i].status,
                                Some(
                                    StartStatus::NonFinite
                                        | StartStatus::TargetLoss
                                        | StartStatus::TimeLimit
                                )
                            )
                    })
                    .collect();
                order.sort_by(|&a, &b| {
                    starts[a]
                        .best_loss
                        .total_cmp(&starts[b].best_loss)
                        .then(a.cmp(&b))
                });
                if has_choices {
                    // One start per structure: the best of each, in order.
                    let (picks, _) = self.read_out(heap, program, data, params, starts, None)?;
                    readout_evals += k as u64;
                    let mut seen = std::collections::HashSet::new();
                    order.retain(|&i| seen.insert(picks[i].clone()));
                }
                order.truncate(n_polish);
                order
            }
        };
        Ok((order, readout_evals))
    }

    /// Polishes the starts `to_polish` in turn from their best points (marking each `polished`
    /// as it begins), stopping at the first error. Returns the evaluations served by replay and whether a run reached a
    /// `soft-choice`, with the error when one stopped it.
    #[allow(clippy::type_complexity)]
    fn polish(
        &mut self,
        (heap, program): (&mut Heap, &Program),
        data: &Dataset,
        (names, kinds): (&[String], &[ParamKind]),
        (starts, polished): (&mut [StartState], &mut [bool]),
        to_polish: &[usize],
        run: Polisher,
    ) -> std::result::Result<(u64, bool), ((u64, bool), CalibrateError)> {
        let deadline = match run {
            Polisher::Lm(r) => r.deadline,
            Polisher::Lbfgs(r) => r.deadline,
        };
        let ev = self.evaluator(data.n_points(), deadline);
        let mut obj = Objective::new(ev, names, kinds, data, self.config.loss, 1);
        let mut res = Ok(());
        for &i in to_polish {
            let from = starts[i].best_u.clone();
            starts[i].status = None;
            polished[i] = true;
            res = match run {
                Polisher::Lm(r) => {
                    let sys = &mut self.normal;
                    lm::run(&mut obj, heap, program, &from, &mut starts[i], r, sys)
                }
                Polisher::Lbfgs(r) => lbfgs::run(&mut obj, heap, program, &from, &mut starts[i], r),
            };
            if res.is_err() {
                break;
            }
        }
        let tally = (obj.n_replayed, obj.has_choices());
        self.give_back(obj);
        res.map(|()| tally).map_err(|e| (tally, e))
    }

    /// The Adam steps of every start (the portfolio's screen, or Adam alone), racing when `race`
    /// has cuts: after each cut only the best `max(keep, n_polish)` starts (by lowest loss so far,
    /// non-finite last, ties by index) run on, on an evaluator of their lanes alone; the others
    /// stop with `Eliminated`. Once a quarter of a batch has stopped (converged, non-finite) the
    /// rest also move to a smaller batch. A start's steps are the same in any batch. Adds the evaluations served by replay and whether a run reached a
    /// `soft-choice` to `tally`.
    #[allow(clippy::too_many_arguments)]
    fn screen(
        &mut self,
        (heap, program): (&mut Heap, &Program),
        data: &Dataset,
        (names, kinds): (&[String], &[ParamKind]),
        (u, starts): (&mut [f64], &mut [StartState]),
        run: AdamRun,
        race: &[RaceCut],
        tally: &mut (u64, bool),
    ) -> Result<()> {
        let (k, n) = (starts.len(), data.n_points());
        let mut adam = Adam::new(u.len());
        let mut batch: Vec<usize> = (0..k).collect();
        let mut cuts = race.iter().filter(|c| c.at < run.steps).peekable();
        loop {
            let cut = cuts.peek().copied();
            let until = cut.map_or(run.steps, |c| c.at);
            let ev = self.evaluator(batch.len() * n, run.deadline);
            let mut obj = Objective::new(ev, names, kinds, data, self.config.loss, batch.len());
            let res = adam.run(&mut obj, (heap, program), u, starts, &batch, until, run);
            tally.0 += obj.n_replayed;
            tally.1 |= obj.has_choices();
            self.give_back(obj);
            res?;
            batch.retain(|&i| starts[i].status.is_none());
            if batch.is_empty() {
                // Every start stopped, or the time ran out.
                break;
            }
            if adam.step() < until {
                // A quarter of the batch stopped: the others go on in a smaller one.
                continue;
            }
            let Some(cut) = cut else { break };
            cuts.next();
            let mut order: Vec<usize> = (0..k)
                .filter(|&i| starts[i].status != Some(StartStatus::Eliminated))
                .collect();
            let keep = cut.keep.max(self.config.n_polish);
            if keep >= order.len() {
                continue;
            }
            order.sort_by(|&a, &b| rank(&starts[a], &starts[b]).then(a.cmp(&b)));
            for &i in &order[keep..] {
                starts[i].status.get_or_insert(StartStatus::Eliminated);
            }
            batch.retain(|&i| starts[i].status.is_none());
            if batch.is_empty() {
                break;
            }
        }
        adam::finish(starts);
        Ok(())
    }

    /// The `soft-choice` picks of every start at its best point (one forward run of all starts,
    /// at the final temperature without noise), and the best start's read-out.
    fn read_out(
        &mut self,
        heap: &mut Heap,
        program: &Program,
        data: &Dataset,
        (names, kinds): (&[String], &[ParamKind]),
        starts: &[StartState],
        best: Option<usize>,
    ) -> Result<(Vec<Vec<usize>>, Vec<Choice>)> {
        let cfg = &self.config;
        let grace = cfg.time_limit.map(|t| Instant::now() + t);
        let loss = cfg.loss;
        let k = starts.len();
        let ev = self.evaluator(k * data.n_points(), grace);
        let mut obj = Objective::new(ev, names, kinds, data, loss, k);
        let u: Vec<f64> = starts
            .iter()
            .flat_map(|s| s.best_u.iter().copied())
            .collect();
        let res = obj.predict(heap, program, &u).map(|_| ());
        let picks = obj.start_picks();
        let lane = best.map(|b| b * data.n_points());
        let choices = match lane {
            Some(l) if res.is_ok() => obj
                .choices()
                .iter()
                .filter_map(|c| {
                    let index = c.pick(l)?;
                    Some(Choice {
                        site: c.site,
                        index,
                        option: ndvm_core::print::display(heap, c.options[index]),
                        n_options: c.options.len(),
                        weights: c.weights_of(l)?.to_vec(),
                    })
                })
                .collect(),
            _ => Vec::new(),
        };
        self.give_back(obj);
        res?;
        Ok((picks, choices))
    }
}

/// An evaluation cut by the calibration's deadline after some start saw a finite loss: the starts
/// still running stop with `TimeLimit` and the calibration reports the best point so far.
fn absorb_deadline(res: Result<()>, starts: &mut [StartState]) -> Result<()> {
    match res {
        Err(CalibrateError::Eval { error })
            if error.kind == ErrorKind::Deadline
                && starts.iter().any(|s| s.best_loss.is_finite()) =>
        {
            for s in starts.iter_mut().filter(|s| s.status.is_none()) {
                s.status = Some(StartStatus::TimeLimit);
            }
            Ok(())
        }
        other => other,
    }
}

/// The race's order of two starts: the lower best loss first, a start that never had a finite
/// loss last.
fn rank(a: &StartState, b: &StartState) -> std::cmp::Ordering {
    let key = |s: &StartState| (s.best_loss.is_nan(), s.best_loss);
    let ((na, la), (nb, lb)) = (key(a), key(b));
    na.cmp(&nb).then(la.total_cmp(&lb))
}

/// `1 − SS_res / SS_tot` of predictions against the target.
fn r2(preds: &[f64], target: &[f64]) -> f64 {
    let n = target.len();
    let mean = target.iter().sum::<f64>() / n as f64;
    let mut ss_res = 0.0;
    let mut ss_tot = 0.0;
    for (i, &y) in target.iter().enumerate() {
        let pred = if preds.len() == 1 { preds[0] } else { preds[i] };
        ss_res += (pred - y) * (pred - y);
        ss_tot += (y - mean) * (y - mean);
    }
    1.0 - ss_res / ss_tot
}

/// How the polished starts run: Levenberg–Marquardt or L-BFGS, with their settings.
#[derive(Clone, Copy)]
enum Polisher {
    Lm(LmRun),
    Lbfgs(LbfgsRun),
}

/// The start with the lowest finite loss (ties by index).
fn best_start(starts: &[StartState]) -> Option<usize> {
    (0..starts.len())
        .filter(|&i| starts[i].best_loss.is_finite())
        .min_by(|&a, &b| {
            starts[a]
                .best_loss
                .total_cmp(&starts[b].best_loss)
                .then(a.cmp(&b))
        })
}

/// The calibration's answer: the best start's parameters, loss, gradients (user and free space)
/// and stop reason (a time limit hit by any start wins), or the initial values and
/// `AllStartsNonFinite` when no start saw a finite loss.
fn best_fit(
    results: &[StartResult],
    starts: &[StartState],
    best: Option<usize>,
    inits: &[f64],
) -> (Vec<f64>, f64, Vec<f64>, Vec<f64>, StopReason) {
    let p = inits.len();
    let (params, loss, grad, grad_free, stop_reason) = match best {
        Some(b) => (
            results[b].params.clone(),
            results[b].loss,
            starts[b].best_grad.clone(),
            starts[b].best_grad_u.clone(),
            results[b].status.as_stop_reason(),
        ),
        None => (
            inits.to_vec(),
            f64::NAN,
            vec![f64::NAN; p],
            vec![f64::NAN; p],
            StopReason::AllStartsNonFinite,
        ),
    };
    let stop_reason = if results.iter().any(|r| r.status == StartStatus::TimeLimit) {
        StopReason::TimeLimit
    } else {
        stop_reason
    };
    (params, loss, grad, grad_free, stop_reason)
}

/// Every start's result in user space: where it began, its best point, loss and gradient norm,
/// how it ran and stopped, and its structure picks.
fn start_results(
    starts: &[StartState],
    (theta0, kinds): (&[f64], &[ParamKind]),
    polished: &[bool],
    picks: Vec<Vec<usize>>,
) -> Vec<StartResult> {
    let p = kinds.len();
    let user = |u: &[f64]| -> Vec<f64> {
        u.iter()
            .zip(kinds)
            .map(|(&x, &kind)| transform::to_user(kind, x))
            .collect()
    };
    starts
        .iter()
        .zip(picks)
        .enumerate()
        .map(|(i, (s, picks))| StartResult {
            init: theta0[i * p..(i + 1) * p].to_vec(),
            params: user(&s.best_u),
            loss: s.best_loss,
            grad_norm: norm(&s.best_grad_u),
            iters: s.iters,
            n_evals: s.n_evals,
            polished: polished[i],
            status: s.status.unwrap_or(StartStatus::MaxIters),
            picks,
        })
        .collect()
}
