//! `Tape`: the append-only record of the executed trace, and the reverse sweep that turns it into
//! per-lane adjoints. Each node refers only to earlier payloads and replays only on the lanes that
//! were active when it was recorded, so a dead lane's Inf/NaN is never read.

#![allow(clippy::needless_range_loop)] // index arithmetic mirrors the maths

use std::cell::Cell;

use crate::aligned::AlignedVec;
use crate::elementary::Elementary;
use crate::flat::{Fixed, FlatTape, FlatTerm, Step, at, span, vjp_fixed};
use crate::lanes::{Lanes, Meta, PayloadId};
use crate::linalg::TermCache;
use crate::linalg::{
    self, DIRECT_TERMS, Strided, TensorOp, Term, det_family_vjp, direct_vjp, group_terms,
    terms_vjp, terms_vjp_masked,
};
use crate::mask::{LaneMask, MaskId};
use crate::prims::{Binary, Unary, each_binary, each_unary};
use crate::real::Real;
use crate::smallmat;

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
    /// `soft-choice`: `a` the logits (a vector of k), `b` the temperature (a scalar),
    /// `extra[start]` the noise (a vector of k), `extra[start + 1]` the weights softmax(z) and the
    /// pick (k + 1 elements, written by the forward kernel), `extra[start + 2 ..][..len]` the k
    /// options (scalars). Soft: out = Σ wᵢ·optᵢ; `hard` (straight-through): out = the option of the largest
    /// z, its adjoint to that option alone, the logits' adjoint the soft blend's.
    Choice { start: u32, len: u32, hard: bool },
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
pub(crate) struct Tape<R: Real = f64> {
    pub(crate) nodes: Vec<TapeNode>,
    pub(crate) extra: Vec<PayloadId>,
    adj: Adjoints<R>,
    bufs: [Vec<R>; 6],
    /// Scratch of the `Choice` adjoint: the options' adjoint regions and (offset, lane stride),
    /// and one lane's option values.
    choice_slots: Vec<(Option<usize>, usize, usize)>,
    choice_o: Vec<R>,
    term_cache: TermTable,
    /// Where a divergent branch merged: see [`Merges`].
    merges: Merges,
    /// Whether a `Select` was pushed since the last clear.
    has_select: bool,
    gathered: Gathered<R>,
    /// The recording compiled for one-lane replays (see [`FlatTape`]).
    pub(crate) flat: FlatTape<R>,
    /// The last sweep ran by the flat tape's plan: adjoints sit at the payloads' offsets.
    flat_swept: bool,
}

/// The input gradients of a blocked replay, put together block by block: while `on`, they are
/// what [`Tape::grad_of`] reads (the adjoint arena holds the last block's sweep only), and the
/// next [`Tape::backward`] is skipped once (`skip`): every block has been swept already.
#[derive(Clone, Debug, Default)]
struct Gathered<R: Real = f64> {
    on: bool,
    skip: bool,
    ids: Vec<PayloadId>,
    /// `n_lanes` floats per id, in the order of `ids`.
    vals: Vec<R>,
    n_lanes: usize,
}

/// The contribution `g · d` of one adjoint step; a zero adjoint contributes exactly zero, so a
/// dead path's infinite partial derivative never turns into NaN (0 · ∞).
#[inline(always)]
fn adjoint_term<R: Real>(g: R, d: R) -> R {
    if g != R::ZERO { g * d } else { R::ZERO }
}

/// (element width, lane stride) of a payload in `Lanes::data`.
#[inline]
fn stride(m: Meta, b: usize) -> (usize, usize) {
    if m.varying { (b, 1) } else { (1, 0) }
}

impl<R: Real> Tape<R> {
    pub(crate) fn clear(&mut self) {
        self.nodes.clear();
        self.extra.clear();
        self.has_select = false;
        self.merges.built = None;
        self.gathered.on = false;
        self.gathered.skip = false;
        self.flat.ready = false;
        self.flat_swept = false;
    }

    /// Compiles the recording (made at one lane into `lanes`) for one-lane replays.
    pub(crate) fn build_flat(&mut self, lanes: &Lanes<R>, term_cache: &mut TermCache) {
        let Tape {
            nodes,
            term_cache: table,
            flat,
            ..
        } = self;
        flat.build(nodes, lanes, term_cache, |op, na, nb, f| {
            each_term::<R>(table, op, na, nb, f)
        });
    }

    /// Starts putting together the gradients of `ids` (element 0 of each) over `n_lanes` lanes
    /// from the sweeps of blocks of lanes.
    pub(crate) fn gather_begin(&mut self, ids: impl Iterator<Item = PayloadId>, n_lanes: usize) {
        let g = &mut self.gathered;
        g.ids.clear();
        g.ids.extend(ids);
        g.vals.clear();
        g.vals.resize(g.ids.len() * n_lanes, R::ZERO);
        g.n_lanes = n_lanes;
        g.on = false;
        g.skip = false;
    }

    /// Copies the gradients of the gathered ids out of the last sweep (of a block of `w` lanes
    /// starting at lane `lo`).
    pub(crate) fn gather_block(&mut self, lo: usize, w: usize) {
        let g = &mut self.gathered;
        for (k, &p) in g.ids.iter().enumerate() {
            let dst = &mut g.vals[k * g.n_lanes + lo..k * g.n_lanes + lo + w];
            match self.adj.off.get(p.0 as usize) {
                Some(&o) if o != NO_ADJ => {
                    let o = o as usize;
                    dst.copy_from_slice(&self.adj.buf[o..o + w]);
                }
                _ => dst.fill(R::ZERO),
            }
        }
    }

    /// Forgets the merges indexed for the last sweep (the masks it was given change in place).
    pub(crate) fn forget_merges(&mut self) {
        self.merges.built = None;
    }

    /// Every block has been swept: the gathered gradients stand for the next sweep.
    pub(crate) fn gather_done(&mut self) {
        self.gathered.on = true;
        self.gathered.skip = true;
    }

    /// Bytes held beside the nodes: the adjoint arena (sized by the last sweep) and the term
    /// lists of the tensor ops met.
    pub(crate) fn side_bytes(&self) -> u64 {
        let t = &self.term_cache;
        let terms =
            t.terms.capacity() + t.scratch.capacity() + t.by_i.capacity() + t.by_j.capacity();
        (self.adj.buf.capacity() * R::BYTES + self.adj.off.capacity() * 4) as u64
            + (terms * std::mem::size_of::<Term>()) as u64
            + self.merges.bytes()
            + self.flat.bytes()
    }

    /// Drops the adjoint arena when it holds more than `bytes` of capacity (after a run stopped
    /// at a limit; the next sweep starts from an empty arena).
    pub(crate) fn shrink_adjoints(&mut self, bytes: usize) {
        if self.adj.buf.capacity() * R::BYTES > bytes || self.adj.off.capacity() * 4 > bytes {
            self.adj = Adjoints::default();
            self.flat_swept = false;
        }
        if self.merges.bytes() > bytes as u64 {
            self.merges = Merges::default();
        }
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
        self.has_select |= matches!(op, TapeOp::Select { .. });
        self.nodes.push(TapeNode {
            op,
            out,
            a,
            b,
            mask,
        });
    }

    /// The per-lane adjoint of element 0 of `p` after `backward` (zeros when it got none). `p` is
    /// a payload no tape node produced (an input): a produced payload's adjoint is recycled once
    /// its node has been swept.
    pub(crate) fn grad_of(&self, p: PayloadId, n_lanes: usize, out: &mut Vec<f64>) {
        out.clear();
        let g = &self.gathered;
        let widen = |out: &mut Vec<f64>, xs: &[R]| out.extend(xs.iter().map(|x| x.f64()));
        if g.on {
            match g.ids.iter().position(|&q| q == p) {
                Some(k) if g.n_lanes == n_lanes => {
                    widen(out, &g.vals[k * n_lanes..(k + 1) * n_lanes]);
                }
                _ => out.resize(n_lanes, 0.0),
            }
            return;
        }
        let off = if self.flat_swept {
            let inputs = &self.flat.sweep.inputs;
            inputs.iter().find(|&&(q, _)| q == p).map(|&(_, o)| o)
        } else {
            self.adj.off.get(p.0 as usize).copied()
        };
        match off {
            Some(o) if o != NO_ADJ => {
                let o = o as usize;
                widen(out, &self.adj.buf[o..o + n_lanes]);
            }
            _ => out.resize(n_lanes, 0.0),
        }
    }

    /// Reverse sweep from `root` seeded with 1 on every element of every lane.
    pub(crate) fn backward(&mut self, lanes: &Lanes<R>, masks: &LaneMask, root: PayloadId) {
        if std::mem::take(&mut self.gathered.skip) {
            return;
        }
        self.gathered.on = false;
        self.flat_swept = false;
        let b = lanes.n_lanes();
        if b == 1 && self.flat_backward(lanes, root) {
            return;
        }
        self.adj.reset(lanes.meta.len(), b);
        let merged = self.has_select && self.merges.index(&self.nodes, masks, lanes.meta.len(), b);
        let rm = lanes.meta(root);
        if merged && self.merges.is_merge(root) {
            self.seed_through_merges(lanes, root);
            return self.backward_merged(lanes, masks, b);
        }
        let Some(r) = self.adj.slot(rm, root) else {
            return;
        };
        let rr = self.adj.range(r, 0, rm.n as usize);
        self.adj.buf[rr].fill(R::ONE);
        if merged {
            return self.backward_merged(lanes, masks, b);
        }

        // An output nothing accumulated into has an exactly-zero adjoint: its node is skipped.
        if b == 1 {
            let flat = self.flat.ready
                && self.flat.steps.len() == self.nodes.len()
                && lanes.data.len() >= self.flat.extent;
            for k in (0..self.nodes.len()).rev() {
                let node = self.nodes[k];
                if let Some(go) = self.adj.get(node.out)
                    && !(flat && self.flat_vjp(&lanes.data, k, node, go))
                {
                    self.node_vjp_one(lanes, masks, node, go);
                }
            }
            return;
        }
        for k in (0..self.nodes.len()).rev() {
            let node = self.nodes[k];
            if let Some(go) = self.adj.get(node.out) {
                self.node_vjp(lanes, masks, node, go, b);
                self.adj.release(node.out, go, lanes.n_elems(node.out));
            }
        }
    }

    /// The compiled step `k` (node `node`) swept at one lane, as [`Tape::node_vjp_one`] sweeps
    /// it (the same expressions in the same order); `false` for a step it leaves to that.
    #[inline(always)]
    fn flat_vjp(&mut self, data: &[R], k: usize, node: TapeNode, go: usize) -> bool {
        let step = self.flat.steps[k];
        let adj = &mut self.adj;
        let (ia, ib) = match step {
            Step::Unary { n, grad_a, .. } => match adj.slot_n(node.a, n as usize, grad_a) {
                Some(ia) => (Some(ia), None),
                None => return true,
            },
            Step::Binary {
                na,
                nb,
                grad_a,
                grad_b,
                ..
            } => (
                adj.slot_n(node.a, na as usize, grad_a),
                adj.slot_n(node.b, nb as usize, grad_b),
            ),
            Step::Terms {
                bilinear,
                na,
                nb,
                grad_a,
                grad_b,
                ..
            } => {
                let ia = adj.slot_n(node.a, na as usize, grad_a);
                let ib = if bilinear {
                    adj.slot_n(node.b, nb as usize, grad_b)
                } else {
                    None
                };
                (ia, ib)
            }
            Step::Det { na, grad_a, .. } => match adj.slot_n(node.a, na as usize, grad_a) {
                Some(ia) => (Some(ia), None),
                None => return true,
            },
            Step::Node => return false,
        };
        let (n_out, na, nb) = step.sizes();
        let fits = |o: Option<usize>, n: u32| o.is_none_or(|o| o + n as usize <= adj.buf.len());
        if !(fits(Some(go), n_out) && fits(ia, na) && fits(ib, nb)) {
            return false;
        }
        let scratch = &mut self.bufs[5];
        // SAFETY: the caller checked `data` against the flat tape's extent; the adjoint regions
        // were just checked.
        unsafe {
            step_vjp(
                &step,
                &self.flat.terms,
                data,
                &mut adj.buf,
                go,
                (ia, ib),
                scratch,
            )
        };
        true
    }

    /// The one-lane sweep of a compiled recording by its [`crate::flat::SweepPlan`] (adjoints at the
    /// payloads' offsets, the reached steps only); `false` when the plan does not cover the
    /// recording (a reached node is not compiled, or branches merged) and the generic sweep
    /// must run. The same steps in the same order as the generic sweep: the same bits.
    fn flat_backward(&mut self, lanes: &Lanes<R>, root: PayloadId) -> bool {
        if self.has_select
            || !self.flat.ready
            || self.flat.steps.len() != self.nodes.len()
            || lanes.data.len() < self.flat.extent
        {
            return false;
        }
        if self.flat.sweep.root != Some(root) {
            let FlatTape { steps, sweep, .. } = &mut self.flat;
            sweep.build(steps, &self.nodes, lanes, root);
        }
        let FlatTape {
            steps,
            terms,
            sweep,
            ..
        } = &self.flat;
        if !sweep.ok {
            return false;
        }
        let (adj, scratch) = (&mut self.adj, &mut self.bufs[5]);
        adj.flat_layout(lanes.n_floats());
        self.flat_swept = true;
        let rm = lanes.meta(root);
        if rm.grad {
            adj.buf[rm.off as usize..][..rm.n as usize].fill(R::ONE);
        }
        let data = &lanes.data[..];
        for &k in &sweep.order {
            let step = &steps[k as usize];
            let (go, ia, ib) = step.adjoint_offsets();
            // SAFETY: `data` reaches the flat tape's extent (checked above), and so does the
            // adjoint arena (`flat_layout`), whose offsets are the payloads'.
            unsafe { step_vjp(step, terms, data, &mut adj.buf, go, (ia, ib), scratch) };
        }
        true
    }

    /// [`Tape::node_vjp`] for one lane, where element `e` of a payload is `data[off + e]` whether
    /// it is uniform or not, and a lane list other than the full one is empty. The hot ops run
    /// here as scalar loops with the same expressions and order of accumulation. Adjoints are
    /// viewed as cells, so an input that is also the other input simply accumulates twice.
    #[inline(always)]
    fn node_vjp_one(&mut self, lanes: &Lanes<R>, masks: &LaneMask, node: TapeNode, go: usize) {
        let full = node.mask == MaskId::FULL;
        if !full && masks.lanes(node.mask).is_empty() && !matches!(node.op, TapeOp::Select { .. }) {
            return;
        }
        let data = &lanes.data[..];
        let mo = lanes.meta(node.out);
        let n_out = mo.n as usize;
        let z = &data[mo.off as usize..][..n_out];
        match node.op {
            TapeOp::Unary(op) => {
                let ma = lanes.meta(node.a);
                let Some(ia) = self.adj.slot(ma, node.a) else {
                    return;
                };
                let adj = Cell::from_mut(&mut self.adj.buf[..]).as_slice_of_cells();
                let (g, d) = (&adj[go..][..n_out], &adj[ia..][..n_out]);
                let x = &data[ma.off as usize..][..n_out];
                each_unary!(op, op => {
                    for e in 0..n_out {
                        d[e].set(d[e].get() + adjoint_term(g[e].get(), op.deriv(x[e], z[e])));
                    }
                });
            }
            TapeOp::Binary(op) => {
                let (ma, mb) = (lanes.meta(node.a), lanes.meta(node.b));
                let ia = self.adj.slot(ma, node.a);
                let ib = self.adj.slot(mb, node.b);
                let adj = Cell::from_mut(&mut self.adj.buf[..]).as_slice_of_cells();
                let g = &adj[go..][..n_out];
                let (na, nb) = (ma.n as usize, mb.n as usize);
                let da = ia.map(|i| &adj[i..][..na]);
                let db = ib.map(|i| &adj[i..][..nb]);
                let x = &data[ma.off as usize..][..na];
                let y = &data[mb.off as usize..][..nb];
                match (na == 1, nb == 1) {
                    (false, false) => binary_one::<_, false, false>(op, g, x, y, z, da, db),
                    (false, true) => binary_one::<_, false, true>(op, g, x, y, z, da, db),
                    (true, false) => binary_one::<_, true, false>(op, g, x, y, z, da, db),
                    (true, true) => binary_one::<_, true, true>(op, g, x, y, z, da, db),
                }
            }
            TapeOp::Tensor(op) if op.is_bilinear() || op.is_linear() => {
                let bil = op.is_bilinear();
                let (ma, mb) = (lanes.meta(node.a), lanes.meta(node.b));
                let ia = self.adj.slot(ma, node.a);
                let ib = if bil { self.adj.slot(mb, node.b) } else { None };
                let (na, nb) = (ma.n as usize, if bil { mb.n as usize } else { 0 });
                let adj = Cell::from_mut(&mut self.adj.buf[..]).as_slice_of_cells();
                let g = &adj[go..][..n_out];
                let da = ia.map(|i| &adj[i..][..na]);
                let db = ib.map(|i| &adj[i..][..nb]);
                let x = &data[ma.off as usize..][..na];
                let y = &data[mb.off as usize..][..nb];
                let table = &mut self.term_cache;
                match (da, db) {
                    // One payload as both inputs: all of a's terms, then all of b's, as the
                    // lane-parallel sweep does.
                    (Some(da), Some(db)) if ia == ib => {
                        each_term::<R>(table, op, na, nb, |o, i, j, c| {
                            da[i].set(da[i].get() + c * g[o].get() * y[j]);
                        });
                        each_term::<R>(table, op, na, nb, |o, i, j, c| {
                            db[j].set(db[j].get() + c * g[o].get() * x[i]);
                        });
                    }
                    (Some(da), Some(db)) => each_term::<R>(table, op, na, nb, |o, i, j, c| {
                        let g = g[o].get();
                        da[i].set(da[i].get() + c * g * y[j]);
                        db[j].set(db[j].get() + c * g * x[i]);
                    }),
                    (Some(da), None) if bil => each_term::<R>(table, op, na, nb, |o, i, j, c| {
                        da[i].set(da[i].get() + c * g[o].get() * y[j]);
                    }),
                    (Some(da), None) => each_term::<R>(table, op, na, nb, |o, i, _, c| {
                        da[i].set(da[i].get() + c * g[o].get());
                    }),
                    (None, Some(db)) => each_term::<R>(table, op, na, nb, |o, i, j, c| {
                        db[j].set(db[j].get() + c * g[o].get() * x[i]);
                    }),
                    (None, None) => {}
                }
            }
            _ => self.node_vjp(lanes, masks, node, go, 1),
        }
    }

    /// Accumulates the adjoint contributions of `node`, whose output adjoint lives at `go`.
    fn node_vjp(
        &mut self,
        lanes: &Lanes<R>,
        masks: &LaneMask,
        node: TapeNode,
        go: usize,
        b: usize,
    ) {
        let act = masks.lanes(node.mask);
        self.node_vjp_on(lanes, masks, node, go, b, act, node.mask == MaskId::FULL);
    }

    /// [`Tape::node_vjp`] on the lanes `act` (`full`: every lane).
    #[allow(clippy::too_many_arguments)]
    fn node_vjp_on(
        &mut self,
        lanes: &Lanes<R>,
        masks: &LaneMask,
        node: TapeNode,
        go: usize,
        b: usize,
        act: &[u32],
        full: bool,
    ) {
        let mo = lanes.meta(node.out);
        let n_out = mo.n as usize;
        let data = &lanes.data[..];
        match node.op {
            TapeOp::Unary(op) => self.vjp_unary(lanes, node, op, go, b, act, full),
            TapeOp::Binary(op) => self.vjp_binary(lanes, node, op, go, b, act, full),
            TapeOp::Select { then } => {
                // Reached only with the merges unindexed: a select of a payload with itself, or
                // the planted merge bug.
                let planted = crate::planted::is_planted(crate::planted::Bug::SelectMerge);
                for (src, set) in [(node.a, then), (node.b, node.mask)] {
                    let Some(is) = self.adj.slot(lanes.meta(src), src) else {
                        continue;
                    };
                    let scale = if planted && src == node.a {
                        R::of(1.25)
                    } else {
                        R::ONE
                    };
                    let adj = &mut self.adj.buf;
                    for &l in masks.lanes(set) {
                        let l = l as usize;
                        for e in 0..n_out {
                            let g = adj[go + e * b + l];
                            adj[is + e * b + l] += scale * g;
                        }
                    }
                }
            }
            TapeOp::Concat { start, len } => {
                let mut e0 = 0;
                for k in 0..len as usize {
                    let src = self.extra[start as usize + k];
                    let ms = lanes.meta(src);
                    let n = ms.n as usize;
                    if let Some(is) = self.adj.slot(ms, src) {
                        let adj = &mut self.adj.buf;
                        for e in 0..n {
                            for &l in act {
                                let l = l as usize;
                                let g = adj[go + (e0 + e) * b + l];
                                adj[is + e * b + l] += g;
                            }
                        }
                    }
                    e0 += n;
                }
            }
            TapeOp::Choice { start, len, hard } => {
                self.choice_vjp(
                    lanes,
                    act,
                    node,
                    go,
                    b,
                    (start as usize, len as usize, hard),
                );
            }
            TapeOp::Gather { start } => {
                let Some(ia) = self.adj.slot(lanes.meta(node.a), node.a) else {
                    return;
                };
                let adj = &mut self.adj.buf;
                for e in 0..n_out {
                    for &l in act {
                        let l = l as usize;
                        let g = adj[go + e * b + l];
                        adj[ia + (start as usize + e) * b + l] += g;
                    }
                }
            }
            TapeOp::Tensor(op) if op.is_bilinear() || op.is_linear() => {
                self.vjp_tensor_wide(lanes, node, op, go, b, act, full)
            }
            TapeOp::Tensor(op)
                if full
                    && matches!(
                        op,
                        TensorOp::Det { .. } | TensorOp::LogDet { .. } | TensorOp::Inv { .. }
                    )
                    && mo.varying
                    && lanes.is_varying(node.a) =>
            {
                let ma = lanes.meta(node.a);
                let Some((ia, fresh)) = self.adj.slot_fresh(ma, node.a) else {
                    return;
                };
                let src = if matches!(op, TensorOp::Inv { .. }) {
                    node.out
                } else {
                    node.b
                };
                let ms = lanes.meta(src);
                let t = &data[ms.off as usize..ms.off as usize + ms.n as usize * b];
                let z = &data[mo.off as usize..mo.off as usize + b];
                let na = ma.n as usize;
                let a = &data[ma.off as usize..ma.off as usize + na * b];
                let [g, da] = regions(&mut self.adj.buf, [go..go + n_out * b, ia..ia + na * b]);
                det_family_vjp(op, a, t, z, g, da, fresh, b, &mut self.bufs[5]);
            }
            TapeOp::Tensor(op) => self.vjp_tensor_lanes(lanes, node, op, go, b, act),
        }
    }

    /// A unary node's adjoint: one wide lane loop when every lane is active and both sides vary, else per lane. Part of [`Tape::node_vjp_on`], inlined into it.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn vjp_unary(
        &mut self,
        lanes: &Lanes<R>,
        node: TapeNode,
        op: Unary,
        go: usize,
        b: usize,
        act: &[u32],
        full: bool,
    ) {
        let mo = lanes.meta(node.out);
        let n_out = mo.n as usize;
        let data = &lanes.data[..];
        let ma = lanes.meta(node.a);
        if full && ma.varying && mo.varying {
            let Some((ia, fresh)) = self.adj.slot_fresh(ma, node.a) else {
                return;
            };
            let len = n_out * b;
            let [g, d] = regions(&mut self.adj.buf, [go..go + len, ia..ia + len]);
            let x = &data[ma.off as usize..][..len];
            let y = &data[mo.off as usize..][..len];
            if fresh {
                unary_lanes::<_, true>(op, g, x, y, d);
            } else {
                unary_lanes::<_, false>(op, g, x, y, d);
            }
            return;
        }
        let Some(ia) = self.adj.slot(ma, node.a) else {
            return;
        };
        let ((wa, sa), (wo, so)) = (stride(ma, b), stride(mo, b));
        let adj = &mut self.adj.buf;
        for e in 0..n_out {
            let xb = ma.off as usize + e * wa;
            let zb = mo.off as usize + e * wo;
            for &l in act {
                let l = l as usize;
                let g = adj[go + e * b + l];
                let d = op.deriv(data[xb + l * sa], data[zb + l * so]);
                adj[ia + e * b + l] += adjoint_term(g, d);
            }
        }
    }

    /// A binary node's adjoint into both operands (uniform operands in their wide kernels). Part of [`Tape::node_vjp_on`], inlined into it.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn vjp_binary(
        &mut self,
        lanes: &Lanes<R>,
        node: TapeNode,
        op: Binary,
        go: usize,
        b: usize,
        act: &[u32],
        full: bool,
    ) {
        let mo = lanes.meta(node.out);
        let n_out = mo.n as usize;
        let data = &lanes.data[..];
        let ma = lanes.meta(node.a);
        let mb = lanes.meta(node.b);
        let ((wa, sa), (wb, sb), (wo, so)) = (stride(ma, b), stride(mb, b), stride(mo, b));
        // Over full contiguous lanes a fresh input region is written by its first element
        // rather than zeroed and added to; the lane-list path only adds.
        let lanes_path = full && so == 1 && n_out > 0;
        let mut fresh = |m: Meta, p: PayloadId| match self.adj.slot_fresh(m, p) {
            Some((i, f)) if f && !lanes_path => {
                self.adj.zero_if(true, i, m.n as usize);
                (Some(i), false)
            }
            Some((i, f)) => (Some(i), f),
            None => (None, false),
        };
        let (ia, fa) = fresh(ma, node.a);
        let (ib, fb) = fresh(mb, node.b);
        if ia.is_none() && ib.is_none() {
            return;
        }
        let [xa, ya, ..] = &mut self.bufs;
        let adj = &mut self.adj.buf;
        if lanes_path && sa == 1 && sb == 1 && ma.n == mo.n && mb.n == mo.n {
            // Every element of all three contiguous: one pass over all their floats,
            // each float's terms as the per-element passes below add them.
            let len = n_out * b;
            let x = &data[ma.off as usize..][..len];
            let y = &data[mb.off as usize..][..len];
            let z = &data[mo.off as usize..][..len];
            let (ra, rb) = (ia.map(|i| i..i + len), ib.map(|i| i..i + len));
            binary_lanes(op, adj, go..go + len, ra, rb, [fa, fb], [x, y, z], len);
            return;
        }
        if lanes_path && (2..=4).contains(&n_out) {
            // A one-element varying operand taking the gradient, the other uniform and
            // taking none (`scale q (eye 2)`): its adjoint sums the elements' terms per
            // lane in one pass, in the order of the per-element passes below.
            let z = &data[mo.off as usize..][..n_out * b];
            let uni = |m: Meta| &data[m.off as usize..][..m.n as usize];
            match (sa, sb, ia, ib) {
                (1, 0, Some(i), None) if ma.n == 1 && mb.n == mo.n => {
                    let xs = &data[ma.off as usize..][..b];
                    let [g, d] = regions(adj, [go..go + n_out * b, i..i + b]);
                    return binary_uni_sum(op, g, d, fa, (false, uni(mb)), xs, z);
                }
                (0, 1, None, Some(j)) if mb.n == 1 && ma.n == mo.n => {
                    let ys = &data[mb.off as usize..][..b];
                    let [g, d] = regions(adj, [go..go + n_out * b, j..j + b]);
                    return binary_uni_sum(op, g, d, fb, (true, uni(ma)), ys, z);
                }
                _ => {}
            }
        }
        for e in 0..n_out {
            let ea = if ma.n == 1 { 0 } else { e };
            let eb = if mb.n == 1 { 0 } else { e };
            let xb = ma.off as usize + ea * wa;
            let yb = mb.off as usize + eb * wb;
            let zb = mo.off as usize + e * wo;
            let gb = go + e * b;
            if !full || so == 0 {
                for &l in act {
                    let l = l as usize;
                    let g = adj[gb + l];
                    let x = data[xb + l * sa];
                    let y = data[yb + l * sb];
                    let z = data[zb + l * so];
                    let (dx, dy) = op.partials(x, y, z);
                    if let Some(i) = ia {
                        adj[i + ea * b + l] += adjoint_term(g, dx);
                    }
                    if let Some(i) = ib {
                        adj[i + eb * b + l] += adjoint_term(g, dy);
                    }
                }
                continue;
            }
            let z = &data[zb..zb + b];
            let gr = gb..gb + b;
            let ra = ia.map(|i| i + ea * b..i + (ea + 1) * b);
            let rb = ib.map(|i| i + eb * b..i + (eb + 1) * b);
            let first = [fa && ea == e, fb && eb == e];
            // One operand uniform and taking no gradient: it is read as one value.
            match (sa, sb, ra.clone(), rb.clone()) {
                (0, 1, None, Some(r)) => {
                    let (v, ys) = (data[xb], &data[yb..yb + b]);
                    binary_uni(op, adj, gr, r, first[1], (true, v), ys, z);
                    continue;
                }
                (1, 0, Some(r), None) => {
                    let (v, xs) = (data[yb], &data[xb..xb + b]);
                    binary_uni(op, adj, gr, r, first[0], (false, v), xs, z);
                    continue;
                }
                _ => {}
            }
            // Contiguous lanes; a uniform operand is broadcast into a buffer first.
            let x: &[R] = if sa == 1 {
                &data[xb..xb + b]
            } else {
                xa.clear();
                xa.resize(b, data[xb]);
                xa
            };
            let y: &[R] = if sb == 1 {
                &data[yb..yb + b]
            } else {
                ya.clear();
                ya.resize(b, data[yb]);
                ya
            };
            binary_lanes(op, adj, gr, ra, rb, first, [x, y, z], b);
        }
    }

    /// A linear or bilinear tensor node's adjoint over whole lane blocks. Part of [`Tape::node_vjp_on`], inlined into it.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn vjp_tensor_wide(
        &mut self,
        lanes: &Lanes<R>,
        node: TapeNode,
        op: TensorOp,
        go: usize,
        b: usize,
        act: &[u32],
        full: bool,
    ) {
        let mo = lanes.meta(node.out);
        let n_out = mo.n as usize;
        let data = &lanes.data[..];
        let bil = op.is_bilinear();
        let (ma, mb) = (lanes.meta(node.a), lanes.meta(node.b));
        let na = ma.n as usize;
        let nb = if bil { mb.n as usize } else { 0 };
        // Full lanes write fresh regions (one payload as both inputs is zeroed first:
        // its two passes would each see the other's elements as written).
        let (ia, fa) = self.adj.slot_fresh(ma, node.a).unzip();
        let (ib, fb) = if bil {
            self.adj.slot_fresh(mb, node.b).unzip()
        } else {
            (None, None)
        };
        let same = ia.is_some() && ia == ib;
        let mut fresh = [fa.unwrap_or(false), fb.unwrap_or(false)];
        if !full || same {
            if let Some(i) = ia {
                self.adj.zero_if(fresh[0], i, na);
            }
            if let Some(j) = ib {
                self.adj.zero_if(fresh[1], j, nb);
            }
            fresh = [false; 2];
        }
        let view = |m: Meta| Strided {
            data: &data[m.off as usize..],
            w: if m.varying { b } else { 1 },
            s: usize::from(m.varying),
        };
        // A small product of two varying inputs over every lane: one pass per input.
        let (sa, sb) = (view(ma), view(mb));
        let small = (full && !same && b > 1 && sa.s == 1 && sb.s == 1)
            .then(|| smallmat::dims(op, na, nb))
            .flatten();
        // Too many terms to list: direct loops (the same bits). Else, full lanes: the
        // terms grouped by input element; masked: in term order.
        let listed = if small.is_some() {
            Some((&[][..], &[][..]))
        } else if full {
            self.term_cache.grouped(op, na, nb)
        } else {
            self.term_cache.get(op, na, nb).map(|t| (t, &[][..]))
        };
        let direct = listed.is_none();
        let (terms, by_j) = listed.unwrap_or((&[][..], &[][..]));
        let vjp = |g: &[R], da: Option<&mut [R]>, db: Option<&mut [R]>| {
            if let Some(d) = small {
                let (a, bv) = (&sa.data[..na * b], &sb.data[..nb * b]);
                smallmat::vjp(d, a, bv, g, da, db, b, fresh);
            } else if direct {
                let act = (!full).then_some(act);
                direct_vjp(op, na, nb, sa, sb, g, da, db, b, fresh, act);
            } else if full {
                terms_vjp(terms, by_j, bil, sa, sb, g, da, db, b, fresh);
            } else {
                terms_vjp_masked(terms, bil, sa, sb, g, da, db, b, act);
            }
        };
        let gr = go..go + n_out * b;
        let adj = &mut self.adj.buf;
        match (ia, ib) {
            (Some(i), Some(_)) if same => {
                let [g, d] = regions(adj, [gr, i..i + na * b]);
                vjp(g, Some(&mut *d), None);
                vjp(g, None, Some(d));
            }
            (Some(i), Some(j)) => {
                let [g, da, db] = regions(adj, [gr, i..i + na * b, j..j + nb * b]);
                vjp(g, Some(da), Some(db));
            }
            (Some(i), None) => {
                let [g, da] = regions(adj, [gr, i..i + na * b]);
                vjp(g, Some(da), None);
            }
            (None, Some(j)) => {
                let [g, db] = regions(adj, [gr, j..j + nb * b]);
                vjp(g, None, Some(db));
            }
            (None, None) => {}
        }
    }

    /// Any other tensor node's adjoint, lane by lane through `TensorOp::vjp`. Part of [`Tape::node_vjp_on`], inlined into it.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn vjp_tensor_lanes(
        &mut self,
        lanes: &Lanes<R>,
        node: TapeNode,
        op: TensorOp,
        go: usize,
        b: usize,
        act: &[u32],
    ) {
        let mo = lanes.meta(node.out);
        let n_out = mo.n as usize;
        let data = &lanes.data[..];
        let (ma, mb) = (lanes.meta(node.a), lanes.meta(node.b));
        let na = ma.n as usize;
        let has_b = tensor_has_b(op);
        let nb = if has_b { mb.n as usize } else { 0 };
        let ia = self.adj.slot(ma, node.a);
        let ib = if has_b && !matches!(op, TensorOp::Det { .. } | TensorOp::LogDet { .. }) {
            self.adj.slot(mb, node.b)
        } else {
            None
        };
        if ia.is_none() && ib.is_none() {
            return;
        }
        let [ba, bb, bz, bg, bda, bdb] = &mut self.bufs;
        ba.resize(na, R::ZERO);
        bb.resize(nb, R::ZERO);
        bz.resize(n_out, R::ZERO);
        bg.resize(n_out, R::ZERO);
        bda.resize(na, R::ZERO);
        bdb.resize(nb, R::ZERO);
        let at = |m: Meta| {
            let (w, s) = stride(m, b);
            (m.off as usize, w, s)
        };
        let ((ao, aw, al), (bo, bw, bl), (oo, ow, ol)) = (at(ma), at(mb), at(mo));
        let adj = &mut self.adj.buf;
        for &l in act {
            let l = l as usize;
            let mut any = false;
            for e in 0..n_out {
                bg[e] = adj[go + e * b + l];
                any |= bg[e] != R::ZERO;
            }
            if !any {
                continue;
            }
            for e in 0..na {
                ba[e] = data[ao + e * aw + l * al];
            }
            for e in 0..nb {
                bb[e] = data[bo + e * bw + l * bl];
            }
            for e in 0..n_out {
                bz[e] = data[oo + e * ow + l * ol];
            }
            bda.iter_mut().for_each(|x| *x = R::ZERO);
            bdb.iter_mut().for_each(|x| *x = R::ZERO);
            op.vjp(ba, bb, bz, bg, bda, bdb);
            if let Some(i0) = ia {
                for e in 0..na {
                    adj[i0 + e * b + l] += bda[e];
                }
            }
            if let Some(i0) = ib {
                for e in 0..nb {
                    adj[i0 + e * b + l] += bdb[e];
                }
            }
        }
    }
}

impl<R: Real> Tape<R> {
    /// The adjoint of one `Choice` node (`at`: its start, option count and hardness) on the
    /// lanes `act`, from the weights and pick its forward kernel kept. A non-finite option takes
    /// no part in the straight-through logits' adjoint on that lane (the hard value never read it).
    fn choice_vjp(
        &mut self,
        lanes: &Lanes<R>,
        act: &[u32],
        node: TapeNode,
        go: usize,
        b: usize,
        at: (usize, usize, bool),
    ) {
        let (start, k, hard) = at;
        let tau = lanes.at(node.b, 0, 0);
        let il = self.adj.slot(lanes.meta(node.a), node.a);
        let mut slots = std::mem::take(&mut self.choice_slots);
        let mut ov = std::mem::take(&mut self.choice_o);
        slots.clear();
        for i in 0..k {
            let p = self.extra[start + 2 + i];
            let m = lanes.meta(p);
            slots.push((self.adj.slot(m, p), m.off as usize, stride(m, b).1));
        }
        let mw = lanes.meta(self.extra[start + 1]);
        let (wo, (ww, ws)) = (mw.off as usize, stride(mw, b));
        let data = &lanes.data;
        let adj = &mut self.adj.buf;
        for &l in act {
            let l = l as usize;
            let g = adj[go + l];
            if g == R::ZERO {
                continue;
            }
            let w = |i: usize| data[wo + i * ww + l * ws];
            ov.clear();
            ov.extend(slots.iter().map(|&(_, off, s)| data[off + l * s]));
            // The blend the logits' adjoint differentiates: every option (soft), the finite
            // ones renormalised (straight-through).
            let (mut wsum, mut s) = (R::ZERO, R::ZERO);
            for (i, &o) in ov.iter().enumerate() {
                if !hard || o.is_finite() {
                    wsum += w(i);
                    s += w(i) * o;
                }
            }
            if hard {
                if let Some(ix) = slots[w(k).f64() as usize].0 {
                    adj[ix + l] += g;
                }
                s /= wsum;
            } else {
                for (i, slot) in slots.iter().enumerate() {
                    if let Some(ix) = slot.0 {
                        adj[ix + l] += adjoint_term(g, w(i));
                    }
                }
                s = lanes.at(node.out, 0, l);
            }
            if let Some(il) = il {
                let c = g / (wsum * tau);
                for (i, &o) in ov.iter().enumerate() {
                    if !hard || o.is_finite() {
                        adj[il + i * b + l] += c * w(i) * (o - s);
                    }
                }
            }
        }
        self.choice_o = ov;
        self.choice_slots = slots;
    }
}

/// Sweeps a compiled step at one lane: its output adjoint at `go` and its inputs' at `ia` / `ib`
/// (`None`: no gradient) in `adj`, with the expressions and order of [`Tape::node_vjp_one`].
///
/// # Safety
/// `step` and `terms` are of a flat tape built for this recording and `data` reaches its extent
/// ([`crate::flat::forward`]'s contract); the output's and inputs' adjoint regions (their
/// [`Step::sizes`] from `go`, `ia`, `ib`) lie within `adj`.
#[inline(always)]
unsafe fn step_vjp<R: Real>(
    step: &Step,
    terms: &[FlatTerm<R>],
    data: &[R],
    adj: &mut [R],
    go: usize,
    (ia, ib): (Option<usize>, Option<usize>),
    scratch: &mut Vec<R>,
) {
    match *step {
        Step::Unary { op, out, a, n, .. } => {
            let (Some(ia), n) = (ia, n as usize) else {
                return;
            };
            let [g, d] = regions(adj, [go..go + n, ia..ia + n]);
            let (x, z) = (&data[a as usize..][..n], &data[out as usize..][..n]);
            each_unary!(op, op => {
                for (((d, &g), &x), &z) in d.iter_mut().zip(g.iter()).zip(x).zip(z) {
                    *d += adjoint_term(g, op.deriv(x, z));
                }
            });
        }
        Step::Binary {
            op,
            out,
            a,
            b,
            n,
            na,
            nb,
            ..
        } => {
            let adj = Cell::from_mut(adj).as_slice_of_cells();
            // SAFETY: within `adj` and `data` (this function's contract).
            let (g, da, db, x, y, z) = unsafe {
                let g = span(adj, go as u32, n);
                let da = ia.map(|i| span(adj, i as u32, na));
                let db = ib.map(|i| span(adj, i as u32, nb));
                let (x, y) = (span(data, a, na), span(data, b, nb));
                (g, da, db, x, y, span(data, out, n))
            };
            match (na == 1, nb == 1) {
                (false, false) => binary_one::<_, false, false>(op, g, x, y, z, da, db),
                (false, true) => binary_one::<_, false, true>(op, g, x, y, z, da, db),
                (true, false) => binary_one::<_, true, false>(op, g, x, y, z, da, db),
                (true, true) => binary_one::<_, true, true>(op, g, x, y, z, da, db),
            }
        }
        Step::Terms {
            bilinear,
            a,
            b,
            n_out,
            na,
            nb,
            bwd,
            fixed,
            ..
        } => {
            let (ab, sizes) = (
                (a as usize, b as usize),
                (n_out as usize, na as usize, nb as usize),
            );
            // SAFETY: within `adj` and `data` (this function's contract).
            if fixed != Fixed::No
                && unsafe { fixed_terms_vjp(fixed, data, adj, go, (ia, ib), ab, sizes) }
            {
                return;
            }
            let adj = Cell::from_mut(adj).as_slice_of_cells();
            let nb = if bilinear { nb } else { 0 };
            // SAFETY: within `adj` and `data`, and the terms' indices within these slices (this
            // function's contract; `FlatTape::checked`).
            unsafe {
                let g = span(adj, go as u32, n_out);
                let da = ia.map(|i| span(adj, i as u32, na));
                let db = ib.map(|i| span(adj, i as u32, nb));
                let (x, y) = (span(data, a, na), span(data, b, nb));
                let terms = terms.get_unchecked(bwd.0 as usize..bwd.1 as usize);
                flat_terms_vjp(bilinear, terms, g, (x, y), (da, db), ia == ib);
            }
        }
        Step::Det {
            op,
            a,
            t,
            z,
            na,
            nt,
            n_out,
            ..
        } => {
            let (Some(ia), na, n_out) = (ia, na as usize, n_out as usize) else {
                return;
            };
            let [g, da] = regions(adj, [go..go + n_out, ia..ia + na]);
            let (a, t) = (
                &data[a as usize..][..na],
                &data[t as usize..][..nt as usize],
            );
            let z = &data[z as usize..][..1];
            det_family_vjp(op, a, t, z, g, da, false, 1, scratch);
        }
        Step::Node => {}
    }
}

/// A [`Fixed`] step's sweep (operands at `a` and `b` in `data`, adjoints at `go`, `ia` and `ib`
/// in `adj`); `false`, with nothing done, when the adjoint regions overlap (one payload as both
/// inputs) and the term loop must run.
///
/// # Safety
/// The operands lie within `data` and the adjoint regions within `adj` ([`step_vjp`]'s contract).
#[inline(always)]
unsafe fn fixed_terms_vjp<R: Real>(
    fixed: Fixed,
    data: &[R],
    adj: &mut [R],
    go: usize,
    (ia, ib): (Option<usize>, Option<usize>),
    (a, b): (usize, usize),
    (n_out, na, nb): (usize, usize, usize),
) -> bool {
    let apart = |p: &std::ops::Range<usize>, q: &std::ops::Range<usize>| {
        p.end <= q.start || q.end <= p.start
    };
    let rg = go..go + n_out;
    // SAFETY: in bounds (this function's contract); the regions are checked apart before each
    // split.
    unsafe {
        let (x, y) = (
            span(data, a as u32, na as u32),
            span(data, b as u32, nb as u32),
        );
        match (ia.map(|i| i..i + na), ib.map(|i| i..i + nb)) {
            (Some(ra), Some(rb)) if apart(&rg, &ra) && apart(&rg, &rb) && apart(&ra, &rb) => {
                let [g, da, db] = adj.get_disjoint_unchecked_mut([rg, ra, rb]);
                vjp_fixed(fixed, g, (x, y), (Some(da), Some(db)))
            }
            (Some(ra), None) if apart(&rg, &ra) => {
                let [g, da] = adj.get_disjoint_unchecked_mut([rg, ra]);
                vjp_fixed(fixed, g, (x, y), (Some(da), None))
            }
            (None, Some(rb)) if apart(&rg, &rb) => {
                let [g, db] = adj.get_disjoint_unchecked_mut([rg, rb]);
                vjp_fixed(fixed, g, (x, y), (None, Some(db)))
            }
            (None, None) => true,
            _ => false,
        }
    }
}

/// The adjoint cells of a node's two inputs at one lane (`None`: it takes no gradient).
type InputAdjoints<'a, R> = (Option<&'a [Cell<R>]>, Option<&'a [Cell<R>]>);

/// The adjoints of a bilinear (or linear) op's inputs at one lane from its terms in sweep
/// order, with the branches and expressions of [`Tape::node_vjp_one`]: one payload as both
/// inputs (`same`) takes all of a's terms, then all of b's.
///
/// # Safety
/// Every term's `o`, `i` and `j` lie within `g`, `x` and `da`, and `y` and `db`.
#[inline(always)]
unsafe fn flat_terms_vjp<R: Real>(
    bilinear: bool,
    terms: &[FlatTerm<R>],
    g: &[Cell<R>],
    (x, y): (&[R], &[R]),
    (da, db): InputAdjoints<'_, R>,
    same: bool,
) {
    // SAFETY (every `at` below): the terms' indices are in bounds (this function's contract).
    let each = |f: &mut dyn FnMut(u32, u32, u32, R)| {
        for &(o, i, j, c) in terms {
            f(o, i, j, c);
        }
    };
    let add = |d: &Cell<R>, v: R| d.set(d.get() + v);
    match (da, db) {
        (Some(da), Some(db)) if same => unsafe {
            each(&mut |o, i, j, c| add(at(da, i), c * at(g, o).get() * *at(y, j)));
            each(&mut |o, i, j, c| add(at(db, j), c * at(g, o).get() * *at(x, i)));
        },
        (Some(da), Some(db)) => each(&mut |o, i, j, c| unsafe {
            let g = at(g, o).get();
            add(at(da, i), c * g * *at(y, j));
            add(at(db, j), c * g * *at(x, i));
        }),
        (Some(da), None) if bilinear => each(&mut |o, i, j, c| unsafe {
            add(at(da, i), c * at(g, o).get() * *at(y, j));
        }),
        (Some(da), None) => each(&mut |o, i, _, c| unsafe { add(at(da, i), c * at(g, o).get()) }),
        (None, Some(db)) => each(&mut |o, i, j, c| unsafe {
            add(at(db, j), c * at(g, o).get() * *at(x, i));
        }),
        (None, None) => {}
    }
}

/// The softmax weights `w` of lane `l` of a `soft-choice` (z = (logits + noise) / tau) and the
/// index of the largest z (the first on ties; a NaN never wins).
pub(crate) fn choice_weights<R: Real>(
    lanes: &Lanes<R>,
    logits: PayloadId,
    noise: PayloadId,
    tau: R,
    l: usize,
    w: &mut Vec<R>,
) -> usize {
    let k = lanes.n_elems(logits);
    let z = |i: usize| (lanes.at(logits, i, l) + lanes.at(noise, i, l)) / tau;
    softmax_into(k, z, w)
}

/// `w` = softmax of `z(0) … z(k − 1)`, and the index of the largest z (the first on ties; a NaN
/// never wins): the one arithmetic of every soft-choice weight.
#[inline]
pub(crate) fn softmax_into<R: Real>(k: usize, z: impl Fn(usize) -> R, w: &mut Vec<R>) -> usize {
    w.clear();
    let (mut best, mut top) = (0, R::NEG_INFINITY);
    for i in 0..k {
        let zi = z(i);
        if zi > top {
            (best, top) = (i, zi);
        }
        w.push(zi);
    }
    let mut sum = R::ZERO;
    for x in w.iter_mut() {
        *x = (*x - top).exp();
        sum += *x;
    }
    for x in w.iter_mut() {
        *x /= sum;
    }
    best
}

/// Calls `f(o, i, j, coeff)` for each term of a bilinear/linear op in the order of
/// [`TensorOp::terms`]: the common shapes as plain loops, the others from `table`.
#[inline(always)]
fn each_term<R: Real>(
    table: &mut TermTable,
    op: TensorOp,
    na: usize,
    nb: usize,
    mut f: impl FnMut(usize, usize, usize, R),
) {
    if op.direct(na, nb, DIRECT_TERMS) {
        // Too many terms to list: the same terms, each element's in the same order, from loops.
        linalg::each_term(op, na, nb, f);
        return;
    }
    match op {
        TensorOp::MatMul { m, k, n } => {
            let (m, k, n) = (m as usize, k as usize, n as usize);
            for r in 0..m {
                for c in 0..n {
                    for s in 0..k {
                        f(r * n + c, r * k + s, s * n + c, R::ONE);
                    }
                }
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
        TensorOp::Dot => (0..na).for_each(|i| f(0, i, i, R::ONE)),
        _ => {
            for t in table.get(op, na, nb).unwrap_or_default() {
                f(t.o as usize, t.i as usize, t.j as usize, R::of(t.coeff));
            }
        }
    }
}

/// One-lane `Binary` VJP over the output's elements; `SA` / `SB` when that operand is a scalar
/// broadcast over them. `da` and `db` may be the same cells (then a's term goes first).
#[inline(always)]
fn binary_one<R: Real, const SA: bool, const SB: bool>(
    op: Binary,
    g: &[Cell<R>],
    x: &[R],
    y: &[R],
    z: &[R],
    da: Option<&[Cell<R>]>,
    db: Option<&[Cell<R>]>,
) {
    let n = z.len().min(g.len());
    if n == 0 {
        return;
    }
    let ix = |e: usize, s: bool| if s { 0 } else { e };
    // Sliced to what the loop reads, so its indexing needs no checks.
    let (g, z) = (&g[..n], &z[..n]);
    let (x, y) = (&x[..ix(n - 1, SA) + 1], &y[..ix(n - 1, SB) + 1]);
    let da = da.map(|d| &d[..ix(n - 1, SA) + 1]);
    let db = db.map(|d| &d[..ix(n - 1, SB) + 1]);
    each_binary!(op, op => {
        for e in 0..n {
            let g = g[e].get();
            let (dx, dy) = op.partials(x[ix(e, SA)], y[ix(e, SB)], z[e]);
            if let Some(da) = da {
                let d = &da[ix(e, SA)];
                d.set(d.get() + adjoint_term(g, dx));
            }
            if let Some(db) = db {
                let d = &db[ix(e, SB)];
                d.set(d.get() + adjoint_term(g, dy));
            }
        }
    });
}

/// `Binary` VJP of one element over `b` contiguous lanes: the output adjoint at `gr`, the input
/// adjoints at `ra` / `rb` (the same range when both inputs are one payload, then a's term is
/// added before b's on each lane); `first` marks an input region not yet written (its old
/// floats count as zero), `xyz` the operands and output.
#[inline]
#[allow(clippy::too_many_arguments)] // the three adjoint ranges, their flags, the values, the width
fn binary_lanes<R: Real>(
    op: Binary,
    adj: &mut [R],
    gr: std::ops::Range<usize>,
    ra: Option<std::ops::Range<usize>>,
    rb: Option<std::ops::Range<usize>>,
    first: [bool; 2],
    xyz: [&[R]; 3],
    b: usize,
) {
    crate::widest::with_widest_vectors(BinaryLanes {
        op,
        adj,
        gr,
        ra,
        rb,
        first,
        xyz,
        b,
    });
}

/// [`binary_lanes`]' arguments, run in the widest vectors (`widest`).
struct BinaryLanes<'a, R: Real> {
    op: Binary,
    adj: &'a mut [R],
    gr: std::ops::Range<usize>,
    ra: Option<std::ops::Range<usize>>,
    rb: Option<std::ops::Range<usize>>,
    first: [bool; 2],
    xyz: [&'a [R]; 3],
    b: usize,
}

impl<R: Real> crate::widest::WideKernel for BinaryLanes<'_, R> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let BinaryLanes {
            op,
            adj,
            gr,
            ra,
            rb,
            first,
            xyz,
            b,
        } = self;
        // The flags as constants, so the lane loops carry no per-lane select.
        match first {
            [false, false] => binary_lanes_k::<_, false, false>(op, adj, gr, ra, rb, xyz, b),
            [true, false] => binary_lanes_k::<_, true, false>(op, adj, gr, ra, rb, xyz, b),
            [false, true] => binary_lanes_k::<_, false, true>(op, adj, gr, ra, rb, xyz, b),
            [true, true] => binary_lanes_k::<_, true, true>(op, adj, gr, ra, rb, xyz, b),
        }
    }
}

/// [`binary_lanes`] where one operand is one value `v` on every lane and takes no gradient
/// (`ua`: it is a): the other's adjoint at `r` (`first`: not yet written) from its lanes `xs`,
/// with the arithmetic of that operand broadcast into a buffer.
#[inline]
#[allow(clippy::too_many_arguments)] // the adjoint ranges, the flag, the values
fn binary_uni<R: Real>(
    op: Binary,
    adj: &mut [R],
    gr: std::ops::Range<usize>,
    r: std::ops::Range<usize>,
    first: bool,
    (ua, v): (bool, R),
    xs: &[R],
    z: &[R],
) {
    crate::widest::with_widest_vectors(BinaryUni {
        op,
        adj,
        regions: (gr, r),
        first,
        uniform: (ua, v),
        xs,
        z,
    });
}

/// [`binary_uni`]'s arguments, run in the widest vectors (`widest`).
struct BinaryUni<'a, R: Real> {
    op: Binary,
    adj: &'a mut [R],
    regions: (std::ops::Range<usize>, std::ops::Range<usize>),
    first: bool,
    uniform: (bool, R),
    xs: &'a [R],
    z: &'a [R],
}

impl<R: Real> crate::widest::WideKernel for BinaryUni<'_, R> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let BinaryUni {
            op,
            adj,
            regions: (gr, r),
            first,
            uniform: (ua, v),
            xs,
            z,
        } = self;
        match (first, ua) {
            (false, false) => binary_uni_k::<_, false, false>(op, adj, gr, r, v, xs, z),
            (true, false) => binary_uni_k::<_, true, false>(op, adj, gr, r, v, xs, z),
            (false, true) => binary_uni_k::<_, false, true>(op, adj, gr, r, v, xs, z),
            (true, true) => binary_uni_k::<_, true, true>(op, adj, gr, r, v, xs, z),
        }
    }
}

/// [`binary_uni`] with its flags fixed (`F`: the region is fresh; `UA`: a is the uniform one).
#[inline(always)]
fn binary_uni_k<R: Real, const F: bool, const UA: bool>(
    op: Binary,
    adj: &mut [R],
    gr: std::ops::Range<usize>,
    r: std::ops::Range<usize>,
    v: R,
    xs: &[R],
    z: &[R],
) {
    let [g, d] = regions(adj, [gr, r]);
    let b = d.len();
    let (g, xs, z) = (&g[..b], &xs[..b], &z[..b]);
    // As in `binary_lanes_k`: a zero the optimiser cannot see through.
    let zero = std::hint::black_box(R::ZERO);
    each_binary!(op, op => {
        for l in 0..b {
            let (x, y) = if UA { (v, xs[l]) } else { (xs[l], v) };
            let (dx, dy) = op.partials(x, y, z[l]);
            let t = adjoint_term(g[l], if UA { dy } else { dx });
            d[l] = if F { zero } else { d[l] } + t;
        }
    });
}

/// [`binary_uni`] of every element of an output of `n` = 2 … 4 elements at once, where the
/// varying operand is one element broadcast over them: the uniform operand's `n` values `vs`
/// (`ua`: it is a), the adjoint `g` and output `z` of `n` elements of `b` lanes, the varying
/// operand's lanes `xs` and its one-element adjoint `d` (`first`: not yet written). Per lane
/// `d = (((d + t₀) + t₁) + …)`, the terms in element order: the per-element passes' sums.
#[inline]
fn binary_uni_sum<R: Real>(
    op: Binary,
    g: &[R],
    d: &mut [R],
    first: bool,
    (ua, vs): (bool, &[R]),
    xs: &[R],
    z: &[R],
) {
    crate::widest::with_widest_vectors(BinaryUniSum {
        op,
        g,
        d,
        first,
        uniform: (ua, vs),
        xs,
        z,
    });
}

/// [`binary_uni_sum`]'s arguments, run in the widest vectors (`widest`).
struct BinaryUniSum<'a, R: Real> {
    op: Binary,
    g: &'a [R],
    d: &'a mut [R],
    first: bool,
    uniform: (bool, &'a [R]),
    xs: &'a [R],
    z: &'a [R],
}

impl<R: Real> crate::widest::WideKernel for BinaryUniSum<'_, R> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let BinaryUniSum {
            op,
            g,
            d,
            first,
            uniform: (ua, vs),
            xs,
            z,
        } = self;
        binary_uni_sum_n(op, g, d, first, (ua, vs), xs, z);
    }
}

/// [`binary_uni_sum`] with its flags and element count made constants.
#[inline(always)]
fn binary_uni_sum_n<R: Real>(
    op: Binary,
    g: &[R],
    d: &mut [R],
    first: bool,
    (ua, vs): (bool, &[R]),
    xs: &[R],
    z: &[R],
) {
    macro_rules! go {
        ($n:literal) => {
            match (first, ua) {
                (false, false) => binary_uni_sum_k::<_, false, false, $n>(op, g, d, vs, xs, z),
                (true, false) => binary_uni_sum_k::<_, true, false, $n>(op, g, d, vs, xs, z),
                (false, true) => binary_uni_sum_k::<_, false, true, $n>(op, g, d, vs, xs, z),
                (true, true) => binary_uni_sum_k::<_, true, true, $n>(op, g, d, vs, xs, z),
            }
        };
    }
    match vs.len() {
        2 => go!(2),
        3 => go!(3),
        4 => go!(4),
        _ => {}
    }
}

/// [`binary_uni_sum`] with its flags and element count fixed.
#[inline(always)]
fn binary_uni_sum_k<R: Real, const F: bool, const UA: bool, const N: usize>(
    op: Binary,
    g: &[R],
    d: &mut [R],
    vs: &[R],
    xs: &[R],
    z: &[R],
) {
    let b = d.len();
    // Plain loops rather than `array::from_fn`, which the wide copies need not inline (the lane
    // loop would then keep a bounds check per lane).
    let (mut vs_n, mut g_n, mut z_n) = ([R::ZERO; N], [&g[..0]; N], [&z[..0]; N]);
    for e in 0..N {
        (vs_n[e], g_n[e], z_n[e]) = (vs[e], &g[e * b..][..b], &z[e * b..][..b]);
    }
    let (vs, g, z) = (vs_n, g_n, z_n);
    let xs = &xs[..b];
    // As in `binary_lanes_k`: a zero the optimiser cannot see through.
    let zero = std::hint::black_box(R::ZERO);
    each_binary!(op, op => {
        for l in 0..b {
            let mut acc = if F { zero } else { d[l] };
            for e in 0..N {
                let (x, y) = if UA { (vs[e], xs[l]) } else { (xs[l], vs[e]) };
                let (dx, dy) = op.partials(x, y, z[e][l]);
                acc += adjoint_term(g[e][l], if UA { dy } else { dx });
            }
            d[l] = acc;
        }
    });
}

/// [`binary_lanes`] with the `first` flags of a's and b's regions fixed (`FA`, `FB`).
#[inline(always)]
fn binary_lanes_k<R: Real, const FA: bool, const FB: bool>(
    op: Binary,
    adj: &mut [R],
    gr: std::ops::Range<usize>,
    ra: Option<std::ops::Range<usize>>,
    rb: Option<std::ops::Range<usize>>,
    xyz: [&[R]; 3],
    b: usize,
) {
    let (x, y, z) = (&xyz[0][..b], &xyz[1][..b], &xyz[2][..b]);
    // A fresh region's old value: a zero the optimiser cannot see through, so `zero + t` is
    // computed as the add it stands for (folding a known `0.0 +` into `t` can rewrite how `t`
    // is formed, and with it the sign of a NaN).
    let zero = std::hint::black_box(R::ZERO);
    let base = |fresh: bool, d: R| if fresh { zero } else { d };
    each_binary!(op, op => match (ra, rb) {
        (Some(ra), Some(rb)) if ra == rb => {
            let [g, d] = regions(adj, [gr, ra]);
            let (g, d) = (&g[..b], &mut d[..b]);
            for l in 0..b {
                let (dx, dy) = op.partials(x[l], y[l], z[l]);
                d[l] = base(FA, d[l]) + adjoint_term(g[l], dx);
                d[l] += adjoint_term(g[l], dy);
            }
        }
        (Some(ra), Some(rb)) => {
            let [g, da, db] = regions(adj, [gr, ra, rb]);
            let (g, da, db) = (&g[..b], &mut da[..b], &mut db[..b]);
            for l in 0..b {
                let (dx, dy) = op.partials(x[l], y[l], z[l]);
                da[l] = base(FA, da[l]) + adjoint_term(g[l], dx);
                db[l] = base(FB, db[l]) + adjoint_term(g[l], dy);
            }
        }
        (Some(ra), None) => {
            let [g, da] = regions(adj, [gr, ra]);
            let (g, da) = (&g[..b], &mut da[..b]);
            for l in 0..b {
                da[l] = base(FA, da[l]) + adjoint_term(g[l], op.partials(x[l], y[l], z[l]).0);
            }
        }
        (None, Some(rb)) => {
            let [g, db] = regions(adj, [gr, rb]);
            let (g, db) = (&g[..b], &mut db[..b]);
            for l in 0..b {
                db[l] = base(FB, db[l]) + adjoint_term(g[l], op.partials(x[l], y[l], z[l]).1);
            }
        }
        (None, None) => {}
    });
}

/// `Unary` VJP over contiguous floats: `d[l] = base + g[l] · op′(x[l], z[l])` (the adjoint term),
/// `base` the old `d[l]`, or zero when the region is fresh (`FRESH`). Indexed loops over slices
/// of one length, so they vectorise.
#[inline(always)]
fn unary_lanes<R: Real, const FRESH: bool>(op: Unary, g: &[R], x: &[R], z: &[R], d: &mut [R]) {
    let n = d.len();
    let (g, x, z) = (&g[..n], &x[..n], &z[..n]);
    // As in `binary_lanes_k`: a zero the optimiser cannot see through, so `zero + t` is the add
    // it stands for.
    let zero = std::hint::black_box(R::ZERO);
    // sin′ = cos and cos′ = −sin through the vectorised lane kernels, a block at a time.
    let trig = match op {
        Unary::Sin => Some((Elementary::Cos, false)),
        Unary::Cos => Some((Elementary::Sin, true)),
        _ => None,
    };
    if let Some((f, negate)) = trig {
        let mut dv = [R::ZERO; DERIV_BLOCK];
        for s in (0..n).step_by(DERIV_BLOCK) {
            let m = DERIV_BLOCK.min(n - s);
            R::elementary_lanes(f, &x[s..s + m], &mut dv[..m]);
            for l in 0..m {
                let v = if negate { -dv[l] } else { dv[l] };
                let t = adjoint_term(g[s + l], v);
                d[s + l] = if FRESH { zero } else { d[s + l] } + t;
            }
        }
        return;
    }
    each_unary!(op, op => {
        for l in 0..n {
            let t = adjoint_term(g[l], op.deriv(x[l], z[l]));
            d[l] = if FRESH { zero } else { d[l] } + t;
        }
    });
}

/// Lanes per block of the derivatives computed apart in [`unary_lanes`].
const DERIV_BLOCK: usize = 64;

/// Adjoint storage of one reverse sweep. A payload's region (its `n` elements of B lanes) is
/// allocated, zeroed, the first time something accumulates into it, so a payload no path reaches
/// costs nothing and a node whose output never got an adjoint (exactly zero) is skipped. Once the
/// node that produced a payload has been swept, nothing earlier on the tape reads its adjoint, so
/// its region goes back to a free list for the next payload of the same size: the live regions
/// stay few and cache-resident whatever the tape length.
#[derive(Clone, Debug, Default)]
struct Adjoints<R: Real = f64> {
    buf: AlignedVec<R>,
    /// Per payload: first float of its region, or `NO_ADJ` while it has none.
    off: Vec<u32>,
    /// End of the bump-allocated part of `buf`.
    top: usize,
    /// Everything past this in `buf` is zero (as of the last reset).
    dirty: usize,
    /// Lanes per element.
    b: usize,
    /// Released regions by element count (below `REUSE_MAX` elements).
    free: Vec<Vec<u32>>,
    /// `buf` was all zero at reset (one lane): allocation is a bump, nothing is reused.
    prezeroed: bool,
}

const NO_ADJ: u32 = u32::MAX;

/// Regions of this many elements or more are never reused (a rare big payload).
const REUSE_MAX: usize = 64;

impl<R: Real> Adjoints<R> {
    fn reset(&mut self, n_payloads: usize, b: usize) {
        self.off.clear();
        self.off.resize(n_payloads, NO_ADJ);
        // Regions are carved below `top`, so `buf[dirty..]` is still zero.
        self.dirty = self.dirty.max(self.top);
        self.prezeroed = b == 1;
        if self.prezeroed {
            self.buf[..self.dirty].iter_mut().for_each(|x| *x = R::ZERO);
            self.dirty = 0;
        }
        self.top = 0;
        self.b = b;
        self.free.iter_mut().for_each(Vec::clear);
    }

    /// Lays the adjoints out as the payloads are at one lane (see [`crate::flat::SweepPlan`]):
    /// `len` zeroed floats. `off` is left as it was: [`Tape::grad_of`] reads the plan's inputs.
    fn flat_layout(&mut self, len: usize) {
        let dirty = self.dirty.max(self.top).max(len);
        if self.buf.len() < dirty {
            self.buf.resize(dirty, R::ZERO);
        }
        self.buf[..dirty].fill(R::ZERO);
        self.dirty = len;
        self.top = 0;
        self.b = 1;
        self.prezeroed = true;
    }

    /// The region of `p`, if something accumulated into it.
    #[inline]
    fn get(&self, p: PayloadId) -> Option<usize> {
        let o = self.off[p.0 as usize];
        (o != NO_ADJ).then_some(o as usize)
    }

    /// The region of `p` (meta `m`) to accumulate into, allocated zeroed on first use; `None`
    /// when `p` takes no gradient.
    #[inline(always)]
    fn slot(&mut self, m: Meta, p: PayloadId) -> Option<usize> {
        self.slot_n(p, m.n as usize, m.grad)
    }

    /// [`Adjoints::slot`] with the payload's element count and gradient flag given.
    #[inline(always)]
    fn slot_n(&mut self, p: PayloadId, n: usize, grad: bool) -> Option<usize> {
        if !grad {
            return None;
        }
        let o = self.off[p.0 as usize];
        if o != NO_ADJ {
            return Some(o as usize);
        }
        let len = n * self.b;
        if self.prezeroed && self.top + len <= self.buf.len() {
            let o = self.top;
            self.top += len;
            self.off[p.0 as usize] = o as u32;
            return Some(o);
        }
        Some(self.alloc(p, n, true))
    }

    /// Like [`Adjoints::slot`], but a region allocated here is not zeroed: the flag says so, and
    /// the caller then writes (rather than adds) every float of it on every lane.
    #[inline(always)]
    fn slot_fresh(&mut self, m: Meta, p: PayloadId) -> Option<(usize, bool)> {
        if !m.grad {
            return None;
        }
        match self.get(p) {
            Some(o) => Some((o, false)),
            None if self.prezeroed => Some((self.alloc(p, m.n as usize, true), false)),
            None => Some((self.alloc(p, m.n as usize, false), true)),
        }
    }

    /// Zeroes the fresh region at `o` (`n` elements) that a caller will only add into.
    #[inline]
    fn zero_if(&mut self, fresh: bool, o: usize, n: usize) {
        if fresh {
            let r = self.range(o, 0, n);
            self.buf[r].fill(R::ZERO);
        }
    }

    #[inline(never)]
    fn alloc(&mut self, p: PayloadId, n: usize, zero: bool) -> usize {
        let len = n * self.b;
        if self.prezeroed {
            // One lane: the whole buffer was zeroed at reset (a few thousand floats), so a bump
            // allocation needs no fill and regions are never reused.
            let o = self.top;
            self.top += len;
            if self.top > self.buf.len() {
                self.buf.resize(self.top, R::ZERO);
            }
            self.off[p.0 as usize] = o as u32;
            return o;
        }
        let o = match self.free.get_mut(n).and_then(Vec::pop) {
            Some(o) => o as usize,
            None => {
                let o = crate::lanes::line_start::<R>(self.top, true, self.b);
                self.top = o + len;
                if self.top > self.buf.len() {
                    self.buf.resize(self.top, R::ZERO);
                }
                o
            }
        };
        if zero {
            self.buf[o..o + len].fill(R::ZERO);
        }
        self.off[p.0 as usize] = o as u32;
        o
    }

    /// Gives back the region of `p` (`n` elements at `o`): its producer has been swept.
    #[inline]
    fn release(&mut self, p: PayloadId, o: usize, n: usize) {
        if self.prezeroed {
            return;
        }
        self.off[p.0 as usize] = NO_ADJ;
        if n < REUSE_MAX {
            if self.free.len() <= n {
                self.free.resize_with(n + 1, Vec::new);
            }
            self.free[n].push(o as u32);
        }
    }

    /// The element range `e0 .. e0 + n` of the region at `o`.
    #[inline]
    fn range(&self, o: usize, e0: usize, n: usize) -> std::ops::Range<usize> {
        o + e0 * self.b..o + (e0 + n) * self.b
    }
}

/// The term lists of the bilinear/linear ops the sweep meets, keyed by op and input sizes packed
/// into one integer, so a lookup is a short scan of integer compares.
#[derive(Clone, Debug, Default)]
struct TermTable {
    keys: Vec<u128>,
    /// `(start, len)` in `terms` per key: the terms in order, then grouped by `i`, then by `j`
    /// (see [`group_terms`]), each `len` long.
    spans: Vec<(u32, u32)>,
    terms: Vec<Term>,
    scratch: Vec<Term>,
    by_i: Vec<Term>,
    by_j: Vec<Term>,
}

impl TermTable {
    /// The terms of `op` with inputs of `na` and `nb` elements; `None` above [`DIRECT_TERMS`].
    fn get(&mut self, op: TensorOp, na: usize, nb: usize) -> Option<&[Term]> {
        let (start, len) = self.span(op, na, nb)?;
        Some(&self.terms[start..start + len])
    }

    /// The terms of `op` grouped by `i` and by `j` (for the adjoints of `a` and `b`); `None`
    /// above [`DIRECT_TERMS`].
    fn grouped(&mut self, op: TensorOp, na: usize, nb: usize) -> Option<(&[Term], &[Term])> {
        let (start, len) = self.span(op, na, nb)?;
        let t = &self.terms[start + len..start + 3 * len];
        Some(t.split_at(len))
    }

    /// `(start, len)` of the terms of `op` in `terms`, computed on first use; `None` when there
    /// are more than [`DIRECT_TERMS`] (looked at on a miss only: the sweep then loops directly).
    fn span(&mut self, op: TensorOp, na: usize, nb: usize) -> Option<(usize, usize)> {
        let key = term_key(op, na, nb);
        let i = match self.keys.iter().position(|&k| k == key) {
            Some(i) => i,
            None => {
                if op.direct(na, nb, DIRECT_TERMS) {
                    return None;
                }
                if self.keys.len() >= 64 {
                    self.keys.clear();
                    self.spans.clear();
                    self.terms.clear();
                }
                op.terms(na, nb, &mut self.scratch);
                group_terms(&self.scratch, &mut self.by_i, &mut self.by_j);
                let start = self.terms.len() as u32;
                self.terms.extend_from_slice(&self.scratch);
                self.terms.extend_from_slice(&self.by_i);
                self.terms.extend_from_slice(&self.by_j);
                self.keys.push(key);
                self.spans.push((start, self.scratch.len() as u32));
                self.keys.len() - 1
            }
        };
        let (start, len) = self.spans[i];
        Some((start as usize, len as usize))
    }
}

/// `op` and its input sizes as one integer: tag, up to three dimensions, `na`, `nb`.
fn term_key(op: TensorOp, na: usize, nb: usize) -> u128 {
    let (tag, d) = match op {
        TensorOp::Dot => (1, [0; 3]),
        TensorOp::Sum => (2, [0; 3]),
        TensorOp::Norm => (3, [0; 3]),
        TensorOp::Normalize => (4, [0; 3]),
        TensorOp::Cross => (5, [0; 3]),
        TensorOp::MatVec { m, n } => (6, [m, n, 0]),
        TensorOp::MatMul { m, k, n } => (7, [m, k, n]),
        TensorOp::Transpose { r, c } => (8, [r, c, 0]),
        TensorOp::Trace { r, c } => (9, [r, c, 0]),
        TensorOp::Outer => (10, [0; 3]),
        TensorOp::Det { m } => (11, [m, 0, 0]),
        TensorOp::LogDet { m, abs } => (12, [m, u16::from(abs), 0]),
        TensorOp::Inv { m } => (13, [m, 0, 0]),
    };
    tag | u128::from(d[0]) << 8
        | u128::from(d[1]) << 24
        | u128::from(d[2]) << 40
        | u128::from(na as u32) << 56
        | u128::from(nb as u32) << 88
}

/// Disjoint mutable views of adjoint regions (distinct payloads never share floats).
#[inline]
fn regions<R: Real, const N: usize>(
    buf: &mut [R],
    r: [std::ops::Range<usize>; N],
) -> [&mut [R]; N] {
    buf.get_disjoint_mut(r)
        .expect("adjoint regions of distinct payloads are disjoint")
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

/// The merges of divergent branches on a tape: each `Select` of two different payloads (a select
/// of a payload with itself is an identity, swept as a node).
///
/// Lane decomposition, bit for bit: a one-lane run has no select (its lane took one branch), so
/// every consumer of a branch's value accumulates straight into that value's adjoint, in its own
/// order. The B-lane sweep does the same. Before a node that reads a merged payload is swept,
/// each active lane's cells of that payload are loaded with the adjoint of the payload the lane
/// took (its source, followed through nested merges); the node accumulates into them as it would
/// into the source; after it they are stored back. Where a lane's source is also read by the node
/// another way (directly, or through a second merged input), the node is instead swept once per
/// group of lanes with the same sources, as the node reading those directly. Either way no sum is
/// grouped differently than alone, and a select node has nothing left to pass.
#[derive(Clone, Debug, Default)]
struct Merges {
    /// Per payload: its merge's row in `sources`, or `NOT_MERGED`.
    row_of: Vec<u32>,
    /// Per merge, per lane: the source payload's id, or `NOT_MERGED` for a lane neither side had.
    sources: Vec<u32>,
    /// Per merge: its lanes grouped by source, `(source, start, len)` into `seg_lanes`, in
    /// `segs[seg_of[row] .. seg_of[row + 1]]`.
    segs: Vec<(PayloadId, u32, u32)>,
    seg_lanes: Vec<u32>,
    seg_of: Vec<u32>,
    /// `(tape length, lanes, masks)` the rows were built for (a replay sweeps the same tape
    /// again; a blocked replay sweeps it per block, each with masks of its own).
    built: Option<(usize, usize, usize)>,
    /// Scratch of one node's sweep: its inputs, its merged inputs, one lane's sources, every
    /// live lane's sources and place among the active lanes, one group's lanes, the sort order.
    inputs: Vec<PayloadId>,
    merged: Vec<PayloadId>,
    key: Vec<PayloadId>,
    keys: Vec<PayloadId>,
    group_of: Vec<u32>,
    group_lanes: Vec<u32>,
    order: Vec<u32>,
}

const NOT_MERGED: u32 = u32::MAX;

impl Merges {
    /// Indexes the merges of `nodes` (once per recorded tape); whether there is any. With the
    /// planted merge bug the selects are swept as nodes instead.
    fn index(&mut self, nodes: &[TapeNode], masks: &LaneMask, n_payloads: usize, b: usize) -> bool {
        if crate::planted::is_planted(crate::planted::Bug::SelectMerge) {
            self.built = None;
            return false;
        }
        let key = (nodes.len(), b, std::ptr::from_ref(masks) as usize);
        if self.built == Some(key) {
            return !self.sources.is_empty();
        }
        self.row_of.clear();
        self.row_of.resize(n_payloads, NOT_MERGED);
        self.sources.clear();
        self.segs.clear();
        self.seg_lanes.clear();
        self.seg_of.clear();
        for n in nodes {
            let TapeOp::Select { then } = n.op else {
                continue;
            };
            if n.a == n.b {
                continue;
            }
            let row = self.sources.len();
            self.sources.resize(row + b, NOT_MERGED);
            // As the forward kernel writes them: the else lanes last.
            for (side, set) in [(n.a, then), (n.b, n.mask)] {
                let from = self.row_of[side.0 as usize];
                for &l in masks.lanes(set) {
                    let l = l as usize;
                    self.sources[row + l] = if from == NOT_MERGED {
                        side.0
                    } else {
                        self.sources[from as usize + l]
                    };
                }
            }
            self.row_of[n.out.0 as usize] = row as u32;
            self.group_row(row, b);
        }
        self.seg_of.push(self.segs.len() as u32);
        self.built = Some(key);
        !self.sources.is_empty()
    }

    /// Groups the lanes of the merge at `row` by source (ascending lanes within a source).
    fn group_row(&mut self, row: usize, b: usize) {
        self.seg_of.push(self.segs.len() as u32);
        let from = self.seg_lanes.len();
        let lanes = (0..b as u32).filter(|&l| self.sources[row + l as usize] != NOT_MERGED);
        self.seg_lanes.extend(lanes);
        let sources = &self.sources[row..row + b];
        self.seg_lanes[from..].sort_unstable_by_key(|&l| (sources[l as usize], l));
        let mut i = from;
        while i < self.seg_lanes.len() {
            let src = sources[self.seg_lanes[i] as usize];
            let mut j = i + 1;
            while j < self.seg_lanes.len() && sources[self.seg_lanes[j] as usize] == src {
                j += 1;
            }
            self.segs.push((PayloadId(src), i as u32, (j - i) as u32));
            i = j;
        }
    }

    /// The lanes of the merged payload `p` grouped by source.
    #[inline]
    fn segments(&self, p: PayloadId) -> &[(PayloadId, u32, u32)] {
        let row = self.row_of[p.0 as usize] as usize;
        let k = row / self.b();
        &self.segs[self.seg_of[k] as usize..self.seg_of[k + 1] as usize]
    }

    /// Lanes per merge row.
    #[inline]
    fn b(&self) -> usize {
        self.built.map_or(1, |(_, b, _)| b.max(1))
    }

    /// Bytes held by the index (the runtime's memory gauge counts them).
    fn bytes(&self) -> u64 {
        let words = self.row_of.capacity()
            + self.sources.capacity()
            + self.seg_lanes.capacity()
            + self.seg_of.capacity()
            + 3 * self.segs.capacity();
        words as u64 * 4
    }

    #[inline]
    fn is_merge(&self, p: PayloadId) -> bool {
        self.row_of
            .get(p.0 as usize)
            .is_some_and(|&r| r != NOT_MERGED)
    }

    /// The payload lane `l` of `p` holds (`p` itself when not merged); `None` for a lane
    /// neither side of a merge had.
    #[inline]
    fn source(&self, p: PayloadId, l: usize) -> Option<PayloadId> {
        match self.row_of.get(p.0 as usize) {
            Some(&r) if r != NOT_MERGED => {
                let s = self.sources[r as usize + l];
                (s != NOT_MERGED).then_some(PayloadId(s))
            }
            _ => Some(p),
        }
    }
}

impl<R: Real> Tape<R> {
    /// The payloads whose adjoints `node`'s sweep accumulates into, in the order of
    /// [`Tape::substituted`].
    fn inputs_of(&self, node: TapeNode, out: &mut Vec<PayloadId>) {
        out.clear();
        match node.op {
            TapeOp::Concat { start, len } => {
                out.extend_from_slice(&self.extra[start as usize..][..len as usize]);
            }
            TapeOp::Choice { start, len, .. } => {
                out.extend([node.a, node.b]);
                out.extend_from_slice(&self.extra[start as usize + 2..][..len as usize]);
            }
            _ => out.extend([node.a, node.b]),
        }
    }

    /// `node` reading `inputs` (in the order of [`Tape::inputs_of`]) instead of its own; lists
    /// of inputs are appended to `extra`, which the caller truncates after.
    fn substituted(&mut self, node: TapeNode, inputs: &[PayloadId]) -> TapeNode {
        let at = self.extra.len() as u32;
        match node.op {
            TapeOp::Concat { len, .. } => {
                self.extra.extend_from_slice(inputs);
                TapeNode {
                    op: TapeOp::Concat { start: at, len },
                    ..node
                }
            }
            TapeOp::Choice { start, len, hard } => {
                let (noise, weights) = (self.extra[start as usize], self.extra[start as usize + 1]);
                self.extra.extend([noise, weights]);
                self.extra.extend_from_slice(&inputs[2..]);
                TapeNode {
                    op: TapeOp::Choice {
                        start: at,
                        len,
                        hard,
                    },
                    a: inputs[0],
                    b: inputs[1],
                    ..node
                }
            }
            _ => TapeNode {
                a: inputs[0],
                b: inputs[1],
                ..node
            },
        }
    }

    /// Seeds the adjoint of a merged root where each of its lanes came from.
    fn seed_through_merges(&mut self, lanes: &Lanes<R>, root: PayloadId) {
        let b = lanes.n_lanes();
        let n = lanes.n_elems(root);
        let m = std::mem::take(&mut self.merges);
        for &(src, start, len) in m.segments(root) {
            let Some(o) = self.adj.slot(lanes.meta(src), src) else {
                continue;
            };
            for e in 0..n {
                for &l in &m.seg_lanes[start as usize..][..len as usize] {
                    self.adj.buf[o + e * b + l as usize] = R::ONE;
                }
            }
        }
        self.merges = m;
    }

    /// The reverse sweep of a tape with merges (see [`Merges`]).
    fn backward_merged(&mut self, lanes: &Lanes<R>, masks: &LaneMask, b: usize) {
        let mut m = std::mem::take(&mut self.merges);
        for k in (0..self.nodes.len()).rev() {
            let node = self.nodes[k];
            let Some(go) = self.adj.get(node.out) else {
                continue;
            };
            self.inputs_of(node, &mut m.inputs);
            m.merged.clear();
            for &p in &m.inputs {
                if m.is_merge(p) && !m.merged.contains(&p) {
                    m.merged.push(p);
                }
            }
            if m.is_merge(node.out) {
                // Its consumers passed its lanes on to their sources.
            } else if m.merged.is_empty() {
                self.node_vjp(lanes, masks, node, go, b);
            } else if Self::sources_read_once(&m) {
                self.move_merged(&m, lanes, true);
                self.node_vjp(lanes, masks, node, go, b);
                self.move_merged(&m, lanes, false);
            } else {
                self.sweep_grouped(&mut m, lanes, masks, node, go);
            }
            self.adj.release(node.out, go, lanes.n_elems(node.out));
        }
        self.merges = m;
    }

    /// Whether no source of a merged input of the node is also read by it another way: as one
    /// of its inputs (on any lane), or as another merged input's source on the same lane.
    fn sources_read_once(m: &Merges) -> bool {
        let b = m.b();
        m.merged.iter().enumerate().all(|(i, &p)| {
            let rp = m.row_of[p.0 as usize] as usize;
            let direct = m.segments(p).iter().any(|&(s, ..)| m.inputs.contains(&s));
            !direct
                && m.merged[..i].iter().all(|&q| {
                    let rq = m.row_of[q.0 as usize] as usize;
                    let (sp, sq) = (&m.sources[rp..rp + b], &m.sources[rq..rq + b]);
                    sp.iter().zip(sq).all(|(&x, &y)| x != y || x == NOT_MERGED)
                })
        })
    }

    /// Loads (`load`) each lane of every merged input with its source's adjoint, or stores it
    /// back there and zeroes it.
    fn move_merged(&mut self, m: &Merges, lanes: &Lanes<R>, load: bool) {
        let b = lanes.n_lanes();
        for &p in &m.merged {
            let Some(om) = self.adj.slot(lanes.meta(p), p) else {
                continue;
            };
            let n = lanes.n_elems(p);
            for &(s, start, len) in m.segments(p) {
                let ls = &m.seg_lanes[start as usize..][..len as usize];
                let buf = &mut self.adj.buf;
                if load {
                    match self.adj.off[s.0 as usize] {
                        NO_ADJ => (0..n).for_each(|e| {
                            ls.iter()
                                .for_each(|&l| buf[om + e * b + l as usize] = R::ZERO)
                        }),
                        o => {
                            let o = o as usize;
                            for e in 0..n {
                                for &l in ls {
                                    buf[om + e * b + l as usize] = buf[o + e * b + l as usize];
                                }
                            }
                        }
                    }
                } else {
                    let Some(o) = self.adj.slot(lanes.meta(s), s) else {
                        continue;
                    };
                    let buf = &mut self.adj.buf;
                    for e in 0..n {
                        for &l in ls {
                            let c = e * b + l as usize;
                            buf[o + c] = std::mem::replace(&mut buf[om + c], R::ZERO);
                        }
                    }
                }
            }
        }
    }

    /// Sweeps `node`, which reads merged payloads, once per group of its active lanes that took
    /// the same sources, as the node reading those directly, on those lanes.
    fn sweep_grouped(
        &mut self,
        m: &mut Merges,
        lanes: &Lanes<R>,
        masks: &LaneMask,
        node: TapeNode,
        go: usize,
    ) {
        let b = lanes.n_lanes();
        let act = masks.lanes(node.mask);
        let k = m.inputs.len();
        // Per live lane of `act`: its sources (`keys`, k each) and its place in `act`.
        m.keys.clear();
        m.group_of.clear();
        for (j, &l) in act.iter().enumerate() {
            m.key.clear();
            for i in 0..k {
                match m.source(m.inputs[i], l as usize) {
                    Some(s) => m.key.push(s),
                    None => break,
                }
            }
            if m.key.len() == k {
                m.keys.extend_from_slice(&m.key);
                m.group_of.push(j as u32);
            }
        }
        // The live lanes sorted by their sources, then by lane: each run of equal sources is a
        // group, its lanes ascending.
        let key = |t: usize| m.keys[t * k..][..k].iter().map(|p| p.0);
        m.order.clear();
        m.order.extend(0..m.group_of.len() as u32);
        let mut order = std::mem::take(&mut m.order);
        order.sort_unstable_by(|&x, &y| key(x as usize).cmp(key(y as usize)).then(x.cmp(&y)));
        let mut start = 0;
        while start < order.len() {
            let first = order[start] as usize;
            let mut end = start + 1;
            while end < order.len() && key(order[end] as usize).eq(key(first)) {
                end += 1;
            }
            m.group_lanes.clear();
            let members = order[start..end]
                .iter()
                .map(|&t| act[m.group_of[t as usize] as usize]);
            m.group_lanes.extend(members);
            let full = node.mask == MaskId::FULL && m.group_lanes.len() == b;
            let extra = self.extra.len();
            let sub = self.substituted(node, &m.keys[first * k..][..k]);
            self.node_vjp_on(lanes, masks, sub, go, b, &m.group_lanes, full);
            self.extra.truncate(extra);
            start = end;
        }
        m.order = order;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::widest::{Width, assert_every_width_same_bits, run_at, test_values};

    /// The binary VJP kernels that run in the widest vectors give their baseline bits at every
    /// width: every op, fresh and accumulating regions, either operand uniform, 2–4 elements.
    #[test]
    fn binary_vjp_kernels_give_the_same_bits_at_every_width() {
        let b = 37;
        let (x, y, z, g) = (
            test_values(b, 1),
            test_values(b, 2),
            test_values(4 * b, 3),
            test_values(4 * b, 4),
        );
        let old = test_values(3 * b, 5);
        for op in Binary::ALL {
            for first in [[false, false], [true, false], [false, true], [true, true]] {
                let what = format!("binary_lanes {op:?} {first:?}");
                assert_every_width_same_bits(&what, |w: Width| {
                    let mut adj = [&g[..b], &old[..2 * b]].concat();
                    run_at(
                        w,
                        BinaryLanes {
                            op,
                            adj: &mut adj,
                            gr: 0..b,
                            ra: Some(b..2 * b),
                            rb: Some(2 * b..3 * b),
                            first,
                            xyz: [&x, &y, &z[..b]],
                            b,
                        },
                    );
                    adj
                });
            }
            for (fresh, ua) in [(false, false), (true, false), (false, true), (true, true)] {
                let what = format!("binary_uni {op:?} fresh {fresh} a uniform {ua}");
                assert_every_width_same_bits(&what, |w: Width| {
                    let mut adj = [&g[..b], &old[..b]].concat();
                    run_at(
                        w,
                        BinaryUni {
                            op,
                            adj: &mut adj,
                            regions: (0..b, b..2 * b),
                            first: fresh,
                            uniform: (ua, y[3]),
                            xs: &x,
                            z: &z[..b],
                        },
                    );
                    adj
                });
                for n in 2..=4 {
                    let what = format!("binary_uni_sum {op:?} n {n} fresh {fresh} a uniform {ua}");
                    assert_every_width_same_bits(&what, |w: Width| {
                        let mut d = old[..b].to_vec();
                        run_at(
                            w,
                            BinaryUniSum {
                                op,
                                g: &g[..n * b],
                                d: &mut d,
                                first: fresh,
                                uniform: (ua, &y[..n]),
                                xs: &x,
                                z: &z[..n * b],
                            },
                        );
                        d
                    });
                }
            }
        }
    }

    /// The hand-written term loops visit the terms in the order of `TensorOp::terms`, which the
    /// one-lane sweep relies on to add in the same order as the lane-parallel one.
    #[test]
    fn each_term_follows_the_term_order() {
        let cases = [
            (TensorOp::MatMul { m: 2, k: 3, n: 2 }, 6, 6),
            (TensorOp::MatVec { m: 2, n: 3 }, 6, 3),
            (TensorOp::Dot, 4, 4),
            (TensorOp::Outer, 3, 2),
            (TensorOp::Transpose { r: 2, c: 3 }, 6, 0),
        ];
        let mut table = TermTable::default();
        for (op, na, nb) in cases {
            let mut want = Vec::new();
            op.terms(na, nb, &mut want);
            let want: Vec<_> = want
                .iter()
                .map(|t| (t.o as usize, t.i as usize, t.j as usize, t.coeff))
                .collect();
            let mut got = Vec::new();
            each_term(&mut table, op, na, nb, |o, i, j, c| got.push((o, i, j, c)));
            assert_eq!(got, want, "{op:?}");
        }
    }
}
