//! The batched objective: K starts × N data points as K·N lanes of one walk. Binds parameters
//! (per lane, differentiable), data columns (per lane) and shared inputs once; each call overwrites
//! the parameter lanes in place, runs the evaluator, and reduces every start's lanes to its loss
//! and its gradient (chain-ruled through the parameter transforms). No allocation per call.

use ndvm_core::{
    EvalOptions, Evaluation, Evaluator, Heap, InputValue, Inputs, Output, ParamKind, Program,
};

use crate::config::Loss;
use crate::data::{Dataset, Shared};
use crate::error::{CalibrateError, Result};
use crate::transform;

/// Per-lane values may come back with one element when uniform.
fn at(v: &[f64], i: usize) -> f64 {
    if v.len() == 1 { v[0] } else { v[i] }
}

/// One evaluator bound to one data set for `n_starts` starts.
#[derive(Debug)]
pub(crate) struct Objective {
    evaluator: Evaluator,
    inputs: Inputs,
    out: Evaluation,
    n_starts: usize,
    n_points: usize,
    kinds: Vec<ParamKind>,
    loss: Loss,
    target: Vec<f64>,
    weights: Vec<f64>,
    weight_sum: f64,
    coef: Vec<f64>,
    u: Vec<f64>,
    /// Per start: its loss at the last evaluated point (NaN when any of its lanes faulted).
    pub(crate) losses: Vec<f64>,
    /// K×P: the parameters (user space) at the last evaluated point.
    pub(crate) theta: Vec<f64>,
    /// K×P: dLoss/dθ (user space).
    pub(crate) grad_theta: Vec<f64>,
    /// K×P: dLoss/du (optimizer coordinates).
    pub(crate) grad_u: Vec<f64>,
    /// Start evaluations served by replaying the evaluator's recorded trace (K per replayed run).
    pub(crate) n_replayed: u64,
}

impl Objective {
    /// Binds `data` for `n_starts` starts. `evaluator` must have `n_starts * data.n_points()` lanes.
    pub(crate) fn new(
        evaluator: Evaluator,
        names: &[String],
        kinds: &[ParamKind],
        data: &Dataset,
        loss: Loss,
        n_starts: usize,
    ) -> Self {
        let n_points = data.n_points();
        let b = n_starts * n_points;
        debug_assert_eq!(evaluator.options().n_lanes, b);
        let mut inputs = Inputs::new();
        for name in names {
            inputs.push(name, InputValue::Lanes(vec![0.0; b]), true);
        }
        for c in &data.columns {
            let mut lanes = Vec::with_capacity(b);
            for _ in 0..n_starts {
                lanes.extend_from_slice(&c.values);
            }
            inputs.push(&c.name, InputValue::Lanes(lanes), false);
        }
        for (name, value) in &data.shared {
            let value = match value {
                Shared::Scalar(x) => InputValue::Uniform(*x),
                Shared::Vector(v) => InputValue::Vector(v.clone()),
                Shared::Matrix { rows, cols, data } => InputValue::Matrix {
                    rows: *rows,
                    cols: *cols,
                    data: data.clone(),
                },
            };
            inputs.push(name, value, false);
        }
        let weights = data.weights.clone().unwrap_or_else(|| vec![1.0; n_points]);
        let weight_sum = weights.iter().sum();
        let p = names.len();
        Objective {
            evaluator,
            inputs,
            out: Evaluation::empty(),
            n_starts,
            n_points,
            kinds: kinds.to_vec(),
            loss,
            target: data.target.clone().unwrap_or_default(),
            weights,
            weight_sum,
            coef: vec![0.0; n_points],
            u: vec![0.0; n_starts * p],
            losses: vec![f64::NAN; n_starts],
            theta: vec![0.0; n_starts * p],
            grad_theta: vec![0.0; n_starts * p],
            grad_u: vec![0.0; n_starts * p],
            n_replayed: 0,
        }
    }

    /// A fresh evaluator for `n_lanes` lanes.
    pub(crate) fn evaluator(
        n_lanes: usize,
        dialect: ndvm_core::Dialect,
        precision: ndvm_core::Precision,
    ) -> Evaluator {
        let opts = EvalOptions::new(n_lanes).with_dialect(dialect);
        Evaluator::new(opts.with_precision(precision))
    }

    /// Gives the evaluator back (to be reused by the next calibration).
    pub(crate) fn into_evaluator(self) -> Evaluator {
        self.evaluator
    }

    /// Sets the `soft-choice` settings of the next evaluations.
    pub(crate) fn set_soft_choice(&mut self, sc: ndvm_core::SoftChoice) {
        self.evaluator.set_soft_choice(sc);
    }

    /// Whether the last run reached a `soft-choice`.
    pub(crate) fn has_choices(&mut self) -> bool {
        !self.evaluator.last_choices().is_empty()
    }

    /// The picks of every start at the last run (its first data point's lane), one row per
    /// start, in site order.
    pub(crate) fn start_picks(&mut self) -> Vec<Vec<usize>> {
        let (k, n) = (self.n_starts, self.n_points);
        let choices = self.evaluator.last_choices();
        (0..k)
            .map(|k| choices.iter().filter_map(|c| c.pick(k * n)).collect())
            .collect()
    }

    /// The read-out of the last run's sites.
    pub(crate) fn choices(&mut self) -> &[ndvm_core::ChoiceReadout] {
        self.evaluator.last_choices()
    }

    fn n_params(&self) -> usize {
        self.kinds.len()
    }

    /// Data points per start.
    pub(crate) fn n_points(&self) -> usize {
        self.n_points
    }

    /// The last evaluation of start 0 as least squares (for the squared-error losses): the
    /// residuals `r_i = √(w_i/W)·(pred_i − y_i)`, whose sum of squares is the (weighted) MSE, and
    /// their Jacobian `J` (N×P, row-major) in the optimizer coordinates.
    pub(crate) fn least_squares(&self, r: &mut [f64], jac: &mut [f64]) {
        let (n, p) = (self.n_points, self.n_params());
        let Output::Number(preds) = &self.out.value else {
            unreachable!("least squares follow an evaluation with a number output")
        };
        for i in 0..n {
            let s = (self.weights[i] / self.weight_sum).sqrt();
            r[i] = s * (at(preds, i) - self.target[i]);
            for j in 0..p {
                let slope = transform::slope(self.kinds[j], self.u[j]);
                jac[i * p + j] = s * at(&self.out.grads[j].per_lane, i) * slope;
            }
        }
    }

    /// Evaluates every start at optimizer coordinates `u` (K×P) with gradients, filling
    /// `losses`, `theta`, `grad_theta` and `grad_u`.
    pub(crate) fn eval(&mut self, heap: &mut Heap, program: &Program, u: &[f64]) -> Result<()> {
        self.run(heap, program, u, true)?;
        self.reduce(true)
    }

    /// Evaluates every start at `u` without gradients and returns the per-lane predictions.
    pub(crate) fn predict(
        &mut self,
        heap: &mut Heap,
        program: &Program,
        u: &[f64],
    ) -> Result<&[f64]> {
        self.run(heap, program, u, false)?;
        self.reduce(false)?;
        match &self.out.value {
            Output::Number(v) => Ok(v),
            _ => unreachable!("reduce checked the output is a number"),
        }
    }

    fn run(&mut self, heap: &mut Heap, program: &Program, u: &[f64], grad: bool) -> Result<()> {
        let (k_n, n, p) = (self.n_starts, self.n_points, self.n_params());
        debug_assert_eq!(u.len(), k_n * p);
        self.u.copy_from_slice(u);
        for (i, (&ui, th)) in u.iter().zip(self.theta.iter_mut()).enumerate() {
            *th = transform::to_user(self.kinds[i % p], ui);
        }
        for j in 0..p {
            let InputValue::Lanes(lanes) = &mut self.inputs.entries[j].value else {
                unreachable!("parameters are bound per lane")
            };
            for k in 0..k_n {
                lanes[k * n..(k + 1) * n].fill(self.theta[k * p + j]);
            }
        }
        self.evaluator
            .eval_into(heap, program, &self.inputs, grad, &mut self.out)?;
        if self.evaluator.last_run_replayed() {
            self.n_replayed += k_n as u64;
        }
        Ok(())
    }

    fn reduce(&mut self, grad: bool) -> Result<()> {
        let (n, p) = (self.n_points, self.n_params());
        let preds = match &self.out.value {
            Output::Number(v) => v,
            Output::Bool(_) => return Err(CalibrateError::NotANumber { found: "boolean" }),
            Output::Vector { .. } => return Err(CalibrateError::NotANumber { found: "vector" }),
            Output::Matrix { .. } => return Err(CalibrateError::NotANumber { found: "matrix" }),
            Output::Other(_) => return Err(CalibrateError::NotANumber { found: "other" }),
        };
        for k in 0..self.n_starts {
            let lanes = k * n..(k + 1) * n;
            let faulted = self
                .out
                .faults
                .get(lanes.clone())
                .is_some_and(|f| f.iter().any(|&x| x));
            let loss = if faulted {
                f64::NAN
            } else {
                loss_of(
                    self.loss,
                    preds,
                    k * n,
                    &self.target,
                    &self.weights,
                    self.weight_sum,
                    &mut self.coef,
                )
            };
            self.losses[k] = loss;
            if !grad {
                continue;
            }
            for j in 0..p {
                let g = &self.out.grads[j].per_lane;
                let mut acc = 0.0;
                for (i, c) in self.coef.iter().enumerate() {
                    acc += c * at(g, k * n + i);
                }
                let gt = if loss.is_finite() { acc } else { f64::NAN };
                self.grad_theta[k * p + j] = gt;
                self.grad_u[k * p + j] = gt * transform::slope(self.kinds[j], self.u[k * p + j]);
            }
        }
        Ok(())
    }
}

/// The loss of the start whose lanes begin at `base`; fills `coef` with dLoss/dpred per point.
fn loss_of(
    loss: Loss,
    preds: &[f64],
    base: usize,
    target: &[f64],
    weights: &[f64],
    weight_sum: f64,
    coef: &mut [f64],
) -> f64 {
    let n = coef.len();
    if loss == Loss::ProgramLoss {
        let mut acc = 0.0;
        for i in 0..n {
            acc += at(preds, base + i);
        }
        coef.fill(1.0);
        return acc;
    }
    let mut sse = 0.0;
    for i in 0..n {
        let r = at(preds, base + i) - target[i];
        sse += weights[i] * r * r;
    }
    let mse = sse / weight_sum;
    let scale = match loss {
        Loss::GaussianNll => 1.0 / mse.max(f64::MIN_POSITIVE),
        _ => 2.0,
    };
    for i in 0..n {
        let r = at(preds, base + i) - target[i];
        coef[i] = scale * weights[i] * r / weight_sum;
    }
    match loss {
        Loss::GaussianNll => {
            0.5 * (2.0 * std::f64::consts::PI * mse.max(f64::MIN_POSITIVE)).ln() + 0.5
        }
        _ => mse,
    }
}
