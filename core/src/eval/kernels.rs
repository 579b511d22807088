//! Numeric kernels shared by the walk and the trace replay: each fills one freshly allocated
//! payload from its inputs on the lanes of a mask, so a replayed node computes exactly what the
//! walk computed (the same code, hence the same bits).

#![allow(clippy::needless_range_loop)] // lane loops over pre-sliced operands vectorise

use crate::lanes::{Lanes, PayloadId};
use crate::linalg::{self, TensorOp, TermCache};
use crate::mask::{LaneMask, MaskId};
use crate::prims::{Binary, Unary, each_binary, each_unary};
use crate::real::Real;
use crate::smallmat;

const LANE_ZERO: [u32; 1] = [0];

/// The lanes a result is computed on: the mask's lanes for a varying result, lane 0 for a
/// uniform one.
#[inline]
pub(crate) fn compute_lanes(masks: &LaneMask, mask: MaskId, varying: bool) -> &[u32] {
    if varying {
        masks.lanes(mask)
    } else {
        &LANE_ZERO
    }
}

/// `out = op(a)` elementwise (same element count and lane layout as `a`).
pub(crate) fn unary<R: Real>(
    lanes: &mut Lanes<R>,
    masks: &LaneMask,
    mask: MaskId,
    op: Unary,
    out: PayloadId,
    a: PayloadId,
) {
    let ma = lanes.meta(a);
    let mo = lanes.meta(out);
    let b = lanes.n_lanes();
    let n = ma.n as usize;
    let (src, dst) = lanes.data.split_at_mut(mo.off as usize);
    let src = &src[ma.off as usize..];
    if !ma.varying {
        for e in 0..n {
            dst[e] = op.apply(src[e]);
        }
    } else if mask == MaskId::FULL {
        if op.apply_elementary_lanes(&src[..n * b], &mut dst[..n * b]) {
            return;
        }
        each_unary!(op, op => {
            for (d, s) in dst[..n * b].iter_mut().zip(&src[..n * b]) {
                *d = op.apply(*s);
            }
        });
    } else {
        for e in 0..n {
            for &l in masks.lanes(mask) {
                let i = e * b + l as usize;
                dst[i] = op.apply(src[i]);
            }
        }
    }
}

/// `out = op(a, b)` elementwise, a one-element operand broadcast over the other's elements.
pub(crate) fn binary<R: Real>(
    lanes: &mut Lanes<R>,
    masks: &LaneMask,
    mask: MaskId,
    op: Binary,
    out: PayloadId,
    a: PayloadId,
    bq: PayloadId,
) {
    let ma = lanes.meta(a);
    let mb = lanes.meta(bq);
    let mo = lanes.meta(out);
    let varying = ma.varying || mb.varying;
    let n = mo.n as usize;
    let b = lanes.n_lanes();
    let (src, dst) = lanes.data.split_at_mut(mo.off as usize);
    let wa = if ma.varying { b } else { 1 };
    let wb = if mb.varying { b } else { 1 };
    if !varying || (b == 1 && mask == MaskId::FULL) {
        // One value per element (uniform, or a single lane): a plain scalar loop.
        let (sa, sb) = (usize::from(ma.n != 1), usize::from(mb.n != 1));
        let (oa, ob) = (ma.off as usize, mb.off as usize);
        for (e, d) in dst[..n].iter_mut().enumerate() {
            *d = op.apply(src[oa + e * sa], src[ob + e * sb]);
        }
        return;
    }
    if mask == MaskId::FULL {
        if op == Binary::Pow {
            // `pow` vectorises in wider vectors (f32's own `pow`); the arithmetic ops measured
            // no faster there (memory-bound), so they stay in the baseline loop.
            crate::widest::with_widest_vectors(FullLanes {
                op,
                src,
                dst,
                metas: (ma, mb),
                n,
                b,
            });
        } else {
            full_lanes(op, src, dst, (ma, mb), n, b);
        }
        return;
    }
    for e in 0..n {
        let ea = if ma.n == 1 { 0 } else { e };
        let eb = if mb.n == 1 { 0 } else { e };
        let xa = &src[ma.off as usize + ea * wa..ma.off as usize + ea * wa + wa];
        let xb = &src[mb.off as usize + eb * wb..mb.off as usize + eb * wb + wb];
        let d = &mut dst[e * b..(e + 1) * b];
        for &l in masks.lanes(mask) {
            let l = l as usize;
            let p = if ma.varying { xa[l] } else { xa[0] };
            let q = if mb.varying { xb[l] } else { xb[0] };
            d[l] = op.apply(p, q);
        }
    }
}

/// [`full_lanes`]' arguments, as the kernel `widest` compiles in wider vectors (the same
/// operations: the same bits).
struct FullLanes<'a, R: Real> {
    op: Binary,
    src: &'a [R],
    dst: &'a mut [R],
    metas: (crate::lanes::Meta, crate::lanes::Meta),
    n: usize,
    b: usize,
}

impl<R: Real> crate::widest::WideKernel for FullLanes<'_, R> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        full_lanes(self.op, self.src, self.dst, self.metas, self.n, self.b);
    }
}

/// [`binary`] of a varying result on every lane (`dst` the output's `n` elements of `b` lanes):
/// one pass over all of them when both inputs are varying and as long, else one per element.
#[inline(always)]
fn full_lanes<R: Real>(
    op: Binary,
    src: &[R],
    dst: &mut [R],
    (ma, mb): (crate::lanes::Meta, crate::lanes::Meta),
    n: usize,
    b: usize,
) {
    let (oa, ob) = (ma.off as usize, mb.off as usize);
    each_binary!(op, op => {
        if ma.varying && mb.varying && ma.n == mb.n {
            let len = n * b;
            let (d, x, y) = (&mut dst[..len], &src[oa..][..len], &src[ob..][..len]);
            for i in 0..len {
                d[i] = op.apply(x[i], y[i]);
            }
            return;
        }
        let (wa, wb) = (if ma.varying { b } else { 1 }, if mb.varying { b } else { 1 });
        for e in 0..n {
            let d = &mut dst[e * b..][..b];
            let xa = &src[oa + if ma.n == 1 { 0 } else { e * wa }..][..wa];
            let xb = &src[ob + if mb.n == 1 { 0 } else { e * wb }..][..wb];
            match (ma.varying, mb.varying) {
                (true, true) => {
                    let (xa, xb) = (&xa[..b], &xb[..b]);
                    for l in 0..b {
                        d[l] = op.apply(xa[l], xb[l]);
                    }
                }
                (true, false) => {
                    let (xa, y) = (&xa[..b], xb[0]);
                    for l in 0..b {
                        d[l] = op.apply(xa[l], y);
                    }
                }
                _ => {
                    let (x, xb) = (xa[0], &xb[..b]);
                    for l in 0..b {
                        d[l] = op.apply(x, xb[l]);
                    }
                }
            }
        }
    });
}

/// `out = x` on lanes `xm`, `y` on lanes `ym` (`out` is varying).
pub(crate) fn select<R: Real>(
    lanes: &mut Lanes<R>,
    masks: &LaneMask,
    out: PayloadId,
    x: PayloadId,
    xm: MaskId,
    y: PayloadId,
    ym: MaskId,
) {
    let n = lanes.n_elems(out);
    for (src, m) in [(x, xm), (y, ym)] {
        for &l in masks.lanes(m) {
            for e in 0..n {
                let v = lanes.at(src, e, l as usize);
                lanes.put(out, e, l as usize, v);
            }
        }
    }
}

/// `out = src` (the same shape) on the lanes of a mask.
pub(crate) fn copy<R: Real>(
    lanes: &mut Lanes<R>,
    masks: &LaneMask,
    mask: MaskId,
    out: PayloadId,
    src: PayloadId,
) {
    let (mo, ms) = (lanes.meta(out), lanes.meta(src));
    let w = if mo.varying { lanes.n_lanes() } else { 1 };
    let (so, oo, n) = (ms.off as usize, mo.off as usize, mo.n as usize);
    if !mo.varying || mask == MaskId::FULL {
        lanes.data.copy_within(so..so + n * w, oo);
        return;
    }
    for e in 0..n {
        for &l in masks.lanes(mask) {
            let l = l as usize;
            lanes.data[oo + e * w + l] = lanes.data[so + e * w + l];
        }
    }
}

/// `out` = the elements of `parts`, one after another.
pub(crate) fn concat<R: Real>(
    lanes: &mut Lanes<R>,
    masks: &LaneMask,
    mask: MaskId,
    out: PayloadId,
    parts: &[PayloadId],
) {
    let act = compute_lanes(masks, mask, lanes.is_varying(out));
    let mut e0 = 0;
    for &p in parts {
        let k = lanes.n_elems(p);
        for e in 0..k {
            for &l in act {
                let x = lanes.at(p, e, l as usize);
                lanes.put(out, e0 + e, l as usize, x);
            }
        }
        e0 += k;
    }
}

/// `out` = elements `start ..` of `a`.
pub(crate) fn gather<R: Real>(
    lanes: &mut Lanes<R>,
    masks: &LaneMask,
    mask: MaskId,
    out: PayloadId,
    a: PayloadId,
    start: usize,
) {
    let act = compute_lanes(masks, mask, lanes.is_varying(out));
    for e in 0..lanes.n_elems(out) {
        for &l in act {
            let x = lanes.at(a, start + e, l as usize);
            lanes.put(out, e, l as usize, x);
        }
    }
}

/// A per-lane tensor op (not the determinant family) into `out`.
#[allow(clippy::too_many_arguments)] // the arenas and scratch a kernel needs, spelled out
pub(crate) fn tensor<R: Real>(
    lanes: &mut Lanes<R>,
    masks: &LaneMask,
    mask: MaskId,
    term_cache: &mut TermCache,
    bufs: &mut [Vec<R>; 5],
    op: TensorOp,
    out: PayloadId,
    a: PayloadId,
    b: Option<PayloadId>,
) {
    let ma = lanes.meta(a);
    let mb = b.map(|b| lanes.meta(b));
    let mo = lanes.meta(out);
    let varying = mo.varying;
    let n_out = mo.n as usize;
    if op.is_bilinear() || op.is_linear() {
        // Structure-of-arrays path: one pass per term over contiguous lanes.
        let nl = if varying { lanes.n_lanes() } else { 1 };
        let (na, nb) = (ma.n as usize, mb.map_or(0, |m| m.n as usize));
        let oo = mo.off as usize;
        let (src, dst) = lanes.data.split_at_mut(oo);
        let view = |m: crate::lanes::Meta| linalg::Strided {
            data: &src[m.off as usize..],
            w: if m.varying { nl } else { 1 },
            s: usize::from(m.varying),
        };
        let sa = view(ma);
        let sb = mb.map_or(
            linalg::Strided {
                data: &[],
                w: 0,
                s: 0,
            },
            view,
        );
        let dst = &mut dst[..n_out * nl];
        let all = !varying || mask == MaskId::FULL;
        if all
            && nl > 1
            && let Some(mb) = mb
            && ma.varying
            && mb.varying
            && let Some(d) = smallmat::dims(op, na, nb)
        {
            // A small product over every lane: one pass (the same bits as its terms).
            let a = &src[ma.off as usize..][..na * nl];
            let b = &src[mb.off as usize..][..nb * nl];
            smallmat::forward(d, a, b, dst, nl);
            return;
        }
        let Some(terms) = term_cache.get(op, na, nb) else {
            // Too many terms to list: direct loops, O(output) memory, the same bits.
            let act = (!all).then(|| masks.lanes(mask));
            linalg::direct_forward(op, na, nb, sa, sb, dst, nl, act);
            return;
        };
        if all {
            linalg::terms_forward(terms, op.is_bilinear(), sa, sb, dst, nl);
        } else {
            let act = masks.lanes(mask);
            linalg::terms_forward_masked(terms, op.is_bilinear(), sa, sb, dst, nl, act);
        }
        return;
    }
    let [ba, bb, bo, ..] = bufs;
    ba.resize(ma.n as usize, R::ZERO);
    bb.resize(mb.map_or(0, |m| m.n as usize), R::ZERO);
    bo.resize(n_out, R::ZERO);
    let nl = lanes.n_lanes();
    let stride = |m: crate::lanes::Meta| {
        if m.varying {
            (m.off as usize, nl, 1)
        } else {
            (m.off as usize, 1, 0)
        }
    };
    let (ao, aw, al) = stride(ma);
    let (bo_, bw, bl) = mb.map_or((0, 0, 0), stride);
    let (oo, ow, ol) = stride(mo);
    for &l in compute_lanes(masks, mask, varying) {
        let l = l as usize;
        let data = &lanes.data;
        for (e, x) in ba.iter_mut().enumerate() {
            *x = data[ao + e * aw + l * al];
        }
        for (e, x) in bb.iter_mut().enumerate() {
            *x = data[bo_ + e * bw + l * bl];
        }
        op.forward(ba, bb, bo);
        let data = &mut lanes.data;
        for (e, &x) in bo.iter().enumerate() {
            data[oo + e * ow + l * ol] = x;
        }
    }
}

/// The inverse of the `m`×`m` matrix `a` into `inv` and its determinant into `det`.
#[allow(clippy::too_many_arguments)] // the arenas and scratch a kernel needs, spelled out
pub(crate) fn det_inv<R: Real>(
    lanes: &mut Lanes<R>,
    masks: &LaneMask,
    mask: MaskId,
    bufs: &mut [Vec<R>; 5],
    m: usize,
    a: PayloadId,
    inv: PayloadId,
    det: PayloadId,
) {
    let ma = lanes.meta(a);
    let [ba, bi, bw, ..] = bufs;
    ba.resize(m * m, R::ZERO);
    bi.resize(m * m, R::ZERO);
    bw.resize(m * m, R::ZERO);
    if m == 2 && ma.varying && mask == MaskId::FULL {
        // Closed-form 2×2 over contiguous lanes (the same expressions as `det_inv`).
        let nl = lanes.n_lanes();
        let (ao, io, dof) = (
            ma.off as usize,
            lanes.meta(inv).off as usize,
            lanes.meta(det).off as usize,
        );
        let data = &mut lanes.data;
        // Three distinct payloads, so disjoint views (and lane loops without bounds checks).
        let [a, inv, det] = data
            .get_disjoint_mut([ao..ao + 4 * nl, io..io + 4 * nl, dof..dof + nl])
            .expect("distinct payloads are disjoint");
        let (a0, a) = a.split_at(nl);
        let (a1, a) = a.split_at(nl);
        let (a2, a3) = a.split_at(nl);
        let (i0, inv) = inv.split_at_mut(nl);
        let (i1, inv) = inv.split_at_mut(nl);
        let (i2, i3) = inv.split_at_mut(nl);
        crate::widest::with_widest_vectors(Inv2Lanes {
            a: [a0, a1, a2, a3],
            inv: [i0, i1, i2, i3],
            det,
        });
    } else {
        for &l in compute_lanes(masks, mask, ma.varying) {
            let l = l as usize;
            for (e, x) in ba.iter_mut().enumerate() {
                *x = lanes.at(a, e, l);
            }
            let d = linalg::det_inv(ba, m, bi, bw);
            for (e, &x) in bi.iter().enumerate() {
                lanes.put(inv, e, l, x);
            }
            lanes.put(det, 0, l, d);
        }
    }
}

/// [`det_inv`]'s closed-form 2×2 loop over contiguous lanes (element-major), run in the widest
/// vectors (`widest`).
struct Inv2Lanes<'a, R: Real> {
    a: [&'a [R]; 4],
    inv: [&'a mut [R]; 4],
    det: &'a mut [R],
}

impl<R: Real> crate::widest::WideKernel for Inv2Lanes<'_, R> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let Inv2Lanes { a, inv, det } = self;
        let nl = det.len();
        let [a0, a1, a2, a3] = a.map(|x| &x[..nl]);
        let [i0, i1, i2, i3] = inv.map(|x| &mut x[..nl]);
        for l in 0..nl {
            let (inv, d) = linalg::inv2([a0[l], a1[l], a2[l], a3[l]]);
            [i0[l], i1[l], i2[l], i3[l]] = inv;
            det[l] = d;
        }
    }
}

/// `out = log det` (or `log |det|` when `abs`) from a determinant payload.
pub(crate) fn log_det<R: Real>(
    lanes: &mut Lanes<R>,
    masks: &LaneMask,
    mask: MaskId,
    det: PayloadId,
    out: PayloadId,
    abs: bool,
) {
    for &l in compute_lanes(masks, mask, lanes.is_varying(out)) {
        let d = lanes.at(det, 0, l as usize);
        let x = if abs { d.abs().ln() } else { d.ln() };
        lanes.put(out, 0, l as usize, x);
    }
}

/// `out` = the `soft-choice` of the options `opts` (scalars) by `logits` (k elements) with
/// `noise` (k, uniform) at the temperature `tau` (a scalar payload): the softmax blend, or (`hard`)
/// the option of the largest z, copied exactly. `wts` (k + 1 elements) receives softmax(z) and,
/// as element k, the pick, for the adjoint and the read-out: the arithmetic of
/// [`crate::tape::choice_weights`], which a lane whose logits equal the previous active lane's
/// copies instead of recomputing (a start's data points share its logits).
#[allow(clippy::too_many_arguments)] // the payloads of one choice, spelled out
pub(crate) fn choice<R: Real>(
    lanes: &mut Lanes<R>,
    masks: &LaneMask,
    mask: MaskId,
    out: PayloadId,
    wts: PayloadId,
    (logits, noise, tau): (PayloadId, PayloadId, PayloadId),
    opts: &[PayloadId],
    hard: bool,
    w: &mut Vec<R>,
) {
    let b = lanes.n_lanes();
    let k = opts.len();
    let t = lanes.at(tau, 0, 0);
    let act = compute_lanes(masks, mask, lanes.is_varying(out));
    let at = |m: crate::lanes::Meta| {
        let (w, s) = if m.varying { (b, 1) } else { (1, 0) };
        (m.off as usize, w, s)
    };
    let (lo, lw, ls) = at(lanes.meta(logits));
    let (wo, ww, ws) = at(lanes.meta(wts));
    let no = lanes.meta(noise).off as usize;
    let (oo, _, os) = at(lanes.meta(out));
    let (data, meta) = (&mut lanes.data, &lanes.meta);
    let mut prev: Option<usize> = None;
    for &l in act {
        let l = l as usize;
        let same = prev.is_some_and(|p| {
            ls == 0 || (0..k).all(|i| data[lo + i * lw + p] == data[lo + i * lw + l])
        });
        if let (true, Some(p)) = (same, prev) {
            for i in 0..=k {
                data[wo + i * ww + l * ws] = data[wo + i * ww + p * ws];
            }
        } else {
            let z = |i: usize| (data[lo + i * lw + l * ls] + data[no + i]) / t;
            let j = crate::tape::softmax_into(k, z, w);
            for i in 0..k {
                data[wo + i * ww + l * ws] = w[i];
            }
            data[wo + k * ww + l * ws] = R::of_usize(j);
        }
        prev = Some(l);
        let v = if hard {
            let j = data[wo + k * ww + l * ws].f64() as usize;
            first_elem(data, meta, opts[j], l)
        } else {
            let mut s = R::ZERO;
            for (i, &p) in opts.iter().enumerate() {
                s += data[wo + i * ww + l * ws] * first_elem(data, meta, p, l);
            }
            s
        };
        data[oo + l * os] = v;
    }
}

/// Element 0 of payload `p` on lane `l`.
#[inline]
fn first_elem<R: Real>(data: &[R], meta: &[crate::lanes::Meta], p: PayloadId, l: usize) -> R {
    let m = meta[p.0 as usize];
    data[m.off as usize + if m.varying { l } else { 0 }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::widest::{Width, assert_every_width_same_bits, run_at, test_values};

    /// The closed-form 2×2 inverse over lanes gives its baseline bits at every width.
    #[test]
    fn inverse_lanes_give_the_same_bits_at_every_width() {
        let nl = 37;
        let a = test_values(4 * nl, 21);
        assert_every_width_same_bits("inv2 lanes", |w: Width| {
            let (mut inv, mut det) = (vec![0.0; 4 * nl], vec![0.0; nl]);
            let [i0, i1, i2, i3] = inv
                .chunks_exact_mut(nl)
                .collect::<Vec<_>>()
                .try_into()
                .unwrap();
            let a = [0, 1, 2, 3].map(|e| &a[e * nl..(e + 1) * nl]);
            run_at(
                w,
                Inv2Lanes {
                    a,
                    inv: [i0, i1, i2, i3],
                    det: &mut det,
                },
            );
            [inv, det].concat()
        });
    }
}
