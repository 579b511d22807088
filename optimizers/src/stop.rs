//! Why a start, and a calibration, stopped.

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
