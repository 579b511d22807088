//! One regression test per defect of the seed runtime (§11 item 9 of the predecessor's reference
//! notes, `reference/seed-runtime.md`, not part of this repository), each named after the defect with
//! a one-line cause; expected values are known answers worked out by hand in the comments.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use common::{Failure, assert_close, opts, run};
use ndvm_core::{Dialect, ErrorKind, EvalOptions, Inputs, Output};

/// What a regression program must do.
enum Expect {
    /// A number, with the gradient for each listed parameter (all within 1e-12).
    Value(f64, &'static [(&'static str, f64)]),
    /// A number from a forward-only run.
    Forward(f64),
    /// A boolean.
    Bool(bool),
    /// This error kind.
    Error(ErrorKind),
    /// Either elementwise results equal to these, or a clean type error.
    ElementwiseOrTypeError(&'static [f64]),
    /// Anything but a panic; an `Ok` must be this boolean when given.
    NoPanic(Option<bool>),
}

/// Evaluates `src` (one lane, parameters `params`) under `opts` and checks `expect`; a panic is
/// caught and reported as a failure with the source.
fn check_regression(src: &str, opts: EvalOptions, params: &[(&str, f64)], expect: Expect) {
    let inputs = params
        .iter()
        .fold(Inputs::new(), |acc, (n, v)| acc.param(n, *v));
    let grad = !matches!(expect, Expect::Forward(_));
    let result = catch_unwind(AssertUnwindSafe(|| run(src, opts, &inputs, grad)))
        .unwrap_or_else(|_| panic!("evaluator panicked on {src}"));
    match (expect, result) {
        (Expect::Value(v, grads), Ok(e)) => {
            assert_close(
                common::number(&e, 0).unwrap(),
                v,
                1e-12,
                1e-12,
                &format!("{src} value"),
            );
            for (name, g) in grads {
                let got = e
                    .grad(name)
                    .unwrap_or_else(|| panic!("{src}: no gradient for {name}"))[0];
                assert_close(got, *g, 1e-12, 1e-12, &format!("{src} d/d{name}"));
            }
        }
        (Expect::Forward(v), Ok(e)) => {
            assert_close(common::number(&e, 0).unwrap(), v, 0.0, 0.0, src)
        }
        (Expect::Bool(b), Ok(e)) => assert_eq!(e.value, Output::Bool(vec![b]), "{src}"),
        (Expect::Error(kind), Err(f)) => assert_eq!(f.kind(), Some(kind), "{src}: {f}"),
        (
            Expect::ElementwiseOrTypeError(_),
            Err(Failure::Eval {
                kind: ErrorKind::Type,
                ..
            }),
        ) => {}
        (Expect::ElementwiseOrTypeError(want), Ok(e)) => match &e.value {
            Output::Vector { len, data } if *len == want.len() => {
                for (i, (got, w)) in data.iter().zip(want).enumerate() {
                    assert_close(*got, *w, 1e-15, 1e-15, &format!("{src} element {i}"));
                }
            }
            other => panic!("{src}: expected {} elements, got {other:?}", want.len()),
        },
        (Expect::NoPanic(None), _) | (Expect::NoPanic(Some(_)), Err(Failure::Eval { .. })) => {}
        (Expect::NoPanic(Some(b)), Ok(e)) => assert_eq!(e.value, Output::Bool(vec![b]), "{src}"),
        (_, Ok(e)) => panic!("{src}: unexpected success {:?}", e.value),
        (_, Err(f)) => panic!("{src}: unexpected failure {f}"),
    }
}

fn default1() -> EvalOptions {
    opts(Dialect::Default, 1)
}

/// Cause: the elementwise VJP treated a broadcast scalar operand as a vector cell (a=0, b=24, c=60).
#[test]
fn scalar_broadcast_elementwise_vjp() {
    let abc = &[("a", 2.0), ("b", 3.0), ("c", 5.0)];
    // a·(b + c) = 16; d/da = b + c = 8, d/db = d/dc = a = 2.
    check_regression(
        "(vsum (* a (vec b c)))",
        default1(),
        abc,
        Expect::Value(16.0, &[("a", 8.0), ("b", 2.0), ("c", 2.0)]),
    );
    check_regression(
        "(vsum (* (vec b c) a))",
        default1(),
        abc,
        Expect::Value(16.0, &[("a", 8.0), ("b", 2.0), ("c", 2.0)]),
    );
    // 2a + b + c = 12; d/da = 2.
    check_regression(
        "(vsum (+ a (vec b c)))",
        default1(),
        abc,
        Expect::Value(12.0, &[("a", 2.0), ("b", 1.0), ("c", 1.0)]),
    );
    // 2a − b − c = −4.
    check_regression(
        "(vsum (- a (vec b c)))",
        default1(),
        abc,
        Expect::Value(-4.0, &[("a", 2.0), ("b", -1.0), ("c", -1.0)]),
    );
    // (b + c)/a = 4; d/da = −(b + c)/a² = −2, d/db = d/dc = 1/a.
    check_regression(
        "(vsum (/ (vec b c) a))",
        default1(),
        abc,
        Expect::Value(4.0, &[("a", -2.0), ("b", 0.5), ("c", 0.5)]),
    );
    // a/b + a/c = 2/3 + 2/5 = 16/15; d/da = 1/b + 1/c = 8/15, d/db = −a/b² = −2/9, d/dc = −a/c² = −2/25.
    check_regression(
        "(vsum (/ a (vec b c)))",
        default1(),
        abc,
        Expect::Value(
            16.0 / 15.0,
            &[("a", 8.0 / 15.0), ("b", -2.0 / 9.0), ("c", -2.0 / 25.0)],
        ),
    );
    // A scalar broadcast over a matrix adds a to every element: trace = (a + b) + (a + c) = 12.
    check_regression(
        "(trace (+ a (mat (vec b 0.0) (vec 0.0 c))))",
        default1(),
        abc,
        Expect::Value(12.0, &[("a", 2.0), ("b", 1.0), ("c", 1.0)]),
    );
}

/// Cause: the inline lookup cache checked only the symbol, so a frame holding one name twice
/// (conditional inner `define` of a parameter) returned the older, shadowed binding (105, not 202).
#[test]
fn shadowed_binding_lookup_cache() {
    // f(1,1) = 100, f(0,2) = 2, f(1,3) = 100 ⇒ 202.
    check_regression(
        "(define (f n x) (begin (if (> n 0) (define x 100.0) 0) x)) (+ (f 1 1.0) (+ (f 0 2.0) (f 1 3.0)))",
        default1(),
        &[],
        Expect::Value(202.0, &[]),
    );
    // Nested lets reusing one name, called alternately with a function that does not rebind:
    // f(1) = 3, g(5) = 5, f(2) = 5 ⇒ 13.
    check_regression(
        "(define (f x) (let ((x (* x 2.0))) (let ((x (+ x 1.0))) x))) (define (g x) x) (+ (f 1.0) (+ (g 5.0) (f 2.0)))",
        default1(),
        &[],
        Expect::Value(13.0, &[]),
    );
    // Inner lambda parameter shadows the outer one: 20 + 40 = 60.
    check_regression(
        "(let ((h (lambda (x) (lambda (x) (* x 10.0))))) (+ ((h 1.0) 2.0) ((h 3.0) 4.0)))",
        default1(),
        &[],
        Expect::Value(60.0, &[]),
    );
    // A rebinding on one branch only: k(1) = −1, k(−2) = −2, k(3) = −3 ⇒ −6.
    check_regression(
        "(define (k a) (if (> a 0.0) (let ((a (- a))) a) a)) (+ (k 1.0) (+ (k -2.0) (k 3.0)))",
        default1(),
        &[],
        Expect::Value(-6.0, &[]),
    );
    // A parameter named like a global parameter: the global p = 2 is seen only outside f.
    // f(10) = 10 + 1 = 11 then + p = 13; d/dp = 1.
    check_regression(
        "(define (f p) (+ p 1.0)) (+ (f 10.0) p)",
        default1(),
        &[("p", 2.0)],
        Expect::Value(13.0, &[("p", 1.0)]),
    );
}

/// Cause: the macro expander skipped the right-hand side of the last `let*` binding, so sugar there
/// (`vec`, `let*`, `loop`, `when`) ran unexpanded and silently gave 0.
#[test]
fn last_let_star_binding_unexpanded() {
    let ab = &[("a", 2.0), ("b", 3.0)];
    check_regression(
        "(let* ((v (vec a b))) (vsum v))",
        default1(),
        ab,
        Expect::Value(5.0, &[("a", 1.0), ("b", 1.0)]),
    );
    check_regression(
        "(let* ((v (vec a b))) (vsum v))",
        opts(Dialect::Reference, 1),
        ab,
        Expect::Value(5.0, &[("a", 1.0), ("b", 1.0)]),
    );
    // A `let*` nested in the last RHS: 2a + 1 = 5, d/da = 2.
    check_regression(
        "(let* ((u a) (w (let* ((p (* u 2.0)) (q (+ p 1.0))) q))) w)",
        default1(),
        ab,
        Expect::Value(5.0, &[("a", 2.0)]),
    );
    // A `loop` in the last RHS: 3a = 6, d/da = 3.
    check_regression(
        "(let* ((u a) (w (loop ((i 0) (s 0.0)) (if (= i 3) s (recur (+ i 1) (+ s u)))))) w)",
        default1(),
        ab,
        Expect::Value(6.0, &[("a", 3.0)]),
    );
    // `when` in the last RHS: a² = 4, d/da = 2a = 4.
    check_regression(
        "(let* ((w (when (> a 0.0) (* a a)))) w)",
        default1(),
        ab,
        Expect::Value(4.0, &[("a", 4.0)]),
    );
}

/// Cause: non-tail recursion used the native stack, so (g 100000) overflowed it (SIGSEGV).
#[test]
fn deep_recursion_crash() {
    let g = "(define (g n) (if (= n 0) 0 (+ 1 (g (- n 1)))))";
    check_regression(
        &format!("{g} (g 100000)"),
        default1(),
        &[],
        Expect::Error(ErrorKind::DepthLimit),
    );
    check_regression(
        &format!("{g} (g 100000)"),
        opts(Dialect::Reference, 1),
        &[],
        Expect::Error(ErrorKind::DepthLimit),
    );
    check_regression(
        &format!("{g} (g 5000)"),
        default1(),
        &[],
        Expect::Value(5000.0, &[]),
    );
    // Deep but tail-recursive: constant depth, no error.
    check_regression(
        "(define (t n acc) (if (= n 0) acc (t (- n 1) (+ acc 1.0)))) (t 100000 0.0)",
        default1(),
        &[],
        Expect::Value(100000.0, &[]),
    );
}

/// Cause: `car`/`cdr` did not check their argument, indexing the pair table with a vector's id
/// (`(car (vec a b))` returned b).
#[test]
fn car_type_confusion() {
    let ab = &[("a", 2.0), ("b", 3.0)];
    check_regression(
        "(car (vec a b))",
        default1(),
        ab,
        Expect::Error(ErrorKind::Type),
    );
    check_regression(
        "(cdr (vec a b))",
        default1(),
        ab,
        Expect::Error(ErrorKind::Type),
    );
    check_regression("(car 1.0)", default1(), &[], Expect::Error(ErrorKind::Type));
    check_regression(
        "(car (vec a b))",
        opts(Dialect::Reference, 1),
        ab,
        Expect::Error(ErrorKind::Type),
    );
}

/// Cause: scalar primitives dereferenced a vector's non-existent scalar payload (SIGSEGV on
/// `(sin (vec a b))`).
#[test]
fn scalar_primitive_on_vector() {
    check_regression(
        "(sin (vec 1 2))",
        default1(),
        &[],
        Expect::ElementwiseOrTypeError(&[0.8414709848078965, 0.9092974268256817]),
    );
    check_regression(
        "(exp (vec 0 1))",
        default1(),
        &[],
        Expect::ElementwiseOrTypeError(&[1.0, std::f64::consts::E]),
    );
    check_regression("(< (vec 1 2) 1.0)", default1(), &[], Expect::NoPanic(None));
    check_regression(
        "(= (vec 1 2) (vec 1 2))",
        default1(),
        &[],
        Expect::NoPanic(None),
    );
    check_regression(
        "(+ (list 1 2) 1.0)",
        default1(),
        &[],
        Expect::Error(ErrorKind::Type),
    );
}

/// Cause: at an exact tie both inputs of `min`/`max` received the full adjoint (total 2, not 1);
/// the oracle (torch) splits it half and half.
#[test]
fn min_max_tie_gradient() {
    let tie = &[("a", 1.0), ("b", 1.0)];
    check_regression(
        "(min a b)",
        default1(),
        tie,
        Expect::Value(1.0, &[("a", 0.5), ("b", 0.5)]),
    );
    check_regression(
        "(max a b)",
        default1(),
        tie,
        Expect::Value(1.0, &[("a", 0.5), ("b", 0.5)]),
    );
    check_regression(
        "(max a b)",
        opts(Dialect::Reference, 1),
        tie,
        Expect::Value(1.0, &[("a", 0.5), ("b", 0.5)]),
    );
    // No tie: the larger input takes everything.
    check_regression(
        "(max a b)",
        default1(),
        &[("a", 1.0), ("b", 2.0)],
        Expect::Value(2.0, &[("a", 0.0), ("b", 1.0)]),
    );
}

/// Cause: `eq?` returned false for closures and vectors even when both sides were the same object.
#[test]
fn eq_on_same_closure_or_vector() {
    check_regression(
        "(let ((f (lambda (x) x))) (eq? f f))",
        default1(),
        &[],
        Expect::Bool(true),
    );
    check_regression(
        "(let ((v (vec 1.0 2.0))) (eq? v v))",
        default1(),
        &[],
        Expect::Bool(true),
    );
    check_regression(
        "(eq? (lambda (x) x) (lambda (x) x))",
        default1(),
        &[],
        Expect::Bool(false),
    );
}

/// Cause: a two-armed `if` whose test was false read a non-existent else arm (undefined behaviour).
#[test]
fn two_armed_if_with_false_test() {
    check_regression(
        "(if (> 0.0 1.0) 5.0)",
        default1(),
        &[],
        Expect::NoPanic(None),
    );
    check_regression(
        "(if (> 0.0 1.0) 5.0)",
        opts(Dialect::Reference, 1),
        &[],
        Expect::NoPanic(None),
    );
    check_regression(
        "(begin (if #f 1.0) 2.0)",
        default1(),
        &[],
        Expect::Value(2.0, &[]),
    );
}

/// Cause: a `cond` clause without a body was kept as a one-element list and crashed (SIGSEGV); R7RS
/// says it yields the test's value.
#[test]
fn cond_clause_without_body() {
    check_regression(
        "(cond ((> 1 0)))",
        default1(),
        &[],
        Expect::NoPanic(Some(true)),
    );
    check_regression(
        "(cond ((> 0 1)) (else 3.0))",
        default1(),
        &[],
        Expect::Value(3.0, &[]),
    );
}

/// Cause: no reclamation inside a forward run, so a 10⁶-iteration loop grew the arena by 4 B-wide
/// payloads per iteration; here it must simply finish with the right count.
#[test]
fn million_iteration_forward_loop() {
    check_regression(
        "(loop ((i 0) (s 0.0)) (if (= i 1000000) s (recur (+ i 1) (+ s 1.0))))",
        default1(),
        &[],
        Expect::Forward(1e6),
    );
}
