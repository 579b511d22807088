//! `f32` lanes (`EvalOptions::precision`): known answers that show every operation rounds to
//! single precision; the 200 corpus programs against `f64`, with the tolerances stated per test
//! (the oracle programs in f32 are in `oracle.rs`); the memory gauge; and the precision each
//! evaluator reports. Lane decomposition, replay
//! and blocked replay are checked bit for bit in both precisions by `lanes.rs`, `replay.rs` and
//! `lane_blocks.rs`.

mod common;

use common::{number, opts, run};
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

/// The memory gauge counts f32 lanes at 4 bytes: the Kalman filter's arenas after a gradient run
/// at 256 lanes hold about half the f64 bytes (the tape's nodes and the heap do not shrink).
#[test]
fn the_memory_gauge_counts_f32_lanes_at_four_bytes() {
    let p = common::oracle_programs()
        .into_iter()
        .find(|p| p.name == "kalman2d_T80")
        .expect("kalman2d_T80");
    let mut bytes = Vec::new();
    for precision in [Precision::F64, Precision::F32] {
        let mut heap = ndvm_core::Heap::new();
        let program = ndvm_frontends::scheme::parse(&mut heap, &p.src).unwrap();
        let opts = opts(Dialect::Reference, 256).with_precision(precision);
        let mut ev = Evaluator::new(opts);
        let inputs = p.scalars.iter().fold(Inputs::new(), |acc, (n, v)| {
            acc.param_lanes(n, (0..256).map(|l| v * (1.0 + 1e-3 * l as f64)).collect())
        });
        ev.eval_grad(&mut heap, &program, &p.with_matrix(inputs))
            .unwrap();
        bytes.push(ev.memory_in_use() as f64);
    }
    let ratio = bytes[1] / bytes[0];
    assert!(
        (0.45..0.6).contains(&ratio),
        "f32 ÷ f64 bytes {ratio}: {bytes:?}"
    );
}
