//! The independent reference evaluator: plain f64 over the fuzzer's own [`Sx`], sharing no kernel
//! with the runtime. Recursion follows the program's nesting with an explicit depth bound
//! ([`MAX_DEPTH`]) and a step budget, so no generated or shrunk program can overflow the stack.
//! Every non-smooth decision (comparisons, floor, min/max, abs sign) is appended to a trace, so a
//! finite difference is trusted only where the trace does not change.

use std::rc::Rc;

use crate::sx::Sx;

/// Deepest evaluation nesting (program nesting plus call depth) before the reference gives up.
pub const MAX_DEPTH: usize = 400;
/// Work budget of one reference run.
pub const MAX_STEPS: u64 = 2_000_000;

/// A reference value.
#[derive(Clone, Debug)]
pub enum Val {
    /// A number.
    Num(f64),
    /// A boolean.
    Bool(bool),
    /// A vector.
    Vector(Vec<f64>),
    /// A row-major matrix.
    Matrix(usize, usize, Vec<f64>),
    /// A proper list.
    List(Rc<Vec<Val>>),
    /// A quoted symbol.
    Sym(Rc<str>),
    /// A closure: parameters, body, defining frame.
    Closure(Rc<Closure>),
    /// A primitive used as a value.
    Prim(Rc<str>),
}

/// A lambda's parameters and body with the frame it closes over.
#[derive(Debug)]
pub struct Closure {
    params: Vec<String>,
    body: Sx,
    frame: usize,
}

/// Why the reference could not give a value.
#[derive(Clone, Debug, PartialEq)]
pub enum RefError {
    /// The program is outside the subset or ill-typed (a generator or shrinker artefact).
    Unsupported(String),
    /// Depth or step budget exhausted.
    Budget,
}

type R<T> = Result<T, RefError>;

fn bad<T>(msg: impl Into<String>) -> R<T> {
    Err(RefError::Unsupported(msg.into()))
}

enum Flow {
    Val(Val),
    Recur(Vec<Val>),
}

struct Frame {
    vars: Vec<(String, Val)>,
    parent: Option<usize>,
}

/// The result of one reference run: the value and the trace of decisions.
#[derive(Clone, Debug)]
pub struct RefRun {
    /// The program's value.
    pub value: Val,
    /// Non-smooth decisions in evaluation order.
    pub trace: Vec<u64>,
    /// Whether some decision was within rounding of flipping (a comparison of nearly equal
    /// numbers, a floor of a nearly whole number): a last-bit difference in how the runtime
    /// computes its operands may take the other branch there.
    pub near_tie: bool,
    /// The same within single precision's rounding (relative 1e-5): an `f32` run may take the
    /// other branch there.
    pub near_tie_f32: bool,
    /// The largest magnitude of any number a primitive produced.
    pub max_abs: f64,
    /// The largest scale of the products a determinant, log determinant or inverse cancelled
    /// inside ([`determinant_scale`]): where the runtime rounds, however small the result.
    pub cancel_scale: f64,
}

/// Relative margin under which a decision counts as a near tie.
const TIE: f64 = 1e-9;
/// Relative margin under which a decision counts as a near tie in single precision.
const TIE_F32: f64 = 1e-5;

/// Evaluates `program` with the scalar globals `globals`.
pub fn evaluate(program: &Sx, globals: &[(String, f64)]) -> R<RefRun> {
    let mut ev = Reference {
        frames: vec![Frame {
            vars: globals
                .iter()
                .map(|(n, v)| (n.clone(), Val::Num(*v)))
                .collect(),
            parent: None,
        }],
        trace: Vec::new(),
        near_tie: false,
        near_tie_f32: false,
        max_abs: 0.0,
        cancel_scale: 0.0,
        depth: 0,
        steps: 0,
    };
    let value = ev.value(program, 0)?;
    Ok(RefRun {
        value,
        trace: ev.trace,
        near_tie: ev.near_tie,
        near_tie_f32: ev.near_tie_f32,
        max_abs: ev.max_abs,
        cancel_scale: ev.cancel_scale,
    })
}

struct Reference {
    frames: Vec<Frame>,
    trace: Vec<u64>,
    near_tie: bool,
    near_tie_f32: bool,
    max_abs: f64,
    cancel_scale: f64,
    depth: usize,
    steps: u64,
}

const PRIMS: &[&str] = &[
    "+",
    "-",
    "*",
    "/",
    "min",
    "max",
    "sin",
    "cos",
    "tan",
    "exp",
    "log",
    "sqrt",
    "abs",
    "tanh",
    "atan",
    "square",
    "sigmoid",
    "floor",
    "pow",
    "expt",
    "=",
    "<",
    ">",
    "<=",
    ">=",
    "not",
    "cons",
    "car",
    "cdr",
    "list",
    "length",
    "reverse",
    "append",
    "list-ref",
    "map",
    "fold",
    "fold-left",
    "eval",
    "vec",
    "mat",
    "ref",
    "dot",
    "norm",
    "vsum",
    "scale",
    "matvec",
    "matmul",
    "transpose",
    "trace",
    "det",
    "logdet",
    "inv",
    "outer",
    "eye",
    "zeros",
    "ones",
    "null?",
];

impl Reference {
    fn lookup(&self, name: &str, mut frame: usize) -> R<Val> {
        loop {
            let f = &self.frames[frame];
            if let Some((_, v)) = f.vars.iter().rev().find(|(n, _)| n == name) {
                return Ok(v.clone());
            }
            match f.parent {
                Some(p) => frame = p,
                None => break,
            }
        }
        if PRIMS.contains(&name) {
            return Ok(Val::Prim(name.into()));
        }
        bad(format!("unbound {name}"))
    }

    fn push_frame(&mut self, parent: usize, vars: Vec<(String, Val)>) -> usize {
        self.frames.push(Frame {
            vars,
            parent: Some(parent),
        });
        self.frames.len() - 1
    }

    fn value(&mut self, sx: &Sx, frame: usize) -> R<Val> {
        match self.eval(sx, frame)? {
            Flow::Val(v) => Ok(v),
            Flow::Recur(_) => bad("recur outside a loop's tail"),
        }
    }

    fn num(&mut self, sx: &Sx, frame: usize) -> R<f64> {
        match self.value(sx, frame)? {
            Val::Num(x) => Ok(x),
            v => bad(format!("expected a number, got {v:?}")),
        }
    }

    fn truth(&mut self, sx: &Sx, frame: usize) -> R<bool> {
        // Default dialect: only #f is false.
        Ok(!matches!(self.value(sx, frame)?, Val::Bool(false)))
    }

    fn eval(&mut self, sx: &Sx, frame: usize) -> R<Flow> {
        self.steps += 1;
        if self.steps > MAX_STEPS || self.depth >= MAX_DEPTH {
            return Err(RefError::Budget);
        }
        self.depth += 1;
        let res = self.eval_inner(sx, frame);
        self.depth -= 1;
        res
    }

    fn eval_inner(&mut self, sx: &Sx, frame: usize) -> R<Flow> {
        let items = match sx {
            Sx::Num(x) => return Ok(Flow::Val(Val::Num(*x))),
            Sx::Bool(b) => return Ok(Flow::Val(Val::Bool(*b))),
            Sx::Sym(s) => return self.lookup(s, frame).map(Flow::Val),
            Sx::List(items) => items,
        };
        let Some(first) = items.first() else {
            return bad("empty application");
        };
        let args = &items[1..];
        if let Sx::Sym(head) = first {
            let shadowed = self
                .lookup(head, frame)
                .is_ok_and(|v| !matches!(v, Val::Prim(_)));
            if !shadowed && let Some(flow) = self.special(head, args, frame)? {
                return Ok(flow);
            }
        }
        let f = self.value(first, frame)?;
        let mut vals = Vec::with_capacity(args.len());
        for a in args {
            vals.push(self.value(a, frame)?);
        }
        self.apply(&f, vals).map(Flow::Val)
    }

    /// Special forms; `None` when `head` is not one.
    fn special(&mut self, head: &str, args: &[Sx], frame: usize) -> R<Option<Flow>> {
        Ok(Some(match head {
            "quote" => match args {
                [d] => Flow::Val(quoted(d)?),
                _ => return bad("quote arity"),
            },
            "if" => match args {
                [c, t, e] => {
                    let b = self.truth(c, frame)?;
                    self.eval(if b { t } else { e }, frame)?
                }
                _ => return bad("if arity"),
            },
            "and" | "or" => {
                let is_and = head == "and";
                let mut last = Val::Bool(is_and);
                for a in args {
                    last = self.value(a, frame)?;
                    let t = !matches!(last, Val::Bool(false));
                    if t != is_and {
                        break;
                    }
                }
                Flow::Val(last)
            }
            "cond" => {
                for clause in args {
                    let Sx::List(parts) = clause else {
                        return bad("cond clause");
                    };
                    let [test, body] = parts.as_slice() else {
                        return bad("cond clause shape");
                    };
                    let hit =
                        matches!(test, Sx::Sym(s) if s == "else") || self.truth(test, frame)?;
                    if hit {
                        return self.eval(body, frame).map(Some);
                    }
                }
                return bad("cond without else");
            }
            "case" => {
                let Some((key, clauses)) = args.split_first() else {
                    return bad("case arity");
                };
                let k = self.num(key, frame)?;
                for clause in clauses {
                    let Sx::List(parts) = clause else {
                        return bad("case clause");
                    };
                    let [data, body] = parts.as_slice() else {
                        return bad("case clause shape");
                    };
                    let hit = match data {
                        Sx::Sym(s) if s == "else" => true,
                        Sx::List(ds) => ds.iter().any(|d| matches!(d, Sx::Num(x) if *x == k)),
                        _ => return bad("case data"),
                    };
                    if hit {
                        return self.eval(body, frame).map(Some);
                    }
                }
                return bad("case without else");
            }
            "let" | "let*" | "letrec" => return self.eval_let(head, args, frame).map(Some),
            "begin" => return self.eval_body(args, frame).map(Some),
            "when" | "unless" => {
                let Some((test, body)) = args.split_first() else {
                    return bad("when arity");
                };
                if self.truth(test, frame)? == (head == "when") {
                    return self.eval_body(body, frame).map(Some);
                }
                Flow::Val(Val::List(Rc::new(Vec::new())))
            }
            "set!" => match args {
                [Sx::Sym(name), e] => {
                    let v = self.value(e, frame)?;
                    self.assign(name, v, frame)?;
                    Flow::Val(Val::List(Rc::new(Vec::new())))
                }
                _ => return bad("set! shape"),
            },
            "lambda" => match args {
                [Sx::List(ps), body] => {
                    let mut params = Vec::new();
                    for p in ps {
                        let Sx::Sym(p) = p else {
                            return bad("lambda parameter");
                        };
                        params.push(p.clone());
                    }
                    Flow::Val(Val::Closure(Rc::new(Closure {
                        params,
                        body: body.clone(),
                        frame,
                    })))
                }
                _ => return bad("lambda shape"),
            },
            "loop" => return self.eval_loop(args, frame).map(Some),
            "recur" => {
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    vals.push(self.value(a, frame)?);
                }
                Flow::Recur(vals)
            }
            _ => return Ok(None),
        }))
    }

    fn bindings(bs: &Sx) -> R<Vec<(&str, &Sx)>> {
        let Sx::List(bs) = bs else {
            return bad("bindings");
        };
        bs.iter()
            .map(|b| match b {
                Sx::List(pair) => match pair.as_slice() {
                    [Sx::Sym(n), e] => Ok((n.as_str(), e)),
                    _ => bad("binding shape"),
                },
                _ => bad("binding"),
            })
            .collect()
    }

    /// A body: every form in order, the last one's flow.
    fn eval_body(&mut self, body: &[Sx], frame: usize) -> R<Flow> {
        let Some((last, init)) = body.split_last() else {
            return bad("empty body");
        };
        for form in init {
            self.value(form, frame)?;
        }
        self.eval(last, frame)
    }

    fn assign(&mut self, name: &str, v: Val, mut frame: usize) -> R<()> {
        loop {
            let f = &mut self.frames[frame];
            if let Some(slot) = f.vars.iter_mut().rev().find(|(n, _)| n == name) {
                slot.1 = v;
                return Ok(());
            }
            match f.parent {
                Some(p) => frame = p,
                None => return bad(format!("set! of unbound {name}")),
            }
        }
    }

    fn eval_let(&mut self, head: &str, args: &[Sx], frame: usize) -> R<Flow> {
        let Some((bs, body)) = args.split_first() else {
            return bad("let shape");
        };
        let bs = Self::bindings(bs)?;
        let inner = match head {
            "let" => {
                let mut vars = Vec::with_capacity(bs.len());
                for (n, e) in bs {
                    vars.push((n.to_string(), self.value(e, frame)?));
                }
                self.push_frame(frame, vars)
            }
            "let*" => {
                let mut f = frame;
                for (n, e) in bs {
                    let v = self.value(e, f)?;
                    f = self.push_frame(f, vec![(n.to_string(), v)]);
                }
                f
            }
            _ => {
                let f = self.push_frame(frame, Vec::new());
                for (n, e) in bs {
                    let v = self.value(e, f)?;
                    self.frames[f].vars.push((n.to_string(), v));
                }
                f
            }
        };
        self.eval_body(body, inner)
    }

    fn eval_loop(&mut self, args: &[Sx], frame: usize) -> R<Flow> {
        let [bs, body] = args else {
            return bad("loop shape");
        };
        let bs = Self::bindings(bs)?;
        let names: Vec<String> = bs.iter().map(|(n, _)| n.to_string()).collect();
        let mut vals = Vec::with_capacity(bs.len());
        for (_, e) in &bs {
            vals.push(self.value(e, frame)?);
        }
        loop {
            self.steps += 1;
            if self.steps > MAX_STEPS {
                return Err(RefError::Budget);
            }
            let f = self.push_frame(frame, names.iter().cloned().zip(vals).collect());
            match self.eval(body, f)? {
                Flow::Recur(new) if new.len() == names.len() => vals = new,
                Flow::Recur(_) => return bad("recur arity"),
                v => return Ok(v),
            }
        }
    }

    fn apply(&mut self, f: &Val, args: Vec<Val>) -> R<Val> {
        match f {
            Val::Prim(name) => {
                let scale = determinant_scale(name, &args);
                let v = self.prim(name, args)?;
                let m = match &v {
                    Val::Num(x) => x.abs(),
                    Val::Vector(xs) | Val::Matrix(_, _, xs) => {
                        xs.iter().fold(0.0_f64, |m, x| m.max(x.abs()))
                    }
                    _ => 0.0,
                };
                // NaN (a NaN matrix) or infinity (a singular one's log) counts as huge.
                self.cancel_scale = if scale.is_nan() {
                    f64::INFINITY
                } else {
                    self.cancel_scale.max(scale)
                };
                // NaN counts as huge.
                self.max_abs = if m.is_nan() {
                    f64::INFINITY
                } else {
                    self.max_abs.max(m)
                };
                Ok(v)
            }
            Val::Closure(c) => {
                if c.params.len() != args.len() {
                    return bad("closure arity");
                }
                if self.depth >= MAX_DEPTH {
                    return Err(RefError::Budget);
                }
                let c = Rc::clone(c);
                let f = self.push_frame(c.frame, c.params.iter().cloned().zip(args).collect());
                self.depth += 1;
                let res = self.value(&c.body, f);
                self.depth -= 1;
                res
            }
            v => bad(format!("not a procedure: {v:?}")),
        }
    }

    fn mark(&mut self, x: u64) {
        self.trace.push(x);
    }

    fn prim(&mut self, name: &str, args: Vec<Val>) -> R<Val> {
        let n = args.len();
        let num = |v: &Val| match v {
            Val::Num(x) => Ok(*x),
            v => bad(format!("{name}: expected a number, got {v:?}")),
        };
        let arg1 = || -> R<f64> {
            match args.as_slice() {
                [a] => num(a),
                _ => bad(format!("{name}: arity {n}")),
            }
        };
        let unary = |f: fn(f64) -> f64| -> R<Val> {
            match args.as_slice() {
                [a] => map1(a, f),
                _ => bad(format!("{name}: arity {n}")),
            }
        };
        Ok(match name {
            "+" | "*" | "-" | "/" => return arith(name, args),
            "min" | "max" => {
                let xs: Vec<f64> = args.iter().map(num).collect::<R<_>>()?;
                let Some(&first) = xs.first() else {
                    return bad("min arity");
                };
                let mut best = first;
                for (i, &x) in xs.iter().enumerate().skip(1) {
                    let better = if name == "min" { x < best } else { x > best };
                    self.mark(u64::from(better) * (i as u64 + 1));
                    if better {
                        best = x;
                    }
                }
                Val::Num(best)
            }
            "sin" => unary(f64::sin)?,
            "cos" => unary(f64::cos)?,
            "tan" => unary(f64::tan)?,
            "exp" => unary(f64::exp)?,
            "log" => unary(f64::ln)?,
            "sqrt" => unary(f64::sqrt)?,
            "tanh" => unary(f64::tanh)?,
            "atan" => unary(f64::atan)?,
            "square" => unary(|x| x * x)?,
            "sigmoid" => unary(|x| 1.0 / (1.0 + (-x).exp()))?,
            "abs" => {
                let x = arg1()?;
                self.mark(u64::from(x < 0.0));
                Val::Num(x.abs())
            }
            "floor" => {
                let x = arg1()?;
                self.near_tie |= (x - x.round()).abs() <= TIE * (1.0 + x.abs());
                self.near_tie_f32 |= (x - x.round()).abs() <= TIE_F32 * (1.0 + x.abs());
                let x = x.floor();
                self.mark(x.to_bits());
                Val::Num(x)
            }
            "pow" | "expt" => match args.as_slice() {
                [a, b] => Val::Num(num(a)?.powf(num(b)?)),
                _ => return bad("pow arity"),
            },
            "=" | "<" | ">" | "<=" | ">=" => {
                let xs: Vec<f64> = args.iter().map(num).collect::<R<_>>()?;
                let mut all = true;
                for w in xs.windows(2) {
                    let gap = (w[0] - w[1]).abs() / (1.0 + w[0].abs() + w[1].abs());
                    self.near_tie |= gap <= TIE;
                    self.near_tie_f32 |= gap <= TIE_F32;
                    let r = match name {
                        "=" => w[0] == w[1],
                        "<" => w[0] < w[1],
                        ">" => w[0] > w[1],
                        "<=" => w[0] <= w[1],
                        _ => w[0] >= w[1],
                    };
                    all &= r;
                }
                self.mark(u64::from(all));
                Val::Bool(all)
            }
            "not" => match args.as_slice() {
                [a] => Val::Bool(matches!(a, Val::Bool(false))),
                _ => return bad("not arity"),
            },
            "eval" => match args.as_slice() {
                [v] => {
                    let code = unquote(v)?;
                    return self.value(&code, 0);
                }
                _ => return bad("eval arity"),
            },
            "map" | "fold" | "fold-left" => return self.higher_order(name, args),
            _ => return lists_and_tensors(name, args),
        })
    }

    fn higher_order(&mut self, name: &str, args: Vec<Val>) -> R<Val> {
        let mut args = args.into_iter();
        let f = args.next().ok_or(RefError::Unsupported("arity".into()))?;
        if name == "map" {
            let Some(Val::List(xs)) = args.next() else {
                return bad("map expects one list");
            };
            let mut out = Vec::with_capacity(xs.len());
            for x in xs.iter() {
                out.push(self.apply(&f, vec![x.clone()])?);
            }
            return Ok(Val::List(Rc::new(out)));
        }
        let (Some(mut acc), Some(Val::List(xs))) = (args.next(), args.next()) else {
            return bad("fold shape");
        };
        for x in xs.iter() {
            acc = self.apply(&f, vec![acc, x.clone()])?;
        }
        Ok(acc)
    }
}

/// Quoted data as a value.
fn quoted(d: &Sx) -> R<Val> {
    Ok(match d {
        Sx::Num(x) => Val::Num(*x),
        Sx::Bool(b) => Val::Bool(*b),
        Sx::Sym(s) => Val::Sym(s.as_str().into()),
        Sx::List(items) => Val::List(Rc::new(items.iter().map(quoted).collect::<R<_>>()?)),
    })
}

/// A value built as code back to an s-expression, for `eval`.
fn unquote(v: &Val) -> R<Sx> {
    Ok(match v {
        Val::Num(x) => Sx::Num(*x),
        Val::Bool(b) => Sx::Bool(*b),
        Val::Sym(s) => Sx::Sym(s.to_string()),
        Val::List(items) => Sx::List(items.iter().map(unquote).collect::<R<_>>()?),
        other => return bad(format!("eval of {other:?}")),
    })
}

fn map1(v: &Val, f: fn(f64) -> f64) -> R<Val> {
    Ok(match v {
        Val::Num(x) => Val::Num(f(*x)),
        Val::Vector(xs) => Val::Vector(xs.iter().map(|&x| f(x)).collect()),
        Val::Matrix(r, c, xs) => Val::Matrix(*r, *c, xs.iter().map(|&x| f(x)).collect()),
        v => return bad(format!("elementwise op on {v:?}")),
    })
}

/// Elements and shape of a numeric value: (rows, cols) with (0, 0) for a scalar, (0, n) a vector.
fn elems(v: &Val) -> R<((usize, usize), Vec<f64>)> {
    Ok(match v {
        Val::Num(x) => ((0, 0), vec![*x]),
        Val::Vector(xs) => ((0, xs.len()), xs.clone()),
        Val::Matrix(r, c, xs) => ((*r, *c), xs.clone()),
        v => return bad(format!("arithmetic on {v:?}")),
    })
}

fn rebuild(shape: (usize, usize), xs: Vec<f64>) -> Val {
    match shape {
        (0, 0) => Val::Num(xs[0]),
        (0, _) => Val::Vector(xs),
        (r, c) => Val::Matrix(r, c, xs),
    }
}

fn binop(op: &str, a: &Val, b: &Val) -> R<Val> {
    let (sa, xa) = elems(a)?;
    let (sb, xb) = elems(b)?;
    let shape = match (sa, sb) {
        ((0, 0), s) | (s, (0, 0)) => s,
        (s, t) if s == t => s,
        _ => return bad(format!("{op}: shapes {sa:?} and {sb:?}")),
    };
    let n = xa.len().max(xb.len());
    let f = |x: f64, y: f64| match op {
        "+" => x + y,
        "-" => x - y,
        "*" => x * y,
        _ => x / y,
    };
    let out = (0..n)
        .map(|i| {
            f(
                xa[if xa.len() == 1 { 0 } else { i }],
                xb[if xb.len() == 1 { 0 } else { i }],
            )
        })
        .collect();
    Ok(rebuild(shape, out))
}

fn arith(op: &str, args: Vec<Val>) -> R<Val> {
    let mut it = args.into_iter();
    let Some(first) = it.next() else {
        return Ok(Val::Num(if op == "*" { 1.0 } else { 0.0 }));
    };
    let rest: Vec<Val> = it.collect();
    if rest.is_empty() {
        return match op {
            "-" => map1(&first, |x| -x),
            "/" => map1(&first, |x| 1.0 / x),
            _ => Ok(first),
        };
    }
    let mut acc = first;
    for v in &rest {
        acc = binop(op, &acc, v)?;
    }
    Ok(acc)
}

fn list_of(v: &Val) -> R<&Rc<Vec<Val>>> {
    match v {
        Val::List(xs) => Ok(xs),
        v => bad(format!("expected a list, got {v:?}")),
    }
}

fn vector_of(v: &Val) -> R<&[f64]> {
    match v {
        Val::Vector(xs) => Ok(xs),
        v => bad(format!("expected a vector, got {v:?}")),
    }
}

fn square_of(v: &Val) -> R<(usize, &[f64])> {
    match v {
        Val::Matrix(r, c, xs) if r == c => Ok((*r, xs)),
        v => bad(format!("expected a square matrix, got {v:?}")),
    }
}

fn index(v: &Val) -> R<usize> {
    match v {
        Val::Num(x) if *x >= 0.0 && x.fract() == 0.0 && *x < 1e6 => Ok(*x as usize),
        v => bad(format!("bad index {v:?}")),
    }
}

/// The list and tensor primitives, by name (lists first, then tensors).
fn lists_and_tensors(name: &str, args: Vec<Val>) -> R<Val> {
    match name {
        "cons" | "car" | "cdr" | "null?" | "list" | "length" | "reverse" | "append"
        | "list-ref" => lists(name, args),
        _ => tensors(name, args),
    }
}

/// `(name …)` of a list primitive, or an unsupported call.
fn lists(name: &str, args: Vec<Val>) -> R<Val> {
    let a = args.as_slice();
    Ok(match (name, a) {
        ("cons", [x, l]) => {
            let mut out = vec![x.clone()];
            out.extend(list_of(l)?.iter().cloned());
            Val::List(Rc::new(out))
        }
        ("car", [l]) => list_of(l)?
            .first()
            .cloned()
            .ok_or(RefError::Unsupported("car of ()".into()))?,
        ("cdr", [l]) => {
            let xs = list_of(l)?;
            if xs.is_empty() {
                return bad("cdr of ()");
            }
            Val::List(Rc::new(xs[1..].to_vec()))
        }
        ("null?", [l]) => Val::Bool(list_of(l)?.is_empty()),
        ("list", _) => Val::List(Rc::new(args.clone())),
        ("length", [l]) => Val::Num(list_of(l)?.len() as f64),
        ("reverse", [l]) => Val::List(Rc::new(list_of(l)?.iter().rev().cloned().collect())),
        ("append", _) => {
            let mut out = Vec::new();
            for l in a {
                out.extend(list_of(l)?.iter().cloned());
            }
            Val::List(Rc::new(out))
        }
        ("list-ref", [l, i]) => list_of(l)?
            .get(index(i)?)
            .cloned()
            .ok_or(RefError::Unsupported("list-ref range".into()))?,
        _ => {
            return bad(format!(
                "unsupported primitive call ({name} …{} args)",
                a.len()
            ));
        }
    })
}

/// `(name …)` of a vector or matrix primitive, or an unsupported call.
fn tensors(name: &str, args: Vec<Val>) -> R<Val> {
    let a = args.as_slice();
    Ok(match (name, a) {
        ("vec", _) => Val::Vector(
            a.iter()
                .map(|v| match v {
                    Val::Num(x) => Ok(*x),
                    _ => bad("vec of a non-number"),
                })
                .collect::<R<_>>()?,
        ),
        ("mat", _) => {
            let rows: Vec<&[f64]> = a.iter().map(vector_of).collect::<R<_>>()?;
            let c = rows.first().map_or(0, |r| r.len());
            if rows.is_empty() || rows.iter().any(|r| r.len() != c) {
                return bad("ragged mat");
            }
            Val::Matrix(rows.len(), c, rows.concat())
        }
        ("ref", [Val::Vector(xs), i]) => Val::Num(
            *xs.get(index(i)?)
                .ok_or(RefError::Unsupported("ref".into()))?,
        ),
        ("ref", [Val::Matrix(r, c, xs), i]) => {
            let i = index(i)?;
            if i >= *r {
                return bad("ref range");
            }
            Val::Vector(xs[i * c..(i + 1) * c].to_vec())
        }
        ("ref", [Val::Matrix(r, c, xs), i, j]) => {
            let (i, j) = (index(i)?, index(j)?);
            if i >= *r || j >= *c {
                return bad("ref range");
            }
            Val::Num(xs[i * c + j])
        }
        ("dot", [x, y]) => {
            let (x, y) = (vector_of(x)?, vector_of(y)?);
            if x.len() != y.len() {
                return bad("dot lengths");
            }
            Val::Num(x.iter().zip(y).map(|(a, b)| a * b).sum())
        }
        ("norm", [x]) => Val::Num(vector_of(x)?.iter().map(|a| a * a).sum::<f64>().sqrt()),
        ("vsum", [x]) => Val::Num(elems(x)?.1.iter().sum()),
        ("scale", [s, x]) => binop("*", s, x)?,
        ("matvec", [Val::Matrix(r, c, m), v]) => {
            let v = vector_of(v)?;
            if v.len() != *c {
                return bad("matvec shapes");
            }
            Val::Vector(
                (0..*r)
                    .map(|i| (0..*c).map(|j| m[i * c + j] * v[j]).sum())
                    .collect(),
            )
        }
        ("matmul", [Val::Matrix(r, k, x), Val::Matrix(k2, c, y)]) if k == k2 => Val::Matrix(
            *r,
            *c,
            (0..r * c)
                .map(|ij| {
                    (0..*k)
                        .map(|p| x[(ij / c) * k + p] * y[p * c + ij % c])
                        .sum()
                })
                .collect(),
        ),
        ("transpose", [Val::Matrix(r, c, x)]) => Val::Matrix(
            *c,
            *r,
            (0..r * c).map(|ij| x[(ij % r) * c + ij / r]).collect(),
        ),
        ("trace", [m]) => {
            let (n, x) = square_of(m)?;
            Val::Num((0..n).map(|i| x[i * n + i]).sum())
        }
        ("det", [m]) => {
            let (n, x) = square_of(m)?;
            Val::Num(det(n, x))
        }
        ("logdet", [m]) => {
            let (n, x) = square_of(m)?;
            Val::Num(det(n, x).ln())
        }
        ("inv", [m]) => {
            let (n, x) = square_of(m)?;
            Val::Matrix(n, n, inverse(n, x))
        }
        ("outer", [x, y]) => {
            let (x, y) = (vector_of(x)?, vector_of(y)?);
            Val::Matrix(
                x.len(),
                y.len(),
                x.iter()
                    .flat_map(|a| y.iter().map(move |b| a * b))
                    .collect(),
            )
        }
        ("eye" | "zeros" | "ones", [k]) => {
            let k = index(k)?;
            if k == 0 || k > 16 {
                return bad("tensor size");
            }
            match name {
                "eye" => Val::Matrix(
                    k,
                    k,
                    (0..k * k)
                        .map(|ij| f64::from(u8::from(ij % (k + 1) == 0)))
                        .collect(),
                ),
                "zeros" => Val::Vector(vec![0.0; k]),
                _ => Val::Vector(vec![1.0; k]),
            }
        }
        _ => {
            return bad(format!(
                "unsupported primitive call ({name} …{} args)",
                a.len()
            ));
        }
    })
}

/// Gauss–Jordan elimination with partial pivoting on a copy of the n×n matrix `x`: the
/// determinant, and the inverse when `want_inv` (NaN entries where the matrix is singular). The
/// fuzzer's own code; pivoting keeps it accurate where the Laplace expansion loses digits.
fn eliminate(n: usize, x: &[f64], want_inv: bool) -> (f64, Vec<f64>) {
    let mut w = x.to_vec();
    let mut inv: Vec<f64> = if want_inv {
        (0..n * n)
            .map(|ij| f64::from(u8::from(ij % (n + 1) == 0)))
            .collect()
    } else {
        Vec::new()
    };
    let mut det = 1.0;
    for col in 0..n {
        let piv = (col..n)
            .max_by(|&a, &b| w[a * n + col].abs().total_cmp(&w[b * n + col].abs()))
            .unwrap_or(col);
        let p = w[piv * n + col];
        if p == 0.0 {
            return (0.0, vec![f64::NAN; if want_inv { n * n } else { 0 }]);
        }
        if piv != col {
            for j in 0..n {
                w.swap(piv * n + j, col * n + j);
                if want_inv {
                    inv.swap(piv * n + j, col * n + j);
                }
            }
            det = -det;
        }
        det *= p;
        for j in 0..n {
            w[col * n + j] /= p;
            if want_inv {
                inv[col * n + j] /= p;
            }
        }
        for r in (0..n).filter(|&r| r != col) {
            let f = w[r * n + col];
            for j in 0..n {
                w[r * n + j] -= f * w[col * n + j];
                if want_inv {
                    inv[r * n + j] -= f * inv[col * n + j];
                }
            }
        }
    }
    (det, inv)
}

/// The size of the intermediates a determinant family primitive cancels (0 for any other): the
/// product of the matrix's row sums of magnitudes bounds every product in its determinant's
/// expansion, so the runtime's rounding is at that scale however small the determinant comes
/// out; for `logdet`, divided by |det|, its error's scale after the logarithm.
fn determinant_scale(name: &str, args: &[Val]) -> f64 {
    let (Some(Val::Matrix(n, c, x)), "det" | "logdet" | "inv") = (args.first(), name) else {
        return 0.0;
    };
    if n != c || x.len() != n * c {
        return 0.0;
    }
    let scale: f64 = x
        .chunks(*n)
        .map(|row| row.iter().map(|v| v.abs()).sum::<f64>())
        .product();
    if name == "logdet" {
        scale / det(*n, x).abs()
    } else {
        scale
    }
}

fn det(n: usize, x: &[f64]) -> f64 {
    eliminate(n, x, false).0
}

fn inverse(n: usize, x: &[f64]) -> Vec<f64> {
    eliminate(n, x, true).1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sx::read;

    fn run(src: &str) -> Val {
        evaluate(&read(src).unwrap(), &[("p0".into(), 2.0)])
            .unwrap()
            .value
    }

    #[test]
    fn determinants_report_the_scale_they_cancel() {
        let run = |src: &str| evaluate(&read(src).unwrap(), &[("p0".into(), 2.0)]).unwrap();
        // Rows summing to 2e5 in magnitude: products up to 4e10, whatever the determinant.
        let r = run("(det (mat (vec 1e5 1e5) (vec 1e5 1e5)))");
        assert_eq!((r.cancel_scale, r.max_abs), (4e10, 1e5));
        let r = run("(inv (mat (vec 4.0 1.0) (vec 2.0 3.0)))");
        assert_eq!(r.cancel_scale, 25.0);
        // After the logarithm the error scales as 1/|det| (det = 10 here).
        let r = run("(logdet (mat (vec 4.0 1.0) (vec 2.0 3.0)))");
        assert_eq!(r.cancel_scale, 2.5);
        assert_eq!(run("(+ p0 1e5)").cancel_scale, 0.0);
    }

    #[test]
    fn known_answers() {
        let num = |src| match run(src) {
            Val::Num(x) => x,
            v => panic!("{v:?}"),
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-14;
        assert!(close(num("(det (mat (vec p0 3.0) (vec 5.0 7.0)))"), -1.0));
        assert_eq!(
            num("(loop ((i 0.0) (a 1.0)) (if (< i 3.0) (recur (+ i 1.0) (* a p0)) a))"),
            8.0
        );
        assert_eq!(
            num("(fold (lambda (a x) (- a x)) 0.0 (list 1.0 2.0))"),
            -3.0
        );
        assert_eq!(num("(eval (list '* 'p0 3.0))"), 6.0);
        assert_eq!(
            num("(letrec ((f (lambda (n) (if (< n 1.0) 1.0 (* n (f (- n 1.0))))))) (f 4.0))"),
            24.0
        );
        assert_eq!(
            num("(ref (matvec (inv (mat (vec 2.0 0.0) (vec 0.0 4.0))) (vec 1.0 1.0)) 1)"),
            0.25
        );
        assert_eq!(
            num("(case 2.0 ((1.0) 5.0) ((2.0 3.0) 6.0) (else 7.0))"),
            6.0
        );
        assert!(close(
            num("(det (mat (vec 2.0 0.0 1.0) (vec 1.0 3.0 0.0) (vec 0.0 1.0 4.0)))"),
            25.0
        ));
        assert!(matches!(
            evaluate(
                &read("(letrec ((f (lambda (n) (f n)))) (f 1.0))").unwrap(),
                &[]
            ),
            Err(RefError::Budget)
        ));
    }
}
