//! Levenberg–Marquardt (`Optimizer::Lm`, `Polish::Lm`): exact least-squares answers on models
//! linear in their parameters (closed-form normal equations), recovery of nonlinear constants
//! through the parameter transforms, weights, the program-loss fallback, and the portfolio.
//!
//! Oracles: the normal equations solved independently here (Gaussian elimination), known true
//! constants of noise-free data, and L-BFGS's own result (bit-identical where LM does not apply).

use ndvm_frontends::{Frontend, scheme::Scheme};
use ndvm_optimizers::{
    CalibrateConfig, Calibration, Calibrator, Dataset, Heap, Loss, Optimizer, ParamKind, ParamSpec,
    Polish, StartStatus,
};

fn fit(src: &str, data: &Dataset, config: CalibrateConfig) -> Calibration {
    let mut heap = Heap::new();
    let program = Scheme.parse(&mut heap, src).unwrap();
    Calibrator::new(config)
        .unwrap()
        .calibrate(&mut heap, &program, data)
        .unwrap()
}

fn lm(params: Vec<ParamSpec>) -> CalibrateConfig {
    CalibrateConfig {
        optimizer: Optimizer::Lm,
        n_starts: 1,
        max_iters: 100,
        params,
        ..CalibrateConfig::recommended()
    }
}

fn free(names: &[&str]) -> Vec<ParamSpec> {
    names
        .iter()
        .map(|n| ParamSpec::new(n, ParamKind::Free, 0.5))
        .collect()
}

/// Solves the weighted least-squares problem `min Σ w (X β − y)²` by the normal equations
/// with Gaussian elimination (partial pivoting): the independent oracle.
fn normal_equations(rows: &[Vec<f64>], y: &[f64], w: &[f64]) -> Vec<f64> {
    let p = rows[0].len();
    let mut m = vec![vec![0.0; p + 1]; p];
    for ((x, &yi), &wi) in rows.iter().zip(y).zip(w) {
        for j in 0..p {
            for k in 0..p {
                m[j][k] += wi * x[j] * x[k];
            }
            m[j][p] += wi * x[j] * yi;
        }
    }
    for c in 0..p {
        let piv = (c..p)
            .max_by(|&a, &b| m[a][c].abs().total_cmp(&m[b][c].abs()))
            .unwrap();
        m.swap(c, piv);
        let pivot = m[c].clone();
        for (r, row) in m.iter_mut().enumerate() {
            if r != c {
                let f = row[c] / pivot[c];
                for (x, &y) in row[c..].iter_mut().zip(&pivot[c..]) {
                    *x -= f * y;
                }
            }
        }
    }
    (0..p).map(|j| m[j][p] / m[j][j]).collect()
}

fn noisy_quadratic() -> (Vec<f64>, Vec<f64>) {
    let xs: Vec<f64> = (0..40).map(|i| -2.0 + i as f64 * 0.1).collect();
    let ys = xs
        .iter()
        .enumerate()
        .map(|(i, x)| 1.5 - 0.7 * x + 0.25 * x * x + 0.03 * ((i * 37 % 11) as f64 - 5.0))
        .collect();
    (xs, ys)
}

fn close(a: &[f64], b: &[f64], tol: f64) -> bool {
    a.iter()
        .zip(b)
        .all(|(x, y)| (x - y).abs() <= tol * (1.0 + y.abs()))
}

#[test]
fn a_model_linear_in_its_parameters_reaches_the_least_squares_solution() {
    let (xs, ys) = noisy_quadratic();
    let rows: Vec<Vec<f64>> = xs.iter().map(|&x| vec![1.0, x, x * x]).collect();
    let want = normal_equations(&rows, &ys, &vec![1.0; xs.len()]);
    let data = Dataset::new().column("x", xs).target(ys);
    let got = fit("(+ a (* b x) (* c x x))", &data, lm(free(&["a", "b", "c"])));
    assert!(
        close(&got.params, &want, 1e-10),
        "{:?} vs {want:?} {:?}",
        got.params,
        got.starts[0]
    );
    // Gauss–Newton is exact on a linear model: a handful of iterations, not hundreds.
    assert!(
        got.starts[0].iters <= 10,
        "{} iterations",
        got.starts[0].iters
    );
    assert_eq!(got.starts[0].status, StartStatus::Converged);
}

#[test]
fn weights_enter_the_residuals() {
    let (xs, ys) = noisy_quadratic();
    let w: Vec<f64> = (0..xs.len()).map(|i| 0.2 + (i % 5) as f64).collect();
    let rows: Vec<Vec<f64>> = xs.iter().map(|&x| vec![1.0, x, x * x]).collect();
    let want = normal_equations(&rows, &ys, &w);
    let data = Dataset::new().column("x", xs).target(ys).weights(w);
    let config = CalibrateConfig {
        loss: Loss::WeightedMse,
        ..lm(free(&["a", "b", "c"]))
    };
    let got = fit("(+ a (* b x) (* c x x))", &data, config);
    assert!(
        close(&got.params, &want, 1e-10),
        "{:?} vs {want:?}",
        got.params
    );
}

#[test]
fn nonlinear_constants_are_recovered_through_the_transforms() {
    // Noise-free a·exp(−b x) + c with b positive (softplus) and c in (−5, 5) (scaled sigmoid),
    // started far away.
    let xs: Vec<f64> = (0..30).map(|i| i as f64 * 0.2).collect();
    let ys = xs.iter().map(|x| 3.0 * (-0.7 * x).exp() - 1.2).collect();
    let data = Dataset::new().column("x", xs).target(ys);
    for loss in [Loss::Mse, Loss::GaussianNll] {
        let params = vec![
            ParamSpec::new("a", ParamKind::Free, 1.0),
            ParamSpec::new("b", ParamKind::Positive, 2.0),
            ParamSpec::new("c", ParamKind::Bounded { lo: -5.0, hi: 5.0 }, 0.0),
        ];
        let got = fit(
            "(+ c (* a (exp (- 0 (* b x)))))",
            &data,
            CalibrateConfig { loss, ..lm(params) },
        );
        assert!(
            close(&got.params, &[3.0, 0.7, -1.2], 1e-8),
            "{loss:?}: {:?}",
            got.params
        );
    }
}

#[test]
fn lm_beats_or_ties_lbfgs_on_a_hard_valley() {
    // Rosenbrock as least squares: residuals 10(b − a²) and (1 − a) at one point each.
    let data = Dataset::new()
        .column("k", vec![0.0, 1.0])
        .target(vec![0.0, 0.0]);
    let src = "(if (< k 0.5) (* 10 (- b (* a a))) (- 1 a))";
    let params = || {
        vec![
            ParamSpec::new("a", ParamKind::Free, -1.2),
            ParamSpec::new("b", ParamKind::Free, 1.0),
        ]
    };
    let by_lm = fit(src, &data, lm(params()));
    assert!(
        close(&by_lm.params, &[1.0, 1.0], 1e-8),
        "{:?}",
        by_lm.params
    );
    let by_lbfgs = fit(
        src,
        &data,
        CalibrateConfig {
            optimizer: Optimizer::Lbfgs,
            ..lm(params())
        },
    );
    assert!(
        by_lm.loss <= by_lbfgs.loss.max(1e-20),
        "{} vs {}",
        by_lm.loss,
        by_lbfgs.loss
    );
}

#[test]
fn the_program_loss_falls_back_to_lbfgs() {
    let data = Dataset::new().column("x", vec![0.5, 1.0, 2.0]);
    let src = "(* (- a x) (- a x))";
    let run = |optimizer| {
        fit(
            src,
            &data,
            CalibrateConfig {
                optimizer,
                loss: Loss::ProgramLoss,
                ..lm(free(&["a"]))
            },
        )
    };
    let (by_lm, by_lbfgs) = (run(Optimizer::Lm), run(Optimizer::Lbfgs));
    assert_eq!(by_lm.params, by_lbfgs.params);
    assert_eq!(by_lm.loss, by_lbfgs.loss);
    assert!(
        (by_lm.params[0] - 3.5 / 3.0).abs() < 1e-8,
        "{:?}",
        by_lm.params
    );
}

#[test]
fn the_portfolio_polishes_with_lm_when_asked() {
    let (xs, ys) = noisy_quadratic();
    let rows: Vec<Vec<f64>> = xs.iter().map(|&x| vec![1.0, x, x * x]).collect();
    let want = normal_equations(&rows, &ys, &vec![1.0; xs.len()]);
    let data = Dataset::new().column("x", xs).target(ys);
    let config = CalibrateConfig {
        params: free(&["a", "b", "c"]),
        n_starts: 8,
        polish: Polish::Lm,
        screen_iters: 10,
        n_polish: 2,
        ..CalibrateConfig::recommended()
    };
    let got = fit("(+ a (* b x) (* c x x))", &data, config);
    assert!(
        close(&got.params, &want, 1e-10),
        "{:?} vs {want:?}",
        got.params
    );
    let polished: Vec<&_> = got.starts.iter().filter(|s| s.polished).collect();
    assert_eq!(polished.len(), 2);
    assert!(
        polished.iter().all(|s| s.iters < 10 + 10),
        "LM needs few iterations"
    );
}

#[test]
fn a_reused_calibrator_polishes_as_a_fresh_one_at_any_size() {
    // One calibrator keeps its LM system between calibrations: a larger problem, a smaller one
    // (fewer points and parameters), the larger again, each equal to a fresh calibrator's.
    let (xs, ys) = noisy_quadratic();
    let big = Dataset::new().column("x", xs.clone()).target(ys.clone());
    let small = Dataset::new()
        .column("x", xs[..15].to_vec())
        .target(ys[..15].to_vec());
    let cases = [
        ("(+ a (* b x) (* c x x))", &big, free(&["a", "b", "c"])),
        ("(+ a (* b x))", &small, free(&["a", "b"])),
        ("(+ a (* b x) (* c x x))", &big, free(&["a", "b", "c"])),
    ];
    let config = |params| CalibrateConfig {
        params,
        n_starts: 4,
        polish: Polish::Lm,
        screen_iters: 5,
        n_polish: 2,
        ..CalibrateConfig::recommended()
    };
    let mut heap = Heap::new();
    let mut reused = Calibrator::new(config(free(&["a"]))).unwrap();
    for (src, data, params) in cases {
        let program = Scheme.parse(&mut heap, src).unwrap();
        reused.reconfigure(config(params.clone())).unwrap();
        let again = reused.calibrate(&mut heap, &program, data).unwrap();
        let fresh = fit(src, data, config(params));
        assert_eq!(again.params, fresh.params, "{src}");
        assert_eq!(again.starts, fresh.starts, "{src}");
        assert!(again.starts.iter().filter(|s| s.polished).count() == 2);
    }
}
