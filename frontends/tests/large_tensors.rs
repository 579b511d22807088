//! Tensor ops with more multiply-adds than the term-list threshold (2¹⁶ terms; above it the
//! kernels loop over the operands directly): gradients against finite differences, a batch equal
//! to its lanes run alone bit for bit (divergent lanes included, so the masked kernels run), trace
//! replay equal to a fresh walk, and a 400×400 matmul whose memory stays O(output).

mod common;

use common::{lane_bits, opts, run};
use ndvm_core::{Dialect, EvalOptions, Evaluation, Evaluator, Heap, Inputs};

/// Deterministic data in roughly [-1, 1] (no two neighbours alike, so sums depend on order).
fn data(n: usize, seed: f64) -> Vec<f64> {
    (0..n)
        .map(|k| (seed + 0.618 * k as f64).sin() * (1.0 + 0.5 * (0.1 * k as f64).cos()))
        .collect()
}

/// The shared data of every program: A, B (70×70), M (300×300), u, w (300), v1, v2 (70 000).
fn shared_inputs(inputs: Inputs) -> Inputs {
    inputs
        .matrix("A", 70, 70, data(4900, 0.1))
        .matrix("B", 70, 70, data(4900, 0.7))
        .matrix("M", 300, 300, data(90_000, 1.3))
        .vector("u", data(300, 2.1))
        .vector("w", data(300, 2.9))
        .vector("v1", data(70_000, 3.7))
        .vector("v2", data(70_000, 4.3))
}

/// Programs whose every listed op has more than 2¹⁶ terms (trace has at most 65 535, so it is
/// exercised on the term path beside them).
const PROGRAMS: [(&str, &str); 4] = [
    (
        "matmul 70×70 twice, trace",
        "(trace (matmul (matmul (scale x A) (scale y B)) (scale (* x y) A)))",
    ),
    (
        "transpose and matvec 300×300, vsum",
        "(vsum (matvec (transpose (scale x M)) (scale (* y y) u)))",
    ),
    (
        "outer 300×300, matvec, dot",
        "(dot (matvec (outer (scale x u) (scale y w)) (scale x w)) u)",
    ),
    (
        "dot and vsum of 70 000",
        "(+ (dot (scale x v1) (scale y v2)) (vsum (scale (* x x) v1)))",
    ),
];

/// Value and gradients `(d/dx, d/dy)` of `src` on one lane at `(x, y)`.
fn one_lane(src: &str, x: f64, y: f64) -> (f64, f64, f64) {
    let inputs = shared_inputs(Inputs::new().param("x", x).param("y", y));
    let e = run(src, opts(Dialect::Default, 1), &inputs, true).expect("runs");
    let v = e.value.number(0).expect("a number");
    (v, e.grad("x").expect("dx")[0], e.grad("y").expect("dy")[0])
}

#[test]
fn large_tensor_gradients_match_finite_differences() {
    let (x, y) = (0.83, -1.17);
    for (name, src) in PROGRAMS {
        let (v, dx, dy) = one_lane(src, x, y);
        assert!(v.is_finite() && v.abs() > 1e-3, "{name}: value {v}");
        let h = 1e-5;
        let fx = (one_lane(src, x + h, y).0 - one_lane(src, x - h, y).0) / (2.0 * h);
        let fy = (one_lane(src, x, y + h).0 - one_lane(src, x, y - h).0) / (2.0 * h);
        for (what, got, fd) in [("d/dx", dx, fx), ("d/dy", dy, fy)] {
            let tol = 1e-7 * (1.0 + fd.abs());
            assert!(
                (got - fd).abs() < tol,
                "{name}: {what} = {got}, finite differences {fd}"
            );
        }
    }
}

/// The x and y of three lanes: x = 0.7 takes the else arm of the divergent wrapper below, the
/// other two the then arm (so each arm runs under a mask).
const XS: [f64; 3] = [0.7, 1.3, 1.6];
const YS: [f64; 3] = [-0.9, 0.4, 1.1];

#[test]
fn large_tensor_batches_equal_their_lanes_alone_bit_for_bit() {
    for (name, src) in PROGRAMS {
        let divergent = format!("(if (> x 1.0) (* 2.0 {src}) (- {src} x))");
        for (what, src) in [("uniform", src.to_string()), ("divergent", divergent)] {
            let batch_inputs = shared_inputs(
                Inputs::new()
                    .param_lanes("x", XS.to_vec())
                    .param_lanes("y", YS.to_vec()),
            );
            let batch = run(&src, opts(Dialect::Default, 3), &batch_inputs, true).expect("runs");
            for l in 0..3 {
                let inputs = shared_inputs(Inputs::new().param("x", XS[l]).param("y", YS[l]));
                let alone = run(&src, opts(Dialect::Default, 1), &inputs, true).expect("runs");
                assert_eq!(
                    lane_bits(&batch, l),
                    lane_bits(&alone, 0),
                    "{name} ({what}): lane {l} differs from its one-lane run"
                );
                let g = batch.grad("x").expect("dx")[l];
                assert!(g.is_finite() && g != 0.0, "{name} ({what}): d/dx = {g}");
            }
        }
    }
}

/// Every lane's bits of a result.
fn all_bits(e: &Evaluation, n_lanes: usize) -> Vec<common::LaneBits> {
    (0..n_lanes).map(|l| lane_bits(e, l)).collect()
}

#[test]
fn replayed_large_matmul_equals_a_walk_bit_for_bit() {
    let src = "(let ((C (matmul (scale x M) (scale (* x y) (transpose M))))) \
               (+ (vsum C) (trace (matmul C (scale y M)))))";
    for n_lanes in [1, 3] {
        let mut heap = Heap::new();
        let program = ndvm_frontends::scheme::parse(&mut heap, src).expect("parses");
        let options = EvalOptions::new(n_lanes).with_dialect(Dialect::Default);
        let mut reused = Evaluator::new(options.clone().with_replay(true));
        let mut n_replayed = 0;
        for step in 0..3 {
            let s = 1.0 + 0.25 * step as f64;
            let xs: Vec<f64> = XS[..n_lanes].iter().map(|x| x * s).collect();
            let ys: Vec<f64> = YS[..n_lanes].iter().map(|y| y / s).collect();
            let inputs = shared_inputs(
                Inputs::new()
                    .param_lanes("x", xs.clone())
                    .param_lanes("y", ys.clone()),
            );
            let got = reused
                .eval_grad(&mut heap, &program, &inputs)
                .expect("runs");
            n_replayed += usize::from(reused.last_run_replayed());
            let mut fresh = Evaluator::new(options.clone().with_replay(false));
            let want = fresh.eval_grad(&mut heap, &program, &inputs).expect("runs");
            assert!(!fresh.last_run_replayed());
            assert_eq!(
                all_bits(&got, n_lanes),
                all_bits(&want, n_lanes),
                "{n_lanes} lanes, step {step}: replay differs from a walk"
            );
            let dx = got.grad("x").expect("dx");
            assert!(dx.iter().all(|g| g.is_finite() && *g != 0.0), "{dx:?}");
        }
        assert_eq!(n_replayed, 2, "{n_lanes} lanes: the later runs replay");
    }
}

/// The peak resident set of this process in kB (Linux `VmHWM`).
fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn huge_matmul_runs_in_output_sized_memory() {
    // 400³ = 64M multiply-adds: as a term list, 1.5 GB (3 GB more on the tape).
    let mut heap = Heap::new();
    let src = "(vsum (matmul (scale x (eye 400)) (eye 400)))";
    let program = ndvm_frontends::scheme::parse(&mut heap, src).expect("parses");
    let mut ev = Evaluator::new(EvalOptions::new(1));
    let forward = ev
        .eval(&mut heap, &program, &Inputs::new().input("x", 1.0))
        .expect("runs");
    assert_eq!(forward.value.number(0), Some(400.0));
    assert!(
        ev.arena_floats() < 2_000_000,
        "arena holds {} floats",
        ev.arena_floats()
    );
    let grad = ev
        .eval_grad(&mut heap, &program, &Inputs::new().param("x", 0.5))
        .expect("runs");
    assert_eq!(grad.value.number(0), Some(200.0));
    assert_eq!(grad.grad("x"), Some(&[400.0][..]));
    assert!(
        ev.arena_floats() < 2_000_000,
        "arena holds {} floats",
        ev.arena_floats()
    );
    // The whole test binary (the other tests' 300×300 payloads included) stays far below one
    // term list of this product.
    if let Some(kb) = peak_rss_kb() {
        assert!(kb < 1_000_000, "peak resident set {kb} kB");
    }
}
