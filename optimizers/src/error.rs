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
        "no parameters to fit: declare them with (params (name kind init) …) in the program or list them in the configuration"
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

impl From<CoreError> for CalibrateError {
    fn from(error: CoreError) -> Self {
        CalibrateError::Eval { error }
    }
}

/// Result alias for this crate.
pub type Result<T, E = CalibrateError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    #[test]
    fn calibrate_error_is_send_sync() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<super::CalibrateError>();
    }
}
