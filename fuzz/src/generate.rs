//! The seeded program generator: well-typed programs over scalars, vectors, matrices, lists and
//! booleans, with binding forms, closures, higher-order calls, loops with parameter-dependent trip
//! counts, lane-divergent branches and `eval` of built code. Every choice comes from a ChaCha8
//! stream seeded by (run seed, program index), so a program is reproducible on its own.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::sx::Sx;

/// The type of a generated expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Scalar,
    Vector(usize),
    Matrix(usize),
    List(usize),
    Bool,
}

/// One generated test case: the program and its parameters' per-lane values.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// The program (one expression).
    pub program: Sx,
    /// Differentiable scalar parameters `(name, one value per lane)`.
    pub params: Vec<(String, Vec<f64>)>,
}

impl Case {
    /// Number of lanes.
    pub fn n_lanes(&self) -> usize {
        self.params.first().map_or(1, |p| p.1.len())
    }

    /// The parameter values of one lane as `(name, value)`.
    pub fn lane(&self, lane: usize) -> Vec<(String, f64)> {
        self.params
            .iter()
            .map(|(n, v)| (n.clone(), v[lane]))
            .collect()
    }
}

/// The ChaCha stream of program `index` of a run with `seed`.
pub fn program_rng(seed: u64, index: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(index);
    rng
}

/// Generates program `index` of the run `seed` with `n_lanes` lanes.
pub fn generate(seed: u64, index: u64, n_lanes: usize) -> Case {
    let mut rng = program_rng(seed, index);
    let n_params = rng.random_range(1..=3);
    let params: Vec<(String, Vec<f64>)> = (0..n_params)
        .map(|k| {
            let vals = (0..n_lanes.max(1))
                .map(|_| round(rng.random_range(-1.5..1.5), 1e-3))
                .collect();
            (format!("p{k}"), vals)
        })
        .collect();
    let scope = params
        .iter()
        .map(|(n, _)| (n.clone(), Ty::Scalar))
        .collect();
    let mut g = Gen {
        rng,
        fresh: 0,
        budget: 70,
        scope,
    };
    let top = match g.rng.random_range(0..100) {
        0..82 => Ty::Scalar,
        82..92 => Ty::Vector(g.dim()),
        _ => Ty::Matrix(g.dim()),
    };
    let depth = g.rng.random_range(2..=5);
    let program = g.expr(top, depth);
    Case { program, params }
}

fn round(x: f64, step: f64) -> f64 {
    (x / step).round() * step
}

struct Gen {
    rng: ChaCha8Rng,
    fresh: usize,
    budget: i32,
    scope: Vec<(String, Ty)>,
}

fn call(head: &str, args: Vec<Sx>) -> Sx {
    Sx::call(head, args)
}

fn num(x: f64) -> Sx {
    Sx::Num(x)
}

fn quote(sx: Sx) -> Sx {
    call("quote", vec![sx])
}

impl Gen {
    fn dim(&mut self) -> usize {
        self.rng.random_range(2..=3)
    }

    fn name(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh)
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.rng.random_range(0..xs.len())]
    }

    fn var_of(&mut self, ty: Ty) -> Option<Sx> {
        let vars: Vec<&String> = self
            .scope
            .iter()
            .filter(|(_, t)| *t == ty)
            .map(|(n, _)| n)
            .collect();
        if vars.is_empty() {
            return None;
        }
        let v = vars[self.rng.random_range(0..vars.len())].clone();
        Some(Sx::Sym(v))
    }

    fn constant(&mut self) -> Sx {
        const NICE: [f64; 8] = [0.5, 1.0, 2.0, -1.5, 0.25, 3.0, -0.75, 1.25];
        if self.rng.random_bool(0.5) {
            num(NICE[self.rng.random_range(0..NICE.len())])
        } else {
            num(round(self.rng.random_range(-2.0..2.0), 0.01))
        }
    }

    /// A typed expression of at most `depth` levels (fewer once the node budget is spent).
    fn expr(&mut self, ty: Ty, depth: u32) -> Sx {
        self.budget -= 1;
        if depth == 0 || self.budget <= 0 {
            return self.leaf(ty);
        }
        let d = depth - 1;
        match ty {
            Ty::Scalar => self.scalar(d),
            Ty::Vector(n) => self.vector(n, d),
            Ty::Matrix(n) => self.matrix(n, d),
            Ty::List(k) => self.list(k, d),
            Ty::Bool => self.boolean(d),
        }
    }

    fn leaf(&mut self, ty: Ty) -> Sx {
        if self.rng.random_bool(0.6)
            && let Some(v) = self.var_of(ty)
        {
            return v;
        }
        match ty {
            Ty::Scalar => self.constant(),
            Ty::Vector(n) => call("vec", (0..n).map(|_| self.leaf(Ty::Scalar)).collect()),
            Ty::Matrix(n) => {
                if self.rng.random_bool(0.2) {
                    return call("eye", vec![num(n as f64)]);
                }
                call("mat", (0..n).map(|_| self.leaf(Ty::Vector(n))).collect())
            }
            Ty::List(k) => call("list", (0..k).map(|_| self.leaf(Ty::Scalar)).collect()),
            Ty::Bool => {
                let op = self.pick(&["<", ">", "<=", ">="]);
                call(op, vec![self.leaf(Ty::Scalar), self.leaf(Ty::Scalar)])
            }
        }
    }

    /// A binding-form wrapper around a body of type `ty`: let, let*, letrec or a closure call.
    fn binding(&mut self, ty: Ty, d: u32) -> Sx {
        let saved = self.scope.len();
        let out = match self.rng.random_range(0..5) {
            0 => {
                let bt = self.any_ty();
                let v = self.name("v");
                let init = self.expr(bt, d);
                self.scope.push((v.clone(), bt));
                let body = self.expr(ty, d);
                call(
                    "let",
                    vec![Sx::List(vec![Sx::List(vec![Sx::Sym(v), init])]), body],
                )
            }
            1 => {
                let mut bs = Vec::new();
                for _ in 0..2 {
                    let bt = self.any_ty();
                    let v = self.name("v");
                    let init = self.expr(bt, d);
                    self.scope.push((v.clone(), bt));
                    bs.push(Sx::List(vec![Sx::Sym(v), init]));
                }
                let body = self.expr(ty, d);
                call("let*", vec![Sx::List(bs), body])
            }
            2 => {
                // A closure bound by let and called twice.
                let f = self.name("f");
                let x = self.name("x");
                self.scope.push((x.clone(), Ty::Scalar));
                let fbody = self.expr(ty, d.min(2));
                self.scope.truncate(saved);
                let lam = call("lambda", vec![Sx::List(vec![Sx::Sym(x)]), fbody]);
                let a1 = self.expr(Ty::Scalar, d.min(2));
                let a2 = self.expr(Ty::Scalar, d.min(2));
                let (c1, c2) = (call(&f, vec![a1]), call(&f, vec![a2]));
                let body = match ty {
                    Ty::Scalar | Ty::Vector(_) | Ty::Matrix(_) => call("+", vec![c1, c2]),
                    _ => c1,
                };
                call(
                    "let",
                    vec![Sx::List(vec![Sx::List(vec![Sx::Sym(f), lam])]), body],
                )
            }
            3 => {
                // (let ((v init)) (when b (set! v e)) body): under divergence the assignment
                // happens on some lanes only.
                let bt = if self.rng.random_bool(0.7) {
                    Ty::Scalar
                } else {
                    Ty::Vector(self.dim())
                };
                let v = self.name("v");
                let init = self.expr(bt, d);
                self.scope.push((v.clone(), bt));
                let test = self.expr(Ty::Bool, d.min(2));
                let new = self.expr(bt, d.min(2));
                let when = self.pick(&["when", "unless"]);
                let assign = call(
                    when,
                    vec![test, call("set!", vec![Sx::Sym(v.clone()), new])],
                );
                let body = self.expr(ty, d);
                call(
                    "let",
                    vec![
                        Sx::List(vec![Sx::List(vec![Sx::Sym(v), init])]),
                        assign,
                        body,
                    ],
                )
            }
            _ => {
                // ((lambda (x y) body) a b)
                let x = self.name("x");
                let y = self.name("x");
                let ta = self.any_ty();
                let a = self.expr(Ty::Scalar, d);
                let b = self.expr(ta, d);
                self.scope.push((x.clone(), Ty::Scalar));
                self.scope.push((y.clone(), ta));
                let body = self.expr(ty, d);
                let lam = call("lambda", vec![Sx::List(vec![Sx::Sym(x), Sx::Sym(y)]), body]);
                Sx::List(vec![lam, a, b])
            }
        };
        self.scope.truncate(saved);
        out
    }

    fn any_ty(&mut self) -> Ty {
        match self.rng.random_range(0..100) {
            0..40 => Ty::Scalar,
            40..60 => Ty::Vector(self.dim()),
            60..75 => Ty::Matrix(self.dim()),
            75..90 => Ty::List(self.rng.random_range(1..=4)),
            _ => Ty::Bool,
        }
    }

    /// `(if b x y)` or a three-way `cond`: lane-divergent when the tests depend on parameters.
    fn branch(&mut self, ty: Ty, d: u32) -> Sx {
        if self.rng.random_bool(0.7) {
            let b = self.expr(Ty::Bool, d);
            call("if", vec![b, self.expr(ty, d), self.expr(ty, d)])
        } else {
            let c1 = Sx::List(vec![self.expr(Ty::Bool, d), self.expr(ty, d)]);
            let c2 = Sx::List(vec![self.expr(Ty::Bool, d), self.expr(ty, d)]);
            let c3 = Sx::List(vec![Sx::sym("else"), self.expr(ty, d)]);
            call("cond", vec![c1, c2, c3])
        }
    }

    /// A scalar strictly positive and away from zero, built from `e`.
    fn positive(&mut self, e: Sx) -> Sx {
        let c = self.pick(&["0.5", "1.0", "2.0"]);
        call(
            "+",
            vec![num(c.parse().unwrap_or(1.0)), call("square", vec![e])],
        )
    }

    fn scalar(&mut self, d: u32) -> Sx {
        match self.rng.random_range(0..100) {
            0..14 => {
                let op = self.pick(&["sin", "cos", "tanh", "sigmoid", "atan", "square", "abs"]);
                call(op, vec![self.expr(Ty::Scalar, d)])
            }
            14..18 => {
                let inner = self.pick(&["sin", "tanh", "cos"]);
                call("exp", vec![call(inner, vec![self.expr(Ty::Scalar, d)])])
            }
            18..23 => {
                let op = self.pick(&["log", "sqrt"]);
                let e = self.expr(Ty::Scalar, d);
                call(op, vec![self.positive(e)])
            }
            23..37 => {
                let op = self.pick(&["+", "-", "*", "+", "*"]);
                let n = self.rng.random_range(2..=3);
                call(op, (0..n).map(|_| self.expr(Ty::Scalar, d)).collect())
            }
            37..41 => {
                let a = self.expr(Ty::Scalar, d);
                let b = self.expr(Ty::Scalar, d);
                call("/", vec![a, self.positive(b)])
            }
            41..44 => {
                let op = self.pick(&["min", "max"]);
                call(op, vec![self.expr(Ty::Scalar, d), self.expr(Ty::Scalar, d)])
            }
            44..46 => {
                let e = self.expr(Ty::Scalar, d);
                let p = self.pick(&["0.5", "2.0", "-1.0", "1.5"]);
                call("pow", vec![self.positive(e), num(p.parse().unwrap_or(2.0))])
            }
            46..56 => self.branch(Ty::Scalar, d),
            56..59 => self.case(d),
            59..67 => self.binding(Ty::Scalar, d),
            67..70 => self.letrec(d),
            70..72 => self.higher_order_call(d),
            72..77 => self.scalar_of_list(d),
            77..82 => self.scalar_of_vector(d),
            82..89 => self.scalar_of_matrix(d),
            89..95 => self.loop_form(d),
            _ => self.eval_form(d),
        }
    }

    fn case(&mut self, d: u32) -> Sx {
        let e = self.expr(Ty::Scalar, d);
        let key = call(
            "floor",
            vec![call("*", vec![num(3.0), call("sigmoid", vec![e])])],
        );
        let c1 = Sx::List(vec![Sx::List(vec![num(0.0)]), self.expr(Ty::Scalar, d)]);
        let c2 = Sx::List(vec![
            Sx::List(vec![num(1.0), num(2.0)]),
            self.expr(Ty::Scalar, d),
        ]);
        let c3 = Sx::List(vec![Sx::sym("else"), self.expr(Ty::Scalar, d)]);
        call("case", vec![key, c1, c2, c3])
    }

    /// A recursive function through `letrec`, tail or not, with a constant recursion depth.
    fn letrec(&mut self, d: u32) -> Sx {
        let saved = self.scope.len();
        let f = self.name("f");
        let n = self.name("n");
        let acc = self.name("a");
        let k = num(f64::from(self.rng.random_range(1..=4)));
        let d = d.min(2);
        let out = if self.rng.random_bool(0.5) {
            self.scope.push((n.clone(), Ty::Scalar));
            self.scope.push((acc.clone(), Ty::Scalar));
            let step = self.expr(Ty::Scalar, d);
            let step = call(
                "+",
                vec![call("*", vec![num(0.5), Sx::Sym(acc.clone())]), step],
            );
            self.scope.truncate(saved);
            let body = call(
                "if",
                vec![
                    call("<", vec![Sx::Sym(n.clone()), num(0.5)]),
                    Sx::Sym(acc.clone()),
                    call(
                        &f,
                        vec![call("-", vec![Sx::Sym(n.clone()), num(1.0)]), step],
                    ),
                ],
            );
            let lam = call(
                "lambda",
                vec![Sx::List(vec![Sx::Sym(n), Sx::Sym(acc)]), body],
            );
            let init = self.expr(Ty::Scalar, d);
            call(
                "letrec",
                vec![
                    Sx::List(vec![Sx::List(vec![Sx::Sym(f.clone()), lam])]),
                    call(&f, vec![k, init]),
                ],
            )
        } else {
            self.scope.push((n.clone(), Ty::Scalar));
            let base = self.expr(Ty::Scalar, d);
            let term = self.expr(Ty::Scalar, d);
            self.scope.truncate(saved);
            let rec = call(&f, vec![call("-", vec![Sx::Sym(n.clone()), num(1.0)])]);
            let body = call(
                "if",
                vec![
                    call("<", vec![Sx::Sym(n.clone()), num(0.5)]),
                    base,
                    call("+", vec![term, call("*", vec![num(0.5), rec])]),
                ],
            );
            let lam = call("lambda", vec![Sx::List(vec![Sx::Sym(n)]), body]);
            call(
                "letrec",
                vec![
                    Sx::List(vec![Sx::List(vec![Sx::Sym(f.clone()), lam])]),
                    call(&f, vec![k]),
                ],
            )
        };
        self.scope.truncate(saved);
        out
    }

    /// `((lambda (g z) (g (g z))) (lambda (y) body) a)`.
    fn higher_order_call(&mut self, d: u32) -> Sx {
        let saved = self.scope.len();
        let (g, z, y) = (self.name("g"), self.name("z"), self.name("y"));
        self.scope.push((y.clone(), Ty::Scalar));
        let body = self.expr(Ty::Scalar, d.min(2));
        self.scope.truncate(saved);
        let inner = call(
            "lambda",
            vec![Sx::List(vec![Sx::Sym(y)]), call("tanh", vec![body])],
        );
        let twice = call(
            "lambda",
            vec![
                Sx::List(vec![Sx::Sym(g.clone()), Sx::Sym(z.clone())]),
                call(&g, vec![call(&g, vec![Sx::Sym(z)])]),
            ],
        );
        Sx::List(vec![twice, inner, self.expr(Ty::Scalar, d)])
    }

    fn scalar_of_list(&mut self, d: u32) -> Sx {
        let k = self.rng.random_range(1..=4);
        let l = self.expr(Ty::List(k), d);
        match self.rng.random_range(0..6) {
            0 => call("fold", vec![Sx::sym("+"), num(0.0), l]),
            1 => {
                let saved = self.scope.len();
                let (a, x) = (self.name("a"), self.name("x"));
                self.scope.push((a.clone(), Ty::Scalar));
                self.scope.push((x.clone(), Ty::Scalar));
                let body = self.expr(Ty::Scalar, d.min(2));
                self.scope.truncate(saved);
                let lam = call("lambda", vec![Sx::List(vec![Sx::Sym(a), Sx::Sym(x)]), body]);
                let op = self.pick(&["fold", "fold-left"]);
                call(op, vec![lam, self.expr(Ty::Scalar, d), l])
            }
            2 => call("car", vec![l]),
            3 => call("list-ref", vec![l, num(self.rng.random_range(0..k) as f64)]),
            4 => call("*", vec![call("length", vec![l]), self.expr(Ty::Scalar, d)]),
            _ => call(
                "if",
                vec![
                    call("null?", vec![call("cdr", vec![l.clone()])]),
                    call("car", vec![l.clone()]),
                    call("car", vec![call("cdr", vec![l])]),
                ],
            ),
        }
    }

    fn scalar_of_vector(&mut self, d: u32) -> Sx {
        let n = self.dim();
        match self.rng.random_range(0..4) {
            0 => call(
                "dot",
                vec![self.expr(Ty::Vector(n), d), self.expr(Ty::Vector(n), d)],
            ),
            1 => {
                // Away from the origin, where the norm is not differentiable.
                let v = self.expr(Ty::Vector(n), d);
                call(
                    "norm",
                    vec![call("+", vec![v, call("ones", vec![num(n as f64)])])],
                )
            }
            2 => call("vsum", vec![self.expr(Ty::Vector(n), d)]),
            _ => call(
                "ref",
                vec![
                    self.expr(Ty::Vector(n), d),
                    num(self.rng.random_range(0..n) as f64),
                ],
            ),
        }
    }

    /// A well-conditioned symmetric positive definite matrix: c·I + A·Aᵀ.
    fn spd(&mut self, n: usize, d: u32) -> Sx {
        let a = self.expr(Ty::Matrix(n), d);
        let c = self.pick(&["1.0", "2.0"]);
        call(
            "+",
            vec![
                call(
                    "*",
                    vec![
                        num(c.parse().unwrap_or(1.0)),
                        call("eye", vec![num(n as f64)]),
                    ],
                ),
                call("matmul", vec![a.clone(), call("transpose", vec![a])]),
            ],
        )
    }

    fn scalar_of_matrix(&mut self, d: u32) -> Sx {
        let n = self.dim();
        match self.rng.random_range(0..8) {
            0 | 1 => call("det", vec![self.expr(Ty::Matrix(n), d)]),
            // A singular matrix: rank one, or two equal rows.
            2 => {
                let (v, w) = (self.expr(Ty::Vector(n), d), self.expr(Ty::Vector(n), d));
                call("det", vec![call("outer", vec![v, w])])
            }
            3 => {
                let r = self.expr(Ty::Vector(n), d);
                let mut rows = vec![r.clone(), r];
                rows.extend((2..n).map(|_| self.leaf(Ty::Vector(n))));
                call("det", vec![call("mat", rows)])
            }
            4 => call("logdet", vec![self.spd(n, d)]),
            5 => call("trace", vec![self.expr(Ty::Matrix(n), d)]),
            _ => {
                let (i, j) = (self.rng.random_range(0..n), self.rng.random_range(0..n));
                call(
                    "ref",
                    vec![self.expr(Ty::Matrix(n), d), num(i as f64), num(j as f64)],
                )
            }
        }
    }

    /// A loop whose trip count (0 to 4) depends on the parameters, so lanes leave it at different
    /// iterations; the step may branch on the carried value.
    fn loop_form(&mut self, d: u32) -> Sx {
        let saved = self.scope.len();
        let (i, a) = (self.name("i"), self.name("a"));
        let limit = call(
            "*",
            vec![
                num(4.0),
                call("sigmoid", vec![self.expr(Ty::Scalar, d.min(2))]),
            ],
        );
        let init = self.expr(Ty::Scalar, d.min(2));
        self.scope.push((i.clone(), Ty::Scalar));
        self.scope.push((a.clone(), Ty::Scalar));
        let d2 = d.min(2);
        let next_i = call("+", vec![Sx::Sym(i.clone()), num(1.0)]);
        let step = |g: &mut Gen| {
            let e = g.expr(Ty::Scalar, d2);
            let op = g.pick(&["+", "*"]);
            call("tanh", vec![call(op, vec![Sx::Sym(a.clone()), e])])
        };
        let recur = if self.rng.random_bool(0.4) {
            let b = self.expr(Ty::Bool, d2);
            let (s1, s2) = (step(self), step(self));
            call(
                "if",
                vec![
                    b,
                    call("recur", vec![next_i.clone(), s1]),
                    call("recur", vec![next_i, s2]),
                ],
            )
        } else {
            call("recur", vec![next_i, step(self)])
        };
        let done = self.expr(Ty::Scalar, d2);
        let done = call("+", vec![Sx::Sym(a.clone()), done]);
        self.scope.truncate(saved);
        let body = call(
            "if",
            vec![call("<", vec![Sx::Sym(i.clone()), limit]), recur, done],
        );
        let bindings = Sx::List(vec![
            Sx::List(vec![Sx::Sym(i), num(0.0)]),
            Sx::List(vec![Sx::Sym(a.clone()), init]),
        ]);
        if self.rng.random_bool(0.7) {
            return call("loop", vec![bindings, body]);
        }
        // Each iteration assigns a variable older than the loop.
        let w = self.name("w");
        let w_init = self.expr(Ty::Scalar, d2);
        let new_w = call(
            "tanh",
            vec![call("+", vec![Sx::Sym(w.clone()), Sx::Sym(a)])],
        );
        let assign = call("set!", vec![Sx::Sym(w.clone()), new_w]);
        let lp = call("loop", vec![bindings, call("begin", vec![assign, body])]);
        call(
            "let",
            vec![
                Sx::List(vec![Sx::List(vec![Sx::Sym(w.clone()), w_init])]),
                call("+", vec![lp, Sx::Sym(w)]),
            ],
        )
    }

    /// `(eval (list '+ e1 (list '* 'p e2)))`: code built from values, evaluated globally.
    fn eval_form(&mut self, d: u32) -> Sx {
        let e1 = self.expr(Ty::Scalar, d);
        let e2 = self.expr(Ty::Scalar, d);
        let op = self.pick(&["+", "*", "-"]);
        let inner = self.pick(&["*", "+"]);
        let p = Sx::sym("p0");
        let code = call(
            "list",
            vec![
                quote(Sx::sym(op)),
                e1,
                call("list", vec![quote(Sx::sym(inner)), quote(p), e2]),
            ],
        );
        call("eval", vec![code])
    }

    fn vector(&mut self, n: usize, d: u32) -> Sx {
        match self.rng.random_range(0..100) {
            0..15 => call("vec", (0..n).map(|_| self.expr(Ty::Scalar, d)).collect()),
            15..35 => {
                let op = self.pick(&["+", "-", "*"]);
                call(
                    op,
                    vec![self.expr(Ty::Vector(n), d), self.expr(Ty::Vector(n), d)],
                )
            }
            35..45 => {
                let op = self.pick(&["*", "scale"]);
                call(
                    op,
                    vec![self.expr(Ty::Scalar, d), self.expr(Ty::Vector(n), d)],
                )
            }
            45..58 => call(
                "matvec",
                vec![self.expr(Ty::Matrix(n), d), self.expr(Ty::Vector(n), d)],
            ),
            58..63 => call(
                "ref",
                vec![
                    self.expr(Ty::Matrix(n), d),
                    num(self.rng.random_range(0..n) as f64),
                ],
            ),
            63..75 => self.branch(Ty::Vector(n), d),
            75..88 => self.binding(Ty::Vector(n), d),
            _ => {
                let op = self.pick(&["sin", "tanh", "square"]);
                call(op, vec![self.expr(Ty::Vector(n), d)])
            }
        }
    }

    fn matrix(&mut self, n: usize, d: u32) -> Sx {
        match self.rng.random_range(0..100) {
            0..12 => call("mat", (0..n).map(|_| self.expr(Ty::Vector(n), d)).collect()),
            12..27 => call(
                "matmul",
                vec![self.expr(Ty::Matrix(n), d), self.expr(Ty::Matrix(n), d)],
            ),
            27..37 => {
                let op = self.pick(&["+", "-"]);
                call(
                    op,
                    vec![self.expr(Ty::Matrix(n), d), self.expr(Ty::Matrix(n), d)],
                )
            }
            37..45 => call(
                "*",
                vec![self.expr(Ty::Scalar, d), self.expr(Ty::Matrix(n), d)],
            ),
            45..53 => call("transpose", vec![self.expr(Ty::Matrix(n), d)]),
            53..63 => call(
                "outer",
                vec![self.expr(Ty::Vector(n), d), self.expr(Ty::Vector(n), d)],
            ),
            63..73 => call("inv", vec![self.spd(n, d.min(2))]),
            73..85 => self.branch(Ty::Matrix(n), d),
            _ => self.binding(Ty::Matrix(n), d),
        }
    }

    fn list(&mut self, k: usize, d: u32) -> Sx {
        match self.rng.random_range(0..100) {
            0..25 => call("list", (0..k).map(|_| self.expr(Ty::Scalar, d)).collect()),
            25..40 if k > 1 => call(
                "cons",
                vec![self.expr(Ty::Scalar, d), self.expr(Ty::List(k - 1), d)],
            ),
            40..60 => {
                let saved = self.scope.len();
                let x = self.name("x");
                self.scope.push((x.clone(), Ty::Scalar));
                let body = self.expr(Ty::Scalar, d.min(2));
                self.scope.truncate(saved);
                let lam = call("lambda", vec![Sx::List(vec![Sx::Sym(x)]), body]);
                call("map", vec![lam, self.expr(Ty::List(k), d)])
            }
            60..68 => call("reverse", vec![self.expr(Ty::List(k), d)]),
            68..76 if k > 1 => {
                let j = self.rng.random_range(1..k);
                call(
                    "append",
                    vec![self.expr(Ty::List(j), d), self.expr(Ty::List(k - j), d)],
                )
            }
            76..82 => call("cdr", vec![self.expr(Ty::List(k + 1), d)]),
            82..92 => self.branch(Ty::List(k), d),
            _ => self.binding(Ty::List(k), d),
        }
    }

    fn boolean(&mut self, d: u32) -> Sx {
        match self.rng.random_range(0..100) {
            0..70 => {
                let op = self.pick(&["<", ">", "<=", ">="]);
                call(op, vec![self.expr(Ty::Scalar, d), self.expr(Ty::Scalar, d)])
            }
            70..80 => call("not", vec![self.expr(Ty::Bool, d)]),
            _ => {
                let op = self.pick(&["and", "or"]);
                call(op, vec![self.expr(Ty::Bool, d), self.expr(Ty::Bool, d)])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference;

    #[test]
    fn programs_are_reproducible_and_mostly_evaluate() {
        assert_eq!(generate(7, 3, 4), generate(7, 3, 4));
        assert_ne!(generate(7, 3, 4).program, generate(7, 4, 4).program);
        let mut ok = 0;
        for i in 0..200 {
            let case = generate(1, i, 2);
            match reference::evaluate(&case.program, &case.lane(0)) {
                Ok(_) => ok += 1,
                Err(e) => panic!("{e:?} in {}", case.program.to_text()),
            }
        }
        assert_eq!(ok, 200);
    }
}
