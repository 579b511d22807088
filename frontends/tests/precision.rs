//! `f32` lanes (`EvalOptions::precision`): known answers that show every operation rounds to
//! single precision; the oracle programs (whose PyTorch oracle itself computed in float32) and
//! the 200 corpus programs against `f64`, with the tolerances stated per test; a forward-only run
//! equal to a gradient run; and the precision each evaluator reports. Lane decomposition, replay
//! and blocked replay are checked bit for bit in both precisions by `lanes.rs`, `replay.rs` and
//! `lane_blocks.rs`.

mod common;

use common::{is_close, lane_bits, number, opts, run};
use ndvm_core::{Dialect, EvalOptions, Evaluator, Inputs, Precision};

fn f32_opts(dialect: Dialect, n_lanes: usize) -> EvalOptions {
    opts(dialect, n_lanes).with_precision(Precision::F32)
}

/// The value and d/dx of `src` at `x` in `f32` lanes.
fn value_and_grad_f32(src: &str, x: f64) -> (f64, f64) {
    let e = run(
        src,
        f32_opts(Dialect::Default, 1),
        &Inputs::new().param("x", x),
        true,
    )
    .unwrap_or_else(|e| panic!("{src}: {e}"));
    (number(&e, 0).unwrap(), e.grad("x").expect("d/dx")[0])
}

#[test]
fn every_operation_rounds_to_single_precision() {
    let x = 0.1f32;
    // Known answers computed here in f32 arithmetic, operation by operation.
    let cases: [(&str, f32, f32); 5] = [
        ("(+ x 0.2)", x + 0.2f32, 1.0),
        ("(* x x x)", x * x * x, 3.0 * (x * x)),
        ("(sin (* 3 x))", (3.0 * x).sin(), (3.0 * x).cos() * 3.0),
        (
            "(exp (/ x 3))",
            (x / 3.0).exp(),
            (x / 3.0).exp() * (1.0 / 3.0),
        ),
        ("(sqrt (+ 1 x))", (1.0 + x).sqrt(), 0.5 / (1.0 + x).sqrt()),
    ];
    for (src, v, d) in cases {
        let (got_v, got_d) = value_and_grad_f32(src, 0.1);
        assert_eq!(got_v, f64::from(v), "{src}: value");
        assert_eq!(got_d, f64::from(d), "{src}: d/dx");
        // And not the f64 answer: the input itself was rounded to f32 once.
        let f64_v = number(
            &run(
                src,
                opts(Dialect::Default, 1),
                &Inputs::new().param("x", 0.1),
                false,
            )
            .unwrap(),
            0,
        )
        .unwrap();
        assert_ne!(got_v, f64_v, "{src}: an f32 run gave the f64 bits");
    }
}

#[test]
fn an_f32_evaluator_reports_its_precision_and_keeps_it_across_runs() {
    let mut heap = ndvm_core::Heap::new();
    let program = ndvm_frontends::scheme::parse(&mut heap, "(* x 1.1)").unwrap();
    let mut ev = Evaluator::new(f32_opts(Dialect::Default, 3));
    assert_eq!(ev.options().precision, Precision::F32);
    for k in 0..3 {
        let xs = vec![1.0 + k as f64, 2.0, 3.0];
        let e = ev
            .eval_grad(
                &mut heap,
                &program,
                &Inputs::new().param_lanes("x", xs.clone()),
            )
            .unwrap();
        for (l, x) in xs.iter().enumerate() {
            let want = f64::from(*x as f32 * 1.1f32);
            assert_eq!(number(&e, l).unwrap(), want, "run {k}, lane {l}");
            assert_eq!(e.grad("x").unwrap()[l], f64::from(1.1f32));
        }
    }
    assert!(ev.last_run_replayed(), "the third run replays in f32 too");
}

/// f32 against the float32 PyTorch oracle: the oracle README's own tolerances, which were set for
/// a float32 oracle against an f64 runtime, hold unchanged for f32 lanes (the forward values of
/// both round every operation to f32; the orders of operations differ).
#[test]
fn oracle_values_and_gradients_match_in_f32() {
    let tolerances = |name: &str| match name {
        "logistic_map_loop" => (1e-4, 1e-4, 1e-3, 1e-3),
        "kalman2d_T80" => (1e-2, 2e-3, 5.0, 2e-2),
        "logdet_grad" => (1e-5, 1e-5, 1e-3, 1e-3),
        _ => (1e-5, 1e-5, 1e-4, 1e-4),
    };
    let mut failures = Vec::new();
    let mut n_grads = 0;
    for p in common::oracle_programs() {
        let Some(expected) = p.result else { continue };
        let (fa, fr, ga, gr) = tolerances(&p.name);
        let inputs = p.inputs();
        let e = match run(&p.src, f32_opts(Dialect::Reference, 1), &inputs, true) {
            Ok(e) => e,
            Err(e) => {
                failures.push(format!("{}: {e}", p.name));
                continue;
            }
        };
        let v = number(&e, 0).unwrap();
        if !is_close(v, expected, fa, fr) {
            failures.push(format!("{}: value {v:e}, oracle {expected:e}", p.name));
        }
        for (name, g_ref) in &p.grads {
            n_grads += 1;
            let g = e.grad(name).expect("gradient")[0];
            if !is_close(g, *g_ref, ga, gr) {
                failures.push(format!("{}: d/d{name} {g:e}, oracle {g_ref:e}", p.name));
            }
        }
        let fwd = run(&p.src, f32_opts(Dialect::Reference, 1), &inputs, false).unwrap();
        if lane_bits(&fwd, 0).value != lane_bits(&e, 0).value {
            failures.push(format!("{}: forward-only differs from taped", p.name));
        }
    }
    assert_eq!(n_grads, 82);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The relative distance of `a` from `b`, with `floor` standing in for a tiny |b|.
fn rel(a: f64, b: f64, floor: f64) -> f64 {
    (a - b).abs() / b.abs().max(floor)
}

/// The 200 corpus programs in f32 against f64 at the same inputs. An f32 run rounds each of its
/// few dozen operations with relative error ≤ 2⁻²⁴ ≈ 6e-8, amplified by the conditioning of the
/// program; measured over the corpus: values within 8.3e-7 relative, gradients within
/// 4.4e-5 (relative to max(|g|, 1e-3), as tiny gradients lose their leading digits by
/// cancellation). The bounds below leave a margin of 10× or more (a failure prints the worst).
#[test]
fn corpus_programs_in_f32_stay_within_single_precision_error_of_f64() {
    const VALUE_RTOL: f64 = 1e-5;
    const GRAD_RTOL: f64 = 5e-4;
    let (mut worst_v, mut worst_g) = (0.0f64, 0.0f64);
    let mut failures = Vec::new();
    for p in common::fuzz_corpus() {
        let inputs = p.inputs();
        let e64 = run(&p.src, opts(Dialect::Default, 1), &inputs, true).unwrap();
        let e32 = run(&p.src, f32_opts(Dialect::Default, 1), &inputs, true).unwrap();
        let (v64, v32) = (number(&e64, 0).unwrap(), number(&e32, 0).unwrap());
        let dv = rel(v32, v64, 1e-3);
        worst_v = worst_v.max(dv);
        if dv > VALUE_RTOL {
            failures.push(format!("#{}: value {v32:e} vs f64 {v64:e}", p.id));
        }
        for g in &e64.grads {
            let (g64, g32) = (g.per_lane[0], e32.grad(&g.name).unwrap()[0]);
            let dg = rel(g32, g64, 1e-3);
            worst_g = worst_g.max(dg);
            if dg > GRAD_RTOL {
                failures.push(format!("#{}: d/d{} {g32:e} vs f64 {g64:e}", p.id, g.name));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "worst value {worst_v:e}, worst gradient {worst_g:e}:\n{}",
        failures.join("\n")
    );
    assert!(worst_v > 0.0, "f32 runs gave the f64 bits everywhere");
}
