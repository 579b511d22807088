//! `FlatTape`: a one-lane recording compiled to straight-line steps with every offset resolved,
//! for the replay's forward pass and reverse sweep at B = 1.
//!
//! At one lane an element's value sits at `off + e` whether its payload is uniform or not, so a
//! node is a handful of array reads and writes; what costs is finding them (payload metadata, the
//! term table, the kernels' lane and mask branches). A step holds its payloads' offsets and sizes,
//! and a tensor op its terms in the order its kernel visits them, so the replay runs the same
//! arithmetic in the same order (the same bits) without the look-ups. A determinant, log
//! determinant or inverse is a [`Step::Det`] (forward here only when 2×2); nodes with another
//! shape (selects, soft choices, a lane mask other than the full one, ops past the term table)
//! stay [`Step::Node`] and run through the generic per-node code. The sweep runs from a
//! [`SweepPlan`] when every node it reaches is compiled.

use crate::lanes::{Lanes, PayloadId};
use crate::linalg::{TensorOp, TermCache};
use crate::mask::MaskId;
use crate::prims::{Binary, Unary};
use crate::real::Real;
use crate::tape::{TapeNode, TapeOp};

/// One compiled tape node (offsets into the payload arena; sizes in elements).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step {
    /// `out[e] = op(a[e])`.
    Unary {
        op: Unary,
        out: u32,
        a: u32,
        n: u32,
        grad_a: bool,
    },
    /// `out[e] = op(a[e·sa], b[e·sb])`, `sa` (`sb`) 0 for a one-element operand.
    Binary {
        op: Binary,
        out: u32,
        a: u32,
        b: u32,
        n: u32,
        na: u32,
        nb: u32,
        grad_a: bool,
        grad_b: bool,
    },
    /// A bilinear (or linear) tensor op: `fwd` and `bwd` index its terms (forward order, sweep
    /// order) in [`FlatTape::terms`].
    Terms {
        bilinear: bool,
        out: u32,
        a: u32,
        b: u32,
        n_out: u32,
        na: u32,
        nb: u32,
        fwd: (u32, u32),
        bwd: (u32, u32),
        grad_a: bool,
        grad_b: bool,
        /// The terms are one of the common small shapes' lists (both orders), so the step runs
        /// unrolled with constant indices.
        fixed: Fixed,
    },
    /// det, log det or inverse of a matrix (`a`), swept from `t` (the kept inverse, or the
    /// output for an inverse) and `z` (the output); `d` is the determinant. A 2×2 one runs
    /// forward here (the kernel's closed form); a larger one as a [`Step::Node`].
    Det {
        op: TensorOp,
        a: u32,
        t: u32,
        z: u32,
        d: u32,
        na: u32,
        nt: u32,
        n_out: u32,
        grad_a: bool,
    },
    /// Any other node: the generic code runs it.
    Node,
}

/// A term `(o, i, j, c)`: output element, element of `a`, element of `b`, coefficient.
pub(crate) type FlatTerm<R> = (u32, u32, u32, R);

/// A bilinear step whose term lists (forward and sweep order alike) are exactly those of a common
/// small shape, every coefficient one: the step then runs from the constant list below, unrolled,
/// with its operands in registers. The same terms in the same order, so the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fixed {
    /// Any other list: the terms are read from [`FlatTape::terms`].
    No,
    /// A 2×2 matrix times a 2×2 matrix.
    MatMul22,
    /// A 2×2 matrix times a 2-vector.
    MatVec22,
    /// The dot product of two 2-vectors.
    Dot2,
}

/// `(o, i, j)` of `(matmul 2 2 2)`, as `TensorOp::terms` lists them (rows, columns, sum index).
const MATMUL22: [(usize, usize, usize); 8] = [
    (0, 0, 0),
    (0, 1, 2),
    (1, 0, 1),
    (1, 1, 3),
    (2, 2, 0),
    (2, 3, 2),
    (3, 2, 1),
    (3, 3, 3),
];
/// `(o, i, j)` of `(matvec 2 2)`.
const MATVEC22: [(usize, usize, usize); 4] = [(0, 0, 0), (0, 1, 1), (1, 2, 0), (1, 3, 1)];
/// `(o, i, j)` of a 2-element dot product.
const DOT2: [(usize, usize, usize); 2] = [(0, 0, 0), (0, 1, 1)];

impl Fixed {
    /// The shape whose list `fwd` and `bwd` both are (sizes `n_out`, `na`, `nb`), if any.
    fn of<R: Real>(
        fwd: &[FlatTerm<R>],
        bwd: &[FlatTerm<R>],
        (n_out, na, nb): (u32, u32, u32),
    ) -> Fixed {
        let is = |list: &[(usize, usize, usize)]| {
            let same = |terms: &[FlatTerm<R>]| {
                terms.len() == list.len()
                    && terms
                        .iter()
                        .zip(list)
                        .all(|(&(o, i, j, c), &(lo, li, lj))| {
                            (o as usize, i as usize, j as usize) == (lo, li, lj) && c == R::ONE
                        })
            };
            same(fwd) && same(bwd)
        };
        match (n_out, na, nb) {
            (4, 4, 4) if is(&MATMUL22) => Fixed::MatMul22,
            (2, 4, 2) if is(&MATVEC22) => Fixed::MatVec22,
            (1, 2, 2) if is(&DOT2) => Fixed::Dot2,
            _ => Fixed::No,
        }
    }
}

/// `z = Σ 1·x[i]·y[j]` over a constant term list, from zero: [`terms_forward`] unrolled.
#[inline(always)]
fn fixed_forward<R: Real, const NO: usize, const NA: usize, const NB: usize>(
    list: &[(usize, usize, usize)],
    z: &mut [R; NO],
    x: &[R; NA],
    y: &[R; NB],
) {
    // A zero the optimiser cannot see through, so `0 + v` is the add `terms_forward` does.
    let mut acc = [std::hint::black_box(R::ZERO); NO];
    for &(o, i, j) in list {
        acc[o] += R::ONE * x[i] * y[j];
    }
    *z = acc;
}

/// The sweep of a constant term list (see [`Fixed`]): `da[i] += 1·g[o]·y[j]` and
/// `db[j] += 1·g[o]·x[i]` term by term, as `flat_terms_vjp` accumulates them, for two distinct
/// input payloads.
#[inline(always)]
fn fixed_vjp<R: Real, const NO: usize, const NA: usize, const NB: usize>(
    list: &[(usize, usize, usize)],
    g: &[R; NO],
    (x, y): (&[R; NA], &[R; NB]),
    (da, db): (Option<&mut [R; NA]>, Option<&mut [R; NB]>),
) {
    match (da, db) {
        (Some(da), Some(db)) => {
            for &(o, i, j) in list {
                let g = g[o];
                da[i] += R::ONE * g * y[j];
                db[j] += R::ONE * g * x[i];
            }
        }
        (Some(da), None) => list
            .iter()
            .for_each(|&(o, i, j)| da[i] += R::ONE * g[o] * y[j]),
        (None, Some(db)) => list
            .iter()
            .for_each(|&(o, i, j)| db[j] += R::ONE * g[o] * x[i]),
        (None, None) => {}
    }
}

/// [`fixed_forward`] of `fixed`'s list; `false` (nothing done) for [`Fixed::No`] or operands
/// not of the shape's sizes.
#[inline(always)]
fn forward_fixed<R: Real>(fixed: Fixed, z: &mut [R], x: &[R], y: &[R]) -> bool {
    #[inline(always)]
    fn go<R: Real, const NO: usize, const NA: usize, const NB: usize>(
        list: &[(usize, usize, usize)],
        z: &mut [R],
        x: &[R],
        y: &[R],
    ) -> bool {
        let (Ok(z), Ok(x), Ok(y)) = (z.try_into(), x.try_into(), y.try_into()) else {
            return false;
        };
        fixed_forward::<R, NO, NA, NB>(list, z, x, y);
        true
    }
    match fixed {
        Fixed::No => false,
        Fixed::MatMul22 => go::<R, 4, 4, 4>(&MATMUL22, z, x, y),
        Fixed::MatVec22 => go::<R, 2, 4, 2>(&MATVEC22, z, x, y),
        Fixed::Dot2 => go::<R, 1, 2, 2>(&DOT2, z, x, y),
    }
}

/// [`fixed_vjp`] of `fixed`'s list; `false` (nothing done) for [`Fixed::No`] or regions not of
/// the shape's sizes.
#[inline(always)]
pub(crate) fn vjp_fixed<R: Real>(
    fixed: Fixed,
    g: &[R],
    (x, y): (&[R], &[R]),
    (da, db): (Option<&mut [R]>, Option<&mut [R]>),
) -> bool {
    #[inline(always)]
    fn go<R: Real, const NO: usize, const NA: usize, const NB: usize>(
        list: &[(usize, usize, usize)],
        g: &[R],
        (x, y): (&[R], &[R]),
        (da, db): (Option<&mut [R]>, Option<&mut [R]>),
    ) -> bool {
        let (Ok(g), Ok(x), Ok(y)) = (g.try_into(), x.try_into(), y.try_into()) else {
            return false;
        };
        let (Ok(da), Ok(db)) = (
            da.map(<&mut [R; NA]>::try_from).transpose(),
            db.map(<&mut [R; NB]>::try_from).transpose(),
        ) else {
            return false;
        };
        fixed_vjp::<R, NO, NA, NB>(list, g, (x, y), (da, db));
        true
    }
    match fixed {
        Fixed::No => false,
        Fixed::MatMul22 => go::<R, 4, 4, 4>(&MATMUL22, g, (x, y), (da, db)),
        Fixed::MatVec22 => go::<R, 2, 4, 2>(&MATVEC22, g, (x, y), (da, db)),
        Fixed::Dot2 => go::<R, 1, 2, 2>(&DOT2, g, (x, y), (da, db)),
    }
}

/// The compiled form of one recording (see the module docs).
#[derive(Clone, Debug, Default)]
pub(crate) struct FlatTape<R: Real = f64> {
    pub(crate) steps: Vec<Step>,
    pub(crate) terms: Vec<FlatTerm<R>>,
    /// Built for the current recording.
    pub(crate) ready: bool,
    /// One past the last float any compiled step reads or writes (values, and adjoints at the
    /// same offsets): what the unchecked accesses of [`forward`] and the sweep rely on.
    pub(crate) extent: usize,
    /// The sweep from the recording's root, when every step it reaches is compiled.
    pub(crate) sweep: SweepPlan,
}

/// A flat tape's reverse sweep from one root with every adjoint at its payload's own offset in
/// the arena (one lane: payloads never overlap in a gradient run's append-only arena). The
/// generic sweep finds an output's adjoint by looking it up, allocates an input's on its first
/// accumulation and skips a node whose output got none; here which nodes are reached is worked
/// out once from the gradient flags (a node is reached when its output is the root or an input
/// of a reached node that takes a gradient, exactly when the generic sweep would have allocated
/// that output's adjoint), so the sweep is a list of steps and fixed offsets.
#[derive(Clone, Debug, Default)]
pub(crate) struct SweepPlan {
    /// The root it was worked out for (`None`: not built for this recording).
    pub(crate) root: Option<PayloadId>,
    /// Whether every reached node is a compiled step (otherwise the generic sweep runs).
    pub(crate) ok: bool,
    /// The reached steps, last first.
    pub(crate) order: Vec<u32>,
    /// Reached payloads no step produced (the inputs), with their offsets: where
    /// [`crate::tape::Tape::grad_of`] finds their adjoints.
    pub(crate) inputs: Vec<(PayloadId, u32)>,
    /// Scratch of the build: reached / produced flags per payload.
    live: Vec<u8>,
}

const REACHED: u8 = 1;
const PRODUCED: u8 = 2;

impl SweepPlan {
    /// Works out the sweep of `steps` (compiled from `nodes`) from `root`.
    pub(crate) fn build<R: Real>(
        &mut self,
        steps: &[Step],
        nodes: &[TapeNode],
        lanes: &Lanes<R>,
        root: PayloadId,
    ) {
        self.root = Some(root);
        self.ok = true;
        self.order.clear();
        self.inputs.clear();
        let live = &mut self.live;
        live.clear();
        live.resize(lanes.meta.len(), 0);
        if !lanes.meta(root).grad {
            return;
        }
        live[root.0 as usize] |= REACHED;
        for (k, (step, node)) in steps.iter().zip(nodes).enumerate().rev() {
            live[node.out.0 as usize] |= PRODUCED;
            if live[node.out.0 as usize] & REACHED == 0 {
                continue;
            }
            let (a, b) = match *step {
                Step::Unary { grad_a, .. } | Step::Det { grad_a, .. } => (grad_a, false),
                Step::Binary { grad_a, grad_b, .. } => (grad_a, grad_b),
                Step::Terms {
                    bilinear,
                    grad_a,
                    grad_b,
                    ..
                } => (grad_a, bilinear && grad_b),
                Step::Node => {
                    self.ok = false;
                    return;
                }
            };
            if a {
                live[node.a.0 as usize] |= REACHED;
            }
            if b {
                live[node.b.0 as usize] |= REACHED;
            }
            self.order.push(k as u32);
        }
        for (p, &f) in live.iter().enumerate() {
            if f == REACHED {
                self.inputs.push((PayloadId(p as u32), lanes.meta[p].off));
            }
        }
    }
}

impl<R: Real> FlatTape<R> {
    /// Bytes held.
    pub(crate) fn bytes(&self) -> u64 {
        (self.steps.capacity() * std::mem::size_of::<Step>()
            + self.terms.capacity() * std::mem::size_of::<FlatTerm<R>>()) as u64
    }

    /// Compiles `nodes` (recorded at one lane into `lanes`); `forward_terms` lists a tensor op's
    /// terms as its forward kernel visits them, `sweep_terms` calls back with them as the reverse
    /// sweep visits them.
    pub(crate) fn build(
        &mut self,
        nodes: &[TapeNode],
        lanes: &Lanes<R>,
        term_cache: &mut TermCache,
        mut sweep_terms: impl FnMut(TensorOp, usize, usize, &mut dyn FnMut(usize, usize, usize, R)),
    ) {
        debug_assert_eq!(lanes.n_lanes(), 1);
        self.steps.clear();
        self.terms.clear();
        self.sweep.root = None;
        self.extent = 0;
        for node in nodes {
            let step = self.step(node, lanes, term_cache, &mut sweep_terms);
            let step = if self.checked(&step, lanes.n_floats()) {
                step
            } else {
                Step::Node
            };
            self.extent = self.extent.max(step.extent() as usize);
            self.steps.push(step);
        }
        self.ready = true;
    }

    /// Whether `step` may run compiled: it is [`Step::well_formed`], every range it touches lies
    /// within the `n_floats` of the arena, and every term's indices within its operands. This is
    /// the bound the unchecked accesses stand on.
    fn checked(&self, step: &Step, n_floats: usize) -> bool {
        if !step.well_formed() || step.extent() > n_floats as u64 {
            return false;
        }
        let Step::Terms {
            bilinear,
            n_out,
            na,
            nb,
            fwd,
            bwd,
            ..
        } = *step
        else {
            return true;
        };
        let ok = |&(o, i, j, _): &FlatTerm<R>| o < n_out && i < na && (!bilinear || j < nb);
        let (f, b) = (
            fwd.0 as usize..fwd.1 as usize,
            bwd.0 as usize..bwd.1 as usize,
        );
        self.terms[f].iter().all(ok) && self.terms[b].iter().all(ok)
    }

    fn step(
        &mut self,
        node: &TapeNode,
        lanes: &Lanes<R>,
        term_cache: &mut TermCache,
        sweep_terms: &mut impl FnMut(TensorOp, usize, usize, &mut dyn FnMut(usize, usize, usize, R)),
    ) -> Step {
        let mo = lanes.meta(node.out);
        if node.mask != MaskId::FULL {
            return Step::Node;
        }
        let meta = |p: PayloadId| lanes.meta(p);
        match node.op {
            TapeOp::Unary(op) => Step::Unary {
                op,
                out: mo.off,
                a: meta(node.a).off,
                n: mo.n,
                grad_a: meta(node.a).grad,
            },
            TapeOp::Binary(op) => {
                let (ma, mb) = (meta(node.a), meta(node.b));
                Step::Binary {
                    op,
                    out: mo.off,
                    a: ma.off,
                    b: mb.off,
                    n: mo.n,
                    na: ma.n,
                    nb: mb.n,
                    grad_a: ma.grad,
                    grad_b: mb.grad,
                }
            }
            TapeOp::Tensor(op) if op.is_bilinear() || op.is_linear() => {
                let bilinear = op.is_bilinear();
                let ma = meta(node.a);
                let mb = bilinear.then(|| meta(node.b));
                let (na, nb) = (ma.n as usize, mb.map_or(0, |m| m.n as usize));
                let Some(list) = term_cache.get(op, na, nb) else {
                    return Step::Node;
                };
                let start = self.terms.len() as u32;
                self.terms
                    .extend(list.iter().map(|t| (t.o, t.i, t.j, R::of(t.coeff))));
                let mid = self.terms.len() as u32;
                let terms = &mut self.terms;
                sweep_terms(op, na, nb, &mut |o, i, j, c| {
                    terms.push((o as u32, i as u32, j as u32, c));
                });
                let end = self.terms.len() as u32;
                let (f, b) = (start as usize..mid as usize, mid as usize..end as usize);
                let sizes = (mo.n, na as u32, nb as u32);
                let disjoint = mb.is_some_and(|mb| {
                    u64::from(ma.off) + u64::from(ma.n) <= u64::from(mb.off)
                        || u64::from(mb.off) + u64::from(mb.n) <= u64::from(ma.off)
                });
                let fixed = if bilinear && disjoint {
                    Fixed::of(&self.terms[f], &self.terms[b], sizes)
                } else {
                    Fixed::No
                };
                Step::Terms {
                    bilinear,
                    out: mo.off,
                    a: ma.off,
                    b: mb.map_or(0, |m| m.off),
                    n_out: mo.n,
                    na: na as u32,
                    nb: nb as u32,
                    fwd: (start, mid),
                    bwd: (mid, end),
                    grad_a: ma.grad,
                    grad_b: mb.is_some_and(|m| m.grad),
                    fixed,
                }
            }
            TapeOp::Tensor(
                op @ (TensorOp::Det { .. } | TensorOp::LogDet { .. } | TensorOp::Inv { .. }),
            ) if mo.varying && meta(node.a).varying => {
                let ma = meta(node.a);
                let src = if matches!(op, TensorOp::Inv { .. }) {
                    node.out
                } else {
                    node.b
                };
                let ms = meta(src);
                // The family allocates the inverse, then the determinant, next to each other.
                let det = match op {
                    TensorOp::Det { .. } => node.out,
                    TensorOp::Inv { .. } => PayloadId(node.out.0 + 1),
                    _ => PayloadId(node.b.0 + 1),
                };
                let Some(md) = lanes.meta.get(det.0 as usize) else {
                    return Step::Node;
                };
                Step::Det {
                    op,
                    a: ma.off,
                    t: ms.off,
                    z: mo.off,
                    d: md.off,
                    na: ma.n,
                    nt: ms.n,
                    n_out: mo.n,
                    grad_a: ma.grad,
                }
            }
            _ => Step::Node,
        }
    }
}

impl Step {
    /// The element counts of the output and of the inputs `a` and `b` (0: none).
    pub(crate) fn sizes(&self) -> (u32, u32, u32) {
        match *self {
            Step::Unary { n, .. } => (n, n, 0),
            Step::Binary { n, na, nb, .. } => (n, na, nb),
            Step::Terms {
                bilinear,
                n_out,
                na,
                nb,
                ..
            } => (n_out, na, if bilinear { nb } else { 0 }),
            Step::Det { n_out, na, .. } => (n_out, na, 0),
            Step::Node => (0, 0, 0),
        }
    }

    /// One past the last float the step reads or writes (0 for a generic node).
    fn extent(&self) -> u64 {
        let end = |off: u32, n: u32| u64::from(off) + u64::from(n);
        match *self {
            Step::Unary { out, a, n, .. } => end(a, n).max(end(out, n)),
            Step::Binary {
                out,
                a,
                b,
                n,
                na,
                nb,
                ..
            } => end(a, na).max(end(b, nb)).max(end(out, n)),
            Step::Terms {
                bilinear,
                out,
                a,
                b,
                n_out,
                na,
                nb,
                ..
            } => {
                let b = if bilinear { end(b, nb) } else { 0 };
                end(a, na).max(b).max(end(out, n_out))
            }
            Step::Det {
                a,
                t,
                z,
                d,
                na,
                nt,
                n_out,
                ..
            } => end(a, na)
                .max(end(t, nt.max(4)))
                .max(end(z, n_out))
                .max(end(d, 1)),
            Step::Node => 0,
        }
    }

    /// Whether the step has the layout the flat code relies on: every input wholly before the
    /// output in the arena (always so in an append-only recording), an elementwise operand of
    /// one element or as many as the output. A step without it runs through the generic code.
    fn well_formed(&self) -> bool {
        let before = |x: u32, n: u32, out: u32| u64::from(x) + u64::from(n) <= u64::from(out);
        match *self {
            Step::Unary { out, a, n, .. } => before(a, n, out),
            Step::Binary {
                out,
                a,
                b,
                n,
                na,
                nb,
                ..
            } => {
                before(a, na, out)
                    && before(b, nb, out)
                    && (na == 1 || na == n)
                    && (nb == 1 || nb == n)
            }
            Step::Terms {
                bilinear,
                out,
                a,
                b,
                na,
                nb,
                ..
            } => before(a, na, out) && (!bilinear || before(b, nb, out)),
            Step::Det { a, na, z, .. } => before(a, na, z),
            Step::Node => true,
        }
    }

    /// The offsets of a compiled step's output adjoint and its inputs' (`None`: that input takes
    /// no gradient) under the sweep plan's layout, where an adjoint sits at its payload's offset.
    #[inline(always)]
    pub(crate) fn adjoint_offsets(&self) -> (usize, Option<usize>, Option<usize>) {
        let on = |grad: bool, off: u32| grad.then_some(off as usize);
        match *self {
            Step::Unary { out, a, grad_a, .. } => (out as usize, on(grad_a, a), None),
            Step::Binary {
                out,
                a,
                b,
                grad_a,
                grad_b,
                ..
            } => (out as usize, on(grad_a, a), on(grad_b, b)),
            Step::Terms {
                bilinear,
                out,
                a,
                b,
                grad_a,
                grad_b,
                ..
            } => (out as usize, on(grad_a, a), on(bilinear && grad_b, b)),
            Step::Det { z, a, grad_a, .. } => (z as usize, on(grad_a, a), None),
            Step::Node => (0, None, None),
        }
    }
}

/// Runs one compiled step forward on `data` (one lane); `false` for [`Step::Node`], which the
/// caller runs. The arithmetic is the kernels' one-lane branch, term for term.
///
/// # Safety
/// `step` and `terms` are of a [`FlatTape`] built for this recording, and
/// `data.len() >= FlatTape::extent` (its steps' ranges and terms were checked against the
/// extent when it was built: see [`FlatTape::checked`]).
#[inline(always)]
pub(crate) unsafe fn forward<R: Real>(step: &Step, terms: &[FlatTerm<R>], data: &mut [R]) -> bool {
    match *step {
        Step::Unary { op, out, a, n, .. } => {
            // SAFETY: the step's ranges lie within `data` (this function's contract), its input
            // wholly before its output (`Step::well_formed`).
            let (lo, hi) = unsafe { data.split_at_mut_unchecked(out as usize) };
            let (x, z) = unsafe { (span(lo, a, n), span_mut(hi, 0, n)) };
            crate::prims::each_unary!(op, op => {
                for (z, &x) in z.iter_mut().zip(x) {
                    *z = op.apply(x);
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
            // SAFETY: as for `Unary`, both inputs before the output.
            let (lo, hi) = unsafe { data.split_at_mut_unchecked(out as usize) };
            let z = unsafe { span_mut(hi, 0, n) };
            let (x, y) = unsafe { (span(lo, a, na), span(lo, b, nb)) };
            crate::prims::each_binary!(op, op => binary_forward(op, z, x, y));
        }
        Step::Terms {
            bilinear,
            out,
            a,
            b,
            n_out,
            na,
            nb,
            fwd,
            fixed,
            ..
        } => {
            // SAFETY: as for `Binary`; the terms' indices lie within `z`, `x` and `y`
            // (`FlatTape::checked`).
            unsafe {
                let (lo, hi) = data.split_at_mut_unchecked(out as usize);
                let (z, x) = (span_mut(hi, 0, n_out), span(lo, a, na));
                let y = if bilinear { span(lo, b, nb) } else { &[] };
                if !forward_fixed(fixed, z, x, y) {
                    let terms = terms.get_unchecked(fwd.0 as usize..fwd.1 as usize);
                    terms_forward(bilinear, terms, z, x, y);
                }
            }
        }
        Step::Det {
            op,
            a,
            t,
            z,
            d,
            na: 4,
            ..
        } => {
            // `kernels::det_inv`'s closed form at one lane, then `kernels::log_det`.
            let (a, t, z, d) = (a as usize, t as usize, z as usize, d as usize);
            let (inv, det) = crate::linalg::inv2([data[a], data[a + 1], data[a + 2], data[a + 3]]);
            data[t..t + 4].copy_from_slice(&inv);
            data[d] = det;
            if let TensorOp::LogDet { abs, .. } = op {
                data[z] = if abs { det.abs().ln() } else { det.ln() };
            }
        }
        Step::Det { .. } | Step::Node => return false,
    }
    true
}

/// `z[e] = op(x[e], y[e])` with a one-element operand broadcast (the kernels' one-lane order).
#[inline(always)]
fn binary_forward<R: Real>(op: Binary, z: &mut [R], x: &[R], y: &[R]) {
    match (x, y) {
        (&[x], &[y]) => z.iter_mut().for_each(|z| *z = op.apply(x, y)),
        (&[x], y) => z.iter_mut().zip(y).for_each(|(z, &y)| *z = op.apply(x, y)),
        (x, &[y]) => z.iter_mut().zip(x).for_each(|(z, &x)| *z = op.apply(x, y)),
        (x, y) => {
            for ((z, &x), &y) in z.iter_mut().zip(x).zip(y) {
                *z = op.apply(x, y);
            }
        }
    }
}

/// `z = Σ c·x[i]·y[j]` (or `c·x[i]`) over `terms` in their order, from a zeroed `z`.
///
/// # Safety
/// Every term's `o`, `i` (and `j` when `bilinear`) lie within `z`, `x` and `y`.
#[inline(always)]
unsafe fn terms_forward<R: Real>(
    bilinear: bool,
    terms: &[FlatTerm<R>],
    z: &mut [R],
    x: &[R],
    y: &[R],
) {
    z.fill(R::ZERO);
    for &(o, i, j, c) in terms {
        // SAFETY: the indices are in bounds (this function's contract).
        unsafe {
            let v = if bilinear {
                c * *at(x, i) * *at(y, j)
            } else {
                c * *at(x, i)
            };
            *z.get_unchecked_mut(o as usize) += v;
        }
    }
}

/// `&v[off..off + n]` without its bounds check.
///
/// # Safety
/// `off + n <= v.len()`.
#[inline(always)]
pub(crate) unsafe fn span<T>(v: &[T], off: u32, n: u32) -> &[T] {
    let (off, n) = (off as usize, n as usize);
    debug_assert!(off + n <= v.len());
    // SAFETY: in bounds (this function's contract).
    unsafe { v.get_unchecked(off..off + n) }
}

/// `&mut v[off..off + n]` without its bounds check.
///
/// # Safety
/// `off + n <= v.len()`.
#[inline(always)]
pub(crate) unsafe fn span_mut<T>(v: &mut [T], off: u32, n: u32) -> &mut [T] {
    let (off, n) = (off as usize, n as usize);
    debug_assert!(off + n <= v.len());
    // SAFETY: in bounds (this function's contract).
    unsafe { v.get_unchecked_mut(off..off + n) }
}

/// `&v[i]` without its bounds check.
///
/// # Safety
/// `i < v.len()`.
#[inline(always)]
pub(crate) unsafe fn at<T>(v: &[T], i: u32) -> &T {
    debug_assert!((i as usize) < v.len());
    // SAFETY: in bounds (this function's contract).
    unsafe { v.get_unchecked(i as usize) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms_step(out: u32, fwd: (u32, u32), bwd: (u32, u32)) -> Step {
        Step::Terms {
            bilinear: true,
            out,
            a: 0,
            b: 4,
            n_out: 2,
            na: 4,
            nb: 2,
            fwd,
            bwd,
            grad_a: true,
            grad_b: true,
            fixed: Fixed::No,
        }
    }

    /// The unrolled lists are the term tables' own, in their order: the shapes the term table
    /// lists are recognised, and any other order or coefficient keeps the term loop.
    #[test]
    fn fixed_shapes_are_exactly_the_term_tables() {
        let flat = |op: TensorOp, na: usize, nb: usize| {
            let mut terms = Vec::new();
            op.terms(na, nb, &mut terms);
            let t: Vec<FlatTerm<f64>> = terms.iter().map(|t| (t.o, t.i, t.j, t.coeff)).collect();
            t
        };
        let cases = [
            (
                TensorOp::MatMul { m: 2, k: 2, n: 2 },
                (4, 4, 4),
                Fixed::MatMul22,
            ),
            (TensorOp::MatVec { m: 2, n: 2 }, (2, 4, 2), Fixed::MatVec22),
            (TensorOp::Dot, (1, 2, 2), Fixed::Dot2),
        ];
        for (op, (n_out, na, nb), want) in cases {
            let t = flat(op, na as usize, nb as usize);
            assert_eq!(Fixed::of(&t, &t, (n_out, na, nb)), want, "{op:?}");
            let mut swapped = t.clone();
            swapped.swap(0, 1);
            assert_eq!(Fixed::of(&swapped, &t, (n_out, na, nb)), Fixed::No);
            assert_eq!(Fixed::of(&t, &swapped, (n_out, na, nb)), Fixed::No);
            let mut scaled = t.clone();
            scaled[0].3 = -1.0;
            assert_eq!(Fixed::of(&t, &scaled, (n_out, na, nb)), Fixed::No);
        }
        // A 3-element dot is not a 2-element one.
        let t = flat(TensorOp::Dot, 3, 3);
        assert_eq!(Fixed::of(&t, &t, (1, 3, 3)), Fixed::No);
    }

    /// The bound the unchecked accesses stand on: a step is compiled only when every range it
    /// touches lies in the arena and every term indexes within its operands.
    #[test]
    fn only_steps_within_the_arena_and_their_operands_compile() {
        // A 2×2 matrix (floats 0..4) times a vector (4..6) into floats 6..8.
        let mut tape = FlatTape::<f64> {
            terms: vec![
                (0, 0, 0, 1.0),
                (0, 1, 1, 1.0),
                (1, 2, 0, 1.0),
                (1, 3, 1, 1.0),
            ],
            ..FlatTape::default()
        };
        let good = terms_step(6, (0, 4), (0, 4));
        assert_eq!(good.extent(), 8);
        assert!(tape.checked(&good, 8));
        // The arena ends before the output does.
        assert!(!tape.checked(&good, 7));
        // A term reading past `b` (j = 2 of a 2-element vector), forward or in the sweep.
        tape.terms.push((1, 3, 2, 1.0));
        assert!(!tape.checked(&terms_step(6, (0, 5), (0, 4)), 8));
        assert!(!tape.checked(&terms_step(6, (0, 4), (1, 5)), 8));
        // An input overlapping the output.
        assert!(!tape.checked(&terms_step(5, (0, 4), (0, 4)), 8));
        let binary = |n, na| Step::Binary {
            op: Binary::Add,
            out: 8,
            a: 0,
            b: 4,
            n,
            na,
            nb: 1,
            grad_a: true,
            grad_b: false,
        };
        assert!(tape.checked(&binary(4, 4), 12));
        assert!(tape.checked(&binary(4, 1), 12));
        // An operand neither one element nor as long as the output.
        assert!(!tape.checked(&binary(4, 3), 12));
        assert!(tape.checked(&Step::Node, 0));
    }
}
