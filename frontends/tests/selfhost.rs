//! The self-hosted evaluator (`bootstrap/evaluator.scm`) against direct evaluation: value and
//! gradients of every oracle program, every fuzz-corpus program, every expressible data-driven
//! case of `tests/data/eval/` and a seeded sample of the candidate stream agree to 1e-9 relative;
//! the programs it cannot express are listed with the reason and must keep failing; batched lanes
//! equal one-lane runs bit for bit, and trace replay through it equals a fresh walk bit for bit.

mod common;

use std::path::Path;

use common::{fuzz_corpus, lane_bits, opts, oracle_programs, read_testdata};
use ndvm_core::{Dialect, EvalOptions, Evaluation, Evaluator, Heap, InputValue, Inputs, Output};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Relative tolerance of the agreement (with an absolute floor for values that are 0).
const RTOL: f64 = 1e-9;
const ATOL: f64 = 1e-15;

/// The prefix of the names the evaluator's refusals report as unbound.
const REFUSAL: &str = "self-hosted-evaluator-cannot-express:";

/// The evaluator's source; a missing file fails loudly with its path.
fn evaluator_src() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bootstrap/evaluator.scm");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// `src` read onto a fresh heap, direct or wrapped for the self-hosted evaluator.
fn program(src: &str, via: Option<&str>, inputs: &Inputs) -> (Heap, ndvm_core::Program) {
    let mut heap = Heap::new();
    let prog = ndvm_frontends::scheme::parse(&mut heap, src).expect("program parses");
    let Some(ev) = via else {
        return (heap, prog);
    };
    let ev = ndvm_frontends::scheme::parse(&mut heap, ev).expect("evaluator parses");
    let names: Vec<&str> = inputs.entries.iter().map(|i| i.name.as_str()).collect();
    let wrapped = ndvm_core::selfhost::via(&mut heap, &ev, &prog, &names).expect("via");
    (heap, wrapped)
}

/// Evaluates `src` with gradients, directly or through the evaluator; an error as `E00N message`.
fn run(
    src: &str,
    via: Option<&str>,
    o: EvalOptions,
    inputs: &Inputs,
) -> Result<Evaluation, String> {
    let (mut heap, prog) = program(src, via, inputs);
    Evaluator::new(o)
        .eval_grad(&mut heap, &prog, inputs)
        .map_err(|e| format!("{} {}", e.kind.code(), e.message))
}

fn close(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits()
        || (a.is_nan() && b.is_nan())
        || (a - b).abs() <= ATOL + RTOL * a.abs().max(b.abs())
}

fn all_close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| close(*x, *y))
}

/// Why `via` differs from `direct` (values, gradients, faults), or `None` when they agree.
fn disagreement(direct: &Evaluation, via: &Evaluation) -> Option<String> {
    let same_value = match (&direct.value, &via.value) {
        (Output::Number(a), Output::Number(b)) => all_close(a, b),
        (Output::Vector { len: n, data: a }, Output::Vector { len: m, data: b }) => {
            n == m && all_close(a, b)
        }
        (
            Output::Matrix {
                rows: r,
                cols: c,
                data: a,
            },
            Output::Matrix {
                rows: r2,
                cols: c2,
                data: b,
            },
        ) => r == r2 && c == c2 && all_close(a, b),
        (a, b) => a == b,
    };
    if !same_value {
        return Some(format!("value {:?} vs {:?}", direct.value, via.value));
    }
    if direct.grads.len() != via.grads.len() {
        return Some(format!(
            "{} vs {} gradients",
            direct.grads.len(),
            via.grads.len()
        ));
    }
    for (g, h) in direct.grads.iter().zip(&via.grads) {
        if g.name != h.name || !all_close(&g.per_lane, &h.per_lane) {
            return Some(format!(
                "d/d{} {:?} vs d/d{} {:?}",
                g.name, g.per_lane, h.name, h.per_lane
            ));
        }
    }
    (direct.faults != via.faults).then(|| format!("faults {:?} vs {:?}", direct.faults, via.faults))
}

/// The outcome of one program through both paths.
enum Verdict {
    Agree,
    /// Both failed with the same error code.
    SameError,
    Differ(String),
}

fn compare(src: &str, ev: &str, o: EvalOptions, inputs: &Inputs) -> Verdict {
    match (
        run(src, None, o.clone(), inputs),
        run(src, Some(ev), o, inputs),
    ) {
        (Ok(d), Ok(v)) => match disagreement(&d, &v) {
            None => Verdict::Agree,
            Some(why) => Verdict::Differ(why),
        },
        // A refusal is never agreement, even when the host's error has the same code.
        (Err(d), Err(v)) if d[..4] == v[..4] && !v.contains(REFUSAL) => Verdict::SameError,
        (d, v) => Verdict::Differ(format!(
            "direct {:?} / via {:?}",
            d.map(|e| e.value),
            v.map(|e| e.value)
        )),
    }
}

/// Checks a named collection: every program agrees except those in `cannot` (name, reason),
/// which must differ (so the list stays true).
fn check_all<'a>(
    items: impl Iterator<Item = (String, String, EvalOptions, Inputs)>,
    cannot: &[(&'a str, &'a str)],
) -> usize {
    let ev = evaluator_src();
    let mut failures = Vec::new();
    let mut n = 0;
    for (name, src, o, inputs) in items {
        n += 1;
        let verdict = compare(&src, &ev, o, &inputs);
        let listed = cannot.iter().find(|(c, _)| *c == name);
        match (verdict, listed) {
            (Verdict::Agree | Verdict::SameError, None) => {}
            (Verdict::Differ(why), None) => failures.push(format!("{name}: {why}")),
            (Verdict::Differ(_), Some(_)) => {}
            (_, Some((_, reason))) => failures.push(format!(
                "{name} is listed as not expressible ({reason}) but agrees: take it off the list"
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} programs:\n{}",
        failures.len(),
        failures.join("\n")
    );
    n
}

#[test]
fn oracle_programs_agree_through_the_evaluator() {
    let items = oracle_programs().into_iter().map(|p| {
        (
            p.name.clone(),
            p.src.clone(),
            opts(Dialect::Reference, 1),
            p.inputs(),
        )
    });
    assert_eq!(check_all(items, &[]), 34);
}

#[test]
fn fuzz_corpus_agrees_through_the_evaluator() {
    let items = fuzz_corpus().into_iter().map(|p| {
        (
            format!("fuzz {}", p.id),
            p.src.clone(),
            opts(Dialect::Default, 1),
            p.inputs(),
        )
    });
    assert_eq!(check_all(items, &[]), 200);
}

/// The header bindings of a `tests/data/eval` case: dialect, `bind:` parameters, `input:` values.
fn eval_case(src: &str) -> (EvalOptions, Inputs) {
    let mut dialect = Dialect::Default;
    let mut inputs = Inputs::new();
    for line in src.lines().map_while(|l| l.strip_prefix(";;")) {
        let Some((key, rest)) = line.trim().split_once(':') else {
            continue;
        };
        for kv in rest.split_whitespace() {
            let Some((k, v)) = kv.split_once('=') else {
                continue;
            };
            match (key, v.parse::<f64>()) {
                ("bind", Ok(x)) => inputs.push(k, InputValue::Uniform(x), true),
                ("input", Ok(x)) => inputs.push(k, InputValue::Uniform(x), false),
                _ => {}
            }
        }
        if key == "dialect" && rest.trim() == "reference" {
            dialect = Dialect::Reference;
        }
    }
    (opts(dialect, 1), inputs)
}

/// The cases of `tests/data/eval/` the evaluator cannot express, and why.
const EVAL_CASES_NOT_EXPRESSIBLE: &[(&str, &str)] = &[
    (
        "case_dispatch.scm",
        "case is not in the evaluator's language",
    ),
    ("case_nested.scm", "case is not in the evaluator's language"),
    (
        "case_lambda_dispatch.scm",
        "case-lambda is not in the evaluator's language",
    ),
    ("do_loop_sum.scm", "do is not in the evaluator's language"),
    (
        "do_set_commands.scm",
        "do and set! are not in the evaluator's language",
    ),
    (
        "quasiquote_length.scm",
        "quasiquote is not in the evaluator's language",
    ),
    ("set_global.scm", "set! is not in the evaluator's language"),
    (
        "set_in_branch.scm",
        "set! is not in the evaluator's language",
    ),
    (
        "set_local_closure.scm",
        "set! is not in the evaluator's language",
    ),
    (
        "conditional_define_in_body.scm",
        "define under if: defines only open a body",
    ),
    (
        "error_case_lambda_no_clause_fits.scm",
        "case-lambda is refused by another error",
    ),
    (
        "error_cond_arrow_no_receiver.scm",
        "the host refuses it at decode time, the evaluator when it runs",
    ),
    (
        "error_do_bad_variable.scm",
        "do is refused by another error",
    ),
    (
        "error_set_primitive.scm",
        "set! is refused by another error",
    ),
    ("error_set_unbound.scm", "set! is refused by another error"),
    (
        "error_unsupported_define_syntax.scm",
        "refused, but as an unbound name",
    ),
];

#[test]
fn eval_cases_agree_through_the_evaluator() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/eval");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "scm"))
        .collect();
    files.sort();
    let items = files.into_iter().map(|path| {
        let src = std::fs::read_to_string(&path).expect("case file");
        let (o, inputs) = eval_case(&src);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        (name, src, o, inputs)
    });
    assert_eq!(check_all(items, EVAL_CASES_NOT_EXPRESSIBLE), 59);
}

/// The candidate stream's programs (`params` a, b, c …; input x).
fn candidates() -> Vec<(String, Vec<String>)> {
    read_testdata("seed-data/cosearch_candidates_valid.jsonl")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let o: serde_json::Value = serde_json::from_str(l).expect("candidate line");
            let params = o["params"]
                .as_array()
                .expect("params")
                .iter()
                .map(|p| p.as_str().expect("param name").to_string())
                .collect();
            (o["src"].as_str().expect("src").to_string(), params)
        })
        .collect()
}

/// Per-lane inputs for a candidate: each parameter and x drawn per lane from `rng`.
fn candidate_inputs(params: &[String], n_lanes: usize, rng: &mut ChaCha8Rng) -> Inputs {
    let mut inputs = Inputs::new();
    for p in params {
        let v = (0..n_lanes).map(|_| rng.random_range(0.2..1.5)).collect();
        inputs.push(p, InputValue::Lanes(v), true);
    }
    let x = (0..n_lanes).map(|_| rng.random_range(-2.0..3.0)).collect();
    inputs.push("x", InputValue::Lanes(x), false);
    inputs
}

#[test]
fn a_seeded_sample_of_the_candidate_stream_agrees_at_eight_lanes() {
    let all = candidates();
    assert_eq!(all.len(), 247);
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    let items: Vec<_> = (0..60)
        .map(|k| {
            let (src, params) = &all[rng.random_range(0..all.len())];
            let inputs = candidate_inputs(params, 8, &mut rng);
            (
                format!("sample {k}: {src}"),
                src.clone(),
                opts(Dialect::Default, 8),
                inputs,
            )
        })
        .collect();
    assert_eq!(check_all(items.into_iter(), &[]), 60);
}

/// Lane decomposition through the evaluator: B lanes equal B one-lane runs, bit for bit.
#[test]
fn batched_lanes_equal_one_lane_runs_through_the_evaluator() {
    let ev = evaluator_src();
    let all = candidates();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut programs: Vec<(String, Vec<String>)> = (0..10)
        .map(|_| all[rng.random_range(0..all.len())].clone())
        .collect();
    // Lanes that leave a loop at different iterations.
    programs.push((
        "(loop ((y a) (k 0)) (if (> y 4) (+ y k) (recur (* y (+ 1 b)) (+ k 1))))".into(),
        vec!["a".into(), "b".into()],
    ));
    for (src, params) in &programs {
        let n = 5;
        let batch = candidate_inputs(params, n, &mut rng);
        let whole = run(src, Some(&ev), opts(Dialect::Default, n), &batch)
            .unwrap_or_else(|e| panic!("{src}: {e}"));
        for lane in 0..n {
            let mut one = Inputs::new();
            for e in &batch.entries {
                let InputValue::Lanes(v) = &e.value else {
                    unreachable!("candidate inputs are per lane")
                };
                one.push(&e.name, InputValue::Uniform(v[lane]), e.grad);
            }
            let single = run(src, Some(&ev), opts(Dialect::Default, 1), &one)
                .unwrap_or_else(|e| panic!("{src} lane {lane}: {e}"));
            assert_eq!(
                lane_bits(&whole, lane),
                lane_bits(&single, 0),
                "{src} lane {lane}"
            );
        }
    }
}

/// Trace replay through the evaluator: a reused evaluator replays (the evaluator's structure
/// work is not re-run) and equals a fresh walk bit for bit, for the Kalman filter and the
/// candidate stream.
#[test]
fn replay_through_the_evaluator_equals_a_fresh_walk() {
    let ev = evaluator_src();
    let kalman = oracle_programs()
        .into_iter()
        .find(|p| p.name == "kalman2d_T80")
        .expect("kalman2d_T80");
    let mut cases: Vec<(String, Dialect, Vec<Inputs>)> = vec![(
        kalman.src.clone(),
        Dialect::Reference,
        [(0.05, 0.1), (0.06, 0.12), (0.2, 0.03)]
            .iter()
            .map(|&(q, r)| kalman.with_matrix(Inputs::new().param("q", q).param("r", r)))
            .collect(),
    )];
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let all = candidates();
    for _ in 0..8 {
        let (src, params) = all[rng.random_range(0..all.len())].clone();
        let seq = (0..3)
            .map(|_| {
                let mut inputs = Inputs::new();
                for p in &params {
                    inputs.push(p, InputValue::Uniform(rng.random_range(0.2..1.5)), true);
                }
                inputs.push("x", InputValue::Lanes(vec![-1.0, 0.5, 2.0, 3.5]), false);
                inputs
            })
            .collect();
        cases.push((src, Dialect::Default, seq));
    }
    for (src, dialect, seq) in &cases {
        let n = match &seq[0].entries.last().map(|e| &e.value) {
            Some(InputValue::Lanes(v)) => v.len(),
            _ => 1,
        };
        let o = opts(*dialect, n);
        let (mut heap, prog) = program(src, Some(&ev), &seq[0]);
        let mut reused = Evaluator::new(o.clone());
        for (k, inputs) in seq.iter().enumerate() {
            let got = reused
                .eval_grad(&mut heap, &prog, inputs)
                .unwrap_or_else(|e| panic!("{src}: {e:?}"));
            assert_eq!(
                reused.last_run_replayed(),
                k > 0,
                "{src}: run {k} replayed?"
            );
            let want = Evaluator::new(o.clone().with_replay(false))
                .eval_grad(&mut heap, &prog, inputs)
                .unwrap_or_else(|e| panic!("{src}: {e:?}"));
            for lane in 0..n {
                assert_eq!(
                    lane_bits(&got, lane),
                    lane_bits(&want, lane),
                    "{src} run {k}"
                );
            }
            let direct = run(src, None, o.clone(), inputs).expect("direct");
            assert!(disagreement(&direct, &got).is_none(), "{src} run {k}");
        }
    }
}

/// Programs the evaluator refuses name what it cannot express, and deep user recursion stays
/// inside the runtime's depth limit as a classified error, never a crash.
#[test]
fn refusals_and_limits_are_errors() {
    let ev = evaluator_src();
    let inputs = Inputs::new().param("a", 0.5);
    for (src, name) in [
        ("(begin (set! a 1) a)", "set!"),
        ("(do ((i 0 (+ i 1))) ((= i 2) a))", "do"),
        ("`(1 ,a)", "quasiquote"),
        ("(recur 1)", "recur-outside-a-loop"),
        (
            "(define x 1) (define x 2) x",
            "a-name-defined-twice-in-one-body",
        ),
    ] {
        let e = run(src, Some(&ev), opts(Dialect::Default, 1), &inputs).unwrap_err();
        assert!(
            e.starts_with("E001") && e.contains(&format!("{REFUSAL}{name}")),
            "{src}: {e}"
        );
    }
    // Loops and tail calls run in constant host depth: 30,000 iterations under a depth limit of
    // 10,000 (known answer: Σ (a·i + 1) for i < 30000 at a = 1).
    for src in [
        "(loop ((i 0) (acc 0)) (if (= i 30000) acc (let* ((u (* a i)) (v (+ u 1))) (recur (+ i 1) (+ acc v)))))",
        "(define (f i acc) (if (= i 30000) acc (let ((u (+ (* a i) 1))) (f (+ i 1) (+ acc u))))) (f 0 0)",
    ] {
        let one = Inputs::new().param("a", 1.0);
        let e =
            run(src, Some(&ev), opts(Dialect::Default, 1), &one).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            e.value.number(0),
            Some(30000.0 * 29999.0 / 2.0 + 30000.0),
            "{src}"
        );
    }
    let deep = "(define (f n) (if (= n 0) a (+ a (f (- n 1))))) (f 100000)";
    let e = run(deep, Some(&ev), opts(Dialect::Default, 1), &inputs).unwrap_err();
    assert!(e.starts_with("E008"), "{e}");
    let e = run("(+ a zz)", Some(&ev), opts(Dialect::Default, 1), &inputs).unwrap_err();
    assert!(e.starts_with("E001") && e.contains("zz"), "{e}");
}
