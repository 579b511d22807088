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
pub(crate) struct Strided<'a> {
    pub(crate) data: &'a [f64],
    pub(crate) w: usize,
    pub(crate) s: usize,
}

impl Strided<'_> {
    /// The B-lane slice of element `e` (`None` when the payload is uniform).
    #[inline]
    pub(crate) fn lanes(&self, e: usize, b: usize) -> Option<&[f64]> {
        (self.s == 1).then(|| &self.data[e * self.w..e * self.w + b])
    }

    #[inline]
    pub(crate) fn at(&self, e: usize, l: usize) -> f64 {
        self.data[e * self.w + l * self.s]
    }
}

/// Structure-of-arrays forward of a bilinear/linear op over all `b` lanes: `out` holds `n_out`
/// elements of `b` lanes each (zeroed here).
pub(crate) fn terms_forward(
    terms: &[Term],
    bilinear: bool,
    a: Strided<'_>,
    bb: Strided<'_>,
    out: &mut [f64],
    b: usize,
) {
    let n_out = out.len() / b.max(1);
    if b == 1 || n_out > 64 {
        out.iter_mut().for_each(|x| *x = 0.0);
    }
    if b == 1 {
        // One value per element: the same products and sums as below, without the lane slices.
        for t in terms {
            let (i, j, c) = (t.i as usize, t.j as usize, t.coeff);
            out[t.o as usize] += if bilinear {
                c * a.at(i, 0) * bb.at(j, 0)
            } else {
                c * a.at(i, 0)
            };
        }
        return;
    }
    // Up to 64 outputs, the first term into an element writes `0.0 + v` (the bits of adding to a
    // zeroed element) instead of a separate zero-fill pass.
    let mut seen = 0u64;
    for t in terms {
        let o = &mut out[t.o as usize * b..(t.o as usize + 1) * b];
        let first = n_out <= 64 && seen & (1 << t.o) == 0;
        if n_out <= 64 {
            seen |= 1 << t.o;
        }
        if first {
            term_pass::<true>(t, bilinear, a, bb, o, b);
        } else {
            term_pass::<false>(t, bilinear, a, bb, o, b);
        }
    }
    if n_out <= 64 {
        for e in (0..n_out).filter(|&e| seen & (1 << e) == 0) {
            out[e * b..(e + 1) * b].iter_mut().for_each(|x| *x = 0.0);
        }
    }
}

/// `o (+)= v` over lanes: `FIRST` writes `0.0 + v`, the bits of accumulating into a zero.
#[inline(always)]
fn put<const FIRST: bool>(o: &mut f64, v: f64) {
    if FIRST { *o = 0.0 + v } else { *o += v }
}

/// One term's pass of [`terms_forward`] over the `b` lanes of its output element `o`.
#[inline(always)]
fn term_pass<const FIRST: bool>(
    t: &Term,
    bilinear: bool,
    a: Strided<'_>,
    bb: Strided<'_>,
    o: &mut [f64],
    b: usize,
) {
    let (i, j, c) = (t.i as usize, t.j as usize, t.coeff);
    if !bilinear {
        match a.lanes(i, b) {
            Some(x) => o
                .iter_mut()
                .zip(x)
                .for_each(|(o, x)| put::<FIRST>(o, c * x)),
            None => o.iter_mut().for_each(|o| put::<FIRST>(o, c * a.at(i, 0))),
        }
        return;
    }
    match (a.lanes(i, b), bb.lanes(j, b)) {
        (Some(x), Some(y)) => o
            .iter_mut()
            .zip(x.iter().zip(y))
            .for_each(|(o, (x, y))| put::<FIRST>(o, c * x * y)),
        (Some(x), None) => {
            let y = bb.at(j, 0);
            o.iter_mut()
                .zip(x)
                .for_each(|(o, x)| put::<FIRST>(o, c * x * y));
        }
        (None, Some(y)) => {
            let x = c * a.at(i, 0);
            o.iter_mut()
                .zip(y)
                .for_each(|(o, y)| put::<FIRST>(o, x * y));
        }
        (None, None) => {
            let v = c * a.at(i, 0) * bb.at(j, 0);
            o.iter_mut().for_each(|o| put::<FIRST>(o, v));
        }
    }
}

/// Structure-of-arrays VJP of a bilinear/linear op over all `b` lanes: accumulates into the
/// adjoint slices `da` / `db` (B lanes per element; `None` when that input needs no gradient).
/// `fresh[k]` marks an adjoint slice whose floats are stale, not yet written: each element's
/// first term writes it (as if it had been zeroed first) and elements no term reaches are zeroed.
#[allow(clippy::too_many_arguments)] // the two inputs, their adjoints, the terms and the width
pub(crate) fn terms_vjp(
    terms: &[Term],
    bilinear: bool,
    a: Strided<'_>,
    bb: Strided<'_>,
    g: &[f64],
    mut da: Option<&mut [f64]>,
    mut db: Option<&mut [f64]>,
    b: usize,
    fresh: [bool; 2],
) {
    // Bit e of `pending[k]`: element e of that slice is stale (up to 64 elements, else zeroed).
    let mut pending = [0u64; 2];
    for (k, d) in [da.as_deref_mut(), db.as_deref_mut()]
        .into_iter()
        .enumerate()
    {
        if let Some(d) = d
            && fresh[k]
        {
            match d.len() / b.max(1) {
                64 => pending[k] = u64::MAX,
                n if n < 64 => pending[k] = (1 << n) - 1,
                _ => d.fill(0.0),
            }
        }
    }
    let mut first = |k: usize, e: usize| {
        let f = e < 64 && pending[k] >> e & 1 != 0;
        if f {
            pending[k] &= !(1 << e);
        }
        f
    };
    for t in terms {
        let go = &g[t.o as usize * b..(t.o as usize + 1) * b];
        let (i, j, c) = (t.i as usize, t.j as usize, t.coeff);
        if let Some(da) = da.as_deref_mut() {
            let d = &mut da[i * b..(i + 1) * b];
            let f = first(0, i);
            if !bilinear {
                d.iter_mut()
                    .zip(go)
                    .for_each(|(d, g)| *d = stale_or(f, *d) + c * g);
            } else {
                match bb.lanes(j, b) {
                    Some(y) => d
                        .iter_mut()
                        .zip(go.iter().zip(y))
                        .for_each(|(d, (g, y))| *d = stale_or(f, *d) + c * g * y),
                    None => {
                        let y = bb.at(j, 0);
                        d.iter_mut()
                            .zip(go)
                            .for_each(|(d, g)| *d = stale_or(f, *d) + c * g * y);
                    }
                }
            }
        }
        if bilinear && let Some(db) = db.as_deref_mut() {
            let d = &mut db[j * b..(j + 1) * b];
            let f = first(1, j);
            match a.lanes(i, b) {
                Some(x) => d
                    .iter_mut()
                    .zip(go.iter().zip(x))
                    .for_each(|(d, (g, x))| *d = stale_or(f, *d) + c * g * x),
                None => {
                    let x = a.at(i, 0);
                    d.iter_mut()
                        .zip(go)
                        .for_each(|(d, g)| *d = stale_or(f, *d) + c * g * x);
                }
            }
        }
    }
    for (k, d) in [da, db].into_iter().enumerate() {
        if let Some(d) = d {
            let mut left = pending[k];
            while left != 0 {
                let e = left.trailing_zeros() as usize;
                left &= left - 1;
                d[e * b..(e + 1) * b].fill(0.0);
            }
        }
    }
}

/// The value an adjoint float holds before an accumulation: zero while it is stale (`fresh`).
#[inline(always)]
fn stale_or(fresh: bool, d: f64) -> f64 {
    if fresh { 0.0 } else { d }
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
            let (mut da, mut db) = (vec![0.0; na * b], vec![0.0; nb * b]);
            terms_vjp(
                &terms,
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
                &terms,
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
pub(crate) fn terms_forward_masked(
    terms: &[Term],
    bilinear: bool,
    a: Strided<'_>,
    bb: Strided<'_>,
    out: &mut [f64],
    b: usize,
    act: &[u32],
) {
    let n_out = out.len() / b;
    for e in 0..n_out {
        for &l in act {
            out[e * b + l as usize] = 0.0;
        }
    }
    for t in terms {
        let (o, i, j, c) = (t.o as usize, t.i as usize, t.j as usize, t.coeff);
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
pub(crate) fn terms_vjp_masked(
    terms: &[Term],
    bilinear: bool,
    a: Strided<'_>,
    bb: Strided<'_>,
    g: &[f64],
    mut da: Option<&mut [f64]>,
    mut db: Option<&mut [f64]>,
    b: usize,
    act: &[u32],
) {
    for t in terms {
        let (o, i, j, c) = (t.o as usize, t.i as usize, t.j as usize, t.coeff);
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
pub(crate) fn det_family_vjp(
    op: TensorOp,
    inv_or_z: &[f64],
    z: &[f64],
    g: &[f64],
    da: &mut [f64],
    fresh: bool,
    b: usize,
    s: &mut Vec<f64>,
) {
    match op {
        TensorOp::Det { m } | TensorOp::LogDet { m, .. } => {
            let m = m as usize;
            let det = matches!(op, TensorOp::Det { .. });
            for i in 0..m {
                for j in 0..m {
                    let d = &mut da[(i * m + j) * b..(i * m + j + 1) * b];
                    let t = &inv_or_z[(j * m + i) * b..(j * m + i + 1) * b];
                    if det {
                        for l in 0..b {
                            d[l] = stale_or(fresh, d[l]) + g[l] * z[l] * t[l];
                        }
                    } else {
                        for l in 0..b {
                            d[l] = stale_or(fresh, d[l]) + g[l] * t[l];
                        }
                    }
                }
            }
        }
        TensorOp::Inv { m } => {
            let m = m as usize;
            let zz = inv_or_z;
            s.clear();
            s.resize(b, 0.0);
            for i in 0..m {
                for j in 0..m {
                    s.iter_mut().for_each(|x| *x = 0.0);
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
                        d[l] = stale_or(fresh, d[l]) - s[l];
                    }
                }
            }
        }
        _ => {}
    }
}

/// The term lists of the tensor ops a program uses, computed once per (op, input sizes).
#[derive(Clone, Debug, Default)]
pub(crate) struct TermCache {
    entries: Vec<(TensorOp, usize, usize, Vec<Term>)>,
}

impl TermCache {
    /// The terms of `op` with inputs of `na` and `nb` elements.
    pub(crate) fn get(&mut self, op: TensorOp, na: usize, nb: usize) -> &[Term] {
        let found = self
            .entries
            .iter()
            .position(|e| e.1 == na && e.2 == nb && e.0 == op);
        let i = match found {
            Some(i) => i,
            None => {
                if self.entries.len() >= 64 {
                    self.entries.clear();
                }
                let mut terms = Vec::new();
                op.terms(na, nb, &mut terms);
                self.entries.push((op, na, nb, terms));
                self.entries.len() - 1
            }
        };
        &self.entries[i].3
    }
}
