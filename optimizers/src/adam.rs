//! Adam, batched across starts: one walk of K·N lanes per step evaluates every start; each start
//! keeps its own moments, step count and best point, and stops on its own (converged, target
//! loss, non-finite), so a start's trajectory is the same whatever the other starts do.

use std::time::Instant;

use ndvm_core::{Heap, Program};

use crate::config::SoftChoiceConfig;
use crate::error::Result;
use crate::objective::Objective;
use crate::stop::StartStatus;
use crate::stop::{StartState, norm};

/// Adam's fixed moment decay rates and denominator guard (the usual values).
const BETA1: f64 = 0.9;
const BETA2: f64 = 0.999;
const EPSILON: f64 = 1e-8;

/// The fewest steps left for which the screen moves its running starts to a smaller batch once a
/// quarter of the batch has stopped (a new batch's first evaluation walks the program and
/// records its trace again).
pub(crate) const COMPACT_STEPS: usize = 10;

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

/// Adam's per-coordinate moments and the shared step count of one run. The bias corrections
/// `1 − β^t` depend only on the step, which every start that is still running has taken as often
/// as the run, so a start's update does not depend on which other starts share the run.
#[derive(Clone, Debug)]
pub(crate) struct Adam {
    m: Vec<f64>,
    v: Vec<f64>,
    b1t: f64,
    b2t: f64,
    /// Steps taken so far.
    step: usize,
    /// Lanes of the starts in the batch, gathered from `u` before each evaluation.
    u_batch: Vec<f64>,
}

impl Adam {
    /// A run over K starts of P parameters each (`n` = K·P coordinates), before its first step.
    pub(crate) fn new(n: usize) -> Self {
        Adam {
            m: vec![0.0; n],
            v: vec![0.0; n],
            b1t: 1.0,
            b2t: 1.0,
            step: 0,
            u_batch: Vec::with_capacity(n),
        }
    }

    /// Steps taken so far.
    pub(crate) fn step(&self) -> usize {
        self.step
    }

    /// Runs Adam steps until step `until` (of `cfg.steps`) on the starts listed in `batch`, which
    /// are the starts of `obj` in that order: `u` (K×P) and `starts` hold every start, and only
    /// the listed ones are evaluated and moved. Starts whose `status` is already set are left
    /// alone. Stops early when every listed start has stopped, with `TimeLimit` on the listed
    /// starts still running when the deadline passes, or when a quarter of the batch has
    /// stopped and at least [`COMPACT_STEPS`] steps remain (the caller then runs the others on
    /// a smaller batch).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run(
        &mut self,
        obj: &mut Objective,
        (heap, program): (&mut Heap, &Program),
        u: &mut [f64],
        starts: &mut [StartState],
        batch: &[usize],
        until: usize,
        cfg: AdamRun,
    ) -> Result<()> {
        let p = u.len() / starts.len().max(1);
        let until = until.min(cfg.steps);
        while self.step < until {
            let (sc, seed) = cfg.soft_choice;
            obj.set_soft_choice(sc.at_step(self.step, cfg.steps, seed));
            let running = batch
                .iter()
                .filter(|&&k| starts[k].status.is_none())
                .count();
            if running == 0
                || (running < batch.len() - batch.len() / 4 && until - self.step >= COMPACT_STEPS)
            {
                return Ok(());
            }
            if cfg.deadline.is_some_and(|d| Instant::now() >= d) {
                for &k in batch {
                    starts[k].status.get_or_insert(StartStatus::TimeLimit);
                }
                return Ok(());
            }
            self.u_batch.clear();
            for &k in batch {
                self.u_batch.extend_from_slice(&u[k * p..(k + 1) * p]);
            }
            obj.eval(heap, program, &self.u_batch)?;
            self.step += 1;
            self.b1t *= BETA1;
            self.b2t *= BETA2;
            for (j, &k) in batch.iter().enumerate() {
                let s = &mut starts[k];
                if s.status.is_some() {
                    continue;
                }
                let (r, rj) = (k * p..(k + 1) * p, j * p..(j + 1) * p);
                let loss = obj.losses[j];
                let g = &obj.grad_u[rj.clone()];
                if !s.observe(&u[r.clone()], loss, &obj.grad_theta[rj.clone()], g) {
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
                for (i, ij) in r.zip(rj) {
                    let gi = obj.grad_u[ij];
                    self.m[i] = BETA1 * self.m[i] + (1.0 - BETA1) * gi;
                    self.v[i] = BETA2 * self.v[i] + (1.0 - BETA2) * gi * gi;
                    let mh = self.m[i] / (1.0 - self.b1t);
                    let vh = self.v[i] / (1.0 - self.b2t);
                    u[i] -= cfg.learning_rate * mh / (vh.sqrt() + EPSILON);
                }
                s.iters += 1;
            }
        }
        Ok(())
    }
}

/// Every start still running gets `MaxIters`.
pub(crate) fn finish(starts: &mut [StartState]) {
    for s in starts.iter_mut().filter(|s| s.status.is_none()) {
        s.status = Some(StartStatus::MaxIters);
    }
}
