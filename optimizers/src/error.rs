//! `CalibrateError`: bad configuration, bad data, or a program the evaluator rejects. Budgets and
//! non-finite starts are not errors; they end in a `StopReason`.

use ndvm_core::CoreError;

/// A failure of calibration: the input was wrong or the program cannot run. Running out of
/// iterations or time, or every start going non-finite, is reported in
/// [`Calibration::stop_reason`](crate::Calibration::stop_reason) instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CalibrateError {
    /// A configuration field holds a value outside its domain.
    #[error("invalid calibration setting `{field}`: {message}")]
    InvalidConfig {
        /// The field of `CalibrateConfig`.
        field: &'static str,
        /// What is wrong, lowercase.
        message: String,
    },
    /// The data set is inconsistent with itself or with the loss.
    #[error("invalid data: {message}")]
    InvalidData {
        /// What is wrong, lowercase.
        message: String,
    },
    /// Neither the program (`(params …)`) nor the configuration names a parameter to fit.
    #[error(
        "no parameters to fit: declare them with (params (name kind init) …) in the program or list them in `CalibrateConfig::params`"
    )]
    NoParameters,
    /// A parameter's initial value lies outside the domain of its kind.
    #[error("parameter `{name}`: initial value {init} lies outside its domain")]
    BadInit {
        /// The parameter.
        name: String,
        /// The offending initial value.
        init: f64,
    },
    /// The same name is both a parameter and a data input.
    #[error("`{name}` is both a parameter and a data input")]
    NameClash {
        /// The name.
        name: String,
    },
    /// The program's value is not a number, so it cannot be a prediction or a loss.
    #[error("the program's value must be a number, found {found}")]
    NotANumber {
        /// What the program returned (`vector`, `matrix`, `boolean`, `other`).
        found: &'static str,
    },
    /// The evaluator rejected the program (unbound variable, type error, step budget, …).
    #[error("{error}")]
    Eval {
        /// The evaluator's error; its `node` locates the offending form.
        error: CoreError,
    },
}

impl CalibrateError {
    /// A stable kebab-case class for grouping failures: `config`, `data`, `no-parameters`,
    /// `bad-init`, `name-clash`, `not-a-number`, and for `Eval` the evaluator's class
    /// (`ndvm_core::ErrorKind::class`: `work`, `memory`, `deadline`, `type`, …).
    pub fn class(&self) -> &'static str {
        match self {
            CalibrateError::InvalidConfig { .. } => "config",
            CalibrateError::InvalidData { .. } => "data",
            CalibrateError::NoParameters => "no-parameters",
            CalibrateError::BadInit { .. } => "bad-init",
            CalibrateError::NameClash { .. } => "name-clash",
            CalibrateError::NotANumber { .. } => "not-a-number",
            CalibrateError::Eval { error } => error.kind.class(),
        }
    }
}

impl From<CoreError> for CalibrateError {
    fn from(error: CoreError) -> Self {
        CalibrateError::Eval { error }
    }
}

/// Result alias for this crate.
pub type Result<T, E = CalibrateError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::CalibrateError;
    use ndvm_core::{CoreError, ErrorKind};

    #[test]
    fn classes_are_stable() {
        let eval = |kind| CalibrateError::from(CoreError::new(kind, "x")).class();
        assert_eq!(eval(ErrorKind::Deadline), "deadline");
        assert_eq!(eval(ErrorKind::MemoryLimit), "memory");
        assert_eq!(eval(ErrorKind::StepBudget), "work");
        assert_eq!(eval(ErrorKind::Type), "type");
        assert_eq!(CalibrateError::NoParameters.class(), "no-parameters");
        let cfg = CalibrateError::InvalidConfig {
            field: "n_starts",
            message: String::new(),
        };
        assert_eq!(cfg.class(), "config");
        let data = CalibrateError::InvalidData {
            message: String::new(),
        };
        assert_eq!(data.class(), "data");
    }

    #[test]
    fn calibrate_error_is_send_sync() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<super::CalibrateError>();
    }
}
