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
    /// Per point: its weight ÷ `weight_sum`.
    weight_frac: Vec<f64>,
    /// Per point: √(weight ÷ `weight_sum`), the scale of its least-squares residual.
    row_scale: Vec<f64>,
    /// K×N: dLoss/dpred per lane at the last evaluated point.
    coef: Vec<f64>,
    /// P×K: every parameter's per-start gradient sums (parameter-major).
    acc: Vec<f64>,
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
        // Parameters one value per start, data columns once: the evaluator spreads them over the
        // lanes (start k's lanes are k·n … k·n + n − 1), and a replay compares n numbers per column.
        let mut inputs = Inputs::new();
        for name in names {
            let value = InputValue::Grouped {
                values: vec![0.0; n_starts],
                group: n_points,
            };
            inputs.push(name, value, true);
        }
        for c in &data.columns {
            inputs.push(&c.name, InputValue::Cycled(c.values.clone()), false);
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
        let weight_sum: f64 = weights.iter().sum();
        let weight_frac: Vec<f64> = weights.iter().map(|w| w / weight_sum).collect();
        let row_scale = weight_frac.iter().map(|f| f.sqrt()).collect();
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
            weight_frac,
            row_scale,
            coef: vec![0.0; b],
            acc: vec![0.0; n_starts * p],
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
    /// their Jacobian `J` (N×P, row-major) in the optimizer coordinates (`slopes`: P floats of
    /// scratch, each parameter's `dθ/du`).
    pub(crate) fn least_squares(&self, r: &mut [f64], jac: &mut [f64], slopes: &mut [f64]) {
        let (n, p) = (self.n_points, self.n_params());
        let Output::Number(preds) = &self.out.value else {
            unreachable!("least squares follow an evaluation with a number output")
        };
        for (slope, (&kind, &u)) in slopes.iter_mut().zip(self.kinds.iter().zip(&self.u)) {
            *slope = transform::slope(kind, u);
        }
        let scale = &self.row_scale[..n];
        for (i, (ri, &s)) in r[..n].iter_mut().zip(scale).enumerate() {
            *ri = s * (at(preds, i) - self.target[i]);
        }
        if p == 0 {
            return;
        }
        let (slopes, grads) = (&slopes[..p], &self.out.grads[..p]);
        for (i, (row, &s)) in jac.chunks_exact_mut(p).zip(scale).enumerate() {
            for ((d, grad), &slope) in row.iter_mut().zip(grads).zip(slopes) {
                *d = s * at(&grad.per_lane, i) * slope;
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
        let (k_n, p) = (self.n_starts, self.n_params());
        debug_assert_eq!(u.len(), k_n * p);
        self.u.copy_from_slice(u);
        for (i, (&ui, th)) in u.iter().zip(self.theta.iter_mut()).enumerate() {
            *th = transform::to_user(self.kinds[i % p], ui);
        }
        for j in 0..p {
            let InputValue::Grouped { values, .. } = &mut self.inputs.entries[j].value else {
                unreachable!("parameters are bound per start")
            };
            for (k, v) in values.iter_mut().enumerate() {
                *v = self.theta[k * p + j];
            }
        }
        self.evaluator
            .eval_into(heap, program, &self.inputs, grad, &mut self.out)?;
        if self.evaluator.last_run_replayed() {
            self.n_replayed += k_n as u64;
        }
        Ok(())
    }

    /// Reduces the last run to every start's loss and gradient. Each sum runs over its start's
    /// points in a fixed order of four partial sums ([`PARTS`]); a few starts advance together,
    /// so they overlap in the pipeline, and every sum keeps the bits of a start reduced alone.
    fn reduce(&mut self, grad: bool) -> Result<()> {
        let (k_n, n, p) = (self.n_starts, self.n_points, self.n_params());
        let preds = match &self.out.value {
            Output::Number(v) => v,
            Output::Bool(_) => return Err(CalibrateError::NotANumber { found: "boolean" }),
            Output::Vector { .. } => return Err(CalibrateError::NotANumber { found: "vector" }),
            Output::Matrix { .. } => return Err(CalibrateError::NotANumber { found: "matrix" }),
            Output::Other(_) => return Err(CalibrateError::NotANumber { found: "other" }),
        };
        let sums = Sums {
            loss: self.loss,
            target: &self.target,
            weights: &self.weights,
            weight_sum: self.weight_sum,
            weight_frac: &self.weight_frac,
            n,
        };
        let grads = if grad { &self.out.grads[..p] } else { &[] };
        ndvm_core::widest::with_widest_vectors(RunSums {
            sums: &sums,
            preds,
            losses: &mut self.losses,
            coef: &mut self.coef,
            grads,
            acc: &mut self.acc,
        });
        for (k, loss) in self.losses.iter_mut().enumerate() {
            let faulted = self
                .out
                .faults
                .get(k * n..(k + 1) * n)
                .is_some_and(|f| f.iter().fold(false, |a, &x| a | x));
            if faulted {
                *loss = f64::NAN;
            }
        }
        if !grad {
            return Ok(());
        }
        for (j, acc) in self.acc.chunks_exact(k_n).enumerate() {
            for (k, &sum) in acc.iter().enumerate() {
                let gt = if self.losses[k].is_finite() {
                    sum
                } else {
                    f64::NAN
                };
                self.grad_theta[k * p + j] = gt;
                self.grad_u[k * p + j] = gt * transform::slope(self.kinds[j], self.u[k * p + j]);
            }
        }
        Ok(())
    }
}

/// One run's sums in the widest vectors: every start's loss and dLoss/dpred ([`Sums::losses`]),
/// then each gradient's per-start dot with them ([`dot_per_start`]) into its row of `acc`.
struct RunSums<'a> {
    sums: &'a Sums<'a>,
    preds: &'a [f64],
    losses: &'a mut [f64],
    coef: &'a mut [f64],
    grads: &'a [ndvm_core::Gradient],
    acc: &'a mut [f64],
}

impl ndvm_core::widest::WideKernel for RunSums<'_> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        self.sums.losses(self.preds, self.losses, self.coef);
        let k_n = self.losses.len();
        for (g, acc) in self.grads.iter().zip(self.acc.chunks_exact_mut(k_n)) {
            dot_per_start(self.coef, &g.per_lane, self.sums.n, acc);
        }
    }
}

/// `acc[k] = Σ_i coef[k·n + i] · g[k·n + i]` (g uniform when it has one element), each sum in
/// the partials' order ([`PARTS`]).
#[inline(always)]
fn dot_per_start(coef: &[f64], g: &[f64], n: usize, acc: &mut [f64]) {
    if g.len() == 1 {
        let g0 = g[0];
        start_sums(n, acc, |k, i| coef[k * n + i] * g0);
    } else {
        row_sums(n, acc, (coef, g), (coef, coef), |c, x, _, _| c * x);
    }
}

/// How a start's sum over its points runs: point i goes into partial `i % PARTS`, and the
/// partials are added as `(p0 + p1) + (p2 + p3)` at the end. The order is fixed, so a sum has the
/// same bits however many starts are reduced together and at any vector width; four partials let
/// the compiler use vectors within a start and keep each add's latency off the critical path.
const PARTS: usize = 4;

/// Starts reduced together, their partials in registers.
const GROUP: usize = 4;

/// `out[s] = Σ_i term(s, i)` for each of the group's `G` starts, in the partials' order.
#[inline(always)]
fn group_sums<const G: usize>(n: usize, out: &mut [f64], term: impl Fn(usize, usize) -> f64) {
    let mut acc = [[0.0f64; PARTS]; G];
    let full = n - n % PARTS;
    for i in (0..full).step_by(PARTS) {
        for (s, a) in acc.iter_mut().enumerate() {
            for (j, p) in a.iter_mut().enumerate() {
                *p += term(s, i + j);
            }
        }
    }
    for i in full..n {
        for (s, a) in acc.iter_mut().enumerate() {
            a[i - full] += term(s, i);
        }
    }
    for (o, a) in out.iter_mut().zip(&acc) {
        *o = (a[0] + a[1]) + (a[2] + a[3]);
    }
}

/// `out[k] = Σ_i term(k, i)` for every start k, each in the partials' order (see [`PARTS`]),
/// [`GROUP`] starts at a time.
#[inline(always)]
fn start_sums(n: usize, out: &mut [f64], term: impl Fn(usize, usize) -> f64) {
    let mut groups = out.chunks_exact_mut(GROUP);
    let mut k0 = 0;
    for g in &mut groups {
        let base = k0;
        group_sums::<GROUP>(n, g, |s, i| term(base + s, i));
        k0 += GROUP;
    }
    for (s, o) in groups.into_remainder().iter_mut().enumerate() {
        group_sums::<1>(n, std::slice::from_mut(o), |_, i| term(k0 + s, i));
    }
}

/// `out[k] = Σ_i term(a[k·n + i], b[k·n + i], c[i], d[i])` for every start k, in the partials'
/// order ([`PARTS`]): each row's terms four at a time from exact chunks of the rows, which the
/// compiler turns into vector operations. `c` and `d` are per point (shared by the starts).
#[inline(always)]
fn row_sums(
    n: usize,
    out: &mut [f64],
    (a, b): (&[f64], &[f64]),
    (c, d): (&[f64], &[f64]),
    term: impl Fn(f64, f64, f64, f64) -> f64,
) {
    let (c, d) = (&c[..n], &d[..n]);
    for (k, o) in out.iter_mut().enumerate() {
        let (ra, rb) = (&a[k * n..][..n], &b[k * n..][..n]);
        let mut p = [0.0f64; PARTS];
        let (ca, cb) = (ra.chunks_exact(PARTS), rb.chunks_exact(PARTS));
        let (cc, cd) = (c.chunks_exact(PARTS), d.chunks_exact(PARTS));
        let tails = (
            ca.remainder(),
            cb.remainder(),
            cc.remainder(),
            cd.remainder(),
        );
        for (((x, y), z), w) in ca.zip(cb).zip(cc).zip(cd) {
            for j in 0..PARTS {
                p[j] += term(x[j], y[j], z[j], w[j]);
            }
        }
        for (j, p) in p.iter_mut().enumerate().take(tails.0.len()) {
            *p += term(tails.0[j], tails.1[j], tails.2[j], tails.3[j]);
        }
        *o = (p[0] + p[1]) + (p[2] + p[3]);
    }
}

/// The data side of the losses.
struct Sums<'a> {
    loss: Loss,
    target: &'a [f64],
    weights: &'a [f64],
    weight_sum: f64,
    weight_frac: &'a [f64],
    n: usize,
}

impl Sums<'_> {
    /// Every start's loss into `losses` and its dLoss/dpred per point into its row of `coef`
    /// (K×N); the same sums, in the same order, as [`loss_of`] on each start.
    #[inline(always)]
    fn losses(&self, preds: &[f64], losses: &mut [f64], coef: &mut [f64]) {
        let n = self.n;
        let k_n = losses.len();
        let uniform = preds.len() == 1;
        let preds = if uniform { preds } else { &preds[..k_n * n] };
        // Start k's predictions into `row`.
        let load = |row: &mut [f64], k: usize| {
            if uniform {
                row.fill(preds[0]);
            } else {
                row.copy_from_slice(&preds[k * n..(k + 1) * n]);
            }
        };
        if self.loss == Loss::ProgramLoss {
            if uniform {
                start_sums(n, losses, |_, _| preds[0]);
            } else {
                row_sums(n, losses, (preds, preds), (preds, preds), |x, _, _, _| x);
            }
            coef[..k_n * n].fill(1.0);
            return;
        }
        let (target, weights) = (&self.target[..n], &self.weights[..n]);
        let sq = |x: f64, i: usize| {
            let r = x - target[i];
            weights[i] * r * r
        };
        if uniform {
            start_sums(n, losses, |_, i| sq(preds[0], i));
        } else {
            row_sums(
                n,
                losses,
                (preds, preds),
                (target, weights),
                |x, _, y, w| {
                    let r = x - y;
                    w * r * r
                },
            );
        }
        for (k, l) in losses.iter_mut().enumerate() {
            let mse = *l / self.weight_sum;
            let scale = match self.loss {
                Loss::GaussianNll => 1.0 / mse.max(f64::MIN_POSITIVE),
                _ => 2.0,
            };
            let row = &mut coef[k * n..(k + 1) * n];
            load(row, k);
            for ((c, &y), &f) in row.iter_mut().zip(target).zip(&self.weight_frac[..n]) {
                let r = *c - y;
                *c = (scale * f) * r;
            }
            *l = match self.loss {
                Loss::GaussianNll => {
                    0.5 * (2.0 * std::f64::consts::PI * mse.max(f64::MIN_POSITIVE)).ln() + 0.5
                }
                _ => mse,
            };
        }
    }
}

/// The loss of the start whose lanes begin at `base`; fills `coef` with dLoss/dpred per point
/// (the reference [`Sums::losses`] must match bit for bit).
#[cfg(test)]
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
        coef.fill(1.0);
        return partial_sum((0..n).map(|i| at(preds, base + i)));
    }
    let sse = partial_sum((0..n).map(|i| {
        let r = at(preds, base + i) - target[i];
        weights[i] * r * r
    }));
    let mse = sse / weight_sum;
    let scale = match loss {
        Loss::GaussianNll => 1.0 / mse.max(f64::MIN_POSITIVE),
        _ => 2.0,
    };
    for i in 0..n {
        let r = at(preds, base + i) - target[i];
        coef[i] = (scale * (weights[i] / weight_sum)) * r;
    }
    match loss {
        Loss::GaussianNll => {
            0.5 * (2.0 * std::f64::consts::PI * mse.max(f64::MIN_POSITIVE)).ln() + 0.5
        }
        _ => mse,
    }
}

/// A sum as every start's is defined ([`PARTS`]): term i into partial `i % 4`, then
/// `(p0 + p1) + (p2 + p3)`; one term at a time, as plainly as it can be written.
#[cfg(test)]
fn partial_sum(terms: impl Iterator<Item = f64>) -> f64 {
    let mut p = [0.0f64; 4];
    for (i, t) in terms.enumerate() {
        p[i % 4] += t;
    }
    (p[0] + p[1]) + (p[2] + p[3])
}

#[cfg(test)]
mod tests {
    use ndvm_core::{Dialect, Gradient};
    use rand_chacha::ChaCha8Rng;
    use rand_chacha::rand_core::{RngCore, SeedableRng};

    use super::*;

    /// The reduction as it was before the starts' sums were interleaved: one start at a time,
    /// through [`loss_of`]. Returns (losses, grad_theta, grad_u).
    fn reduce_reference(obj: &Objective) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let (k_n, n, p) = (obj.n_starts, obj.n_points, obj.n_params());
        let Output::Number(preds) = &obj.out.value else {
            unreachable!("the test output is a number")
        };
        let mut coef = vec![0.0; n];
        let mut losses = vec![0.0; k_n];
        let mut grad_theta = vec![0.0; k_n * p];
        let mut grad_u = vec![0.0; k_n * p];
        for k in 0..k_n {
            let lanes = k * n..(k + 1) * n;
            let faulted = obj
                .out
                .faults
                .get(lanes)
                .is_some_and(|f| f.iter().any(|&x| x));
            let loss = if faulted {
                f64::NAN
            } else {
                let (t, w, ws) = (&obj.target, &obj.weights, obj.weight_sum);
                loss_of(obj.loss, preds, k * n, t, w, ws, &mut coef)
            };
            losses[k] = loss;
            for j in 0..p {
                let g = &obj.out.grads[j].per_lane;
                let acc = partial_sum(coef.iter().enumerate().map(|(i, c)| c * at(g, k * n + i)));
                let gt = if loss.is_finite() { acc } else { f64::NAN };
                grad_theta[k * p + j] = gt;
                grad_u[k * p + j] = gt * transform::slope(obj.kinds[j], obj.u[k * p + j]);
            }
        }
        (losses, grad_theta, grad_u)
    }

    fn bits(v: &[f64]) -> Vec<u64> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn interleaved_reduction_matches_one_start_at_a_time_bit_for_bit() {
        let mut rng = ChaCha8Rng::seed_from_u64(15);
        let uniform = |rng: &mut ChaCha8Rng| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let kinds = [
            ParamKind::Free,
            ParamKind::Positive,
            ParamKind::Unit,
            ParamKind::Bounded { lo: -2.0, hi: 3.0 },
            ParamKind::Free,
        ];
        let names: Vec<String> = (0..kinds.len()).map(|j| format!("p{j}")).collect();
        let losses = [
            Loss::Mse,
            Loss::WeightedMse,
            Loss::GaussianNll,
            Loss::ProgramLoss,
        ];
        // Starts seen with a faulted (NaN) loss and with a finite one.
        let mut seen = [0usize; 2];
        for (case, &(k_n, n)) in [(1, 7), (3, 1), (32, 44), (5, 13), (13, 6)]
            .iter()
            .enumerate()
        {
            for &loss in &losses {
                let xs: Vec<f64> = (0..n).map(|i| i as f64).collect();
                let mut data = Dataset::new().column("x", xs);
                if loss != Loss::ProgramLoss {
                    let ys = (0..n).map(|_| uniform(&mut rng) * 4.0 - 2.0).collect();
                    let ws = (0..n).map(|_| 0.1 + uniform(&mut rng)).collect();
                    data = data.target(ys).weights(ws);
                }
                let ev = Objective::evaluator(k_n * n, Dialect::Default, ndvm_core::Precision::F64);
                let mut obj = Objective::new(ev, &names, &kinds, &data, loss, k_n);
                let b = k_n * n;
                let lanes = |rng: &mut ChaCha8Rng, uniform_ok: bool| -> Vec<f64> {
                    if uniform_ok && rng.next_u32().is_multiple_of(4) {
                        return vec![uniform(rng) * 6.0 - 3.0];
                    }
                    (0..b).map(|_| uniform(rng) * 6.0 - 3.0).collect()
                };
                let preds = lanes(&mut rng, case == 1);
                let grads = names
                    .iter()
                    .map(|name| Gradient {
                        name: name.clone(),
                        per_lane: lanes(&mut rng, true),
                    })
                    .collect();
                // Some starts fault on one lane; the fault vector is sometimes absent.
                let faults = if rng.next_u32().is_multiple_of(3) {
                    Vec::new()
                } else {
                    (0..b)
                        .map(|_| rng.next_u32().is_multiple_of(4 * n as u32))
                        .collect()
                };
                obj.out = Evaluation {
                    value: Output::Number(preds),
                    grads,
                    faults,
                };
                for u in obj.u.iter_mut() {
                    *u = uniform(&mut rng) * 8.0 - 4.0;
                }
                let (l, gt, gu) = reduce_reference(&obj);
                obj.reduce(true).unwrap();
                assert_eq!(bits(&obj.losses), bits(&l), "{loss:?} K={k_n} N={n}");
                assert_eq!(bits(&obj.grad_theta), bits(&gt), "{loss:?} K={k_n} N={n}");
                assert_eq!(bits(&obj.grad_u), bits(&gu), "{loss:?} K={k_n} N={n}");
                for l in &obj.losses {
                    seen[usize::from(l.is_finite())] += 1;
                }
            }
        }
        assert!(seen[0] > 10 && seen[1] > 80, "{seen:?}");
    }
}
