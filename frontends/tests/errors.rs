//! Bad programs: each gives the expected error kind at the expected line:column, never a panic; and
//! a sweep of truncations and mutations of good programs that must return `Ok` or `Err`, never panic.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use common::{Failure, opts, run};
use ndvm_core::{Dialect, ErrorKind, EvalOptions, Inputs};

/// One bad program.
struct ErrCase {
    src: &'static str,
    kind: ErrorKind,
    /// `line:col` (1-based) of the offending form; `None` where the location is the evaluator's
    /// choice (where a budget happens to run out, which of two disagreeing lanes' forms is named).
    at: Option<&'static str>,
    /// Per-lane values of the parameter `x` (one lane with x = 1 when empty).
    x: &'static [f64],
    /// A step budget smaller than the default.
    max_steps: Option<u64>,
}

const fn case(src: &'static str, kind: ErrorKind, at: &'static str) -> ErrCase {
    ErrCase {
        src,
        kind,
        at: Some(at),
        x: &[],
        max_steps: None,
    }
}

const CASES: &[ErrCase] = &[
    // Unbound `y` on line 3, column 11; detected when the program is decoded.
    case(
        "(define (f x)\n  (+ x 1.0))\n(* 2.0 (f y))",
        ErrorKind::Unbound,
        "3:11",
    ),
    case("(let ((a 1.0))\n  (+ a b))", ErrorKind::Unbound, "2:8"),
    // Unbound even in an arm that never runs (decode-time check).
    case(
        "(if (> x 0.0) 1.0 undefined-thing)",
        ErrorKind::Unbound,
        "1:19",
    ),
    // Arity: a closure called with two arguments names the call form.
    case("(define (f x) x)\n(f 1.0 2.0)", ErrorKind::Arity, "2:1"),
    case("((lambda (a b) a) 1.0)", ErrorKind::Arity, "1:1"),
    // Arity of a primitive.
    case("(+ 1.0 (sin 1.0 2.0))", ErrorKind::Arity, "1:8"),
    // Type errors.
    case("(+ 1.0 'a)", ErrorKind::Type, "1:1"),
    case("(let ((x 2.0))\n  (car x))", ErrorKind::Type, "2:3"),
    case("(cdr 1.0)", ErrorKind::Type, "1:1"),
    case("(vsum 3.0)", ErrorKind::Type, "1:1"),
    // Shape mismatch.
    case("(+ (vec 1 2) (vec 1 2 3))", ErrorKind::Shape, "1:1"),
    case("(dot (vec 1 2) (vec 1 2 3))", ErrorKind::Shape, "1:1"),
    case(
        "(det (mat (vec 1 2 3) (vec 4 5 6)))",
        ErrorKind::Shape,
        "1:1",
    ),
    // Not a procedure.
    case("(1.0 2)", ErrorKind::NotProcedure, "1:1"),
    case("(let ((f 2.0))\n  (f 1.0))", ErrorKind::NotProcedure, "2:3"),
    // Malformed special forms.
    // The malformed binding itself is named.
    case("(let ((x)) x)", ErrorKind::Syntax, "1:7"),
    case("(let (x 1.0) x)", ErrorKind::Syntax, "1:7"),
    case("(lambda)", ErrorKind::Syntax, "1:1"),
    case("(if)", ErrorKind::Syntax, "1:1"),
    // `recur` outside a loop and not in tail position.
    case("(+ 1.0 (recur 2.0))", ErrorKind::Syntax, "1:8"),
    case("(loop ((i 0)) (+ 1 (recur i)))", ErrorKind::Syntax, "1:20"),
    // `recur` with the wrong number of values.
    case("(loop ((i 0) (s 0)) (recur 1))", ErrorKind::Arity, "1:21"),
    // Index out of range.
    case("(ref (vec 1 2) 5)", ErrorKind::Index, "1:1"),
    case("(ref (vec 1 2) -1)", ErrorKind::Index, "1:1"),
    // Runaway loop under a small step budget.
    ErrCase {
        src: "(loop ((i 0)) (recur (+ i 1)))",
        kind: ErrorKind::StepBudget,
        at: None,
        x: &[],
        max_steps: Some(100_000),
    },
    // Deep non-tail recursion under the default depth limit.
    ErrCase {
        src: "(define (g n) (if (= n 0) 0 (+ 1 (g (- n 1)))))\n(g 100000)",
        kind: ErrorKind::DepthLimit,
        at: None,
        x: &[],
        max_steps: None,
    },
    // Lanes disagree on structure: two-element list on one lane, one-element list on the other.
    ErrCase {
        src: "(length (if (> x 0.0) (list 1 2) (list 1)))",
        kind: ErrorKind::Divergence,
        at: None,
        x: &[-1.0, 1.0],
        max_steps: None,
    },
];

/// Evaluates one bad program with gradients and checks the error kind and location.
fn check_error(c: &ErrCase) -> Result<(), String> {
    let lanes = c.x.len().max(1);
    let mut o = opts(Dialect::Default, lanes);
    if let Some(s) = c.max_steps {
        o.max_steps = s;
    }
    let inputs = if c.x.is_empty() {
        Inputs::new().param("x", 1.0)
    } else {
        Inputs::new().param_lanes("x", c.x.to_vec())
    };
    let result = catch_unwind(AssertUnwindSafe(|| run(c.src, o, &inputs, true)))
        .map_err(|_| format!("{:?}: PANICKED", c.src))?;
    match result {
        Ok(e) => Err(format!(
            "{:?}: expected {}, got a value {:?}",
            c.src,
            c.kind.code(),
            e.value
        )),
        Err(Failure::Eval { kind, at, message }) => {
            if kind != c.kind {
                return Err(format!(
                    "{:?}: expected {}, got {} ({message})",
                    c.src,
                    c.kind.code(),
                    kind.code()
                ));
            }
            match (c.at, at) {
                (None, _) => Ok(()),
                (Some(want), Some(got)) if want == got => Ok(()),
                (Some(want), got) => Err(format!(
                    "{:?}: {} at {got:?}, expected at {want} ({message})",
                    c.src,
                    kind.code()
                )),
            }
        }
        Err(f) => Err(format!("{:?}: expected {}, got {f}", c.src, c.kind.code())),
    }
}

#[test]
fn bad_programs_give_the_expected_error_kind_and_location() {
    let failures: Vec<String> = CASES.iter().filter_map(|c| check_error(c).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} error cases wrong:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
}

/// Good programs whose truncations and mutations are swept below; each uses the parameter `x`.
const GOOD: &[&str] = &[
    "(+ (* a x) b)",
    "(let ((u (* x x)) (v (sin x))) (- u v))",
    "(let* ((u (* x 2.0)) (v (+ u 1.0))) (/ v u))",
    "(define (f n acc) (if (= n 0) acc (f (- n 1) (* acc x))))\n(f 4 1.0)",
    "(loop ((i 0) (s 0.0)) (if (< i 5) (recur (+ i 1) (+ s (* x i))) s))",
    "(cond ((< x 0.0) (- x)) ((< x 1.0) (* x x)) (else (sqrt x)))",
    "(letrec ((ev? (lambda (n) (if (= n 0) #t (od? (- n 1))))) (od? (lambda (n) (if (= n 0) #f (ev? (- n 1)))))) (if (ev? 4) x 0.0))",
    "(car (cdr (list x (* 2.0 x) 3.0)))",
    "(vsum (* x (vec 1.0 2.0 3.0)))",
    "(det (mat (vec x 1.0) (vec 2.0 x)))",
    "(logdet (matmul (mat (vec x 0.5) (vec 0.5 2.0)) (transpose (mat (vec x 0.5) (vec 0.5 2.0)))))",
    "(ref (matvec (inv (mat (vec 2.0 x) (vec 0.0 1.0))) (vec x 1.0)) 0)",
    "(fold-left + 0.0 (map (lambda (y) (* y x)) (list 1.0 2.0 3.0)))",
    "(let loop ((k 3) (acc 1.0)) (if (= k 0) acc (loop (- k 1) (* acc x))))",
    "(if (and (> x 0.0) (or (< x 0.5) (> x 1.5))) (* x 2.0) x)",
    "(case (length (list 1 2)) ((1) x) ((2 3) (* 3.0 x)) (else 0.0))",
    "`(1 ,x ,@(list 2.0 3.0))",
    "(begin (when (> a 0.0) 1.0) (unless (> a 0.0) 2.0) (max x 0.5 (min x 2.0)))",
];

#[derive(Clone, Copy, Debug)]
enum Tok {
    Open,
    Close,
    Atom,
}

/// Tokens of `src` with byte ranges: brackets, quote prefixes (as atoms) and maximal atoms.
fn tokens(src: &str) -> Vec<(Tok, usize, usize)> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b';' {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if c == b'(' || c == b'[' {
            out.push((Tok::Open, i, i + 1));
            i += 1;
        } else if c == b')' || c == b']' {
            out.push((Tok::Close, i, i + 1));
            i += 1;
        } else if c == b'\'' || c == b'`' || c == b',' {
            let len = if src[i..].starts_with(",@") { 2 } else { 1 };
            out.push((Tok::Atom, i, i + len));
            i += len;
        } else {
            let start = i;
            while i < bytes.len() && !b"()[] \t\r\n;'`,".contains(&bytes[i]) {
                i += 1;
            }
            out.push((Tok::Atom, start, i));
        }
    }
    out
}

/// Byte ranges of every datum that is an element of a list (for "drop each element").
fn list_elements(toks: &[(Tok, usize, usize)]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut stack: Vec<usize> = Vec::new();
    for (i, (t, s, e)) in toks.iter().enumerate() {
        match t {
            Tok::Open => stack.push(*s),
            Tok::Close => {
                if let Some(start) = stack.pop()
                    && !stack.is_empty()
                {
                    out.push((start, *e));
                }
            }
            Tok::Atom if !stack.is_empty() && i > 0 => out.push((*s, *e)),
            Tok::Atom => {}
        }
    }
    out
}

/// Prefix truncations closed with the missing parentheses, atom replacements, and dropped elements.
fn mutations(src: &str) -> Vec<String> {
    let toks = tokens(src);
    let mut out = Vec::new();
    let mut depth: usize = 0;
    for (t, _, e) in &toks {
        match t {
            Tok::Open => depth += 1,
            Tok::Close => depth = depth.saturating_sub(1),
            Tok::Atom => {}
        }
        out.push(format!("{}{}", &src[..*e], ")".repeat(depth)));
    }
    for (t, s, e) in &toks {
        if let Tok::Atom = t {
            for replacement in ["(car 1)", "0.0", "#f", "x", "(vec 1.0 2.0)", "'()", "+"] {
                out.push(format!("{}{replacement}{}", &src[..*s], &src[*e..]));
            }
        }
    }
    for (s, e) in list_elements(&toks) {
        out.push(format!("{}{}", &src[..s], &src[e..]));
    }
    out
}

#[test]
fn truncated_and_mutated_programs_never_panic() {
    let small = |lanes| {
        let mut o: EvalOptions = opts(Dialect::Default, lanes);
        o.max_steps = 20_000;
        o.max_depth = 200;
        o
    };
    let one = Inputs::new()
        .param("x", 0.7)
        .param("a", 1.5)
        .param("b", -0.5);
    let three = Inputs::new()
        .param_lanes("x", vec![-1.0, 0.3, 2.0])
        .param("a", 1.5)
        .param("b", -0.5);
    let mut panicked = Vec::new();
    let (mut n_run, mut n_ok) = (0usize, 0usize);
    for good in GOOD {
        for (o, inputs) in [(small(1), &one), (small(3), &three)] {
            let r = catch_unwind(AssertUnwindSafe(|| run(good, o, inputs, true)));
            assert!(
                matches!(r, Ok(Ok(_))),
                "good program must evaluate: {good:?} gives {:?}",
                r.map(|x| x.err())
            );
        }
        for m in mutations(good) {
            for (o, inputs) in [(small(1), &one), (small(3), &three)] {
                match catch_unwind(AssertUnwindSafe(|| run(&m, o, inputs, true))) {
                    Err(_) => panicked.push(m.clone()),
                    Ok(Err(Failure::Parse(_))) => {}
                    Ok(r) => {
                        n_run += 1;
                        n_ok += usize::from(r.is_ok());
                    }
                }
            }
        }
    }
    eprintln!("evaluated {n_run} parsed mutants, {n_ok} of them without error");
    assert!(
        panicked.is_empty(),
        "{} inputs panicked:\n{}",
        panicked.len(),
        panicked.join("\n")
    );
    assert!(
        n_run > 3000,
        "the sweep must evaluate thousands of mutants, ran {n_run}"
    );
}
