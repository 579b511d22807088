//! The oracles, each a separate check of one case against the runtime: forward values against the
//! reference evaluator, gradients against Richardson-extrapolated central differences of the
//! reference, lane decomposition, replay against a fresh walk, a pooled (worker-thread)
//! evaluator against a fresh one, print → parse round trips through both front ends, and `f32`
//! lanes (bit-for-bit lanes and replay in single precision, values and gradients within single
//! precision's error of `f64`).

use std::fmt;

use ndvm_core::{
    EvalOptions, Evaluation, Evaluator, Heap, Inputs, Output, Precision, Program, print,
};
use ndvm_frontends::{Frontend, infix::Infix, scheme::Scheme};

use crate::generate::Case;
use crate::reference::{self, RefError, Val};

/// Which check failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Oracle {
    /// Runtime value (or error) against the reference evaluator.
    Forward,
    /// Runtime gradient against finite differences of the reference.
    Gradient,
    /// B lanes against B one-lane runs, bit for bit.
    Lanes,
    /// A replayed run against a fresh walk, bit for bit.
    Replay,
    /// A pooled evaluator (the worker thread's, warm from earlier programs) against a fresh one.
    Threads,
    /// Print → parse through the Scheme and infix front ends (same forms, same values).
    RoundTrip,
    /// `f32` lanes: lanes and replay bit for bit in single precision, a forward-only run equal to
    /// the taped one, and values and gradients within single precision's error of `f64`.
    F32,
}

impl Oracle {
    /// Every oracle, in check order.
    pub const ALL: [Oracle; 7] = [
        Oracle::Forward,
        Oracle::Gradient,
        Oracle::Lanes,
        Oracle::Replay,
        Oracle::Threads,
        Oracle::RoundTrip,
        Oracle::F32,
    ];

    /// The oracle's name in reports and regression files.
    pub fn name(self) -> &'static str {
        match self {
            Oracle::Forward => "forward",
            Oracle::Gradient => "gradient",
            Oracle::Lanes => "lanes",
            Oracle::Replay => "replay",
            Oracle::Threads => "threads",
            Oracle::RoundTrip => "roundtrip",
            Oracle::F32 => "f32",
        }
    }

    /// The oracle named `name`.
    pub fn from_name(name: &str) -> Option<Oracle> {
        Oracle::ALL.into_iter().find(|o| o.name() == name)
    }
}

impl fmt::Display for Oracle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One failed check.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// The oracle.
    pub oracle: Oracle,
    /// What differed.
    pub detail: String,
}

/// Why a case was not checked (the reference is undefined there).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Skip {
    /// Outside the reference's subset or ill-typed (a shrinker artefact).
    Unsupported,
    /// The reference ran out of depth or steps.
    Budget,
    /// A non-finite or huge reference value, or a huge intermediate number.
    Domain,
    /// The runtime's value differs from the reference's only after a decision the reference
    /// took within rounding of a tie (comparison of nearly equal numbers, floor of a nearly whole
    /// number), where a last-bit difference legitimately changes the branch.
    Tie,
}

/// What checking one case found.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// `Some` when the case was not checked.
    pub skipped: Option<Skip>,
    /// Failed checks (empty: all passed).
    pub failures: Vec<Failure>,
    /// Gradient entries checked and those skipped at a kink (the trace changed within the step).
    pub grads_checked: u64,
    /// Gradient entries not checked: a branch decision changed within the step, or the
    /// differences did not converge as the step was halved.
    pub grads_at_kink: u64,
    /// Whether the replay oracle's second run was a replay (not a walk).
    pub replayed: bool,
    /// Whether the infix printer could spell the program.
    pub infix_printed: bool,
    /// Whether the f32 values were compared with f64 (not skipped as ill-conditioned: a small
    /// change of the inputs moves the f64 result beyond the f32 tolerance).
    pub f32_compared: bool,
    /// A digest of every runtime output bit of the case (for the threads-1-equals-threads-N check).
    pub digest: u64,
}

/// A worker's long-lived evaluators (reused across cases, as a calibration pool reuses them).
pub struct Pool {
    many: Option<(usize, Evaluator)>,
}

impl Default for Pool {
    fn default() -> Self {
        Pool::new()
    }
}

impl Pool {
    /// An empty pool.
    pub fn new() -> Self {
        Pool { many: None }
    }

    fn evaluator(&mut self, n_lanes: usize) -> &mut Evaluator {
        if self.many.as_ref().is_none_or(|(n, _)| *n != n_lanes) {
            self.many = None;
        }
        &mut self
            .many
            .get_or_insert_with(|| (n_lanes, Evaluator::new(options(n_lanes))))
            .1
    }
}

/// Work budget of a runtime run (generated programs need a few thousand units).
const MAX_STEPS: u64 = 5_000_000;
/// Forward values: relative and absolute tolerance against the reference (different rounding
/// order in det, inv and matmul).
const VALUE_TOL: f64 = 1e-8;
/// Multiples of f64's epsilon per unit of the largest products a determinant cancelled
/// ([`reference::RefRun::cancel_scale`]) that a forward value may differ by: the runtime and the
/// reference expand a determinant differently, and after cancellation only that rounding is
/// left.
const CANCEL_ULPS: f64 = 64.0;
/// Finite-difference steps tried in turn (parameters lie in [-1.5, 1.5]); each is halved three
/// times for the convergence test and the extrapolation.
const FD_STEPS: [f64; 2] = [1e-3, 1e-5];
/// Gradient tolerance: absolute and relative, plus the Richardson error estimate.
const GRAD_TOL: f64 = 1e-6;
/// A reference value beyond this is outside the checked domain.
const HUGE: f64 = 1e8;
/// An intermediate number beyond this puts the program outside the checked domain: finite
/// differences at [`FD_STEPS`] say nothing about, say, sin of 10¹².
const HUGE_INSIDE: f64 = 1e6;

fn options(n_lanes: usize) -> EvalOptions {
    EvalOptions::new(n_lanes).with_max_steps(MAX_STEPS)
}

fn options_f32(n_lanes: usize) -> EvalOptions {
    options(n_lanes).with_precision(Precision::F32)
}

fn fail(oracle: Oracle, detail: impl Into<String>) -> Failure {
    Failure {
        oracle,
        detail: detail.into(),
    }
}

/// The case's inputs for the lanes `lanes`.
fn inputs(case: &Case, lanes: &[usize]) -> Inputs {
    let mut inputs = Inputs::new();
    for (name, vals) in &case.params {
        inputs = inputs.param_lanes(name, lanes.iter().map(|&l| vals[l]).collect());
    }
    inputs
}

fn parse_scheme(text: &str) -> Result<(Heap, Program), String> {
    let mut heap = Heap::new();
    let program = Scheme.parse(&mut heap, text).map_err(|e| e.to_string())?;
    Ok((heap, program))
}

type RunResult = Result<Evaluation, String>;

fn run(ev: &mut Evaluator, heap: &mut Heap, program: &Program, inputs: &Inputs) -> RunResult {
    ev.eval_grad(heap, program, inputs)
        .map_err(|e| format!("{}: {}", e.kind.code(), e.message))
}

/// Flattened elements of one lane of an output (bools as 0/1; `None` for other values).
fn lane_values(out: &Output, lane: usize) -> Option<Vec<f64>> {
    match out {
        Output::Number(v) => v.get(lane).map(|&x| vec![x]),
        Output::Bool(v) => v.get(lane).map(|&b| vec![f64::from(u8::from(b))]),
        Output::Vector { len, data } => data.get(lane * len..(lane + 1) * len).map(<[f64]>::to_vec),
        Output::Matrix { rows, cols, data } => {
            let n = rows * cols;
            data.get(lane * n..(lane + 1) * n).map(<[f64]>::to_vec)
        }
        Output::Other(_) => None,
    }
}

fn ref_values(v: &Val) -> Option<Vec<f64>> {
    match v {
        Val::Num(x) => Some(vec![*x]),
        Val::Bool(b) => Some(vec![f64::from(u8::from(*b))]),
        Val::Vector(xs) | Val::Matrix(_, _, xs) => Some(xs.clone()),
        _ => None,
    }
}

/// The two runs' values are the same bits (gradients and faults aside).
fn value_bits_equal(a: &Evaluation, b: &Evaluation) -> bool {
    let strip = |e: &Evaluation| Evaluation {
        value: e.value.clone(),
        grads: Vec::new(),
        faults: Vec::new(),
    };
    bits_equal(&strip(a), &strip(b))
}

/// Bitwise equality of two runs' values, gradients and faults (NaN payloads compared as bits).
fn bits_equal(a: &Evaluation, b: &Evaluation) -> bool {
    let vals = |e: &Evaluation| -> Vec<u64> {
        let mut out = Vec::new();
        match &e.value {
            Output::Number(v) => out.extend(v.iter().map(|x| x.to_bits())),
            Output::Bool(v) => out.extend(v.iter().map(|&x| u64::from(x))),
            Output::Vector { data, .. } | Output::Matrix { data, .. } => {
                out.extend(data.iter().map(|x| x.to_bits()))
            }
            Output::Other(s) => out.extend(s.bytes().map(u64::from)),
        }
        for g in &e.grads {
            out.extend(g.per_lane.iter().map(|x| x.to_bits()));
        }
        out.extend(e.faults.iter().map(|&f| u64::from(f)));
        out
    };
    std::mem::discriminant(&a.value) == std::mem::discriminant(&b.value) && vals(a) == vals(b)
}

fn digest_of(e: &Evaluation) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut mix = |x: u64| {
        h ^= x;
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    match &e.value {
        Output::Number(v) => v.iter().for_each(|x| mix(x.to_bits())),
        Output::Bool(v) => v.iter().for_each(|&x| mix(u64::from(x))),
        Output::Vector { data, .. } | Output::Matrix { data, .. } => {
            data.iter().for_each(|x| mix(x.to_bits()))
        }
        Output::Other(s) => s.bytes().for_each(|x| mix(u64::from(x))),
    }
    for g in &e.grads {
        g.per_lane.iter().for_each(|x| mix(x.to_bits()));
    }
    h
}

/// One lane of a B-lane run as a one-lane evaluation (for the lane-decomposition comparison).
fn slice_lane(e: &Evaluation, lane: usize) -> Option<Evaluation> {
    let value = match &e.value {
        Output::Number(v) => Output::Number(vec![*v.get(lane)?]),
        Output::Bool(v) => Output::Bool(vec![*v.get(lane)?]),
        Output::Vector { len, .. } => Output::Vector {
            len: *len,
            data: lane_values(&e.value, lane)?,
        },
        Output::Matrix { rows, cols, .. } => Output::Matrix {
            rows: *rows,
            cols: *cols,
            data: lane_values(&e.value, lane)?,
        },
        Output::Other(s) => Output::Other(s.clone()),
    };
    let grads = e
        .grads
        .iter()
        .map(|g| {
            Some(ndvm_core::Gradient {
                name: g.name.clone(),
                per_lane: vec![*g.per_lane.get(lane)?],
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Evaluation {
        value,
        grads,
        faults: vec![*e.faults.get(lane)?],
    })
}

/// Checks one case with every oracle (or the ones in `only`, when given).
pub fn check(case: &Case, pool: &mut Pool, only: Option<Oracle>) -> Outcome {
    let mut out = Outcome::default();
    let wants = |o: Oracle| only.is_none_or(|x| x == o);
    let b = case.n_lanes();
    let all: Vec<usize> = (0..b).collect();

    // The reference on every lane; a case outside its domain is skipped, not failed.
    let mut refs = Vec::with_capacity(b);
    for lane in 0..b {
        match reference::evaluate(&case.program, &case.lane(lane)) {
            Ok(r) => refs.push(r),
            Err(RefError::Unsupported(_)) => {
                out.skipped = Some(Skip::Unsupported);
                return out;
            }
            Err(RefError::Budget) => {
                out.skipped = Some(Skip::Budget);
                return out;
            }
        }
    }
    let ref_vals: Vec<Vec<f64>> = match refs.iter().map(|r| ref_values(&r.value)).collect() {
        Some(v) => v,
        None => {
            out.skipped = Some(Skip::Unsupported);
            return out;
        }
    };
    if ref_vals
        .iter()
        .flatten()
        .any(|x| !x.is_finite() || x.abs() > HUGE)
        || refs.iter().any(|r| r.max_abs > HUGE_INSIDE)
    {
        out.skipped = Some(Skip::Domain);
        return out;
    }

    let text = case.program.to_text();
    let (mut heap, program) = match parse_scheme(&text) {
        Ok(p) => p,
        Err(e) => {
            out.failures.push(fail(
                Oracle::RoundTrip,
                format!("the Scheme reader refused the program: {e}"),
            ));
            return out;
        }
    };
    let main_inputs = inputs(case, &all);
    let mut fresh = Evaluator::new(options(b));
    let main = run(&mut fresh, &mut heap, &program, &main_inputs);
    if let Ok(e) = &main {
        out.digest = digest_of(e);
    }

    if wants(Oracle::Forward) {
        forward(&main, (&ref_vals, &refs), &mut out);
        if refs.iter().any(|r| r.near_tie)
            && out.failures.iter().any(|f| f.oracle == Oracle::Forward)
        {
            out.failures.clear();
            out.skipped = Some(Skip::Tie);
            return out;
        }
        if let Ok(m) = &main {
            // A forward-only run (no tape, payloads released per loop iteration) gives the
            // recording run's value bit for bit.
            let plain = fresh.eval(&mut heap, &program, &main_inputs);
            if !plain.as_ref().is_ok_and(|p| value_bits_equal(p, m)) {
                out.failures.push(fail(
                    Oracle::Forward,
                    format!(
                        "a forward-only run gave {plain:?}, the recording run {:?}",
                        m.value
                    ),
                ));
            }
        }
    }
    let Ok(main) = main else {
        return out;
    };
    if wants(Oracle::Gradient) {
        gradient(case, &refs, &main, &mut out);
    }
    if wants(Oracle::Lanes) && b > 1 {
        lanes(case, &mut heap, &program, &main, &mut out);
    }
    if wants(Oracle::Replay) {
        replay(case, &mut heap, &program, &main, &mut out);
    }
    if wants(Oracle::Threads) {
        let pooled = run(pool.evaluator(b), &mut heap, &program, &main_inputs);
        match pooled {
            Ok(p) if bits_equal(&p, &main) => {}
            other => out.failures.push(fail(
                Oracle::Threads,
                format!("a pooled evaluator gave {other:?}, a fresh one {main:?}"),
            )),
        }
    }
    if wants(Oracle::RoundTrip) {
        round_trip(case, &heap, &program, &main, &mut out);
    }
    if wants(Oracle::F32) {
        f32_lanes(case, &mut heap, &program, (&main, &refs), &mut out);
    }
    out
}

fn forward(
    main: &RunResult,
    (ref_vals, refs): (&[Vec<f64>], &[reference::RefRun]),
    out: &mut Outcome,
) {
    let e = match main {
        Ok(e) => e,
        Err(msg) => {
            out.failures.push(fail(
                Oracle::Forward,
                format!("runtime error {msg} where the reference gives {ref_vals:?}"),
            ));
            return;
        }
    };
    for (lane, want) in ref_vals.iter().enumerate() {
        let got = lane_values(&e.value, lane);
        let slack = CANCEL_ULPS * f64::EPSILON * refs[lane].cancel_scale;
        let ok = got.as_ref().is_some_and(|g| {
            g.len() == want.len()
                && g.iter()
                    .zip(want)
                    .all(|(x, y)| (x - y).abs() <= VALUE_TOL * (1.0 + y.abs()) + slack)
        });
        if !ok {
            out.failures.push(fail(
                Oracle::Forward,
                format!("lane {lane}: runtime {got:?}, reference {want:?}"),
            ));
            return;
        }
    }
}

/// The reference's output summed over elements (the runtime differentiates that sum).
fn ref_sum(case: &Case, lane: usize, param: usize, x: f64) -> Option<(f64, Vec<u64>)> {
    let mut globals = case.lane(lane);
    globals[param].1 = x;
    let r = reference::evaluate(&case.program, &globals).ok()?;
    let s = ref_values(&r.value)?.iter().sum();
    Some((s, r.trace))
}

/// A finite-difference estimate of one derivative: the Richardson value and its error bound.
struct Estimate {
    value: f64,
    err: f64,
}

/// Central differences of the reference at steps h, h/2, h/4, h/8 around `x`, extrapolated;
/// `None` where a branch decision changes within the step or the differences do not converge.
/// They converge as h²: each halving must shrink the change between estimates (by 4 in theory,
/// at most 0.35 accepted, twice in a row) down to the rounding floor, and one step must move the
/// function by a small fraction of its size. Otherwise the function varies on a scale below the
/// step (sin of a fast-growing argument, say) and the differences say nothing.
fn estimate(
    case: &Case,
    lane: usize,
    param: usize,
    x: f64,
    h: f64,
    trace: &[u64],
) -> Option<Estimate> {
    let mut d = [0.0; 4];
    let mut fmax: f64 = 0.0;
    for (k, dk) in d.iter_mut().enumerate() {
        let hk = h / f64::from(1u32 << k);
        let (fp, tp) = ref_sum(case, lane, param, x + hk)?;
        let (fm, tm) = ref_sum(case, lane, param, x - hk)?;
        if tp != trace || tm != trace || !fp.is_finite() || !fm.is_finite() {
            return None;
        }
        fmax = fmax.max(fp.abs()).max(fm.abs());
        *dk = (fp - fm) / (2.0 * hk);
    }
    let noise = 1e-13 * (1.0 + fmax) / (h / 8.0);
    let e = [
        (d[0] - d[1]).abs(),
        (d[1] - d[2]).abs(),
        (d[2] - d[3]).abs(),
    ];
    let converging = e[1] <= 0.35 * e[0] + noise && e[2] <= 0.35 * e[1] + noise;
    let small_step = d[3].abs() * h <= 0.1 * (1.0 + fmax);
    (converging && small_step).then(|| Estimate {
        value: (4.0 * d[3] - d[2]) / 3.0,
        err: e[2] + noise,
    })
}

fn gradient(case: &Case, refs: &[reference::RefRun], main: &Evaluation, out: &mut Outcome) {
    for (j, (name, vals)) in case.params.iter().enumerate() {
        let Some(got) = main.grad(name) else {
            out.failures
                .push(fail(Oracle::Gradient, format!("no gradient for {name}")));
            return;
        };
        for (lane, &x) in vals.iter().enumerate() {
            // The step is chosen per program and parameter: the first that converges.
            let est = FD_STEPS
                .iter()
                .find_map(|&h| estimate(case, lane, j, x, h, &refs[lane].trace));
            let Some(est) = est else {
                out.grads_at_kink += 1;
                continue;
            };
            out.grads_checked += 1;
            let g = got[lane];
            // Through a determinant that cancelled, the runtime differentiates the rounded
            // matrix (its cofactors' rounding at the size of the cancelled products), while the
            // finite differences see the reference's cancelled value: the forward slack again.
            let slack = CANCEL_ULPS * f64::EPSILON * refs[lane].cancel_scale;
            let tol = GRAD_TOL * (1.0 + est.value.abs()) + est.err + slack;
            // NaN fails too.
            let close = (g - est.value).abs() <= tol;
            if !close {
                out.failures.push(fail(
                    Oracle::Gradient,
                    format!(
                        "lane {lane}: d/d{name} runtime {g:e}, finite differences {:e} (±{tol:.1e})",
                        est.value
                    ),
                ));
                return;
            }
        }
    }
}

fn lanes(case: &Case, heap: &mut Heap, program: &Program, main: &Evaluation, out: &mut Outcome) {
    let mut one = Evaluator::new(options(1));
    for lane in 0..case.n_lanes() {
        let single = run(&mut one, heap, program, &inputs(case, &[lane]));
        let want = slice_lane(main, lane);
        let same = match (&single, &want) {
            (Ok(s), Some(w)) => bits_equal(s, w),
            _ => false,
        };
        if !same {
            out.failures.push(fail(
                Oracle::Lanes,
                format!("lane {lane}: alone {single:?}, in the batch {want:?}"),
            ));
            return;
        }
    }
}

fn replay(case: &Case, heap: &mut Heap, program: &Program, main: &Evaluation, out: &mut Outcome) {
    // Record at shifted parameters, then run at the case's own: a replay when the guards hold.
    let shifted = shift(case, 0.0125);
    let all: Vec<usize> = (0..case.n_lanes()).collect();
    let mut ev = Evaluator::new(options(case.n_lanes()));
    let first = run(&mut ev, heap, program, &inputs(&shifted, &all));
    let second = run(&mut ev, heap, program, &inputs(case, &all));
    out.replayed = ev.last_run_replayed();
    let ok = first.is_ok() && second.as_ref().is_ok_and(|s| bits_equal(s, main));
    if !ok {
        out.failures.push(fail(
            Oracle::Replay,
            format!(
                "replayed={}: second run {second:?}, fresh walk {main:?}",
                out.replayed
            ),
        ));
    }
}

fn round_trip(case: &Case, heap: &Heap, program: &Program, main: &Evaluation, out: &mut Outcome) {
    let forms = |h: &Heap, p: &Program| print::program_to_string(h, p).map_err(|e| e.message);
    let want = forms(heap, program);
    // Scheme: print → parse gives the same forms.
    let text = Scheme.print(heap, program).map_err(|e| e.message);
    let back = text.as_deref().map_err(Clone::clone).and_then(parse_scheme);
    match &back {
        Ok((h, p)) if forms(h, p) == want => {}
        _ => {
            out.failures.push(fail(
                Oracle::RoundTrip,
                format!("scheme print → parse: {text:?} gave other forms"),
            ));
            return;
        }
    }
    // Infix: when the printer can spell the program, it reads back as the same forms and values.
    let Ok(infix) = Infix.print(heap, program) else {
        return;
    };
    out.infix_printed = true;
    let mut h = Heap::new();
    let p = match Infix.parse(&mut h, &infix) {
        Ok(p) => p,
        Err(e) => {
            out.failures.push(fail(
                Oracle::RoundTrip,
                format!("infix text does not read back: {e}\n{infix}"),
            ));
            return;
        }
    };
    if forms(&h, &p) != want {
        out.failures.push(fail(
            Oracle::RoundTrip,
            format!("infix print → parse changed the forms:\n{infix}"),
        ));
        return;
    }
    let all: Vec<usize> = (0..case.n_lanes()).collect();
    let mut ev = Evaluator::new(options(case.n_lanes()));
    match run(&mut ev, &mut h, &p, &inputs(case, &all)) {
        Ok(e) if bits_equal(&e, main) => {}
        other => out.failures.push(fail(
            Oracle::RoundTrip,
            format!("the infix program gave {other:?}, the Scheme one {main:?}"),
        )),
    }
}

/// f32 against f64: a relative tolerance, plus an allowance for rounding at the size of the
/// largest intermediate, or of the largest products a determinant cancelled (cancellation of
/// numbers of that size loses f32 digits).
const F32_RTOL: f64 = 1e-3;
/// Multiples of f32's epsilon (6e-8) per unit of the largest intermediate allowed.
const F32_SCALE_ULPS: f64 = 1e4;
/// Multiples of f32's epsilon a gradient may be off per unit of a determinant's cancelled
/// product scale times the adjoint of its result (see [`det_adjoints`]).
const F32_DET_ULPS: f64 = 4.0;
/// The relative change of every parameter that probes the conditioning of a case.
const F32_PROBE: f64 = 1e-5;

fn f32_lanes(
    case: &Case,
    heap: &mut Heap,
    program: &Program,
    (main, refs): (&Evaluation, &[reference::RefRun]),
    out: &mut Outcome,
) {
    let b = case.n_lanes();
    let all: Vec<usize> = (0..b).collect();
    let mut ev = Evaluator::new(options_f32(b));
    let m32 = match run(&mut ev, heap, program, &inputs(case, &all)) {
        Ok(e) => e,
        Err(e) => {
            out.failures.push(fail(
                Oracle::F32,
                format!("f32 lanes: {e}, where f64 gave {:?}", main.value),
            ));
            return;
        }
    };
    let plain = ev.eval(heap, program, &inputs(case, &all));
    // Bits, not `==`: a NaN value is the same NaN however it was computed.
    if !plain.as_ref().is_ok_and(|p| value_bits_equal(p, &m32)) {
        out.failures.push(fail(
            Oracle::F32,
            format!("f32 forward-only {plain:?}, taped {:?}", m32.value),
        ));
        return;
    }
    let mut one = Evaluator::new(options_f32(1));
    for lane in 0..b {
        let single = run(&mut one, heap, program, &inputs(case, &[lane]));
        let want = slice_lane(&m32, lane);
        if !matches!((&single, &want), (Ok(s), Some(w)) if bits_equal(s, w)) {
            out.failures.push(fail(
                Oracle::F32,
                format!("f32 lane {lane}: alone {single:?}, in the batch {want:?}"),
            ));
            return;
        }
    }
    let mut rec = Evaluator::new(options_f32(b));
    let shifted = shift(case, 0.0125);
    let first = run(&mut rec, heap, program, &inputs(&shifted, &all));
    let second = run(&mut rec, heap, program, &inputs(case, &all));
    if first.is_err() || !second.as_ref().is_ok_and(|s| bits_equal(s, &m32)) {
        out.failures.push(fail(
            Oracle::F32,
            format!("f32 replay {second:?}, walk {m32:?}"),
        ));
        return;
    }
    if refs.iter().any(|r| r.near_tie_f32) {
        // A decision within single precision's rounding of a tie: f32 may branch otherwise.
        return;
    }
    if let Some(detail) = f32_far_from_f64(&m32, main, refs, &[]) {
        let adjoints = det_adjoints(case);
        if !adjoints.is_empty() && f32_far_from_f64(&m32, main, refs, &adjoints).is_none() {
            // Within the rounding of the determinants' cancellation, carried by their adjoints.
            out.f32_compared = true;
            return;
        }
        // Ill-conditioned (or at a branch within f32 rounding): a probe of the f64 runtime at
        // inputs moved by F32_PROBE moves the result as far. Then the comparison says nothing.
        let mut probe = |s: f64| {
            let mut ev = Evaluator::new(options(b));
            run(&mut ev, heap, program, &inputs(&scale(case, s), &all)).ok()
        };
        let sensitive = [1.0 + F32_PROBE, 1.0 - F32_PROBE]
            .into_iter()
            .any(|s| probe(s).is_none_or(|p| f32_far_from_f64(&p, main, refs, &[]).is_some()));
        if !sensitive {
            out.failures.push(fail(Oracle::F32, detail));
        }
        return;
    }
    out.f32_compared = true;
}

/// The case with every parameter moved by `d`.
fn shift(case: &Case, d: f64) -> Case {
    Case {
        program: case.program.clone(),
        params: case
            .params
            .iter()
            .map(|(n, v)| (n.clone(), v.iter().map(|x| x + d).collect()))
            .collect(),
    }
}

/// The case with every parameter scaled by `s`.
fn scale(case: &Case, s: f64) -> Case {
    Case {
        program: case.program.clone(),
        params: case
            .params
            .iter()
            .map(|(n, v)| (n.clone(), v.iter().map(|x| x * s).collect()))
            .collect(),
    }
}

/// Per lane, Σ |∂out/∂d| over the program's `det` call sites d, from the f64 runtime: its gradient
/// in a zero added to each site's result (summed over a site's visits). A determinant of nearly
/// cancelling products carries an f32 rounding of that products' size into its cofactors, the
/// gradient of its result, and the program multiplies it by that adjoint on the way to the
/// parameters' gradients. Empty when the program has no `det` or the marked run fails.
fn det_adjoints(case: &Case) -> Vec<f64> {
    let (marked, names) = case.program.mark_calls("det", "ndvm_fuzz_det_");
    if names.is_empty() {
        return Vec::new();
    }
    let Ok((mut heap, program)) = parse_scheme(&marked.to_text()) else {
        return Vec::new();
    };
    let b = case.n_lanes();
    let mut params = case.params.clone();
    params.extend(names.iter().map(|n| (n.clone(), vec![0.0; b])));
    let marked_case = Case {
        program: marked,
        params,
    };
    let all: Vec<usize> = (0..b).collect();
    let mut ev = Evaluator::new(options(b));
    let Ok(e) = run(&mut ev, &mut heap, &program, &inputs(&marked_case, &all)) else {
        return Vec::new();
    };
    let sites: Vec<_> = e.grads.iter().filter(|g| names.contains(&g.name)).collect();
    (0..b)
        .map(|l| sites.iter().map(|g| g.per_lane[l].abs()).sum())
        .collect()
}

/// Where `got` (an f32 run, or a probe) is further from the f64 run `want` than single
/// precision explains: values and gradients, lane by lane; `None` when within. `det_adjoints`
/// (per lane, from [`det_adjoints`], or empty) widens the gradients' allowance by the
/// determinants' cancellation scale times their adjoints.
fn f32_far_from_f64(
    got: &Evaluation,
    want: &Evaluation,
    refs: &[reference::RefRun],
    det_adjoints: &[f64],
) -> Option<String> {
    let eps32 = f64::from(f32::EPSILON);
    let far = |x: f64, y: f64, r: &reference::RefRun, rtol: f64, carried: f64| {
        let scale = r.max_abs.max(r.cancel_scale);
        let slack = F32_SCALE_ULPS * eps32 * scale + F32_DET_ULPS * eps32 * carried;
        !((x - y).abs() <= rtol * (1.0 + y.abs()) + slack || (x.is_nan() && y.is_nan()))
    };
    for (lane, r) in refs.iter().enumerate() {
        let (g, w) = (
            lane_values(&got.value, lane)?,
            lane_values(&want.value, lane)?,
        );
        if g.len() != w.len() {
            return None;
        }
        if let Some((x, y)) = g
            .iter()
            .zip(&w)
            .find(|(x, y)| far(**x, **y, r, F32_RTOL, 0.0))
        {
            return Some(format!("lane {lane}: f32 value {x:e}, f64 {y:e}"));
        }
        for (gg, wg) in got.grads.iter().zip(&want.grads) {
            let (x, y) = (gg.per_lane[lane], wg.per_lane[lane]);
            let carried = det_adjoints.get(lane).map_or(0.0, |a| a * r.cancel_scale);
            if far(x, y, r, 10.0 * F32_RTOL, carried) {
                return Some(format!("lane {lane}: f32 d/d{} {x:e}, f64 {y:e}", gg.name));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(v: f64, g: f64) -> Evaluation {
        Evaluation {
            value: Output::Number(vec![v]),
            grads: vec![ndvm_core::Gradient {
                name: "p0".into(),
                per_lane: vec![g],
            }],
            faults: vec![false],
        }
    }

    fn reference_run(max_abs: f64, near_tie_f32: bool) -> reference::RefRun {
        reference::RefRun {
            value: Val::Num(1.0),
            trace: Vec::new(),
            near_tie: false,
            near_tie_f32,
            max_abs,
            cancel_scale: 0.0,
        }
    }

    /// A forward-only run and its taped run are compared by bits: the same NaN is the same value
    /// (a plain `==` called every NaN result a failure), gradients and faults do not count.
    #[test]
    fn values_compare_by_bits() {
        assert!(value_bits_equal(
            &number(f64::NAN, 1.0),
            &number(f64::NAN, 2.0)
        ));
        assert!(value_bits_equal(&number(2.5, 1.0), &number(2.5, f64::NAN)));
        assert!(!value_bits_equal(
            &number(f64::NAN, 1.0),
            &number(-f64::NAN, 1.0)
        ));
        assert!(!value_bits_equal(&number(0.0, 1.0), &number(-0.0, 1.0)));
    }

    #[test]
    fn f32_tolerance_admits_rounding_and_refuses_wrong_values() {
        let r = [reference_run(2.0, false)];
        let want = number(2.0, 3.0);
        // Single-precision rounding of the value and the gradient: within.
        assert!(f32_far_from_f64(&number(2.0 + 4e-7, 3.0 - 1e-6), &want, &r, &[]).is_none());
        // A wrong value (1 %) or a wrong gradient (10 %): refused, naming which.
        let v = f32_far_from_f64(&number(2.02, 3.0), &want, &r, &[]).unwrap();
        assert!(v.contains("value"), "{v}");
        let g = f32_far_from_f64(&number(2.0, 3.3), &want, &r, &[]).unwrap();
        assert!(g.contains("d/dp0"), "{g}");
        // Cancellation at a large intermediate widens the allowance.
        let big = [reference_run(1e5, false)];
        assert!(f32_far_from_f64(&number(2.02, 3.0), &want, &big, &[]).is_none());
        // So does a determinant that cancelled products of ~1e11 down to nothing
        // (fuzz/regressions/f32-det-cancellation.scm): f32 lands ~1e4 away.
        let (tiny, off) = (number(-1.5e-5, 0.0), number(-8192.0, 0.0));
        assert!(f32_far_from_f64(&off, &tiny, &r, &[]).is_some());
        let cancelled = [reference::RefRun {
            cancel_scale: 4e11,
            ..reference_run(3.9e5, false)
        }];
        assert!(f32_far_from_f64(&off, &tiny, &cancelled, &[]).is_none());
    }

    /// The adjoint of each `det` site, from the f64 runtime: known answers, summed over sites and
    /// over a site's visits, per lane.
    #[test]
    fn det_adjoints_are_the_gradients_of_the_marked_sites() {
        let case = |src: &str, p0: Vec<f64>| Case {
            program: crate::sx::read(src).unwrap(),
            params: vec![("p0".into(), p0)],
        };
        // out = p0 · det A: ∂out/∂det = p0, per lane.
        let c = case(
            "(* p0 (det (mat (vec p0 1.0) (vec 2.0 p0))))",
            vec![2.0, -3.0],
        );
        assert_eq!(det_adjoints(&c), vec![2.0, 3.0]);
        // Two sites, 5 and 7: |5| + |-7|.
        let two = "(- (* 5.0 (det (mat (vec p0 1.0) (vec 1.0 1.0)))) \
                   (* 7.0 (det (mat (vec 1.0 p0) (vec p0 1.0)))))";
        assert_eq!(det_adjoints(&case(two, vec![0.5])), vec![12.0]);
        // One site visited in a loop that triples its result 4 times: 3⁴.
        let looped = "(loop ((i 0.0) (a (det (mat (vec p0 1.0) (vec 1.0 p0))))) \
                      (if (< i 4.0) (recur (+ i 1.0) (* a 3.0)) a))";
        assert_eq!(det_adjoints(&case(looped, vec![0.5])), vec![81.0]);
        // A quoted `det` is data, not a call: nothing marked.
        assert!(det_adjoints(&case("(+ p0 (length '(det x)))", vec![1.0])).is_empty());
        assert!(det_adjoints(&case("(* p0 2.0)", vec![1.0])).is_empty());
    }

    /// A gradient off by more than the tolerance is refused unless a determinant's cancellation,
    /// carried by its adjoint, explains it (fuzz/regressions/f32-gradient-carried-det-rounding.scm:
    /// f32 0.375 against f64 0.329 behind a singular 3×3 whose result's adjoint is large).
    #[test]
    fn det_adjoints_widen_the_f32_gradient_allowance() {
        let want = number(0.357, 0.3295);
        let got = number(0.357, 0.375);
        let r = [reference::RefRun {
            cancel_scale: 8.0,
            ..reference_run(1.0, false)
        }];
        assert!(f32_far_from_f64(&got, &want, &r, &[]).is_some());
        // Off by 0.0455; the plain allowance is 0.0133 + 1e4 · eps32 · 8 = 0.0228, and
        // 4 · eps32 · 8 · A covers the rest from A ≈ 6e3.
        assert!(f32_far_from_f64(&got, &want, &r, &[1e3]).is_some());
        assert!(f32_far_from_f64(&got, &want, &r, &[1e4]).is_none());
        // No cancellation, no allowance, whatever the adjoint.
        let plain = [reference_run(1.0, false)];
        assert!(f32_far_from_f64(&got, &want, &plain, &[1e9]).is_some());
        // Values are not widened by it.
        let off_value = number(0.5, 0.3295);
        assert!(f32_far_from_f64(&off_value, &want, &r, &[1e9]).is_some());
    }
}
