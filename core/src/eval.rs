//! `Evaluator`: the single walker over decoded heap programs, for B lanes at once, with lane masks
//! for divergent control and an optional tape for reverse mode.

use crate::api::{Dialect, EvalOptions, Evaluation, Gradient, InputValue, Inputs, Output};
use crate::decode::{self, Code, CodeId, CodeList, Codes, Decoder, LetKind};
use crate::error::{CoreError, ErrorKind};
use crate::heap::{Heap, Node, Program};
use crate::lanes::{Lanes, LanesMark, PayloadId};
use crate::mask::{LaneMask, MaskId};
use crate::prims::Prim;
use crate::real::Real;
use crate::tape::{Tape, TapeOp};
use crate::value::Value;

mod apply;
mod choice;
mod governor;
mod kernels;
mod replay;

const NO_FRAME: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Frame {
    parent: u32,
    base: u32,
}

#[derive(Clone, Copy, Debug)]
struct Closure {
    lambda: CodeId,
    env: u32,
}

/// How an evaluation of a loop-body tail ended, per active lane.
#[derive(Clone, Copy, Debug)]
enum Flow {
    /// Every active lane produced this value.
    Val(Value),
    /// Every active lane recurs with the arguments at `recur_args[ix..]`.
    Recur(u32),
    /// Lanes `done_mask` finished with `done`; lanes `recur_mask` recur with `recur_args[ix..]`.
    Split {
        done: Value,
        done_mask: MaskId,
        ix: u32,
        recur_mask: MaskId,
    },
}

/// The finished part (value, lanes) and the recurring part (argument index, lanes) of a flow.
type FlowParts = (Option<(Value, MaskId)>, Option<(u32, MaskId)>);

enum Truth {
    True,
    False,
    Mixed(MaskId, MaskId),
}

/// A saved length of every per-run arena, to release what an iteration allocated.
#[derive(Clone, Copy)]
struct Mark {
    lanes: LanesMark,
    frames: usize,
    slots: usize,
    pairs: usize,
    closures: usize,
}

/// Walks heap programs for B lanes at once. Reuse one evaluator for many runs: its arenas keep
/// their capacity, so steady-state runs allocate little. Its lanes are `f64` or `f32`
/// ([`EvalOptions::precision`]); values cross this API as `f64` either way.
#[derive(Debug)]
pub struct Evaluator {
    machine: Precise,
}

/// The walker in the precision the options chose.
#[derive(Debug)]
enum Precise {
    F64(Box<Machine<f64>>),
    F32(Box<Machine<f32>>),
}

/// `$body` with `$m` bound to the evaluator's machine, whatever its precision.
macro_rules! on_machine {
    ($self:expr, $m:ident => $body:expr) => {
        match $self {
            Precise::F64($m) => $body,
            Precise::F32($m) => $body,
        }
    };
}

impl Evaluator {
    /// An evaluator with the given options.
    pub fn new(opts: EvalOptions) -> Self {
        let machine = match opts.precision {
            crate::api::Precision::F64 => Precise::F64(Box::new(Machine::new(opts))),
            crate::api::Precision::F32 => Precise::F32(Box::new(Machine::new(opts))),
        };
        Evaluator { machine }
    }

    /// The options this evaluator was built with.
    pub fn options(&self) -> &EvalOptions {
        on_machine!(&self.machine, m => &m.opts)
    }

    /// Work units the last run took (form visits plus elements touched; the same count as
    /// [`Evaluator::last_work`]).
    pub fn last_steps(&self) -> u64 {
        on_machine!(&self.machine, m => m.steps)
    }

    /// Whether the last run was a replay of the recorded trace before it (see `EvalOptions::replay`).
    pub fn last_run_replayed(&self) -> bool {
        on_machine!(&self.machine, m => m.trace.replayed())
    }

    /// Number of tape nodes the last recorded run appended.
    pub fn last_tape_len(&self) -> usize {
        on_machine!(&self.machine, m => m.tape.nodes.len())
    }

    /// Number of floats the payload arena held at the end of the last run (a memory gauge).
    pub fn arena_floats(&self) -> usize {
        on_machine!(&self.machine, m => m.lanes.n_floats())
    }

    /// Forward-only evaluation.
    pub fn eval(
        &mut self,
        heap: &mut Heap,
        program: &Program,
        inputs: &Inputs,
    ) -> crate::error::Result<Evaluation> {
        let mut out = Evaluation::empty();
        self.eval_into(heap, program, inputs, false, &mut out)?;
        Ok(out)
    }

    /// Evaluation with per-lane gradients for every `grad` input.
    pub fn eval_grad(
        &mut self,
        heap: &mut Heap,
        program: &Program,
        inputs: &Inputs,
    ) -> crate::error::Result<Evaluation> {
        let mut out = Evaluation::empty();
        self.eval_into(heap, program, inputs, true, &mut out)?;
        Ok(out)
    }

    /// Like [`Evaluator::eval`] or (with `grad`) [`Evaluator::eval_grad`], writing into `out` and
    /// reusing its buffers: repeated runs of one program allocate nothing once warmed up.
    pub fn eval_into(
        &mut self,
        heap: &mut Heap,
        program: &Program,
        inputs: &Inputs,
        grad: bool,
        out: &mut Evaluation,
    ) -> crate::error::Result<()> {
        on_machine!(&mut self.machine, m => m.run(heap, program, inputs, grad, out))
    }

    /// Sets the instant after which runs stop with `ErrorKind::Deadline` (`None`: no deadline).
    pub fn set_deadline(&mut self, deadline: Option<std::time::Instant>) {
        on_machine!(&mut self.machine, m => m.set_deadline(deadline))
    }

    /// Sets the flag that stops runs as a passed deadline would once raised (`None`: none).
    pub fn set_cancel(&mut self, cancel: Option<crate::api::Cancel>) {
        on_machine!(&mut self.machine, m => m.set_cancel(cancel))
    }

    /// Sets the work, depth and memory budgets of the runs that follow.
    pub fn set_limits(&mut self, max_steps: u64, max_depth: u32, max_memory: u64) {
        on_machine!(&mut self.machine, m => m.set_limits(max_steps, max_depth, max_memory))
    }

    /// Work units the last run took.
    pub fn last_work(&self) -> u64 {
        on_machine!(&self.machine, m => m.last_work())
    }

    /// Bytes the evaluator's arenas hold now (a memory gauge).
    pub fn memory_in_use(&self) -> u64 {
        on_machine!(&self.machine, m => m.memory_in_use())
    }

    /// The `soft-choice` read-out of the last run: per site, each lane's pick and weights.
    pub fn last_choices(&mut self) -> &[crate::api::ChoiceReadout] {
        on_machine!(&mut self.machine, m => m.last_choices())
    }

    /// Sets the `soft-choice` settings of the runs that follow.
    pub fn set_soft_choice(&mut self, soft_choice: crate::api::SoftChoice) {
        on_machine!(&mut self.machine, m => m.set_soft_choice(soft_choice))
    }
}

/// The walker of one precision (see [`Evaluator`]).
#[derive(Debug)]
pub(crate) struct Machine<R: Real> {
    opts: EvalOptions,
    heap: Heap,
    lanes: Lanes<R>,
    masks: LaneMask,
    mask: MaskId,
    tape: Tape<R>,
    recording: bool,
    /// This run records although it is forward only (for the runs after it to replay): the
    /// recording stops once the run holds more than `governor::FORWARD_RECORD_CAP`.
    forward_recording: bool,
    /// A forward-only recording of the cached program outgrew its cap: its forward runs walk.
    forward_unrecordable: bool,
    codes: Codes,
    globals: Vec<Value>,
    frames: Vec<Frame>,
    slots: Vec<Value>,
    pairs: Vec<(Value, Value)>,
    closures: Vec<Closure>,
    argstack: Vec<Value>,
    recur_args: Vec<Value>,
    steps: u64,
    /// The work count at which the governor looks next (memory, deadline, budget): at most
    /// `max_steps`, so the hot path needs one compare per step.
    next_check: u64,
    /// An upper bound on the bytes in use: measured at each periodic look, plus every
    /// reservation since, so most reservations need no measurement.
    mem_seen: std::cell::Cell<u64>,
    depth: u32,
    /// The lowest slot index a `set!` assigned since a loop last looked (0 for a global,
    /// `usize::MAX` for none): an iteration that assigned a slot older than itself cannot release
    /// its allocations, which that slot may now hold.
    lowest_set: usize,
    scratch_a: Vec<u32>,
    scratch_b: Vec<u32>,
    lane_buf: Vec<u32>,
    kept: Vec<(usize, crate::lanes::Meta, usize)>,
    grad_inputs: Vec<(usize, PayloadId)>,
    carried_pool: Vec<Vec<Value>>,
    payload_buf: Vec<PayloadId>,
    term_cache: crate::linalg::TermCache,
    fbuf: [Vec<R>; 5],
    false_p: PayloadId,
    true_p: PayloadId,
    cache: Option<DecodeKey>,
    cached_tops: Vec<CodeId>,
    cached_input_slots: Vec<u32>,
    /// Arena lengths right after the cached program was decoded: what `eval` appends to the
    /// decoded forms and the heap during a run is dropped before the next walk.
    base_codes: (usize, usize, u32),
    base_heap: usize,
    /// Heap length at the end of the last run: when the caller added no cells since, the cells
    /// `eval` appended can go.
    heap_after: usize,
    /// The printed result of the last run when it is not numeric (see `Output::Other`).
    shown: String,
    trace: replay::Trace<R>,
    /// The `soft-choice` read-out of the last run, and where each site's payloads live.
    choices: Vec<crate::api::ChoiceReadout>,
    choice_sites: Vec<choice::ChoiceSite>,
    /// A replay moved the logits since the read-out was computed.
    choices_stale: bool,
}

/// What a decoded program depends on: the heap, the forms, the input names and the dialect.
#[derive(Debug, Default, PartialEq)]
struct DecodeKey {
    heap: u64,
    forms: Vec<crate::heap::NodeId>,
    inputs: Vec<String>,
}

/// The walk's results: the error boxed, so a `Result<Value>` travels in two registers. The
/// public entry points unbox it.
pub(crate) type Result<T> = std::result::Result<T, Box<CoreError>>;

/// `CoreError::at` for a boxed error.
pub(crate) trait At {
    /// Sets the error's node unless it has one.
    fn at(self, node: crate::heap::NodeId) -> Self;
}

impl At for Box<CoreError> {
    #[inline]
    fn at(mut self, node: crate::heap::NodeId) -> Self {
        if self.node.is_none() {
            self.node = Some(node);
        }
        self
    }
}

#[cold]
fn err(kind: ErrorKind, msg: impl Into<String>) -> Box<CoreError> {
    Box::new(CoreError::new(kind, msg))
}

/// Shape of a numeric value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Scalar,
    Vector(u32),
    Matrix(u16, u16),
}

impl Shape {
    fn n(self) -> usize {
        match self {
            Shape::Scalar => 1,
            Shape::Vector(n) => n as usize,
            Shape::Matrix(r, c) => r as usize * c as usize,
        }
    }

    fn value(self, p: PayloadId) -> Value {
        match self {
            Shape::Scalar => Value::Num(p),
            Shape::Vector(n) => Value::Vector(p, n),
            Shape::Matrix(r, c) => Value::Matrix(p, r, c),
        }
    }
}

/// Writes `xs`, rounded to the lane type, into the floats of `p` from its first.
#[inline]
fn write_rounded<R: Real>(lanes: &mut Lanes<R>, p: PayloadId, xs: &[f64]) {
    let off = lanes.meta(p).off as usize;
    if let Some(dst) = lanes.data.get_mut(off..off + xs.len()) {
        dst.iter_mut().zip(xs).for_each(|(d, &x)| *d = R::of(x));
    }
}

/// Writes `values`, rounded to the lane type, into the lanes of the varying scalar `p`, each
/// value into `group` consecutive lanes (an [`InputValue::Grouped`]).
fn write_grouped<R: Real>(lanes: &mut Lanes<R>, p: PayloadId, values: &[f64], group: usize) {
    let off = lanes.meta(p).off as usize;
    if let Some(dst) = lanes.data.get_mut(off..off + values.len() * group) {
        for (d, &x) in dst.chunks_exact_mut(group).zip(values) {
            d.fill(R::of(x));
        }
    }
}

/// Writes `values`, rounded to the lane type, into the lanes of the varying scalar `p` over and
/// over (an [`InputValue::Cycled`]; the lane count a multiple of its length).
fn write_cycled<R: Real>(lanes: &mut Lanes<R>, p: PayloadId, values: &[f64]) {
    let (off, b) = (lanes.meta(p).off as usize, lanes.n_lanes());
    if let Some(dst) = lanes.data.get_mut(off..off + b) {
        for d in dst.chunks_exact_mut(values.len()) {
            d.iter_mut().zip(values).for_each(|(d, &x)| *d = R::of(x));
        }
    }
}

/// True only when every number of `xs` is finite (a cheap test before the lane-by-lane one): a
/// non-finite number makes its running sum non-finite for good (`±inf + finite = ±inf`,
/// `inf - inf = NaN`, NaN stays NaN), so finite sums prove every number finite; finite numbers
/// whose sum overflows only send the caller to the exact per-lane scan. Independent sums (no
/// early exit) in the widest vectors, enough of them that the adds' latency stays off the path.
fn provably_finite(xs: &[f64]) -> bool {
    crate::widest::with_widest_vectors(ProvablyFinite(xs))
}

/// [`provably_finite`]'s sums.
struct ProvablyFinite<'a>(&'a [f64]);

impl crate::widest::WideKernel for ProvablyFinite<'_> {
    type Output = bool;
    #[inline(always)]
    fn run(self) -> bool {
        const SUMS: usize = 32;
        let mut acc = [0.0f64; SUMS];
        let mut chunks = self.0.chunks_exact(SUMS);
        for c in &mut chunks {
            for (a, &x) in acc.iter_mut().zip(c) {
                *a += x;
            }
        }
        let rest = chunks.remainder().iter().all(|x| x.is_finite());
        rest && acc.iter().all(|a| a.is_finite())
    }
}

impl<R: Real> Machine<R> {
    /// A machine with the given options.
    fn new(opts: EvalOptions) -> Self {
        let b = opts.n_lanes.max(1);
        Machine {
            heap: Heap::new(),
            lanes: Lanes::new(b),
            masks: LaneMask::new(b),
            mask: MaskId::FULL,
            tape: Tape::default(),
            recording: false,
            forward_recording: false,
            forward_unrecordable: false,
            codes: Codes::default(),
            globals: Vec::new(),
            frames: Vec::new(),
            slots: Vec::new(),
            pairs: Vec::new(),
            closures: Vec::new(),
            argstack: Vec::new(),
            recur_args: Vec::new(),
            steps: 0,
            next_check: 0,
            mem_seen: std::cell::Cell::new(u64::MAX),
            depth: 0,
            lowest_set: usize::MAX,
            scratch_a: Vec::new(),
            scratch_b: Vec::new(),
            lane_buf: Vec::new(),
            kept: Vec::new(),
            grad_inputs: Vec::new(),
            carried_pool: Vec::new(),
            payload_buf: Vec::new(),
            term_cache: crate::linalg::TermCache::default(),
            fbuf: Default::default(),
            false_p: PayloadId(0),
            true_p: PayloadId(1),
            cache: None,
            cached_tops: Vec::new(),
            cached_input_slots: Vec::new(),
            base_codes: (0, 0, 0),
            base_heap: 0,
            heap_after: 0,
            shown: String::new(),
            trace: replay::Trace::default(),
            choices: Vec::new(),
            choice_sites: Vec::new(),
            choices_stale: false,
            opts: EvalOptions { n_lanes: b, ..opts },
        }
    }

    fn run(
        &mut self,
        heap: &mut Heap,
        program: &Program,
        inputs: &Inputs,
        grad: bool,
        out: &mut Evaluation,
    ) -> crate::error::Result<()> {
        program.check_heap(heap)?;
        std::mem::swap(heap, &mut self.heap);
        let res = self.run_inner(program, inputs, grad, out);
        self.heap_after = self.heap.len();
        std::mem::swap(heap, &mut self.heap);
        if let Err(e) = &res
            && e.kind.is_limit()
        {
            self.release_after_limit();
        }
        res
    }

    fn reset(&mut self) {
        self.trace.invalidate();
        self.lanes.clear();
        self.masks.clear();
        self.mask = MaskId::FULL;
        self.tape.clear();
        self.frames.clear();
        self.slots.clear();
        self.pairs.clear();
        self.closures.clear();
        self.argstack.clear();
        self.recur_args.clear();
        self.steps = 0;
        self.next_check = 0;
        // Unknown until the first periodic look: reservations measure until then.
        self.mem_seen.set(u64::MAX);
        self.depth = 0;
        self.lowest_set = usize::MAX;
        self.choices.clear();
        self.choice_sites.clear();
        self.choices_stale = false;
        self.false_p = self.lanes.scalar(0.0);
        self.true_p = self.lanes.scalar(1.0);
    }

    fn run_inner(
        &mut self,
        program: &Program,
        inputs: &Inputs,
        grad: bool,
        out: &mut Evaluation,
    ) -> crate::error::Result<()> {
        // Globals: inputs first, then decoded top-level names. The decoded forms are reused while
        // the heap, the forms and the input names stay the same.
        let hit = self.cache.as_ref().is_some_and(|k| {
            k.heap == self.heap.id()
                && k.forms == program.forms()
                && k.inputs.len() == inputs.entries.len()
                && k.inputs
                    .iter()
                    .zip(&inputs.entries)
                    .all(|(a, b)| *a == b.name)
        });
        if hit && self.try_replay(inputs, grad, out)? {
            return Ok(());
        }
        // A forward-only run of the program the last run walked records too, so that the runs
        // after it replay; should the recording outgrow the memory limit, it walks again without.
        let record = grad || (hit && self.opts.replay && !self.forward_unrecordable);
        let res = self.walk_run(program, inputs, grad, record, hit, out);
        let stopped = !grad && record && !self.recording;
        self.forward_unrecordable |= stopped;
        match res {
            Err(e) if !grad && record && e.kind == ErrorKind::MemoryLimit => {
                self.forward_unrecordable = true;
                self.walk_run(program, inputs, false, false, true, out)
            }
            res => res,
        }
    }

    /// One walk of `program`, recording a tape when `record` (`hit`: its decoded forms are
    /// cached).
    fn walk_run(
        &mut self,
        program: &Program,
        inputs: &Inputs,
        grad: bool,
        record: bool,
        hit: bool,
        out: &mut Evaluation,
    ) -> crate::error::Result<()> {
        self.reset();
        self.recording = record;
        self.forward_recording = record && !grad;
        self.trace.begin(record, self.opts.soft_choice);
        if !hit {
            // The old key's buffers are reused for the new one once it decodes.
            let mut key = self.cache.take().unwrap_or_default();
            self.forward_unrecordable = false;
            self.codes.clear();
            self.cached_input_slots.clear();
            for inp in &inputs.entries {
                let sym = self.heap.intern(&inp.name);
                self.cached_input_slots.push(self.codes.global_slot(sym));
            }
            Decoder::new(
                &self.heap,
                &mut self.codes,
                self.opts.dialect,
                self.opts.max_depth,
            )
            .top_level_into(program.forms(), &mut self.cached_tops)?;
            key.heap = self.heap.id();
            key.forms.clear();
            key.forms.extend_from_slice(program.forms());
            key.inputs.truncate(inputs.entries.len());
            for (i, e) in inputs.entries.iter().enumerate() {
                match key.inputs.get_mut(i) {
                    Some(name) => {
                        name.clear();
                        name.push_str(&e.name);
                    }
                    None => key.inputs.push(e.name.clone()),
                }
            }
            self.cache = Some(key);
            self.base_codes = self.codes.lens();
            self.base_heap = self.heap.len();
        } else {
            self.codes.truncate(self.base_codes);
            if self.heap.len() == self.heap_after {
                self.heap.truncate(self.base_heap);
            } else {
                // The caller added cells: they stay, from now on below the base.
                self.base_heap = self.heap.len();
            }
        }
        let tops = std::mem::take(&mut self.cached_tops);
        let input_slots = std::mem::take(&mut self.cached_input_slots);
        let res = self
            .run_decoded(&tops, &input_slots, inputs, grad, out)
            .map_err(|e| *e);
        self.cached_tops = tops;
        self.cached_input_slots = input_slots;
        res
    }

    fn run_decoded(
        &mut self,
        tops: &[CodeId],
        input_slots: &[u32],
        inputs: &Inputs,
        grad: bool,
        out: &mut Evaluation,
    ) -> Result<()> {
        if tops.is_empty() {
            return Err(err(ErrorKind::Syntax, "empty program"));
        }
        self.globals.clear();
        self.globals
            .resize(self.codes.global_names.len(), Value::Unassigned);
        let b = self.lanes.n_lanes();
        let mut grad_inputs = std::mem::take(&mut self.grad_inputs);
        grad_inputs.clear();
        for (k, (inp, &slot)) in inputs.entries.iter().zip(input_slots).enumerate() {
            let bad = |m: String| err(ErrorKind::Input, format!("input `{}`: {m}", inp.name));
            let v = match &inp.value {
                InputValue::Uniform(x) => {
                    let p = self.lanes.alloc(1, false, inp.grad && self.recording);
                    self.set(p, 0, 0, *x);
                    Value::Num(p)
                }
                InputValue::Lanes(xs) => {
                    if xs.len() != b {
                        return Err(bad(format!("{} values for {b} lanes", xs.len())));
                    }
                    let p = self.lanes.alloc(1, true, inp.grad && self.recording);
                    self.set_all(p, xs);
                    Value::Num(p)
                }
                InputValue::Grouped { values, group } => {
                    if *group == 0 || values.len().checked_mul(*group) != Some(b) {
                        return Err(bad(format!(
                            "{} groups of {group} lanes for {b} lanes",
                            values.len()
                        )));
                    }
                    let p = self.lanes.alloc(1, true, inp.grad && self.recording);
                    write_grouped(&mut self.lanes, p, values, *group);
                    Value::Num(p)
                }
                InputValue::Cycled(values) => {
                    if values.is_empty() || !b.is_multiple_of(values.len()) {
                        return Err(bad(format!(
                            "a cycle of {} values for {b} lanes",
                            values.len()
                        )));
                    }
                    let p = self.lanes.alloc(1, true, inp.grad && self.recording);
                    write_cycled(&mut self.lanes, p, values);
                    Value::Num(p)
                }
                InputValue::Lent(src) => {
                    let p = self.lanes.alloc(1, true, inp.grad && self.recording);
                    if !src.read_exactly(b, &mut |xs| self.set_all(p, xs)) {
                        return Err(bad(format!("{} values for {b} lanes", src.count())));
                    }
                    Value::Num(p)
                }
                InputValue::Vector(xs) => {
                    let p = self.lanes.alloc(xs.len(), false, false);
                    self.set_all(p, xs);
                    Value::Vector(p, xs.len() as u32)
                }
                InputValue::LentVector(src) => {
                    let n = src.count();
                    let p = self.lanes.alloc(n, false, false);
                    if !src.read_exactly(n, &mut |xs| self.set_all(p, xs)) {
                        return Err(bad("the lent vector changed its length".into()));
                    }
                    Value::Vector(p, n as u32)
                }
                InputValue::LentMatrix { rows, cols, data } => {
                    let n = data.count();
                    if rows * cols != n || *rows > u16::MAX as usize || *cols > u16::MAX as usize {
                        return Err(bad(format!(
                            "{rows}x{cols} matrix needs {} values, got {n}",
                            rows * cols
                        )));
                    }
                    let p = self.lanes.alloc(n, false, false);
                    if !data.read_exactly(n, &mut |xs| self.set_all(p, xs)) {
                        return Err(bad("the lent matrix changed its length".into()));
                    }
                    Value::Matrix(p, *rows as u16, *cols as u16)
                }
                InputValue::Matrix { rows, cols, data } => {
                    if rows * cols != data.len()
                        || *rows > u16::MAX as usize
                        || *cols > u16::MAX as usize
                    {
                        return Err(bad(format!(
                            "{rows}x{cols} matrix needs {} values, got {}",
                            rows * cols,
                            data.len()
                        )));
                    }
                    let p = self.lanes.alloc(data.len(), false, false);
                    self.set_all(p, data);
                    Value::Matrix(p, *rows as u16, *cols as u16)
                }
            };
            if inp.grad && self.recording {
                if let Value::Num(p) = v {
                    grad_inputs.push((k, p));
                } else if grad {
                    return Err(bad("only scalar inputs can be differentiated".into()));
                }
            }
            self.globals[slot as usize] = v;
            let cycle = match &inp.value {
                InputValue::Cycled(values) => values.len(),
                _ => 0,
            };
            self.trace.input(v, cycle);
        }
        self.grad_inputs = grad_inputs;
        let mut result = Value::Nil;
        for &top in tops {
            result = self.eval_value(top, NO_FRAME)?;
        }
        if !matches!(
            result,
            Value::Num(_) | Value::Bool(_) | Value::Vector(..) | Value::Matrix(..)
        ) {
            self.shown = self.show(result)?;
        }
        self.trace.finish(result);
        self.finish(result, inputs, grad, out);
        Ok(())
    }

    /// Writes the value, the gradients (after the reverse sweep) and the per-lane faults of a run
    /// whose result is `result` into `out`.
    fn finish(&mut self, result: Value, inputs: &Inputs, grad: bool, out: &mut Evaluation) {
        let b = self.lanes.n_lanes();
        let grad_inputs = std::mem::take(&mut self.grad_inputs);
        self.output_into(result, &mut out.value);
        let n_grads = if grad { grad_inputs.len() } else { 0 };
        out.grads.truncate(n_grads);
        while out.grads.len() < n_grads {
            out.grads.push(Gradient {
                name: String::new(),
                per_lane: Vec::new(),
            });
        }
        if grad {
            let root = match result {
                Value::Num(p) | Value::Vector(p, _) | Value::Matrix(p, _, _) => Some(p),
                _ => None,
            };
            self.tape
                .backward(&self.lanes, &self.masks, root.unwrap_or(self.false_p));
            for (g, &(k, p)) in out.grads.iter_mut().zip(&grad_inputs) {
                g.name.clear();
                g.name.push_str(&inputs.entries[k].name);
                self.tape.grad_of(p, b, &mut g.per_lane);
                if root.is_none() {
                    g.per_lane.iter_mut().for_each(|x| *x = 0.0);
                }
            }
        }
        self.grad_inputs = grad_inputs;
        let faults = &mut out.faults;
        faults.clear();
        faults.resize(b, false);
        // Almost every run is finite everywhere: one vectorised scan of the value and the
        // gradients says so, and only a run with a non-finite number is looked at lane by lane.
        let numbers = match &out.value {
            Output::Number(v) | Output::Vector { data: v, .. } | Output::Matrix { data: v, .. } => {
                v.as_slice()
            }
            _ => &[],
        };
        if provably_finite(numbers) && out.grads.iter().all(|g| provably_finite(&g.per_lane)) {
            return;
        }
        match &out.value {
            Output::Number(v) => v
                .iter()
                .zip(faults.iter_mut())
                .for_each(|(x, f)| *f |= !x.is_finite()),
            Output::Vector { len, data } => {
                for (l, f) in faults.iter_mut().enumerate() {
                    *f |= data[l * len..(l + 1) * len].iter().any(|x| !x.is_finite());
                }
            }
            Output::Matrix { rows, cols, data } => {
                let n = rows * cols;
                for (l, f) in faults.iter_mut().enumerate() {
                    *f |= data[l * n..(l + 1) * n].iter().any(|x| !x.is_finite());
                }
            }
            _ => {}
        }
        for g in &out.grads {
            g.per_lane
                .iter()
                .zip(faults.iter_mut())
                .for_each(|(x, f)| *f |= !x.is_finite());
        }
    }

    // ---------------------------------------------------------------- payload helpers

    #[inline]
    fn set(&mut self, p: PayloadId, e: usize, l: usize, x: f64) {
        let m = self.lanes.meta(p);
        let i = self.lanes.index(m, e, l);
        self.lanes.data[i] = R::of(x);
    }

    /// Writes `xs`, rounded to the lane type, into the floats of `p` from its first (a
    /// varying scalar's lanes, or a uniform payload's elements).
    #[inline]
    fn set_all(&mut self, p: PayloadId, xs: &[f64]) {
        write_rounded(&mut self.lanes, p, xs);
    }

    #[inline]
    fn get(&self, p: PayloadId, e: usize, l: usize) -> f64 {
        self.lanes.get(p, e, l)
    }

    /// A lane of the current mask to read uniform-across-active-lanes quantities from.
    fn first_lane(&self) -> usize {
        self.masks.lanes(self.mask).first().copied().unwrap_or(0) as usize
    }

    fn bool_value(&self, b: bool) -> Value {
        Value::Bool(if b { self.true_p } else { self.false_p })
    }

    fn num(&mut self, x: f64) -> Value {
        Value::Num(self.lanes.scalar(x))
    }

    fn mark(&self) -> Mark {
        Mark {
            lanes: self.lanes.mark(),
            frames: self.frames.len(),
            slots: self.slots.len(),
            pairs: self.pairs.len(),
            closures: self.closures.len(),
        }
    }

    /// Releases everything allocated since `mark` except the plain values in `keep`, which are
    /// moved down and rewritten in place. Only valid when not recording.
    fn release_keeping(&mut self, mark: Mark, keep: &mut [Value]) {
        let floor = mark.lanes.meta_len();
        let mut tmp = std::mem::take(&mut self.fbuf[4]);
        let mut kept = std::mem::take(&mut self.kept);
        tmp.clear();
        kept.clear();
        // Copy the kept payloads' data out, release, then re-allocate them in order.
        for (i, v) in keep.iter().enumerate() {
            if let Some(p) = v.payload()
                && p.0 as usize >= floor
            {
                let m = self.lanes.meta(p);
                let w = if m.varying { self.lanes.n_lanes() } else { 1 };
                let len = m.n as usize * w;
                tmp.extend_from_slice(&self.lanes.data[m.off as usize..m.off as usize + len]);
                kept.push((i, m, len));
            }
        }
        self.lanes.release(mark.lanes);
        self.frames.truncate(mark.frames);
        self.slots.truncate(mark.slots);
        self.pairs.truncate(mark.pairs);
        self.closures.truncate(mark.closures);
        let mut off = 0;
        for &(i, m, len) in &kept {
            let np = self.lanes.alloc(m.n as usize, m.varying, m.grad);
            let start = self.lanes.meta(np).off as usize;
            self.lanes.data[start..start + len].copy_from_slice(&tmp[off..off + len]);
            off += len;
            keep[i] = match keep[i] {
                Value::Num(_) => Value::Num(np),
                Value::Bool(_) => Value::Bool(np),
                Value::Vector(_, n) => Value::Vector(np, n),
                Value::Matrix(_, r, c) => Value::Matrix(np, r, c),
                v => v,
            };
        }
        self.fbuf[4] = tmp;
        self.kept = kept;
    }

    // ---------------------------------------------------------------- environments

    fn new_frame(&mut self, parent: u32, n_slots: u32) -> u32 {
        let base = self.slots.len() as u32;
        self.slots
            .resize(self.slots.len() + n_slots as usize, Value::Unassigned);
        self.frames.push(Frame { parent, base });
        self.frames.len() as u32 - 1
    }

    #[inline(always)]
    fn slot_index(&self, mut env: u32, depth: u32, slot: u32) -> usize {
        for _ in 0..depth {
            env = self.frames[env as usize].parent;
        }
        self.frames[env as usize].base as usize + slot as usize
    }

    #[cold]
    #[inline(never)]
    fn unassigned(&self, code: CodeId) -> Box<CoreError> {
        let name = match self.heap.node(self.codes.node(code)) {
            Node::Sym(s) => self.heap.symbol_name(s).to_string(),
            _ => "variable".to_string(),
        };
        err(
            ErrorKind::Unbound,
            format!("`{name}` is used before its definition"),
        )
        .at(self.codes.node(code))
    }

    // ---------------------------------------------------------------- the walk

    fn eval_value(&mut self, code: CodeId, env: u32) -> Result<Value> {
        if let Code::PrimCall { prim, args } = self.codes.get(code) {
            return self.nested_prim_call(prim, args, env, code);
        }
        match self.walk(code, env)? {
            Flow::Val(v) => Ok(v),
            _ => {
                Err(err(ErrorKind::Syntax, "recur outside of a loop tail")
                    .at(self.codes.node(code)))
            }
        }
    }

    fn walk(&mut self, code: CodeId, env: u32) -> Result<Flow> {
        self.depth += 1;
        if self.depth > self.opts.max_depth {
            self.depth -= 1;
            return Err(err(
                ErrorKind::DepthLimit,
                format!(
                    "non-tail recursion deeper than {} levels",
                    self.opts.max_depth
                ),
            )
            .at(self.codes.node(code)));
        }
        let res = if self.depth.is_multiple_of(16) {
            stacker::maybe_grow(256 * 1024, 4 * 1024 * 1024, || self.eval_loop(code, env))
        } else {
            self.eval_loop(code, env)
        };
        self.depth -= 1;
        res
    }

    fn eval_loop(&mut self, mut code: CodeId, mut env: u32) -> Result<Flow> {
        loop {
            self.steps += 1;
            if self.steps > self.next_check {
                self.govern().map_err(|e| e.at(self.codes.node(code)))?;
            }
            let v = match self.codes.get(code) {
                Code::Num(x) => self.num(x),
                Code::Bool(b) => self.bool_value(b),
                Code::Nil => Value::Nil,
                Code::Sym(s) => Value::Sym(s),
                Code::Datum(n) => Value::Datum(n),
                Code::Local { depth, slot } => {
                    let v = self.slots[self.slot_index(env, depth, slot)];
                    if v == Value::Unassigned {
                        return Err(self.unassigned(code));
                    }
                    v
                }
                Code::Global(slot) => {
                    let v = self.globals[slot as usize];
                    if v == Value::Unassigned {
                        return Err(self.unassigned(code));
                    }
                    v
                }
                Code::PrimRef(p) => Value::Prim(p),
                Code::If { test, then, els } => {
                    let t = self.eval_value(test, env)?;
                    match self.classify(t) {
                        Truth::True => {
                            code = then;
                            continue;
                        }
                        Truth::False => match els {
                            Some(e) => {
                                code = e;
                                continue;
                            }
                            None => Value::Nil,
                        },
                        Truth::Mixed(tm, em) => {
                            return self.eval_mixed(then, els, env, tm, em, code);
                        }
                    }
                }
                Code::Let {
                    kind,
                    n_slots,
                    inits,
                    body,
                } => {
                    env = self.enter_let(kind, n_slots, inits, env)?;
                    code = body;
                    continue;
                }
                Code::Lambda { .. } => {
                    self.closures.push(Closure { lambda: code, env });
                    Value::Closure(self.closures.len() as u32 - 1)
                }
                Code::Seq(list) => {
                    for i in 0..list.len - 1 {
                        let c = self.codes.lists[(list.start + i) as usize];
                        self.eval_value(c, env)?;
                    }
                    code = self.codes.lists[(list.start + list.len - 1) as usize];
                    continue;
                }
                Code::Define { .. }
                | Code::DefineGlobal { .. }
                | Code::SetLocal { .. }
                | Code::SetGlobal { .. }
                | Code::DeclareGlobal { .. } => self.eval_assignment(code, env)?,
                Code::App { head, args } => {
                    let f = self.eval_value(head, env)?;
                    let base = self.argstack.len();
                    self.eval_args(args, env)?;
                    match f {
                        Value::Closure(ci) => {
                            let clo = self.closures[ci as usize];
                            let frame = self.bind_closure(clo, base, code)?;
                            self.argstack.truncate(base);
                            let Code::Lambda { body, .. } = self.codes.get(clo.lambda) else {
                                unreachable!()
                            };
                            env = frame;
                            code = body;
                            continue;
                        }
                        Value::Prim(p) => {
                            let n = self.argstack.len() - base;
                            let (lo, hi) = p.arity();
                            if (n as u32) < lo || n as u32 > hi {
                                return Err(Box::new(
                                    decode::arity_error(p.name(), lo, hi, n)
                                        .at(self.codes.node(code)),
                                ));
                            }
                            let v = self.call_prim(p, base, code)?;
                            self.argstack.truncate(base);
                            v
                        }
                        other => {
                            return Err(err(
                                ErrorKind::NotProcedure,
                                format!("cannot apply a {} as a procedure", other.type_name()),
                            )
                            .at(self.codes.node(code)));
                        }
                    }
                }
                Code::PrimCall { prim, args } => self.prim_call(prim, args, env, code)?,
                Code::And(list) => {
                    return self.eval_and_or(list, 0, env, true, code).map(Flow::Val);
                }
                Code::Or(list) => {
                    return self.eval_and_or(list, 0, env, false, code).map(Flow::Val);
                }
                Code::Loop {
                    n_slots,
                    inits,
                    body,
                } => self.eval_loop_form(n_slots, inits, body, env, code)?,
                Code::SoftChoice {
                    options,
                    logits,
                    site,
                } => self.eval_soft_choice(options, logits, site, env, code)?,
                Code::Recur(list) => {
                    let base = self.argstack.len();
                    self.eval_args(list, env)?;
                    let ix = self.recur_args.len() as u32;
                    self.recur_args.extend_from_slice(&self.argstack[base..]);
                    self.argstack.truncate(base);
                    return Ok(Flow::Recur(ix));
                }
            };
            return Ok(Flow::Val(v));
        }
    }

    /// The frame a `let` (or `let*`) body runs in: its inits evaluated in the enclosing frame
    /// (`let`) or each in the new one (`let*`), bound to its slots.
    #[inline(always)]
    fn enter_let(&mut self, kind: LetKind, n_slots: u32, inits: CodeList, env: u32) -> Result<u32> {
        match kind {
            LetKind::Parallel => {
                let base = self.argstack.len();
                for i in 0..inits.len {
                    let c = self.codes.lists[(inits.start + i) as usize];
                    let v = self.eval_value(c, env)?;
                    self.argstack.push(v);
                }
                let f = self.new_frame(env, n_slots);
                let fb = self.frames[f as usize].base as usize;
                for i in 0..inits.len as usize {
                    self.slots[fb + i] = self.argstack[base + i];
                }
                self.argstack.truncate(base);
                Ok(f)
            }
            LetKind::Sequential => {
                let f = self.new_frame(env, n_slots);
                let fb = self.frames[f as usize].base as usize;
                for i in 0..inits.len {
                    let c = self.codes.lists[(inits.start + i) as usize];
                    let v = self.eval_value(c, f)?;
                    self.slots[fb + i as usize] = v;
                }
                Ok(f)
            }
        }
    }

    /// `define`, `set!` and a global's declaration: the value assigned (select-merged under
    /// divergence by `assign`); the form's value is `()`.
    #[inline]
    fn eval_assignment(&mut self, code: CodeId, env: u32) -> Result<Value> {
        Ok(match self.codes.get(code) {
            Code::Define { slot, value } => {
                let v = self.eval_value(value, env)?;
                let i = self.frames[env as usize].base as usize + slot as usize;
                let old = self.slots[i];
                self.slots[i] = self.assign(old, v, code)?;
                Value::Nil
            }
            Code::DefineGlobal { slot, value } => {
                let v = self.eval_value(value, env)?;
                let old = self.globals[slot as usize];
                self.globals[slot as usize] = self.assign(old, v, code)?;
                Value::Nil
            }
            Code::SetLocal { depth, slot, value } => {
                let v = self.eval_value(value, env)?;
                let i = self.slot_index(env, depth, slot);
                let old = self.slots[i];
                if old == Value::Unassigned {
                    return Err(self.unassigned(code));
                }
                self.slots[i] = self.assign(old, v, code)?;
                self.lowest_set = self.lowest_set.min(i);
                Value::Nil
            }
            Code::SetGlobal { slot, value } => {
                let v = self.eval_value(value, env)?;
                let old = self.globals[slot as usize];
                if old == Value::Unassigned {
                    return Err(self.unassigned(code));
                }
                self.globals[slot as usize] = self.assign(old, v, code)?;
                self.lowest_set = 0;
                Value::Nil
            }
            Code::DeclareGlobal { slot, value } => {
                if self.globals[slot as usize] == Value::Unassigned {
                    let v = self.eval_value(value, env)?;
                    self.globals[slot as usize] = v;
                }
                Value::Nil
            }
            _ => unreachable!("eval_assignment of another form"),
        })
    }

    fn eval_args(&mut self, args: CodeList, env: u32) -> Result<()> {
        for i in 0..args.len {
            let c = self.codes.lists[(args.start + i) as usize];
            let v = self.eval_operand(c, env)?;
            self.argstack.push(v);
        }
        Ok(())
    }

    /// A primitive call in operand position: the walk's depth and step accounting (`walk` then
    /// `eval_loop`) without its `Flow` plumbing. Every 16th level goes through `walk`, which
    /// grows the stack.
    #[inline(never)]
    fn nested_prim_call(
        &mut self,
        prim: Prim,
        args: CodeList,
        env: u32,
        code: CodeId,
    ) -> Result<Value> {
        if (self.depth + 1).is_multiple_of(16) || self.depth >= self.opts.max_depth {
            return match self.walk(code, env)? {
                Flow::Val(v) => Ok(v),
                _ => unreachable!("a primitive call yields a value"),
            };
        }
        self.depth += 1;
        self.steps += 1;
        if self.steps > self.next_check
            && let Err(e) = self.govern()
        {
            self.depth -= 1;
            return Err(e.at(self.codes.node(code)));
        }
        let res = self.prim_call(prim, args, env, code);
        self.depth -= 1;
        res
    }

    /// Evaluates the operands of a primitive call and applies it. One- and two-operand calls
    /// pass their operands by value, without the argument stack.
    #[inline(always)]
    fn prim_call(&mut self, prim: Prim, args: CodeList, env: u32, code: CodeId) -> Result<Value> {
        let at = args.start as usize;
        match args.len {
            1 => {
                let x = self.eval_operand(self.codes.lists[at], env)?;
                self.call_prim1(prim, x, code)
            }
            2 => {
                let x = self.eval_operand(self.codes.lists[at], env)?;
                let y = self.eval_operand(self.codes.lists[at + 1], env)?;
                self.call_prim2(prim, x, y, code)
            }
            _ => {
                let base = self.argstack.len();
                self.eval_args(args, env)?;
                let v = self.call_prim(prim, base, code)?;
                self.argstack.truncate(base);
                Ok(v)
            }
        }
    }

    /// Evaluates an operand, with the walk's own semantics, but without a nested walk for the
    /// common leaves (variables and literals).
    #[inline(always)]
    fn eval_operand(&mut self, code: CodeId, env: u32) -> Result<Value> {
        let v = match self.codes.codes[code.0 as usize] {
            Code::Local { depth, slot } => self.slots[self.slot_index(env, depth, slot)],
            Code::Global(slot) => self.globals[slot as usize],
            Code::Num(x) => self.num(x),
            Code::PrimCall { prim, args } => {
                return self.nested_prim_call(prim, args, env, code);
            }
            _ => return self.eval_value(code, env),
        };
        self.steps += 1;
        if matches!(v, Value::Unassigned) {
            return Err(self.unassigned(code));
        }
        if self.steps > self.next_check {
            self.govern().map_err(|e| e.at(self.codes.node(code)))?;
        }
        Ok(v)
    }

    /// A frame for calling `clo` with the arguments at `argstack[base..]`.
    fn bind_closure(&mut self, clo: Closure, base: usize, call: CodeId) -> Result<u32> {
        let Code::Lambda {
            n_params,
            rest,
            n_slots,
            ..
        } = self.codes.get(clo.lambda)
        else {
            unreachable!()
        };
        let n = self.argstack.len() - base;
        if (!rest && n != n_params as usize) || (rest && n < n_params as usize) {
            let hi = if rest { u32::MAX } else { n_params };
            return Err(Box::new(
                decode::arity_error("procedure", n_params, hi, n).at(self.codes.node(call)),
            ));
        }
        let frame = self.new_frame(clo.env, n_slots);
        let fb = self.frames[frame as usize].base as usize;
        for i in 0..n_params as usize {
            self.slots[fb + i] = self.argstack[base + i];
        }
        if rest {
            let mut list = Value::Nil;
            for i in (base + n_params as usize..self.argstack.len()).rev() {
                self.pairs.push((self.argstack[i], list));
                list = Value::Pair(self.pairs.len() as u32 - 1);
            }
            self.slots[fb + n_params as usize] = list;
        }
        Ok(frame)
    }

    /// Calls a procedure value on `args` (non-tail).
    fn apply_value(&mut self, f: Value, args: &[Value], call: CodeId) -> Result<Value> {
        let base = self.argstack.len();
        self.argstack.extend_from_slice(args);
        let res = match f {
            Value::Closure(ci) => {
                let clo = self.closures[ci as usize];
                let frame = self.bind_closure(clo, base, call)?;
                self.argstack.truncate(base);
                let Code::Lambda { body, .. } = self.codes.get(clo.lambda) else {
                    unreachable!()
                };
                self.eval_value(body, frame)
            }
            Value::Prim(p) => {
                let (lo, hi) = p.arity();
                if (args.len() as u32) < lo || args.len() as u32 > hi {
                    return Err(Box::new(
                        decode::arity_error(p.name(), lo, hi, args.len()).at(self.codes.node(call)),
                    ));
                }
                let v = self.call_prim(p, base, call);
                self.argstack.truncate(base);
                v
            }
            other => Err(err(
                ErrorKind::NotProcedure,
                format!("cannot apply a {} as a procedure", other.type_name()),
            )
            .at(self.codes.node(call))),
        };
        self.argstack.truncate(base);
        res
    }

    // ---------------------------------------------------------------- lanes and control

    fn is_true_lane(&self, p: PayloadId, l: usize) -> bool {
        self.get(p, 0, l) != 0.0
    }

    fn classify(&mut self, v: Value) -> Truth {
        let p = match v {
            Value::Bool(p) => p,
            Value::Num(p) if self.opts.dialect == Dialect::Reference => p,
            Value::Nil if self.opts.dialect == Dialect::Reference => return Truth::False,
            _ => return Truth::True,
        };
        self.taint_if_grad(p);
        if !self.lanes.is_varying(p) {
            return if self.is_true_lane(p, 0) {
                Truth::True
            } else {
                Truth::False
            };
        }
        let mut t = std::mem::take(&mut self.scratch_a);
        let mut f = std::mem::take(&mut self.scratch_b);
        t.clear();
        f.clear();
        for &l in self.masks.lanes(self.mask) {
            if self.is_true_lane(p, l as usize) {
                t.push(l);
            } else {
                f.push(l);
            }
        }
        let res = if f.is_empty() {
            Truth::True
        } else if t.is_empty() {
            Truth::False
        } else {
            let tm = self.masks.intern(&t);
            let fm = self.masks.intern(&f);
            Truth::Mixed(tm, fm)
        };
        self.scratch_a = t;
        self.scratch_b = f;
        res
    }

    fn eval_mixed(
        &mut self,
        then: CodeId,
        els: Option<CodeId>,
        env: u32,
        tm: MaskId,
        em: MaskId,
        at: CodeId,
    ) -> Result<Flow> {
        let saved = self.mask;
        self.mask = tm;
        let a = self.walk(then, env);
        let a = match a {
            Ok(a) => a,
            Err(e) => {
                self.mask = saved;
                return Err(e);
            }
        };
        self.mask = em;
        let b = match els {
            Some(e) => self.walk(e, env),
            None => Ok(Flow::Val(Value::Nil)),
        };
        self.mask = saved;
        self.merge_flows(a, tm, b?, em, at)
    }

    /// The done and recur parts of a flow evaluated under `mask`.
    fn parts(flow: Flow, mask: MaskId) -> FlowParts {
        match flow {
            Flow::Val(v) => (Some((v, mask)), None),
            Flow::Recur(ix) => (None, Some((ix, mask))),
            Flow::Split {
                done,
                done_mask,
                ix,
                recur_mask,
            } => (Some((done, done_mask)), Some((ix, recur_mask))),
        }
    }

    fn merge_flows(
        &mut self,
        a: Flow,
        am: MaskId,
        b: Flow,
        bm: MaskId,
        at: CodeId,
    ) -> Result<Flow> {
        let (da, ra) = Self::parts(a, am);
        let (db, rb) = Self::parts(b, bm);
        let done = match (da, db) {
            (Some((x, xm)), Some((y, ym))) => {
                let v = self.select(x, xm, y, ym, at)?;
                let mut s = std::mem::take(&mut self.scratch_a);
                let m = self.masks.union(xm, ym, &mut s);
                self.scratch_a = s;
                Some((v, m))
            }
            (d, None) | (None, d) => d,
        };
        let recur = match (ra, rb) {
            (Some((ix, xm)), Some((iy, ym))) => {
                let n = (iy - ix) as usize;
                let out = self.recur_args.len() as u32;
                for k in 0..n {
                    let x = self.recur_args[ix as usize + k];
                    let y = self.recur_args[iy as usize + k];
                    let v = self.select(x, xm, y, ym, at)?;
                    self.recur_args.push(v);
                }
                let mut s = std::mem::take(&mut self.scratch_a);
                let m = self.masks.union(xm, ym, &mut s);
                self.scratch_a = s;
                Some((out, m))
            }
            (r, None) | (None, r) => r,
        };
        Ok(match (done, recur) {
            (Some((v, _)), None) => Flow::Val(v),
            (None, Some((ix, _))) => Flow::Recur(ix),
            (Some((done, done_mask)), Some((ix, recur_mask))) => Flow::Split {
                done,
                done_mask,
                ix,
                recur_mask,
            },
            (None, None) => Flow::Val(Value::Nil),
        })
    }

    /// Merges `x` (valid on lanes `xm`) and `y` (valid on `ym`) into one value. Lists of the
    /// same shape merge element by element, on an explicit stack, each pair of cells once (a
    /// long or shared list cannot overflow the native stack or take exponential time).
    fn select(&mut self, x: Value, xm: MaskId, y: Value, ym: MaskId, at: CodeId) -> Result<Value> {
        if let Some(v) = self.select_atom(x, xm, y, ym)? {
            return Ok(v);
        }
        enum Task {
            Visit(Value, Value),
            Build((u64, u64)),
        }
        let mut tasks = vec![Task::Visit(x, y)];
        let mut done: Vec<Value> = Vec::new();
        let mut memo: std::collections::HashMap<(u64, u64), Value> =
            std::collections::HashMap::new();
        while let Some(t) = tasks.pop() {
            match t {
                Task::Visit(x, y) => {
                    if let Some(v) = self.select_atom(x, xm, y, ym)? {
                        done.push(v);
                        continue;
                    }
                    let (Some(kx), Some(ky)) = (self.pair_of_key(x), self.pair_of_key(y)) else {
                        return Err(err(
                            ErrorKind::Divergence,
                            format!(
                                "lanes disagree on structure: a {} on some lanes, a {} on others",
                                x.type_name(),
                                y.type_name()
                            ),
                        )
                        .at(self.codes.node(at)));
                    };
                    if let Some(&v) = memo.get(&(kx, ky)) {
                        done.push(v);
                        continue;
                    }
                    self.charge(1).map_err(|e| e.at(self.codes.node(at)))?;
                    let (xa, xd) = self.pair_of(x).unwrap_or((Value::Nil, Value::Nil));
                    let (ya, yd) = self.pair_of(y).unwrap_or((Value::Nil, Value::Nil));
                    tasks.push(Task::Build((kx, ky)));
                    tasks.push(Task::Visit(xd, yd));
                    tasks.push(Task::Visit(xa, ya));
                }
                Task::Build(key) => {
                    let d = done.pop().unwrap_or(Value::Nil);
                    let a = done.pop().unwrap_or(Value::Nil);
                    self.pairs.push((a, d));
                    let v = Value::Pair(self.pairs.len() as u32 - 1);
                    memo.insert(key, v);
                    done.push(v);
                }
            }
        }
        Ok(done.pop().unwrap_or(Value::Nil))
    }

    /// `select` of two equal values or two numeric values of one shape; `None` otherwise.
    fn select_atom(&mut self, x: Value, xm: MaskId, y: Value, ym: MaskId) -> Result<Option<Value>> {
        if x == y {
            return Ok(Some(x));
        }
        let shape_of = |v: Value| match v {
            Value::Num(p) | Value::Bool(p) => Some((p, Shape::Scalar)),
            Value::Vector(p, n) => Some((p, Shape::Vector(n))),
            Value::Matrix(p, r, c) => Some((p, Shape::Matrix(r, c))),
            _ => None,
        };
        let same_kind = matches!(
            (x, y),
            (Value::Num(_), Value::Num(_))
                | (Value::Bool(_), Value::Bool(_))
                | (Value::Vector(..), Value::Vector(..))
                | (Value::Matrix(..), Value::Matrix(..))
        );
        if let (Some((px, sx)), Some((py, sy))) = (shape_of(x), shape_of(y))
            && same_kind
            && sx == sy
        {
            let n = sx.n();
            let grad = self.recording && (self.lanes.meta(px).grad || self.lanes.meta(py).grad);
            let out = self.lanes.alloc(n, true, grad);
            kernels::select(&mut self.lanes, &self.masks, out, px, xm, py, ym);
            if grad {
                self.tape.push(TapeOp::Select { then: xm }, out, px, py, ym);
            }
            return Ok(Some(match x {
                Value::Bool(_) => Value::Bool(out),
                _ => sx.value(out),
            }));
        }
        Ok(None)
    }

    /// Assigns `new` over `old` on the current lanes (a define under divergent control).
    fn assign(&mut self, old: Value, new: Value, at: CodeId) -> Result<Value> {
        if self.mask == MaskId::FULL {
            return Ok(new);
        }
        if old == Value::Unassigned {
            return Err(err(
                ErrorKind::Divergence,
                "a variable is defined on some lanes only (its define sits under a branch the lanes disagree on)",
            )
            .at(self.codes.node(at)));
        }
        let mut rest = std::mem::take(&mut self.scratch_b);
        rest.clear();
        let act = self.masks.lanes(self.mask);
        rest.extend((0..self.lanes.n_lanes() as u32).filter(|l| act.binary_search(l).is_err()));
        let rm = self.masks.intern(&rest);
        self.scratch_b = rest;
        self.select(new, self.mask, old, rm, at)
    }

    fn eval_and_or(
        &mut self,
        list: CodeList,
        from: u32,
        env: u32,
        is_and: bool,
        at: CodeId,
    ) -> Result<Value> {
        let mut i = from;
        loop {
            let c = self.codes.lists[(list.start + i) as usize];
            let v = self.eval_value(c, env)?;
            if i + 1 == list.len {
                return Ok(v);
            }
            match self.classify(v) {
                Truth::True if is_and => {}
                Truth::False if !is_and => {}
                Truth::True | Truth::False => return Ok(v),
                Truth::Mixed(tm, fm) => {
                    let (go, stop) = if is_and { (tm, fm) } else { (fm, tm) };
                    let saved = self.mask;
                    self.mask = go;
                    let rest = self.eval_and_or(list, i + 1, env, is_and, at);
                    self.mask = saved;
                    let rest = rest?;
                    return self.select(rest, go, v, stop, at);
                }
            }
            i += 1;
        }
    }

    fn eval_loop_form(
        &mut self,
        n_slots: u32,
        inits: CodeList,
        body: CodeId,
        env: u32,
        at: CodeId,
    ) -> Result<Value> {
        let base = self.argstack.len();
        self.eval_args(inits, env)?;
        let n = inits.len as usize;
        let outer = self.mask;
        let mut acc: Option<(Value, MaskId)> = None;
        // The carried values live on a pooled stack (loops nest: an inner loop works above us).
        let mut carried = self.carried_pool.pop().unwrap_or_default();
        carried.clear();
        carried.extend_from_slice(&self.argstack[base..]);
        self.argstack.truncate(base);
        // Everything an iteration allocates lies above `floor`; when the carried values are plain
        // numbers, the next iteration starts from the floor again with just those values copied down.
        let floor = self.mark();
        let mut assigned_older = false;
        let mut first_recur = true;
        let result = loop {
            let frame = self.new_frame(env, n_slots);
            let fb = self.frames[frame as usize].base as usize;
            self.slots[fb..fb + n].copy_from_slice(&carried);
            let rbase = self.recur_args.len();
            let lowest_before = std::mem::replace(&mut self.lowest_set, usize::MAX);
            let flow = match self.walk(body, frame) {
                Ok(f) => f,
                Err(e) => {
                    self.mask = outer;
                    return Err(e);
                }
            };
            // Once a slot older than the loop holds this iteration's values, none is released.
            assigned_older |= self.lowest_set < floor.slots;
            self.lowest_set = self.lowest_set.min(lowest_before);
            let (done, recur) = Self::parts(flow, self.mask);
            if let Some((v, dm)) = done {
                acc = Some(match acc {
                    None => (v, dm),
                    Some((a, am)) => {
                        let merged = self.select(a, am, v, dm, at)?;
                        let mut s = std::mem::take(&mut self.scratch_a);
                        let m = self.masks.union(am, dm, &mut s);
                        self.scratch_a = s;
                        (merged, m)
                    }
                });
            }
            let Some((ix, rm)) = recur else {
                self.recur_args.truncate(rbase);
                break acc.map(|a| a.0).unwrap_or(Value::Nil);
            };
            carried.clear();
            carried.extend_from_slice(&self.recur_args[ix as usize..ix as usize + n]);
            self.recur_args.truncate(rbase);
            self.mask = rm;
            if crate::planted::is_planted(crate::planted::Bug::LoopCarried) && self.recording {
                self.plant_loop_carried(&mut carried, rm, &mut first_recur);
            }
            if !self.recording
                && !assigned_older
                && carried.iter().all(|v| v.is_plain())
                && acc.is_none_or(|a| a.0.is_plain())
            {
                // The finished lanes' value rides along at the end while the arena is released.
                if let Some((a, _)) = acc {
                    carried.push(a);
                }
                self.release_keeping(floor, &mut carried);
                if let Some(a) = acc.as_mut() {
                    a.0 = carried[n];
                }
                carried.truncate(n);
            }
        };
        self.mask = outer;
        self.carried_pool.push(carried);
        Ok(result)
    }

    /// The planted loop-carried bug (`planted::Bug::LoopCarried`, test-only): at a loop's first
    /// recur each carried differentiable number passes through a select of itself with itself,
    /// whose adjoint reaches it twice.
    #[cold]
    fn plant_loop_carried(&mut self, carried: &mut [Value], rm: MaskId, first: &mut bool) {
        if !std::mem::replace(first, false) {
            return;
        }
        for v in carried.iter_mut() {
            if let Value::Num(p) = *v
                && self.lanes.meta(p).grad
            {
                let out = self.lanes.alloc(1, true, true);
                kernels::select(&mut self.lanes, &self.masks, out, p, rm, p, rm);
                self.tape.push(TapeOp::Select { then: rm }, out, p, p, rm);
                *v = Value::Num(out);
            }
        }
    }
}

#[cfg(test)]
mod finite_tests {
    use super::provably_finite;

    #[test]
    fn provably_finite_sees_one_non_finite_number_anywhere() {
        // Three chunks of the sums and a remainder.
        let xs: Vec<f64> = (0..101).map(|i| (i % 29) as f64 * 1e300 - 3e301).collect();
        assert!(provably_finite(&xs) && provably_finite(&[]));
        for i in 0..xs.len() {
            for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
                let mut ys = xs.clone();
                ys[i] = bad;
                assert!(!provably_finite(&ys), "element {i} = {bad}");
            }
        }
        assert!(provably_finite(&[
            f64::MAX,
            -f64::MAX,
            f64::MIN_POSITIVE,
            -0.0
        ]));
        // Finite numbers whose sum overflows: reported as not all finite (the caller then scans
        // lane by lane, which flags none).
        assert!(!provably_finite(&[f64::MAX; 64]));
    }
}
