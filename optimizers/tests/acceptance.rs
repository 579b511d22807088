//! Acceptance tests of the calibrator (issue 3): recover known constants of six scientific models
//! from noiseless data generated here, fit the Kalman filter's noise levels by maximum
//! likelihood, and check determinism (a batch of starts equals each start alone; thread counts
//! do not change the bytes).
//!
//! Oracles: known answers (the constants the data was generated with) and, for the Kalman filter,
//! the first-order optimality condition (a vanishing gradient) on the seed system's observations
//! in `testdata/seed-data/oracle_refs.json`.
// ω = 3.14 is the issue's oscillator frequency, not an approximation of π.
#![allow(clippy::approx_constant)]

use std::path::{Path, PathBuf};

use ndvm_core::{Dialect, Heap, ParamKind, Program};
use ndvm_frontends::{Frontend, scheme::Scheme};
use ndvm_optimizers::{
    CalibrateConfig, Calibration, Calibrator, Dataset, Loss, Optimizer, ParamSpec, StopReason,
};

/// `n` evenly spaced points from `lo` to `hi` inclusive.
fn linspace(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64)
        .collect()
}

fn parse(heap: &mut Heap, src: &str) -> Program {
    Scheme.parse(heap, src).expect("the test program parses")
}

/// Fits `src` to `target(x)` at 20 points of `xs` (bound to `input`) with `config`.
fn fit(
    src: &str,
    input: &str,
    xs: Vec<f64>,
    target: impl Fn(f64) -> f64,
    config: CalibrateConfig,
) -> Calibration {
    let ys = xs.iter().map(|&x| target(x)).collect();
    let data = Dataset::new().column(input, xs).target(ys);
    let mut heap = Heap::new();
    let program = parse(&mut heap, src);
    Calibrator::new(config)
        .unwrap()
        .calibrate(&mut heap, &program, &data)
        .unwrap()
}

/// Every test funnels through here: fits with default settings and checks each recovered
/// constant against the one the data was generated with (relative error < 1e-3).
fn check_recovers(
    src: &str,
    input: &str,
    xs: Vec<f64>,
    target: impl Fn(f64) -> f64,
    truth: &[(&str, f64)],
) {
    let fit = fit(src, input, xs, target, CalibrateConfig::recommended());
    for &(name, want) in truth {
        let got = fit.param(name).unwrap();
        let rel = ((got - want) / want).abs();
        assert!(
            rel < 1e-3,
            "{name} = {got}, want {want} (rel {rel:e}); {fit:#?}"
        );
    }
    assert!(fit.r2.unwrap() > 0.999_999, "{fit:#?}");
}

const MICHAELIS_MENTEN: &str = "(params (Vmax positive 1.0) (Km positive 1.0))
(/ (* Vmax S) (+ Km S))";

#[test]
fn michaelis_menten() {
    // Known answer: Vmax 10, Km 2.5.
    check_recovers(
        MICHAELIS_MENTEN,
        "S",
        linspace(0.1, 10.0, 20),
        |s| 10.0 * s / (2.5 + s),
        &[("Vmax", 10.0), ("Km", 2.5)],
    );
}

#[test]
fn arrhenius() {
    // Known answer: A 5, Ea 0.3.
    let src = "(params (A positive 1.0) (Ea positive 1.0)) (* A (exp (- 0 (* Ea T))))";
    check_recovers(
        src,
        "T",
        linspace(0.5, 5.0, 20),
        |t| 5.0 * (-0.3 * t).exp(),
        &[("A", 5.0), ("Ea", 0.3)],
    );
}

/// The damped oscillator with ω below the Nyquist frequency of the sampling grid: 20 samples over
/// 0–6 are Δt = 6/19 apart, so ω and ω + 2π/Δt ≈ ω + 19.9 (and 2π/Δt − ω) fit the data
/// identically; bounding ω to (0, 9) makes the answer unique.
const OSCILLATOR: &str = "(params (A free 1.0) (b positive 1.0) (w bounded 1.0 0 9))
(* A (exp (- 0 (* b t))) (cos (* w t)))";

fn oscillator(t: f64) -> f64 {
    2.0 * (-0.3 * t).exp() * (3.14 * t).cos()
}

#[test]
fn damped_oscillator() {
    // Known answer: A 2, b 0.3, ω 3.14.
    check_recovers(
        OSCILLATOR,
        "t",
        linspace(0.0, 6.0, 20),
        oscillator,
        &[("A", 2.0), ("b", 0.3), ("w", 3.14)],
    );
}

#[test]
fn damped_oscillator_needs_multistart() {
    // Known answer: ω 3.14, up to the sampling alias ω ≡ ±3.14 (mod 2π/Δt) when ω is only
    // declared positive. FIXME(issue 3 expects a single start from ω = 1 to fail): on this grid
    // the loss has no local minimum between ω = 1 and 3.14, so one start from ω = 1 already
    // succeeds; local minima lie above ω ≈ 6, so the demonstration starts from ω = 8.
    let src = "(params (A free 1.0) (b positive 1.0) (w positive 8.0))
(* A (exp (- 0 (* b t))) (cos (* w t)))";
    let one_local_start = CalibrateConfig {
        n_starts: 1,
        optimizer: Optimizer::Lbfgs,
        ..CalibrateConfig::recommended()
    };
    let single = fit(
        src,
        "t",
        linspace(0.0, 6.0, 20),
        oscillator,
        one_local_start,
    );
    assert!(
        single.loss > 0.1,
        "one start from ω = 8 should stop in a local minimum: {single:#?}"
    );
    let multi = fit(
        src,
        "t",
        linspace(0.0, 6.0, 20),
        oscillator,
        CalibrateConfig::recommended(),
    );
    assert!(multi.loss < 1e-15, "{multi:#?}");
    let period = 2.0 * std::f64::consts::PI * 19.0 / 6.0;
    let w = multi.param("w").unwrap().rem_euclid(period);
    let off = (w - 3.14).abs().min((period - w - 3.14).abs());
    assert!(
        off / 3.14 < 1e-3,
        "ω = {} is not an alias of 3.14",
        multi.param("w").unwrap()
    );
    // With ω bounded below the Nyquist frequency one start from ω = 1 succeeds too.
    let from_one = fit(
        OSCILLATOR,
        "t",
        linspace(0.0, 6.0, 20),
        oscillator,
        CalibrateConfig {
            n_starts: 1,
            ..CalibrateConfig::recommended()
        },
    );
    assert!(
        (from_one.param("w").unwrap() - 3.14).abs() < 3.14e-3,
        "{from_one:#?}"
    );
}

#[test]
fn logistic_growth() {
    // Known answer: K 10, r 0.5.
    let src = "(params (K positive 1.0) (r positive 1.0))
(/ K (+ 1 (* (- K 1) (exp (- 0 (* r t))))))";
    let truth = |t: f64| 10.0 / (1.0 + 9.0 * (-0.5 * t).exp());
    check_recovers(
        src,
        "t",
        linspace(0.1, 10.0, 20),
        truth,
        &[("K", 10.0), ("r", 0.5)],
    );
}

#[test]
fn lotka_volterra_prey() {
    // Known answer: a 1.0, b 0.1; prey after 20 Euler steps from (x0, 5).
    let src = "(params (a positive 1.0) (b positive 1.0))
(loop ((i 0) (x x0) (y 5))
  (if (= i 20)
      x
      (recur (+ i 1)
             (+ x (* 0.05 (- (* a x) (* b x y))))
             (+ y (* 0.05 (- (* 0.02 x y) (* 0.5 y)))))))";
    let truth = |x0: f64| {
        let (mut x, mut y) = (x0, 5.0);
        for _ in 0..20 {
            let nx = x + 0.05 * (1.0 * x - 0.1 * x * y);
            let ny = y + 0.05 * (0.02 * x * y - 0.5 * y);
            (x, y) = (nx, ny);
        }
        x
    };
    check_recovers(
        src,
        "x0",
        linspace(2.0, 15.0, 20),
        truth,
        &[("a", 1.0), ("b", 0.1)],
    );
}

#[test]
fn iir_filter() {
    // Known answer: a1 0.5, a2 −0.3, b0 1.0. The filter y_t = a1 y_{t−1} + a2 y_{t−2} + b0 x_t runs
    // 12 steps from rest on the input signal x_t = sin(x·t), x in 0.5–5 (a constant input x_t = x
    // would make y_12 = x·c(a1, a2, b0), which identifies only the product c, not the constants).
    let src = "(params (a1 free 0.0) (a2 free 0.0) (b0 free 1.0))
(loop ((t 1) (y1 0) (y2 0))
  (if (> t 12)
      y1
      (recur (+ t 1) (+ (* a1 y1) (* a2 y2) (* b0 (sin (* x t)))) y1)))";
    let truth = |x: f64| {
        let (mut y1, mut y2) = (0.0, 0.0);
        for t in 1..=12 {
            let y = 0.5 * y1 - 0.3 * y2 + 1.0 * (x * t as f64).sin();
            (y1, y2) = (y, y1);
        }
        y1
    };
    check_recovers(
        src,
        "x",
        linspace(0.5, 5.0, 20),
        truth,
        &[("a1", 0.5), ("a2", -0.3), ("b0", 1.0)],
    );
}

/// Absolute path of `testdata/<rel>` under the workspace root; panics loudly when it is missing.
fn testdata(rel: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata")
        .join(rel);
    assert!(
        path.exists(),
        "required test data is missing: {} (see testdata/README.md; tests never skip)",
        path.display()
    );
    path
}

/// `kalman2d_T80` from the oracle file: its source and its 80×2 observations.
fn kalman2d_t80() -> (String, Dataset) {
    let text = std::fs::read_to_string(testdata("seed-data/oracle_refs.json")).unwrap();
    // The file has one bare `Infinity` token (for `div_by_zero`), which strict JSON rejects.
    let refs: serde_json::Value = serde_json::from_str(&text.replace("Infinity", "null")).unwrap();
    let kalman = refs["programs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "kalman2d_T80")
        .expect("kalman2d_T80 is in oracle_refs.json");
    let m = &kalman["matrix"];
    let data: Vec<f64> = m["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let (rows, cols) = (
        m["rows"].as_u64().unwrap() as usize,
        m["cols"].as_u64().unwrap() as usize,
    );
    assert_eq!((rows, cols), (80, 2));
    let src = kalman["src"].as_str().unwrap().to_string();
    (
        src,
        Dataset::new().matrix(m["name"].as_str().unwrap(), rows, cols, data),
    )
}

fn kalman_config() -> CalibrateConfig {
    CalibrateConfig {
        loss: Loss::ProgramLoss,
        dialect: Dialect::Reference,
        params: vec![
            ParamSpec::new("q", ParamKind::Positive, 0.05),
            ParamSpec::new("r", ParamKind::Positive, 0.1),
        ],
        ..CalibrateConfig::recommended()
    }
}

#[test]
fn kalman_mle() {
    // Oracle: first-order optimality. The program returns the negative log-likelihood of the
    // observations; at the maximum-likelihood (q, r) its gradient vanishes.
    let (src, data) = kalman2d_t80();
    let mut heap = Heap::new();
    let program = parse(&mut heap, &src);
    let fit = Calibrator::new(kalman_config())
        .unwrap()
        .calibrate(&mut heap, &program, &data)
        .unwrap();
    let (q, r) = (fit.param("q").unwrap(), fit.param("r").unwrap());
    assert!(q > 0.0 && r > 0.0, "{fit:#?}");
    // The likelihood rises with q all the way from 0: the optimum lies on the edge q → 0 of the
    // positive domain, where the gradient in the softplus coordinates vanishes (dL/dq need not).
    assert!(fit.grad_norm < 1e-4 * (1.0 + fit.loss.abs()), "{fit:#?}");
    // The oracle's point (q 0.05, r 0.1) has NLL 831.22; the fit must be much better.
    assert!(fit.loss < 831.0, "{fit:#?}");
    assert_eq!(fit.stop_reason, StopReason::Converged);
}

/// A model with its data: source, input name, input values, the generating function, and each
/// parameter's kind.
struct Model {
    src: &'static str,
    input: &'static str,
    xs: fn() -> Vec<f64>,
    truth: fn(f64) -> f64,
    kinds: &'static [ParamKind],
}

const MODELS: [Model; 2] = [
    Model {
        src: OSCILLATOR,
        input: "t",
        xs: || linspace(0.0, 6.0, 20),
        truth: oscillator,
        kinds: &[
            ParamKind::Free,
            ParamKind::Positive,
            ParamKind::Bounded { lo: 0.0, hi: 9.0 },
        ],
    },
    Model {
        src: MICHAELIS_MENTEN,
        input: "S",
        xs: || linspace(0.1, 10.0, 20),
        truth: |s| 10.0 * s / (2.5 + s),
        kinds: &[ParamKind::Positive, ParamKind::Positive],
    },
];

/// Case `i` of six: every optimizer on both models, 6 starts, a fixed seed and a short budget
/// (the portfolio polishes every start).
fn determinism_case(i: usize) -> (&'static Model, CalibrateConfig) {
    let optimizer = [Optimizer::Adam, Optimizer::Lbfgs, Optimizer::Portfolio][i / 2];
    let config = CalibrateConfig {
        optimizer,
        n_starts: 6,
        seed: 11,
        max_iters: 40,
        screen_iters: 30,
        n_polish: 6,
        ..CalibrateConfig::recommended()
    };
    (&MODELS[i % 2], config)
}

fn run_case(model: &Model, config: CalibrateConfig) -> Calibration {
    fit(model.src, model.input, (model.xs)(), model.truth, config)
}

/// Everything deterministic in a calibration (all but the wall time), floats as bits.
fn bytes(fit: &Calibration) -> String {
    let mut fit = fit.clone();
    fit.wall_time = Default::default();
    let bits = |v: &[f64]| format!("{:x?}", v.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    let mut s = format!("{fit:?}");
    s += &bits(&fit.params);
    s += &bits(&[fit.loss, fit.grad_norm]);
    for st in &fit.starts {
        s += &bits(&st.params);
        s += &bits(&[st.loss, st.grad_norm]);
    }
    s
}

#[test]
fn a_batch_of_starts_equals_each_start_alone() {
    // Lane decomposition: start k of a K-start batch (K·N lanes) follows the same trajectory, bit
    // for bit, as a one-start run (N lanes) from start k's initial point.
    for i in 0..6 {
        let (model, config) = determinism_case(i);
        let batch = run_case(model, config.clone());
        for (k, start) in batch.starts.iter().enumerate() {
            let params = batch
                .names
                .iter()
                .zip(&start.init)
                .zip(model.kinds)
                .map(|((name, &init), &kind)| ParamSpec::new(name, kind, init))
                .collect();
            let alone = run_case(
                model,
                CalibrateConfig {
                    n_starts: 1,
                    params,
                    ..config.clone()
                },
            );
            let mut one = alone.starts[0].clone();
            assert_eq!(one.init, start.init);
            assert_eq!(one.polished, start.polished);
            one.init.clone_from(&start.init);
            let mut batch_start = start.clone();
            batch_start.grad_norm = batch_start.grad_norm.to_bits() as f64;
            one.grad_norm = one.grad_norm.to_bits() as f64;
            assert_eq!(
                format!(
                    "{one:?}{:x?}",
                    one.params.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
                ),
                format!(
                    "{batch_start:?}{:x?}",
                    start.params.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
                ),
                "case {i}, start {k}"
            );
        }
    }
}

#[test]
fn thread_count_does_not_change_the_bytes() {
    // Parallel = serial: the same six calibrations on rayon pools of 1 and 3 threads.
    let run = |threads: usize| -> Vec<String> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            use rayon::prelude::*;
            (0..6)
                .into_par_iter()
                .map(|i| {
                    let (model, config) = determinism_case(i);
                    bytes(&run_case(model, config))
                })
                .collect()
        })
    };
    assert_eq!(run(1), run(3));
}
