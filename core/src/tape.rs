//! `Tape`: the append-only record of the executed trace, and the reverse sweep that turns it into
//! per-lane adjoints. Each node refers only to earlier payloads and replays only on the lanes that
//! were active when it was recorded, so a dead lane's Inf/NaN is never read.

#![allow(clippy::needless_range_loop)] // index arithmetic mirrors the maths

use crate::lanes::{Lanes, PayloadId};
use crate::linalg::{Strided, TensorOp, TermCache, det_family_vjp, terms_vjp, terms_vjp_masked};
use crate::mask::{LaneMask, MaskId};
use crate::prims::{Binary, Unary, each_binary, each_unary};

/// What a tape node computed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum TapeOp {
    /// out = f(a), elementwise.
    Unary(Unary),
    /// out = f(a, b), elementwise with scalar broadcast.
    Binary(Binary),
    /// out = a on `then` lanes, b on the node's (else) lanes.
    Select { then: MaskId },
    /// out = concatenation of the payloads listed at `extra[start..start+len]`.
    Concat { start: u32, len: u32 },
    /// out = a[start .. start + out.n].
    Gather { start: u32 },
    /// Per-lane tensor op; `b` is the second input (or the kept inverse for det/logdet).
    Tensor(TensorOp),
}

/// One recorded operation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TapeNode {
    pub(crate) op: TapeOp,
    pub(crate) out: PayloadId,
    pub(crate) a: PayloadId,
    pub(crate) b: PayloadId,
    pub(crate) mask: MaskId,
}

/// The tape of one recorded run plus the adjoint arena of its reverse sweep.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tape {
    pub(crate) nodes: Vec<TapeNode>,
    pub(crate) extra: Vec<PayloadId>,
    adj: Vec<f64>,
    adj_off: Vec<u32>,
    bufs: [Vec<f64>; 6],
    term_cache: TermCache,
}

/// The contribution `g · d` of one adjoint step; a zero adjoint contributes exactly zero, so a
/// dead path's infinite partial derivative never turns into NaN (0 · ∞).
#[inline(always)]
fn adjoint_term(g: f64, d: f64) -> f64 {
    if g != 0.0 { g * d } else { 0.0 }
}

/// Two disjoint mutable ranges of one slice.
fn two_mut(
    v: &mut [f64],
    a: std::ops::Range<usize>,
    b: std::ops::Range<usize>,
) -> (&mut [f64], &mut [f64]) {
    if a.start < b.start {
        let (lo, hi) = v.split_at_mut(b.start);
        (&mut lo[a], &mut hi[..b.end - b.start])
    } else {
        let (lo, hi) = v.split_at_mut(a.start);
        let lo_b = &mut lo[b];
        (&mut hi[..a.end - a.start], lo_b)
    }
}

const NO_ADJ: u32 = u32::MAX;

impl Tape {
    pub(crate) fn clear(&mut self) {
        self.nodes.clear();
        self.extra.clear();
    }

    #[inline]
    pub(crate) fn push(
        &mut self,
        op: TapeOp,
        out: PayloadId,
        a: PayloadId,
        b: PayloadId,
        mask: MaskId,
    ) {
        self.nodes.push(TapeNode {
            op,
            out,
            a,
            b,
            mask,
        });
    }

    /// Adjoint of element `e`, lane `l` of payload `p`, if `p` has one.
    #[inline]
    fn idx(&self, p: PayloadId, e: usize, l: usize, b: usize) -> Option<usize> {
        let off = *self.adj_off.get(p.0 as usize)?;
        (off != NO_ADJ).then_some(off as usize + e * b + l)
    }

    /// The per-lane adjoint of element 0 of `p` after `backward` (zeros when it got none).
    pub(crate) fn grad_of(&self, p: PayloadId, n_lanes: usize, out: &mut Vec<f64>) {
        out.clear();
        match self.idx(p, 0, 0, n_lanes) {
            Some(i) => out.extend_from_slice(&self.adj[i..i + n_lanes]),
            None => out.resize(n_lanes, 0.0),
        }
    }

    /// Reverse sweep from `root` seeded with 1 on every element of every lane.
    pub(crate) fn backward(&mut self, lanes: &Lanes, masks: &LaneMask, root: PayloadId) {
        let b = lanes.n_lanes();
        self.adj_off.clear();
        let mut total = 0usize;
        for m in &lanes.meta {
            if m.grad {
                self.adj_off.push(total as u32);
                total += m.n as usize * b;
            } else {
                self.adj_off.push(NO_ADJ);
            }
        }
        self.adj.clear();
        self.adj.resize(total, 0.0);
        let rm = lanes.meta(root);
        if !rm.grad {
            return;
        }
        let start = self.adj_off[root.0 as usize] as usize;
        self.adj[start..start + rm.n as usize * b]
            .iter_mut()
            .for_each(|x| *x = 1.0);

        for k in (0..self.nodes.len()).rev() {
            let node = self.nodes[k];
            self.node_vjp(lanes, masks, node, b);
        }
    }

    fn node_vjp(&mut self, lanes: &Lanes, masks: &LaneMask, node: TapeNode, b: usize) {
        let Some(_) = self.idx(node.out, 0, 0, b) else {
            return;
        };
        let mo = lanes.meta(node.out);
        let n_out = mo.n as usize;
        let act = masks.lanes(node.mask);
        match node.op {
            TapeOp::Unary(op) => {
                let ma = lanes.meta(node.a);
                let Some(ia0) = self.idx(node.a, 0, 0, b) else {
                    return;
                };
                let go0 = self.adj_off[node.out.0 as usize] as usize;
                let (wa, sa) = if ma.varying { (b, 1) } else { (1, 0) };
                let (wo, so) = if mo.varying { (b, 1) } else { (1, 0) };
                for e in 0..n_out {
                    let xb = ma.off as usize + e * wa;
                    let zb = mo.off as usize + e * wo;
                    let gb = go0 + e * b;
                    let ib = ia0 + e * b;
                    if node.mask == MaskId::FULL && sa == 1 && so == 1 {
                        let (gs, x, y) = (
                            &mut self.adj,
                            &lanes.data[xb..xb + b],
                            &lanes.data[zb..zb + b],
                        );
                        let (lo, hi) = gs.split_at_mut(gb.max(ib));
                        let (g, d): (&[f64], &mut [f64]) = if gb < ib {
                            (&lo[gb..gb + b], &mut hi[..b])
                        } else {
                            (&hi[..b], &mut lo[ib..ib + b])
                        };
                        each_unary!(op, op => {
                            for l in 0..b {
                                d[l] += adjoint_term(g[l], op.deriv(x[l], y[l]));
                            }
                        });
                        continue;
                    }
                    for &l in act {
                        let l = l as usize;
                        let g = self.adj[gb + l];
                        let x = lanes.data[xb + l * sa];
                        let y = lanes.data[zb + l * so];
                        self.adj[ib + l] += adjoint_term(g, op.deriv(x, y));
                    }
                }
            }
            TapeOp::Binary(op) => {
                let ma = lanes.meta(node.a);
                let mb = lanes.meta(node.b);
                let ia0 = self.idx(node.a, 0, 0, b);
                let ib0 = self.idx(node.b, 0, 0, b);
                let go0 = self.adj_off[node.out.0 as usize] as usize;
                let (wa, sa) = if ma.varying { (b, 1) } else { (1, 0) };
                let (wb, sb) = if mb.varying { (b, 1) } else { (1, 0) };
                let (wo, so) = if mo.varying { (b, 1) } else { (1, 0) };
                for e in 0..n_out {
                    let ea = if ma.n == 1 { 0 } else { e };
                    let eb = if mb.n == 1 { 0 } else { e };
                    let xb = ma.off as usize + ea * wa;
                    let yb = mb.off as usize + eb * wb;
                    let zb = mo.off as usize + e * wo;
                    let gb = go0 + e * b;
                    if node.mask == MaskId::FULL && so == 1 && !(ia0.is_some() && ia0 == ib0) {
                        // Contiguous lanes; a uniform operand is broadcast into a buffer first.
                        let [ga, xa, ya, ..] = &mut self.bufs;
                        ga.clear();
                        ga.extend_from_slice(&self.adj[gb..gb + b]);
                        let x: &[f64] = if sa == 1 {
                            &lanes.data[xb..xb + b]
                        } else {
                            xa.clear();
                            xa.resize(b, lanes.data[xb]);
                            xa
                        };
                        let y: &[f64] = if sb == 1 {
                            &lanes.data[yb..yb + b]
                        } else {
                            ya.clear();
                            ya.resize(b, lanes.data[yb]);
                            ya
                        };
                        let z = &lanes.data[zb..zb + b];
                        match (ia0, ib0) {
                            (Some(ia), Some(ib)) => {
                                let (da, db) = two_mut(
                                    &mut self.adj,
                                    ia + ea * b..ia + ea * b + b,
                                    ib + eb * b..ib + eb * b + b,
                                );
                                each_binary!(op, op => {
                                    for l in 0..b {
                                        let (dx, dy) = op.partials(x[l], y[l], z[l]);
                                        da[l] += adjoint_term(ga[l], dx);
                                        db[l] += adjoint_term(ga[l], dy);
                                    }
                                });
                            }
                            (Some(ia), None) => {
                                let da = &mut self.adj[ia + ea * b..ia + ea * b + b];
                                each_binary!(op, op => {
                                    for l in 0..b {
                                        da[l] += adjoint_term(ga[l], op.partials(x[l], y[l], z[l]).0);
                                    }
                                });
                            }
                            (None, Some(ib)) => {
                                let db = &mut self.adj[ib + eb * b..ib + eb * b + b];
                                each_binary!(op, op => {
                                    for l in 0..b {
                                        db[l] += adjoint_term(ga[l], op.partials(x[l], y[l], z[l]).1);
                                    }
                                });
                            }
                            (None, None) => {}
                        }
                        continue;
                    }
                    for &l in act {
                        let l = l as usize;
                        let g = self.adj[gb + l];
                        let x = lanes.data[xb + l * sa];
                        let y = lanes.data[yb + l * sb];
                        let z = lanes.data[zb + l * so];
                        let (dx, dy) = op.partials(x, y, z);
                        if let Some(i) = ia0 {
                            self.adj[i + ea * b + l] += adjoint_term(g, dx);
                        }
                        if let Some(i) = ib0 {
                            self.adj[i + eb * b + l] += adjoint_term(g, dy);
                        }
                    }
                }
            }
            TapeOp::Select { then } => {
                for (src, set) in [(node.a, then), (node.b, node.mask)] {
                    for &l in masks.lanes(set) {
                        let l = l as usize;
                        for e in 0..n_out {
                            let g = self.adj[self.idx(node.out, e, l, b).unwrap_or(0)];
                            if let Some(i) = self.idx(src, e, l, b) {
                                self.adj[i] += g;
                            }
                        }
                    }
                }
            }
            TapeOp::Concat { start, len } => {
                let mut e0 = 0;
                for k in 0..len as usize {
                    let src = self.extra[start as usize + k];
                    let n = lanes.n_elems(src);
                    for e in 0..n {
                        for &l in act {
                            let l = l as usize;
                            let g = self.adj[self.idx(node.out, e0 + e, l, b).unwrap_or(0)];
                            if let Some(i) = self.idx(src, e, l, b) {
                                self.adj[i] += g;
                            }
                        }
                    }
                    e0 += n;
                }
            }
            TapeOp::Gather { start } => {
                for e in 0..n_out {
                    for &l in act {
                        let l = l as usize;
                        let g = self.adj[self.idx(node.out, e, l, b).unwrap_or(0)];
                        if let Some(i) = self.idx(node.a, start as usize + e, l, b) {
                            self.adj[i] += g;
                        }
                    }
                }
            }
            TapeOp::Tensor(op) if op.is_bilinear() || op.is_linear() => {
                let na = lanes.n_elems(node.a);
                let nb = if op.is_bilinear() {
                    lanes.n_elems(node.b)
                } else {
                    0
                };
                let go0 = self.adj_off[node.out.0 as usize] as usize;
                let ia = self.idx(node.a, 0, 0, b);
                let ib = if op.is_bilinear() {
                    self.idx(node.b, 0, 0, b)
                } else {
                    None
                };
                let terms = self.term_cache.get(op, na, nb);
                let g = &mut self.bufs[3];
                g.clear();
                g.extend_from_slice(&self.adj[go0..go0 + n_out * b]);
                let g = &self.bufs[3];
                let view = |m: crate::lanes::Meta| Strided {
                    data: &lanes.data[m.off as usize..],
                    w: if m.varying { b } else { 1 },
                    s: usize::from(m.varying),
                };
                let sa = view(lanes.meta(node.a));
                let sb = view(lanes.meta(node.b));
                let bil = op.is_bilinear();
                let full = node.mask == MaskId::FULL;
                let vjp = |da: Option<&mut [f64]>, db: Option<&mut [f64]>| {
                    if full {
                        terms_vjp(terms, bil, sa, sb, g, da, db, b);
                    } else {
                        terms_vjp_masked(terms, bil, sa, sb, g, da, db, b, act);
                    }
                };
                match (ia, ib) {
                    (Some(i), Some(j)) if i == j => {
                        let d = &mut self.adj[i..i + na * b];
                        vjp(Some(&mut *d), None);
                        vjp(None, Some(d));
                    }
                    (Some(i), Some(j)) => {
                        let (da, db) = two_mut(&mut self.adj, i..i + na * b, j..j + nb * b);
                        vjp(Some(da), Some(db));
                    }
                    (Some(i), None) => vjp(Some(&mut self.adj[i..i + na * b]), None),
                    (None, Some(j)) => vjp(None, Some(&mut self.adj[j..j + nb * b])),
                    (None, None) => {}
                }
            }
            TapeOp::Tensor(op)
                if node.mask == MaskId::FULL
                    && matches!(
                        op,
                        TensorOp::Det { .. } | TensorOp::LogDet { .. } | TensorOp::Inv { .. }
                    )
                    && lanes.is_varying(node.out)
                    && lanes.is_varying(node.a) =>
            {
                let Some(ia) = self.idx(node.a, 0, 0, b) else {
                    return;
                };
                let na = lanes.n_elems(node.a);
                let mut bufs = std::mem::take(&mut self.bufs);
                let [g, _, _, _, _, s] = &mut bufs;
                let go0 = self.adj_off[node.out.0 as usize] as usize;
                g.clear();
                g.extend_from_slice(&self.adj[go0..go0 + n_out * b]);
                let src = if matches!(op, TensorOp::Inv { .. }) {
                    node.out
                } else {
                    node.b
                };
                let ms = lanes.meta(src);
                let t = &lanes.data[ms.off as usize..ms.off as usize + ms.n as usize * b];
                let z = &lanes.data[mo.off as usize..mo.off as usize + b];
                det_family_vjp(op, t, z, g, &mut self.adj[ia..ia + na * b], b, s);
                self.bufs = bufs;
            }
            TapeOp::Tensor(op) => {
                let na = lanes.n_elems(node.a);
                let has_b = tensor_has_b(op);
                let nb = if has_b { lanes.n_elems(node.b) } else { 0 };
                let mut bufs = std::mem::take(&mut self.bufs);
                let [ba, bb, bz, bg, bda, bdb] = &mut bufs;
                ba.resize(na, 0.0);
                bb.resize(nb, 0.0);
                bz.resize(n_out, 0.0);
                bg.resize(n_out, 0.0);
                bda.resize(na, 0.0);
                bdb.resize(nb, 0.0);
                let a_grad = self.idx(node.a, 0, 0, b).is_some();
                let b_grad = has_b
                    && !matches!(op, TensorOp::Det { .. } | TensorOp::LogDet { .. })
                    && self.idx(node.b, 0, 0, b).is_some();
                let stride = |m: crate::lanes::Meta| {
                    if m.varying {
                        (m.off as usize, b, 1)
                    } else {
                        (m.off as usize, 1, 0)
                    }
                };
                let (ao, aw, al) = stride(lanes.meta(node.a));
                let (bo, bw, bl) = stride(lanes.meta(node.b));
                let (oo, ow, ol) = stride(mo);
                let go0 = self.adj_off[node.out.0 as usize] as usize;
                let ia0 = self.idx(node.a, 0, 0, b);
                let ib0 = self.idx(node.b, 0, 0, b);
                for &l in act {
                    let l = l as usize;
                    let mut any = false;
                    for e in 0..n_out {
                        bg[e] = self.adj[go0 + e * b + l];
                        any |= bg[e] != 0.0;
                    }
                    if !any {
                        continue;
                    }
                    for e in 0..na {
                        ba[e] = lanes.data[ao + e * aw + l * al];
                    }
                    for e in 0..nb {
                        bb[e] = lanes.data[bo + e * bw + l * bl];
                    }
                    for e in 0..n_out {
                        bz[e] = lanes.data[oo + e * ow + l * ol];
                    }
                    bda.iter_mut().for_each(|x| *x = 0.0);
                    bdb.iter_mut().for_each(|x| *x = 0.0);
                    op.vjp(ba, bb, bz, bg, bda, bdb);
                    if a_grad && let Some(i0) = ia0 {
                        for e in 0..na {
                            self.adj[i0 + e * b + l] += bda[e];
                        }
                    }
                    if b_grad && let Some(i0) = ib0 {
                        for e in 0..nb {
                            self.adj[i0 + e * b + l] += bdb[e];
                        }
                    }
                }
                self.bufs = bufs;
            }
        }
    }
}

/// Whether a tensor op reads a second payload.
pub(crate) fn tensor_has_b(op: TensorOp) -> bool {
    matches!(
        op,
        TensorOp::Dot
            | TensorOp::Cross
            | TensorOp::MatVec { .. }
            | TensorOp::MatMul { .. }
            | TensorOp::Outer
            | TensorOp::Det { .. }
            | TensorOp::LogDet { .. }
    )
}
