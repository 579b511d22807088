//! Lane decomposition: a batch of B lanes equals B separate one-lane runs, bit for bit, in values,
//! gradients and fault flags, in `f64` and in `f32` lanes, for every oracle and corpus program and for purpose-built programs whose
//! branches and loop trip counts diverge per lane.

mod common;

use common::{MatrixInput, lane_bits, opts, run};
use ndvm_core::{Dialect, Evaluation, Inputs, Precision};

/// Lanes per batch (STYLE 21: switch this one constant to run the suite at another width).
const LANES: usize = 7;

/// One program with per-lane bindings.
struct LaneCase {
    name: String,
    src: String,
    dialect: Dialect,
    /// Differentiable bindings, one value per lane.
    params: Vec<(String, Vec<f64>)>,
    /// Non-differentiated bindings, one value per lane.
    inputs: Vec<(String, Vec<f64>)>,
    matrix: Option<MatrixInput>,
}

impl LaneCase {
    fn new(name: &str, src: &str, dialect: Dialect) -> Self {
        LaneCase {
            name: name.into(),
            src: src.into(),
            dialect,
            params: vec![],
            inputs: vec![],
            matrix: None,
        }
    }

    fn param(mut self, name: &str, per_lane: &[f64]) -> Self {
        assert_eq!(
            per_lane.len(),
            LANES,
            "{}: {name} needs one value per lane",
            self.name
        );
        self.params.push((name.into(), per_lane.to_vec()));
        self
    }

    fn input(mut self, name: &str, per_lane: &[f64]) -> Self {
        assert_eq!(
            per_lane.len(),
            LANES,
            "{}: {name} needs one value per lane",
            self.name
        );
        self.inputs.push((name.into(), per_lane.to_vec()));
        self
    }

    fn batch_inputs(&self) -> Inputs {
        let mut inputs = Inputs::new();
        for (n, v) in &self.params {
            inputs = inputs.param_lanes(n, v.clone());
        }
        for (n, v) in &self.inputs {
            inputs = inputs.input_lanes(n, v.clone());
        }
        self.with_matrix(inputs)
    }

    fn lane_inputs(&self, lane: usize) -> Inputs {
        let mut inputs = Inputs::new();
        for (n, v) in &self.params {
            inputs = inputs.param(n, v[lane]);
        }
        for (n, v) in &self.inputs {
            inputs = inputs.input(n, v[lane]);
        }
        self.with_matrix(inputs)
    }

    fn with_matrix(&self, inputs: Inputs) -> Inputs {
        match &self.matrix {
            Some(m) => inputs.matrix(&m.name, m.rows, m.cols, m.data.clone()),
            None => inputs,
        }
    }
}

/// Deterministic per-lane perturbation of a base value: lane 3 is the base point.
fn spread(v: f64) -> Vec<f64> {
    (0..LANES)
        .map(|lane| v * (1.0 + 0.05 * (lane as f64 - 3.0)))
        .collect()
}

/// Runs the batch with gradients and each lane alone; returns the batch evaluation when every lane
/// matches bit for bit, or one line per disagreement.
fn check_lanes(case: &LaneCase, precision: Precision) -> Result<Evaluation, Vec<String>> {
    let batch = run(
        &case.src,
        opts(case.dialect, LANES).with_precision(precision),
        &case.batch_inputs(),
        true,
    )
    .map_err(|e| {
        vec![format!(
            "{} ({precision:?}): batch of {LANES} failed: {e}",
            case.name
        )]
    })?;
    let mut bad = Vec::new();
    if batch.faults.len() != LANES {
        bad.push(format!(
            "{}: {} fault flags for {LANES} lanes",
            case.name,
            batch.faults.len()
        ));
    }
    for lane in 0..LANES {
        match run(
            &case.src,
            opts(case.dialect, 1).with_precision(precision),
            &case.lane_inputs(lane),
            true,
        ) {
            Ok(single) => {
                let (b, s) = (lane_bits(&batch, lane), lane_bits(&single, 0));
                if b != s {
                    bad.push(format!(
                        "{} ({precision:?}): lane {lane}: batch {b:?} != alone {s:?}",
                        case.name
                    ));
                }
            }
            Err(e) => bad.push(format!(
                "{}: lane {lane} alone failed ({e}) but the batch succeeded",
                case.name
            )),
        }
    }
    if bad.is_empty() { Ok(batch) } else { Err(bad) }
}

/// Checks every case in both precisions; returns the `f64` batch evaluations.
fn assert_all_match(cases: &[LaneCase]) -> Vec<Evaluation> {
    let mut failures = Vec::new();
    let mut evals = Vec::new();
    for case in cases {
        match check_lanes(case, Precision::F64) {
            Ok(e) => evals.push(e),
            Err(lines) => failures.extend(lines),
        }
        if let Err(lines) = check_lanes(case, Precision::F32) {
            failures.extend(lines);
        }
    }
    assert!(
        failures.is_empty(),
        "{} lane-decomposition failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    evals
}

#[test]
fn oracle_programs_batch_equals_single_lane_runs() {
    let cases: Vec<LaneCase> = common::oracle_programs()
        .iter()
        .map(|p| {
            let mut case = LaneCase::new(&p.name, &p.src, Dialect::Reference);
            for (n, v) in &p.scalars {
                case = case.param(n, &spread(*v));
            }
            case.matrix = p.matrix.clone();
            case
        })
        .collect();
    assert_eq!(cases.len(), 34);
    assert_all_match(&cases);
}

#[test]
fn corpus_programs_batch_equals_single_lane_runs() {
    let cases: Vec<LaneCase> = common::fuzz_corpus()
        .iter()
        .map(|p| {
            let mut case = LaneCase::new(&format!("fuzz #{}", p.id), &p.src, Dialect::Default);
            for (n, v) in &p.params {
                case = case.param(n, &spread(*v));
            }
            case
        })
        .collect();
    assert_eq!(cases.len(), 200);
    assert_all_match(&cases);
}

const A7: [f64; LANES] = [1.5, 1.6, 1.7, 1.8, 1.9, 2.0, 2.1];

/// Purpose-built divergence: per-lane branches, three-way `cond`, per-lane loop trip counts, dead
/// lanes with non-finite arms, nested control, and matrices (with a singular one) in branches.
fn divergent_cases() -> Vec<LaneCase> {
    let d = Dialect::Default;
    vec![
        LaneCase::new("two-way if", "(if (< x 1.0) (* a x) (/ a x))", d)
            .param("x", &[0.5, 0.9, 0.99, 1.0, 1.01, 2.0, 3.0])
            .param("a", &A7),
        LaneCase::new(
            "three-way cond",
            "(cond ((< x 0.0) (* a (- x))) ((< x 1.0) (* a (* x x))) (else (+ a (sqrt x))))",
            d,
        )
        .param("x", &[-2.0, -0.5, 0.0, 0.5, 0.99, 1.0, 4.0])
        .param("a", &A7),
        LaneCase::new(
            "newton sqrt, per-lane trip count",
            "(loop ((g 1.0) (i 0)) (if (or (< (abs (- (* g g) x)) 1e-12) (> i 60)) g (recur (* 0.5 (+ g (/ x g))) (+ i 1))))",
            d,
        )
        .param("x", &[0.25, 2.0, 3.0, 9.0, 100.0, 1e4, 0.01]),
        LaneCase::new(
            "counted sum, per-lane n",
            "(loop ((i 0) (s 0.0)) (if (< i n) (recur (+ i 1) (+ s (* a i))) s))",
            d,
        )
        .input("n", &[0.0, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0])
        .param("a", &A7),
        LaneCase::new("dead lanes: log of negatives in the untaken arm", "(if (> x 0.0) (* a (log x)) 0.0)", d)
            .param("x", &[-1.0, -0.5, 0.5, 1.0, 2.0, -3.0, 4.0])
            .param("a", &A7),
        LaneCase::new("dead lanes: division by zero in the untaken arm", "(if (= x 0.0) a (/ a x))", d)
            .param("x", &[0.0, 0.5, 0.0, -2.0, 3.0, 0.0, 1.0])
            .param("a", &A7),
        LaneCase::new("short-circuit and guards log", "(if (and (> x 0.0) (< (log x) 1.0)) (* a x) a)", d)
            .param("x", &[-1.0, 0.5, 2.0, 3.0, 0.0, -0.1, 10.0])
            .param("a", &A7),
        LaneCase::new(
            "nested ifs",
            "(if (< x 0.0) (if (< x -1.0) (* x x) (- x)) (if (< x 1.0) (* 2.0 x) (exp x)))",
            d,
        )
        .param("x", &[-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0]),
        LaneCase::new(
            "loops inside branches",
            "(if (< x 1.0) (loop ((i 0) (s x)) (if (< i 3) (recur (+ i 1) (* s x)) s)) (loop ((i 0) (s 1.0)) (if (< s 10.0) (recur (+ i 1) (* s x)) (+ s i))))",
            d,
        )
        .param("x", &[0.3, 0.9, 1.1, 1.5, 2.0, 3.5, 11.0]),
        LaneCase::new(
            "branches inside a loop",
            "(loop ((i 0) (s 0.0)) (if (= i 6) s (recur (+ i 1) (if (< (sin (* x i)) 0.0) (- s x) (+ s (* x x))))))",
            d,
        )
        .param("x", &[0.3, 0.7, 1.1, 1.9, 2.5, 3.3, 4.4]),
        LaneCase::new(
            "matrices in branches, singular inv only in a dead lane",
            "(if (> x 1.5) (logdet (inv (mat (vec x 1.0) (vec 1.0 1.0)))) (vsum (matvec (mat (vec 1.0 x) (vec 0.0 1.0)) (vec a x))))",
            d,
        )
        .param("x", &[1.0, 2.0, 1.0, 3.0, 0.5, 1.6, 1.0])
        .param("a", &A7),
        LaneCase::new(
            "recursion depth per lane",
            "(define (f n acc) (if (<= n 0.0) acc (f (- n 1.0) (* acc x)))) (f n 1.0)",
            d,
        )
        .input("n", &[0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 9.0])
        .param("x", &[1.1, 0.9, 1.2, 0.8, 1.3, 0.7, 1.05]),
        // A branch's value that is also read directly: its adjoint terms must reach it one by
        // one, in the order a lane alone accumulates them (fuzz/regressions/lanes-merge-order-*).
        LaneCase::new(
            "merged value also read directly",
            "(let ((w (if (< x 1.0) x a))) (+ (* w (* x w)) (tanh (* 3.0 (+ x x))) w))",
            d,
        )
        .param("x", &[0.3, 0.7, 1.1, 1.9, 0.99, 3.3, 0.1])
        .param("a", &A7),
        LaneCase::new(
            "merged matrix entries and set! under divergence",
            "(let ((v x)) (unless (<= 0.95 v) (set! v a)) (det (matmul (mat (vec x v a) (vec v x x) (vec a 0.5 v)) (mat (vec x x v) (vec 0.25 v x) (vec v a 1.5)))))",
            d,
        )
        .param("x", &[-1.1, 1.08, 0.2, 0.97, -0.3, 2.0, 0.5])
        .param("a", &A7),
        LaneCase::new("reference dialect: 0 is false", "(if (- x 1.0) (* a x) a)", Dialect::Reference)
            .param("x", &[1.0, 2.0, 1.0, 0.5, 1.0, 3.0, 0.0])
            .param("a", &A7),
    ]
}

#[test]
fn divergent_programs_batch_equals_single_lane_runs_and_known_answers() {
    let cases = divergent_cases();
    let evals = assert_all_match(&cases);
    let find = |name: &str| -> (&LaneCase, &Evaluation) {
        let i = cases
            .iter()
            .position(|c| c.name.starts_with(name))
            .expect("case");
        (&cases[i], &evals[i])
    };
    // Known answers (by hand): Newton stops with |g² − x| < 1e-12, so |g − √x| < 1e-12/√x; d/dx of
    // the converged iterate is 1/(2√x).
    let (case, e) = find("newton");
    for (lane, x) in case.params[0].1.iter().enumerate() {
        let g = e.value.number(lane).unwrap();
        common::assert_close(
            g,
            x.sqrt(),
            1e-12 / x.sqrt(),
            1e-15,
            &format!("newton lane {lane}"),
        );
        common::assert_close(
            e.grad("x").unwrap()[lane],
            0.5 / x.sqrt(),
            1e-9,
            1e-9,
            &format!("newton d/dx lane {lane}"),
        );
    }
    // s = a·n(n−1)/2 and ds/da = n(n−1)/2 (by hand).
    let (case, e) = find("counted sum");
    for lane in 0..LANES {
        let (n, a) = (case.inputs[0].1[lane], case.params[0].1[lane]);
        let tri = n * (n - 1.0) / 2.0;
        common::assert_close(
            e.value.number(lane).unwrap(),
            a * tri,
            0.0,
            1e-15,
            &format!("sum lane {lane}"),
        );
        common::assert_close(
            e.grad("a").unwrap()[lane],
            tri,
            0.0,
            1e-15,
            &format!("sum d/da lane {lane}"),
        );
    }
    // Dead lanes never run log of a negative: values 0, zero gradients, no faults anywhere; live
    // lanes have a·ln x with d/dx = a/x and d/da = ln x.
    for name in [
        "dead lanes: log",
        "dead lanes: division",
        "short-circuit",
        "matrices in branches",
    ] {
        let (case, e) = find(name);
        assert_eq!(e.faults, vec![false; LANES], "{}: fault flags", case.name);
        for g in &e.grads {
            assert!(
                g.per_lane.iter().all(|x| x.is_finite()),
                "{}: d/d{} = {:?}",
                case.name,
                g.name,
                g.per_lane
            );
        }
    }
    let (case, e) = find("dead lanes: log");
    for lane in 0..LANES {
        let (x, a) = (case.params[0].1[lane], case.params[1].1[lane]);
        let (v, dx, da) = if x > 0.0 {
            (a * x.ln(), a / x, x.ln())
        } else {
            (0.0, 0.0, 0.0)
        };
        common::assert_close(
            e.value.number(lane).unwrap(),
            v,
            0.0,
            1e-15,
            &format!("log value lane {lane}"),
        );
        common::assert_close(
            e.grad("x").unwrap()[lane],
            dx,
            0.0,
            1e-15,
            &format!("log d/dx lane {lane}"),
        );
        common::assert_close(
            e.grad("a").unwrap()[lane],
            da,
            0.0,
            1e-15,
            &format!("log d/da lane {lane}"),
        );
    }
}

/// `set!` under divergent control: lanes off the assigning path keep the old value (a select), in
/// branches, in a `do` loop whose lanes finish at different iterations, and through a closure's
/// captured variable; B lanes equal B one-lane runs, and the values and gradients are the known ones.
#[test]
fn set_under_divergence_keeps_the_untaken_lanes_value() {
    let d = Dialect::Default;
    let xs = [0.5, 0.9, 1.0, 1.5, 2.0, 2.5, 3.0];
    let ns = [0.0, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0];
    let cases = vec![
        LaneCase::new(
            "set! in both arms, then in a when",
            "(let ((y (* a x))) (if (< x 1.0) (set! y (* y y)) (set! y (+ y a))) (when (> x 2.0) (set! y (exp y))) y)",
            d,
        )
        .param("x", &xs)
        .param("a", &A7),
        LaneCase::new(
            "do loop with per-lane trips assigns an outer accumulator",
            "(let ((s 0.0)) (do ((i 0 (+ i 1))) ((>= i n) s) (set! s (+ s (* a i)))))",
            d,
        )
        .input("n", &ns)
        .param("a", &A7),
        LaneCase::new(
            "a closure's captured variable assigned on some lanes",
            "(define c 0.0) (define (bump! v) (set! c (+ c v))) (if (> x 1.0) (bump! (* a x)) (bump! a)) (bump! 1.0) c",
            d,
        )
        .param("x", &xs)
        .param("a", &A7),
    ];
    let evals = assert_all_match(&cases);
    for lane in 0..LANES {
        let (x, a, n) = (xs[lane], A7[lane], ns[lane]);
        let (y, dy) = if x < 1.0 {
            (a * a * x * x, 2.0 * a * x * x)
        } else if x > 2.0 {
            ((a * x + a).exp(), (x + 1.0) * (a * x + a).exp())
        } else {
            (a * x + a, x + 1.0)
        };
        let tri = n * (n - 1.0) / 2.0;
        let (c, dc) = if x > 1.0 {
            (a * x + 1.0, x)
        } else {
            (a + 1.0, 1.0)
        };
        for (e, (v, g), what) in [
            (&evals[0], (y, dy), "branches"),
            (&evals[1], (a * tri, tri), "do"),
            (&evals[2], (c, dc), "closure"),
        ] {
            let ctx = format!("{what} lane {lane}");
            common::assert_close(e.value.number(lane).unwrap(), v, 0.0, 1e-14, &ctx);
            common::assert_close(e.grad("a").unwrap()[lane], g, 0.0, 1e-14, &ctx);
        }
    }
}
