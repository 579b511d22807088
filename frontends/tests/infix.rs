//! The infix front end end to end: reader cases from `tests/data/infix/{success,failure}`, Scheme →
//! infix → heap round trips over the seed data with values and gradients, the Kalman example,
//! nesting limits, runtime error locations, and property tests (no panics, print → parse → print
//! fixed points).
//!
//! A success file `x.infix` has a sidecar `x.expect` holding the lowered program as s-expressions;
//! a failure file starts with `# error: P00N at LINE:COL` and its sidecar holds the rendered
//! diagnostic. `UPDATE_EXPECT=1 cargo test -p ndvm-frontends --test infix` rewrites the sidecars.

mod common;

use std::fs;
use std::path::Path;

use common::cases::{cases, check_expect, check_failure, file_name, run_cases};
use common::{Failure, lane_bits, opts, run, run_in};
use ndvm_core::{Dialect, ErrorKind, Heap, Inputs, Node, NodeId, Program, print};
use ndvm_frontends::infix::{self, Infix, MAX_DEPTH};
use ndvm_frontends::{Frontend, ParseErrorKind, render_core_error, render_parse_error, scheme};
use proptest::prelude::*;

// ---- helpers ----

/// The program's forms as s-expression text.
fn sexpr(heap: &Heap, program: &Program) -> String {
    print::program_to_string(heap, program).unwrap_or_else(|e| panic!("{e:?}"))
}

/// Reads infix `src`, panicking with the rendered error.
fn read_infix(src: &str) -> (Heap, Program) {
    let mut heap = Heap::new();
    match infix::parse(&mut heap, src) {
        Ok(p) => (heap, p),
        Err(e) => panic!(
            "{}\n--- source\n{src}",
            render_parse_error("t.infix", src, &e)
        ),
    }
}

/// Scheme source → infix text, or why the notation cannot spell it.
fn to_infix(scheme_src: &str) -> Result<String, String> {
    let mut heap = Heap::new();
    let program = scheme::parse(&mut heap, scheme_src).map_err(|e| e.to_string())?;
    Infix.print(&heap, &program).map_err(|e| e.message)
}

/// Checks that `scheme_src` prints as infix text that reads back as the same forms and prints
/// again as the same text; returns the infix text, or `Err` when the notation cannot spell it.
fn round_trip(scheme_src: &str) -> Result<String, String> {
    let text = to_infix(scheme_src)?;
    let mut heap = Heap::new();
    let original = scheme::parse(&mut heap, scheme_src).map_err(|e| e.to_string())?;
    let (h2, back) = read_infix(&text);
    assert_eq!(
        sexpr(&h2, &back),
        sexpr(&heap, &original),
        "infix text:\n{text}"
    );
    assert_eq!(
        Infix.print(&h2, &back).as_deref(),
        Ok(text.as_str()),
        "print → parse → print is not a fixed point"
    );
    Ok(text)
}

/// Value, gradients and faults of every lane, for bit-for-bit comparisons.
fn all_lanes(
    result: &Result<ndvm_core::Evaluation, Failure>,
    n_lanes: usize,
) -> Result<Vec<common::LaneBits>, String> {
    match result {
        Ok(e) => Ok((0..n_lanes).map(|lane| lane_bits(e, lane)).collect()),
        Err(Failure::Eval { kind, message, .. }) => Err(format!("{kind:?}: {message}")),
        Err(f) => panic!("{f}"),
    }
}

/// Every pair and atom reachable from the program's forms has a span inside the source.
fn assert_spans_everywhere(heap: &Heap, program: &Program, src_len: usize, ctx: &str) {
    let mut stack: Vec<NodeId> = program.forms().to_vec();
    while let Some(id) = stack.pop() {
        let node = heap.node(id);
        if matches!(node, Node::Nil | Node::Bool(_)) {
            continue; // the shared `()`, `#t` and `#f` cells carry no span
        }
        let span = heap
            .span(id)
            .unwrap_or_else(|| panic!("{ctx}: {} has no span", print::display(heap, id)));
        assert!(
            span.start <= span.end && span.end as usize <= src_len,
            "{ctx}: {span:?}"
        );
        if let Node::Pair(a, d) = node {
            stack.push(a);
            stack.push(d);
        }
    }
}

// ---- data-driven reader cases ----

fn check_success(path: &Path) -> Option<String> {
    let src = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut heap = Heap::new();
    let program = match infix::parse(&mut heap, &src) {
        Ok(p) => p,
        Err(err) => {
            return Some(format!(
                "{}: expected success\n{}",
                path.display(),
                render_parse_error(&file_name(path), &src, &err)
            ));
        }
    };
    assert_spans_everywhere(&heap, &program, src.len(), &file_name(path));
    let lowered = sexpr(&heap, &program);
    // The printed infix reads back as the same forms, and printing is a fixed point.
    let printed = match Infix.print(&heap, &program) {
        Ok(t) => t,
        Err(e) => return Some(format!("{}: print failed: {}", path.display(), e.message)),
    };
    let (h2, back) = read_infix(&printed);
    if sexpr(&h2, &back) != lowered {
        return Some(format!(
            "{}: printed infix reads back differently\n--- printed\n{printed}\n--- reads as\n{}",
            path.display(),
            sexpr(&h2, &back)
        ));
    }
    if Infix.print(&h2, &back).as_deref() != Ok(printed.as_str()) {
        return Some(format!("{}: print is not a fixed point", path.display()));
    }
    check_expect(path, &lowered)
}

#[test]
fn success_files_lower_as_expected_and_round_trip() {
    run_cases(&cases("infix", "success", "infix"), check_success);
}

#[test]
fn failure_files_report_the_expected_diagnostic() {
    run_cases(&cases("infix", "failure", "infix"), |path| {
        check_failure(&Infix, "#", path)
    });
}

// ---- the seed data: Scheme → infix → heap ----

/// Points of the candidate stream's experiment: x evenly spaced over [0.1, 6.0].
const POINTS: usize = 20;

#[test]
fn every_candidate_round_trips_with_identical_values_and_gradients() {
    let text = common::read_testdata("seed-data/cosearch_candidates_valid.jsonl");
    let xs: Vec<f64> = (0..POINTS)
        .map(|i| 0.1 + 5.9 * i as f64 / (POINTS - 1) as f64)
        .collect();
    let inputs = Inputs::new()
        .param("a", 0.5)
        .param("b", 0.7)
        .param("c", -0.3)
        .param("d", 1.25)
        .input_lanes("x", xs);
    let mut n = 0;
    for (i, line) in text.lines().enumerate() {
        let o: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("line {}: {e}", i + 1));
        let src = o["src"].as_str().expect("src");
        let infix_src =
            round_trip(src).unwrap_or_else(|e| panic!("line {}: {src}: cannot print: {e}", i + 1));
        let scheme_run = all_lanes(
            &run(src, opts(Dialect::Default, POINTS), &inputs, true),
            POINTS,
        );
        let infix_run = all_lanes(
            &run_in(
                &Infix,
                &infix_src,
                opts(Dialect::Default, POINTS),
                &inputs,
                true,
            ),
            POINTS,
        );
        assert_eq!(
            infix_run,
            scheme_run,
            "line {}: {src}\ninfix: {infix_src}",
            i + 1
        );
        // Line 239 applies the number `(-1.0)` (seed-data README): an error in both notations.
        assert_eq!(
            scheme_run.is_err(),
            i + 1 == 239,
            "line {}: {src}: {scheme_run:?}",
            i + 1
        );
        n += 1;
    }
    assert_eq!(n, 247, "candidates compared");
}

#[test]
fn oracle_programs_the_notation_spells_give_the_same_values() {
    let mut expressible = Vec::new();
    let mut refused = Vec::new();
    for p in common::oracle_programs() {
        match round_trip(&p.src) {
            Ok(text) => {
                let inputs = p.inputs();
                let o = opts(Dialect::Reference, 1);
                let scheme_run = all_lanes(&run(&p.src, o.clone(), &inputs, true), 1);
                let infix_run = all_lanes(&run_in(&Infix, &text, o, &inputs, true), 1);
                assert_eq!(infix_run, scheme_run, "{}: {text}", p.name);
                expressible.push(p.name);
            }
            Err(why) => refused.push(format!("{}: {why}", p.name)),
        }
    }
    // `factorial_letrec` (letrec) and `cond_abs` (a one-test cond) have no infix spelling.
    assert_eq!(expressible.len(), 32, "refused:\n{}", refused.join("\n"));
    assert_eq!(refused.len(), 2, "{refused:?}");
}

#[test]
fn fuzz_corpus_programs_the_notation_spells_give_the_same_values() {
    let mut expressible = 0;
    let mut refused = Vec::new();
    for p in common::fuzz_corpus() {
        match round_trip(&p.src) {
            Ok(text) => {
                let inputs = p.inputs();
                let o = opts(Dialect::Default, 1);
                let scheme_run = all_lanes(&run(&p.src, o.clone(), &inputs, true), 1);
                let infix_run = all_lanes(&run_in(&Infix, &text, o, &inputs, true), 1);
                assert_eq!(infix_run, scheme_run, "fuzz {}: {text}", p.id);
                expressible += 1;
            }
            Err(why) => refused.push(format!("fuzz {}: {why}", p.id)),
        }
    }
    // Every corpus program has an infix spelling (one-binding `let*` is `let* x = … in …`).
    assert_eq!(expressible, 200, "refused:\n{}", refused.join("\n"));
}

#[test]
fn kalman_example_equals_the_oracle_scheme_program() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/kalman.infix");
    let src = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let p = common::oracle_programs()
        .into_iter()
        .find(|p| p.name == "kalman2d_T80")
        .expect("kalman2d_T80");
    let (heap, program) = read_infix(&src);
    assert_spans_everywhere(&heap, &program, src.len(), "kalman.infix");
    let mut sheap = Heap::new();
    let sprogram = scheme::parse(&mut sheap, &p.src).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(sexpr(&heap, &program), sexpr(&sheap, &sprogram));
    let inputs = p.inputs();
    let o = opts(Dialect::Reference, 1);
    let scheme_run = run(&p.src, o.clone(), &inputs, true).unwrap_or_else(|e| panic!("{e}"));
    let infix_run = run_in(&Infix, &src, o, &inputs, true).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lane_bits(&infix_run, 0), lane_bits(&scheme_run, 0));
    let value = common::number(&infix_run, 0).unwrap_or_else(|e| panic!("{e}"));
    common::assert_close(
        value,
        p.result.expect("oracle value"),
        1e-2,
        2e-3,
        "kalman value",
    );
    for (name, g) in &p.grads {
        let ours = infix_run
            .grad(name)
            .unwrap_or_else(|| panic!("no gradient for {name}"))[0];
        common::assert_close(ours, *g, 5.0, 2e-2, &format!("kalman d/d{name}"));
    }
    // Printing gives back the example itself, comments aside.
    let printed = Infix
        .print(&heap, &program)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let code: Vec<&str> = src.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(printed, code.join("\n"));
}

// ---- errors at run time point at the infix text ----

#[test]
fn runtime_errors_render_at_the_infix_line_and_column() {
    let src = "params a = 2\nlet u = a * x\nu + exp(v) * 2\n";
    let mut heap = Heap::new();
    let program = infix::parse(&mut heap, src).unwrap_or_else(|e| panic!("{e:?}"));
    let mut ev = ndvm_core::Evaluator::new(opts(Dialect::Default, 1));
    let err = ev
        .eval(&mut heap, &program, &Inputs::new().input("x", 1.0))
        .err()
        .unwrap_or_else(|| panic!("`v` is unbound"));
    assert_eq!(err.kind, ErrorKind::Unbound);
    let rendered = render_core_error("model.infix", src, &heap, &err);
    assert!(
        rendered.starts_with("model.infix:3:9: error[E001]"),
        "{rendered}"
    );
    assert!(
        rendered.ends_with("  3 | u + exp(v) * 2\n    |         ^"),
        "{rendered}"
    );
}

// ---- nesting limits ----

#[test]
fn million_deep_input_is_a_depth_error_not_an_overflow() {
    for (open, close) in [
        ("(", ")"),
        ("[", "]"),
        ("-", ""),
        ("f(", ")"),
        ("{", "}"),
        ("not ", ""),
    ] {
        let src = format!("{}x{}", open.repeat(1_000_000), close.repeat(1_000_000));
        let mut heap = Heap::new();
        let err = infix::parse(&mut heap, &src)
            .err()
            .unwrap_or_else(|| panic!("{open}: parsed"));
        assert_eq!(err.kind, ParseErrorKind::TooDeep, "{open}: {err:?}");
        assert!(
            err.message.contains("deeper than 10000 levels"),
            "{}",
            err.message
        );
        let unclosed = open.repeat(1_000_000);
        let err = infix::parse(&mut heap, &unclosed).err().map(|e| e.kind);
        assert_eq!(err, Some(ParseErrorKind::TooDeep), "{open} unclosed");
    }
    assert_eq!(MAX_DEPTH, 10_000);
}

#[test]
fn nesting_up_to_the_limit_parses_and_deep_heaps_print_or_refuse() {
    let depth = MAX_DEPTH - 10;
    let src = format!("{}x{}", "(".repeat(depth), ")".repeat(depth));
    let (heap, program) = read_infix(&src);
    assert_eq!(sexpr(&heap, &program), "x");
    // A 2000-deep heap prints and reads back; a 5000-deep one is refused with a clear error.
    for (n, ok) in [(2000, true), (5000, false)] {
        let scheme_src = format!("{}x{}", "(- ".repeat(n), ")".repeat(n));
        match round_trip(&scheme_src) {
            Ok(text) => assert!(ok && text.starts_with("-(-(-"), "{n}: {text:.40}"),
            Err(e) => assert!(!ok && e.contains("nested deeper than 3000"), "{n}: {e}"),
        }
    }
}

// ---- forms the notation cannot spell ----

#[test]
fn the_printer_names_forms_it_cannot_spell() {
    for (src, says) in [
        ("(letrec ((f (lambda (n) n))) (f 1))", "(letrec …)"),
        ("(let* () a)", "no bindings"),
        ("(quote x)", "(quote …)"),
        ("(f a . b)", "improper"),
        ("(f ())", "empty list"),
        ("(cond ((< x 0) 1) (else 2))", "fewer than two tests"),
        // Regression: an empty clause indexed its head and panicked.
        ("(cond () ((< x 0) 1) (y 2))", "`cond` clause"),
        ("(when c 1)", "(when …)"),
        ("(lambda args 1)", "rest parameter"),
        ("(let ((u 1)) (params (a free 1.0)) u)", "params"),
        ("(begin 1)", "(begin …)"),
    ] {
        let err = to_infix(src)
            .err()
            .unwrap_or_else(|| panic!("{src} printed"));
        assert!(
            err.contains("cannot be written in infix") && err.contains(says),
            "{src}: {err}"
        );
    }
}

// ---- properties ----

/// Text heavy on the characters and words the infix reader treats specially.
fn infix_noise() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "(", ")", "[", "]", "{", "}", ",", ";", ":", "=", "==", "!=", "<", "<=", ">", ">=", "+",
        "-", "*", "/", "^", "#", "`", "\n", " ", "\t", ".", "1", "2.5", "1e", "e-3", "x", "f",
        "if", "then", "elif", "else", "let", "in", "fn", "loop", "until", "next", "params", "and",
        "or", "not", "true", "inf", "nan", "?", "λ", "\"", "!", "\r",
    ]);
    prop::collection::vec(piece, 0..60).prop_map(|parts| parts.concat())
}

/// An expression of the notation, as Scheme text (built outside any heap so proptest shrinks it).
fn expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        prop::sample::select(vec![
            "a", "b", "x", "y", "list-ref", "zero?", "if", "#t", "#f"
        ])
        .prop_map(str::to_string),
        (-1000i32..1000, -3i32..4)
            .prop_map(|(m, e)| print::number_to_string(f64::from(m) * 10f64.powi(e))),
    ];
    leaf.prop_recursive(5, 48, 4, |inner| {
        let two = (inner.clone(), inner.clone());
        prop_oneof![
            (
                prop::sample::select(vec!["+", "*", "and", "or"]),
                prop::collection::vec(inner.clone(), 2..4)
            )
                .prop_map(|(op, xs)| format!("({op} {})", xs.join(" "))),
            (
                prop::sample::select(vec![
                    "-", "/", "expt", "=", "<", "<=", ">", ">=", "ref", "f"
                ]),
                two.clone()
            )
                .prop_map(|(op, (a, b))| format!("({op} {a} {b})")),
            (
                prop::sample::select(vec!["-", "not", "exp", "g"]),
                inner.clone()
            )
                .prop_map(|(op, a)| format!("({op} {a})")),
            (inner.clone(), two.clone()).prop_map(|(c, (a, b))| format!("(if {c} {a} {b})")),
            (inner.clone(), inner.clone()).prop_map(|(c, a)| format!("(if {c} {a})")),
            (two.clone(), inner.clone(), prop::option::of(inner.clone())).prop_map(
                |((t1, a1), t2, e)| {
                    let els = e.map(|e| format!(" (else {e})")).unwrap_or_default();
                    format!("(cond ({t1} {a1}) ({t2} {a1}){els})")
                }
            ),
            (inner.clone(), prop::collection::vec(inner.clone(), 1..3))
                .prop_map(|(v, body)| { format!("(let ((u {v})) {})", body.join(" ")) }),
            (two.clone(), inner.clone())
                .prop_map(|((a, b), body)| format!("(let* ((u {a}) (w {b})) {body})")),
            (inner.clone(), inner.clone()).prop_map(|(a, body)| format!("(let* ((u {a})) {body})")),
            (two.clone(), inner.clone())
                .prop_map(|((a, b), body)| format!("(let ((u {a}) (w {b})) {body})")),
            (inner.clone(), prop::collection::vec(inner.clone(), 1..3))
                .prop_map(|(a, body)| format!("((lambda (u) {}) {a})", body.join(" "))),
            prop::collection::vec(inner.clone(), 0..4)
                .prop_map(|xs| format!("(vec {})", xs.join(" "))),
            prop::collection::vec(two.clone(), 1..3).prop_map(|rows| {
                let rows: Vec<String> =
                    rows.iter().map(|(a, b)| format!("(vec {a} {b})")).collect();
                format!("(mat {})", rows.join(" "))
            }),
            prop::collection::vec(inner.clone(), 2..4)
                .prop_map(|xs| format!("(begin {})", xs.join(" "))),
            (two.clone(), inner.clone(), inner.clone()).prop_map(|((i, s), stop, step)| {
                format!("(loop ((k {i}) (s {s})) (if {stop} s (recur (+ k 1) {step})))")
            }),
            (inner.clone(), inner)
                .prop_map(|(i, body)| format!("(loop ((k {i})) {body} (recur k))")),
        ]
    })
}

/// A program: optional declarations and definitions, then expressions.
fn program() -> impl Strategy<Value = String> {
    (
        prop::option::of(Just(
            "(params (a positive 2.0) (b free 1.0) (c unit 0.5) (d bounded 1.5 0.0 4.0))",
        )),
        prop::collection::vec(expr(), 0..2),
        prop::collection::vec(expr(), 1..3),
    )
        .prop_map(|(params, defs, body)| {
            let mut forms: Vec<String> = params.map(str::to_string).into_iter().collect();
            for (i, d) in defs.iter().enumerate() {
                forms.push(format!("(define (h{i} y) {d})"));
                forms.push(format!("(define v{i} {d})"));
            }
            forms.extend(body);
            forms.join("\n")
        })
}

/// Any s-expression over the special forms' words and a few names and numbers, as Scheme text:
/// shapes the infix printer must either spell exactly or refuse, never mangle.
fn any_sexpr() -> impl Strategy<Value = String> {
    let leaf = prop::sample::select(vec![
        "if", "cond", "else", "let", "let*", "letrec", "define", "lambda", "begin", "loop",
        "recur", "params", "and", "or", "not", "quote", "vec", "mat", "ref", "+", "-", "*", "/",
        "expt", "=", "<", "free", "positive", "unit", "bounded", "x", "y", "f", "1", "-2.5", "0",
        "()", "#t", "in", "next",
    ])
    .prop_map(str::to_string);
    leaf.prop_recursive(5, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(|xs| format!("({})", xs.join(" "))),
            (inner.clone(), inner).prop_map(|(a, d)| format!("({a} . {d})")),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(src in infix_noise()) {
        let mut heap = Heap::new();
        if let Err(e) = infix::parse(&mut heap, &src) {
            let rendered = render_parse_error("fuzz.infix", &src, &e);
            prop_assert!(rendered.contains(e.kind.code()));
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let src = String::from_utf8_lossy(&bytes);
        let mut heap = Heap::new();
        let _ = infix::parse(&mut heap, &src);
    }

    #[test]
    fn any_scheme_data_prints_exactly_or_is_refused(forms in prop::collection::vec(any_sexpr(), 1..4)) {
        let src = forms.join("\n");
        let mut heap = Heap::new();
        let program = scheme::parse(&mut heap, &src).map_err(|e| TestCaseError::fail(e.to_string()))?;
        if let Ok(text) = Infix.print(&heap, &program) {
            let (h2, back) = read_infix(&text);
            prop_assert_eq!(sexpr(&h2, &back), sexpr(&heap, &program), "infix:\n{}", text);
            prop_assert_eq!(Infix.print(&h2, &back).ok(), Some(text));
        }
    }

    #[test]
    fn generated_programs_round_trip(src in program()) {
        let text = round_trip(&src).map_err(|e| TestCaseError::fail(format!("{src}: {e}")))?;
        let mut heap = Heap::new();
        let p = infix::parse(&mut heap, &text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        assert_spans_everywhere(&heap, &p, text.len(), &text);
    }
}
