//! `CalibrateConfig`: what to fit and how (optimizer, starts, seed, loss, parameters, budgets),
//! a plain struct with public fields, validated once by `Calibrator::new`.

use std::time::Duration;

use ndvm_core::{Cancel, ChoiceMode, Dialect, EvalOptions, ParamKind, Precision, SoftChoice};

use crate::error::{CalibrateError, Result};
use crate::transform;

/// Which optimizer drives the fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Optimizer {
    /// Adam on all starts at once (one walk of K·N lanes per step) for `max_iters` steps.
    Adam,
    /// L-BFGS (argmin, More–Thuente line search) on each start in turn, `max_iters` iterations.
    Lbfgs,
    /// Levenberg–Marquardt on each start in turn, `max_iters` iterations: for the squared-error
    /// losses (MSE, weighted MSE, Gaussian NLL), whose residuals' Jacobian every walk yields;
    /// with the program-loss it runs L-BFGS instead.
    Lm,
    /// `screen_iters` Adam steps on all starts, then the `polish` method (`max_iters`
    /// iterations) on the `n_polish` starts with the lowest loss.
    Portfolio,
}

/// The local method of the portfolio's polish.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Polish {
    /// L-BFGS (argmin, More–Thuente line search).
    #[default]
    Lbfgs,
    /// Levenberg–Marquardt (see [`Optimizer::Lm`]); L-BFGS with the program-loss.
    Lm,
}

/// What is minimised. Every loss is per start; the best start has the lowest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Loss {
    /// Mean squared error between the program's value and the target over the data points.
    Mse,
    /// `Σ w (pred − target)² / Σ w` with the data set's weights.
    WeightedMse,
    /// Gaussian negative log-likelihood per point, `½ ln(2π σ̂²) + ½`, with the noise variance at
    /// its maximum-likelihood value `σ̂²` = the (weighted, when weights are given) mean squared
    /// error. Its minimiser equals the MSE one; its value is a log-likelihood.
    GaussianNll,
    /// The program computes its own loss (for example a Kalman filter's negative
    /// log-likelihood); the start's loss is the program's value summed over its data points (one
    /// point when the data set has no per-point columns). Takes no target.
    ProgramLoss,
}

/// One parameter to fit, given in the configuration rather than by a `(params …)` form.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamSpec {
    /// The variable name the program refers to.
    pub name: String,
    /// Its domain, which picks its transform.
    pub kind: ParamKind,
    /// The first start's value; the other starts are drawn around it.
    pub init: f64,
}

impl ParamSpec {
    /// A parameter with the given kind and first-start value.
    pub fn new(name: &str, kind: ParamKind, init: f64) -> Self {
        ParamSpec {
            name: name.to_string(),
            kind,
            init,
        }
    }
}

/// One cut of the portfolio's racing screen (see [`CalibrateConfig::race`]): after `at` screen
/// steps, only the `keep` starts with the lowest loss so far go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaceCut {
    /// The screen step after which the cut happens (at least 1).
    pub at: usize,
    /// How many starts go on (at least 1; never fewer than `n_polish`).
    pub keep: usize,
}

impl RaceCut {
    /// After `at` screen steps, keep the best `keep` starts.
    pub const fn new(at: usize, keep: usize) -> Self {
        RaceCut { at, keep }
    }
}

/// The first bad cut of a racing schedule, by index, and what is wrong with it: a cut at step 0,
/// one keeping no start, one not after the previous cut, or one not keeping fewer starts than
/// the previous cut. `None` when the schedule is valid (an empty one is).
pub fn race_problem(race: &[RaceCut]) -> Option<(usize, String)> {
    for (i, c) in race.iter().enumerate() {
        let message = if c.at == 0 {
            format!(
                "cut {} is at step 0; a cut follows at least one step",
                i + 1
            )
        } else if c.keep == 0 {
            format!("cut {} keeps no start; it must keep at least 1", i + 1)
        } else if i > 0 && c.at <= race[i - 1].at {
            let prev = race[i - 1].at;
            format!(
                "cut {} (step {}) must come after cut {i} (step {prev})",
                i + 1,
                c.at
            )
        } else if i > 0 && c.keep >= race[i - 1].keep {
            let prev = race[i - 1].keep;
            format!(
                "cut {} keeps {} starts; it must keep fewer than cut {i} ({prev})",
                i + 1,
                c.keep
            )
        } else {
            continue;
        };
        return Some((i, message));
    }
    None
}

/// How a calibration runs the program's `(soft-choice (e1 e2 …) logits)` forms (a program
/// without one ignores it). Nothing here is process-global: each calibration passes its settings
/// to its own evaluators.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SoftChoiceConfig {
    /// Soft, straight-through or hard (see `ndvm_core::ChoiceMode`).
    pub mode: ChoiceMode,
    /// The temperature τ of the first Adam step.
    pub temperature: f64,
    /// The temperature of the last Adam step, reached linearly from `temperature` over the Adam
    /// steps (the annealing), and of the L-BFGS polish, the final prediction and the read-out
    /// (which run straight-through as hard: the same values, no gradient to the logits). Equal
    /// to `temperature`: no annealing.
    pub final_temperature: f64,
    /// Fresh Gumbel noise at every Adam step, seeded by the calibration's `seed` and the step
    /// (ChaCha8); the polish, the prediction and the read-out have none.
    pub gumbel: bool,
}

impl Default for SoftChoiceConfig {
    /// Soft mode at τ = 1, no annealing, no noise.
    fn default() -> Self {
        SoftChoiceConfig {
            mode: ChoiceMode::Soft,
            temperature: 1.0,
            final_temperature: 1.0,
            gumbel: false,
        }
    }
}

impl SoftChoiceConfig {
    /// The evaluator's settings at Adam step `step` of `steps` (seeded noise when `gumbel`).
    pub(crate) fn at_step(&self, step: usize, steps: usize, seed: u64) -> SoftChoice {
        let f = if steps > 1 {
            step as f64 / (steps - 1) as f64
        } else {
            1.0
        };
        SoftChoice {
            mode: self.mode,
            temperature: self.temperature + (self.final_temperature - self.temperature) * f,
            gumbel: self
                .gumbel
                .then(|| seed.wrapping_add((step as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F))),
        }
    }

    /// The settings of the polish, the prediction and the read-out: τ at its final value, no
    /// noise, and straight-through turned hard (the same forward value; the polish then fits the
    /// other parameters of the structure the Adam steps chose, since the straight-through
    /// gradient of the logits does not match its piecewise-constant loss, which stalls a line
    /// search).
    pub fn settled(&self) -> SoftChoice {
        SoftChoice {
            mode: match self.mode {
                ChoiceMode::StraightThrough => ChoiceMode::Hard,
                m => m,
            },
            temperature: self.final_temperature,
            gumbel: None,
        }
    }
}

/// Every setting of a calibration. Build one with [`CalibrateConfig::recommended`] and change the
/// fields you need; [`Calibrator::new`](crate::Calibrator::new) validates it.
#[derive(Clone, Debug, PartialEq)]
pub struct CalibrateConfig {
    /// The optimizer.
    pub optimizer: Optimizer,
    /// Number of starts K (at least 1). Start 0 is the parameters' initial values; starts 1… are
    /// drawn from `seed`, so the first K starts are the same whatever K is.
    pub n_starts: usize,
    /// Seed of the start distribution (ChaCha8).
    pub seed: u64,
    /// What is minimised.
    pub loss: Loss,
    /// Numeric conventions of the evaluator.
    pub dialect: Dialect,
    /// The evaluator's lane precision (`f64` by default; `f32` halves the memory traffic, each
    /// operation rounding to single precision; the optimiser's own arithmetic stays `f64`).
    pub precision: Precision,
    /// Parameters to fit. A name also declared by the program's `(params …)` replaces that
    /// declaration; the others are added after the declared ones.
    pub params: Vec<ParamSpec>,
    /// Adam steps (Adam), or L-BFGS iterations per start (L-BFGS, and the portfolio's polish).
    pub max_iters: usize,
    /// Adam steps of the portfolio's screen.
    pub screen_iters: usize,
    /// How many of the best screened starts the portfolio polishes (at least 1).
    pub n_polish: usize,
    /// The racing screen: cuts at increasing steps, each keeping fewer starts. At a cut the
    /// starts are ranked by their lowest loss so far (non-finite last, ties by index); those
    /// below the first `max(keep, n_polish)` stop with `StartStatus::Eliminated`, and the rest
    /// run on in a smaller batch. Each start's trajectory is independent of the others', so a
    /// survivor's steps are bit for bit those of the full screen, and the calibration's result
    /// is the full screen's whenever the starts the full screen would polish survive. Cuts at
    /// or after `screen_iters`, and keeps of at least the number of starts, change nothing.
    /// Empty: every start runs the whole screen. Only the portfolio races.
    pub race: Vec<RaceCut>,
    /// The portfolio's polish method.
    pub polish: Polish,
    /// Adam's step size in the unconstrained coordinates.
    pub learning_rate: f64,
    /// Number of correction pairs L-BFGS keeps (at least 1).
    pub lbfgs_memory: usize,
    /// A start has converged when the norm of its gradient in the unconstrained coordinates is
    /// at most this (L-BFGS also stops when no step decreases the loss any more).
    pub tol_grad: f64,
    /// A start stops as soon as its loss is at most this.
    pub target_loss: Option<f64>,
    /// Wall-clock limit for the whole calibration. When it runs out, every start keeps the
    /// best point it has seen (the result then depends on the machine's speed). Every evaluation
    /// also gets the deadline `start + time_limit`: one stuck in an endless loop ends there (see
    /// [`Calibrator::calibrate`](crate::Calibrator::calibrate)).
    pub time_limit: Option<Duration>,
    /// Work units each evaluation may spend (steps weighted by elements touched; see
    /// `ndvm_core::EvalOptions::max_steps`). At least 1.
    pub max_work: u64,
    /// Bytes each evaluation may hold (see `ndvm_core::EvalOptions::max_memory`). At least 1.
    pub max_memory: u64,
    /// Non-tail recursion depth each evaluation may reach. At least 1.
    pub max_depth: u32,
    /// Mode, temperature schedule and noise of the program's `soft-choice` forms.
    pub soft_choice: SoftChoiceConfig,
    /// A flag another thread may raise to stop the calibration at its next evaluation (see
    /// `ndvm_core::Cancel`): the calibration then ends with `CalibrateError::Eval` of kind
    /// `ErrorKind::Deadline` ("cancelled"), unless every evaluation had already finished.
    /// Work cut this way is not a result; `None` (the default): nothing cancels.
    pub cancel: Option<Cancel>,
}

impl CalibrateConfig {
    /// The defaults, chosen by measurement on the acceptance models (see the crate docs and
    /// `examples/choose_defaults.rs`): portfolio, 32 starts, seed 0, MSE, default dialect, 100
    /// screen steps at learning rate 0.1, then L-BFGS (memory 10, at most 200 iterations) on the
    /// best 4 starts, gradient tolerance 1e-10, no target loss and no time limit; the evaluator's
    /// default work, memory and depth limits (`ndvm_core::EvalOptions::DEFAULT_*`); soft-choice
    /// in soft mode at τ = 1. No racing screen (`race` empty): every racing schedule measured
    /// ends some fits of the co-search stream in a worse minimum than the full screen (see the
    /// crate docs).
    pub fn recommended() -> Self {
        CalibrateConfig {
            optimizer: Optimizer::Portfolio,
            n_starts: 32,
            seed: 0,
            loss: Loss::Mse,
            dialect: Dialect::Default,
            precision: Precision::F64,
            params: Vec::new(),
            max_iters: 200,
            screen_iters: 100,
            n_polish: 4,
            race: Vec::new(),
            polish: Polish::Lbfgs,
            learning_rate: 0.1,
            lbfgs_memory: 10,
            tol_grad: 1e-10,
            target_loss: None,
            time_limit: None,
            max_work: EvalOptions::DEFAULT_MAX_STEPS,
            max_memory: EvalOptions::DEFAULT_MAX_MEMORY,
            max_depth: EvalOptions::DEFAULT_MAX_DEPTH,
            soft_choice: SoftChoiceConfig::default(),
            cancel: None,
        }
    }

    /// The settings for a search's many candidates with residuals to fit (a mean-squared-error
    /// loss): [`recommended`](Self::recommended) with 4 starts (an evolved child's first start
    /// is its parent's fitted constants), 30 screen steps, then Levenberg–Marquardt (at most 60
    /// iterations) on the best start. Chosen by measurement: in a fixed wall-clock budget a
    /// search calibrating 20–60× more candidates this way reaches better fits on every problem
    /// of the search suite (`results/suite/`) than one calibrating fewer candidates well.
    pub fn for_search() -> Self {
        CalibrateConfig {
            n_starts: 4,
            max_iters: 60,
            screen_iters: 30,
            n_polish: 1,
            polish: Polish::Lm,
            ..Self::recommended()
        }
    }

    /// Checks every field; the first bad one is the error.
    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |field: &'static str, message: &str| {
            Err(CalibrateError::InvalidConfig {
                field,
                message: message.to_string(),
            })
        };
        if self.n_starts == 0 {
            return bad("n_starts", "there must be at least one start");
        }
        if self.n_polish == 0 {
            return bad("n_polish", "at least one start must be polished");
        }
        if let Some((_, message)) = race_problem(&self.race) {
            return Err(CalibrateError::InvalidConfig {
                field: "race",
                message,
            });
        }
        if self.lbfgs_memory == 0 {
            return bad("lbfgs_memory", "must be at least 1");
        }
        if !(self.learning_rate > 0.0 && self.learning_rate.is_finite()) {
            return bad("learning_rate", "must be a positive finite number");
        }
        if self.tol_grad.is_nan() || self.tol_grad < 0.0 {
            return bad("tol_grad", "must be zero or positive");
        }
        if self.max_work == 0 {
            return bad("max_work", "must be at least 1");
        }
        if self.max_memory == 0 {
            return bad("max_memory", "must be at least 1");
        }
        if self.max_depth == 0 {
            return bad("max_depth", "must be at least 1");
        }
        let sc = &self.soft_choice;
        for t in [sc.temperature, sc.final_temperature] {
            if !(t > 0.0 && t.is_finite()) {
                return bad(
                    "soft_choice",
                    "temperatures must be positive finite numbers",
                );
            }
        }
        if self.target_loss.is_some_and(f64::is_nan) {
            return bad("target_loss", "must be a number");
        }
        for (i, p) in self.params.iter().enumerate() {
            if p.name.is_empty() {
                return bad("params", "a parameter name is empty");
            }
            if self.params[..i].iter().any(|q| q.name == p.name) {
                return Err(CalibrateError::InvalidConfig {
                    field: "params",
                    message: format!("`{}` is listed twice", p.name),
                });
            }
            if let ParamKind::Bounded { lo, hi } = p.kind
                && !(lo < hi && lo.is_finite() && hi.is_finite())
            {
                return Err(CalibrateError::InvalidConfig {
                    field: "params",
                    message: format!("`{}`: bounded needs finite lo < hi", p.name),
                });
            }
            if !transform::in_domain(p.kind, p.init) {
                return Err(CalibrateError::BadInit {
                    name: p.name.clone(),
                    init: p.init,
                });
            }
        }
        Ok(())
    }
}
