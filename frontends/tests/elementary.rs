//! The f64 lanes' own `exp`, `log`, `sin` and `cos` (`ndvm_core::elementary`): within one ulp of
//! the exact value at the correctly rounded reference points of `testdata/elementary/`, and the
//! same bits through every path of the evaluator — a walk over many lanes, its replay, one lane,
//! and each derivative.

mod common;

use common::read_testdata;
use ndvm_core::elementary::{self, Elementary};
use ndvm_core::{Dialect, EvalOptions, Evaluator, Heap, Inputs, Output};

/// One reference point: the function, x, and f(x) rounded to the nearest double.
struct Point {
    f: Elementary,
    x: f64,
    want: f64,
}

fn reference() -> Vec<Point> {
    let text = read_testdata("elementary/reference.txt");
    let hex = |t: &str| f64::from_bits(u64::from_str_radix(t, 16).expect("16 hex digits"));
    let points: Vec<Point> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let f = match fields[0] {
                "exp" => Elementary::Exp,
                "ln" => Elementary::Ln,
                "sin" => Elementary::Sin,
                "cos" => Elementary::Cos,
                other => panic!("unknown function {other} in reference.txt"),
            };
            Point {
                f,
                x: hex(fields[1]),
                want: hex(fields[2]),
            }
        })
        .collect();
    assert!(
        points.len() >= 4000,
        "reference.txt has {} points",
        points.len()
    );
    points
}

/// Whether `got` is `want` or a neighbour of it: one of the two doubles around the exact value
/// when `want` is that value correctly rounded.
fn faithful(got: f64, want: f64) -> bool {
    if got.is_nan() || want.is_nan() {
        return got.is_nan() && want.is_nan();
    }
    // The doubles in order as integers: ±0 meet at 0.
    let key = |v: f64| {
        let b = v.to_bits() as i64;
        if b < 0 { i64::MIN - b } else { b }
    };
    (key(got) - key(want)).abs() <= 1
}

#[test]
fn every_reference_point_is_within_one_ulp() {
    let points = reference();
    let mut exact = 0;
    for p in &points {
        let got = p.f.at(p.x);
        assert!(
            faithful(got, p.want),
            "{:?}({:e}) = {:e}, correctly rounded {:e}",
            p.f,
            p.x,
            got,
            p.want
        );
        exact += usize::from(got.to_bits() == p.want.to_bits());
    }
    // Most are correctly rounded (measured: 3,896 of 4,067, 95.8 %).
    assert!(
        exact * 100 >= points.len() * 95,
        "{exact} of {} correctly rounded",
        points.len()
    );
}

/// `(op p)` evaluated with gradients over one lane per point, by a walk and then a replay of one
/// evaluator, and one point at a time: value and dvalue/dp are the elementary function's bits.
#[test]
fn the_evaluator_computes_them_bit_for_bit_in_every_path() {
    let points = reference();
    // The reference dialect's `log` clamps its argument to at least 1e-8 first.
    for (f, op, dialect) in [
        (Elementary::Exp, "exp", Dialect::Default),
        (Elementary::Ln, "log", Dialect::Default),
        (Elementary::Ln, "log", Dialect::Reference),
        (Elementary::Sin, "sin", Dialect::Default),
        (Elementary::Cos, "cos", Dialect::Default),
    ] {
        let xs: Vec<f64> = points.iter().filter(|p| p.f == f).map(|p| p.x).collect();
        let clamp = |x: f64| match dialect {
            Dialect::Reference => x.max(1e-8),
            _ => x,
        };
        let want_value = |x: f64| f.at(clamp(x));
        // The adjoint accumulates from zero (a −0 derivative gives +0).
        let want_grad = |x: f64| {
            0.0 + match f {
                Elementary::Exp => elementary::exp(x),
                Elementary::Ln if dialect == Dialect::Reference && (x.is_nan() || x <= 1e-8) => 0.0,
                Elementary::Ln => 1.0 / x,
                Elementary::Sin => elementary::cos(x),
                Elementary::Cos => -elementary::sin(x),
            }
        };
        let src = format!("({op} p)");
        let mut heap = Heap::new();
        let program = ndvm_frontends::scheme::parse(&mut heap, &src).unwrap();
        let mut many = Evaluator::new(EvalOptions::new(xs.len()).with_dialect(dialect));
        for run in ["walk", "replay"] {
            // The replay sees the same points in another order.
            let order: Vec<f64> = match run {
                "walk" => xs.clone(),
                _ => xs.iter().rev().copied().collect(),
            };
            let e = many
                .eval_grad(
                    &mut heap,
                    &program,
                    &Inputs::new().param_lanes("p", order.clone()),
                )
                .unwrap();
            assert_eq!(many.last_run_replayed(), run == "replay", "{op}");
            let Output::Number(v) = &e.value else {
                panic!("{op}: not a number")
            };
            for (l, &x) in order.iter().enumerate() {
                let (got, grad) = (v[l], e.grads[0].per_lane[l]);
                assert_eq!(
                    got.to_bits(),
                    want_value(x).to_bits(),
                    "{op} {run} at {x:e}"
                );
                // A lane whose value is not finite is faulted; its gradient is not compared.
                if got.is_finite() {
                    assert_eq!(
                        grad.to_bits(),
                        want_grad(x).to_bits(),
                        "d{op} {run} at {x:e}"
                    );
                }
            }
        }
        let mut one = Evaluator::new(EvalOptions::new(1).with_dialect(dialect));
        for &x in xs.iter().step_by(7) {
            for _ in 0..2 {
                let e = one
                    .eval_grad(&mut heap, &program, &Inputs::new().param("p", x))
                    .unwrap();
                let Output::Number(v) = &e.value else {
                    panic!("{op}: not a number")
                };
                assert_eq!(
                    v[0].to_bits(),
                    want_value(x).to_bits(),
                    "{op} one lane at {x:e}"
                );
                if v[0].is_finite() {
                    let g = e.grads[0].per_lane[0];
                    assert_eq!(
                        g.to_bits(),
                        want_grad(x).to_bits(),
                        "d{op} one lane at {x:e}"
                    );
                }
            }
        }
    }
}
