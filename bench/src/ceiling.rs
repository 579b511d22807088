//! The compiled ceiling: `kalman2d_T80`'s negative log-likelihood written by hand in plain Rust,
//! forward and with its gradient in `q` and `r` (forward-mode dual numbers, two tangents).
//!
//! It follows the model program step for step (general 2×2 closed forms, no symmetry assumed):
//! `Ppred = P + qI`, `S = Ppred + rI`, `Sinv = S⁻¹`, `K = Ppred·Sinv`, `e = y − x`, `x ← x + K·e`,
//! `P ← (I − K)·Ppred`, `L += log det S + e·(Sinv·e)`, from `x = 0`, `P = I`, `L = 0`. The
//! interpreter's time per lane is compared against this code's time per evaluation.

use std::ops::{Add, Div, Mul, Sub};

/// Arithmetic the filter needs, for plain `f64` (value only) and [`Dual`] (value and gradient).
trait Real:
    Copy + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self>
{
    fn constant(v: f64) -> Self;
    fn ln(self) -> Self;
}

impl Real for f64 {
    fn constant(v: f64) -> f64 {
        v
    }
    fn ln(self) -> f64 {
        f64::ln(self)
    }
}

/// A value with its derivatives with respect to `q` and `r`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dual {
    /// The value.
    pub v: f64,
    /// `[d/dq, d/dr]`.
    pub d: [f64; 2],
}

impl Add for Dual {
    type Output = Dual;
    fn add(self, o: Dual) -> Dual {
        Dual {
            v: self.v + o.v,
            d: [self.d[0] + o.d[0], self.d[1] + o.d[1]],
        }
    }
}

impl Sub for Dual {
    type Output = Dual;
    fn sub(self, o: Dual) -> Dual {
        Dual {
            v: self.v - o.v,
            d: [self.d[0] - o.d[0], self.d[1] - o.d[1]],
        }
    }
}

impl Mul for Dual {
    type Output = Dual;
    fn mul(self, o: Dual) -> Dual {
        Dual {
            v: self.v * o.v,
            d: [
                self.d[0] * o.v + self.v * o.d[0],
                self.d[1] * o.v + self.v * o.d[1],
            ],
        }
    }
}

impl Div for Dual {
    type Output = Dual;
    fn div(self, o: Dual) -> Dual {
        let v = self.v / o.v;
        Dual {
            v,
            d: [
                (self.d[0] - v * o.d[0]) / o.v,
                (self.d[1] - v * o.d[1]) / o.v,
            ],
        }
    }
}

impl Real for Dual {
    fn constant(v: f64) -> Dual {
        Dual { v, d: [0.0; 2] }
    }
    fn ln(self) -> Dual {
        Dual {
            v: self.v.ln(),
            d: [self.d[0] / self.v, self.d[1] / self.v],
        }
    }
}

type Mat2<T> = [[T; 2]; 2];

fn matmul<T: Real>(a: &Mat2<T>, b: &Mat2<T>) -> Mat2<T> {
    [
        [
            a[0][0] * b[0][0] + a[0][1] * b[1][0],
            a[0][0] * b[0][1] + a[0][1] * b[1][1],
        ],
        [
            a[1][0] * b[0][0] + a[1][1] * b[1][0],
            a[1][0] * b[0][1] + a[1][1] * b[1][1],
        ],
    ]
}

fn matvec<T: Real>(a: &Mat2<T>, v: [T; 2]) -> [T; 2] {
    [
        a[0][0] * v[0] + a[0][1] * v[1],
        a[1][0] * v[0] + a[1][1] * v[1],
    ]
}

/// The filter's negative log-likelihood over `obs` (one `[y0, y1]` per step).
fn nll<T: Real>(obs: &[[f64; 2]], q: T, r: T) -> T {
    let zero = T::constant(0.0);
    let one = T::constant(1.0);
    let mut x = [zero; 2];
    let mut p = [[one, zero], [zero, one]];
    let mut total = zero;
    for y in obs {
        let pp = [[p[0][0] + q, p[0][1]], [p[1][0], p[1][1] + q]];
        let s = [[pp[0][0] + r, pp[0][1]], [pp[1][0], pp[1][1] + r]];
        let det = s[0][0] * s[1][1] - s[0][1] * s[1][0];
        let sinv = [
            [s[1][1] / det, zero - s[0][1] / det],
            [zero - s[1][0] / det, s[0][0] / det],
        ];
        let k = matmul(&pp, &sinv);
        let e = [T::constant(y[0]) - x[0], T::constant(y[1]) - x[1]];
        let ke = matvec(&k, e);
        let se = matvec(&sinv, e);
        total = total + (det.ln() + (e[0] * se[0] + e[1] * se[1]));
        x = [x[0] + ke[0], x[1] + ke[1]];
        let i_minus_k = [
            [one - k[0][0], zero - k[0][1]],
            [zero - k[1][0], one - k[1][1]],
        ];
        p = matmul(&i_minus_k, &pp);
    }
    total
}

/// The negative log-likelihood at `(q, r)`, value only.
pub fn kalman_nll(obs: &[[f64; 2]], q: f64, r: f64) -> f64 {
    nll(obs, q, r)
}

/// The negative log-likelihood at `(q, r)` and its gradient `[d/dq, d/dr]`.
pub fn kalman_nll_grad(obs: &[[f64; 2]], q: f64, r: f64) -> (f64, [f64; 2]) {
    let q = Dual {
        v: q,
        d: [1.0, 0.0],
    };
    let r = Dual {
        v: r,
        d: [0.0, 1.0],
    };
    let res = nll(obs, q, r);
    (res.v, res.d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dual_matches_central_differences() {
        // Oracle: central finite differences of the f64 version (h = 1e-6).
        let obs: Vec<[f64; 2]> = (0..10)
            .map(|i| [(i as f64 * 0.7).sin(), (i as f64 * 0.3).cos()])
            .collect();
        let (q, r) = (0.05, 0.1);
        let (v, g) = kalman_nll_grad(&obs, q, r);
        assert_eq!(v, kalman_nll(&obs, q, r));
        let h = 1e-6;
        let dq = (kalman_nll(&obs, q + h, r) - kalman_nll(&obs, q - h, r)) / (2.0 * h);
        let dr = (kalman_nll(&obs, q, r + h) - kalman_nll(&obs, q, r - h)) / (2.0 * h);
        assert!(
            (g[0] - dq).abs() <= 1e-5 * dq.abs().max(1.0),
            "{g:?} vs {dq}"
        );
        assert!(
            (g[1] - dr).abs() <= 1e-5 * dr.abs().max(1.0),
            "{g:?} vs {dr}"
        );
    }

    use crate::{default_seed_data, kalman};

    fn case() -> kalman::KalmanCase {
        let dir = default_seed_data();
        kalman::KalmanCase::load(&dir)
            .unwrap_or_else(|e| panic!("{e} (see testdata/README.md; tests never skip)"))
    }

    fn check_close(what: &str, a: f64, b: f64, rtol: f64) {
        assert!(
            (a - b).abs() <= rtol * b.abs(),
            "{what}: {a} vs {b} (relative {:e})",
            (a - b).abs() / b.abs()
        );
    }

    #[test]
    fn ceiling_equals_the_interpreter() {
        // Oracle: the interpreter's `eval_grad` in the reference dialect, lane by lane.
        let case = case();
        let points = [
            (0.05, 0.1),
            (0.01, 0.5),
            (0.3, 0.02),
            (1.0, 1.0),
            (0.052, 0.097),
        ];
        let q: Vec<f64> = points.iter().map(|p| p.0).collect();
        let r: Vec<f64> = points.iter().map(|p| p.1).collect();
        let mut runner = kalman::KalmanRunner::new(&case, points.len(), true).unwrap();
        runner.set_params(&q, &r);
        runner.run(true).unwrap();
        for (lane, &(q, r)) in points.iter().enumerate() {
            let (v, g, fault) = runner.lane_result(lane);
            assert!(!fault);
            let (cv, cg) = kalman_nll_grad(&case.obs, q, r);
            check_close(&format!("value at ({q}, {r})"), cv, v, 1e-9);
            check_close(&format!("d/dq at ({q}, {r})"), cg[0], g[0], 1e-9);
            check_close(&format!("d/dr at ({q}, {r})"), cg[1], g[1], 1e-9);
            check_close("forward-only", kalman_nll(&case.obs, q, r), v, 1e-9);
        }
    }

    #[test]
    fn ceiling_matches_the_pytorch_oracle() {
        // Oracle: testdata/seed-data/oracle_refs.json, `kalman2d_T80` (float32 values), at the
        // tolerance float32 allows.
        let case = case();
        assert_eq!((case.q, case.r), (0.05, 0.1));
        let (v, g) = kalman_nll_grad(&case.obs, case.q, case.r);
        check_close("value", v, case.oracle_value, 1e-6);
        check_close("d/dq", g[0], case.oracle_grads[0], 1e-5);
        check_close("d/dr", g[1], case.oracle_grads[1], 1e-5);
        check_close("value (brief)", v, 831.2208862, 1e-6);
        check_close("d/dq (brief)", g[0], -3458.67, 1e-5);
        check_close("d/dr (brief)", g[1], -7529.31, 1e-5);
    }
}
