//! Trace replay: a gradient run re-executed from its recorded tape, without the walk, when only the
//! differentiable inputs changed since the run that recorded it.
//!
//! In a recording (gradient) run the payload arena is append-only, so after the run it still holds
//! every value the walk computed. Values fall in three classes:
//! - *active* (`grad`): computed by a tape node — the replay recomputes them node by node, with the
//!   same kernels as the walk (`kernels.rs`), hence the same bits;
//! - *constant*: computed from constants and non-differentiable inputs only — unchanged when those
//!   inputs are bitwise unchanged, which the replay checks first;
//! - *severed*: not active, yet computed from active values (a comparison, `zero?`, `floor`, …).
//!   Each such site records a [`Guard`]; the replay recomputes it and requires the recorded bits.
//!
//! The walk's structure (control flow, masks, shapes, which nodes exist) is a function of constant
//! and severed values only, so when the guards hold the recorded tape *is* the trace the walk
//! would record now. Any other read of an active value's lanes for structure (an index, a number's
//! truthiness, printing, `eval` of data) marks the recording not replayable. A failed check falls
//! back to an ordinary walk, so a replay is never wrong, only sometimes not taken.

use super::choice::ChoiceSite;
use super::{Evaluator, kernels};
use crate::api::{Evaluation, InputValue, Inputs, SoftChoice};
use crate::error::Result;
use crate::lanes::PayloadId;
use crate::linalg::TensorOp;
use crate::mask::MaskId;
use crate::prims::{Binary, Compare, Unary};
use crate::tape::{TapeOp, tensor_has_b};
use crate::value::Value;

/// A one-number predicate of `zero?`, `positive?`, `negative?` and `not`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BoolTest {
    /// `x == 0`.
    Zero,
    /// `x > 0`.
    Positive,
    /// `x < 0`.
    Negative,
}

impl BoolTest {
    #[inline]
    pub(crate) fn holds(self, x: f64) -> bool {
        match self {
            BoolTest::Zero => x == 0.0,
            BoolTest::Positive => x > 0.0,
            BoolTest::Negative => x < 0.0,
        }
    }
}

/// A severed value: not differentiated, computed from a differentiated one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Guard {
    /// `out = op(a)` with a non-differentiable `op`.
    Unary(Unary),
    /// `out = op(a, b)` with a non-differentiable `op`.
    Binary(Binary),
    /// `out = c(args[start]) ∧ …` over the chain of arguments `args[start .. start + len]`.
    Compare { c: Compare, start: u32, len: u32 },
    /// `out = test(a)`.
    Test(BoolTest),
}

#[derive(Clone, Copy, Debug)]
struct GuardSite {
    guard: Guard,
    out: PayloadId,
    a: PayloadId,
    b: PayloadId,
    mask: MaskId,
}

/// What a recording run leaves for the replays after it.
#[derive(Clone, Debug)]
pub(crate) struct Trace {
    /// The run being recorded is still replayable.
    ok: bool,
    /// The last run left a replayable recording.
    ready: bool,
    guards: Vec<GuardSite>,
    args: Vec<PayloadId>,
    /// The value bound to each input, in input order.
    inputs: Vec<Value>,
    root: Value,
    /// The last run was a replay.
    replayed: bool,
    /// The `soft-choice` settings the recording holds, every site visit's payloads, and whether
    /// some soft-choice value is not on the tape (then other settings need a new walk).
    settings: SoftChoice,
    sites: Vec<ChoiceSite>,
    fixed: bool,
}

impl Default for Trace {
    fn default() -> Self {
        Trace {
            ok: false,
            ready: false,
            guards: Vec::new(),
            args: Vec::new(),
            inputs: Vec::new(),
            root: Value::Nil,
            replayed: false,
            settings: SoftChoice::default(),
            sites: Vec::new(),
            fixed: false,
        }
    }
}

impl Trace {
    /// Starts recording a walk (`grad`: it records a tape).
    pub(super) fn begin(&mut self, grad: bool, settings: SoftChoice) {
        self.settings = settings;
        self.sites.clear();
        self.fixed = false;
        self.ok = grad;
        self.ready = false;
        self.replayed = false;
        self.guards.clear();
        self.args.clear();
        self.inputs.clear();
        self.root = Value::Nil;
    }

    /// Notes the value bound to the next input.
    pub(super) fn input(&mut self, v: Value) {
        self.inputs.push(v);
    }

    /// Ends a successful walk whose result is `root`.
    pub(super) fn finish(&mut self, root: Value) {
        self.root = root;
        self.ready =
            self.ok && matches!(root, Value::Num(_) | Value::Vector(..) | Value::Matrix(..));
    }

    /// Forgets the recording (the arenas no longer hold it).
    pub(super) fn invalidate(&mut self) {
        self.ready = false;
        self.ok = false;
    }

    pub(super) fn replayed(&self) -> bool {
        self.replayed
    }

    /// Notes a `soft-choice` visit's payloads.
    pub(super) fn choice_site(&mut self, site: ChoiceSite) {
        if self.ok {
            self.sites.push(site);
        }
    }

    /// Notes a `soft-choice` value that depends on the settings but has no tape node.
    pub(super) fn choice_fixed(&mut self) {
        self.fixed = true;
    }
}

impl Evaluator {
    /// Records a severed value computed at the current mask.
    pub(super) fn guard(&mut self, guard: Guard, out: PayloadId, a: PayloadId, b: PayloadId) {
        if self.trace.ok {
            self.trace.guards.push(GuardSite {
                guard,
                out,
                a,
                b,
                mask: self.mask,
            });
        }
    }

    /// Records a comparison chain over the arguments at `argstack[base .. base + n]`.
    pub(super) fn guard_compare(&mut self, c: Compare, base: usize, n: usize, out: PayloadId) {
        if !self.trace.ok {
            return;
        }
        let start = self.trace.args.len() as u32;
        for i in 0..n {
            let p = self.argstack[base + i].payload().unwrap_or(self.false_p);
            self.trace.args.push(p);
        }
        let guard = Guard::Compare {
            c,
            start,
            len: n as u32,
        };
        self.guard(guard, out, out, out);
    }

    /// Marks the recording not replayable when `p` is differentiated (its lanes are about to be
    /// read for structure).
    #[inline]
    pub(super) fn taint_if_grad(&mut self, p: PayloadId) {
        if self.recording && self.lanes.meta(p).grad {
            self.trace.ok = false;
        }
    }

    /// Replays the last recording with `inputs` when it is valid for them; `Ok(false)` leaves the
    /// run to the walk.
    pub(super) fn try_replay(
        &mut self,
        inputs: &Inputs,
        grad: bool,
        out: &mut Evaluation,
    ) -> Result<bool> {
        if !self.opts.replay || !self.trace.ready || !self.inputs_compatible(inputs) {
            return Ok(false);
        }
        if !self.retune_choices() {
            return Ok(false);
        }
        // Differentiable inputs: the new values into their payloads.
        let b = self.lanes.n_lanes();
        for (inp, &v) in inputs.entries.iter().zip(&self.trace.inputs) {
            let (true, Some(p)) = (inp.grad, v.payload()) else {
                continue;
            };
            let off = self.lanes.meta(p).off as usize;
            match &inp.value {
                InputValue::Uniform(x) => self.lanes.data[off] = *x,
                InputValue::Lanes(xs) => self.lanes.data[off..off + b].copy_from_slice(xs),
                _ => {}
            }
        }
        if let Err(e) = self.replay_nodes() {
            // The payloads hold a half-replayed state: the recording is gone.
            self.trace.invalidate();
            return Err(e);
        }
        if !self.guards_hold() {
            self.trace.invalidate();
            return Ok(false);
        }
        self.refresh_choices();
        let root = self.trace.root;
        self.finish(root, inputs, grad, out);
        self.trace.replayed = true;
        Ok(true)
    }

    /// Brings the recording to this run's `soft-choice` settings: a new temperature or noise seed
    /// is written into every visit's payloads (the `Choice` nodes read them); false when the
    /// settings changed and the recording cannot follow (another mode, or a value off the tape).
    fn retune_choices(&mut self) -> bool {
        let now = self.opts.soft_choice;
        let was = self.trace.settings;
        if now == was {
            return true;
        }
        if self.trace.sites.is_empty() {
            self.trace.settings = now;
            return true;
        }
        if now.mode != was.mode || self.trace.fixed {
            return false;
        }
        let mut g = std::mem::take(&mut self.fbuf[0]);
        for i in 0..self.trace.sites.len() {
            let s = self.trace.sites[i];
            let k = self.lanes.n_elems(s.noise);
            match now.gumbel {
                Some(seed) => super::choice::gumbel(seed, s.site, k, &mut g),
                None => {
                    g.clear();
                    g.resize(k, 0.0);
                }
            }
            let off = self.lanes.meta(s.noise).off as usize;
            self.lanes.data[off..off + k].copy_from_slice(&g);
            let off = self.lanes.meta(s.tau).off as usize;
            self.lanes.data[off] = now.temperature;
        }
        self.fbuf[0] = g;
        self.trace.settings = now;
        true
    }

    /// The inputs have the recorded names' shapes and differentiability, and every input that is
    /// not differentiated holds the recorded bits.
    fn inputs_compatible(&self, inputs: &Inputs) -> bool {
        if inputs.entries.len() != self.trace.inputs.len() {
            return false;
        }
        let b = self.lanes.n_lanes();
        let same = |p: PayloadId, xs: &[f64]| {
            let m = self.lanes.meta(p);
            let off = m.off as usize;
            m.n as usize == xs.len()
                && self.lanes.data[off..off + xs.len()]
                    .iter()
                    .zip(xs)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
        };
        inputs
            .entries
            .iter()
            .zip(&self.trace.inputs)
            .all(|(inp, &v)| {
                let Some(p) = v.payload() else {
                    return false;
                };
                let m = self.lanes.meta(p);
                if m.grad != inp.grad {
                    return false;
                }
                match (&inp.value, v) {
                    (InputValue::Uniform(x), Value::Num(_)) => {
                        !m.varying && (inp.grad || same(p, std::slice::from_ref(x)))
                    }
                    (InputValue::Lanes(xs), Value::Num(_)) => {
                        m.varying
                            && xs.len() == b
                            && (inp.grad
                                || self.lanes.data[m.off as usize..m.off as usize + b]
                                    .iter()
                                    .zip(xs)
                                    .all(|(a, b)| a.to_bits() == b.to_bits()))
                    }
                    (InputValue::Vector(xs), Value::Vector(..)) => !m.varying && same(p, xs),
                    (InputValue::Matrix { rows, cols, data }, Value::Matrix(_, r, c)) => {
                        !m.varying && *rows == r as usize && *cols == c as usize && same(p, data)
                    }
                    _ => false,
                }
            })
    }

    /// Recomputes every tape node's output, in recording order, looking at the clock every few
    /// thousand nodes (`ErrorKind::Deadline`).
    fn replay_nodes(&mut self) -> Result<()> {
        let deadline = self.opts.deadline;
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return Err(*self.deadline_error());
        }
        let Evaluator {
            lanes,
            masks,
            tape,
            term_cache,
            fbuf,
            ..
        } = self;
        for k in 0..tape.nodes.len() {
            if k % 4096 == 4095
                && let Some(d) = deadline
                && std::time::Instant::now() >= d
            {
                return Err(*super::err(
                    crate::error::ErrorKind::Deadline,
                    "the evaluation passed its deadline (replaying the recorded trace)",
                ));
            }
            let node = tape.nodes[k];
            match node.op {
                TapeOp::Unary(op) => kernels::unary(lanes, masks, node.mask, op, node.out, node.a),
                TapeOp::Choice { start, len, hard } => {
                    let (start, len) = (start as usize, len as usize);
                    let (noise, wts) = (tape.extra[start], tape.extra[start + 1]);
                    let opts = &tape.extra[start + 2..start + 2 + len];
                    let ins = (node.a, noise, node.b);
                    kernels::choice(
                        lanes,
                        masks,
                        node.mask,
                        node.out,
                        wts,
                        ins,
                        opts,
                        hard,
                        &mut fbuf[0],
                    );
                }
                TapeOp::Binary(op) => {
                    kernels::binary(lanes, masks, node.mask, op, node.out, node.a, node.b)
                }
                TapeOp::Select { then } => {
                    kernels::select(lanes, masks, node.out, node.a, then, node.b, node.mask)
                }
                TapeOp::Concat { start, len } => {
                    let parts = &tape.extra[start as usize..(start + len) as usize];
                    kernels::concat(lanes, masks, node.mask, node.out, parts)
                }
                TapeOp::Gather { start } => {
                    kernels::gather(lanes, masks, node.mask, node.out, node.a, start as usize)
                }
                // The determinant family allocates `inv` then `det` next to each other.
                TapeOp::Tensor(TensorOp::Det { m }) => {
                    let (inv, det) = (node.b, node.out);
                    kernels::det_inv(lanes, masks, node.mask, fbuf, m as usize, node.a, inv, det)
                }
                TapeOp::Tensor(TensorOp::Inv { m }) => {
                    let (inv, det) = (node.out, PayloadId(node.out.0 + 1));
                    kernels::det_inv(lanes, masks, node.mask, fbuf, m as usize, node.a, inv, det)
                }
                TapeOp::Tensor(TensorOp::LogDet { m, abs }) => {
                    let (inv, det) = (node.b, PayloadId(node.b.0 + 1));
                    kernels::det_inv(lanes, masks, node.mask, fbuf, m as usize, node.a, inv, det);
                    kernels::log_det(lanes, masks, node.mask, det, node.out, abs);
                }
                TapeOp::Tensor(op) => {
                    let b = tensor_has_b(op).then_some(node.b);
                    kernels::tensor(
                        lanes, masks, node.mask, term_cache, fbuf, op, node.out, node.a, b,
                    )
                }
            }
        }
        Ok(())
    }

    /// Every severed value recomputes to its recorded bits.
    fn guards_hold(&self) -> bool {
        let lanes = &self.lanes;
        self.trace.guards.iter().all(|g| {
            let act = kernels::compute_lanes(&self.masks, g.mask, lanes.is_varying(g.out));
            let same = |x: f64, y: f64| x.to_bits() == y.to_bits();
            let flag = |ok: bool| f64::from(u8::from(ok));
            match g.guard {
                Guard::Unary(op) => (0..lanes.n_elems(g.out)).all(|e| {
                    act.iter().all(|&l| {
                        let l = l as usize;
                        same(op.apply(lanes.get(g.a, e, l)), lanes.get(g.out, e, l))
                    })
                }),
                Guard::Binary(op) => {
                    let (na, nb) = (lanes.n_elems(g.a), lanes.n_elems(g.b));
                    (0..lanes.n_elems(g.out)).all(|e| {
                        let (ea, eb) = (if na == 1 { 0 } else { e }, if nb == 1 { 0 } else { e });
                        act.iter().all(|&l| {
                            let l = l as usize;
                            let z = op.apply(lanes.get(g.a, ea, l), lanes.get(g.b, eb, l));
                            same(z, lanes.get(g.out, e, l))
                        })
                    })
                }
                Guard::Compare { c, start, len } => {
                    let args = &self.trace.args[start as usize..(start + len) as usize];
                    act.iter().all(|&l| {
                        let l = l as usize;
                        let ok = args
                            .windows(2)
                            .all(|w| c.apply(lanes.get(w[0], 0, l), lanes.get(w[1], 0, l)));
                        same(flag(ok), lanes.get(g.out, 0, l))
                    })
                }
                Guard::Test(t) => act.iter().all(|&l| {
                    let l = l as usize;
                    same(flag(t.holds(lanes.get(g.a, 0, l))), lanes.get(g.out, 0, l))
                }),
            }
        })
    }
}
