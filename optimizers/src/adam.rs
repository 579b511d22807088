//! Adam, batched across starts: one walk of K·N lanes per step evaluates every start; each start
//! keeps its own moments, step count and best point, and stops on its own (converged, target
//! loss, non-finite), so a start's trajectory is the same whatever the other starts do.

use std::time::Instant;

use ndvm_core::{Heap, Program};

use crate::calibrator::norm;
use crate::config::SoftChoiceConfig;
use crate::error::Result;
use crate::objective::Objective;
use crate::stop::StartStatus;

/// Adam's fixed moment decay rates and denominator guard (the usual values).
const BETA1: f64 = 0.9;
const BETA2: f64 = 0.999;
const EPSILON: f64 = 1e-8;

/// What a start has done so far (shared by Adam and L-BFGS).
#[derive(Clone, Debug)]
pub(crate) struct StartState {
    /// The lowest-loss point seen (optimizer coordinates).
    pub(crate) best_u: Vec<f64>,
    /// Its loss (NaN until a finite point is seen).
    pub(crate) best_loss: f64,
    /// dLoss/dθ there (user space).
    pub(crate) best_grad: Vec<f64>,
    /// dLoss/du there.
    pub(crate) best_grad_u: Vec<f64>,
    /// Iterations done.
    pub(crate) iters: usize,
    /// Loss-and-gradient evaluations of this start.
    pub(crate) n_evals: u64,
    /// Why it stopped; `None` while it runs.
    pub(crate) status: Option<StartStatus>,
}

impl StartState {
    pub(crate) fn new(u: &[f64]) -> Self {
        StartState {
            best_u: u.to_vec(),
            best_loss: f64::NAN,
            best_grad: vec![f64::NAN; u.len()],
            best_grad_u: vec![f64::NAN; u.len()],
            iters: 0,
            n_evals: 0,
            status: None,
        }
    }

    /// Records an evaluated point; returns false when it is non-finite.
    pub(crate) fn observe(&mut self, u: &[f64], loss: f64, grad: &[f64], grad_u: &[f64]) -> bool {
        self.n_evals += 1;
        let finite = loss.is_finite() && grad_u.iter().all(|g| g.is_finite());
        if finite && (self.best_loss.is_nan() || loss < self.best_loss) {
            self.best_loss = loss;
            self.best_u.copy_from_slice(u);
            self.best_grad.copy_from_slice(grad);
            self.best_grad_u.copy_from_slice(grad_u);
        }
        finite
    }

    /// Makes the last observed point (`u`) the best one although its loss only ties the best
    /// within rounding: a least-squares step that lowered the gradient where the loss can no
    /// longer resolve the difference.
    pub(crate) fn adopt(&mut self, u: &[f64], loss: f64, grad: &[f64], grad_u: &[f64]) {
        self.best_loss = loss;
        self.best_u.copy_from_slice(u);
        self.best_grad.copy_from_slice(grad);
        self.best_grad_u.copy_from_slice(grad_u);
    }
}

/// Settings of one Adam run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AdamRun {
    pub(crate) steps: usize,
    pub(crate) learning_rate: f64,
    pub(crate) tol_grad: f64,
    pub(crate) target_loss: Option<f64>,
    pub(crate) deadline: Option<Instant>,
    /// The `soft-choice` schedule over the steps, and the seed of its noise.
    pub(crate) soft_choice: (SoftChoiceConfig, u64),
}

/// Runs Adam from `u` (K×P) on the starts of `obj`. Starts whose `status` is already set are left
/// alone; every start that is still running at the end gets `MaxIters` (or `TimeLimit`).
pub(crate) fn run(
    obj: &mut Objective,
    heap: &mut Heap,
    program: &Program,
    u: &mut [f64],
    starts: &mut [StartState],
    cfg: AdamRun,
) -> Result<()> {
    let p = u.len() / starts.len().max(1);
    let mut m = vec![0.0; u.len()];
    let mut v = vec![0.0; u.len()];
    let (mut b1t, mut b2t) = (1.0, 1.0);
    for step in 0..cfg.steps {
        let (sc, seed) = cfg.soft_choice;
        obj.set_soft_choice(sc.at_step(step, cfg.steps, seed));
        if starts.iter().all(|s| s.status.is_some()) {
            return Ok(());
        }
        if cfg.deadline.is_some_and(|d| Instant::now() >= d) {
            for s in starts.iter_mut().filter(|s| s.status.is_none()) {
                s.status = Some(StartStatus::TimeLimit);
            }
            return Ok(());
        }
        obj.eval(heap, program, u)?;
        b1t *= BETA1;
        b2t *= BETA2;
        for (k, s) in starts.iter_mut().enumerate() {
            if s.status.is_some() {
                continue;
            }
            let r = k * p..(k + 1) * p;
            let loss = obj.losses[k];
            let g = &obj.grad_u[r.clone()];
            if !s.observe(&u[r.clone()], loss, &obj.grad_theta[r.clone()], g) {
                s.status = Some(StartStatus::NonFinite);
                continue;
            }
            if cfg.target_loss.is_some_and(|t| loss <= t) {
                s.status = Some(StartStatus::TargetLoss);
                continue;
            }
            if norm(g) <= cfg.tol_grad {
                s.status = Some(StartStatus::Converged);
                continue;
            }
            for i in r {
                let gi = obj.grad_u[i];
                m[i] = BETA1 * m[i] + (1.0 - BETA1) * gi;
                v[i] = BETA2 * v[i] + (1.0 - BETA2) * gi * gi;
                let mh = m[i] / (1.0 - b1t);
                let vh = v[i] / (1.0 - b2t);
                u[i] -= cfg.learning_rate * mh / (vh.sqrt() + EPSILON);
            }
            s.iters += 1;
        }
    }
    for s in starts.iter_mut().filter(|s| s.status.is_none()) {
        s.status = Some(StartStatus::MaxIters);
    }
    Ok(())
}
