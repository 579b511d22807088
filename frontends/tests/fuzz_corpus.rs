//! The 200 programs of `seed-data/fuzz_corpus.jsonl` in the default dialect, against two oracles
//! named here: an independent tiny f64 tree-walker with forward-mode dual numbers (kept in this file,
//! sharing no code with the runtime) and a central finite difference of our own forward (step 1e-6).

mod common;

use common::{FuzzProgram, is_close, number, opts, run};
use ndvm_core::Dialect;

/// Central finite-difference step (issue 2 acceptance).
const FD_STEP: f64 = 1e-6;
/// Forward value versus the mini evaluator: the same IEEE operations in the same order, so only
/// libm-level differences could appear (all 200 values are bit-identical today).
const VALUE_TOL: f64 = 1e-12;
/// Reverse mode versus forward-mode duals: both exact, they differ only in rounding order (observed
/// within 1e-15 on all 441 gradients).
const DUAL_TOL: f64 = 1e-13;
/// Reverse mode versus central differences at h = 1e-6: rounding error is about eps·|f|/h ≈ 2e-10
/// per unit of |f|. The mini evaluator's own duals and differences disagree by at most ≈ 4e-10 over
/// all 200 programs (see the self-check, which prints the worst case), so 1e-8 leaves a 25× margin.
const FD_ATOL: f64 = 1e-8;
const FD_RTOL: f64 = 1e-8;

/// A differentiable number: value and tangents with respect to up to four parameters.
#[derive(Clone, Copy, Debug)]
struct Dual {
    v: f64,
    d: [f64; 4],
}

impl Dual {
    fn constant(v: f64) -> Self {
        Dual { v, d: [0.0; 4] }
    }

    /// The value `v` with derivative `scale ·` tangent of `self`.
    fn chain(self, v: f64, scale: f64) -> Self {
        Dual {
            v,
            d: self.d.map(|t| scale * t),
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Val {
    Num(Dual),
    Bool(bool),
}

/// An s-expression of the mini reader.
#[derive(Clone, Debug)]
enum Sx {
    Num(f64),
    Sym(String),
    List(Vec<Sx>),
}

fn read(src: &str) -> Result<Sx, String> {
    let spaced = src.replace('(', " ( ").replace(')', " ) ");
    let mut tokens = spaced.split_whitespace().peekable();
    let sx = read_one(&mut tokens)?;
    match tokens.next() {
        None => Ok(sx),
        Some(t) => Err(format!("trailing token {t}")),
    }
}

fn read_one<'a>(
    tokens: &mut std::iter::Peekable<impl Iterator<Item = &'a str>>,
) -> Result<Sx, String> {
    match tokens.next() {
        None => Err("unexpected end".into()),
        Some("(") => {
            let mut items = Vec::new();
            while tokens.peek() != Some(&")") {
                items.push(read_one(tokens)?);
            }
            tokens.next();
            Ok(Sx::List(items))
        }
        Some(")") => Err("unexpected )".into()),
        Some(t) => Ok(t
            .parse::<f64>()
            .map(Sx::Num)
            .unwrap_or_else(|_| Sx::Sym(t.to_string()))),
    }
}

/// Either a value or a `recur` request travelling to the enclosing `loop`.
enum Flow {
    Val(Val),
    Recur(Vec<Val>),
}

/// The tiny evaluator: lexical environment as a stack of names, and the sequence of branch
/// decisions taken (so a finite difference can be trusted only when the trace does not change).
struct Mini {
    env: Vec<(String, Val)>,
    trace: Vec<bool>,
    /// Set when `abs` was evaluated at exactly 0 with a non-zero tangent (derivative undefined).
    kink: bool,
}

impl Mini {
    fn num(&mut self, sx: &Sx) -> Result<Dual, String> {
        match self.value(sx)? {
            Val::Num(d) => Ok(d),
            Val::Bool(_) => Err("boolean used as a number".into()),
        }
    }

    fn value(&mut self, sx: &Sx) -> Result<Val, String> {
        match self.eval(sx)? {
            Flow::Val(v) => Ok(v),
            Flow::Recur(_) => Err("recur outside tail position".into()),
        }
    }

    fn eval(&mut self, sx: &Sx) -> Result<Flow, String> {
        let items = match sx {
            Sx::Num(x) => return Ok(Flow::Val(Val::Num(Dual::constant(*x)))),
            Sx::Sym(s) => {
                let found = self.env.iter().rev().find(|(n, _)| n == s).map(|(_, v)| *v);
                return found.map(Flow::Val).ok_or_else(|| format!("unbound {s}"));
            }
            Sx::List(items) => items,
        };
        let head = match items.first() {
            Some(Sx::Sym(h)) => h.as_str(),
            _ => return Err(format!("unsupported form {sx:?}")),
        };
        let args = &items[1..];
        match head {
            "if" => {
                let test = match self.value(&args[0])? {
                    Val::Bool(b) => b,
                    Val::Num(_) => return Err("numeric if test (corpus compares only)".into()),
                };
                self.eval(if test { &args[1] } else { &args[2] })
            }
            "let" | "let*" | "loop" => {
                let Sx::List(bindings) = &args[0] else {
                    return Err("bad bindings".into());
                };
                let base = self.env.len();
                let mut names = Vec::new();
                let mut vals = Vec::new();
                for b in bindings {
                    let Sx::List(pair) = b else {
                        return Err("bad binding".into());
                    };
                    let Sx::Sym(name) = &pair[0] else {
                        return Err("bad binding name".into());
                    };
                    let v = self.value(&pair[1])?;
                    if head == "let*" {
                        self.env.push((name.clone(), v));
                    }
                    names.push(name.clone());
                    vals.push(v);
                }
                if head != "let*" {
                    // `let` and `loop` inits are evaluated in the outer scope (parallel binding).
                    self.env
                        .extend(names.iter().cloned().zip(vals.iter().copied()));
                }
                let result = loop {
                    match self.eval(&args[1])? {
                        Flow::Recur(new) if head == "loop" => {
                            if new.len() != names.len() {
                                return Err("recur arity".into());
                            }
                            self.env.truncate(base);
                            self.env.extend(names.iter().cloned().zip(new));
                        }
                        other => break other,
                    }
                };
                self.env.truncate(base);
                Ok(result)
            }
            "recur" => Ok(Flow::Recur(
                args.iter()
                    .map(|a| self.value(a))
                    .collect::<Result<_, _>>()?,
            )),
            "=" | "<" | ">" | "<=" | ">=" => {
                let (a, b) = (self.num(&args[0])?.v, self.num(&args[1])?.v);
                let r = match head {
                    "=" => a == b,
                    "<" => a < b,
                    ">" => a > b,
                    "<=" => a <= b,
                    _ => a >= b,
                };
                self.trace.push(r);
                Ok(Flow::Val(Val::Bool(r)))
            }
            "+" | "-" | "*" | "/" => {
                if args.len() != 2 {
                    return Err(format!("{head} with {} arguments", args.len()));
                }
                let (a, b) = (self.num(&args[0])?, self.num(&args[1])?);
                let mut d = [0.0; 4];
                let v = match head {
                    "+" => {
                        (0..4).for_each(|i| d[i] = a.d[i] + b.d[i]);
                        a.v + b.v
                    }
                    "-" => {
                        (0..4).for_each(|i| d[i] = a.d[i] - b.d[i]);
                        a.v - b.v
                    }
                    "*" => {
                        (0..4).for_each(|i| d[i] = a.d[i] * b.v + a.v * b.d[i]);
                        a.v * b.v
                    }
                    _ => {
                        let q = a.v / b.v;
                        (0..4).for_each(|i| d[i] = (a.d[i] - q * b.d[i]) / b.v);
                        q
                    }
                };
                Ok(Flow::Val(Val::Num(Dual { v, d })))
            }
            "sin" | "cos" | "exp" | "sqrt" | "log" | "abs" => {
                if args.len() != 1 {
                    return Err(format!("{head} with {} arguments", args.len()));
                }
                let a = self.num(&args[0])?;
                let r = match head {
                    "sin" => a.chain(a.v.sin(), a.v.cos()),
                    "cos" => a.chain(a.v.cos(), -a.v.sin()),
                    "exp" => {
                        let e = a.v.exp();
                        a.chain(e, e)
                    }
                    "sqrt" => {
                        let s = a.v.sqrt();
                        a.chain(s, 0.5 / s)
                    }
                    "log" => a.chain(a.v.ln(), 1.0 / a.v),
                    _ => {
                        if a.v == 0.0 && a.d.iter().any(|&t| t != 0.0) {
                            self.kink = true;
                        }
                        a.chain(
                            a.v.abs(),
                            if a.v > 0.0 {
                                1.0
                            } else if a.v < 0.0 {
                                -1.0
                            } else {
                                0.0
                            },
                        )
                    }
                };
                Ok(Flow::Val(Val::Num(r)))
            }
            other => Err(format!("form `{other}` is outside the corpus language")),
        }
    }
}

/// The mini evaluator's value, its dual gradient per parameter, and the branch trace, at `params`.
fn mini_eval(
    sx: &Sx,
    params: &[(String, f64)],
) -> Result<(f64, Vec<f64>, Vec<bool>, bool), String> {
    assert!(params.len() <= 4, "the corpus has at most four parameters");
    let env = params
        .iter()
        .enumerate()
        .map(|(i, (n, v))| {
            let mut d = [0.0; 4];
            d[i] = 1.0;
            (n.clone(), Val::Num(Dual { v: *v, d }))
        })
        .collect();
    let mut mini = Mini {
        env,
        trace: Vec::new(),
        kink: false,
    };
    let out = mini.num(sx)?;
    Ok((out.v, out.d[..params.len()].to_vec(), mini.trace, mini.kink))
}

/// `params` with parameter `i` moved by `delta`.
fn shifted(params: &[(String, f64)], i: usize, delta: f64) -> Vec<(String, f64)> {
    let mut p = params.to_vec();
    p[i].1 += delta;
    p
}

fn inputs_of(params: &[(String, f64)]) -> ndvm_core::Inputs {
    params
        .iter()
        .fold(ndvm_core::Inputs::new(), |acc, (n, v)| acc.param(n, *v))
}

/// Our forward value at `params` (forward-only walk).
fn our_forward(src: &str, params: &[(String, f64)]) -> Result<f64, String> {
    let e = run(src, opts(Dialect::Default, 1), &inputs_of(params), false)
        .map_err(|e| e.to_string())?;
    number(&e, 0)
}

/// Checks one corpus program; returns one line per disagreement.
fn check_fuzz(p: &FuzzProgram) -> Vec<String> {
    let mut bad = Vec::new();
    let sx = read(&p.src).unwrap_or_else(|e| panic!("mini reader, program {}: {e}", p.id));
    let (value, duals, trace, kink) = mini_eval(&sx, &p.params)
        .unwrap_or_else(|e| panic!("mini evaluator, program {}: {e}", p.id));
    assert!(
        !kink,
        "program {}: abs at a kink; neither oracle applies",
        p.id
    );
    let ours = match run(&p.src, opts(Dialect::Default, 1), &p.inputs(), true) {
        Ok(e) => e,
        Err(e) => return vec![format!("#{}: eval_grad failed: {e}", p.id)],
    };
    match number(&ours, 0) {
        Ok(v) if is_close(v, value, VALUE_TOL, VALUE_TOL) => {}
        Ok(v) => bad.push(format!("#{}: value {v:e}, mini evaluator {value:e}", p.id)),
        Err(e) => bad.push(format!("#{}: {e}", p.id)),
    }
    if ours.faults.first() != Some(&false) {
        bad.push(format!(
            "#{}: fault flags {:?} on a finite program",
            p.id, ours.faults
        ));
    }
    for (i, (name, _)) in p.params.iter().enumerate() {
        let Some(g) = ours.grad(name).map(|g| g[0]) else {
            bad.push(format!("#{}: no gradient for {name}", p.id));
            continue;
        };
        if !is_close(g, duals[i], DUAL_TOL, DUAL_TOL) {
            bad.push(format!(
                "#{}: d/d{name} = {g:e}, forward-mode dual {:e}",
                p.id, duals[i]
            ));
        }
        // The difference quotient is only a derivative when no branch flips within the step.
        let (plus, minus) = (
            shifted(&p.params, i, FD_STEP),
            shifted(&p.params, i, -FD_STEP),
        );
        for side in [&plus, &minus] {
            let (_, _, t, _) = mini_eval(&sx, side).expect("mini evaluator at a shifted point");
            assert_eq!(
                t, trace,
                "program {}: a branch flips within ±{FD_STEP} of {name}",
                p.id
            );
        }
        match (our_forward(&p.src, &plus), our_forward(&p.src, &minus)) {
            (Ok(fp), Ok(fm)) => {
                let fd = (fp - fm) / (2.0 * FD_STEP);
                if !is_close(g, fd, FD_ATOL, FD_RTOL) {
                    bad.push(format!(
                        "#{}: d/d{name} = {g:e}, central difference {fd:e}",
                        p.id
                    ));
                }
            }
            (Err(e), _) | (_, Err(e)) => {
                bad.push(format!("#{}: shifted forward failed: {e}", p.id))
            }
        }
    }
    bad
}

#[test]
fn fuzz_corpus_gradients_match_finite_differences_and_values_match_mini_evaluator() {
    let corpus = common::fuzz_corpus();
    assert_eq!(corpus.len(), 200, "fuzz_corpus.jsonl holds 200 programs");
    let failures: Vec<String> = corpus.iter().flat_map(check_fuzz).collect();
    let n_params: usize = corpus.iter().map(|p| p.params.len()).sum();
    assert!(
        failures.is_empty(),
        "{} disagreements over 200 programs / {n_params} gradients:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The test oracle checks itself: its dual-number gradients agree with its own central differences
/// within the tolerances used above, on every corpus program (so FD_ATOL/FD_RTOL are honest).
#[test]
fn mini_evaluator_duals_agree_with_its_own_finite_differences() {
    let corpus = common::fuzz_corpus();
    assert_eq!(corpus.len(), 200);
    let mut worst = 0.0_f64;
    for p in &corpus {
        let sx = read(&p.src).unwrap_or_else(|e| panic!("mini reader, program {}: {e}", p.id));
        let (_, duals, _, _) =
            mini_eval(&sx, &p.params).unwrap_or_else(|e| panic!("program {}: {e}", p.id));
        for (i, (name, _)) in p.params.iter().enumerate() {
            let fp = mini_eval(&sx, &shifted(&p.params, i, FD_STEP)).unwrap().0;
            let fm = mini_eval(&sx, &shifted(&p.params, i, -FD_STEP)).unwrap().0;
            let fd = (fp - fm) / (2.0 * FD_STEP);
            worst = worst.max((fd - duals[i]).abs() / (FD_ATOL + FD_RTOL * duals[i].abs()));
            common::assert_close(
                duals[i],
                fd,
                FD_ATOL,
                FD_RTOL,
                &format!("program {} d/d{name}", p.id),
            );
        }
    }
    eprintln!("worst |dual - fd| as a fraction of the tolerance: {worst:.3}");
}
