//! The calibrator's contracts other than accuracy: each loss's gradient against central finite
//! differences, non-finite starts dropped, stop reasons, and errors for bad input.
//!
//! Oracles: central finite differences (gradients) and known answers (stop reasons, errors).

use ndvm_frontends::{Frontend, scheme::Scheme};
// Issue 11: the core types the calibrator's API names are reachable from ndvm-optimizers.
use ndvm_optimizers::{
    CalibrateConfig, CalibrateError, Calibration, Calibrator, Dataset, Heap, Loss, Optimizer,
    ParamKind, ParamSpec, StartStatus, StopReason,
};

/// Every test funnels through here: calibrates `src` against `data` with `config`.
fn check(
    src: &str,
    data: &Dataset,
    config: CalibrateConfig,
) -> Result<Calibration, CalibrateError> {
    let mut heap = Heap::new();
    let program = Scheme.parse(&mut heap, src).unwrap();
    Calibrator::new(config)?.calibrate(&mut heap, &program, data)
}

fn decay_data(weights: bool) -> Dataset {
    let xs: Vec<f64> = (0..12).map(|i| i as f64 * 0.3).collect();
    let ys = xs
        .iter()
        .map(|x| 2.0 * (-0.5 * x).exp() + 0.05 * x.sin())
        .collect();
    let data = Dataset::new().column("x", xs).target(ys);
    if weights {
        data.weights((0..12).map(|i| 0.5 + i as f64 * 0.1).collect())
    } else {
        data
    }
}

/// The loss and gradient at (a, b) without optimizing: L-BFGS with zero iterations.
fn at(loss: Loss, weights: bool, a: f64, b: f64) -> Calibration {
    let config = CalibrateConfig {
        optimizer: Optimizer::Lbfgs,
        n_starts: 1,
        max_iters: 0,
        loss,
        params: vec![
            ParamSpec::new("a", ParamKind::Free, a),
            ParamSpec::new("b", ParamKind::Positive, b),
        ],
        ..CalibrateConfig::recommended()
    };
    check("(* a (exp (- 0 (* b x))))", &decay_data(weights), config).unwrap()
}

#[test]
fn loss_gradients_match_central_differences() {
    // Oracle: central finite differences with h = 1e-6 in each parameter.
    for (loss, weights) in [
        (Loss::Mse, false),
        (Loss::WeightedMse, true),
        (Loss::GaussianNll, false),
        (Loss::GaussianNll, true),
    ] {
        let (a, b, h) = (1.3, 0.8, 1e-6);
        let fit = at(loss, weights, a, b);
        assert_eq!(fit.params, vec![a, b], "zero iterations stay at the start");
        let fd_a =
            (at(loss, weights, a + h, b).loss - at(loss, weights, a - h, b).loss) / (2.0 * h);
        let fd_b =
            (at(loss, weights, a, b + h).loss - at(loss, weights, a, b - h).loss) / (2.0 * h);
        for (g, fd) in fit.grad.iter().zip([fd_a, fd_b]) {
            assert!(
                (g - fd).abs() < 1e-6 * (1.0 + fd.abs()),
                "{loss:?}: {g} vs {fd}"
            );
        }
    }
}

#[test]
fn non_finite_starts_are_dropped() {
    // Starts with a < 0 take the log of a negative number (a lane fault in the default dialect);
    // they are dropped and the others still find a = 2.
    let xs: Vec<f64> = (1..10).map(f64::from).collect();
    let ys = xs.iter().map(|x| 2f64.ln() * x).collect();
    let data = Dataset::new().column("x", xs).target(ys);
    let fit = check(
        "(params (a free 0.5)) (* (log a) x)",
        &data,
        CalibrateConfig::recommended(),
    )
    .unwrap();
    assert!(
        fit.starts
            .iter()
            .any(|s| s.status == StartStatus::NonFinite && s.loss.is_nan())
    );
    assert!((fit.param("a").unwrap() - 2.0).abs() < 1e-9, "{fit:#?}");
    assert_eq!(fit.stop_reason, StopReason::Converged);

    let all_bad = check(
        "(params (a free 0.5)) (* (log (- 0 (* a a) 1)) x)",
        &data,
        CalibrateConfig::recommended(),
    )
    .unwrap();
    assert_eq!(all_bad.stop_reason, StopReason::AllStartsNonFinite);
    assert!(all_bad.loss.is_nan() && all_bad.best_start.is_none());
}

#[test]
fn target_loss_and_iteration_budget() {
    let data = decay_data(false);
    let config = CalibrateConfig {
        target_loss: Some(1e-2),
        ..CalibrateConfig::recommended()
    };
    let fit = check(
        "(params (a free 1.0) (b positive 1.0)) (* a (exp (- 0 (* b x))))",
        &data,
        config,
    )
    .unwrap();
    assert_eq!(fit.stop_reason, StopReason::TargetLoss);
    assert!(fit.loss <= 1e-2);

    let config = CalibrateConfig {
        optimizer: Optimizer::Adam,
        max_iters: 3,
        ..CalibrateConfig::recommended()
    };
    let fit = check(
        "(params (a free 1.0) (b positive 1.0)) (* a (exp (- 0 (* b x))))",
        &data,
        config,
    )
    .unwrap();
    assert_eq!(fit.stop_reason, StopReason::MaxIters);
    assert!(fit.starts.iter().all(|s| s.iters == 3 && s.n_evals == 3));
    assert_eq!(fit.n_grad_evals, 3 * 32);
}

#[test]
fn bad_input_is_an_error() {
    let data = decay_data(false);
    let msg = |r: Result<Calibration, CalibrateError>| r.unwrap_err().to_string();
    assert!(
        msg(check("(* a x)", &data, CalibrateConfig::recommended()))
            .starts_with("no parameters to fit")
    );
    assert_eq!(
        msg(check(
            "(params (x free 1.0)) (* x 2)",
            &data,
            CalibrateConfig::recommended()
        )),
        "`x` is both a parameter and a data input"
    );
    assert_eq!(
        msg(check(
            "(params (a free 1.0)) (* a x)",
            &data,
            CalibrateConfig {
                n_starts: 0,
                ..CalibrateConfig::recommended()
            }
        )),
        "invalid calibration setting `n_starts`: there must be at least one start"
    );
    assert_eq!(
        msg(check(
            "(params (a free 1.0)) (* a x)",
            &Dataset::new().column("x", vec![1.0]),
            CalibrateConfig::recommended()
        )),
        "invalid data: this loss needs a target"
    );
    assert_eq!(
        msg(check(
            "(params (a free 1.0)) (vec a x)",
            &data,
            CalibrateConfig::recommended()
        )),
        "the program's value must be a number, found vector"
    );
    let config = CalibrateConfig {
        params: vec![ParamSpec::new("a", ParamKind::Positive, -1.0)],
        ..CalibrateConfig::recommended()
    };
    assert_eq!(
        msg(check("(* a x)", &data, config)),
        "parameter `a`: initial value -1 lies outside its domain"
    );
    assert!(matches!(
        check(
            "(params (a free 1.0)) (* a zz)",
            &data,
            CalibrateConfig::recommended()
        ),
        Err(CalibrateError::Eval { .. })
    ));
}

/// Issue 11: calibrating a program with a heap other than its own panicked (index out of bounds)
/// inside the evaluator; it is now the evaluator's classified `foreign-program` error.
#[test]
fn issue_11_a_program_with_another_heap_is_an_error() {
    let mut heap = Heap::new();
    let program = Scheme
        .parse(
            &mut heap,
            "(params (a free 1.0) (b free 0.1)) (* a (exp (- (* b x))))",
        )
        .unwrap();
    let mut other = Heap::new();
    let err = Calibrator::new(CalibrateConfig::recommended())
        .unwrap()
        .calibrate(&mut other, &program, &decay_data(false))
        .unwrap_err();
    assert_eq!(err.class(), "foreign-program", "{err}");
    assert!(matches!(
        err,
        CalibrateError::Eval { error } if error.kind == ndvm_optimizers::ErrorKind::ForeignProgram
    ));
}

/// Issue 11: `ParamKind` (and the other core types of the API) were not re-exported, so a caller
/// of ndvm-optimizers alone could not name a parameter's kind.
#[test]
fn issue_11_core_types_of_the_api_are_reexported() {
    let spec = ParamSpec::new("a", ndvm_optimizers::ParamKind::Positive, 1.0);
    assert_eq!(spec.kind, ndvm_core::ParamKind::Positive);
    let config = CalibrateConfig {
        dialect: ndvm_optimizers::Dialect::Reference,
        ..CalibrateConfig::recommended()
    };
    assert_eq!(config.dialect, ndvm_core::Dialect::Reference);
    let error: ndvm_optimizers::CoreError =
        ndvm_core::CoreError::new(ndvm_optimizers::ErrorKind::Type, "x");
    assert_eq!(CalibrateError::from(error).class(), "type");
    let heap = ndvm_optimizers::Heap::new();
    let program: ndvm_optimizers::Program = ndvm_core::Program::new(&heap, Vec::new());
    assert!(program.forms().is_empty());
}

#[test]
fn repeated_evaluations_replay_the_recorded_trace() {
    let data = decay_data(false);
    let src = "(params (a free 1.0) (b positive 1.0)) (* a (exp (- 0 (* b x))))";
    // Adam: 20 steps of 32 starts in one walk each; the first walks, the other 19 replay.
    let config = CalibrateConfig {
        optimizer: Optimizer::Adam,
        max_iters: 20,
        tol_grad: 0.0,
        ..CalibrateConfig::recommended()
    };
    let fit = check(src, &data, config).unwrap();
    assert_eq!(fit.n_grad_evals, 20 * 32);
    assert_eq!(fit.n_replayed, 19 * 32);
    // The portfolio's L-BFGS polish replays too; the final forward prediction walks.
    let fit = check(src, &data, CalibrateConfig::recommended()).unwrap();
    assert!(
        fit.n_replayed > fit.n_grad_evals / 2,
        "{} of {}",
        fit.n_replayed,
        fit.n_grad_evals
    );
    assert!(fit.n_replayed < fit.n_evals);
    // A branch on a parameter: the guard holds while the sign of a stays, so most still replay.
    let fit = check(
        "(params (a free 1.0) (b positive 1.0)) (if (< a 0.0) 0.0 (* a (exp (- 0 (* b x)))))",
        &data,
        CalibrateConfig::recommended(),
    )
    .unwrap();
    assert!(
        fit.n_replayed > fit.n_grad_evals / 2,
        "{} of {}",
        fit.n_replayed,
        fit.n_grad_evals
    );
}
