//! `eval` and `calibrate` with `--via bootstrap/evaluator.scm` and `--prelude
//! bootstrap/prelude.scm`: the same values, gradients and fits as without them (known answers:
//! the direct runs), calibration replaying through the evaluator, and the errors of a missing,
//! unreadable or incomplete evaluator file and of a fault inside the evaluated program.

mod common;

use std::path::PathBuf;

use ndvm_core::Dialect;
use ndvm_search::calibratecmd::{self, CalibrateArgs};
use ndvm_search::evalcmd::{self, Binding, EvalArgs};
use ndvm_search::selfhost::SelfHost;

fn bootstrap(name: &str) -> PathBuf {
    common::root().join("bootstrap").join(name)
}

fn eval_args(program: PathBuf, binds: &[&str], selfhost: SelfHost) -> EvalArgs {
    EvalArgs {
        program,
        frontend: None,
        bindings: binds
            .iter()
            .map(|b| match b.strip_prefix("input:") {
                Some(i) => Binding::parse_input(i).unwrap(),
                None => Binding::parse_param(b).unwrap(),
            })
            .collect(),
        data: vec![],
        n_lanes: None,
        grad: true,
        dialect: Dialect::Default,
        precision: ndvm_core::Precision::F64,
        limits: Default::default(),
        selfhost,
    }
}

fn via() -> SelfHost {
    SelfHost {
        prelude: None,
        via: Some(bootstrap("evaluator.scm")),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

#[test]
fn eval_via_the_evaluator_equals_direct_evaluation_on_every_lane() {
    let program = common::root().join("examples/decay.scm");
    let binds = ["a=2", "k=0.1,0.5,1", "input:t=1"];
    let direct = evalcmd::run(&eval_args(program.clone(), &binds, SelfHost::default())).unwrap();
    let through = evalcmd::run(&eval_args(program, &binds, via())).unwrap();
    assert_eq!(through.n_lanes, 3);
    let (d, v) = (&direct.evaluation, &through.evaluation);
    for lane in 0..3 {
        let (x, y) = (d.value.number(lane).unwrap(), v.value.number(lane).unwrap());
        assert!(close(x, y), "lane {lane}: {x} vs {y}");
        for name in ["a", "k"] {
            let (g, h) = (d.grad(name).unwrap()[lane], v.grad(name).unwrap()[lane]);
            assert!(close(g, h), "lane {lane} d/d{name}: {g} vs {h}");
        }
    }
}

#[test]
fn prelude_and_evaluator_together() {
    let dir = common::scratch("selfhost", "prelude");
    let program = dir.join("sum.scm");
    std::fs::write(
        &program,
        "(fold-right + 0 (map (lambda (x) (* a x)) (cdr (assq 'k '((j 1) (k 2 3))))))",
    )
    .unwrap();
    let both = SelfHost {
        prelude: Some(bootstrap("prelude.scm")),
        via: Some(bootstrap("evaluator.scm")),
    };
    // Known answer: the list after the key k is (2 3), so the sum is 2a + 3a = 5a = 2.5 and
    // d/da = 5 (assq has no native twin: the prelude's runs, inside the evaluator).
    let e = evalcmd::run(&eval_args(program, &["a=0.5"], both))
        .unwrap_or_else(|e| panic!("{e}"))
        .evaluation;
    assert_eq!(e.value.number(0), Some(2.5));
    assert_eq!(e.grad("a").unwrap()[0], 5.0);
}

#[test]
fn calibrate_via_the_evaluator_fits_what_calibrate_fits_and_replays() {
    let args = |selfhost: SelfHost| CalibrateArgs {
        limits: Default::default(),
        program: common::root().join("examples/mm.scm"),
        frontend: None,
        data: common::root().join("examples/rates.csv"),
        target: "v".into(),
        weights: None,
        params: vec![],
        n_starts: Some(8),
        optimizer: None,
        polish: None,
        seed: Some(3),
        max_iters: None,
        race: None,
        dialect: Dialect::Default,
        precision: ndvm_core::Precision::F64,
        selfhost,
    };
    let direct = calibratecmd::run(&args(SelfHost::default()))
        .unwrap()
        .calibration;
    let through = calibratecmd::run(&args(via())).unwrap().calibration;
    assert_eq!(through.names, direct.names);
    for (x, y) in direct.params.iter().zip(&through.params) {
        assert!(close(*x, *y), "{:?} vs {:?}", direct.params, through.params);
    }
    assert!(
        through.n_replayed * 10 >= through.n_grad_evals * 9,
        "most gradient runs replay the trace: {} of {}",
        through.n_replayed,
        through.n_grad_evals
    );
}

#[test]
fn a_missing_bad_or_incomplete_evaluator_is_an_error_naming_it() {
    let dir = common::scratch("selfhost", "errors");
    let program = common::root().join("examples/decay.scm");
    let binds = ["a=2", "k=0.5", "input:t=1"];
    let with = |path: PathBuf| {
        evalcmd::run(&eval_args(
            program.clone(),
            &binds,
            SelfHost {
                prelude: None,
                via: Some(path),
            },
        ))
        .unwrap_err()
        .to_string()
    };
    let missing = dir.join("nope.scm");
    let e = with(missing.clone());
    assert!(e.contains("cannot read") && e.contains("nope.scm"), "{e}");
    let bad = dir.join("bad.scm");
    std::fs::write(&bad, "(define (mc-run forms").unwrap();
    let e = with(bad);
    assert!(
        e.contains("bad.scm:1:") && e.contains("given by --via"),
        "{e}"
    );
    let empty = dir.join("empty.scm");
    std::fs::write(&empty, "(define x 1)").unwrap();
    let e = with(empty);
    assert!(
        e.contains("empty.scm: error[E011]") && e.contains("mc-run"),
        "{e}"
    );
}

#[test]
fn a_fault_inside_the_program_is_located_in_the_evaluator() {
    let dir = common::scratch("selfhost", "fault");
    let program = dir.join("car.scm");
    std::fs::write(&program, "(+ a (car 1))").unwrap();
    let e = evalcmd::run(&eval_args(program, &["a=1"], via()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("evaluator.scm:") && e.contains("error[E003]"),
        "{e}"
    );
}
