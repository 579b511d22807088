//! How the calibrator's defaults were chosen: fits the acceptance models (six noiseless curve
//! fits and the Kalman maximum-likelihood fit) over a grid of settings and prints, per setting,
//! how many models were recovered (relative error < 1e-3, or for the Kalman filter a gradient
//! norm < 1e-4·(1 + |NLL|) at its lowest loss), the evaluations used and the wall time.
//!
//! With `--race`, it compares racing screens instead (portfolio K = 32, lr 0.1, 100 screen steps,
//! polish 4, each schedule against no racing, over seeds 0–4): per schedule, the models
//! recovered, the fits whose loss ends worse or better than the full screen's at the same seed
//! (by more than 1e-6 relative and 1e-12 absolute), the evaluations and the wall time.
//!
//! Run: `cargo run --release -p ndvm-optimizers --example choose_defaults -- [--race]
//! [KALMAN_OBS.json]` (default: the workspace's `testdata/seed-data/oracle_refs.json`; a
//! missing file is an error).
// ω = 3.14 is the issue's oscillator frequency, not an approximation of π.
#![allow(clippy::approx_constant)]
#![allow(clippy::print_stdout)]

use std::time::Instant;

use ndvm_core::{Dialect, Heap, ParamKind};
use ndvm_frontends::{Frontend, scheme::Scheme};
use ndvm_optimizers::{
    CalibrateConfig, Calibration, Calibrator, Dataset, Loss, Optimizer, ParamSpec, RaceCut,
};

fn linspace(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64)
        .collect()
}

struct Case {
    name: &'static str,
    src: String,
    data: Dataset,
    truth: Vec<(&'static str, f64)>,
    base: CalibrateConfig,
}

fn curve(
    name: &'static str,
    src: &str,
    input: &str,
    xs: Vec<f64>,
    f: impl Fn(f64) -> f64,
    truth: &[(&'static str, f64)],
) -> Case {
    let ys = xs.iter().map(|&x| f(x)).collect();
    Case {
        name,
        src: src.to_string(),
        data: Dataset::new().column(input, xs).target(ys),
        truth: truth.to_vec(),
        base: CalibrateConfig::recommended(),
    }
}

fn cases() -> Vec<Case> {
    let mut out = vec![
        curve(
            "michaelis-menten",
            "(params (Vmax positive 1.0) (Km positive 1.0)) (/ (* Vmax S) (+ Km S))",
            "S",
            linspace(0.1, 10.0, 20),
            |s| 10.0 * s / (2.5 + s),
            &[("Vmax", 10.0), ("Km", 2.5)],
        ),
        curve(
            "arrhenius",
            "(params (A positive 1.0) (Ea positive 1.0)) (* A (exp (- 0 (* Ea T))))",
            "T",
            linspace(0.5, 5.0, 20),
            |t| 5.0 * (-0.3 * t).exp(),
            &[("A", 5.0), ("Ea", 0.3)],
        ),
        curve(
            "oscillator",
            "(params (A free 1.0) (b positive 1.0) (w bounded 1.0 0 9)) (* A (exp (- 0 (* b t))) (cos (* w t)))",
            "t",
            linspace(0.0, 6.0, 20),
            |t| 2.0 * (-0.3 * t).exp() * (3.14 * t).cos(),
            &[("A", 2.0), ("b", 0.3), ("w", 3.14)],
        ),
        curve(
            "logistic",
            "(params (K positive 1.0) (r positive 1.0)) (/ K (+ 1 (* (- K 1) (exp (- 0 (* r t))))))",
            "t",
            linspace(0.1, 10.0, 20),
            |t| 10.0 / (1.0 + 9.0 * (-0.5 * t).exp()),
            &[("K", 10.0), ("r", 0.5)],
        ),
        curve(
            "lotka-volterra",
            "(params (a positive 1.0) (b positive 1.0))
             (loop ((i 0) (x x0) (y 5))
               (if (= i 20) x
                   (recur (+ i 1) (+ x (* 0.05 (- (* a x) (* b x y))))
                          (+ y (* 0.05 (- (* 0.02 x y) (* 0.5 y)))))))",
            "x0",
            linspace(2.0, 15.0, 20),
            |x0| {
                let (mut x, mut y) = (x0, 5.0);
                for _ in 0..20 {
                    (x, y) = (
                        x + 0.05 * (x - 0.1 * x * y),
                        y + 0.05 * (0.02 * x * y - 0.5 * y),
                    );
                }
                x
            },
            &[("a", 1.0), ("b", 0.1)],
        ),
        curve(
            "iir",
            "(params (a1 free 0.0) (a2 free 0.0) (b0 free 1.0))
             (loop ((t 1) (y1 0) (y2 0))
               (if (> t 12) y1
                   (recur (+ t 1) (+ (* a1 y1) (* a2 y2) (* b0 (sin (* x t)))) y1)))",
            "x",
            linspace(0.5, 5.0, 20),
            |x| {
                let (mut y1, mut y2) = (0.0, 0.0);
                for t in 1..=12 {
                    (y1, y2) = (0.5 * y1 - 0.3 * y2 + (x * t as f64).sin(), y1);
                }
                y1
            },
            &[("a1", 0.5), ("a2", -0.3), ("b0", 1.0)],
        ),
    ];
    let path = std::env::args()
        .skip(1)
        .find(|a| a != "--race")
        .unwrap_or_else(|| {
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../testdata/seed-data/oracle_refs.json"
            )
            .into()
        });
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {path}: {e} (see testdata/README.md)"));
    let refs: serde_json::Value = serde_json::from_str(&text.replace("Infinity", "null")).unwrap();
    let k = refs["programs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "kalman2d_T80")
        .unwrap();
    let m = &k["matrix"];
    let data: Vec<f64> = m["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    out.push(Case {
        name: "kalman",
        src: k["src"].as_str().unwrap().to_string(),
        data: Dataset::new().matrix("obs", 80, 2, data),
        truth: Vec::new(),
        base: CalibrateConfig {
            loss: Loss::ProgramLoss,
            dialect: Dialect::Reference,
            params: vec![
                ParamSpec::new("q", ParamKind::Positive, 0.05),
                ParamSpec::new("r", ParamKind::Positive, 0.1),
            ],
            ..CalibrateConfig::recommended()
        },
    });
    out
}

/// `case` fitted with `config` on a fresh heap.
fn fit(case: &Case, config: CalibrateConfig) -> Calibration {
    let mut heap = Heap::new();
    let program = Scheme.parse(&mut heap, &case.src).unwrap();
    Calibrator::new(config)
        .unwrap()
        .calibrate(&mut heap, &program, &case.data)
        .unwrap()
}

/// Whether `fit` recovers `case`'s model.
fn recovered(case: &Case, fit: &Calibration) -> bool {
    if case.truth.is_empty() {
        fit.grad_norm < 1e-4 * (1.0 + fit.loss.abs())
    } else {
        case.truth
            .iter()
            .all(|&(n, v)| ((fit.param(n).unwrap() - v) / v).abs() < 1e-3)
    }
}

/// The racing schedules compared with `--race`.
fn schedules() -> Vec<(&'static str, Vec<RaceCut>)> {
    let c = RaceCut::new;
    vec![
        ("none", Vec::new()),
        ("50:8", vec![c(50, 8)]),
        ("30:16,50:8,70:4", vec![c(30, 16), c(50, 8), c(70, 4)]),
        ("50:8,70:4", vec![c(50, 8), c(70, 4)]),
        ("30:8", vec![c(30, 8)]),
        ("20:8,50:4", vec![c(20, 8), c(50, 4)]),
        ("10:8,30:4", vec![c(10, 8), c(30, 4)]),
        ("10:4", vec![c(10, 4)]),
    ]
}

/// `--race`: every schedule against no racing, seeds 0–4.
fn race(cases: &[Case]) {
    let seeds = 0..5u64;
    println!("schedule           | ok    | worse | better | evals    | ms");
    let mut full: Vec<f64> = Vec::new();
    for (name, race) in schedules() {
        let (mut ok, mut worse, mut better, mut evals, mut i) = (0, 0, 0, 0, 0);
        let mut failed = Vec::new();
        let t0 = Instant::now();
        for seed in seeds.clone() {
            for case in cases {
                let config = CalibrateConfig {
                    seed,
                    race: race.clone(),
                    ..case.base.clone()
                };
                let fit = fit(case, config);
                evals += fit.n_evals;
                if recovered(case, &fit) {
                    ok += 1;
                } else {
                    failed.push(format!("{}@{seed}", case.name));
                }
                if race.is_empty() {
                    full.push(fit.loss);
                } else {
                    // Relative, and above the rounding of a zero-loss fit.
                    let diff = fit.loss - full[i];
                    let d = diff / full[i].abs().max(1e-300);
                    worse += usize::from(d > 1e-6 && diff > 1e-12);
                    better += usize::from(d < -1e-6 && diff < -1e-12);
                }
                i += 1;
            }
        }
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        println!(
            "{name:<18} | {ok:>2}/{:<2} | {worse:>5} | {better:>6} | {evals:>8} | {ms:>6.0} {}",
            i,
            failed.join(",")
        );
    }
}

fn main() {
    let cases = cases();
    if std::env::args().any(|a| a == "--race") {
        race(&cases);
        return;
    }
    let mut settings = Vec::new();
    for optimizer in [Optimizer::Adam, Optimizer::Lbfgs, Optimizer::Portfolio] {
        for n_starts in [1, 8, 32] {
            for lr in [0.03, 0.1, 0.3] {
                for screen in [50, 100, 200] {
                    for n_polish in [1, 4] {
                        let skip = (optimizer == Optimizer::Lbfgs
                            && (lr != 0.1 || screen != 200 || n_polish != 4))
                            || (optimizer == Optimizer::Adam && (screen != 200 || n_polish != 4));
                        if !skip {
                            settings.push((optimizer, n_starts, lr, screen, n_polish));
                        }
                    }
                }
            }
        }
    }
    println!(
        "{:<10} {:>3} {:>5} {:>6} {:>6} | ok  | evals    | ms     | failed",
        "optimizer", "K", "lr", "screen", "polish"
    );
    for (optimizer, n_starts, lr, screen, n_polish) in settings {
        let (mut ok, mut evals, mut failed) = (0, 0, Vec::new());
        let t0 = Instant::now();
        for case in &cases {
            let config = CalibrateConfig {
                optimizer,
                n_starts,
                learning_rate: lr,
                screen_iters: screen,
                n_polish,
                max_iters: if optimizer == Optimizer::Adam {
                    2000
                } else {
                    200
                },
                ..case.base.clone()
            };
            let fit = fit(case, config);
            evals += fit.n_evals;
            if recovered(case, &fit) {
                ok += 1
            } else {
                failed.push(case.name)
            }
        }
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        println!(
            "{:<10} {:>3} {:>5} {:>6} {:>6} | {}/{} | {:>8} | {:>6.0} | {}",
            format!("{optimizer:?}"),
            n_starts,
            lr,
            screen,
            n_polish,
            ok,
            cases.len(),
            evals,
            ms,
            failed.join(",")
        );
    }
}
