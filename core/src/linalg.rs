//! Tensor primitives on one lane's elements: each op's forward beside its vector-Jacobian product.
//!
//! Vectors are `n` elements; matrices are row-major `rows * cols`. The evaluator gathers a lane's
//! elements into small buffers, calls these, and scatters the results (see `eval.rs`).

#![allow(clippy::needless_range_loop)] // index arithmetic mirrors the maths

/// The tensor ops that record a tape node (besides elementwise `Unary`/`Binary` and `Select`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum TensorOp {
    /// Σ aᵢbᵢ.
    Dot,
    /// Σ aᵢ.
    Sum,
    /// ‖a‖₂.
    Norm,
    /// a / max(‖a‖, 1e-8).
    Normalize,
    /// a × b (3-vectors).
    Cross,
    /// A (m×n) · v (n).
    MatVec { m: u16, n: u16 },
    /// A (m×k) · B (k×n).
    MatMul { m: u16, k: u16, n: u16 },
    /// Aᵀ for A (r×c).
    Transpose { r: u16, c: u16 },
    /// Σ Aᵢᵢ for A (r×c).
    Trace { r: u16, c: u16 },
    /// a bᵀ.
    Outer,
    /// det A; the tape keeps A⁻¹ as the second input.
    Det { m: u16 },
    /// log det A (or log|det A| when `abs`); the tape keeps A⁻¹ as the second input.
    LogDet { m: u16, abs: bool },
    /// A⁻¹.
    Inv { m: u16 },
}

const NORM_FLOOR: f64 = 1e-8;

impl TensorOp {
    /// Forward on one lane: inputs `a`, `b` (empty when unused) into `out`.
    pub(crate) fn forward(self, a: &[f64], b: &[f64], out: &mut [f64]) {
        match self {
            TensorOp::Dot => out[0] = a.iter().zip(b).map(|(x, y)| x * y).sum(),
            TensorOp::Sum => out[0] = a.iter().sum(),
            TensorOp::Norm => out[0] = a.iter().map(|x| x * x).sum::<f64>().sqrt(),
            TensorOp::Normalize => {
                let n = a.iter().map(|x| x * x).sum::<f64>().sqrt().max(NORM_FLOOR);
                for (o, x) in out.iter_mut().zip(a) {
                    *o = x / n;
                }
            }
            TensorOp::Cross => {
                out[0] = a[1] * b[2] - a[2] * b[1];
                out[1] = a[2] * b[0] - a[0] * b[2];
                out[2] = a[0] * b[1] - a[1] * b[0];
            }
            TensorOp::MatVec { m, n } => {
                let (m, n) = (m as usize, n as usize);
                for i in 0..m {
                    out[i] = (0..n).map(|j| a[i * n + j] * b[j]).sum();
                }
            }
            TensorOp::MatMul { m, k, n } => {
                let (m, k, n) = (m as usize, k as usize, n as usize);
                for i in 0..m {
                    for j in 0..n {
                        out[i * n + j] = (0..k).map(|t| a[i * k + t] * b[t * n + j]).sum();
                    }
                }
            }
            TensorOp::Transpose { r, c } => {
                let (r, c) = (r as usize, c as usize);
                for i in 0..r {
                    for j in 0..c {
                        out[j * r + i] = a[i * c + j];
                    }
                }
            }
            TensorOp::Trace { r, c } => {
                let (r, c) = (r as usize, c as usize);
                out[0] = (0..r.min(c)).map(|i| a[i * c + i]).sum();
            }
            TensorOp::Outer => {
                let n = b.len();
                for (i, x) in a.iter().enumerate() {
                    for (j, y) in b.iter().enumerate() {
                        out[i * n + j] = x * y;
                    }
                }
            }
            // det/logdet/inv are computed by `det_inv` (they need the inverse kept aside).
            TensorOp::Det { .. } | TensorOp::LogDet { .. } | TensorOp::Inv { .. } => {}
        }
    }

    /// VJP on one lane: given inputs `a`, `b`, output `z` and its adjoint `g`, accumulate into
    /// `da`, `db` (zeroed by the caller; `db` empty when unused). For det/logdet `b` is A⁻¹.
    pub(crate) fn vjp(
        self,
        a: &[f64],
        b: &[f64],
        z: &[f64],
        g: &[f64],
        da: &mut [f64],
        db: &mut [f64],
    ) {
        match self {
            TensorOp::Dot => {
                for i in 0..a.len() {
                    da[i] += g[0] * b[i];
                    db[i] += g[0] * a[i];
                }
            }
            TensorOp::Sum => da.iter_mut().for_each(|d| *d += g[0]),
            TensorOp::Norm => {
                if z[0] > 0.0 {
                    for i in 0..a.len() {
                        da[i] += g[0] * a[i] / z[0];
                    }
                }
            }
            TensorOp::Normalize => {
                let n_raw = a.iter().map(|x| x * x).sum::<f64>().sqrt();
                let n = n_raw.max(NORM_FLOOR);
                if n_raw > NORM_FLOOR {
                    let ga: f64 = g.iter().zip(a).map(|(x, y)| x * y).sum();
                    for i in 0..a.len() {
                        da[i] += g[i] / n - ga * a[i] / (n * n * n);
                    }
                } else {
                    for i in 0..a.len() {
                        da[i] += g[i] / n;
                    }
                }
            }
            TensorOp::Cross => {
                // da = b × g, db = g × a
                da[0] += b[1] * g[2] - b[2] * g[1];
                da[1] += b[2] * g[0] - b[0] * g[2];
                da[2] += b[0] * g[1] - b[1] * g[0];
                db[0] += g[1] * a[2] - g[2] * a[1];
                db[1] += g[2] * a[0] - g[0] * a[2];
                db[2] += g[0] * a[1] - g[1] * a[0];
            }
            TensorOp::MatVec { m, n } => {
                let (m, n) = (m as usize, n as usize);
                for i in 0..m {
                    for j in 0..n {
                        if !da.is_empty() {
                            da[i * n + j] += g[i] * b[j];
                        }
                        if !db.is_empty() {
                            db[j] += a[i * n + j] * g[i];
                        }
                    }
                }
            }
            TensorOp::MatMul { m, k, n } => {
                let (m, k, n) = (m as usize, k as usize, n as usize);
                for i in 0..m {
                    for j in 0..n {
                        let gij = g[i * n + j];
                        for t in 0..k {
                            if !da.is_empty() {
                                da[i * k + t] += gij * b[t * n + j];
                            }
                            if !db.is_empty() {
                                db[t * n + j] += a[i * k + t] * gij;
                            }
                        }
                    }
                }
            }
            TensorOp::Transpose { r, c } => {
                let (r, c) = (r as usize, c as usize);
                for i in 0..r {
                    for j in 0..c {
                        da[i * c + j] += g[j * r + i];
                    }
                }
            }
            TensorOp::Trace { r, c } => {
                let (r, c) = (r as usize, c as usize);
                for i in 0..r.min(c) {
                    da[i * c + i] += g[0];
                }
            }
            TensorOp::Outer => {
                let n = b.len();
                for i in 0..a.len() {
                    for j in 0..n {
                        let gij = g[i * n + j];
                        if !da.is_empty() {
                            da[i] += gij * b[j];
                        }
                        if !db.is_empty() {
                            db[j] += gij * a[i];
                        }
                    }
                }
            }
            TensorOp::Det { m } => {
                // dA = g · det · A⁻ᵀ
                let m = m as usize;
                for i in 0..m {
                    for j in 0..m {
                        da[i * m + j] += g[0] * z[0] * b[j * m + i];
                    }
                }
            }
            TensorOp::LogDet { m, .. } => {
                let m = m as usize;
                for i in 0..m {
                    for j in 0..m {
                        da[i * m + j] += g[0] * b[j * m + i];
                    }
                }
            }
            TensorOp::Inv { m } => {
                // dA = −Zᵀ G Zᵀ with Z = A⁻¹ (the output)
                let m = m as usize;
                for i in 0..m {
                    for j in 0..m {
                        let mut s = 0.0;
                        for p in 0..m {
                            let zt_ip = z[p * m + i];
                            if zt_ip == 0.0 {
                                continue;
                            }
                            for q in 0..m {
                                s += zt_ip * g[p * m + q] * z[j * m + q];
                            }
                        }
                        da[i * m + j] -= s;
                    }
                }
            }
        }
    }
}

/// Gauss–Jordan elimination with partial pivoting on one lane's m×m matrix `a`: returns det A and
/// writes A⁻¹ into `inv` (NaN where A is singular). `work` needs `m*m` floats.
pub(crate) fn det_inv(a: &[f64], m: usize, inv: &mut [f64], work: &mut [f64]) -> f64 {
    if m == 2 {
        let det = a[0] * a[3] - a[1] * a[2];
        inv[0] = a[3] / det;
        inv[1] = -a[1] / det;
        inv[2] = -a[2] / det;
        inv[3] = a[0] / det;
        return det;
    }
    work[..m * m].copy_from_slice(&a[..m * m]);
    for i in 0..m {
        for j in 0..m {
            inv[i * m + j] = if i == j { 1.0 } else { 0.0 };
        }
    }
    let mut det = 1.0;
    for col in 0..m {
        let mut piv = col;
        for r in col + 1..m {
            if work[r * m + col].abs() > work[piv * m + col].abs() {
                piv = r;
            }
        }
        let p = work[piv * m + col];
        if p == 0.0 {
            inv[..m * m].iter_mut().for_each(|x| *x = f64::NAN);
            return 0.0;
        }
        if piv != col {
            for j in 0..m {
                work.swap(piv * m + j, col * m + j);
                inv.swap(piv * m + j, col * m + j);
            }
            det = -det;
        }
        det *= p;
        for j in 0..m {
            work[col * m + j] /= p;
            inv[col * m + j] /= p;
        }
        for r in 0..m {
            if r != col {
                let f = work[r * m + col];
                if f != 0.0 {
                    for j in 0..m {
                        work[r * m + j] -= f * work[col * m + j];
                        inv[r * m + j] -= f * inv[col * m + j];
                    }
                }
            }
        }
    }
    det
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fd_check(op: TensorOp, a: &[f64], b: &[f64], out_n: usize) {
        let mut z = vec![0.0; out_n];
        op.forward(a, b, &mut z);
        for k in 0..out_n {
            let mut g = vec![0.0; out_n];
            g[k] = 1.0;
            let mut da = vec![0.0; a.len()];
            let mut db = vec![0.0; b.len()];
            op.vjp(a, b, &z, &g, &mut da, &mut db);
            let h = 1e-6;
            for i in 0..a.len() {
                let (mut ap, mut am) = (a.to_vec(), a.to_vec());
                ap[i] += h;
                am[i] -= h;
                let (mut zp, mut zm) = (vec![0.0; out_n], vec![0.0; out_n]);
                op.forward(&ap, b, &mut zp);
                op.forward(&am, b, &mut zm);
                let fd = (zp[k] - zm[k]) / (2.0 * h);
                assert!(
                    (fd - da[i]).abs() < 1e-6,
                    "{op:?} da[{i}] out {k}: {} vs {fd}",
                    da[i]
                );
            }
            for i in 0..b.len() {
                let (mut bp, mut bm) = (b.to_vec(), b.to_vec());
                bp[i] += h;
                bm[i] -= h;
                let (mut zp, mut zm) = (vec![0.0; out_n], vec![0.0; out_n]);
                op.forward(a, &bp, &mut zp);
                op.forward(a, &bm, &mut zm);
                let fd = (zp[k] - zm[k]) / (2.0 * h);
                assert!(
                    (fd - db[i]).abs() < 1e-6,
                    "{op:?} db[{i}] out {k}: {} vs {fd}",
                    db[i]
                );
            }
        }
    }

    #[test]
    fn tensor_vjps_match_finite_differences() {
        let v3 = [0.3, -1.2, 2.0];
        let w3 = [1.1, 0.4, -0.7];
        fd_check(TensorOp::Dot, &v3, &w3, 1);
        fd_check(TensorOp::Sum, &v3, &[], 1);
        fd_check(TensorOp::Norm, &v3, &[], 1);
        fd_check(TensorOp::Normalize, &v3, &[], 3);
        fd_check(TensorOp::Cross, &v3, &w3, 3);
        let m23 = [1.0, 2.0, -0.5, 0.3, 0.9, 1.7];
        fd_check(TensorOp::MatVec { m: 2, n: 3 }, &m23, &w3, 2);
        fd_check(
            TensorOp::MatMul { m: 2, k: 3, n: 2 },
            &m23,
            &[0.2, 1.0, -1.0, 0.5, 0.7, 0.1],
            4,
        );
        fd_check(TensorOp::Transpose { r: 2, c: 3 }, &m23, &[], 6);
        fd_check(TensorOp::Trace { r: 2, c: 3 }, &m23, &[], 1);
        fd_check(TensorOp::Outer, &v3, &w3, 9);
    }

    #[test]
    fn det_inverse_and_their_vjps() {
        for a in [
            vec![2.0, 0.5, 0.5, 1.5],
            vec![2.0, 0.1, -0.3, 0.4, 1.5, 0.2, 0.0, 0.7, 3.0],
        ] {
            let m = if a.len() == 4 { 2 } else { 3 };
            let mut inv = vec![0.0; m * m];
            let mut work = vec![0.0; m * m];
            let det = det_inv(&a, m, &mut inv, &mut work);
            // A · A⁻¹ = I
            for i in 0..m {
                for j in 0..m {
                    let s: f64 = (0..m).map(|t| a[i * m + t] * inv[t * m + j]).sum();
                    assert!((s - if i == j { 1.0 } else { 0.0 }).abs() < 1e-12);
                }
            }
            let h = 1e-6;
            let mut da = vec![0.0; m * m];
            TensorOp::Det { m: m as u16 }.vjp(&a, &inv, &[det], &[1.0], &mut da, &mut []);
            for i in 0..m * m {
                let (mut ap, mut am) = (a.clone(), a.clone());
                ap[i] += h;
                am[i] -= h;
                let dp = det_inv(&ap, m, &mut inv.clone(), &mut work);
                let dm = det_inv(&am, m, &mut inv.clone(), &mut work);
                assert!(((dp - dm) / (2.0 * h) - da[i]).abs() < 1e-6);
            }
            // inverse: check one output element's gradient
            for k in 0..m * m {
                let mut g = vec![0.0; m * m];
                g[k] = 1.0;
                let mut da = vec![0.0; m * m];
                TensorOp::Inv { m: m as u16 }.vjp(&a, &[], &inv, &g, &mut da, &mut []);
                for i in 0..m * m {
                    let (mut ap, mut am) = (a.clone(), a.clone());
                    ap[i] += h;
                    am[i] -= h;
                    let (mut ip, mut im) = (vec![0.0; m * m], vec![0.0; m * m]);
                    det_inv(&ap, m, &mut ip, &mut work);
                    det_inv(&am, m, &mut im, &mut work);
                    assert!(((ip[k] - im[k]) / (2.0 * h) - da[i]).abs() < 1e-6);
                }
            }
        }
    }
}
