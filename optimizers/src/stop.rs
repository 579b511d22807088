//! How a start stands and why it, and a calibration, stopped: `StartState` (shared by Adam,
//! L-BFGS and Levenberg–Marquardt), `StartStatus`, `StopReason`, and the norm starts stop on.

/// Why one start stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartStatus {
    /// Its gradient norm fell below the tolerance, or no step could lower its loss further.
    Converged,
    /// It used its iterations.
    MaxIters,
    /// Its loss reached the target.
    TargetLoss,
    /// The calibration's time limit ran out.
    TimeLimit,
    /// Its loss or gradient became non-finite and it was dropped; it keeps its best finite point.
    NonFinite,
    /// The portfolio's racing screen dropped it at a cut (see `CalibrateConfig::race`): its
    /// loss so far ranked below the starts kept; it keeps its best point.
    Eliminated,
}

/// Why the calibration stopped: the best start's status, or that no start ever had a finite
/// loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// The best start converged.
    Converged,
    /// The best start used its iterations.
    MaxIters,
    /// The best start reached the target loss.
    TargetLoss,
    /// The time limit ran out.
    TimeLimit,
    /// The best start was dropped when its loss went non-finite; its best finite point is
    /// reported.
    NonFinite,
    /// No start ever had a finite loss (and gradient).
    AllStartsNonFinite,
}

impl StopReason {
    /// A short lowercase name (`converged`, `max-iters`, `target-loss`, `time-limit`,
    /// `non-finite`, `all-starts-non-finite`).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Converged => "converged",
            StopReason::MaxIters => "max-iters",
            StopReason::TargetLoss => "target-loss",
            StopReason::TimeLimit => "time-limit",
            StopReason::NonFinite => "non-finite",
            StopReason::AllStartsNonFinite => "all-starts-non-finite",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl StartStatus {
    /// Its name as written in Rust (`Converged`, `MaxIters`, `TargetLoss`, `TimeLimit`,
    /// `NonFinite`, `Eliminated`): the per-start status the Python package reports.
    pub fn name(self) -> &'static str {
        match self {
            StartStatus::Converged => "Converged",
            StartStatus::MaxIters => "MaxIters",
            StartStatus::TargetLoss => "TargetLoss",
            StartStatus::TimeLimit => "TimeLimit",
            StartStatus::NonFinite => "NonFinite",
            StartStatus::Eliminated => "Eliminated",
        }
    }

    /// The calibration's reason when this start is the best one.
    pub(crate) fn as_stop_reason(self) -> StopReason {
        match self {
            StartStatus::Converged => StopReason::Converged,
            StartStatus::MaxIters => StopReason::MaxIters,
            StartStatus::TargetLoss => StopReason::TargetLoss,
            StartStatus::TimeLimit => StopReason::TimeLimit,
            StartStatus::NonFinite => StopReason::NonFinite,
            // Never the best start: a survivor ranked above it, and a start's best loss only
            // falls.
            StartStatus::Eliminated => StopReason::MaxIters,
        }
    }
}

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

/// The Euclidean norm (of a gradient).
pub(crate) fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}
