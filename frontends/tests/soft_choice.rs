//! `(soft-choice (e1 e2 …) logits)`: soft-mode gradients against central finite differences,
//! straight-through's forward value equal to the picked option's, seeded Gumbel noise, lane
//! decomposition (B lanes = B one-lane runs, bit for bit) in every mode, the read-out of the picks,
//! trace replay under a new temperature, unpicked options never run in the hard forward pass, and
//! located errors.

mod common;

use common::{Failure, assert_close, run};
use ndvm_core::{
    ChoiceMode, ErrorKind, EvalOptions, Evaluation, Evaluator, Heap, Inputs, SoftChoice,
};
use ndvm_frontends::Frontend;

/// Central finite-difference step.
const H: f64 = 1e-6;

/// Three options of two parameters and an input, chosen by three logits.
const PROG: &str = "(soft-choice ((* a x) (sin (* b x)) (exp (* -1.0 a))) (vector w0 w1 w2))";

const PARAMS: [&str; 5] = ["a", "b", "w0", "w1", "w2"];

fn sc(mode: ChoiceMode, temperature: f64, gumbel: Option<u64>) -> SoftChoice {
    SoftChoice {
        mode,
        temperature,
        gumbel,
    }
}

fn inputs(theta: &[f64; 5], x: f64) -> Inputs {
    let mut i = Inputs::new();
    for (n, v) in PARAMS.iter().zip(theta) {
        i = i.param(n, *v);
    }
    i.input("x", x)
}

fn eval(src: &str, n_lanes: usize, s: SoftChoice, inputs: &Inputs, grad: bool) -> Evaluation {
    run(
        src,
        EvalOptions::new(n_lanes).with_soft_choice(s),
        inputs,
        grad,
    )
    .unwrap_or_else(|f| panic!("{src}: {f}"))
}

fn value(e: &Evaluation) -> f64 {
    e.value.number(0).expect("a number")
}

#[test]
fn soft_gradients_match_finite_differences() {
    for s in [
        sc(ChoiceMode::Soft, 1.0, None),
        sc(ChoiceMode::Soft, 0.3, None),
        sc(ChoiceMode::Soft, 0.7, Some(11)),
    ] {
        for (theta, x) in [
            ([0.7, 1.3, 0.2, -0.4, 0.9], 1.1),
            ([-0.5, 2.0, 1.5, 1.4, -2.0], 0.3),
        ] {
            let e = eval(PROG, 1, s, &inputs(&theta, x), true);
            for (k, name) in PARAMS.iter().enumerate() {
                let at = |d: f64| {
                    let mut t = theta;
                    t[k] += d;
                    value(&eval(PROG, 1, s, &inputs(&t, x), false))
                };
                let fd = (at(H) - at(-H)) / (2.0 * H);
                let g = e.grad(name).expect("gradient")[0];
                assert_close(g, fd, 1e-7, 1e-6, &format!("{s:?} d/d{name} at {theta:?}"));
            }
        }
    }
}

/// The straight-through value is the picked option's value, bit for bit, with or without
/// gradients and in hard mode; its gradient goes to the picked option alone, and the logits get
/// exactly what the soft blend gives them.
#[test]
fn straight_through_forward_is_the_hard_choice() {
    let options = ["(* a x)", "(sin (* b x))", "(exp (* -1.0 a))"];
    for (theta, x, pick) in [
        ([0.7, 1.3, 0.2, -0.4, 0.9], 1.1, 2),
        ([0.7, 1.3, 2.2, -0.4, 0.9], 1.1, 0),
        ([-0.5, 2.0, 1.5, 1.6, -2.0], 0.3, 1),
    ] {
        let inp = inputs(&theta, x);
        let alone = value(&eval(
            options[pick],
            1,
            sc(ChoiceMode::Soft, 1.0, None),
            &inp,
            false,
        ));
        let st = sc(ChoiceMode::StraightThrough, 0.5, None);
        let with_grad = eval(PROG, 1, st, &inp, true);
        let forward = eval(PROG, 1, st, &inp, false);
        let hard = eval(PROG, 1, sc(ChoiceMode::Hard, 0.5, None), &inp, true);
        for (what, v) in [
            ("st grad", value(&with_grad)),
            ("st forward", value(&forward)),
            ("hard", value(&hard)),
        ] {
            assert_eq!(v.to_bits(), alone.to_bits(), "{what}: {v} vs {alone}");
        }
        // The option's own gradient: only the picked option's parameters move.
        let da = with_grad.grad("a").unwrap()[0];
        let db = with_grad.grad("b").unwrap()[0];
        let (ea, eb) = match pick {
            0 => (x, 0.0),
            1 => (0.0, x * (theta[1] * x).cos()),
            _ => (-(-theta[0]).exp(), 0.0),
        };
        assert_close(da, ea, 1e-15, 1e-12, "d/da");
        assert_close(db, eb, 1e-15, 1e-12, "d/db");
        let soft = eval(PROG, 1, sc(ChoiceMode::Soft, 0.5, None), &inp, true);
        for w in ["w0", "w1", "w2"] {
            let (g, s) = (with_grad.grad(w).unwrap()[0], soft.grad(w).unwrap()[0]);
            assert_close(g, s, 1e-15, 1e-12, w);
            assert_eq!(
                hard.grad(w).unwrap()[0],
                0.0,
                "hard mode: no gradient to {w}"
            );
        }
    }
}

#[test]
fn gumbel_noise_is_deterministic_for_a_seed() {
    let inp = inputs(&[0.7, 1.3, 0.2, -0.4, 0.9], 1.1);
    for mode in [ChoiceMode::Soft, ChoiceMode::StraightThrough] {
        let a = eval(PROG, 1, sc(mode, 0.5, Some(3)), &inp, true);
        let b = eval(PROG, 1, sc(mode, 0.5, Some(3)), &inp, true);
        assert_eq!(a, b, "{mode:?}");
    }
    // Across seeds the soft value moves (the noise is real) and some seed changes the pick.
    let v = |seed| value(&eval(PROG, 1, sc(ChoiceMode::Soft, 0.5, seed), &inp, false));
    assert_ne!(v(Some(3)).to_bits(), v(Some(4)).to_bits());
    assert_ne!(v(Some(3)).to_bits(), v(None).to_bits());
    let pick = |seed| {
        let s = sc(ChoiceMode::StraightThrough, 0.5, seed);
        value(&eval(PROG, 1, s, &inp, false)).to_bits()
    };
    assert!((0..40).any(|seed| pick(Some(seed)) != pick(None)));
}

/// Per-lane parameters and inputs so the lanes pick different options.
fn lane_inputs(b: usize) -> (Vec<Inputs>, Inputs) {
    let lane = |l: usize| {
        let f = l as f64;
        (
            [
                0.3 + 0.2 * f,
                1.0 - 0.1 * f,
                (f * 1.7).sin(),
                (f * 0.9).cos(),
                0.3 * f - 0.5,
            ],
            0.2 + 0.15 * f,
        )
    };
    let alone = (0..b)
        .map(|l| {
            let (t, x) = lane(l);
            inputs(&t, x)
        })
        .collect();
    let mut batch = Inputs::new();
    for (k, n) in PARAMS.iter().enumerate() {
        batch = batch.param_lanes(n, (0..b).map(|l| lane(l).0[k]).collect());
    }
    (
        alone,
        batch.input_lanes("x", (0..b).map(|l| lane(l).1).collect()),
    )
}

#[test]
fn lanes_equal_one_lane_runs_bit_for_bit() {
    let b = 9;
    let (alone, batch) = lane_inputs(b);
    for s in [
        sc(ChoiceMode::Soft, 0.6, None),
        sc(ChoiceMode::Soft, 0.6, Some(5)),
        sc(ChoiceMode::StraightThrough, 0.6, None),
        sc(ChoiceMode::StraightThrough, 0.6, Some(5)),
        sc(ChoiceMode::Hard, 0.6, None),
    ] {
        for grad in [false, true] {
            let all = eval(PROG, b, s, &batch, grad);
            let mut picks = std::collections::HashSet::new();
            for (l, inp) in alone.iter().enumerate() {
                let one = eval(PROG, 1, s, inp, grad);
                let v = value(&one);
                picks.insert(v.to_bits());
                let ctx = format!("{s:?} grad={grad} lane {l}");
                assert_eq!(all.value.number(l).unwrap().to_bits(), v.to_bits(), "{ctx}");
                for g in &one.grads {
                    let gl = all.grad(&g.name).unwrap()[l];
                    assert_eq!(gl.to_bits(), g.per_lane[0].to_bits(), "{ctx} d/d{}", g.name);
                }
            }
            assert!(picks.len() > 3, "the lanes should differ");
        }
    }
}

fn parse(src: &str) -> (Heap, ndvm_core::Program) {
    let mut heap = Heap::new();
    let program = ndvm_frontends::scheme::Scheme
        .parse(&mut heap, src)
        .expect("parses");
    (heap, program)
}

/// The read-out names each lane's pick, follows a replay, and survives annealing the
/// temperature (which keeps the recording replayable and equal to a fresh walk).
#[test]
fn readout_and_replay_under_annealing() {
    let src = "(* (soft-choice ((* a x) (sin x) (cos x)) (vector w0 w1 w2)) \
               (soft-choice ((+ x 1.0) (- x 1.0)) (vector v0 v1)))";
    let (mut heap, program) = parse(src);
    let bind = |w1: f64, v0: f64| {
        Inputs::new()
            .param("a", 1.5)
            .param_lanes("w0", vec![1.0, 0.0, 0.0])
            .param_lanes("w1", vec![0.0, w1, 0.0])
            .param("w2", 0.5)
            .param("v0", v0)
            .param("v1", 0.0)
            .input_lanes("x", vec![0.5, 1.0, 2.0])
    };
    let st = |t| sc(ChoiceMode::StraightThrough, t, None);
    let mut ev = Evaluator::new(EvalOptions::new(3).with_soft_choice(st(1.0)));
    ev.eval_grad(&mut heap, &program, &bind(2.0, 1.0)).unwrap();
    let picks = |ev: &mut Evaluator| -> Vec<Vec<u32>> {
        ev.last_choices().iter().map(|c| c.picks.clone()).collect()
    };
    assert_eq!(picks(&mut ev), vec![vec![0, 1, 2], vec![0, 0, 0]]);
    let c = &ev.last_choices()[0];
    assert_eq!(c.site, 0);
    assert_eq!(ndvm_core::print::display(&heap, c.options[2]), "(cos x)");
    for lane in 0..3 {
        let w = c.weights_of(lane).expect("reached");
        assert_close(w.iter().sum(), 1.0, 1e-15, 0.0, "weights");
        let top = (0..3).max_by(|&i, &j| w[i].total_cmp(&w[j])).unwrap();
        assert_eq!(Some(top), c.pick(lane));
    }
    // New logits: replayed, and the picks follow.
    ev.eval_grad(&mut heap, &program, &bind(-1.0, -1.0))
        .unwrap();
    assert!(ev.last_run_replayed());
    assert_eq!(picks(&mut ev), vec![vec![0, 2, 2], vec![1, 1, 1]]);
    // A new temperature: still replayed, and equal to a fresh walk bit for bit.
    for t in [0.5, 0.1] {
        ev.set_soft_choice(st(t));
        let replayed = ev.eval_grad(&mut heap, &program, &bind(0.3, 0.2)).unwrap();
        assert!(ev.last_run_replayed(), "τ = {t}");
        let mut fresh = Evaluator::new(EvalOptions::new(3).with_soft_choice(st(t)));
        let walked = fresh
            .eval_grad(&mut heap, &program, &bind(0.3, 0.2))
            .unwrap();
        assert_eq!(replayed, walked, "τ = {t}");
        assert_eq!(picks(&mut ev), picks(&mut fresh));
    }
    // Another mode cannot follow the recording: a walk.
    ev.set_soft_choice(sc(ChoiceMode::Soft, 0.1, None));
    ev.eval_grad(&mut heap, &program, &bind(0.3, 0.2)).unwrap();
    assert!(!ev.last_run_replayed());
}

/// In the hard forward pass a lane runs only the option it picks: an option that would fail, or
/// fault, elsewhere costs nothing there, and straight-through's logits gradient stays finite.
#[test]
fn unpicked_options_do_not_run_in_the_hard_pass() {
    let failing = "(soft-choice ((car x) (* 2.0 x)) (vector 0.0 1.0))";
    let inp = Inputs::new().input("x", 1.5);
    for mode in [ChoiceMode::Hard, ChoiceMode::StraightThrough] {
        let e = eval(failing, 1, sc(mode, 1.0, None), &inp, false);
        assert_eq!(value(&e), 3.0, "{mode:?}");
    }
    let soft = run(failing, EvalOptions::new(1), &inp, false).unwrap_err();
    assert_eq!(soft.kind(), Some(ErrorKind::Type));

    // Lanes 0 and 2 (x < 0) pick `(* w x)`; their `(log x)` is NaN but never read.
    let src = "(soft-choice ((log x) (* w x)) (vector x w))";
    let inp = Inputs::new()
        .param("w", 0.25)
        .input_lanes("x", vec![-1.0, 2.0, -3.0, 0.5]);
    let forward = eval(
        src,
        4,
        sc(ChoiceMode::StraightThrough, 1.0, None),
        &inp,
        false,
    );
    assert_eq!(forward.faults, vec![false; 4]);
    assert_eq!(forward.value.number(0), Some(-0.25));
    let with_grad = eval(
        src,
        4,
        sc(ChoiceMode::StraightThrough, 1.0, None),
        &inp,
        true,
    );
    assert_eq!(with_grad.value, forward.value);
    assert_eq!(
        with_grad.faults,
        vec![false; 4],
        "the NaN option is left out of the backward pass"
    );
    let soft = eval(src, 4, sc(ChoiceMode::Soft, 1.0, None), &inp, false);
    assert_eq!(soft.faults, vec![true, false, true, false]);
}

#[test]
fn bad_soft_choices_are_located_errors() {
    let inp = Inputs::new().param("a", 1.0);
    let cases = [
        (
            "(+ 1.0\n   (soft-choice (a (* 2.0 a)) (vector 1.0 2.0 3.0)))",
            ErrorKind::Shape,
            "2:4",
        ),
        (
            "(soft-choice (a (* 2.0 a)) (list 1.0 2.0))",
            ErrorKind::Type,
            "1:1",
        ),
        ("(soft-choice (a) (vector 1.0))", ErrorKind::Syntax, "1:14"),
        ("(soft-choice a (vector 1.0))", ErrorKind::Syntax, "1:14"),
        ("(soft-choice (a a))", ErrorKind::Syntax, "1:1"),
        (
            "(soft-choice ((list a) a) (vector 1.0 2.0))",
            ErrorKind::Type,
            "1:1",
        ),
    ];
    for (src, kind, at) in cases {
        match run(src, EvalOptions::new(1), &inp, true) {
            Err(Failure::Eval {
                kind: k,
                at: a,
                message,
            }) => {
                assert_eq!((k, a.as_deref()), (kind, Some(at)), "{src}: {message}");
            }
            other => panic!("{src}: {other:?}"),
        }
    }
}
