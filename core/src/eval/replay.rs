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
//!
//! Lane blocks: when the recorded arena is larger than a cache budget (`EvalOptions::lane_block`),
//! the replay runs block by block of lanes in one compact arena of a block's width (the same
//! payloads and, per block, the recorded masks restricted to its lanes): each block's values
//! that the replay does not recompute are copied in, its forward replayed and its reverse sweep
//! run while they are still in the caches, and its lanes of the result and gradients copied out.
//! The arena is the same memory for every block, so it stays cache-resident from one block (and
//! one run) to the next. Each lane's arithmetic is the same whatever its block, so the results
//! are bit-identical to one replay of all lanes.

use super::choice::ChoiceSite;
use super::{Machine, kernels};
use crate::api::{Evaluation, InputValue, Inputs, SoftChoice};
use crate::error::Result;
use crate::lanes::{Lanes, PayloadId};
use crate::linalg::{TensorOp, TermCache};
use crate::mask::{LaneMask, MaskId};
use crate::prims::{Binary, Compare, Unary};
use crate::real::Real;
use crate::tape::{Tape, TapeNode};
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
pub(crate) struct Trace<R: Real = f64> {
    /// The run being recorded is still replayable.
    ok: bool,
    /// The last run left a replayable recording.
    ready: bool,
    guards: Vec<GuardSite>,
    args: Vec<PayloadId>,
    /// The value bound to each input, in input order.
    inputs: Vec<Value>,
    /// Per input, the length of its [`InputValue::Cycled`] values (0: bound otherwise).
    cycles: Vec<usize>,
    root: Value,
    /// The last run was a replay.
    replayed: bool,
    /// The `soft-choice` settings the recording holds, every site visit's payloads, and whether
    /// some soft-choice value is not on the tape (then other settings need a new walk).
    settings: SoftChoice,
    sites: Vec<ChoiceSite>,
    fixed: bool,
    /// Blocked replays (current when `blocks_ready`).
    blocks: Blocks<R>,
    blocks_ready: bool,
    /// [`find_same_det`] of the recording, once computed (`same_det_ready`).
    same_det: Vec<u32>,
    same_det_ready: bool,
}

/// The state of blocked replays of one recording, in blocks of `width` lanes (the last one
/// `B - (n - 1) * width`).
#[derive(Clone, Debug, Default)]
struct Blocks<R: Real = f64> {
    width: usize,
    /// Compact arenas of `width` lanes and (when it differs) of the last block's width: the
    /// recorded payloads under the same ids.
    arenas: [Option<Lanes<R>>; 2],
    /// The recorded masks restricted to each block's lanes, under the same ids (the first
    /// `n` are current).
    masks: Vec<LaneMask>,
    n: usize,
    /// The payloads a block takes from the whole arena before its replay: the varying ones no
    /// tape node computes, the differentiable inputs and the soft-choice noise and temperature.
    copy_in: Vec<PayloadId>,
    /// Scratch: which payloads a tape node computes.
    computed: Vec<bool>,
}

impl<R: Real> Blocks<R> {
    /// Bytes the block arenas and masks hold (the runtime's memory gauge counts them).
    fn bytes(&self) -> u64 {
        let arenas = self
            .arenas
            .iter()
            .flatten()
            .map(|a| {
                (a.n_floats() * R::BYTES + a.len() * std::mem::size_of::<crate::lanes::Meta>())
                    as u64
            })
            .sum::<u64>();
        let masks = self.masks.iter().map(LaneMask::bytes).sum::<u64>();
        arenas + masks + self.copy_in.len() as u64 * 4 + self.computed.len() as u64
    }
}

impl<R: Real> Trace<R> {
    /// Bytes held for blocked replays.
    pub(super) fn block_bytes(&self) -> u64 {
        self.blocks.bytes()
    }
}

impl<R: Real> Default for Trace<R> {
    fn default() -> Self {
        Trace {
            ok: false,
            ready: false,
            guards: Vec::new(),
            args: Vec::new(),
            inputs: Vec::new(),
            cycles: Vec::new(),
            root: Value::Nil,
            replayed: false,
            settings: SoftChoice::default(),
            sites: Vec::new(),
            fixed: false,
            blocks: Blocks::default(),
            blocks_ready: false,
            same_det: Vec::new(),
            same_det_ready: false,
        }
    }
}

impl<R: Real> Trace<R> {
    /// Starts recording a walk (`grad`: it records a tape).
    pub(super) fn begin(&mut self, grad: bool, settings: SoftChoice) {
        self.settings = settings;
        self.sites.clear();
        self.fixed = false;
        self.ok = grad;
        self.ready = false;
        self.blocks_ready = false;
        self.same_det_ready = false;
        self.replayed = false;
        self.guards.clear();
        self.args.clear();
        self.inputs.clear();
        self.cycles.clear();
        self.root = Value::Nil;
    }

    /// Notes the value bound to the next input (`cycle`: the length of its cycled values, or 0).
    pub(super) fn input(&mut self, v: Value, cycle: usize) {
        self.inputs.push(v);
        self.cycles.push(cycle);
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
        self.blocks_ready = false;
        self.same_det_ready = false;
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

impl<R: Real> Machine<R> {
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
            match &inp.value {
                InputValue::Uniform(x) => {
                    super::write_rounded(&mut self.lanes, p, std::slice::from_ref(x))
                }
                InputValue::Lanes(xs) => super::write_rounded(&mut self.lanes, p, xs),
                InputValue::Grouped { values, group } => {
                    super::write_grouped(&mut self.lanes, p, values, *group)
                }
                InputValue::Cycled(values) => super::write_cycled(&mut self.lanes, p, values),
                InputValue::Lent(src) => {
                    let lanes = &mut self.lanes;
                    src.read_exactly(b, &mut |xs| super::write_rounded(lanes, p, xs));
                }
                _ => {}
            }
        }
        if !self.trace.same_det_ready {
            find_same_det(&self.tape, &self.lanes, &mut self.trace.same_det);
            self.trace.same_det_ready = true;
        }
        if b == 1 && !self.tape.flat.ready {
            self.tape.build_flat(&self.lanes, &mut self.term_cache);
        }
        let width = self.block_width();
        let run = if width < b {
            self.replay_blocks(width, grad)
        } else {
            self.replay_nodes()
                .map(|()| guards_hold(&self.lanes, &self.masks, &self.trace))
        };
        match run {
            Ok(true) => {}
            Ok(false) => {
                self.trace.invalidate();
                return Ok(false);
            }
            Err(e) => {
                // The payloads hold a half-replayed state: the recording is gone.
                self.trace.invalidate();
                return Err(e);
            }
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
                    g.resize(k, R::ZERO);
                }
            }
            let off = self.lanes.meta(s.noise).off as usize;
            self.lanes.data[off..off + k].copy_from_slice(&g);
            let off = self.lanes.meta(s.tau).off as usize;
            self.lanes.data[off] = R::of(now.temperature);
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
            m.n as usize == xs.len() && same_bits(&self.lanes.data[off..off + xs.len()], xs)
        };
        inputs
            .entries
            .iter()
            .zip(&self.trace.inputs)
            .zip(&self.trace.cycles)
            .all(|((inp, &v), &cycle)| {
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
                            && (inp.grad || same_bits(&self.lanes.data[m.off as usize..][..b], xs))
                    }
                    (InputValue::Grouped { values, group }, Value::Num(_)) => {
                        m.varying
                            && *group > 0
                            && values.len().checked_mul(*group) == Some(b)
                            && (inp.grad
                                || same_grouped(&self.lanes.data[m.off as usize..][..b], values))
                    }
                    (InputValue::Cycled(xs), Value::Num(_)) => {
                        // Recorded from a cycle as long, the other lanes hold copies of its first
                        // `xs.len()`: those are compared; recorded otherwise, every lane.
                        let have = &self.lanes.data[m.off as usize..][..b];
                        m.varying
                            && !xs.is_empty()
                            && b.is_multiple_of(xs.len())
                            && (inp.grad
                                || if cycle == xs.len() {
                                    same_bits(&have[..xs.len()], xs)
                                } else {
                                    have.chunks_exact(xs.len()).all(|h| same_bits(h, xs))
                                })
                    }
                    (InputValue::Lent(src), Value::Num(_)) => {
                        m.varying
                            && if inp.grad {
                                src.count() == b
                            } else {
                                let have = &self.lanes.data[m.off as usize..][..b];
                                let mut equal = false;
                                src.read_exactly(b, &mut |xs| equal = same_bits(have, xs)) && equal
                            }
                    }
                    (InputValue::Vector(xs), Value::Vector(..)) => !m.varying && same(p, xs),
                    (InputValue::LentVector(src), Value::Vector(..)) => {
                        let mut equal = false;
                        !m.varying
                            && src.read_exactly(src.count(), &mut |xs| equal = same(p, xs))
                            && equal
                    }
                    (InputValue::LentMatrix { rows, cols, data }, Value::Matrix(_, r, c)) => {
                        let mut equal = false;
                        !m.varying
                            && *rows == r as usize
                            && *cols == c as usize
                            && data.read_exactly(data.count(), &mut |xs| equal = same(p, xs))
                            && equal
                    }
                    (InputValue::Matrix { rows, cols, data }, Value::Matrix(_, r, c)) => {
                        !m.varying && *rows == r as usize && *cols == c as usize && same(p, data)
                    }
                    _ => false,
                }
            })
    }

    /// Recomputes every tape node's output in the whole arena.
    fn replay_nodes(&mut self) -> Result<()> {
        if self.opts.halted() {
            return Err(*self.deadline_error());
        }
        let Machine {
            lanes,
            masks,
            tape,
            term_cache,
            fbuf,
            opts,
            trace,
            ..
        } = self;
        let halt = (opts.deadline, opts.cancel.as_ref());
        replay_on(
            lanes,
            masks,
            tape,
            term_cache,
            fbuf,
            (halt, &trace.same_det),
        )
    }

    /// The lanes per block of a replay of the current recording: all of them when it is not
    /// split (the options say so, or the copies would not fit well inside the memory limit).
    fn block_width(&self) -> usize {
        let b = self.lanes.n_lanes();
        let floats = self.lanes.n_floats();
        if (floats * R::BYTES) as u64 * 4 > self.opts.max_memory {
            return b;
        }
        // The budget counts floats of either width: f32 blocks have as many lanes as f64 ones
        // (half the bytes), measured faster at B = 1024 than blocks of twice the lanes.
        self.opts.lane_block.width(b, floats)
    }

    /// The replay of the recording in blocks of `width` lanes: per block, the values the replay
    /// does not recompute into the block arena (this run's differentiable inputs and soft-choice
    /// settings among them), the forward, the guards, the reverse sweep (with `grad`), and its lanes of the
    /// result, the gradients and the soft-choice logits back; `Ok(false)` when a guard fails.
    fn replay_blocks(&mut self, width: usize, grad: bool) -> Result<bool> {
        let b = self.lanes.n_lanes();
        let Some(root) = self.trace.root.payload() else {
            return Ok(false);
        };
        if !self.trace.blocks_ready || self.trace.blocks.width != width {
            self.build_blocks(width);
        }
        if self.opts.halted() {
            return Err(*self.deadline_error());
        }
        let grads = self.grad_inputs.iter().map(|&(_, p)| p);
        self.tape.gather_begin(grads, b);
        let mut blocks = std::mem::take(&mut self.trace.blocks);
        let mut run = Ok(true);
        for k in 0..blocks.n {
            let lo = k * width;
            let tail = usize::from(b - lo < width);
            let Some(arena) = blocks.arenas[tail].as_mut() else {
                break;
            };
            for &p in &blocks.copy_in {
                arena.copy_in(&self.lanes, p, lo);
            }
            let masks = &blocks.masks[k];
            let (tc, fb) = (&mut self.term_cache, &mut self.fbuf);
            let halt = (self.opts.deadline, self.opts.cancel.as_ref());
            let at = (halt, &self.trace.same_det[..]);
            run = replay_on(arena, masks, &self.tape, tc, fb, at)
                .map(|()| guards_hold(arena, masks, &self.trace));
            if !matches!(run, Ok(true)) {
                break;
            }
            if grad {
                self.tape.backward(arena, masks, root);
                self.tape.gather_block(lo, arena.n_lanes());
            }
            self.lanes.copy_back(arena, root, lo);
            for s in &self.trace.sites {
                self.lanes.copy_back(arena, s.logits, lo);
            }
        }
        self.trace.blocks = blocks;
        if grad && matches!(run, Ok(true)) {
            self.tape.gather_done();
        }
        run
    }

    /// Sets up blocked replays of the recording in blocks of `width` lanes: the block arenas
    /// (from the recorded one), each block's masks and the list of payloads to copy in (reusing
    /// the capacity of earlier recordings' blocks).
    fn build_blocks(&mut self, width: usize) {
        self.tape.forget_merges();
        let b = self.lanes.n_lanes();
        let n = b.div_ceil(width.max(1));
        let bl = &mut self.trace.blocks;
        bl.width = width;
        bl.n = n;
        let last = b - (n - 1) * width;
        for (slot, (lo, hi)) in [(0, width), ((n - 1) * width, b)].into_iter().enumerate() {
            if slot == 1 && last == width {
                continue;
            }
            let arena = bl.arenas[slot].get_or_insert_with(|| Lanes::new(0));
            arena.restrict_from(&self.lanes, lo, hi);
        }
        while bl.masks.len() < n {
            bl.masks.push(LaneMask::new(0));
        }
        for (k, m) in bl.masks[..n].iter_mut().enumerate() {
            self.masks
                .restrict_into(k * width, ((k + 1) * width).min(b), m);
        }
        // What the replay computes: every node's output (the determinant family writes the
        // inverse and the determinant, a soft-choice its weights too).
        let computed = &mut bl.computed;
        computed.clear();
        computed.resize(self.lanes.len(), false);
        let mut set = |p: PayloadId| {
            if let Some(c) = computed.get_mut(p.0 as usize) {
                *c = true;
            }
        };
        for node in &self.tape.nodes {
            set(node.out);
            match node.op {
                TapeOp::Tensor(TensorOp::Det { .. } | TensorOp::LogDet { .. }) => {
                    set(node.b);
                    set(PayloadId(node.b.0 + 1));
                }
                TapeOp::Tensor(TensorOp::Inv { .. }) => set(PayloadId(node.out.0 + 1)),
                TapeOp::Choice { start, .. } => set(self.tape.extra[start as usize + 1]),
                _ => {}
            }
        }
        bl.copy_in.clear();
        for (i, m) in self.lanes.meta.iter().enumerate() {
            if m.varying && !computed[i] {
                bl.copy_in.push(PayloadId(i as u32));
            }
        }
        let uniform_inputs = self.grad_inputs.iter().map(|&(_, p)| p);
        let lanes = &self.lanes;
        bl.copy_in
            .extend(uniform_inputs.filter(|&p| !lanes.is_varying(p)));
        for s in &self.trace.sites {
            bl.copy_in.extend([s.noise, s.tau]);
        }
        self.trace.blocks_ready = true;
    }
}

/// Whether `have` holds `want` rounded to the lane type, bit for bit. Compares whole chunks
/// without an early exit inside one (so the compare and the rounding vectorise), and stops at
/// the first chunk that differs.
/// Whether every group of `have` (`want.len()` runs of equal length) holds its value of `want`,
/// rounded to the lane type, bit for bit.
fn same_grouped<R: Real>(have: &[R], want: &[f64]) -> bool {
    let group = have.len() / want.len().max(1);
    have.chunks_exact(group.max(1))
        .zip(want)
        .all(|(h, &w)| h.iter().all(|x| x.bits() == R::of(w).bits()))
}

fn same_bits<R: Real>(have: &[R], want: &[f64]) -> bool {
    const CHUNK: usize = 16;
    if have.len() != want.len() {
        return false;
    }
    let (mut h, mut w) = (have.chunks_exact(CHUNK), want.chunks_exact(CHUNK));
    for (h, w) in (&mut h).zip(&mut w) {
        let mut diff = 0u64;
        for i in 0..CHUNK {
            diff |= h[i].bits() ^ R::of(w[i]).bits();
        }
        if diff != 0 {
            return false;
        }
    }
    let (h, w) = (h.remainder(), w.remainder());
    h.iter().zip(w).all(|(a, &b)| a.bits() == R::of(b).bits())
}

/// The matrix size and the inverse and determinant payloads of a node of the determinant family
/// (which allocates the inverse, then the determinant, next to each other).
fn det_pair(node: &TapeNode) -> Option<(usize, PayloadId, PayloadId)> {
    match node.op {
        TapeOp::Tensor(TensorOp::Det { m }) => Some((m as usize, node.b, node.out)),
        TapeOp::Tensor(TensorOp::Inv { m }) => {
            Some((m as usize, node.out, PayloadId(node.out.0 + 1)))
        }
        TapeOp::Tensor(TensorOp::LogDet { m, .. }) => {
            Some((m as usize, node.b, PayloadId(node.b.0 + 1)))
        }
        _ => None,
    }
}

/// Per tape node, the index of an earlier node of the determinant family that inverted the same
/// payload on the same lanes (`u32::MAX`: none): a filter that inverts S and takes its log-det
/// computes one inverse per step instead of two. Looks back over the last 8 such nodes.
fn find_same_det<R: Real>(tape: &Tape<R>, lanes: &Lanes<R>, out: &mut Vec<u32>) {
    out.clear();
    out.resize(tape.nodes.len(), u32::MAX);
    let mut recent = [u32::MAX; 8];
    let mut next = 0;
    for (k, node) in tape.nodes.iter().enumerate() {
        let Some((m, inv, det)) = det_pair(node) else {
            continue;
        };
        let shape = |p: PayloadId| lanes.meta.get(p.0 as usize).map(|x| (x.n, x.varying));
        let same = |j: u32| {
            tape.nodes.get(j as usize).is_some_and(|src| {
                det_pair(src).is_some_and(|(ms, si, sd)| {
                    src.a == node.a
                        && src.mask == node.mask
                        && ms == m
                        && shape(si) == shape(inv)
                        && shape(sd) == shape(det)
                })
            })
        };
        if let Some(&j) = recent.iter().find(|&&j| same(j)) {
            out[k] = j;
        }
        recent[next] = k as u32;
        next = (next + 1) % recent.len();
    }
}

/// Recomputes every tape node's output in `lanes`, in recording order, looking at the clock every
/// few thousand nodes (`ErrorKind::Deadline`); `same_det` from [`find_same_det`] (or empty).
fn replay_on<R: Real>(
    lanes: &mut Lanes<R>,
    masks: &LaneMask,
    tape: &Tape<R>,
    term_cache: &mut TermCache,
    fbuf: &mut [Vec<R>; 5],
    (halt, same_det): (Halt<'_>, &[u32]),
) -> Result<()> {
    let flat = &tape.flat;
    let flat_ok = lanes.n_lanes() == 1
        && flat.ready
        && flat.steps.len() == tape.nodes.len()
        && lanes.data.len() >= flat.extent;
    for (c, chunk) in tape.nodes.chunks(4096).enumerate() {
        if c > 0 {
            past_deadline(halt)?;
        }
        for (k, node) in (c * 4096..).zip(chunk) {
            // SAFETY: the flat tape was built for this recording and the arena reaches its
            // extent (`flat_ok`).
            if flat_ok
                && unsafe { crate::flat::forward(&flat.steps[k], &flat.terms, &mut lanes.data) }
            {
                continue;
            }
            replay_node(lanes, masks, tape, term_cache, fbuf, same_det, (k, *node));
        }
    }
    Ok(())
}

/// When a replay stops early: the deadline and the cancel flag of its options.
type Halt<'a> = (Option<std::time::Instant>, Option<&'a crate::api::Cancel>);

/// `ErrorKind::Deadline` once the deadline has passed or the cancel flag is raised.
fn past_deadline((deadline, cancel): Halt<'_>) -> Result<()> {
    if crate::api::halted(deadline, cancel) {
        let why = if cancel.is_some_and(|c| c.is_raised()) {
            "the evaluation was cancelled (replaying the recorded trace)"
        } else {
            "the evaluation passed its deadline (replaying the recorded trace)"
        };
        return Err(*super::err(crate::error::ErrorKind::Deadline, why));
    }
    Ok(())
}

/// Recomputes the output of tape node `k` (`node`) by its kernel (`same_det`: see [`find_same_det`]).
fn replay_node<R: Real>(
    lanes: &mut Lanes<R>,
    masks: &LaneMask,
    tape: &Tape<R>,
    term_cache: &mut TermCache,
    fbuf: &mut [Vec<R>; 5],
    same_det: &[u32],
    (k, node): (usize, TapeNode),
) {
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
        TapeOp::Tensor(TensorOp::Det { .. } | TensorOp::Inv { .. } | TensorOp::LogDet { .. }) => {
            let Some((m, inv, det)) = det_pair(&node) else {
                return;
            };
            // The same matrix inverted earlier on the same lanes: the same bits, copied.
            match same_det.get(k).and_then(|&j| tape.nodes.get(j as usize)) {
                Some(src) if let Some((_, si, sd)) = det_pair(src) => {
                    kernels::copy(lanes, masks, node.mask, inv, si);
                    kernels::copy(lanes, masks, node.mask, det, sd);
                }
                _ => kernels::det_inv(lanes, masks, node.mask, fbuf, m, node.a, inv, det),
            }
            if let TapeOp::Tensor(TensorOp::LogDet { abs, .. }) = node.op {
                kernels::log_det(lanes, masks, node.mask, det, node.out, abs);
            }
        }
        TapeOp::Tensor(op) => {
            let b = tensor_has_b(op).then_some(node.b);
            kernels::tensor(
                lanes, masks, node.mask, term_cache, fbuf, op, node.out, node.a, b,
            )
        }
    }
}

/// Every severed value of the recording `trace` recomputes to its recorded bits in `lanes`.
fn guards_hold<R: Real>(lanes: &Lanes<R>, masks: &LaneMask, trace: &Trace<R>) -> bool {
    trace.guards.iter().all(|g| {
        let act = kernels::compute_lanes(masks, g.mask, lanes.is_varying(g.out));
        let same = |x: R, y: R| x.bits() == y.bits();
        let flag = |ok: bool| if ok { R::ONE } else { R::ZERO };
        match g.guard {
            Guard::Unary(op) => (0..lanes.n_elems(g.out)).all(|e| {
                act.iter().all(|&l| {
                    let l = l as usize;
                    same(op.apply(lanes.at(g.a, e, l)), lanes.at(g.out, e, l))
                })
            }),
            Guard::Binary(op) => {
                let (na, nb) = (lanes.n_elems(g.a), lanes.n_elems(g.b));
                (0..lanes.n_elems(g.out)).all(|e| {
                    let (ea, eb) = (if na == 1 { 0 } else { e }, if nb == 1 { 0 } else { e });
                    act.iter().all(|&l| {
                        let l = l as usize;
                        let z = op.apply(lanes.at(g.a, ea, l), lanes.at(g.b, eb, l));
                        same(z, lanes.at(g.out, e, l))
                    })
                })
            }
            Guard::Compare { c, start, len } => {
                let args = &trace.args[start as usize..(start + len) as usize];
                act.iter().all(|&l| {
                    let l = l as usize;
                    let ok = args
                        .windows(2)
                        .all(|w| c.apply(lanes.at(w[0], 0, l), lanes.at(w[1], 0, l)));
                    same(flag(ok), lanes.at(g.out, 0, l))
                })
            }
            Guard::Test(t) => act.iter().all(|&l| {
                let l = l as usize;
                same(
                    flag(t.holds(lanes.at(g.a, 0, l).f64())),
                    lanes.at(g.out, 0, l),
                )
            }),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::same_bits;

    #[test]
    fn same_bits_sees_one_changed_element_anywhere() {
        let want: Vec<f64> = (0..37).map(|i| i as f64 * 0.1).collect();
        let have64 = want.clone();
        let have32: Vec<f32> = want.iter().map(|&x| x as f32).collect();
        assert!(same_bits(&have64, &want) && same_bits(&have32, &want));
        for i in 0..want.len() {
            let mut w = want.clone();
            w[i] += 1.0;
            assert!(
                !same_bits(&have64, &w) && !same_bits(&have32, &w),
                "element {i}"
            );
            w[i] = -want[i];
            assert_eq!(same_bits(&have64, &w), want[i].to_bits() == w[i].to_bits());
        }
        // -0 differs from +0; a shorter slice differs; a change below f32's precision does
        // not change the f32 bits.
        let mut w = want.clone();
        w[0] = -0.0;
        assert!(!same_bits(&have64, &w) && !same_bits(&have32, &w));
        assert!(!same_bits(&have64, &want[1..]));
        let mut w = want.clone();
        w[20] += 1e-12;
        assert!(!same_bits(&have64, &w) && same_bits(&have32, &w));
    }
}
