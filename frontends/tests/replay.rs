//! Trace replay: a reused evaluator that replays its recorded trace returns, bit for bit, what a
//! fresh walk returns — for every oracle and corpus program over a sequence of parameter values,
//! for branches on parameters (guards hold, then fail), and for changed data — and replays at all
//! where it should (Kalman, the corpus); and 300 seeded random programs with every kind of guard.

mod common;

use common::{Failure, LaneBits, fuzz_corpus, lane_bits, opts, oracle_programs};
use ndvm_core::{Dialect, EvalOptions, Evaluation, Evaluator, Heap, Inputs, Precision};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The bits of every lane of a result, or its error.
fn bits(r: &Result<Evaluation, Failure>, n_lanes: usize) -> Result<Vec<LaneBits>, String> {
    match r {
        Ok(e) => Ok((0..n_lanes).map(|l| lane_bits(e, l)).collect()),
        Err(f) => Err(f.to_string()),
    }
}

/// Every NaN of `b` as one: which of two NaNs an add returns follows the operand order the
/// compiler picks for each code shape (see `ndvm_core`'s `smallmat`), so it is the one bit
/// pattern a replay and a walk may differ in.
fn nan_as_one(mut b: LaneBits) -> LaneBits {
    b.value = b
        .value
        .split(' ')
        .map(|t| if t.ends_with("(NaN)") { "NaN" } else { t })
        .collect::<Vec<_>>()
        .join(" ");
    for (_, g) in &mut b.grads {
        if f64::from_bits(*g).is_nan() {
            *g = u64::MAX;
        }
    }
    b
}

/// Runs `seq` through one reused evaluator (replay on) and compares each result with a fresh
/// evaluator's walk (replay off); returns which runs were replays.
fn check_sequence(name: &str, src: &str, opts: EvalOptions, seq: &[Inputs]) -> Vec<bool> {
    check_sequence_as(name, src, opts, seq, |b| b)
}

/// [`check_sequence`], comparing the lanes' bits as `view` shows them.
fn check_sequence_as(
    name: &str,
    src: &str,
    opts: EvalOptions,
    seq: &[Inputs],
    view: fn(LaneBits) -> LaneBits,
) -> Vec<bool> {
    let mut heap = Heap::new();
    let program = ndvm_frontends::scheme::parse(&mut heap, src)
        .unwrap_or_else(|e| panic!("{name}: parse: {e}"));
    let mut reused = Evaluator::new(opts.clone());
    let mut replayed = Vec::new();
    for (k, inputs) in seq.iter().enumerate() {
        let got = reused
            .eval_grad(&mut heap, &program, inputs)
            .map_err(|e| Failure::Eval {
                kind: e.kind,
                message: e.message,
                at: None,
            });
        replayed.push(reused.last_run_replayed());
        let mut fresh = Evaluator::new(opts.clone().with_replay(false));
        let want = fresh
            .eval_grad(&mut heap, &program, inputs)
            .map_err(|e| Failure::Eval {
                kind: e.kind,
                message: e.message,
                at: None,
            });
        assert!(
            !fresh.last_run_replayed(),
            "{name}: replay off yet replayed"
        );
        let bits = |r| bits(r, opts.n_lanes).map(|v| v.into_iter().map(view).collect::<Vec<_>>());
        assert_eq!(
            bits(&got),
            bits(&want),
            "{name}: run {k} (replayed: {}) differs from a fresh walk",
            replayed[k]
        );
    }
    replayed
}

/// Parameter scalings tried in order: the recording point, small moves (guards hold), larger
/// ones and a sign flip (guards may fail, and the walk takes over).
const SCALES: [f64; 6] = [1.0, 1.001, 0.999, 1.001, 2.0, -1.0];

#[test]
fn oracle_programs_replay_bit_for_bit() {
    oracle_programs_replay_bit_for_bit_in(Precision::F64);
}

#[test]
fn oracle_programs_replay_bit_for_bit_in_f32() {
    oracle_programs_replay_bit_for_bit_in(Precision::F32);
}

fn oracle_programs_replay_bit_for_bit_in(precision: Precision) {
    let mut replays = 0;
    let mut kalman_replays = 0;
    for p in oracle_programs() {
        let seq: Vec<Inputs> = SCALES
            .iter()
            .map(|s| {
                let mut inputs = Inputs::new();
                for (n, v) in &p.scalars {
                    inputs = inputs.param(n, v * s);
                }
                p.with_matrix(inputs)
            })
            .collect();
        let r = check_sequence(
            &p.name,
            &p.src,
            opts(Dialect::Reference, 1).with_precision(precision),
            &seq,
        );
        assert!(!r[0], "{}: the first run cannot be a replay", p.name);
        replays += r.iter().filter(|&&x| x).count();
        if p.name == "kalman2d_T80" {
            kalman_replays = r.iter().filter(|&&x| x).count();
        }
    }
    assert_eq!(
        kalman_replays,
        SCALES.len() - 1,
        "kalman2d_T80 replays every run after the first"
    );
    assert!(replays >= 100, "only {replays} oracle runs replayed");
}

#[test]
fn corpus_programs_replay_bit_for_bit_at_one_and_several_lanes() {
    corpus_programs_replay_bit_for_bit_at_one_and_several_lanes_in(Precision::F64);
}

#[test]
fn corpus_programs_replay_bit_for_bit_at_one_and_several_lanes_in_f32() {
    corpus_programs_replay_bit_for_bit_at_one_and_several_lanes_in(Precision::F32);
}

fn corpus_programs_replay_bit_for_bit_at_one_and_several_lanes_in(precision: Precision) {
    let corpus = fuzz_corpus();
    assert_eq!(corpus.len(), 200);
    let mut replays = 0;
    for p in &corpus {
        // One lane, uniform parameters.
        let seq: Vec<Inputs> = SCALES
            .iter()
            .map(|s| {
                p.params
                    .iter()
                    .fold(Inputs::new(), |acc, (n, v)| acc.param(n, v * s))
            })
            .collect();
        let name = format!("fuzz #{}", p.id);
        let r = check_sequence(
            &name,
            &p.src,
            opts(Dialect::Default, 1).with_precision(precision),
            &seq,
        );
        replays += r.iter().filter(|&&x| x).count();
        // Five lanes, per-lane parameters spread around the point.
        let seq: Vec<Inputs> = SCALES
            .iter()
            .map(|s| {
                p.params.iter().fold(Inputs::new(), |acc, (n, v)| {
                    acc.param_lanes(n, (0..5).map(|l| v * s * (1.0 + 0.1 * l as f64)).collect())
                })
            })
            .collect();
        check_sequence(
            &name,
            &p.src,
            opts(Dialect::Default, 5).with_precision(precision),
            &seq,
        );
    }
    assert!(
        replays >= 500,
        "only {replays} of 1000 corpus runs replayed"
    );
}

fn lanes(xs: &[f64]) -> Vec<f64> {
    xs.to_vec()
}

#[test]
fn branch_on_a_parameter_replays_while_its_guard_holds() {
    let src = "(if (< a 0.0) (* a a) (- (* 3.0 a)))";
    let one = |a: f64| Inputs::new().param("a", a);
    let r = check_sequence(
        "if on a",
        src,
        opts(Dialect::Default, 1),
        &[one(1.0), one(2.0), one(-1.0), one(-2.0), one(3.0)],
    );
    assert_eq!(r, [false, true, false, true, false]);

    // Four lanes whose branches split; the guard is the whole lane pattern.
    let four = |xs: &[f64]| Inputs::new().param_lanes("a", lanes(xs));
    let r = check_sequence(
        "if on a, four lanes",
        src,
        opts(Dialect::Default, 4),
        &[
            four(&[1.0, -1.0, 2.0, -2.0]),
            four(&[1.5, -0.5, 2.5, -2.5]),
            four(&[-1.5, -0.5, 2.5, -2.5]),
        ],
    );
    assert_eq!(r, [false, true, false]);
}

#[test]
fn loop_trip_count_on_a_parameter_is_guarded() {
    // Halve x until it drops below 1: the trip count depends on the parameter.
    let src = "(loop ((x a) (k 0)) (if (< x 1.0) (+ x k) (recur (* x 0.5) (+ k 1))))";
    let one = |a: f64| Inputs::new().param("a", a);
    let r = check_sequence(
        "loop on a",
        src,
        opts(Dialect::Default, 1),
        &[one(5.0), one(6.0), one(9.0), one(9.5)],
    );
    assert_eq!(r, [false, true, false, true]);
}

/// `set!` under a branch on a parameter (the assignment is a select over the lanes on the path)
/// and in a `do` loop whose trip count depends on it: replays equal walks bit for bit, and a
/// changed lane pattern or trip count falls back to a walk.
#[test]
fn set_under_branches_and_do_loops_replays_bit_for_bit() {
    let src = "(let ((y a) (s 0.0))
                 (if (< a 0.0) (set! y (* y y)) (set! y (- (* 3.0 y))))
                 (do ((x a (* x 0.5))) ((< x 1.0) (+ y s)) (set! s (+ s x))))";
    let four = |xs: &[f64]| Inputs::new().param_lanes("a", lanes(xs));
    let r = check_sequence(
        "set! and do on a, four lanes",
        src,
        opts(Dialect::Default, 4),
        &[
            four(&[3.0, -1.0, 5.0, -2.0]),
            four(&[3.1, -1.1, 5.1, -2.1]),
            four(&[-3.1, -1.1, 5.1, -2.1]),
            four(&[-3.1, -1.1, 9.0, -2.1]),
        ],
    );
    assert_eq!(r, [false, true, false, false]);
}

#[test]
fn non_differentiable_ops_are_guarded() {
    // floor, zero?, positive? and quotient of parameters decide values and an index.
    let src = "(+ (ref (vec 10.0 20.0 30.0 40.0) (floor a))
                  (if (positive? (- a 1.5)) a (* 2.0 a))
                  (if (zero? (floor (* 0.1 a))) 0.0 a)
                  (quotient (floor a) 2.0))";
    let one = |a: f64| Inputs::new().param("a", a);
    let r = check_sequence(
        "guards",
        src,
        opts(Dialect::Default, 1),
        &[one(1.2), one(1.3), one(1.7), one(2.2), one(2.9), one(3.1)],
    );
    assert_eq!(r, [false, true, false, false, true, false]);
}

#[test]
fn structural_reads_of_parameters_are_never_replayed() {
    // In the reference dialect a number is a truth value: `(if a …)` reads the parameter itself.
    let one = |a: f64| Inputs::new().param("a", a);
    let r = check_sequence(
        "truthiness of a",
        "(if a (* a a) 1.0)",
        opts(Dialect::Reference, 1),
        &[one(1.0), one(2.0), one(0.0), one(3.0)],
    );
    assert_eq!(r, [false; 4]);
    // A parameter used as an index.
    let r = check_sequence(
        "index a",
        "(* a (ref (vec 1.0 2.0 3.0) a))",
        opts(Dialect::Default, 1),
        &[one(1.0), one(1.0), one(2.0)],
    );
    assert_eq!(r, [false; 3]);
}

#[test]
fn changed_data_or_shapes_are_walked() {
    let src = "(* a (+ x (ref m 1 0)))";
    let base = |a: f64, x: f64, m10: f64| {
        Inputs::new()
            .param_lanes("a", vec![a, a + 1.0])
            .input_lanes("x", vec![x, x * 2.0])
            .matrix("m", 2, 2, vec![1.0, 2.0, m10, 4.0])
    };
    let r = check_sequence(
        "data",
        src,
        opts(Dialect::Default, 2),
        &[
            base(1.0, 1.0, 3.0),
            base(2.0, 1.0, 3.0),
            base(2.0, 1.5, 3.0),
            base(3.0, 1.5, 3.0),
            base(3.0, 1.5, 5.0),
            base(4.0, 1.5, 5.0),
        ],
    );
    assert_eq!(r, [false, true, false, true, false, true]);
    // The same names with another shape: uniform instead of per lane.
    let uniform = Inputs::new()
        .param("a", 1.0)
        .input_lanes("x", vec![1.5, 3.0])
        .matrix("m", 2, 2, vec![1.0, 2.0, 5.0, 4.0]);
    let r = check_sequence(
        "shape change",
        src,
        opts(Dialect::Default, 2),
        &[base(1.0, 1.5, 5.0), uniform.clone(), uniform],
    );
    assert_eq!(r, [false, false, true]);
}

#[test]
fn forward_runs_replay_the_recorded_trace_and_record_one_when_repeated() {
    let src = "(* a a a)";
    let mut heap = Heap::new();
    let program = ndvm_frontends::scheme::parse(&mut heap, src).expect("parse");
    let mut ev = Evaluator::new(opts(Dialect::Default, 1));
    let at = |a: f64| Inputs::new().param("a", a);
    let g = |ev: &mut Evaluator, heap: &mut Heap, a: f64| {
        let e = ev.eval_grad(heap, &program, &at(a)).expect("runs");
        (
            e.value.number(0),
            e.grads[0].per_lane[0],
            ev.last_run_replayed(),
        )
    };
    let f = |ev: &mut Evaluator, heap: &mut Heap, a: f64| {
        let e = ev.eval(heap, &program, &at(a)).expect("runs");
        assert!(e.grads.is_empty(), "a forward run reports no gradient");
        (e.value.number(0), ev.last_run_replayed())
    };
    assert_eq!(g(&mut ev, &mut heap, 2.0), (Some(8.0), 12.0, false));
    assert_eq!(g(&mut ev, &mut heap, 3.0), (Some(27.0), 27.0, true));
    // A forward run replays the gradient run's trace, forward only; the trace stays.
    assert_eq!(f(&mut ev, &mut heap, 5.0), (Some(125.0), true));
    assert_eq!(g(&mut ev, &mut heap, 1.0), (Some(1.0), 3.0, true));
    // A fresh evaluator: the first forward run walks (decoding), the second walks recording,
    // the third replays; a gradient run then replays that recording with its gradient.
    let mut ev = Evaluator::new(opts(Dialect::Default, 1));
    assert_eq!(f(&mut ev, &mut heap, 5.0), (Some(125.0), false));
    assert_eq!(f(&mut ev, &mut heap, 6.0), (Some(216.0), false));
    assert_eq!(f(&mut ev, &mut heap, 7.0), (Some(343.0), true));
    assert_eq!(g(&mut ev, &mut heap, 2.0), (Some(8.0), 12.0, true));
    // With replay off every run walks.
    let mut ev = Evaluator::new(opts(Dialect::Default, 1).with_replay(false));
    for a in [5.0, 6.0, 7.0] {
        assert_eq!(f(&mut ev, &mut heap, a), (Some(a * a * a), false));
    }
}

#[test]
fn random_programs_replay_bit_for_bit() {
    random_programs_replay_bit_for_bit_in(Precision::F64);
}

#[test]
fn random_programs_replay_bit_for_bit_in_f32() {
    random_programs_replay_bit_for_bit_in(Precision::F32);
}

fn random_programs_replay_bit_for_bit_in(precision: Precision) {
    let mut rng = ChaCha8Rng::seed_from_u64(20261202);
    let (mut runs, mut replays, mut guard_falls) = (0, 0, 0);
    for k in 0..300 {
        let src = common::random_guarded_expr(&mut rng, 4);
        let n_lanes = if k % 2 == 0 { 1 } else { 4 };
        let x: Vec<f64> = (0..n_lanes).map(|l| 0.5 + 0.7 * l as f64).collect();
        let (a0, b0) = (rng.random_range(-2.0..2.0), rng.random_range(-2.0..2.0));
        let seq: Vec<Inputs> = [
            (0.0, 0.0),
            (1e-4, -1e-4),
            (2e-4, 1e-4),
            (0.3, -0.2),
            (0.31, -0.21),
            (-1.0, 1.5),
        ]
        .iter()
        .map(|&(da, db)| {
            Inputs::new()
                .param_lanes(
                    "a",
                    (0..n_lanes).map(|l| a0 + da + 0.1 * l as f64).collect(),
                )
                .param("b", b0 + db)
                .input_lanes("x", x.clone())
        })
        .collect();
        let r = check_sequence(
            &format!("random #{k}: {src}"),
            &src,
            opts(Dialect::Default, n_lanes).with_precision(precision),
            &seq,
        );
        runs += r.len();
        replays += r.iter().filter(|&&x| x).count();
        // A run after a replayable one that did not replay: a guard fell (or the run was tainted).
        guard_falls += r.windows(2).filter(|w| w[0] && !w[1]).count();
    }
    assert!(
        replays >= 600,
        "only {replays} of {runs} random runs replayed"
    );
    assert!(
        guard_falls >= 20,
        "only {guard_falls} guard failures exercised"
    );
}

#[test]
fn a_forward_run_whose_recording_outgrows_memory_walks_without_one() {
    // Without a tape the loop's arena is released every iteration; recorded, it grows.
    let src = "(loop ((i 0) (s 0.0)) (if (< i 100000) (recur (+ i 1) (+ s (* a 0.5))) s))";
    let mut heap = Heap::new();
    let program = ndvm_frontends::scheme::parse(&mut heap, src).expect("parse");
    let mut ev = Evaluator::new(
        opts(Dialect::Default, 1)
            .with_max_memory(2 << 20)
            .with_max_steps(10_000_000),
    );
    let inputs = Inputs::new().param("a", 2.0);
    let grad = ev.eval_grad(&mut heap, &program, &inputs);
    assert_eq!(
        grad.expect_err("a gradient run records").kind.code(),
        "E013"
    );
    for _ in 0..3 {
        let e = ev.eval(&mut heap, &program, &inputs).expect("runs");
        assert_eq!(e.value.number(0), Some(100000.0));
        assert!(!ev.last_run_replayed());
    }
}

/// Long data (a column of 45 lanes and a 5×5 matrix: whole compare chunks and a tail): a change
/// to any one element of non-differentiated data — in the first chunk, a later one or the tail,
/// `-0` for `+0` included — is seen and walked with the new data, and the runs after it with
/// only new parameters replay. In f32 a change that rounds to the recorded f32 keeps the replay.
#[test]
fn a_changed_element_of_long_data_is_walked() {
    for precision in [Precision::F64, Precision::F32] {
        const B: usize = 45;
        let src = "(* a (+ x (ref m 1 0) (ref m 4 4)))";
        let x0: Vec<f64> = (0..B).map(|l| l as f64 * 0.25).collect();
        let m0: Vec<f64> = (0..25).map(|e| 1.0 + e as f64).collect();
        let run = |a: f64, x: &[f64], m: &[f64]| {
            Inputs::new()
                .param_lanes("a", (0..B).map(|l| a + l as f64).collect())
                .input_lanes("x", x.to_vec())
                .matrix("m", 5, 5, m.to_vec())
        };
        let with = |xs: &[f64], i: usize, v: f64| {
            let mut xs = xs.to_vec();
            xs[i] = v;
            xs
        };
        let (x1, x2, x3) = (with(&x0, 3, 7.0), with(&x0, 20, -1.0), with(&x0, 40, 2.5));
        let x4 = with(&x0, 0, -0.0);
        let (m1, m2) = (with(&m0, 2, 0.5), with(&m0, 24, 9.0));
        // 1 + 2^-40 rounds to 1 in f32, not in f64.
        let x5 = with(&x0, 4, 1.0 + f64::powi(2.0, -40));
        let seq = [
            run(1.0, &x0, &m0),
            run(2.0, &x0, &m0),
            run(2.0, &x1, &m0),
            run(3.0, &x1, &m0),
            run(3.0, &x2, &m0),
            run(4.0, &x2, &m0),
            run(4.0, &x3, &m0),
            run(5.0, &x3, &m0),
            run(5.0, &x4, &m0),
            run(6.0, &x4, &m0),
            run(6.0, &x0, &m1),
            run(7.0, &x0, &m1),
            run(7.0, &x0, &m2),
            run(8.0, &x0, &m2),
            run(8.0, &x5, &m2),
        ];
        let r = check_sequence(
            "long data",
            src,
            opts(Dialect::Default, B).with_precision(precision),
            &seq,
        );
        let f32_same = precision == Precision::F32;
        let mut want = [false, true].repeat(7);
        want.push(f32_same);
        assert_eq!(r, want, "{precision:?}");
    }
}

/// Fault flags over many lanes, walked and replayed, in f64 and f32: a lane whose value is NaN
/// and a lane whose gradient alone is infinite are flagged, every other lane is not.
#[test]
fn faults_of_many_lanes_name_exactly_the_bad_lanes() {
    for precision in [Precision::F64, Precision::F32] {
        const B: usize = 45;
        let mut heap = Heap::new();
        let program = ndvm_frontends::scheme::parse(&mut heap, "(* b (sqrt (+ a x)))").unwrap();
        let mut ev = Evaluator::new(opts(Dialect::Default, B).with_precision(precision));
        let mut x: Vec<f64> = (0..B).map(|l| 1.0 + l as f64).collect();
        // Lane 9: sqrt(0), a finite value whose gradient in `a` is infinite; lane 37: NaN.
        x[9] = -1.0;
        x[37] = -6.0;
        let mut want = vec![false; B];
        want[9] = true;
        want[37] = true;
        for (k, b) in [1.0, 2.0, 3.0].into_iter().enumerate() {
            let inputs = Inputs::new()
                .param("a", 1.0)
                .param("b", b)
                .input_lanes("x", x.clone());
            let e = ev.eval_grad(&mut heap, &program, &inputs).unwrap();
            assert_eq!(ev.last_run_replayed(), k > 0, "{precision:?} run {k}");
            assert_eq!(e.faults, want, "{precision:?} run {k}");
            let ndvm_core::Output::Number(v) = &e.value else {
                panic!("not a number")
            };
            assert_eq!(v[9], 0.0);
            assert!(v[37].is_nan() && v[8].is_finite());
            assert_eq!(e.grads[0].per_lane[9], f64::INFINITY);
            assert_eq!(e.grads[1].per_lane[9], 0.0);
        }
        // No faults at all once every lane is positive.
        let inputs = Inputs::new()
            .param("a", 1.0)
            .param("b", 1.0)
            .input_lanes("x", (0..B).map(|l| 1.0 + l as f64).collect());
        let e = ev.eval_grad(&mut heap, &program, &inputs).unwrap();
        assert_eq!(e.faults, vec![false; B], "{precision:?}");
        // Large finite numbers whose sum over the lanes overflows: still no fault.
        let big = if precision == Precision::F32 {
            3e38
        } else {
            1.7e308
        };
        let program = ndvm_frontends::scheme::parse(&mut heap, "(* b x)").unwrap();
        let inputs = Inputs::new().param("b", 1.0).input_lanes("x", vec![big; B]);
        let e = ev.eval_grad(&mut heap, &program, &inputs).unwrap();
        assert_eq!(e.faults, vec![false; B], "{precision:?}");
    }
}

/// The small tensor products the one-lane replay runs unrolled (2×2 matmul, 2×2 matvec, 2-element
/// dot), with both, one or neither input taking a gradient and one payload as both inputs (which
/// keeps the term loop), replay bit for bit as a walk, at ordinary and special values (signed
/// zeros, infinities, NaN, overflow; every NaN as one).
#[test]
fn small_tensor_products_replay_bit_for_bit_at_one_lane() {
    small_tensor_products_replay_bit_for_bit_at_one_lane_in(Precision::F64);
}

#[test]
fn small_tensor_products_replay_bit_for_bit_at_one_lane_in_f32() {
    small_tensor_products_replay_bit_for_bit_at_one_lane_in(Precision::F32);
}

fn small_tensor_products_replay_bit_for_bit_at_one_lane_in(precision: Precision) {
    let src = "(let* ((A (mat (vec a b) (vec c d)))
                      (B (mat (vec x y) (vec b a)))
                      (W (mat (vec x y) (vec y x)))
                      (v (vec a x))
                      (w (vec y y)))
                 (+ (dot (matvec (matmul A B) v) (matvec A w))
                    (dot (matvec (matmul A A) v) v)
                    (dot w (matvec W v))
                    (dot (matvec (matmul W A) w) (matvec (matmul B W) w))))";
    let specials = [
        0.0,
        -0.0,
        1.0,
        -2.5,
        1e200,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    let mut replays = 0;
    for (k, &(x, y)) in [(0.5, -1.5), (-0.0, 2.0), (1e200, f64::NAN)]
        .iter()
        .enumerate()
    {
        let point = |s: [f64; 4]| {
            ["a", "b", "c", "d"]
                .iter()
                .zip(s)
                .fold(Inputs::new(), |acc, (n, v)| acc.param(n, v))
                .input("x", x)
                .input("y", y)
        };
        let mut seq = vec![
            point([0.3, -0.7, 1.1, 0.2]),
            point([0.31, -0.71, 1.09, 0.21]),
        ];
        for (i, &s) in specials.iter().enumerate() {
            let t = specials[(i * 3 + 1) % specials.len()];
            seq.push(point([s, 0.4, t, -0.9]));
            seq.push(point([-1.2, s, 0.5, t]));
        }
        let r = check_sequence_as(
            &format!("small products ({precision:?}), data #{k}"),
            src,
            opts(Dialect::Default, 1).with_precision(precision),
            &seq,
            nan_as_one,
        );
        replays += r.iter().filter(|&&x| x).count();
    }
    assert!(replays >= 30, "only {replays} runs replayed");
}
