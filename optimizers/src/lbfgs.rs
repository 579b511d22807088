//! L-BFGS through argmin, one start at a time on a one-start objective (N lanes). argmin asks for
//! the cost and the gradient separately; one walk yields both, so the last point is cached. argmin
//! types stay inside this file.

use std::cell::RefCell;
use std::time::Instant;

use argmin::core::{
    CostFunction, Error as ArgminError, Executor, Gradient, State, TerminationReason,
    TerminationStatus,
};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;
use ndvm_core::{Heap, Program};

use crate::error::{CalibrateError, Result};
use crate::objective::Objective;
use crate::stop::{StartState, StartStatus};

/// Settings of one L-BFGS run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LbfgsRun {
    pub(crate) max_iters: usize,
    pub(crate) memory: usize,
    pub(crate) tol_grad: f64,
    pub(crate) target_loss: Option<f64>,
    pub(crate) deadline: Option<Instant>,
}

/// Why the problem refused an evaluation (argmin sees only an error and stops).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Refusal {
    TimeLimit,
    NonFinite,
}

struct Inner<'a> {
    obj: &'a mut Objective,
    heap: &'a mut Heap,
    program: &'a Program,
    start: &'a mut StartState,
    /// The last evaluated point and its loss and gradient (dLoss/du).
    last_u: Vec<f64>,
    last_loss: f64,
    last_grad: Vec<f64>,
    refusal: Option<Refusal>,
    error: Option<CalibrateError>,
    deadline: Option<Instant>,
}

/// The argmin problem: a one-start objective behind a `RefCell`, since argmin takes `&self`. The
/// cell lives outside so that what happened survives an argmin error.
struct Problem<'c, 'a> {
    inner: &'c RefCell<Inner<'a>>,
}

impl Problem<'_, '_> {
    fn evaluate(&self, u: &[f64]) -> std::result::Result<(), ArgminError> {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        if inner.last_u.as_slice() == u && !inner.last_grad.is_empty() {
            return Ok(());
        }
        if inner.deadline.is_some_and(|d| Instant::now() >= d) {
            inner.refusal = Some(Refusal::TimeLimit);
            return Err(ArgminError::msg("time limit"));
        }
        if let Err(e) = inner.obj.eval(inner.heap, inner.program, u) {
            inner.error = Some(e);
            return Err(ArgminError::msg("evaluation failed"));
        }
        let loss = inner.obj.losses[0];
        let ok = inner
            .start
            .observe(u, loss, &inner.obj.grad_theta, &inner.obj.grad_u);
        if !ok {
            inner.last_grad.clear();
            inner.refusal.get_or_insert(Refusal::NonFinite);
            return Err(ArgminError::msg("non-finite loss"));
        }
        inner.last_u.clear();
        inner.last_u.extend_from_slice(u);
        inner.last_loss = loss;
        inner.last_grad.clear();
        inner.last_grad.extend_from_slice(&inner.obj.grad_u);
        Ok(())
    }
}

impl CostFunction for Problem<'_, '_> {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, u: &Vec<f64>) -> std::result::Result<f64, ArgminError> {
        self.evaluate(u)?;
        Ok(self.inner.borrow().last_loss)
    }
}

impl Gradient for Problem<'_, '_> {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;

    fn gradient(&self, u: &Vec<f64>) -> std::result::Result<Vec<f64>, ArgminError> {
        self.evaluate(u)?;
        Ok(self.inner.borrow().last_grad.clone())
    }
}

/// Runs L-BFGS from `u0` on the one-start objective `obj`, recording into `start` (whose best
/// point is the result) and setting its status.
pub(crate) fn run(
    obj: &mut Objective,
    heap: &mut Heap,
    program: &Program,
    u0: &[f64],
    start: &mut StartState,
    cfg: LbfgsRun,
) -> Result<()> {
    let cell = RefCell::new(Inner {
        obj,
        heap,
        program,
        start,
        last_u: Vec::new(),
        last_loss: f64::NAN,
        last_grad: Vec::new(),
        refusal: None,
        error: None,
        deadline: cfg.deadline,
    });
    let problem = Problem { inner: &cell };
    // Evaluate the start first: a non-finite start never reaches argmin.
    if problem.evaluate(u0).is_err() {
        return finish(cell, None);
    }
    let invalid = |e: ArgminError| CalibrateError::InvalidConfig {
        field: "tol_grad",
        message: e.to_string(),
    };
    let solver = LBFGS::new(MoreThuenteLineSearch::new(), cfg.memory)
        .with_tolerance_grad(cfg.tol_grad)
        .map_err(invalid)?
        .with_tolerance_cost(0.0)
        .map_err(invalid)?;
    let target = cfg.target_loss.unwrap_or(f64::NEG_INFINITY);
    let res = Executor::new(problem, solver)
        .configure(|state| {
            state
                .param(u0.to_vec())
                .max_iters(cfg.max_iters as u64)
                .target_cost(target)
        })
        .ctrlc(false)
        .timer(false)
        .run();
    // argmin reports the problem's own refusals during its first step as errors; the best point
    // is recorded in `start` either way.
    let outcome = res.ok().map(|res| {
        (
            res.state.get_iter() as usize,
            res.state.get_termination_status().clone(),
        )
    });
    finish(cell, outcome)
}

fn finish(cell: RefCell<Inner<'_>>, outcome: Option<(usize, TerminationStatus)>) -> Result<()> {
    let inner = cell.into_inner();
    if let Some(e) = inner.error {
        return Err(e);
    }
    let start = inner.start;
    let status = match (&inner.refusal, &outcome) {
        (Some(Refusal::TimeLimit), _) => StartStatus::TimeLimit,
        (_, Some((_, TerminationStatus::Terminated(TerminationReason::MaxItersReached)))) => {
            StartStatus::MaxIters
        }
        (_, Some((_, TerminationStatus::Terminated(TerminationReason::TargetCostReached)))) => {
            StartStatus::TargetLoss
        }
        _ if !start.best_loss.is_finite() => StartStatus::NonFinite,
        // Gradient tolerance met, or the line search could not lower the loss any further.
        _ => StartStatus::Converged,
    };
    if let Some((iters, _)) = outcome {
        start.iters += iters;
    }
    start.status = Some(status);
    Ok(())
}
