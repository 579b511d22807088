//! Tensor primitives on one lane's elements: each op's forward beside its vector-Jacobian product.
//!
//! Vectors are `n` elements; matrices are row-major `rows * cols`. The evaluator gathers a lane's
//! elements into small buffers, calls these, and scatters the results (see `eval.rs`).

#![allow(clippy::needless_range_loop)] // index arithmetic mirrors the maths

use crate::real::Real;

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
    pub(crate) fn forward<R: Real>(self, a: &[R], b: &[R], out: &mut [R]) {
        match self {
            TensorOp::Dot => out[0] = a.iter().zip(b).map(|(&x, &y)| x * y).sum(),
            TensorOp::Sum => out[0] = a.iter().sum(),
            TensorOp::Norm => out[0] = a.iter().map(|&x| x * x).sum::<R>().sqrt(),
            TensorOp::Normalize => {
                let n = a
                    .iter()
                    .map(|&x| x * x)
                    .sum::<R>()
                    .sqrt()
                    .max(R::of(NORM_FLOOR));
                for (o, &x) in out.iter_mut().zip(a) {
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
                for (i, &x) in a.iter().enumerate() {
                    for (j, &y) in b.iter().enumerate() {
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
    pub(crate) fn vjp<R: Real>(
        self,
        a: &[R],
        b: &[R],
        z: &[R],
        g: &[R],
        da: &mut [R],
        db: &mut [R],
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
                if z[0] > R::ZERO {
                    for i in 0..a.len() {
                        da[i] += g[0] * a[i] / z[0];
                    }
                }
            }
            TensorOp::Normalize => {
                let n_raw = a.iter().map(|&x| x * x).sum::<R>().sqrt();
                let n = n_raw.max(R::of(NORM_FLOOR));
                if n_raw > R::of(NORM_FLOOR) {
                    let ga: R = g.iter().zip(a).map(|(&x, &y)| x * y).sum();
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
            TensorOp::Det { .. } | TensorOp::LogDet { .. } | TensorOp::Inv { .. } => {
                self.square_vjp(a, b, z, g, da);
            }
        }
    }

    /// [`vjp`](Self::vjp) of det, logdet and inv (the ops of one square matrix); `b` is A⁻¹ for
    /// det and logdet.
    #[inline]
    fn square_vjp<R: Real>(self, a: &[R], b: &[R], z: &[R], g: &[R], da: &mut [R]) {
        match self {
            TensorOp::Det { m } => {
                // dA = g · det · A⁻ᵀ
                let m = m as usize;
                let planted = if crate::planted::is_planted(crate::planted::Bug::DetVjp) {
                    R::of(1.01)
                } else {
                    R::ONE
                };
                if b[..m * m].iter().all(|x| x.is_finite()) {
                    for i in 0..m {
                        for j in 0..m {
                            da[i * m + j] += planted * g[0] * z[0] * b[j * m + i];
                        }
                    }
                } else {
                    // Singular A (no inverse): det · A⁻ᵀ is the cofactor matrix, which exists.
                    // Rare, so the scratch is allocated here.
                    let mut cof = vec![R::ZERO; m * m];
                    let mut work = Vec::new();
                    cofactors(&a[..m * m], m, &mut cof, &mut work);
                    for (d, c) in da.iter_mut().zip(&cof) {
                        *d += planted * g[0] * *c;
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
                        let mut s = R::ZERO;
                        for p in 0..m {
                            let zt_ip = z[p * m + i];
                            for q in 0..m {
                                s += zt_ip * g[p * m + q] * z[j * m + q];
                            }
                        }
                        da[i * m + j] -= s;
                    }
                }
            }
            _ => unreachable!("square_vjp of {self:?}"),
        }
    }
}

/// Gauss–Jordan elimination with partial pivoting on one lane's m×m matrix `a`: returns det A and
/// writes A⁻¹ into `inv` (NaN where A is singular). `work` needs `m*m` floats.
///
/// Gauss–Jordan scales each pivot row by 1/pivot, which overflows when a finite matrix is scaled
/// near the smallest floats (a rank-one 3×3 whose entries f32 rounded to subnormals gave a NaN
/// determinant where f64 gave 0). Where the determinant comes out non-finite from finite entries,
/// it is recomputed by elimination with multipliers (`|f| ≤ 1`, nothing scaled by 1/pivot) and
/// A⁻¹ is NaN (not representable; the det VJP then takes the cofactors). Every other matrix keeps
/// Gauss–Jordan's bits.
pub(crate) fn det_inv<R: Real>(a: &[R], m: usize, inv: &mut [R], work: &mut [R]) -> R {
    let det = gauss_jordan(a, m, inv, work);
    if det.is_finite() || m == 2 || !a[..m * m].iter().all(|x| x.is_finite()) {
        return det;
    }
    inv[..m * m].iter_mut().for_each(|x| *x = R::NAN);
    work[..m * m].copy_from_slice(&a[..m * m]);
    det_in_place(&mut work[..m * m], m)
}

/// [`det_inv`]'s elimination.
fn gauss_jordan<R: Real>(a: &[R], m: usize, inv: &mut [R], work: &mut [R]) -> R {
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
            inv[i * m + j] = if i == j { R::ONE } else { R::ZERO };
        }
    }
    let mut det = R::ONE;
    for col in 0..m {
        let piv = pivot_row(work, m, col);
        let p = work[piv * m + col];
        if p == R::ZERO {
            inv[..m * m].iter_mut().for_each(|x| *x = R::NAN);
            return R::ZERO;
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
                if f != R::ZERO {
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

/// The cofactor matrix of the m×m matrix `a` (equal to det A · A⁻ᵀ where A is invertible, and
/// still defined where it is not): `out[i·m + j] = (−1)^(i+j) det(A without row i, column j)`.
/// `work` is scratch.
pub(crate) fn cofactors<R: Real>(a: &[R], m: usize, out: &mut [R], work: &mut Vec<R>) {
    if m == 1 {
        out[0] = R::ONE;
        return;
    }
    let k = m - 1;
    for i in 0..m {
        for j in 0..m {
            work.clear();
            for r in (0..m).filter(|&r| r != i) {
                for c in (0..m).filter(|&c| c != j) {
                    work.push(a[r * m + c]);
                }
            }
            let sign = if (i + j) % 2 == 0 { R::ONE } else { -R::ONE };
            out[i * m + j] = sign * det_in_place(work, k);
        }
    }
}

/// The row at or below `col` of the k×k matrix in `w` with the largest magnitude in column `col`
/// (the first such row on ties): partial pivoting's choice.
fn pivot_row<R: Real>(w: &[R], k: usize, col: usize) -> usize {
    let mut piv = col;
    for r in col + 1..k {
        if w[r * k + col].abs() > w[piv * k + col].abs() {
            piv = r;
        }
    }
    piv
}

/// Determinant of the k×k matrix in `w` by elimination with partial pivoting (overwrites `w`).
fn det_in_place<R: Real>(w: &mut [R], k: usize) -> R {
    let mut det = R::ONE;
    for col in 0..k {
        let piv = pivot_row(w, k, col);
        let p = w[piv * k + col];
        if p == R::ZERO {
            return R::ZERO;
        }
        if piv != col {
            for j in 0..k {
                w.swap(piv * k + j, col * k + j);
            }
            det = -det;
        }
        det *= p;
        for r in col + 1..k {
            let f = w[r * k + col] / p;
            for j in col..k {
                w[r * k + j] -= f * w[col * k + j];
            }
        }
    }
    det
}

/// The det VJP on the lanes whose A is singular (A⁻¹ non-finite there, so the main loop added
/// nothing): dA += g · cofactors(A). `a` and `inv` are lane-minor (element e of lane l at e·b + l).
fn singular_det_lanes<R: Real>(
    m: usize,
    a: &[R],
    inv: &[R],
    g: &[R],
    da: &mut [R],
    b: usize,
    s: &mut Vec<R>,
) {
    // Almost always every lane is regular: one branch-free scan says so.
    let inv = &inv[..b];
    if inv.iter().fold(true, |ok, x| ok & x.is_finite()) {
        return;
    }
    for l in 0..b {
        if inv[l].is_finite() {
            continue;
        }
        let planted = if crate::planted::is_planted(crate::planted::Bug::DetVjp) {
            R::of(1.01)
        } else {
            R::ONE
        };
        // s = [A of this lane (m²) | cofactors (m²) | minor scratch].
        s.clear();
        s.extend((0..m * m).map(|e| a[e * b + l]));
        s.resize(2 * m * m, R::ZERO);
        let mut work = Vec::new();
        let (al, cof) = s.split_at_mut(m * m);
        cofactors(al, m, cof, &mut work);
        for e in 0..m * m {
            da[e * b + l] += planted * g[l] * cof[e];
        }
    }
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
    fn det_vjp_at_a_singular_matrix_is_the_cofactor_matrix() {
        // Issue 16 (found by ndvm-fuzz): det · A⁻ᵀ is NaN where A is singular; the gradient of
        // det is the cofactor matrix, which exists. Rows 0 and 1 are proportional here, so the
        // elimination meets an exact zero pivot; cofactor (0, 0) = 4·1 − 6·0 = 4.
        let a: [f64; 9] = [1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 1.0, 0.0, 1.0];
        let (mut inv, mut work) = ([0.0; 9], [0.0; 9]);
        let det = det_inv(&a, 3, &mut inv, &mut work);
        assert_eq!(det, 0.0);
        assert!(inv[0].is_nan());
        let mut da = [0.0; 9];
        TensorOp::Det { m: 3 }.vjp(&a, &inv, &[det], &[1.0], &mut da, &mut []);
        // Known answer: cofactors of [[1 2 3] [2 4 6] [1 0 1]].
        assert_eq!(da, [4.0, 4.0, -4.0, -2.0, -2.0, 2.0, 0.0, 0.0, 0.0]);
        // The lane-parallel path gives the same on a singular lane next to an invertible one.
        let b = [2.0, 0.5, 0.5, 1.5];
        let lanes = 2;
        let mut a2 = [0.0; 8];
        let (mut inv2, mut z2) = ([0.0; 8], [0.0; 2]);
        let sing = [1.0, 2.0, 2.0, 4.0];
        for (l, m) in [sing, b].iter().enumerate() {
            let (mut i1, mut w1) = ([0.0; 4], [0.0; 4]);
            z2[l] = det_inv(m, 2, &mut i1, &mut w1);
            for e in 0..4 {
                a2[e * lanes + l] = m[e];
                inv2[e * lanes + l] = i1[e];
            }
        }
        let mut da2 = [0.0; 8];
        let mut s = Vec::new();
        det_family_vjp(
            TensorOp::Det { m: 2 },
            &a2,
            &inv2,
            &z2,
            &[1.0, 1.0],
            &mut da2,
            true,
            lanes,
            &mut s,
        );
        // Lane 0: cofactors of [[1 2] [2 4]] = [4, −2, −2, 1]; lane 1: of [[2 .5] [.5 1.5]].
        assert_eq!([da2[0], da2[2], da2[4], da2[6]], [4.0, -2.0, -2.0, 1.0]);
        assert_eq!([da2[1], da2[3], da2[5], da2[7]], [1.5, -0.5, -0.5, 2.0]);
    }

    #[test]
    fn det_of_a_rank_one_matrix_scaled_to_subnormals_is_finite_in_f32() {
        // Issue 33 (ndvm-fuzz seed 20261252, program 5637): outer(u, v) with v's first entry
        // 2.06e-43 (an f32 subnormal). Gauss–Jordan scaled the pivot row by 1/pivot, overflowed
        // to ∞ and gave det NaN where f64 gave 0. Elimination with multipliers gives ≈ 0.
        let u = [1.0f32, -2.5, 0.75];
        let v = [f32::from_bits(147), 3.0, 1.304];
        let a: Vec<f32> = (0..9).map(|k| u[k / 3] * v[k % 3]).collect();
        assert!(a[0] != 0.0 && !a[0].is_normal());
        let (mut inv, mut work) = ([0.0f32; 9], [0.0f32; 9]);
        // What Gauss–Jordan alone gives: not finite.
        assert!(!gauss_jordan(&a, 3, &mut inv, &mut work).is_finite());
        let det = det_inv(&a, 3, &mut inv, &mut work);
        assert!(det.is_finite() && det.abs() < 1e-30, "det {det}");
        assert!(inv.iter().all(|x| x.is_nan()));
        // Its VJP is the cofactor matrix (finite), as at any singular matrix.
        let mut da = [0.0f32; 9];
        TensorOp::Det { m: 3 }.vjp(&a, &inv, &[det], &[1.0], &mut da, &mut []);
        assert!(da.iter().all(|x| x.is_finite()), "{da:?}");
        // A regular matrix keeps Gauss–Jordan's bits.
        let r = [2.0f64, 1.0, 0.5, -1.0, 3.0, 0.25, 0.5, 0.5, 4.0];
        let (mut i1, mut w1, mut i2, mut w2) = ([0.0; 9], [0.0; 9], [0.0; 9], [0.0; 9]);
        let (d1, d2) = (
            det_inv(&r, 3, &mut i1, &mut w1),
            gauss_jordan(&r, 3, &mut i2, &mut w2),
        );
        assert_eq!(
            (d1.to_bits(), i1.map(f64::to_bits)),
            (d2.to_bits(), i2.map(f64::to_bits))
        );
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

/// One term `out[o] += coeff · a[i] · b[j]` of a bilinear op (or `out[o] += coeff · a[i]` of a
/// linear one, with `j` unused). Forward and VJP read the same terms, so they cannot disagree.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Term {
    pub(crate) o: u32,
    pub(crate) i: u32,
    pub(crate) j: u32,
    pub(crate) coeff: f64,
}

impl TensorOp {
    /// Whether the op is a sum of products of one element of `a` and one of `b`.
    pub(crate) fn is_bilinear(self) -> bool {
        matches!(
            self,
            TensorOp::Dot
                | TensorOp::Cross
                | TensorOp::MatVec { .. }
                | TensorOp::MatMul { .. }
                | TensorOp::Outer
        )
    }

    /// Whether the op is a sum of single elements of `a`.
    pub(crate) fn is_linear(self) -> bool {
        matches!(
            self,
            TensorOp::Sum | TensorOp::Transpose { .. } | TensorOp::Trace { .. }
        )
    }

    /// The terms of a bilinear or linear op with inputs of `na` and `nb` elements.
    pub(crate) fn terms(self, na: usize, nb: usize, out: &mut Vec<Term>) {
        out.clear();
        let t = |o: usize, i: usize, j: usize, coeff: f64| Term {
            o: o as u32,
            i: i as u32,
            j: j as u32,
            coeff,
        };
        match self {
            TensorOp::Dot => out.extend((0..na).map(|i| t(0, i, i, 1.0))),
            TensorOp::Cross => {
                for (o, (p, q)) in [(1, 2), (2, 0), (0, 1)].into_iter().enumerate() {
                    out.push(t(o, p, q, 1.0));
                    out.push(t(o, q, p, -1.0));
                }
            }
            TensorOp::MatVec { m, n } => {
                for r in 0..m as usize {
                    out.extend((0..n as usize).map(|c| t(r, r * n as usize + c, c, 1.0)));
                }
            }
            TensorOp::MatMul { m, k, n } => {
                let (m, k, n) = (m as usize, k as usize, n as usize);
                for r in 0..m {
                    for c in 0..n {
                        out.extend((0..k).map(|s| t(r * n + c, r * k + s, s * n + c, 1.0)));
                    }
                }
            }
            TensorOp::Outer => {
                for r in 0..na {
                    out.extend((0..nb).map(|c| t(r * nb + c, r, c, 1.0)));
                }
            }
            TensorOp::Sum => out.extend((0..na).map(|i| t(0, i, 0, 1.0))),
            TensorOp::Transpose { r, c } => {
                let (r, c) = (r as usize, c as usize);
                for i in 0..r {
                    out.extend((0..c).map(|j| t(j * r + i, i * c + j, 0, 1.0)));
                }
            }
            TensorOp::Trace { r, c } => {
                let (r, c) = (r as usize, c as usize);
                out.extend((0..r.min(c)).map(|i| t(0, i * c + i, 0, 1.0)));
            }
            _ => {}
        }
    }
}

/// A read-only view of one payload's elements: element `e` on lane `l` is `data[e*w + l*s]`.
#[derive(Clone, Copy)]
pub(crate) struct Strided<'a, R: Real> {
    pub(crate) data: &'a [R],
    pub(crate) w: usize,
    pub(crate) s: usize,
}

impl<R: Real> Strided<'_, R> {
    #[inline]
    pub(crate) fn at(&self, e: usize, l: usize) -> R {
        self.data[e * self.w + l * self.s]
    }
}

/// One element's operand for a lane pass: its `b` lanes, or one value shared by every lane.
#[derive(Clone, Copy)]
enum Src<'a, R: Real> {
    Lanes(&'a [R]),
    One(R),
}

impl<'a, R: Real> Strided<'a, R> {
    /// Element `e` as a lane-pass operand.
    #[inline(always)]
    fn src(&self, e: usize, b: usize) -> Src<'a, R> {
        if self.s == 1 {
            Src::Lanes(&self.data[e * self.w..e * self.w + b])
        } else {
            Src::One(self.data[e * self.w])
        }
    }
}

/// One contribution `(c · p) · q` to an element (`c · p` for a linear op, where `q` is unused).
#[derive(Clone, Copy)]
struct Contrib<'a, R: Real> {
    c: R,
    p: Src<'a, R>,
    q: Src<'a, R>,
}

/// `d = base + v₀ + v₁ + …` over the lanes of one element, adding the contributions `cs` in
/// order, where `base` is `d`'s old value, or `0.0` when `first` (its floats are stale): the bits
/// of accumulating each contribution in turn into a zeroed element. `BIL`: contributions are
/// `(c · p) · q`, else `c · p`. One or two contributions over lanes run as one fused pass.
#[inline(always)]
fn accumulate<R: Real, const BIL: bool>(d: &mut [R], first: bool, cs: &[Contrib<'_, R>]) {
    let n = d.len();
    match *cs {
        [
            Contrib {
                c,
                p: Src::Lanes(p),
                q,
            },
        ] if !BIL || matches!(q, Src::Lanes(_)) => {
            let p = &p[..n];
            let q = match q {
                Src::Lanes(q) if BIL => &q[..n],
                _ => p,
            };
            match (first, c == R::ONE) {
                (true, true) => fused1::<_, BIL, true, true>(d, c, p, q),
                (true, false) => fused1::<_, BIL, true, false>(d, c, p, q),
                (false, true) => fused1::<_, BIL, false, true>(d, c, p, q),
                (false, false) => fused1::<_, BIL, false, false>(d, c, p, q),
            }
        }
        [
            Contrib {
                c: c0,
                p: Src::Lanes(p0),
                q: q0,
            },
            Contrib {
                c: c1,
                p: Src::Lanes(p1),
                q: q1,
            },
        ] if !BIL || matches!((q0, q1), (Src::Lanes(_), Src::Lanes(_))) => {
            let (p0, p1) = (&p0[..n], &p1[..n]);
            let (q0, q1) = match (q0, q1) {
                (Src::Lanes(q0), Src::Lanes(q1)) if BIL => (&q0[..n], &q1[..n]),
                _ => (p0, p1),
            };
            let (c, p, q) = ([c0, c1], [p0, p1], [q0, q1]);
            match (first, c0 == R::ONE && c1 == R::ONE) {
                (true, true) => fused2::<_, BIL, true, true>(d, c, p, q),
                (true, false) => fused2::<_, BIL, true, false>(d, c, p, q),
                (false, true) => fused2::<_, BIL, false, true>(d, c, p, q),
                (false, false) => fused2::<_, BIL, false, false>(d, c, p, q),
            }
        }
        _ => {
            for (k, t) in cs.iter().enumerate() {
                if first && k == 0 {
                    contrib_pass::<_, BIL, true>(d, t);
                } else {
                    contrib_pass::<_, BIL, false>(d, t);
                }
            }
        }
    }
}

/// The value of one contribution on one lane. `UNIT`: `c` is 1, and `1 · p` is `p` (bit for
/// bit, NaN included), so the product is left out.
#[inline(always)]
fn term_value<R: Real, const BIL: bool, const UNIT: bool>(c: R, p: R, q: R) -> R {
    let cp = if UNIT { p } else { c * p };
    if BIL { cp * q } else { cp }
}

/// `d (+)= (c · p) · q` over lanes (`FIRST`: `d` is stale, write `0.0 + v`).
#[inline(always)]
fn fused1<R: Real, const BIL: bool, const FIRST: bool, const UNIT: bool>(
    d: &mut [R],
    c: R,
    p: &[R],
    q: &[R],
) {
    let n = d.len();
    let (p, q) = (&p[..n], &q[..n]);
    for l in 0..n {
        let v = term_value::<_, BIL, UNIT>(c, p[l], q[l]);
        d[l] = if FIRST { R::ZERO + v } else { d[l] + v };
    }
}

/// Two contributions in one pass over lanes, the first added before the second.
#[inline(always)]
fn fused2<R: Real, const BIL: bool, const FIRST: bool, const UNIT: bool>(
    d: &mut [R],
    c: [R; 2],
    p: [&[R]; 2],
    q: [&[R]; 2],
) {
    let n = d.len();
    let (p0, p1, q0, q1) = (&p[0][..n], &p[1][..n], &q[0][..n], &q[1][..n]);
    for l in 0..n {
        let v0 = term_value::<_, BIL, UNIT>(c[0], p0[l], q0[l]);
        let v1 = term_value::<_, BIL, UNIT>(c[1], p1[l], q1[l]);
        let s = if FIRST { R::ZERO + v0 } else { d[l] + v0 };
        d[l] = s + v1;
    }
}

/// One contribution's pass over lanes, any operand possibly shared by all lanes.
#[inline(always)]
fn contrib_pass<R: Real, const BIL: bool, const FIRST: bool>(d: &mut [R], t: &Contrib<'_, R>) {
    let n = d.len();
    let c = t.c;
    #[inline(always)]
    fn put<R: Real, const FIRST: bool>(o: &mut R, v: R) {
        if FIRST { *o = R::ZERO + v } else { *o += v }
    }
    if !BIL {
        match t.p {
            Src::Lanes(x) => d
                .iter_mut()
                .zip(&x[..n])
                .for_each(|(o, &x)| put::<_, FIRST>(o, c * x)),
            Src::One(x) => d.iter_mut().for_each(|o| put::<_, FIRST>(o, c * x)),
        }
        return;
    }
    match (t.p, t.q) {
        (Src::Lanes(x), Src::Lanes(y)) => d
            .iter_mut()
            .zip(x[..n].iter().zip(&y[..n]))
            .for_each(|(o, (&x, &y))| put::<_, FIRST>(o, c * x * y)),
        (Src::Lanes(x), Src::One(y)) => d
            .iter_mut()
            .zip(&x[..n])
            .for_each(|(o, &x)| put::<_, FIRST>(o, c * x * y)),
        (Src::One(x), Src::Lanes(y)) => {
            let x = c * x;
            d.iter_mut()
                .zip(&y[..n])
                .for_each(|(o, &y)| put::<_, FIRST>(o, x * y));
        }
        (Src::One(x), Src::One(y)) => {
            let v = c * x * y;
            d.iter_mut().for_each(|o| put::<_, FIRST>(o, v));
        }
    }
}

/// Calls `f(e, run)` for each run of consecutive terms with the same `key` (the element they
/// accumulate into), in order.
#[inline(always)]
fn each_run(terms: &[Term], key: impl Fn(&Term) -> u32, mut f: impl FnMut(usize, &[Term])) {
    let mut k = 0;
    while k < terms.len() {
        let e = key(&terms[k]);
        let mut end = k + 1;
        while end < terms.len() && key(&terms[end]) == e {
            end += 1;
        }
        f(e as usize, &terms[k..end]);
        k = end;
    }
}

/// The contributions of a run of at most two terms (longer runs go term by term).
const FUSE_MAX: usize = 2;

/// Accumulates a run of terms into `d`, building its contributions with `contrib`.
#[inline(always)]
fn accumulate_run<'a, R: Real, const BIL: bool>(
    d: &mut [R],
    first: bool,
    run: &[Term],
    contrib: impl Fn(&Term) -> Contrib<'a, R>,
) {
    if run.len() <= FUSE_MAX {
        let mut cs = [Contrib {
            c: R::ZERO,
            p: Src::One(R::ZERO),
            q: Src::One(R::ZERO),
        }; FUSE_MAX];
        for (c, t) in cs.iter_mut().zip(run) {
            *c = contrib(t);
        }
        accumulate::<_, BIL>(d, first, &cs[..run.len()]);
    } else {
        for (k, t) in run.iter().enumerate() {
            accumulate::<_, BIL>(d, first && k == 0, &[contrib(t)]);
        }
    }
}

/// Structure-of-arrays forward of a bilinear/linear op over all `b` lanes: `out` holds `n_out`
/// elements of `b` lanes each (zeroed here).
pub(crate) fn terms_forward<R: Real>(
    terms: &[Term],
    bilinear: bool,
    a: Strided<'_, R>,
    bb: Strided<'_, R>,
    out: &mut [R],
    b: usize,
) {
    let n_out = out.len() / b.max(1);
    if b == 1 || n_out > 64 {
        out.iter_mut().for_each(|x| *x = R::ZERO);
    }
    if b == 1 {
        // One value per element: the same products and sums as below, without the lane slices.
        for t in terms {
            let (i, j, c) = (t.i as usize, t.j as usize, R::of(t.coeff));
            out[t.o as usize] += if bilinear {
                c * a.at(i, 0) * bb.at(j, 0)
            } else {
                c * a.at(i, 0)
            };
        }
        return;
    }
    // Each run of terms into one element is one pass over its lanes. Up to 64 outputs, the first
    // run into an element writes `0.0 + v` (the bits of adding to a zeroed element) instead of a
    // separate zero-fill pass.
    let mut seen = 0u64;
    each_run(
        terms,
        |t| t.o,
        |o, run| {
            let d = &mut out[o * b..(o + 1) * b];
            let first = n_out <= 64 && seen & (1 << o) == 0;
            if n_out <= 64 {
                seen |= 1 << o;
            }
            if bilinear {
                accumulate_run::<_, true>(d, first, run, |t| Contrib {
                    c: R::of(t.coeff),
                    p: a.src(t.i as usize, b),
                    q: bb.src(t.j as usize, b),
                });
            } else {
                accumulate_run::<_, false>(d, first, run, |t| Contrib {
                    c: R::of(t.coeff),
                    p: a.src(t.i as usize, b),
                    q: Src::One(R::ZERO),
                });
            }
        },
    );
    if n_out <= 64 {
        for e in (0..n_out).filter(|&e| seen & (1 << e) == 0) {
            out[e * b..(e + 1) * b]
                .iter_mut()
                .for_each(|x| *x = R::ZERO);
        }
    }
}

/// The terms of an op grouped by the input element they feed back into: `by_i` is `terms`
/// stably sorted by `i` (the adjoint of `a`), `by_j` stably sorted by `j` (the adjoint of `b`),
/// so each element's terms keep their order in `terms`.
pub(crate) fn group_terms(terms: &[Term], by_i: &mut Vec<Term>, by_j: &mut Vec<Term>) {
    by_i.clear();
    by_i.extend_from_slice(terms);
    by_i.sort_by_key(|t| t.i);
    by_j.clear();
    by_j.extend_from_slice(terms);
    by_j.sort_by_key(|t| t.j);
}

/// Structure-of-arrays VJP of a bilinear/linear op over all `b` lanes: accumulates into the
/// adjoint slices `da` / `db` (B lanes per element; `None` when that input needs no gradient).
/// `by_i` / `by_j` are the op's terms grouped by input element (see [`group_terms`]): each
/// element's terms are one pass over its lanes, added in term order. `fresh[k]` marks an adjoint
/// slice whose floats are stale, not yet written: each element's first term writes it (as if it
/// had been zeroed first) and elements no term reaches are zeroed.
#[allow(clippy::too_many_arguments)] // the two inputs, their adjoints, the terms and the width
pub(crate) fn terms_vjp<R: Real>(
    by_i: &[Term],
    by_j: &[Term],
    bilinear: bool,
    a: Strided<'_, R>,
    bb: Strided<'_, R>,
    g: &[R],
    da: Option<&mut [R]>,
    db: Option<&mut [R]>,
    b: usize,
    fresh: [bool; 2],
) {
    let go = |o: u32| Src::Lanes(&g[o as usize * b..(o as usize + 1) * b]);
    if let Some(da) = da {
        if bilinear {
            grouped_pass::<_, true>(
                da,
                fresh[0],
                by_i,
                |t| t.i,
                b,
                |t| Contrib {
                    c: R::of(t.coeff),
                    p: go(t.o),
                    q: bb.src(t.j as usize, b),
                },
            );
        } else {
            grouped_pass::<_, false>(
                da,
                fresh[0],
                by_i,
                |t| t.i,
                b,
                |t| Contrib {
                    c: R::of(t.coeff),
                    p: go(t.o),
                    q: Src::One(R::ZERO),
                },
            );
        }
    }
    if bilinear && let Some(db) = db {
        grouped_pass::<_, true>(
            db,
            fresh[1],
            by_j,
            |t| t.j,
            b,
            |t| Contrib {
                c: R::of(t.coeff),
                p: go(t.o),
                q: a.src(t.i as usize, b),
            },
        );
    }
}

/// The passes of [`terms_vjp`] into one adjoint slice `d` from its terms sorted by `key`; with
/// `fresh` the elements no term reaches are zeroed.
#[inline(always)]
fn grouped_pass<'a, R: Real, const BIL: bool>(
    d: &mut [R],
    fresh: bool,
    sorted: &[Term],
    key: impl Fn(&Term) -> u32,
    b: usize,
    contrib: impl Fn(&Term) -> Contrib<'a, R>,
) {
    let n = d.len() / b.max(1);
    // Elements below `next` have been written (or zeroed) when `fresh`.
    let mut next = 0;
    each_run(sorted, key, |e, run| {
        if fresh && e > next {
            d[next * b..e * b].fill(R::ZERO);
        }
        next = e + 1;
        accumulate_run::<_, BIL>(&mut d[e * b..(e + 1) * b], fresh, run, &contrib);
    });
    if fresh && n > next {
        d[next * b..n * b].fill(R::ZERO);
    }
}

#[cfg(test)]
mod soa_tests {
    use super::*;

    /// The term form of every bilinear/linear op equals its per-lane forward and VJP.
    #[test]
    fn terms_match_per_lane_forward_and_vjp() {
        let b = 3;
        let cases: [(TensorOp, usize, usize, usize); 8] = [
            (TensorOp::Dot, 3, 3, 1),
            (TensorOp::Cross, 3, 3, 3),
            (TensorOp::MatVec { m: 2, n: 3 }, 6, 3, 2),
            (TensorOp::MatMul { m: 2, k: 3, n: 2 }, 6, 6, 4),
            (TensorOp::Outer, 3, 2, 6),
            (TensorOp::Sum, 4, 0, 1),
            (TensorOp::Transpose { r: 2, c: 3 }, 6, 0, 6),
            (TensorOp::Trace { r: 2, c: 3 }, 6, 0, 1),
        ];
        for (op, na, nb, n_out) in cases {
            let a: Vec<f64> = (0..na * b)
                .map(|k| 0.3 + 0.17 * k as f64 - 0.01 * (k * k) as f64)
                .collect();
            let bv: Vec<f64> = (0..nb * b).map(|k| -0.8 + 0.23 * k as f64).collect();
            let g: Vec<f64> = (0..n_out * b).map(|k| 1.0 - 0.1 * k as f64).collect();
            let mut terms = Vec::new();
            op.terms(na, nb, &mut terms);
            let bil = op.is_bilinear();
            let sa = Strided {
                data: &a,
                w: b,
                s: 1,
            };
            let sb = Strided {
                data: &bv,
                w: b,
                s: 1,
            };
            let mut out = vec![0.0; n_out * b];
            terms_forward(&terms, bil, sa, sb, &mut out, b);
            let (mut by_i, mut by_j) = (Vec::new(), Vec::new());
            group_terms(&terms, &mut by_i, &mut by_j);
            let (mut da, mut db) = (vec![0.0; na * b], vec![0.0; nb * b]);
            terms_vjp(
                &by_i,
                &by_j,
                bil,
                sa,
                sb,
                &g,
                Some(&mut da),
                Some(&mut db),
                b,
                [false; 2],
            );
            // Stale (NaN) slices marked fresh give the same floats as zeroed ones.
            let (mut fa, mut fb) = (vec![f64::NAN; na * b], vec![f64::NAN; nb * b]);
            terms_vjp(
                &by_i,
                &by_j,
                bil,
                sa,
                sb,
                &g,
                Some(&mut fa),
                Some(&mut fb),
                b,
                [true; 2],
            );
            assert_eq!(fa, da, "{op:?} fresh da");
            assert_eq!(fb, db, "{op:?} fresh db");
            for l in 0..b {
                let la: Vec<f64> = (0..na).map(|e| a[e * b + l]).collect();
                let lb: Vec<f64> = (0..nb).map(|e| bv[e * b + l]).collect();
                let lg: Vec<f64> = (0..n_out).map(|e| g[e * b + l]).collect();
                let mut z = vec![0.0; n_out];
                op.forward(&la, &lb, &mut z);
                let (mut pa, mut pb) = (vec![0.0; na], vec![0.0; nb]);
                op.vjp(&la, &lb, &z, &lg, &mut pa, &mut pb);
                for e in 0..n_out {
                    assert!((z[e] - out[e * b + l]).abs() < 1e-12, "{op:?} forward");
                }
                for e in 0..na {
                    assert!((pa[e] - da[e * b + l]).abs() < 1e-12, "{op:?} da");
                }
                for e in 0..nb {
                    assert!((pb[e] - db[e * b + l]).abs() < 1e-12, "{op:?} db");
                }
            }
        }
    }
}

/// [`terms_forward`] on the listed lanes only (the others of `out` are left as they are).
pub(crate) fn terms_forward_masked<R: Real>(
    terms: &[Term],
    bilinear: bool,
    a: Strided<'_, R>,
    bb: Strided<'_, R>,
    out: &mut [R],
    b: usize,
    act: &[u32],
) {
    let n_out = out.len() / b;
    for e in 0..n_out {
        for &l in act {
            out[e * b + l as usize] = R::ZERO;
        }
    }
    for t in terms {
        let (o, i, j, c) = (t.o as usize, t.i as usize, t.j as usize, R::of(t.coeff));
        for &l in act {
            let l = l as usize;
            out[o * b + l] += if bilinear {
                c * a.at(i, l) * bb.at(j, l)
            } else {
                c * a.at(i, l)
            };
        }
    }
}

/// [`terms_vjp`] on the listed lanes only, accumulating in the same term order.
#[allow(clippy::too_many_arguments)] // mirrors `terms_vjp` plus the lane list
pub(crate) fn terms_vjp_masked<R: Real>(
    terms: &[Term],
    bilinear: bool,
    a: Strided<'_, R>,
    bb: Strided<'_, R>,
    g: &[R],
    mut da: Option<&mut [R]>,
    mut db: Option<&mut [R]>,
    b: usize,
    act: &[u32],
) {
    for t in terms {
        let (o, i, j, c) = (t.o as usize, t.i as usize, t.j as usize, R::of(t.coeff));
        for &l in act {
            let l = l as usize;
            let go = g[o * b + l];
            if let Some(da) = da.as_deref_mut() {
                da[i * b + l] += if bilinear {
                    c * go * bb.at(j, l)
                } else {
                    c * go
                };
            }
            if bilinear && let Some(db) = db.as_deref_mut() {
                db[j * b + l] += c * go * a.at(i, l);
            }
        }
    }
}

/// Structure-of-arrays VJP of det, logdet and inv over all `b` lanes of an m×m matrix, with the
/// same expressions (and order of accumulation) as [`TensorOp::vjp`] on one lane. `inv_or_z` is
/// A⁻¹ (det/logdet) or the output Z = A⁻¹ (inv); `z` is the scalar output for det. With `fresh`
/// the floats of `da` are stale and are written as if zeroed first (every element gets a term).
#[allow(clippy::too_many_arguments)] // the op, its three inputs, the adjoint and its flag, scratch
pub(crate) fn det_family_vjp<R: Real>(
    op: TensorOp,
    a: &[R],
    inv_or_z: &[R],
    z: &[R],
    g: &[R],
    da: &mut [R],
    fresh: bool,
    b: usize,
    s: &mut Vec<R>,
) {
    let two = matches!(
        op,
        TensorOp::Det { m: 2 } | TensorOp::LogDet { m: 2, .. } | TensorOp::Inv { m: 2 }
    );
    if b == 1 && two && !fresh {
        det_family_one2(op, a, inv_or_z, z, g, da, s);
    } else {
        crate::widest::with_widest_vectors(DetFamily {
            op,
            a,
            inv_or_z,
            z,
            g,
            da,
            fresh,
            b,
            s,
        });
    }
}

/// [`det_family_vjp`]'s lane loops, run in the widest vectors (`widest`).
struct DetFamily<'a, R: Real> {
    op: TensorOp,
    a: &'a [R],
    inv_or_z: &'a [R],
    z: &'a [R],
    g: &'a [R],
    da: &'a mut [R],
    fresh: bool,
    b: usize,
    s: &'a mut Vec<R>,
}

impl<R: Real> crate::widest::WideKernel for DetFamily<'_, R> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let DetFamily {
            op,
            a,
            inv_or_z,
            z,
            g,
            da,
            fresh,
            b,
            s,
        } = self;
        if fresh {
            det_family::<_, true>(op, a, inv_or_z, z, g, da, b, s);
        } else {
            det_family::<_, false>(op, a, inv_or_z, z, g, da, b, s);
        }
    }
}

/// [`det_family`] at one lane for a 2×2 matrix, on four floats held in registers: the same
/// expressions in the same order (the same bits).
#[inline]
fn det_family_one2<R: Real>(
    op: TensorOp,
    a: &[R],
    inv_or_z: &[R],
    z: &[R],
    g: &[R],
    da: &mut [R],
    s: &mut Vec<R>,
) {
    let t = [inv_or_z[0], inv_or_z[1], inv_or_z[2], inv_or_z[3]];
    let d = &mut da[..4];
    if let TensorOp::Inv { .. } = op {
        let [e0, e1, e2, e3] = inv2_vjp(t, [g[0], g[1], g[2], g[3]]);
        (d[0], d[1], d[2], d[3]) = (d[0] - e0, d[1] - e1, d[2] - e2, d[3] - e3);
        return;
    }
    let det = matches!(op, TensorOp::Det { .. });
    let planted = if crate::planted::is_planted(crate::planted::Bug::DetVjp) {
        R::of(1.01)
    } else {
        R::ONE
    };
    let g0 = g[0];
    for i in 0..2 {
        for j in 0..2 {
            let tv = t[j * 2 + i];
            let term = if det {
                // A singular matrix (non-finite A⁻¹) gets its cofactors below.
                let term = planted * g0 * z[0] * tv;
                if tv.is_finite() { term } else { R::ZERO }
            } else {
                g0 * tv
            };
            d[i * 2 + j] += term;
        }
    }
    if det {
        singular_det_lanes(2, a, inv_or_z, g, da, 1, s);
    }
}

/// The four sums `Σ_p Σ_q Zᵀ[i,p] G[p,q] Zᵀ[q,j]` (from 0, in that order) a 2×2 inverse's
/// adjoint subtracts, from its output `zz` and output adjoint `gg`.
#[inline(always)]
fn inv2_vjp<R: Real>(zz: [R; 4], gg: [R; 4]) -> [R; 4] {
    let entry = |i: usize, j: usize| {
        let mut s = R::ZERO;
        for p in 0..2 {
            let zt = zz[p * 2 + i];
            for q in 0..2 {
                s += zt * gg[p * 2 + q] * zz[j * 2 + q];
            }
        }
        s
    };
    [entry(0, 0), entry(0, 1), entry(1, 0), entry(1, 1)]
}

/// The inverse of the 2×2 matrix `[a0 a1; a2 a3]` in closed form, and its determinant: the
/// arithmetic of every 2×2 inverse the kernels compute.
#[inline(always)]
pub(crate) fn inv2<R: Real>([a0, a1, a2, a3]: [R; 4]) -> ([R; 4], R) {
    let d = a0 * a3 - a1 * a2;
    ([a3 / d, -a1 / d, -a2 / d, a0 / d], d)
}

/// The value an adjoint float holds before an accumulation: zero while it is stale (`FRESH`).
#[inline(always)]
fn stale_or<R: Real, const FRESH: bool>(d: R) -> R {
    if FRESH { R::ZERO } else { d }
}

/// [`det_family_vjp`] with the freshness of `da` fixed.
#[inline(always)]
#[allow(clippy::too_many_arguments)] // as det_family_vjp
fn det_family<R: Real, const FRESH: bool>(
    op: TensorOp,
    a: &[R],
    inv_or_z: &[R],
    z: &[R],
    g: &[R],
    da: &mut [R],
    b: usize,
    s: &mut Vec<R>,
) {
    match op {
        TensorOp::Det { m } | TensorOp::LogDet { m, .. } => {
            let m = m as usize;
            let det = matches!(op, TensorOp::Det { .. });
            if m == 2 && !crate::planted::is_planted(crate::planted::Bug::DetVjp) {
                if det {
                    det2_lanes::<_, FRESH, true>(inv_or_z, z, g, da, b);
                    singular_det_lanes(m, a, inv_or_z, g, da, b, s);
                } else {
                    det2_lanes::<_, FRESH, false>(inv_or_z, z, g, da, b);
                }
                return;
            }
            let g = &g[..b];
            for i in 0..m {
                for j in 0..m {
                    let d = &mut da[(i * m + j) * b..(i * m + j + 1) * b];
                    let t = &inv_or_z[(j * m + i) * b..(j * m + i + 1) * b];
                    if det {
                        let (z, t) = (&z[..b], &t[..b]);
                        if crate::planted::is_planted(crate::planted::Bug::DetVjp) {
                            let planted = R::of(1.01);
                            for l in 0..b {
                                let term = planted * g[l] * z[l] * t[l];
                                let term = if t[l].is_finite() { term } else { R::ZERO };
                                d[l] = stale_or::<_, FRESH>(d[l]) + term;
                            }
                            continue;
                        }
                        for l in 0..b {
                            // A singular lane (non-finite A⁻¹) gets its cofactors below. (The
                            // factor 1 of the planted bug's product is left out: `1 · g` is `g`.)
                            let term = g[l] * z[l] * t[l];
                            let term = if t[l].is_finite() { term } else { R::ZERO };
                            d[l] = stale_or::<_, FRESH>(d[l]) + term;
                        }
                    } else {
                        for l in 0..b {
                            d[l] = stale_or::<_, FRESH>(d[l]) + g[l] * t[l];
                        }
                    }
                }
            }
            if det {
                singular_det_lanes(m, a, inv_or_z, g, da, b, s);
            }
        }
        TensorOp::Inv { m: 2 } => {
            // All four elements in one pass over lanes, each summed as the general case does:
            // s = 0 + Σ_p Σ_q Zᵀ[i,p] G[p,q] Zᵀ[q,j], then d −= s.
            // Plain slicing (no closures), so the wide copies see every length.
            let (z0, z1, z2, z3) = (
                &inv_or_z[..b],
                &inv_or_z[b..2 * b],
                &inv_or_z[2 * b..3 * b],
                &inv_or_z[3 * b..4 * b],
            );
            let (g0, g1, g2, g3) = (&g[..b], &g[b..2 * b], &g[2 * b..3 * b], &g[3 * b..4 * b]);
            let (d0, rest) = da[..4 * b].split_at_mut(b);
            let (d1, rest) = rest.split_at_mut(b);
            let (d2, d3) = rest.split_at_mut(b);
            for l in 0..b {
                let zz = [z0[l], z1[l], z2[l], z3[l]];
                let gg = [g0[l], g1[l], g2[l], g3[l]];
                let [e0, e1, e2, e3] = inv2_vjp(zz, gg);
                d0[l] = stale_or::<_, FRESH>(d0[l]) - e0;
                d1[l] = stale_or::<_, FRESH>(d1[l]) - e1;
                d2[l] = stale_or::<_, FRESH>(d2[l]) - e2;
                d3[l] = stale_or::<_, FRESH>(d3[l]) - e3;
            }
        }
        TensorOp::Inv { m } => {
            let m = m as usize;
            let zz = inv_or_z;
            s.clear();
            s.resize(b, R::ZERO);
            for i in 0..m {
                for j in 0..m {
                    s.iter_mut().for_each(|x| *x = R::ZERO);
                    for p in 0..m {
                        let zt = &zz[(p * m + i) * b..(p * m + i + 1) * b];
                        for q in 0..m {
                            let gq = &g[(p * m + q) * b..(p * m + q + 1) * b];
                            let zq = &zz[(j * m + q) * b..(j * m + q + 1) * b];
                            for l in 0..b {
                                s[l] += zt[l] * gq[l] * zq[l];
                            }
                        }
                    }
                    let d = &mut da[(i * m + j) * b..(i * m + j + 1) * b];
                    for l in 0..b {
                        d[l] = stale_or::<_, FRESH>(d[l]) - s[l];
                    }
                }
            }
        }
        _ => {}
    }
}

/// The 2×2 det (`DET`) or logdet adjoint of [`det_family`] in one pass over the lanes: element
/// `(i, j)` gets `g·z·t[j,i]` (zero where `t[j,i]` is not finite), or `g·t[j,i]`, each element's
/// expression as the per-element passes form it (`g·z` is their common first product).
#[inline(always)]
fn det2_lanes<R: Real, const FRESH: bool, const DET: bool>(
    inv_or_z: &[R],
    z: &[R],
    g: &[R],
    da: &mut [R],
    b: usize,
) {
    let (g, z) = (&g[..b], &z[..if DET { b } else { 0 }]);
    // Plain slicing (no closures), so the wide copies see every length.
    let t = &inv_or_z[..4 * b];
    let (t0, t1, t2, t3) = (&t[..b], &t[b..2 * b], &t[2 * b..3 * b], &t[3 * b..]);
    let (d0, rest) = da[..4 * b].split_at_mut(b);
    let (d1, rest) = rest.split_at_mut(b);
    let (d2, d3) = rest.split_at_mut(b);
    // Element i·2 + j reads t[j·2 + i].
    let (t00, t01, t10, t11) = (t0, t2, t1, t3);
    for l in 0..b {
        let term = |tv: R| {
            if DET {
                let term = g[l] * z[l] * tv;
                if tv.is_finite() { term } else { R::ZERO }
            } else {
                g[l] * tv
            }
        };
        d0[l] = stale_or::<_, FRESH>(d0[l]) + term(t00[l]);
        d1[l] = stale_or::<_, FRESH>(d1[l]) + term(t01[l]);
        d2[l] = stale_or::<_, FRESH>(d2[l]) + term(t10[l]);
        d3[l] = stale_or::<_, FRESH>(d3[l]) + term(t11[l]);
    }
}

/// The term lists of the tensor ops a program uses, computed once per (op, input sizes).
#[derive(Clone, Debug, Default)]
pub(crate) struct TermCache {
    entries: Vec<(TensorOp, usize, usize, Vec<Term>)>,
}

impl TermCache {
    /// Bytes the cached term lists hold.
    pub(crate) fn bytes(&self) -> u64 {
        let terms: usize = self.entries.iter().map(|e| e.3.capacity()).sum();
        (terms * std::mem::size_of::<Term>()) as u64
    }

    /// The terms of `op` with inputs of `na` and `nb` elements; `None` when there are more
    /// than [`DIRECT_TERMS`] (the kernels loop directly; looked at on a miss only).
    pub(crate) fn get(&mut self, op: TensorOp, na: usize, nb: usize) -> Option<&[Term]> {
        let found = self
            .entries
            .iter()
            .position(|e| e.1 == na && e.2 == nb && e.0 == op);
        let i = match found {
            Some(i) => i,
            None => {
                if op.direct(na, nb, DIRECT_TERMS) {
                    return None;
                }
                if self.entries.len() >= 64 {
                    self.entries.clear();
                }
                let mut terms = Vec::new();
                op.terms(na, nb, &mut terms);
                self.entries.push((op, na, nb, terms));
                self.entries.len() - 1
            }
        };
        Some(&self.entries[i].3)
    }
}

/// Above this many terms a bilinear/linear op runs as direct loops over its operands instead of
/// a cached term list. A term is 24 bytes and the tape keeps three copies of a list (in order,
/// grouped by `i`, grouped by `j`), so 2¹⁶ terms cap one list at 1.5 MB (4.5 MB on the tape)
/// while every shape the seed programs use (Kalman's 4×4 products: 64 terms) stays far below;
/// the term count grows like the multiply-add count (n³ for a square matmul), so without a cap a
/// 1000×1000 matmul would need 24 GB of terms. The direct loops visit each element's terms in
/// list order, so both forms give the same bits and the threshold only trades speed for memory.
pub(crate) const DIRECT_TERMS: usize = 1 << 16;

impl TensorOp {
    /// The number of terms of a bilinear or linear op with inputs of `na` and `nb` elements
    /// (the length of [`TensorOp::terms`], computed without building it).
    pub(crate) fn term_count(self, na: usize, nb: usize) -> usize {
        match self {
            TensorOp::Dot | TensorOp::Sum => na,
            TensorOp::Cross => 6,
            TensorOp::MatVec { m, n } => m as usize * n as usize,
            TensorOp::MatMul { m, k, n } => m as usize * k as usize * n as usize,
            TensorOp::Outer => na.saturating_mul(nb),
            TensorOp::Transpose { r, c } => r as usize * c as usize,
            TensorOp::Trace { r, c } => r.min(c) as usize,
            _ => 0,
        }
    }

    /// Whether the op runs as direct loops (more than `threshold` terms; see [`DIRECT_TERMS`]).
    pub(crate) fn direct(self, na: usize, nb: usize, threshold: usize) -> bool {
        self.term_count(na, nb) > threshold
    }
}

/// Calls `f(o, i, j, coeff)` for each term of a bilinear/linear op without building the list.
/// The order may differ from [`TensorOp::terms`] across elements but never within one: the terms
/// into any output element `o`, and the terms that feed back into any `a` element `i` or `b`
/// element `j`, come in the order of the list (matmul runs row, inner index, column, so both
/// operands and the output are read along rows). Every kernel accumulates each element's terms
/// in that order, so running them from here gives the bits of the term list.
#[inline(always)]
pub(crate) fn each_term<R: Real>(
    op: TensorOp,
    na: usize,
    nb: usize,
    mut f: impl FnMut(usize, usize, usize, R),
) {
    match op {
        TensorOp::Dot => (0..na).for_each(|i| f(0, i, i, R::ONE)),
        TensorOp::Sum => (0..na).for_each(|i| f(0, i, 0, R::ONE)),
        TensorOp::Cross => {
            for (o, (p, q)) in [(1, 2), (2, 0), (0, 1)].into_iter().enumerate() {
                f(o, p, q, R::ONE);
                f(o, q, p, -R::ONE);
            }
        }
        TensorOp::MatVec { m, n } => {
            let (m, n) = (m as usize, n as usize);
            for r in 0..m {
                for c in 0..n {
                    f(r, r * n + c, c, R::ONE);
                }
            }
        }
        TensorOp::MatMul { m, k, n } => {
            let (m, k, n) = (m as usize, k as usize, n as usize);
            for r in 0..m {
                for s in 0..k {
                    for c in 0..n {
                        f(r * n + c, r * k + s, s * n + c, R::ONE);
                    }
                }
            }
        }
        TensorOp::Outer => {
            for r in 0..na {
                for c in 0..nb {
                    f(r * nb + c, r, c, R::ONE);
                }
            }
        }
        TensorOp::Transpose { r, c } => {
            let (r, c) = (r as usize, c as usize);
            for i in 0..r {
                for j in 0..c {
                    f(j * r + i, i * c + j, 0, R::ONE);
                }
            }
        }
        TensorOp::Trace { r, c } => {
            let (r, c) = (r as usize, c as usize);
            (0..r.min(c)).for_each(|i| f(0, i * c + i, 0, R::ONE));
        }
        _ => {}
    }
}

/// One term's value on one lane: `(c · p) · q`, or `c · p` for a linear op (`q` is `None`), the
/// expression every term kernel evaluates.
#[inline(always)]
fn direct_value<R: Real>(c: R, p: R, q: Option<R>) -> R {
    match q {
        Some(q) => c * p * q,
        None => c * p,
    }
}

/// The forward of a bilinear/linear op by direct loops ([`each_term`]), with the bits of
/// [`terms_forward`] (all lanes, `act` is `None`) or [`terms_forward_masked`] (the lanes in
/// `act`; the others of `out` are left as they are). Allocates nothing.
// Only ops past `DIRECT_TERMS` come here: kept out of line, off the small ops' hot paths.
#[inline(never)]
#[allow(clippy::too_many_arguments)] // the op and its sizes, the operands, the output, the lanes
pub(crate) fn direct_forward<R: Real>(
    op: TensorOp,
    na: usize,
    nb: usize,
    a: Strided<'_, R>,
    bb: Strided<'_, R>,
    out: &mut [R],
    b: usize,
    act: Option<&[u32]>,
) {
    let bil = op.is_bilinear();
    let n_out = out.len() / b.max(1);
    match act {
        None if b == 1 => {
            out.fill(R::ZERO);
            each_term(op, na, nb, |o, i, j, c| {
                out[o] += direct_value(c, a.at(i, 0), bil.then(|| bb.at(j, 0)));
            });
        }
        None => {
            out.fill(R::ZERO);
            each_term(op, na, nb, |o, i, j, c| {
                let d = &mut out[o * b..(o + 1) * b];
                let q = if bil { bb.src(j, b) } else { Src::One(R::ZERO) };
                let t = Contrib {
                    c,
                    p: a.src(i, b),
                    q,
                };
                if bil {
                    contrib_pass::<_, true, false>(d, &t);
                } else {
                    contrib_pass::<_, false, false>(d, &t);
                }
            });
        }
        Some(act) => {
            for e in 0..n_out {
                for &l in act {
                    out[e * b + l as usize] = R::ZERO;
                }
            }
            each_term(op, na, nb, |o, i, j, c| {
                for &l in act {
                    let l = l as usize;
                    out[o * b + l] += direct_value(c, a.at(i, l), bil.then(|| bb.at(j, l)));
                }
            });
        }
    }
}

/// The VJP of a bilinear/linear op by direct loops ([`each_term`]), with the bits of
/// [`terms_vjp`] (all lanes, `act` is `None`; `fresh[k]` marks an adjoint slice whose stale
/// floats are overwritten as if zeroed first) or [`terms_vjp_masked`] (the lanes in `act`,
/// accumulating into `da` / `db` as they are; `fresh` must then be false). Allocates nothing.
// Only ops past `DIRECT_TERMS` come here: kept out of line, off the small ops' hot paths.
#[inline(never)]
#[allow(clippy::too_many_arguments)] // mirrors `terms_vjp` plus the op, its sizes and the lanes
pub(crate) fn direct_vjp<R: Real>(
    op: TensorOp,
    na: usize,
    nb: usize,
    a: Strided<'_, R>,
    bb: Strided<'_, R>,
    g: &[R],
    mut da: Option<&mut [R]>,
    mut db: Option<&mut [R]>,
    b: usize,
    fresh: [bool; 2],
    act: Option<&[u32]>,
) {
    let bil = op.is_bilinear();
    if !bil {
        db = None;
    }
    if fresh[0]
        && let Some(d) = da.as_deref_mut()
    {
        d.fill(R::ZERO);
    }
    if fresh[1]
        && let Some(d) = db.as_deref_mut()
    {
        d.fill(R::ZERO);
    }
    if da.is_none() && db.is_none() {
        return;
    }
    match act {
        None if b == 1 => each_term(op, na, nb, |o, i, j, c| {
            let go = g[o];
            if let Some(da) = da.as_deref_mut() {
                da[i] += direct_value(c, go, bil.then(|| bb.at(j, 0)));
            }
            if let Some(db) = db.as_deref_mut() {
                db[j] += direct_value(c, go, Some(a.at(i, 0)));
            }
        }),
        None => each_term(op, na, nb, |o, i, j, c| {
            let go = Src::Lanes(&g[o * b..(o + 1) * b]);
            if let Some(da) = da.as_deref_mut() {
                let d = &mut da[i * b..(i + 1) * b];
                if bil {
                    let t = Contrib {
                        c,
                        p: go,
                        q: bb.src(j, b),
                    };
                    contrib_pass::<_, true, false>(d, &t);
                } else {
                    let t = Contrib {
                        c,
                        p: go,
                        q: Src::One(R::ZERO),
                    };
                    contrib_pass::<_, false, false>(d, &t);
                }
            }
            if let Some(db) = db.as_deref_mut() {
                let t = Contrib {
                    c,
                    p: go,
                    q: a.src(i, b),
                };
                contrib_pass::<_, true, false>(&mut db[j * b..(j + 1) * b], &t);
            }
        }),
        Some(act) => each_term(op, na, nb, |o, i, j, c| {
            for &l in act {
                let l = l as usize;
                let go = g[o * b + l];
                if let Some(da) = da.as_deref_mut() {
                    da[i * b + l] += direct_value(c, go, bil.then(|| bb.at(j, l)));
                }
                if let Some(db) = db.as_deref_mut() {
                    db[j * b + l] += direct_value(c, go, Some(a.at(i, l)));
                }
            }
        }),
    }
}

#[cfg(test)]
mod direct_tests {
    use super::*;

    /// Ops with input sizes, both small and with more terms than a 2×2 list.
    fn cases() -> Vec<(TensorOp, usize, usize, usize)> {
        vec![
            (TensorOp::Dot, 7, 7, 1),
            (TensorOp::Cross, 3, 3, 3),
            (TensorOp::MatVec { m: 5, n: 4 }, 20, 4, 5),
            (TensorOp::MatMul { m: 2, k: 3, n: 2 }, 6, 6, 4),
            (TensorOp::MatMul { m: 6, k: 5, n: 7 }, 30, 35, 42),
            (TensorOp::Outer, 6, 5, 30),
            (TensorOp::Sum, 9, 0, 1),
            (TensorOp::Transpose { r: 4, c: 6 }, 24, 0, 24),
            (TensorOp::Trace { r: 5, c: 3 }, 15, 0, 1),
        ]
    }

    /// `terms` stably sorted by `key`.
    fn sorted(terms: &[Term], key: impl Fn(&Term) -> u32) -> Vec<Term> {
        let mut v = terms.to_vec();
        v.sort_by_key(key);
        v
    }

    /// The generated terms are the list's terms, each element's in list order (so every kernel
    /// accumulates each element identically), and `term_count` is the list's length.
    #[test]
    fn each_term_keeps_every_elements_order() {
        for (op, na, nb, _) in cases() {
            let mut list = Vec::new();
            op.terms(na, nb, &mut list);
            let mut gen_ = Vec::new();
            each_term(op, na, nb, |o, i, j, coeff| {
                gen_.push(Term {
                    o: o as u32,
                    i: i as u32,
                    j: j as u32,
                    coeff,
                });
            });
            assert_eq!(op.term_count(na, nb), list.len(), "{op:?} count");
            assert_eq!(
                sorted(&gen_, |t| t.o),
                sorted(&list, |t| t.o),
                "{op:?} by o"
            );
            assert_eq!(
                sorted(&gen_, |t| t.i),
                sorted(&list, |t| t.i),
                "{op:?} by i"
            );
            assert_eq!(
                sorted(&gen_, |t| t.j),
                sorted(&list, |t| t.j),
                "{op:?} by j"
            );
        }
        assert!(
            TensorOp::MatMul {
                m: 40,
                k: 41,
                n: 40
            }
            .direct(1600, 1640, DIRECT_TERMS)
        );
        assert!(
            !TensorOp::MatMul {
                m: 40,
                k: 40,
                n: 40
            }
            .direct(1600, 1600, DIRECT_TERMS)
        );
    }

    /// Values whose sums round differently in different orders.
    fn values(n: usize, seed: f64) -> Vec<f64> {
        (0..n)
            .map(|k| {
                let x = (seed + 0.37 * k as f64).sin() * 10f64.powi((k % 7) as i32 - 3);
                if k % 11 == 5 { -0.0 } else { x }
            })
            .collect()
    }

    /// A payload's view: `b` lanes per element when `varying`, else one value for all.
    fn view(data: &[f64], varying: bool, b: usize) -> Strided<'_, f64> {
        Strided {
            data,
            w: if varying { b } else { 1 },
            s: usize::from(varying),
        }
    }

    fn bits(v: &[f64]) -> Vec<u64> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// The direct kernels give the bits of the term kernels: forward and VJP, all lanes and
    /// masked, fresh and accumulating adjoints, lanes-varying and uniform operands, B = 1 and 3.
    #[test]
    fn direct_kernels_equal_term_kernels_bit_for_bit() {
        for (op, na, nb, n_out) in cases() {
            let bil = op.is_bilinear();
            let nb = if bil { nb } else { 0 };
            let mut terms = Vec::new();
            op.terms(na, nb, &mut terms);
            let (mut by_i, mut by_j) = (Vec::new(), Vec::new());
            group_terms(&terms, &mut by_i, &mut by_j);
            for b in [1, 3] {
                for (va, vb) in [(true, true), (true, false), (false, true)] {
                    if b == 1 && !(va && vb) {
                        continue;
                    }
                    let a = values(na * if va { b } else { 1 }, 0.3);
                    let bv = values(nb * if vb { b } else { 1 }, 1.9);
                    let (sa, sb) = (view(&a, va, b), view(&bv, vb, b));
                    let what = format!("{op:?} b={b} varying=({va},{vb})");
                    // Forward, all lanes.
                    let (mut t_out, mut d_out) = (vec![7.0; n_out * b], vec![-3.0; n_out * b]);
                    terms_forward(&terms, bil, sa, sb, &mut t_out, b);
                    direct_forward(op, na, nb, sa, sb, &mut d_out, b, None);
                    assert_eq!(bits(&t_out), bits(&d_out), "{what} forward");
                    // Forward, masked: the other lanes keep their floats.
                    let act: &[u32] = if b == 3 { &[0, 2] } else { &[0] };
                    let (mut t_out, mut d_out) = (vec![7.0; n_out * b], vec![7.0; n_out * b]);
                    terms_forward_masked(&terms, bil, sa, sb, &mut t_out, b, act);
                    direct_forward(op, na, nb, sa, sb, &mut d_out, b, Some(act));
                    assert_eq!(bits(&t_out), bits(&d_out), "{what} masked forward");
                    // VJP: stale (fresh), accumulating, masked.
                    let g = values(n_out * b, 4.1);
                    let start_a = values(na * b, 2.2);
                    let start_b = values(nb * b, 5.7);
                    for mode in 0..3 {
                        let fresh = [mode == 0; 2];
                        let init = |s: &[f64]| {
                            if mode == 0 {
                                vec![f64::NAN; s.len()]
                            } else {
                                s.to_vec()
                            }
                        };
                        let (mut ta, mut tb) = (init(&start_a), init(&start_b));
                        let (mut da, mut db) = (init(&start_a), init(&start_b));
                        if mode == 2 {
                            terms_vjp_masked(
                                &terms,
                                bil,
                                sa,
                                sb,
                                &g,
                                Some(&mut ta),
                                Some(&mut tb),
                                b,
                                act,
                            );
                        } else {
                            terms_vjp(
                                &by_i,
                                &by_j,
                                bil,
                                sa,
                                sb,
                                &g,
                                Some(&mut ta),
                                Some(&mut tb),
                                b,
                                fresh,
                            );
                        }
                        let act = (mode == 2).then_some(act);
                        direct_vjp(
                            op,
                            na,
                            nb,
                            sa,
                            sb,
                            &g,
                            Some(&mut da),
                            Some(&mut db),
                            b,
                            fresh,
                            act,
                        );
                        assert_eq!(bits(&ta), bits(&da), "{what} mode {mode} da");
                        assert_eq!(bits(&tb), bits(&db), "{what} mode {mode} db");
                    }
                }
            }
        }
    }

    /// The det/logdet/inv VJP lane loops give their baseline bits at every width (singular
    /// lanes, non-finite adjoints, fresh and accumulating).
    #[test]
    fn det_family_vjp_gives_the_same_bits_at_every_width() {
        use crate::widest::{Width, assert_every_width_same_bits, run_at, test_values};
        let b = 37;
        for m in [2u16, 3] {
            let ops = [
                TensorOp::Det { m },
                TensorOp::LogDet { m, abs: false },
                TensorOp::LogDet { m, abs: true },
                TensorOp::Inv { m },
            ];
            let n = (m * m) as usize;
            let (a, inv, z, g) = (
                test_values(n * b, 11),
                test_values(n * b, 12),
                test_values(b, 13),
                test_values(n * b, 14),
            );
            let old = test_values(n * b, 15);
            for op in ops {
                for fresh in [false, true] {
                    assert_every_width_same_bits(&format!("{op:?} fresh {fresh}"), |w: Width| {
                        let (mut da, mut s) = (old.clone(), Vec::new());
                        run_at(
                            w,
                            DetFamily {
                                op,
                                a: &a,
                                inv_or_z: &inv,
                                z: &z,
                                g: &g,
                                da: &mut da,
                                fresh,
                                b,
                                s: &mut s,
                            },
                        );
                        da
                    });
                }
            }
        }
    }
}
