//! Reusing an evaluator never changes results: arenas keep their capacity between runs without
//! being cleared, so a run after a run that left NaN everywhere must still equal a fresh run, bit
//! for bit (a lane that reads a value it did not write would show up here). Lanes lent through a
//! `ValueSource` (per lane, vectors, matrices) give the owned inputs' results, on walks and replays.

use ndvm_core::{
    Dialect, EvalOptions, Evaluation, Evaluator, Heap, InputValue, Inputs, Lent, ValueSource,
};

mod common;

/// Fills every arena with NaN: many payloads and adjoints, all lanes, under divergence.
const POISON: &str = "(loop ((i 0) (s (vec x x x x))) \
    (if (< i 60) (recur (+ i 1) (if (> x 0.5) (scale (/ 0.0 0.0) s) (+ s (/ 1.0 0.0)))) (vsum s)))";

const DIVERGENT: [&str; 6] = [
    "(if (< x 0.6) (* a x) (/ a x))",
    "(cond ((< x 0.3) (sin (* a x))) ((< x 0.7) (exp (- a x))) (else (sqrt (* a x))))",
    "(loop ((i 0) (s 0.0)) (if (< i (* 10 x)) (recur (+ i 1) (+ s (* a i))) s))",
    "(loop ((g x) (k 0)) (if (or (< (abs (- (* g g) x)) 1e-12) (> k 60)) (* a g) (recur (* 0.5 (+ g (/ x g))) (+ k 1))))",
    "(let ((m (if (> x 0.5) (mat (vec a x) (vec x 1.0)) (mat (vec 1.0 a) (vec a x))))) (+ (logdet m) (trace (inv m))))",
    "(define (f y n) (if (= n 0) y (f (+ (* a y) x) (- n 1)))) (if (> x 0.4) (f x 5) (f a 3))",
];

fn run(ev: &mut Evaluator, src: &str, inputs: &Inputs) -> Evaluation {
    let mut heap = Heap::new();
    let program = ndvm_frontends::scheme::parse(&mut heap, src).expect("parses");
    let mut out = Evaluation::empty();
    ev.eval_into(&mut heap, &program, inputs, true, &mut out)
        .expect("runs");
    out
}

fn bits(e: &Evaluation) -> Vec<u64> {
    let mut out: Vec<u64> = match &e.value {
        ndvm_core::Output::Number(v) => v.iter().map(|x| x.to_bits()).collect(),
        other => panic!("number expected, got {other:?}"),
    };
    for g in &e.grads {
        out.extend(g.per_lane.iter().map(|x| x.to_bits()));
    }
    out
}

#[test]
fn a_reused_evaluator_equals_a_fresh_one_bit_for_bit() {
    let n = 9;
    let x: Vec<f64> = (0..n).map(|l| 0.05 + 0.11 * l as f64).collect();
    let a: Vec<f64> = (0..n).map(|l| 0.9 + 0.07 * l as f64).collect();
    let inputs = Inputs::new().param_lanes("a", a).input_lanes("x", x);
    let mut reused = Evaluator::new(EvalOptions::new(n).with_dialect(Dialect::Default));
    for src in DIVERGENT {
        let fresh = bits(&run(&mut Evaluator::new(EvalOptions::new(n)), src, &inputs));
        run(&mut reused, POISON, &inputs);
        assert_eq!(bits(&run(&mut reused, src, &inputs)), fresh, "{src}");
    }
    // The oracle programs too, after poisoning.
    for p in common::oracle_programs() {
        if p.error.is_some() {
            continue;
        }
        let inputs = p.inputs();
        let mut fresh_ev = Evaluator::new(EvalOptions::new(1).with_dialect(Dialect::Reference));
        let fresh = run(&mut fresh_ev, &p.src, &inputs);
        let mut ev = Evaluator::new(EvalOptions::new(1).with_dialect(Dialect::Reference));
        run(&mut ev, POISON, &Inputs::new().input("x", 0.7));
        let again = run(&mut ev, &p.src, &inputs);
        assert_eq!(
            format!("{:?}", again.value),
            format!("{:?}", fresh.value),
            "{}",
            p.name
        );
        assert_eq!(again.grads, fresh.grads, "{}", p.name);
    }
}

/// Issue 11: a program run with a heap other than the one it was read into indexed that heap out
/// of bounds (a panic) or, on a heap as large, decoded other cells. The program carries its heap's
/// identity; every entry point refuses a foreign heap with `ForeignProgram`, and the evaluator,
/// the heap and the program stay usable.
#[test]
fn issue_11_a_program_with_another_heap_is_an_error() {
    use ndvm_core::{ErrorKind, params, print};
    let src = "(params (a free 2.0)) (define (f y) (* a y)) (f (+ x 1))";
    let mut heap = Heap::new();
    let program = ndvm_frontends::scheme::parse(&mut heap, src).expect("parses");
    let mut small = Heap::new();
    // The same text on another heap: same cell ids, another heap.
    let mut twin = Heap::new();
    let twin_program = ndvm_frontends::scheme::parse(&mut twin, src).expect("parses");
    assert_eq!(twin_program.forms(), program.forms());
    let mut clone = heap.clone();
    let inputs = Inputs::new().param("a", 2.0).input("x", 1.5);
    let mut ev = Evaluator::new(EvalOptions::new(1));
    for other in [&mut small, &mut twin, &mut clone] {
        let err = ev.eval_grad(other, &program, &inputs).unwrap_err();
        assert_eq!(err.kind, ErrorKind::ForeignProgram, "{err}");
        assert_eq!(err.kind.code(), "E015");
        assert_eq!(
            err.to_string(),
            "program from another heap: run it with the heap it was read into, or read it again \
             into this one"
        );
        assert_eq!(
            params::declarations(other, &program).unwrap_err().kind,
            ErrorKind::ForeignProgram
        );
        assert_eq!(
            print::program_to_string(other, &program).unwrap_err().kind,
            ErrorKind::ForeignProgram
        );
    }
    // Known answer: a (x + 1) = 2 · 2.5 = 5, d/da = 2.5.
    let e = ev.eval_grad(&mut heap, &program, &inputs).expect("runs");
    assert_eq!(e.value, ndvm_core::Output::Number(vec![5.0]));
    assert_eq!(e.grad("a"), Some(&[2.5][..]));
    let e = ev
        .eval_grad(&mut twin, &twin_program, &inputs)
        .expect("runs");
    assert_eq!(e.value, ndvm_core::Output::Number(vec![5.0]));
    // A program built by hand from cells the heap does not hold is refused too.
    let forged = ndvm_core::Program::new(&small, vec![ndvm_core::NodeId(1_000)]);
    let err = ev.eval(&mut small, &forged, &inputs).unwrap_err();
    assert_eq!(err.kind, ErrorKind::ForeignProgram, "{err}");
    assert_eq!(
        err.message,
        "form #1000 is not a cell of this heap (3 cells)"
    );
}

/// A [`ValueSource`] over a vector the test can change between runs, counting its reads.
struct Shared {
    values: std::sync::Mutex<Vec<f64>>,
    reads: std::sync::atomic::AtomicUsize,
}

impl ValueSource for Shared {
    fn count(&self) -> usize {
        self.values.lock().unwrap().len()
    }

    fn read(&self, f: &mut dyn FnMut(&[f64])) {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        f(&self.values.lock().unwrap())
    }
}

fn shared(values: Vec<f64>) -> std::sync::Arc<Shared> {
    std::sync::Arc::new(Shared {
        values: std::sync::Mutex::new(values),
        reads: std::sync::atomic::AtomicUsize::new(0),
    })
}

/// Lent inputs (`InputValue::Lent*`, how the Python binding passes numpy arrays) give the owned
/// lanes' values and gradients bit for bit, on the first walk, on the replays that follow, and
/// after the lent values change (a replay compares them with what it recorded).
#[test]
fn lent_inputs_equal_owned_inputs_on_walks_and_replays() {
    let n = 9;
    let x0: Vec<f64> = (0..n).map(|l| 0.05 + 0.11 * l as f64).collect();
    let a0: Vec<f64> = (0..n).map(|l| 0.9 + 0.07 * l as f64).collect();
    for src in DIVERGENT {
        let (x, a) = (shared(x0.clone()), shared(a0.clone()));
        let lent = {
            let mut i = Inputs::new();
            i.push("a", InputValue::Lent(Lent(a.clone())), true);
            i.push("x", InputValue::Lent(Lent(x.clone())), false);
            i
        };
        let mut heap = Heap::new();
        let program = ndvm_frontends::scheme::parse(&mut heap, src).expect("parses");
        let (mut owned_ev, mut lent_ev) = (
            Evaluator::new(EvalOptions::new(n)),
            Evaluator::new(EvalOptions::new(n)),
        );
        for round in 0..4 {
            // Rounds 2 and 3: new values in both lent vectors (3: the same as 2, a replay).
            if round == 2 {
                x.values.lock().unwrap().iter_mut().for_each(|v| *v *= 1.5);
                a.values.lock().unwrap().iter_mut().for_each(|v| *v -= 0.25);
            }
            let owned = Inputs::new()
                .param_lanes("a", a.values.lock().unwrap().clone())
                .input_lanes("x", x.values.lock().unwrap().clone());
            let want = owned_ev.eval_grad(&mut heap, &program, &owned).unwrap();
            let got = lent_ev.eval_grad(&mut heap, &program, &lent).unwrap();
            assert_eq!(bits(&got), bits(&want), "{src}, round {round}");
        }
        assert!(
            x.reads.load(std::sync::atomic::Ordering::SeqCst) >= 4,
            "{src}"
        );
    }
    // Lent vectors and matrices (shared by every lane) likewise, and a changed one is seen.
    let (v, m) = (
        shared(vec![1.0, 2.0, 3.0]),
        shared(vec![0.5, 1.0, -2.0, 4.0]),
    );
    let mut lent = Inputs::new().param("a", 1.5).input_lanes("x", x0.clone());
    lent.push("v", InputValue::LentVector(Lent(v.clone())), false);
    let matrix = InputValue::LentMatrix {
        rows: 2,
        cols: 2,
        data: Lent(m.clone()),
    };
    lent.push("m", matrix, false);
    let src = "(+ (* a (vsum v) x) (trace m) (det m))";
    let mut heap = Heap::new();
    let program = ndvm_frontends::scheme::parse(&mut heap, src).expect("parses");
    let (mut owned_ev, mut lent_ev) = (
        Evaluator::new(EvalOptions::new(n)),
        Evaluator::new(EvalOptions::new(n)),
    );
    for round in 0..4 {
        if round == 2 {
            v.values.lock().unwrap()[1] = -7.0;
            m.values.lock().unwrap()[3] = 0.25;
        }
        let mut owned = Inputs::new().param("a", 1.5).input_lanes("x", x0.clone());
        owned.push(
            "v",
            InputValue::Vector(v.values.lock().unwrap().clone()),
            false,
        );
        let data = m.values.lock().unwrap().clone();
        owned.push(
            "m",
            InputValue::Matrix {
                rows: 2,
                cols: 2,
                data,
            },
            false,
        );
        let want = owned_ev.eval_grad(&mut heap, &program, &owned).unwrap();
        let got = lent_ev.eval_grad(&mut heap, &program, &lent).unwrap();
        assert_eq!(bits(&got), bits(&want), "round {round}");
    }
    // A source whose length is not the lane count is the caller's error, as owned lanes are.
    let mut short = Inputs::new().param("a", 1.0);
    short.push("x", InputValue::Lent(Lent(shared(vec![1.0; 3]))), false);
    let mut heap = Heap::new();
    let program = ndvm_frontends::scheme::parse(&mut heap, "(* a x)").unwrap();
    let err = Evaluator::new(EvalOptions::new(n))
        .eval(&mut heap, &program, &short)
        .unwrap_err();
    assert_eq!(err.kind, ndvm_core::ErrorKind::Input);
    assert!(err.message.contains("3 values for 9 lanes"), "{err}");
}

/// `Grouped` parameters (one value per run of lanes) and `Cycled` data (the same values over and
/// over) give the expanded per-lane inputs' bits, f64 and f32, on walks and replays; a cycled
/// value that changes anywhere is seen (the run walks and matches), and so is a cycled input
/// replayed after a recording from plain lanes; lengths that do not fit are errors.
#[test]
fn grouped_and_cycled_inputs_equal_their_expanded_lanes() {
    let (starts, points) = (3, 4);
    let n = starts * points;
    let x0: Vec<f64> = (0..points).map(|l| 0.05 + 0.21 * l as f64).collect();
    let expand = |a: &[f64], x: &[f64]| {
        let lanes_a: Vec<f64> = (0..n).map(|l| a[l / points]).collect();
        let lanes_x: Vec<f64> = (0..n).map(|l| x[l % points]).collect();
        Inputs::new()
            .param_lanes("a", lanes_a)
            .input_lanes("x", lanes_x)
    };
    let packed = |a: &[f64], x: &[f64]| {
        let mut i = Inputs::new();
        let a = InputValue::Grouped {
            values: a.to_vec(),
            group: points,
        };
        i.push("a", a, true);
        i.push("x", InputValue::Cycled(x.to_vec()), false);
        i
    };
    for precision in [ndvm_core::Precision::F64, ndvm_core::Precision::F32] {
        for src in DIVERGENT {
            let mut heap = Heap::new();
            let program = ndvm_frontends::scheme::parse(&mut heap, src).expect("parses");
            let opts = EvalOptions::new(n).with_precision(precision);
            let (mut plain_ev, mut packed_ev) =
                (Evaluator::new(opts.clone()), Evaluator::new(opts));
            let mut x = x0.clone();
            for round in 0..6 {
                let a: Vec<f64> = (0..starts)
                    .map(|k| 0.9 + 0.07 * k as f64 + 0.01 * round as f64)
                    .collect();
                if round == 3 {
                    // A data value changes in the middle of the cycle.
                    x[2] += 0.125;
                }
                let want = plain_ev.eval_grad(&mut heap, &program, &expand(&a, &x));
                let got = packed_ev.eval_grad(&mut heap, &program, &packed(&a, &x));
                let (want, got) = (want.expect("runs"), got.expect("runs"));
                assert_eq!(
                    bits(&got),
                    bits(&want),
                    "{src}, {precision:?}, round {round}"
                );
                if round == 4 || round == 5 {
                    assert!(packed_ev.last_run_replayed(), "{src}, round {round}");
                }
                if round == 3 {
                    assert!(
                        !packed_ev.last_run_replayed(),
                        "{src}: changed data replayed"
                    );
                }
            }
            // Recorded from plain lanes, then the same values cycled: compared, replayed, equal.
            let a = [1.1, 0.8, 1.3];
            let want = plain_ev
                .eval_grad(&mut heap, &program, &expand(&a, &x))
                .unwrap();
            let got = plain_ev
                .eval_grad(&mut heap, &program, &packed(&a, &x))
                .unwrap();
            assert!(
                plain_ev.last_run_replayed(),
                "{src}: the same lanes cycled walked"
            );
            assert_eq!(bits(&got), bits(&want), "{src}");
            // And a cycle that differs from the recorded plain lanes past its first period.
            let mut lanes_x: Vec<f64> = (0..n).map(|l| x[l % points]).collect();
            lanes_x[n - 1] += 1.0;
            let shifted = Inputs::new()
                .param_lanes("a", (0..n).map(|l| a[l / points]).collect())
                .input_lanes("x", lanes_x);
            plain_ev.eval_grad(&mut heap, &program, &shifted).unwrap();
            let got = plain_ev
                .eval_grad(&mut heap, &program, &packed(&a, &x))
                .unwrap();
            assert!(
                !plain_ev.last_run_replayed(),
                "{src}: a different recording replayed"
            );
            assert_eq!(bits(&got), bits(&want), "{src}");
        }
    }
    // Sizes that do not fit the lanes.
    let mut heap = Heap::new();
    let program = ndvm_frontends::scheme::parse(&mut heap, "(* a x)").expect("parses");
    let mut ev = Evaluator::new(EvalOptions::new(n));
    // A grouped input that is not differentiated: compared group by group.
    for (round, g) in [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0, 2.5, 3.0]]
        .into_iter()
        .enumerate()
    {
        let mut i = Inputs::new().param("a", 2.0);
        i.push(
            "x",
            InputValue::Grouped {
                values: g.to_vec(),
                group: points,
            },
            false,
        );
        let e = ev.eval_grad(&mut heap, &program, &i).unwrap();
        let want: Vec<f64> = (0..n).map(|l| 2.0 * g[l / points]).collect();
        assert_eq!(e.value, ndvm_core::Output::Number(want), "round {round}");
        assert_eq!(ev.last_run_replayed(), round == 1, "round {round}");
    }
    for (a, group, x) in [
        (vec![1.0; 3], 5, x0.clone()),
        (vec![1.0; 3], 4, vec![1.0; 5]),
    ] {
        let mut i = Inputs::new();
        i.push("a", InputValue::Grouped { values: a, group }, true);
        i.push("x", InputValue::Cycled(x), false);
        let e = ev.eval_grad(&mut heap, &program, &i).unwrap_err();
        assert!(e.to_string().contains("lanes"), "{e}");
    }
}
