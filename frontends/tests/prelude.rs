//! `bootstrap/prelude.scm` against the native list primitives: one runner walks
//! `tests/data/prelude/*.scm`; each case's value and gradients with the prelude's definitions
//! (which replace the native `map`, `append`, `length`, ...) equal the native run's, and the
//! prelude's run took more steps (its Scheme definitions ran, not the primitives). A case
//! headed `;; native: none` uses procedures with no native twin (`assoc`, `member`,
//! `list-tail`, ...) and states its value and gradients. Every case also runs through the
//! self-hosted evaluator (`bootstrap/evaluator.scm`) with the prelude, to 1e-9.

mod common;

use std::path::Path;

use common::{assert_close, opts};
use ndvm_core::{Dialect, Evaluation, Evaluator, Heap, Inputs, Program};

fn bootstrap(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../bootstrap")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// One case's header.
#[derive(Default)]
struct Case {
    dialect: Option<Dialect>,
    inputs: Inputs,
    native: bool,
    expect: Option<f64>,
    grad: Vec<(String, f64)>,
}

fn header(src: &str, ctx: &str) -> Case {
    let mut case = Case {
        native: true,
        ..Case::default()
    };
    let num = |v: &str| {
        v.parse::<f64>()
            .unwrap_or_else(|e| panic!("{ctx}: `{v}`: {e}"))
    };
    for line in src.lines().map_while(|l| l.strip_prefix(";;")) {
        let Some((key, rest)) = line.trim().split_once(':') else {
            continue;
        };
        let pairs = || {
            rest.split_whitespace().map(|kv| {
                let (k, v) = kv
                    .split_once('=')
                    .unwrap_or_else(|| panic!("{ctx}: `{kv}`"));
                (k.to_string(), num(v))
            })
        };
        match key {
            "dialect" if rest.trim() == "reference" => case.dialect = Some(Dialect::Reference),
            "bind" => pairs().for_each(|(k, v)| case.inputs = case.inputs.clone().param(&k, v)),
            "native" if rest.trim() == "none" => case.native = false,
            "expect" => case.expect = Some(num(rest.trim())),
            "grad" => case.grad = pairs().collect(),
            _ => {}
        }
    }
    case
}

/// Runs `src` (after the prelude when `prelude`, through the evaluator when `via`); returns the
/// evaluation and the steps it took.
fn run(src: &str, case: &Case, prelude: bool, via: bool) -> (Evaluation, u64) {
    let mut heap = Heap::new();
    let mut program = ndvm_frontends::scheme::parse(&mut heap, src).expect("case parses");
    if prelude {
        let pre = ndvm_frontends::scheme::parse(&mut heap, &bootstrap("prelude.scm"))
            .expect("prelude parses");
        program = ndvm_core::selfhost::with_prelude(&heap, &pre, &program).expect("prelude");
    }
    if via {
        let ev = ndvm_frontends::scheme::parse(&mut heap, &bootstrap("evaluator.scm"))
            .expect("evaluator parses");
        let names: Vec<&str> = case
            .inputs
            .entries
            .iter()
            .map(|i| i.name.as_str())
            .collect();
        program = ndvm_core::selfhost::via(&mut heap, &ev, &program, &names).expect("via");
    }
    eval(&mut heap, &program, case)
}

fn eval(heap: &mut Heap, program: &Program, case: &Case) -> (Evaluation, u64) {
    let o = opts(case.dialect.unwrap_or(Dialect::Default), 1);
    let mut ev = Evaluator::new(o);
    let e = ev
        .eval_grad(heap, program, &case.inputs)
        .unwrap_or_else(|e| panic!("{e:?}"));
    (e, ev.last_steps())
}

fn value(e: &Evaluation, ctx: &str) -> f64 {
    e.value
        .number(0)
        .unwrap_or_else(|| panic!("{ctx}: not a number: {:?}", e.value))
}

/// `got` equals `want` (value and every gradient) within `rtol`.
fn check_same(got: &Evaluation, want: &Evaluation, rtol: f64, ctx: &str) {
    assert_close(value(got, ctx), value(want, ctx), 1e-15, rtol, ctx);
    assert_eq!(got.grads.len(), want.grads.len(), "{ctx}: gradient count");
    for (g, w) in got.grads.iter().zip(&want.grads) {
        assert_eq!(g.name, w.name, "{ctx}");
        assert_close(
            g.per_lane[0],
            w.per_lane[0],
            1e-15,
            rtol,
            &format!("{ctx} d/d{}", g.name),
        );
    }
}

fn check_case(path: &Path) {
    let ctx = path.file_name().unwrap().to_string_lossy().into_owned();
    let src = std::fs::read_to_string(path).expect("case file");
    let case = header(&src, &ctx);
    let (with, with_steps) = run(&src, &case, true, false);
    if case.native {
        let (native, native_steps) = run(&src, &case, false, false);
        check_same(&with, &native, 1e-12, &ctx);
        assert!(
            with_steps > native_steps,
            "{ctx}: the prelude's run took {with_steps} steps, the native {native_steps}: did the prelude's definitions run?"
        );
    } else {
        let expect = case
            .expect
            .unwrap_or_else(|| panic!("{ctx}: `native: none` needs `expect:`"));
        assert_close(value(&with, &ctx), expect, 1e-12, 1e-12, &ctx);
        assert_eq!(
            case.grad.len(),
            case.inputs.entries.len(),
            "{ctx}: a grad per bind"
        );
        for (name, g) in &case.grad {
            let got = with
                .grad(name)
                .unwrap_or_else(|| panic!("{ctx}: no d/d{name}"))[0];
            assert_close(got, *g, 1e-12, 1e-12, &format!("{ctx} d/d{name}"));
        }
    }
    let (via, _) = run(&src, &case, true, true);
    check_same(&via, &with, 1e-9, &format!("{ctx} through the evaluator"));
}

#[test]
fn prelude_agrees_with_the_native_list_primitives() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/prelude");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "scm"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "prelude cases in {}", dir.display());
    for f in &files {
        check_case(f);
    }
}

/// Long lists run in constant depth: the prelude's procedures are loops.
#[test]
fn prelude_procedures_run_long_lists_in_constant_depth() {
    let src = "(define (iota n) (loop ((k n) (acc '())) (if (= k 0) acc (recur (- k 1) (cons k acc))))) \
               (fold-right + 0 (map (lambda (x) (* a x)) (append (filter positive? (iota 20000)) (list 1))))";
    let case = Case {
        inputs: Inputs::new().param("a", 0.5),
        native: true,
        ..Case::default()
    };
    let (e, _) = run(src, &case, true, false);
    assert_close(
        value(&e, "iota"),
        0.5 * (20000.0 * 20001.0 / 2.0 + 1.0),
        0.0,
        1e-12,
        "sum",
    );
}
