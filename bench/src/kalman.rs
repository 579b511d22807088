//! The Kalman per-lane sweep: `kalman2d_T80` forward and forward+gradient through the interpreter
//! at B = 1 … 1024 lanes, beside two compiled ceilings on the same `(q, r)` values, in one process:
//! the scalar one ([`ceiling`], one lane after another) and the lane-batched one ([`ceiling_lanes`],
//! blocks of lanes in vectorised loops; f64, and f32 for reference). Every ratio is given against both,
//! and forward+gradient also against the lane-batched ceiling in the widest vectors the processor
//! has (`ceiling_lanes::kalman_lanes_f64_widest`).
//!
//! Also home of [`KalmanCase`] (the program and its 80×2 observations, read from the seed data) and
//! [`KalmanRunner`] (one warmed-up evaluator whose inputs are changed in place between runs).

use std::hint::black_box;
use std::io;
use std::path::{Path, PathBuf};

use ndvm_core::{
    Dialect, EvalOptions, Evaluation, Evaluator, Heap, InputValue, Inputs, Precision, Program,
};
use serde::Serialize;

use crate::ceiling;
use crate::ceiling_cpp::{self, Cpp, Elem as CppElem};
use crate::ceiling_lanes::{self, LaneResults};
use crate::timing::{self, Budget, Timing};
use ndvm_search::{Result, SearchError};

/// The oracle program's name in `oracle_refs.json`.
pub const PROGRAM_NAME: &str = "kalman2d_T80";

/// `kalman2d_T80` as the seed data gives it, with the PyTorch oracle's values (float32).
#[derive(Clone, Debug)]
pub struct KalmanCase {
    /// The program source (reference dialect).
    pub src: String,
    /// The observations, one `[y0, y1]` per step.
    pub obs: Vec<[f64; 2]>,
    /// The oracle's `q`.
    pub q: f64,
    /// The oracle's `r`.
    pub r: f64,
    /// The oracle's NLL at `(q, r)`.
    pub oracle_value: f64,
    /// The oracle's `[dNLL/dq, dNLL/dr]`.
    pub oracle_grads: [f64; 2],
}

fn bad_data(path: &Path, message: String) -> SearchError {
    SearchError::Read {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidData, message),
    }
}

impl KalmanCase {
    /// Reads `kalman2d_T80` from `seed_data/oracle_refs.json`; fails loudly when the folder is missing.
    pub fn load(seed_data: &Path) -> Result<KalmanCase> {
        let path: PathBuf = seed_data.join("oracle_refs.json");
        let text = std::fs::read_to_string(&path).map_err(|source| SearchError::Read {
            path: path.clone(),
            source,
        })?;
        // The file holds one bare `Infinity` token, which strict JSON rejects.
        let json: serde_json::Value = serde_json::from_str(&text.replace("Infinity", "null"))
            .map_err(|e| bad_data(&path, e.to_string()))?;
        let prog = json["programs"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == PROGRAM_NAME))
            .ok_or_else(|| bad_data(&path, format!("no program `{PROGRAM_NAME}`")))?;
        let num = |v: &serde_json::Value, what: &str| {
            v.as_f64()
                .ok_or_else(|| bad_data(&path, format!("{PROGRAM_NAME}: `{what}` is not a number")))
        };
        let src = prog["src"]
            .as_str()
            .ok_or_else(|| bad_data(&path, format!("{PROGRAM_NAME}: no `src`")))?
            .to_string();
        let m = &prog["matrix"];
        let data = m["data"]
            .as_array()
            .ok_or_else(|| bad_data(&path, format!("{PROGRAM_NAME}: no matrix data")))?
            .iter()
            .map(|x| num(x, "matrix.data"))
            .collect::<Result<Vec<f64>>>()?;
        let (rows, cols) = (num(&m["rows"], "rows")?, num(&m["cols"], "cols")?);
        if cols != 2.0 || data.len() as f64 != rows * cols {
            return Err(bad_data(
                &path,
                format!("{PROGRAM_NAME}: expected an n×2 matrix, got {rows}×{cols}"),
            ));
        }
        Ok(KalmanCase {
            src,
            obs: data.chunks_exact(2).map(|c| [c[0], c[1]]).collect(),
            q: num(&prog["scalars"]["q"], "scalars.q")?,
            r: num(&prog["scalars"]["r"], "scalars.r")?,
            oracle_value: num(&prog["oracle_result"], "oracle_result")?,
            oracle_grads: [
                num(&prog["grads"]["q"], "grads.q")?,
                num(&prog["grads"]["r"], "grads.r")?,
            ],
        })
    }

    /// The observations as a row-major matrix input.
    pub fn obs_input(&self) -> InputValue {
        InputValue::Matrix {
            rows: self.obs.len(),
            cols: 2,
            data: self.obs.iter().flatten().copied().collect(),
        }
    }

    /// Slightly perturbed per-lane `(q, r)` around the oracle point: lane `l` of `n_lanes`.
    pub fn lane_params(&self, n_lanes: usize) -> (Vec<f64>, Vec<f64>) {
        let t = |l: usize| l as f64 / n_lanes as f64;
        let q = (0..n_lanes).map(|l| self.q * (1.0 + 0.01 * t(l))).collect();
        let r = (0..n_lanes).map(|l| self.r * (1.0 - 0.01 * t(l))).collect();
        (q, r)
    }
}

/// One interpreter set up for `kalman2d_T80` at a fixed lane count: the program is parsed and
/// decoded once, the inputs and the result buffers are reused by every run.
pub struct KalmanRunner {
    src: String,
    heap: Heap,
    program: Program,
    evaluator: Evaluator,
    inputs: Inputs,
    out: Evaluation,
}

impl KalmanRunner {
    /// A runner for `n_lanes` lanes, with every lane at the oracle's `(q, r)`; `replay`: gradient
    /// runs after the first replay the recorded trace (see `EvalOptions::replay`) instead of walking.
    pub fn new(case: &KalmanCase, n_lanes: usize, replay: bool) -> Result<KalmanRunner> {
        KalmanRunner::new_in(case, n_lanes, replay, Precision::F64)
    }

    /// [`KalmanRunner::new`] with lanes of the given precision.
    pub fn new_in(
        case: &KalmanCase,
        n_lanes: usize,
        replay: bool,
        precision: Precision,
    ) -> Result<KalmanRunner> {
        let mut heap = Heap::new();
        let label = "kalman2d_T80.scm";
        let frontends = ndvm_frontends::Registry::default();
        let frontend = ndvm_search::source::choose_frontend(&frontends, None, Path::new(label))?;
        let program = ndvm_search::source::parse_program(&mut heap, frontend, label, &case.src)?;
        let mut inputs = Inputs::new();
        inputs.push("q", InputValue::Lanes(vec![case.q; n_lanes]), true);
        inputs.push("r", InputValue::Lanes(vec![case.r; n_lanes]), true);
        inputs.push("obs", case.obs_input(), false);
        let evaluator = Evaluator::new(
            EvalOptions::new(n_lanes)
                .with_dialect(Dialect::Reference)
                .with_replay(replay)
                .with_precision(precision),
        );
        Ok(KalmanRunner {
            src: case.src.clone(),
            heap,
            program,
            evaluator,
            inputs,
            out: Evaluation::empty(),
        })
    }

    /// Sets the per-lane `q` and `r` in place (slices as long as the lane count).
    pub fn set_params(&mut self, q: &[f64], r: &[f64]) {
        for entry in &mut self.inputs.entries {
            let values = match entry.name.as_str() {
                "q" => q,
                "r" => r,
                _ => continue,
            };
            if let InputValue::Lanes(v) = &mut entry.value {
                v.copy_from_slice(values);
            }
        }
    }

    /// One run, forward only or with gradients; the result stays in the runner.
    pub fn run(&mut self, grad: bool) -> Result<()> {
        let res = self.evaluator.eval_into(
            &mut self.heap,
            &self.program,
            &self.inputs,
            grad,
            &mut self.out,
        );
        res.map_err(|error| SearchError::Eval {
            rendered: ndvm_frontends::render_core_error(
                "kalman2d_T80.scm",
                &self.src,
                &self.heap,
                &error,
            ),
            error,
        })
    }

    /// Whether the last run replayed the recorded trace.
    pub fn replayed(&self) -> bool {
        self.evaluator.last_run_replayed()
    }

    /// Floats the evaluator's payload arena held at the end of the last run (a memory gauge).
    pub fn arena_floats(&self) -> usize {
        self.evaluator.arena_floats()
    }

    /// The last run's value, gradient `[d/dq, d/dr]` (zero after a forward-only run) and fault flag
    /// on `lane`.
    pub fn lane_result(&self, lane: usize) -> (f64, [f64; 2], bool) {
        let value = self.out.value.number(lane).unwrap_or(f64::NAN);
        let g = |name| self.out.grad(name).map_or(0.0, |g| g[lane]);
        let fault = self.out.faults.get(lane).copied().unwrap_or(true);
        (value, [g("q"), g("r")], fault)
    }
}

/// One lane count of the sweep. Times are per call (one call = B lanes for the interpreter, B
/// sequential evaluations for the ceiling); `*_us` fields are per lane or per evaluation.
#[derive(Clone, Debug, Serialize)]
pub struct SweepRow {
    /// Lane count B.
    pub n_lanes: usize,
    /// Interpreter, forward and gradient, per lane (µs): the recorded trace replayed with new
    /// parameters (every timed run changes `(q, r)`).
    pub interp_grad_us: f64,
    /// Interpreter, forward and gradient walking the program every run (replay off), per lane (µs).
    pub interp_grad_walk_us: f64,
    /// Ceiling, forward and gradient, per evaluation (µs).
    pub ceiling_grad_us: f64,
    /// `interp_grad_us / ceiling_grad_us`.
    pub ratio_grad: f64,
    /// `interp_grad_walk_us / ceiling_grad_us`.
    pub ratio_grad_walk: f64,
    /// Interpreter, forward only, per lane (µs).
    pub interp_fwd_us: f64,
    /// Ceiling, forward only, per evaluation (µs).
    pub ceiling_fwd_us: f64,
    /// `interp_fwd_us / ceiling_fwd_us`.
    pub ratio_fwd: f64,
    /// Lane-batched ceiling (f64), forward and gradient, per lane (µs).
    pub lanes_grad_us: f64,
    /// Lane-batched ceiling (f64), forward only, per lane (µs).
    pub lanes_fwd_us: f64,
    /// Lane-batched ceiling in f32, forward and gradient, per lane (µs).
    pub lanes_f32_grad_us: f64,
    /// Lane-batched ceiling in f32, forward only, per lane (µs).
    pub lanes_f32_fwd_us: f64,
    /// `interp_grad_us / lanes_grad_us`.
    pub ratio_grad_lanes: f64,
    /// `interp_grad_walk_us / lanes_grad_us`.
    pub ratio_grad_walk_lanes: f64,
    /// `interp_fwd_us / lanes_fwd_us`.
    pub ratio_fwd_lanes: f64,
    /// `lanes_f32_grad_us / lanes_grad_us`: what f32 saves the compiled code.
    pub lanes_f32_over_f64_grad: f64,
    /// The f64 lane-batched ceiling compiled for the widest vectors the processor has
    /// (`ndvm_core::widest`), forward and gradient, per lane (µs).
    pub lanes_wide_grad_us: f64,
    /// `interp_grad_us / lanes_wide_grad_us`.
    pub ratio_grad_lanes_wide: f64,
    /// The compiled C++ ceiling (`bench/cpp/`, `-O3 -march=native`, FMA contraction), f64,
    /// forward and gradient, per lane (µs); `None` where no C++ compiler built it.
    pub cpp_grad_us: Option<f64>,
    /// The same C++ source built with `-ffp-contract=off` (the Rust lane ceiling's bits).
    pub cpp_exact_grad_us: Option<f64>,
    /// The C++ ceiling in f32, forward and gradient, per lane (µs).
    pub cpp_f32_grad_us: Option<f64>,
    /// The fastest f64 forward+gradient ceiling per lane (µs): the least of the scalar,
    /// lane-batched, widest-vector and C++ ones.
    pub best_grad_us: f64,
    /// `interp_grad_us / best_grad_us`: the replay against the fastest compiled code.
    pub ratio_grad_best: f64,
    /// The fastest f32 ceiling per lane (µs): the least of the f32 lane-batched and C++ ones.
    pub best_f32_grad_us: f64,
    /// `interp_f32_grad_us / best_f32_grad_us`.
    pub ratio_f32_grad_best: f64,
    /// Interpreter in f32 lanes, forward and gradient, replayed, per lane (µs).
    pub interp_f32_grad_us: f64,
    /// `interp_f32_grad_us / interp_grad_us`: what f32 lanes save the interpreter.
    pub interp_f32_over_f64_grad: f64,
    /// `interp_f32_grad_us / lanes_f32_grad_us`: f32 lanes against the f32 lane-batched ceiling.
    pub ratio_f32_grad_lanes_f32: f64,
    /// Largest relative difference between the f32 interpreter and the f64 scalar ceiling (its
    /// rounding, not a fault).
    pub max_rel_diff_f32: f64,
    /// Largest relative difference between the interpreter and the f64 lane-batched ceiling (values
    /// and gradients, every lane).
    pub max_rel_diff_lanes: f64,
    /// Same for the f32 lane-batched ceiling (its rounding, not a fault).
    pub max_rel_diff_lanes_f32: f64,
    /// Largest relative difference between interpreter and ceiling over all lanes' values and
    /// gradients (a sanity check: the two compute the same function).
    pub max_rel_diff: f64,
    /// Floats in the payload arena after a forward+gradient run (the tape's working set).
    pub arena_floats_grad: usize,
    /// Floats in the payload arena after a forward-only run.
    pub arena_floats_fwd: usize,
    /// Raw interpreter forward+gradient timing, replayed (per call of B lanes).
    pub interp_grad: Timing,
    /// Raw interpreter forward+gradient timing, walked.
    pub interp_grad_walk: Timing,
    /// Raw ceiling forward+gradient timing (per call of B evaluations).
    pub ceiling_grad: Timing,
    /// Raw interpreter forward-only timing.
    pub interp_fwd: Timing,
    /// Raw ceiling forward-only timing.
    pub ceiling_fwd: Timing,
    /// Raw lane-batched f64 forward+gradient timing (per call of B lanes).
    pub lanes_grad: Timing,
    /// Raw lane-batched f64 forward-only timing.
    pub lanes_fwd: Timing,
    /// Raw timing of the lane-batched f64 ceiling in the widest vectors, forward+gradient.
    pub lanes_wide_grad: Timing,
    /// Raw lane-batched f32 forward+gradient timing.
    pub lanes_f32_grad: Timing,
    /// Raw lane-batched f32 forward-only timing.
    pub lanes_f32_fwd: Timing,
    /// Raw interpreter forward+gradient timing in f32 lanes, replayed.
    pub interp_f32_grad: Timing,
    /// Raw timing of the C++ ceiling (FMA build, f64), when built.
    pub cpp_grad: Option<Timing>,
    /// Raw timing of the C++ ceiling built without contraction (f64), when built.
    pub cpp_exact_grad: Option<Timing>,
    /// Raw timing of the C++ ceiling in f32 (FMA build), when built.
    pub cpp_f32_grad: Option<Timing>,
}

/// The lane counts of the sweep.
pub const LANE_COUNTS: [usize; 5] = [1, 8, 64, 256, 1024];

fn rel_diff(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-300)
}

/// Runs the sweep at every lane count in [`LANE_COUNTS`].
pub fn sweep(
    case: &KalmanCase,
    budget: &Budget,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<SweepRow>> {
    let mut rows = Vec::new();
    for n_lanes in LANE_COUNTS {
        progress(&format!("kalman: B = {n_lanes}"));
        rows.push(sweep_row(case, budget, n_lanes)?);
    }
    Ok(rows)
}

/// One lane count: the two parameter points, the agreement checks, then the timings.
fn sweep_row(case: &KalmanCase, budget: &Budget, n_lanes: usize) -> Result<SweepRow> {
    let (q, r) = case.lane_params(n_lanes);
    // A second parameter point: replayed runs alternate between the two.
    let q2: Vec<f64> = q.iter().map(|x| x * (1.0 + 1e-4)).collect();
    let r2: Vec<f64> = r.iter().map(|x| x * (1.0 - 1e-4)).collect();
    let mut checked = check_agreement(case, n_lanes, (&q, &r), (&q2, &r2))?;
    let timings = time_cases(case, budget, &mut checked, (&q, &r), (&q2, &r2))?;
    Ok(row(n_lanes, &checked.diffs, timings))
}

/// The runners and result buffers of one lane count, checked against the ceilings and ready to
/// be timed.
struct Checked {
    /// Forward+gradient, replaying: recorded at the first point, last replayed at the second.
    runner: KalmanRunner,
    /// The same in f32 lanes.
    f32_runner: KalmanRunner,
    /// Forward only.
    fwd_runner: KalmanRunner,
    /// Forward+gradient walking the program every run (replay off).
    walk_runner: KalmanRunner,
    /// The f64, f32 and widest-vector lane-batched ceilings' buffers.
    lanes64: LaneResults,
    lanes32: LaneResults,
    lanes_wide: LaneResults,
    /// The C++ ceiling's buffers (fast f64, exact f64, fast f32), when it was built.
    cpp: Option<[LaneResults; 3]>,
    /// What the checks measured.
    diffs: Diffs,
}

/// The agreement and memory figures of a [`SweepRow`].
struct Diffs {
    max_rel_diff: f64,
    max_rel_diff_lanes: f64,
    max_rel_diff_lanes_f32: f64,
    max_rel_diff_f32: f64,
    arena_floats_grad: usize,
    arena_floats_fwd: usize,
}

/// Sets up the runners of `n_lanes` lanes and checks, before anything is timed, that the
/// interpreter (f64 and f32) and the lane-batched ceilings compute the scalar ceiling's function
/// at both parameter points (panics when they disagree: the timings would mean nothing).
fn check_agreement(
    case: &KalmanCase,
    n_lanes: usize,
    (q, r): (&[f64], &[f64]),
    (q2, r2): (&[f64], &[f64]),
) -> Result<Checked> {
    let mut runner = KalmanRunner::new(case, n_lanes, true)?;
    // Same function: compare every lane with the ceiling before timing anything, after the
    // recording walk and after a replay at the second point.
    let max_rel_diff = ceiling_diff(&mut runner, case, (q, r), (q2, r2))?;
    assert!(
        max_rel_diff <= 1e-9,
        "interpreter and ceiling disagree at B = {n_lanes}: relative difference {max_rel_diff:e}"
    );
    // The lane-batched ceilings against the interpreter's last (replayed) run at (q2, r2).
    let (mut lanes64, mut lanes32) = (LaneResults::default(), LaneResults::default());
    ceiling_lanes::kalman_lanes_f64(&case.obs, q2, r2, true, &mut lanes64);
    ceiling_lanes::kalman_lanes_f32(&case.obs, q2, r2, true, &mut lanes32);
    let (max_rel_diff_lanes, max_rel_diff_lanes_f32) =
        lanes_diffs(&runner, &lanes64, &lanes32, n_lanes);
    let mut lanes_wide = LaneResults::default();
    ceiling_lanes::kalman_lanes_f64_widest(&case.obs, q2, r2, true, &mut lanes_wide);
    assert!(
        lanes_wide.value == lanes64.value && lanes_wide.grad == lanes64.grad,
        "the widest-vector lane ceiling differs from its baseline build at B = {n_lanes}"
    );
    assert!(
        max_rel_diff_lanes <= 1e-9 && max_rel_diff_lanes_f32 <= 1e-4,
        "interpreter and lane-batched ceilings disagree at B = {n_lanes}: \
         {max_rel_diff_lanes:e} (f64), {max_rel_diff_lanes_f32:e} (f32)"
    );
    let cpp = check_cpp(case, (q2, r2), &lanes64, &lanes32);

    let arena_floats_grad = runner.arena_floats();
    let mut f32_runner = KalmanRunner::new_in(case, n_lanes, true, Precision::F32)?;
    let max_rel_diff_f32 = ceiling_diff(&mut f32_runner, case, (q, r), (q2, r2))?;
    // 80 filter steps in single precision: observed ≤ 3e-5 relative.
    assert!(
        max_rel_diff_f32 <= 1e-3,
        "f32 interpreter and f64 ceiling disagree at B = {n_lanes}: {max_rel_diff_f32:e}"
    );
    let mut fwd_runner = KalmanRunner::new(case, n_lanes, true)?;
    fwd_runner.set_params(q, r);
    fwd_runner.run(false)?;
    let arena_floats_fwd = fwd_runner.arena_floats();
    let mut walk_runner = KalmanRunner::new(case, n_lanes, false)?;
    walk_runner.set_params(q, r);
    Ok(Checked {
        runner,
        f32_runner,
        fwd_runner,
        walk_runner,
        lanes64,
        lanes32,
        lanes_wide,
        cpp,
        diffs: Diffs {
            max_rel_diff,
            max_rel_diff_lanes,
            max_rel_diff_lanes_f32,
            max_rel_diff_f32,
            arena_floats_grad,
            arena_floats_fwd,
        },
    })
}

/// Runs the C++ ceiling (when built) at `(q, r)` and checks it against the Rust lane ceilings:
/// the exact build bit for bit, the FMA build and f32 to their rounding (panics otherwise).
fn check_cpp(
    case: &KalmanCase,
    params: (&[f64], &[f64]),
    lanes64: &LaneResults,
    lanes32: &LaneResults,
) -> Option<[LaneResults; 3]> {
    let mut bufs: [LaneResults; 3] = Default::default();
    let builds = [
        (Cpp::Fast, CppElem::F64),
        (Cpp::Exact, CppElem::F64),
        (Cpp::Fast, CppElem::F32),
    ];
    for (buf, (build, elem)) in bufs.iter_mut().zip(builds) {
        if !ceiling_cpp::kalman_cpp(build, elem, &case.obs, params, true, buf) {
            return None;
        }
    }
    assert!(
        bufs[1].value == lanes64.value && bufs[1].grad == lanes64.grad,
        "the C++ ceiling built without contraction differs from the Rust lane ceiling"
    );
    let worst = |a: &LaneResults, b: &LaneResults| {
        let pairs = a.value.iter().zip(&b.value).map(|(x, y)| (*x, *y));
        let grads = a.grad.iter().zip(&b.grad);
        pairs
            .chain(grads.flat_map(|(x, y)| [(x[0], y[0]), (x[1], y[1])]))
            .map(|(x, y)| rel_diff(x, y))
            .fold(0.0, f64::max)
    };
    let (d64, d32) = (worst(&bufs[0], lanes64), worst(&bufs[2], lanes32));
    assert!(
        d64 <= 1e-9 && d32 <= 1e-3,
        "the C++ ceiling disagrees with the Rust lane ceilings: {d64:e} (f64), {d32:e} (f32)"
    );
    Some(bufs)
}

/// The raw timings of one lane count, in the order [`time_cases`] samples them.
struct Timings {
    interp_grad: Timing,
    interp_grad_walk: Timing,
    interp_fwd: Timing,
    ceiling_grad: Timing,
    ceiling_fwd: Timing,
    lanes_grad: Timing,
    lanes_fwd: Timing,
    lanes_f32_grad: Timing,
    lanes_f32_fwd: Timing,
    interp_f32_grad: Timing,
    lanes_wide_grad: Timing,
    /// Fast f64, exact f64, fast f32, when built.
    cpp: Option<[Timing; 3]>,
}

/// Times the eleven cases of one lane count, sampled round-robin so that the ratios compare like
/// with like; the replaying runners alternate between the two parameter points.
fn time_cases(
    case: &KalmanCase,
    budget: &Budget,
    checked: &mut Checked,
    (q, r): (&[f64], &[f64]),
    (q2, r2): (&[f64], &[f64]),
) -> Result<Timings> {
    let Checked {
        runner,
        f32_runner,
        fwd_runner,
        walk_runner,
        lanes64,
        lanes32,
        lanes_wide,
        cpp,
        ..
    } = checked;
    let mut flip = false;
    let mut interp_grad = || {
        flip = !flip;
        if flip {
            runner.set_params(q2, r2);
        } else {
            runner.set_params(q, r);
        }
        runner.run(true)
    };
    let mut flip32 = false;
    let mut interp_f32_grad = || {
        flip32 = !flip32;
        if flip32 {
            f32_runner.set_params(q2, r2);
        } else {
            f32_runner.set_params(q, r);
        }
        f32_runner.run(true)
    };
    let mut interp_grad_walk = || walk_runner.run(true);
    let mut interp_fwd = || fwd_runner.run(false);
    let mut ceiling_grad = || {
        for (&q, &r) in q.iter().zip(r) {
            black_box(ceiling::kalman_nll_grad(black_box(&case.obs), q, r));
        }
        Ok(())
    };
    let mut ceiling_fwd = || {
        for (&q, &r) in q.iter().zip(r) {
            black_box(ceiling::kalman_nll(black_box(&case.obs), q, r));
        }
        Ok(())
    };
    // Each lane-batched case owns its result buffers (reused, so no allocation is timed).
    let (mut b1, mut b3) = (LaneResults::default(), LaneResults::default());
    let mut lanes_grad = || lanes_f64(case, (q, r), true, lanes64);
    let mut lanes_wide_grad = || {
        ceiling_lanes::kalman_lanes_f64_widest(black_box(&case.obs), q, r, true, lanes_wide);
        black_box(&lanes_wide.value);
        Ok(())
    };
    let mut lanes_fwd = || lanes_f64(case, (q, r), false, &mut b1);
    let mut lanes_f32_grad = || lanes_f32(case, (q, r), true, lanes32);
    let mut lanes_f32_fwd = || lanes_f32(case, (q, r), false, &mut b3);
    let mut cases: Vec<&mut dyn FnMut() -> Result<()>> = vec![
        &mut interp_grad,
        &mut interp_grad_walk,
        &mut interp_fwd,
        &mut ceiling_grad,
        &mut ceiling_fwd,
        &mut lanes_grad,
        &mut lanes_fwd,
        &mut lanes_f32_grad,
        &mut lanes_f32_fwd,
        &mut interp_f32_grad,
        &mut lanes_wide_grad,
    ];
    let mut cpp_cases: Vec<Box<dyn FnMut() -> Result<()> + '_>> = Vec::new();
    if let Some(bufs) = cpp.as_mut() {
        let builds = [
            (Cpp::Fast, CppElem::F64),
            (Cpp::Exact, CppElem::F64),
            (Cpp::Fast, CppElem::F32),
        ];
        for (buf, (build, elem)) in bufs.iter_mut().zip(builds) {
            cpp_cases.push(Box::new(move || {
                ceiling_cpp::kalman_cpp(build, elem, black_box(&case.obs), (q, r), true, buf);
                black_box(&buf.value);
                Ok(())
            }));
        }
    }
    for c in &mut cpp_cases {
        cases.push(c.as_mut());
    }
    let n_cases = cases.len();
    let mut timings = timing::measure_interleaved(budget, &mut cases)?.into_iter();
    let mut next = || timings.next().expect("one timing per case");
    Ok(Timings {
        interp_grad: next(),
        interp_grad_walk: next(),
        interp_fwd: next(),
        ceiling_grad: next(),
        ceiling_fwd: next(),
        lanes_grad: next(),
        lanes_fwd: next(),
        lanes_f32_grad: next(),
        lanes_f32_fwd: next(),
        interp_f32_grad: next(),
        lanes_wide_grad: next(),
        cpp: (n_cases > 11).then(|| [next(), next(), next()]),
    })
}

/// One timed call of the f64 lane-batched ceiling into `out`.
fn lanes_f64(
    case: &KalmanCase,
    (q, r): (&[f64], &[f64]),
    grad: bool,
    out: &mut LaneResults,
) -> Result<()> {
    ceiling_lanes::kalman_lanes_f64(black_box(&case.obs), q, r, grad, out);
    black_box(&out.value);
    Ok(())
}

/// One timed call of the f32 lane-batched ceiling into `out`.
fn lanes_f32(
    case: &KalmanCase,
    (q, r): (&[f64], &[f64]),
    grad: bool,
    out: &mut LaneResults,
) -> Result<()> {
    ceiling_lanes::kalman_lanes_f32(black_box(&case.obs), q, r, grad, out);
    black_box(&out.value);
    Ok(())
}

/// The row of one lane count: per-lane times and ratios from the medians, the checks' figures
/// and the raw timings.
fn row(n_lanes: usize, diffs: &Diffs, t: Timings) -> SweepRow {
    let per = |t: &Timing| t.median_us / n_lanes as f64;
    let [cpp_grad, cpp_exact_grad, cpp_f32_grad] = match t.cpp {
        Some([a, b, c]) => [Some(a), Some(b), Some(c)],
        None => [None, None, None],
    };
    let cpp_us = |t: &Option<Timing>| t.as_ref().map(per);
    let best_grad_us = [&t.ceiling_grad, &t.lanes_grad, &t.lanes_wide_grad]
        .into_iter()
        .chain(cpp_grad.iter())
        .chain(cpp_exact_grad.iter())
        .map(per)
        .fold(f64::INFINITY, f64::min);
    let best_f32_grad_us = std::iter::once(&t.lanes_f32_grad)
        .chain(cpp_f32_grad.iter())
        .map(per)
        .fold(f64::INFINITY, f64::min);
    SweepRow {
        cpp_grad_us: cpp_us(&cpp_grad),
        cpp_exact_grad_us: cpp_us(&cpp_exact_grad),
        cpp_f32_grad_us: cpp_us(&cpp_f32_grad),
        best_grad_us,
        ratio_grad_best: per(&t.interp_grad) / best_grad_us,
        best_f32_grad_us,
        ratio_f32_grad_best: per(&t.interp_f32_grad) / best_f32_grad_us,
        n_lanes,
        interp_grad_us: per(&t.interp_grad),
        interp_grad_walk_us: per(&t.interp_grad_walk),
        ceiling_grad_us: per(&t.ceiling_grad),
        ratio_grad: t.interp_grad.median_us / t.ceiling_grad.median_us,
        ratio_grad_walk: t.interp_grad_walk.median_us / t.ceiling_grad.median_us,
        interp_fwd_us: per(&t.interp_fwd),
        ceiling_fwd_us: per(&t.ceiling_fwd),
        ratio_fwd: t.interp_fwd.median_us / t.ceiling_fwd.median_us,
        lanes_grad_us: per(&t.lanes_grad),
        lanes_fwd_us: per(&t.lanes_fwd),
        lanes_f32_grad_us: per(&t.lanes_f32_grad),
        lanes_f32_fwd_us: per(&t.lanes_f32_fwd),
        ratio_grad_lanes: t.interp_grad.median_us / t.lanes_grad.median_us,
        ratio_grad_walk_lanes: t.interp_grad_walk.median_us / t.lanes_grad.median_us,
        ratio_fwd_lanes: t.interp_fwd.median_us / t.lanes_fwd.median_us,
        lanes_f32_over_f64_grad: t.lanes_f32_grad.median_us / t.lanes_grad.median_us,
        lanes_wide_grad_us: per(&t.lanes_wide_grad),
        ratio_grad_lanes_wide: t.interp_grad.median_us / t.lanes_wide_grad.median_us,
        interp_f32_grad_us: per(&t.interp_f32_grad),
        interp_f32_over_f64_grad: t.interp_f32_grad.median_us / t.interp_grad.median_us,
        ratio_f32_grad_lanes_f32: t.interp_f32_grad.median_us / t.lanes_f32_grad.median_us,
        max_rel_diff_f32: diffs.max_rel_diff_f32,
        max_rel_diff_lanes: diffs.max_rel_diff_lanes,
        max_rel_diff_lanes_f32: diffs.max_rel_diff_lanes_f32,
        max_rel_diff: diffs.max_rel_diff,
        arena_floats_grad: diffs.arena_floats_grad,
        arena_floats_fwd: diffs.arena_floats_fwd,
        interp_grad: t.interp_grad,
        interp_grad_walk: t.interp_grad_walk,
        ceiling_grad: t.ceiling_grad,
        interp_fwd: t.interp_fwd,
        ceiling_fwd: t.ceiling_fwd,
        lanes_grad: t.lanes_grad,
        lanes_fwd: t.lanes_fwd,
        lanes_wide_grad: t.lanes_wide_grad,
        lanes_f32_grad: t.lanes_f32_grad,
        lanes_f32_fwd: t.lanes_f32_fwd,
        interp_f32_grad: t.interp_f32_grad,
        cpp_grad,
        cpp_exact_grad,
        cpp_f32_grad,
    }
}

/// Records `runner` at `p1` and replays it at `p2` (checking that the second run replays and no
/// lane faults) and returns the largest relative difference of its values and gradients from the
/// f64 scalar ceiling.
fn ceiling_diff(
    runner: &mut KalmanRunner,
    case: &KalmanCase,
    p1: (&[f64], &[f64]),
    p2: (&[f64], &[f64]),
) -> Result<f64> {
    let mut worst = 0.0f64;
    for ((qs, rs), replayed) in [(p1, false), (p2, true)] {
        let n_lanes = qs.len();
        runner.set_params(qs, rs);
        runner.run(true)?;
        assert_eq!(
            runner.replayed(),
            replayed,
            "kalman replay at B = {n_lanes}"
        );
        for lane in 0..n_lanes {
            let (v, g, fault) = runner.lane_result(lane);
            let (cv, cg) = ceiling::kalman_nll_grad(&case.obs, qs[lane], rs[lane]);
            assert!(!fault, "kalman lane {lane} of {n_lanes} faulted");
            for (a, b) in [(v, cv), (g[0], cg[0]), (g[1], cg[1])] {
                worst = worst.max(rel_diff(a, b));
            }
        }
    }
    Ok(worst)
}

/// Largest relative differences between the runner's last run and the f64 and f32 lane results.
fn lanes_diffs(
    runner: &KalmanRunner,
    lanes64: &LaneResults,
    lanes32: &LaneResults,
    n_lanes: usize,
) -> (f64, f64) {
    let (mut d64, mut d32) = (0.0f64, 0.0f64);
    for lane in 0..n_lanes {
        let (v, g, _) = runner.lane_result(lane);
        for (k, want) in [v, g[0], g[1]].into_iter().enumerate() {
            let pick = |r: &LaneResults| [r.value[lane], r.grad[lane][0], r.grad[lane][1]][k];
            d64 = d64.max(rel_diff(pick(lanes64), want));
            d32 = d32.max(rel_diff(pick(lanes32), want));
        }
    }
    (d64, d32)
}

/// The sweep as text tables: the headline (the replay against the fastest compiled ceiling,
/// f64 and f32), then every column.
pub fn table(rows: &[SweepRow]) -> String {
    let mut s = String::from(
        "kalman2d_T80, forward+gradient, median µs per lane. best: the fastest compiled ceiling \
         (least of the Rust scalar and lane ceilings and C++ -O3 -march=native); C++: with FMA contraction, \
         exact: without; replay ÷ best in ()\n",
    );
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    s += &format!(
        "{:>6} | {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} | {:>8} {:>8} {:>8} {:>7} | {:>7}\n",
        "B",
        "replay",
        "C++",
        "exact",
        "lanesW",
        "best",
        "(ratio)",
        "f32",
        "C++ f32",
        "best32",
        "(ratio)",
        "f32/f64"
    );
    for row in rows {
        s += &format!(
            "{:>6} | {:>8.3} {:>8} {:>8} {:>8.3} {:>8.3} {:>6.2}x | {:>8.3} {:>8} {:>8.3} {:>6.2}x | {:>7.2}\n",
            row.n_lanes,
            row.interp_grad_us,
            opt(row.cpp_grad_us),
            opt(row.cpp_exact_grad_us),
            row.lanes_wide_grad_us,
            row.best_grad_us,
            row.ratio_grad_best,
            row.interp_f32_grad_us,
            opt(row.cpp_f32_grad_us),
            row.best_f32_grad_us,
            row.ratio_f32_grad_best,
            row.interp_f32_over_f64_grad,
        );
    }
    s += "\nEvery column: median µs per lane (interpreter) and per evaluation (ceiling);\n\
         replay: the recorded trace re-run with new (q, r); walk: the program walked every run;\n\
         lanes: the lane-batched ceiling (f64, blocks of lanes in vectorised loops), ratios ÷ it in [];\n\
         lanesW: the same ceiling in the widest vectors the processor has, the replay ÷ it in {};\n\
         f32: the interpreter's replay in f32 lanes, [÷ the f32 lane-batched ceiling];\n\
         tape MiB: payload arena after a forward+gradient run\n";
    s += &format!(
        "{:>6} | {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} | {:>9} {:>9} {:>8} {:>8} {:>8} | {:>8} {:>7} {:>8} {:>7} | {:>8}\n",
        "B",
        "replay",
        "walk",
        "ceiling",
        "lanes",
        "ratio",
        "[ratio]",
        "[(walk)]",
        "lanesW",
        "{ratio}",
        "fwd only",
        "ceiling",
        "lanes",
        "ratio",
        "[ratio]",
        "f32",
        "f32/f64",
        "[f32]",
        "lanes32",
        "tape MiB"
    );
    for row in rows {
        s += &format!(
            "{:>6} | {:>9.3} {:>9.3} {:>9.3} {:>8.3} {:>7.1}x {:>7.1}x {:>7.1}x {:>8.3} {:>7.1}x | {:>9.3} {:>9.3} {:>8.3} {:>7.1}x {:>7.1}x | {:>8.3} {:>7.2} {:>7.1}x {:>7.2} | {:>8.2}\n",
            row.n_lanes,
            row.interp_grad_us,
            row.interp_grad_walk_us,
            row.ceiling_grad_us,
            row.lanes_grad_us,
            row.ratio_grad,
            row.ratio_grad_lanes,
            row.ratio_grad_walk_lanes,
            row.lanes_wide_grad_us,
            row.ratio_grad_lanes_wide,
            row.interp_fwd_us,
            row.ceiling_fwd_us,
            row.lanes_fwd_us,
            row.ratio_fwd,
            row.ratio_fwd_lanes,
            row.interp_f32_grad_us,
            row.interp_f32_over_f64_grad,
            row.ratio_f32_grad_lanes_f32,
            row.lanes_f32_over_f64_grad,
            row.arena_floats_grad as f64 * 8.0 / (1024.0 * 1024.0)
        );
    }
    s
}
