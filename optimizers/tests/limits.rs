//! The calibrator under the evaluator's resource limits: the configured work, memory and depth
//! limits reach every evaluation, the time limit is a deadline inside evaluations, a raised cancel
//! flag ends a calibration, and errors have stable classes.

use std::time::{Duration, Instant};

use ndvm_core::{Cancel, ErrorKind, EvalOptions, Heap, ParamKind};
use ndvm_frontends::{Frontend, scheme::Scheme};
use ndvm_optimizers::{
    CalibrateConfig, CalibrateError, Calibration, Calibrator, Dataset, Optimizer, ParamSpec,
    StartStatus, StopReason,
};

fn data() -> Dataset {
    let xs: Vec<f64> = (0..8).map(|i| i as f64 * 0.5).collect();
    let ys = xs.iter().map(|x| 3.0 * x).collect();
    Dataset::new().column("x", xs).target(ys)
}

fn config(init: f64) -> CalibrateConfig {
    CalibrateConfig {
        optimizer: Optimizer::Adam,
        n_starts: 1,
        max_iters: 100_000,
        learning_rate: 0.05,
        tol_grad: 0.0,
        params: vec![ParamSpec::new("a", ParamKind::Free, init)],
        ..CalibrateConfig::recommended()
    }
}

fn calibrate(cal: &mut Calibrator, src: &str) -> Result<Calibration, CalibrateError> {
    let mut heap = Heap::new();
    let program = Scheme.parse(&mut heap, src).unwrap();
    cal.calibrate(&mut heap, &program, &data())
}

#[test]
fn defaults_are_the_evaluator_defaults_and_zero_is_rejected() {
    let c = CalibrateConfig::recommended();
    assert_eq!(c.max_work, EvalOptions::DEFAULT_MAX_STEPS);
    assert_eq!(c.max_memory, EvalOptions::DEFAULT_MAX_MEMORY);
    assert_eq!(c.max_depth, EvalOptions::DEFAULT_MAX_DEPTH);
    for (field, cfg) in [
        (
            "max_work",
            CalibrateConfig {
                max_work: 0,
                ..config(1.0)
            },
        ),
        (
            "max_memory",
            CalibrateConfig {
                max_memory: 0,
                ..config(1.0)
            },
        ),
        (
            "max_depth",
            CalibrateConfig {
                max_depth: 0,
                ..config(1.0)
            },
        ),
    ] {
        match Calibrator::new(cfg) {
            Err(e @ CalibrateError::InvalidConfig { field: f, .. }) => {
                assert_eq!(f, field);
                assert_eq!(e.class(), "config");
            }
            other => panic!("{field}: {other:?}"),
        }
    }
}

#[test]
fn reconfigure_checks_the_new_config_and_keeps_the_old_one_on_an_error() {
    let mut cal = Calibrator::new(config(1.0)).unwrap();
    let bad = CalibrateConfig {
        n_starts: 0,
        ..config(1.0)
    };
    match cal.reconfigure(bad) {
        Err(CalibrateError::InvalidConfig { field, .. }) => assert_eq!(field, "n_starts"),
        other => panic!("{other:?}"),
    }
    assert_eq!(cal.config(), &config(1.0));
    let fewer = CalibrateConfig {
        n_starts: 3,
        ..config(1.0)
    };
    cal.reconfigure(fewer).unwrap();
    let fit = calibrate(&mut cal, "(* a x)").expect("fits");
    assert_eq!(fit.starts.len(), 3);
}

#[test]
fn an_endless_evaluation_ends_at_the_deadline() {
    let cfg = CalibrateConfig {
        time_limit: Some(Duration::from_millis(300)),
        ..config(1.0)
    };
    let mut cal = Calibrator::new(cfg).unwrap();
    let start = Instant::now();
    let err = calibrate(&mut cal, "(loop ((i 0)) (recur (+ i 1)))").expect_err("deadline");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    match &err {
        CalibrateError::Eval { error } => assert_eq!(error.kind, ErrorKind::Deadline),
        other => panic!("{other:?}"),
    }
    assert_eq!(err.class(), "deadline");
    // The pooled evaluator is re-armed: the next calibration with the same calibrator runs.
    let fit = calibrate(&mut cal, "(* a x)").expect("fits");
    assert!((fit.params[0] - 3.0).abs() < 1e-3, "{:?}", fit.params);
}

#[test]
fn a_deadline_after_finite_losses_keeps_the_best_point() {
    // The loss is finite while a < 2; once Adam moves a past 2 the evaluation never ends.
    let cfg = CalibrateConfig {
        time_limit: Some(Duration::from_millis(500)),
        ..config(1.0)
    };
    let mut cal = Calibrator::new(cfg).unwrap();
    let start = Instant::now();
    let fit = calibrate(
        &mut cal,
        "(if (< a 2.0) (* a x) (loop ((i 0)) (recur (+ i 1))))",
    )
    .expect("the best point so far");
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(fit.stop_reason, StopReason::TimeLimit);
    assert_eq!(fit.starts[0].status, StartStatus::TimeLimit);
    assert!(fit.loss.is_finite());
    assert!(
        fit.params[0] < 2.0 && fit.params[0] > 1.0,
        "{:?}",
        fit.params
    );
}

#[test]
fn work_and_memory_limits_reach_every_evaluation() {
    let cfg = CalibrateConfig {
        max_work: 1_000,
        ..config(1.0)
    };
    let mut cal = Calibrator::new(cfg).unwrap();
    let err = calibrate(
        &mut cal,
        "(+ (* a x) (loop ((i 0) (s 0)) (if (= i 1000) s (recur (+ i 1) (+ s 0)))))",
    )
    .expect_err("work");
    assert_eq!(err.class(), "work");
    let cfg = CalibrateConfig {
        max_memory: 1 << 20,
        ..config(1.0)
    };
    let mut cal = Calibrator::new(cfg).unwrap();
    let err = calibrate(
        &mut cal,
        "(+ (* a x) (trace (outer (ones 512) (ones 512))))",
    )
    .expect_err("memory");
    assert_eq!(err.class(), "memory");
    let cfg = CalibrateConfig {
        max_depth: 20,
        ..config(1.0)
    };
    let mut cal = Calibrator::new(cfg).unwrap();
    let err = calibrate(
        &mut cal,
        "(define (f n) (if (= n 0) 0 (+ 1 (f (- n 1))))) (+ (* a x) (f 100))",
    )
    .expect_err("depth");
    assert_eq!(err.class(), "depth");
}

#[test]
fn a_raised_cancel_ends_the_calibration_at_its_next_evaluation() {
    // A million loop steps per evaluation: seconds of calibration, cut by a cancel after 100 ms.
    let slow =
        "(loop ((i 0) (s 0.0)) (if (= i 1000000) (+ s (* a x)) (recur (+ i 1) (+ s (* a 1e-9)))))";
    let cancel = Cancel::new();
    let cfg = CalibrateConfig {
        cancel: Some(cancel.clone()),
        max_iters: 5_000_000,
        ..config(1.0)
    };
    let mut cal = Calibrator::new(cfg.clone()).unwrap();
    let raiser = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            cancel.raise();
        })
    };
    let started = std::time::Instant::now();
    let err = calibrate(&mut cal, slow).expect_err("cancelled");
    eprintln!("cut after {:?}", started.elapsed());
    raiser.join().unwrap();
    match &err {
        CalibrateError::Eval { error } => {
            assert_eq!(error.kind, ErrorKind::Deadline);
            assert!(error.message.contains("cancelled"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    // Raised, it stops the next calibration at once; a fresh flag fits as before.
    assert_eq!(
        calibrate(&mut cal, "(* a x)").unwrap_err().class(),
        "deadline"
    );
    let fresh = CalibrateConfig {
        cancel: Some(Cancel::new()),
        max_iters: 2_000,
        ..cfg
    };
    let fit = calibrate(&mut Calibrator::new(fresh).unwrap(), "(* a x)").expect("fits");
    assert!((fit.params[0] - 3.0).abs() < 1e-3, "{:?}", fit.params);
}
