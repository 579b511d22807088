//! The Scheme forms lowered or added for issue 12 (`cond` with `=>`, `do`, named `let`,
//! `case-lambda`, `set!`): tape gradients against central finite differences of the forward run,
//! and every row of the core vocabulary decoding in a program.

mod common;

use common::{assert_close, opts, run};
use ndvm_core::{Dialect, Inputs, WordKind, vocabulary};

/// Central finite-difference step.
const H: f64 = 1e-6;

/// Programs of one parameter `a` (and the input `x`) that use the new forms; straight-line in `a`
/// near the points used, so a finite difference is trustworthy.
const PROGRAMS: &[&str] = &[
    "(cond ((> a 10.0) 1.0) ((* a x) => (lambda (v) (sin (* v v)))) (else 0.0))",
    "(do ((i 0 (+ i 1)) (acc 1.0 (* acc (+ a (* x i))))) ((= i 4) (log acc)))",
    "(let ((s a)) (do ((i 0 (+ i 1))) ((= i 3) s) (set! s (* s (cos (+ s x))))))",
    "(let loop ((i 0) (p 1.0)) (if (= i 3) p (loop (+ i 1) (* p (exp (* a x))))))",
    "(let f ((n 3)) (if (= n 0) a (* (+ a x) (f (- n 1)))))",
    "(define g (case-lambda ((u) (* u u)) ((u v) (/ u v)) ((u . r) (apply + u r)))) (+ (g a) (g a x) (g a x a))",
    "(define acc 0.0) (define (add! v) (set! acc (+ acc v)) acc) (add! (sqrt a)) (add! (* a x)) (if (> a 0.0) (set! acc (* acc acc))) acc",
];

#[test]
fn new_forms_gradients_match_finite_differences() {
    for src in PROGRAMS {
        for (a, x) in [(0.7, 1.3), (1.9, 0.4), (0.35, 2.2)] {
            let at = |a: f64| {
                let inputs = Inputs::new().param("a", a).input("x", x);
                let e = run(src, opts(Dialect::Default, 1), &inputs, true)
                    .unwrap_or_else(|f| panic!("{src}: {f}"));
                let v = e.value.number(0).expect("a number");
                (v, e.grad("a").map(|g| g[0]))
            };
            let (_, grad) = at(a);
            let grad = grad.unwrap_or_else(|| panic!("{src}: no gradient for a"));
            let fd = (at(a + H).0 - at(a - H).0) / (2.0 * H);
            assert_close(grad, fd, 1e-6, 1e-6, &format!("{src} at a={a} x={x}"));
        }
    }
}

/// Every primitive row is callable by its name (with its fewest arguments, as a value when it
/// takes none), every special form decodes in a small use, and every unsupported word is refused
/// with an error that names it.
#[test]
fn every_vocabulary_row_decodes() {
    let forms = [
        ("quote", "(quote (1 2))"),
        ("quasiquote", "(quasiquote (1 (unquote a)))"),
        ("if", "(if (> a 0.0) a 0.0)"),
        ("define", "(define (f u) u) (f a)"),
        ("set!", "(let ((u a)) (set! u 2.0) u)"),
        ("lambda", "((lambda (u) u) a)"),
        ("case-lambda", "((case-lambda ((u) u)) a)"),
        ("let", "(let ((u a)) u)"),
        ("let*", "(let* ((u a) (v u)) v)"),
        ("letrec", "(letrec ((u a)) u)"),
        ("letrec*", "(letrec* ((u a)) u)"),
        ("begin", "(begin a)"),
        ("cond", "(cond ((> a 0.0) => (lambda (t) a)) (else a))"),
        ("case", "(case 1 ((1) a) (else a))"),
        ("when", "(when #t a)"),
        ("unless", "(unless #f a)"),
        ("and", "(and #t a)"),
        ("or", "(or #f a)"),
        ("do", "(do ((i 0 (+ i 1))) ((= i 2) a))"),
        ("loop", "(loop ((i 0)) (if (< i 2) (recur (+ i 1)) a))"),
        ("recur", "(loop ((i 0)) (if (< i 2) (recur (+ i 1)) a))"),
        ("params", "(params (k free 1.0)) (* k a)"),
        ("soft-choice", "(soft-choice (a (* 2.0 a)) (vector 0.1 a))"),
    ];
    let inputs = Inputs::new().param("a", 0.5);
    let mut seen = Vec::new();
    for w in vocabulary() {
        match w.kind {
            WordKind::Primitive => {
                // A primitive must be known to the decoder: referenced as a value it is a
                // procedure (never unbound), whatever its argument types.
                let src = format!("(procedure? {})", w.name);
                let e = run(&src, opts(Dialect::Default, 1), &inputs, false)
                    .unwrap_or_else(|f| panic!("{}: {f}", w.name));
                assert_eq!(e.value, ndvm_core::Output::Bool(vec![true]), "{}", w.name);
            }
            WordKind::SpecialForm => {
                let (_, src) = forms
                    .iter()
                    .find(|(n, _)| *n == w.name)
                    .unwrap_or_else(|| panic!("special form `{}` has no use in this test", w.name));
                run(src, opts(Dialect::Default, 1), &inputs, true)
                    .unwrap_or_else(|f| panic!("{}: {src}: {f}", w.name));
                seen.push(w.name);
            }
            WordKind::Keyword => {
                let src = format!("({} 1.0)", w.name);
                let err = run(&src, opts(Dialect::Default, 1), &inputs, false).unwrap_err();
                assert!(
                    err.to_string().contains("not allowed here"),
                    "{}: {err}",
                    w.name
                );
            }
            WordKind::Unsupported => {
                let src = format!("({} 1.0)", w.name);
                let err = run(&src, opts(Dialect::Default, 1), &inputs, false).unwrap_err();
                let msg = err.to_string();
                assert!(
                    msg.contains(&format!("`{}` is not supported", w.name)) && msg.contains("1:1"),
                    "{}: {msg}",
                    w.name
                );
            }
        }
    }
    assert_eq!(seen.len(), forms.len(), "{seen:?}");
}

/// A forward-only loop releases each iteration's payloads; an iteration that `set!`s a variable
/// older than the loop must not, or the variable would name released (then reused) storage.
#[test]
fn set_of_an_outer_variable_survives_the_loops_release() {
    let src = "(define t 0.0)
               (let ((s 0.0))
                 (do ((i 0 (+ i 1))) ((= i 1000) (+ s t))
                   (set! t (+ t 1.0))
                   (set! s (+ s (* a i)))))";
    let a = [0.5, 1.0, 2.0];
    let inputs = Inputs::new().param_lanes("a", a.to_vec());
    let e = run(src, opts(Dialect::Default, 3), &inputs, false).unwrap_or_else(|f| panic!("{f}"));
    for (lane, a) in a.iter().enumerate() {
        assert_close(
            e.value.number(lane).unwrap(),
            a * 499_500.0 + 1000.0,
            0.0,
            1e-15,
            "sum",
        );
    }
}
