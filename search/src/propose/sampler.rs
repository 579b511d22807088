//! `Sampler`: the tree grammar. Random expressions over the task's inputs, parameters, literals,
//! the task's unary operators and `+ - * / pow`, nested to a set depth, in domain-safe forms:
//! `log` and `sqrt` take `(abs u)`, `asin`/`acos` take `(tanh u)` and a fitted exponent takes an
//! `(abs base)`, so that those operators are not wasted on arguments outside their domain. A
//! program is a sum of terms `p·factor` (or `p·factor·factor`) plus an optional offset, linear in
//! its outer parameters.

use std::cell::Cell;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::tree::{BinOp, Node, Tree};
use crate::task::FactorShape;

/// What the tree grammar draws from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sampler {
    /// Number of task inputs (at least 1).
    pub(crate) n_inputs: usize,
    /// Unary operators (names from the vocabulary).
    pub(crate) unary: Vec<&'static str>,
    /// Two-argument operators.
    pub(crate) binary: Vec<BinOp>,
    /// Most levels of nesting of a factor.
    pub(crate) max_depth: usize,
    /// Most additive terms.
    pub(crate) max_terms: usize,
    /// Parameter names available (further parameters become the literal 1).
    pub(crate) max_params: usize,
    /// The shapes the task's `factors:` names (`None`: the default draw, fresh constants).
    pub(crate) factors: Option<Vec<FactorShape>>,
    /// Each input's centre (mean) and spread (standard deviation, positive) in the training
    /// rows: the starting constants of a named shape (missing inputs: 0 and 1).
    pub(crate) spreads: Vec<(f64, f64)>,
    /// The chance of each arm of a named-shape factor draw: the named shapes in order, then the
    /// input itself, then an operator of it (empty: [`shape_prior`]; an evolving population
    /// sets them from what has paid off).
    pub(crate) shape_chances: Vec<f64>,
    /// The arms drawn since it was last cleared (bit `k`: arm `k`), for crediting them.
    pub(crate) drawn: Cell<u32>,
}

/// The prior chance of arm `k` of a factor draw over `n` named shapes: [`SHAPE_CHANCE`] per
/// shape, 0.14 for the input itself, the rest for an operator of it.
pub(crate) fn shape_prior(k: usize, n: usize) -> f64 {
    match k {
        k if k < n => SHAPE_CHANCE,
        k if k == n => 0.14,
        _ => (1.0 - SHAPE_CHANCE * n as f64 - 0.14).max(0.0),
    }
}

/// Chance of each shape a task names, in its order (the rest: the input itself or an operator).
const SHAPE_CHANCE: f64 = 0.12;

/// Literals a tree may hold (exponents, offsets).
const LITERALS: [f64; 5] = [2.0, 3.0, -1.0, 0.5, 1.0];

impl Sampler {
    /// A random program: `Σ p·factor (+ p)`.
    pub(crate) fn program(&self, rng: &mut ChaCha8Rng) -> Tree {
        // A product one time in four (in two when the task names its factor shapes).
        let products = if self.factors.is_some() { 0.5 } else { 0.25 };
        if rng.random_bool(products) {
            return self.cap_params(self.product(rng));
        }
        let n_terms = rng.random_range(1..=self.max_terms.max(1));
        let mut sum: Option<Tree> = None;
        for _ in 0..n_terms {
            let term = self.term(rng);
            sum = Some(match sum {
                None => term,
                Some(s) => Tree::binary(BinOp::Add, &s, &term),
            });
        }
        let mut tree = sum.unwrap_or_else(param);
        if rng.random_bool(0.4) {
            tree = Tree::binary(BinOp::Add, &tree, &param());
        }
        self.cap_params(tree)
    }

    /// A product `p·f1·f2…` of 2..=max_terms factors (plus an optional offset): models whose
    /// effects multiply, such as a rate that depends on several conditions at once.
    pub(crate) fn product(&self, rng: &mut ChaCha8Rng) -> Tree {
        let n = rng.random_range(2..=self.max_terms.max(2));
        // Each factor of its own input while inputs last (a separable model), in random order.
        let mut inputs: Vec<u16> = (0..self.n_inputs.max(1) as u16).collect();
        for i in (1..inputs.len()).rev() {
            inputs.swap(i, rng.random_range(0..=i));
        }
        let mut tree = param();
        for k in 0..n {
            let input = inputs[k % inputs.len()];
            tree = Tree::binary(BinOp::Mul, &tree, &self.factor_of(rng, input));
        }
        if rng.random_bool(0.4) {
            tree = Tree::binary(BinOp::Add, &tree, &param());
        }
        tree
    }

    /// A term of a sum: `p·f` or (one time in three) `p·f·g`, of [`Sampler::term_factor`]s.
    pub(crate) fn term(&self, rng: &mut ChaCha8Rng) -> Tree {
        let mut factor = self.term_factor(rng);
        if rng.random_bool(0.35) {
            factor = Tree::binary(BinOp::Mul, &factor, &self.term_factor(rng));
        }
        Tree::binary(BinOp::Mul, &param(), &factor)
    }

    /// A factor of a sum's term: half the time a shaped [`Sampler::factor`], else a random
    /// expression.
    fn term_factor(&self, rng: &mut ChaCha8Rng) -> Tree {
        if rng.random_bool(0.5) {
            return self.factor(rng);
        }
        let depth = rng.random_range(1..=self.max_depth.max(1));
        self.subtree(rng, depth)
    }

    /// A factor to multiply by, of a random input `u`: an operator of `p·u (+ q)` (most often),
    /// `u` itself, a power `u²` or `u³`, or one of three shapes common in scientific models (when
    /// the grammar has `/`, resp. `exp`): the saturating `u / (u + p)`, the bell
    /// `exp(p·(u + q)²)` and the switch `1 / (1 + exp(p·(u + q)))` (a product of two switches of
    /// one input is an asymmetric bump).
    pub(crate) fn factor(&self, rng: &mut ChaCha8Rng) -> Tree {
        let input = rng.random_range(0..self.n_inputs.max(1)) as u16;
        self.factor_of(rng, input)
    }

    /// A factor (see [`Sampler::factor`], [`Sampler::named_factor`]) of the input `input`.
    pub(crate) fn factor_of(&self, rng: &mut ChaCha8Rng, input: u16) -> Tree {
        if let Some(shapes) = &self.factors {
            return self.named_factor(rng, input, shapes);
        }
        let u = Tree::leaf(Node::Input(input));
        let has_div = self.binary.contains(&BinOp::Div);
        let has_exp = self.unary.contains(&"exp");
        let shifted = Tree::binary(BinOp::Add, &u, &param());
        let roll: f64 = rng.random();
        if roll < 0.12 && has_div {
            return Tree::binary(BinOp::Div, &u, &shifted);
        }
        if roll < 0.24 && has_exp {
            let square = Tree::binary(BinOp::Mul, &shifted, &shifted);
            return Tree::unary("exp", &Tree::binary(BinOp::Mul, &param(), &square));
        }
        if roll < 0.36 && has_div && has_exp {
            let one = Tree::leaf(Node::Const(1.0));
            let rate = Tree::unary("exp", &Tree::binary(BinOp::Mul, &param(), &shifted));
            return Tree::binary(BinOp::Div, &one, &Tree::binary(BinOp::Add, &one, &rate));
        }
        if roll < 0.48 {
            return self.power_factor(rng, &u);
        }
        if roll < 0.62 || self.unary.is_empty() {
            return u;
        }
        let op = self.unary[rng.random_range(0..self.unary.len())];
        let scaled = Tree::binary(BinOp::Mul, &param(), &u);
        let arg = match rng.random_bool(0.5) {
            true => Tree::binary(BinOp::Add, &scaled, &param()),
            false => scaled,
        };
        protect_unary(op, arg)
    }

    /// A factor of `input` when the task names its `shapes`: each shape with chance
    /// [`SHAPE_CHANCE`] in the task's order (a named shape brings its own `/`, `exp` and `abs`,
    /// whatever `binary` and `operators` say), else the input itself or an operator of
    /// `p·u (+ q)`. Constants start from the input's centre `c` and spread `s`: `u / (u + c)`,
    /// `exp(-(u - c)²/(2s²))`, `1 / (1 + exp(±(u - c)/s))`, `exp(-|u - c|/s)`, a bump rising at
    /// `c - s` and falling at `c + s` (slopes `2/s`) and an operator of `(u - c)/s`.
    /// `u²` or `u³` (a coin decides), as a `pow` when the grammar has it.
    fn power_factor(&self, rng: &mut ChaCha8Rng, u: &Tree) -> Tree {
        let cube = rng.random_bool(0.5);
        let square = Tree::binary(BinOp::Mul, u, u);
        match (self.binary.contains(&BinOp::Pow), cube) {
            (true, _) => Tree::binary(
                BinOp::Pow,
                u,
                &Tree::leaf(Node::Const(2.0 + f64::from(cube))),
            ),
            (false, true) => Tree::binary(BinOp::Mul, u, &square),
            (false, false) => square,
        }
    }

    fn named_factor(&self, rng: &mut ChaCha8Rng, input: u16, shapes: &[FactorShape]) -> Tree {
        let u = Tree::leaf(Node::Input(input));
        let (c, s) = self
            .spreads
            .get(usize::from(input))
            .copied()
            .unwrap_or((0.0, 1.0));
        let valued = |v: f64| Tree::leaf(Node::Param(v));
        let centred = Tree::binary(BinOp::Add, &u, &valued(-c));
        let pick = self.shape_arm(rng.random(), shapes.len());
        self.drawn.set(self.drawn.get() | 1 << pick.min(31));
        if let Some(shape) = shapes.get(pick) {
            return match shape {
                FactorShape::Saturating => {
                    Tree::binary(BinOp::Div, &u, &Tree::binary(BinOp::Add, &u, &valued(c)))
                }
                FactorShape::Bell => {
                    let square = Tree::binary(BinOp::Mul, &centred, &centred);
                    let width = valued(-0.5 / (s * s));
                    Tree::unary("exp", &Tree::binary(BinOp::Mul, &width, &square))
                }
                FactorShape::Switch => {
                    let one = Tree::leaf(Node::Const(1.0));
                    let slope = if rng.random_bool(0.5) {
                        1.0 / s
                    } else {
                        -1.0 / s
                    };
                    let rate =
                        Tree::unary("exp", &Tree::binary(BinOp::Mul, &valued(slope), &centred));
                    Tree::binary(BinOp::Div, &one, &Tree::binary(BinOp::Add, &one, &rate))
                }
                FactorShape::Power => self.power_factor(rng, &u),
                FactorShape::Bump => {
                    // Rising at c - s, falling at c + s, each over about s/2.
                    let one = Tree::leaf(Node::Const(1.0));
                    let edge = |slope: f64, at: f64| {
                        let shifted = Tree::binary(BinOp::Add, &u, &valued(-at));
                        let rate =
                            Tree::unary("exp", &Tree::binary(BinOp::Mul, &valued(slope), &shifted));
                        Tree::binary(BinOp::Add, &one, &rate)
                    };
                    let both =
                        Tree::binary(BinOp::Mul, &edge(-2.0 / s, c - s), &edge(2.0 / s, c + s));
                    Tree::binary(BinOp::Div, &one, &both)
                }
                FactorShape::Cusp => {
                    let distance = Tree::unary("abs", &centred);
                    let rate = Tree::binary(BinOp::Mul, &valued(-1.0 / s), &distance);
                    Tree::unary("exp", &rate)
                }
            };
        }
        if pick == shapes.len() || self.unary.is_empty() {
            return u;
        }
        let op = self.unary[rng.random_range(0..self.unary.len())];
        let scaled = Tree::binary(BinOp::Mul, &valued(1.0 / s), &u);
        let arg = match rng.random_bool(0.5) {
            true => Tree::binary(BinOp::Add, &scaled, &valued(-c / s)),
            false => scaled,
        };
        protect_unary(op, arg)
    }

    /// The arm of a factor draw over `n` named shapes that `roll` (uniform in [0, 1)) falls in,
    /// by [`Sampler::shape_chances`] (or [`shape_prior`]).
    fn shape_arm(&self, roll: f64, n: usize) -> usize {
        let chance = |k: usize| {
            self.shape_chances
                .get(k)
                .copied()
                .unwrap_or_else(|| shape_prior(k, n))
        };
        let total: f64 = (0..n + 2).map(chance).sum();
        let mut left = roll * total;
        for k in 0..n + 2 {
            if left < chance(k) {
                return k;
            }
            left -= chance(k);
        }
        n + 1
    }

    /// A random expression at most `depth` levels deep.
    pub(crate) fn subtree(&self, rng: &mut ChaCha8Rng, depth: usize) -> Tree {
        if depth <= 1 {
            return self.leaf(rng);
        }
        let roll: f64 = rng.random();
        if roll < 0.2 {
            self.leaf(rng)
        } else if roll < 0.6 && !self.unary.is_empty() {
            let op = self.unary[rng.random_range(0..self.unary.len())];
            let arg = if rng.random_bool(0.7) {
                self.affine(rng, depth - 1)
            } else {
                self.subtree(rng, depth - 1)
            };
            protect_unary(op, arg)
        } else if !self.binary.is_empty() {
            let op = self.binary[rng.random_range(0..self.binary.len())];
            let a = self.operand(rng, depth - 1);
            let b = match op {
                BinOp::Pow if rng.random_bool(0.6) => {
                    Tree::leaf(Node::Const(LITERALS[rng.random_range(0..3)]))
                }
                BinOp::Pow => param(),
                _ => self.operand(rng, depth - 1),
            };
            protect_binary(op, a, b)
        } else {
            self.leaf(rng)
        }
    }

    /// An operand of a two-argument operator: a random expression, shifted by a parameter one
    /// time in four (so that ratios such as `x / (x + p)` arise).
    fn operand(&self, rng: &mut ChaCha8Rng, depth: usize) -> Tree {
        let t = self.subtree(rng, depth);
        match rng.random_bool(0.25) {
            true => Tree::binary(BinOp::Add, &t, &param()),
            false => t,
        }
    }

    /// `p·u` or `p·u + q` for a random `u`: the argument of an operator, scaled and shifted.
    fn affine(&self, rng: &mut ChaCha8Rng, depth: usize) -> Tree {
        let inner = self.subtree(rng, depth);
        let scaled = Tree::binary(BinOp::Mul, &param(), &inner);
        if rng.random_bool(0.5) {
            Tree::binary(BinOp::Add, &scaled, &param())
        } else {
            scaled
        }
    }

    /// An input (most often), a parameter or a literal.
    pub(crate) fn leaf(&self, rng: &mut ChaCha8Rng) -> Tree {
        let roll: f64 = rng.random();
        if roll < 0.7 {
            let i = rng.random_range(0..self.n_inputs.max(1));
            Tree::leaf(Node::Input(i as u16))
        } else if roll < 0.95 {
            param()
        } else {
            Tree::leaf(Node::Const(LITERALS[rng.random_range(0..LITERALS.len())]))
        }
    }

    /// The tree with parameters past the available names turned into the literal 1.
    pub(crate) fn cap_params(&self, mut tree: Tree) -> Tree {
        let mut k = 0;
        for n in &mut tree.nodes {
            if let Node::Param(_) = n {
                if k >= self.max_params {
                    *n = Node::Const(1.0);
                }
                k += 1;
            }
        }
        tree
    }
}

/// A fresh parameter (no inherited value).
pub(crate) fn param() -> Tree {
    Tree::leaf(Node::Param(f64::NAN))
}

/// Whether a tree's value is never negative (so `log`/`sqrt` of it need no guard).
fn non_negative(t: &Tree) -> bool {
    matches!(
        t.nodes.first(),
        Some(Node::Unary(
            "abs" | "exp" | "square" | "sqrt" | "cosh" | "sigmoid"
        ))
    ) || matches!(t.nodes.as_slice(), [Node::Const(c)] if *c > 0.0)
}

/// `(op a)` in its domain-safe form.
pub(crate) fn protect_unary(op: &'static str, a: Tree) -> Tree {
    match op {
        "log" | "sqrt" if !non_negative(&a) => Tree::unary(op, &Tree::unary("abs", &a)),
        "asin" | "acos" if a.nodes.first() != Some(&Node::Unary("tanh")) => {
            Tree::unary(op, &Tree::unary("tanh", &a))
        }
        _ => Tree::unary(op, &a),
    }
}

/// `(op a b)` in its domain-safe form: a power whose exponent is not a whole literal takes
/// `(abs a)`.
pub(crate) fn protect_binary(op: BinOp, a: Tree, b: Tree) -> Tree {
    let whole_exponent = matches!(b.nodes.as_slice(), [Node::Const(c)] if c.fract() == 0.0);
    if op == BinOp::Pow && !whole_exponent && !non_negative(&a) {
        return Tree::binary(op, &Tree::unary("abs", &a), &b);
    }
    Tree::binary(op, &a, &b)
}

/// `t` with every operator in its domain-safe form (after a mutation or crossover put an
/// argument where it may leave the domain).
pub(crate) fn guard(t: &Tree) -> Tree {
    let mut stack: Vec<Tree> = Vec::with_capacity(t.len());
    for node in t.nodes.iter().rev() {
        let part = match *node {
            Node::Unary(op) => match stack.pop() {
                Some(a) => protect_unary(op, a),
                None => return t.clone(),
            },
            Node::Binary(op) => match (stack.pop(), stack.pop()) {
                (Some(a), Some(b)) => protect_binary(op, a, b),
                _ => return t.clone(),
            },
            leaf => Tree::leaf(leaf),
        };
        stack.push(part);
    }
    match stack.pop() {
        Some(tree) if stack.is_empty() => tree,
        _ => t.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn sampler() -> Sampler {
        Sampler {
            n_inputs: 2,
            unary: vec!["exp", "log", "sqrt", "sin", "asin"],
            binary: BinOp::ALL.to_vec(),
            max_depth: 4,
            max_terms: 3,
            max_params: 6,
            factors: None,
            spreads: Vec::new(),
            shape_chances: Vec::new(),
            drawn: Cell::new(0),
        }
    }

    /// The shape of a factor: its operators in prefix order, inputs and constants erased.
    fn shape(t: &Tree) -> String {
        let words: Vec<&str> = t
            .nodes
            .iter()
            .map(|n| match n {
                Node::Unary(op) => op,
                Node::Binary(op) => op.name(),
                Node::Input(_) => "u",
                Node::Param(_) => "p",
                Node::Const(_) => "c",
            })
            .collect();
        words.join(" ")
    }

    #[test]
    fn factors_take_every_scientific_shape() {
        let s = sampler();
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut shapes = std::collections::BTreeMap::new();
        for _ in 0..2000 {
            *shapes.entry(shape(&s.factor(&mut rng))).or_insert(0) += 1;
        }
        for want in [
            "/ u + u p",             // saturating u / (u + p)
            "exp * p * + u p + u p", // bell exp(p (u + q)²)
            "/ c + c exp * p + u p", // switch 1 / (1 + exp(p (u + q)))
            "pow u c",               // power u² or u³
            "u",                     // the input itself
            "sin * p u",             // an operator of p·u
            "log abs + * p u p",     // … of p·u + q, domain-safe
        ] {
            let n = shapes.get(want).copied().unwrap_or(0);
            assert!(n >= 20, "{want}: drawn {n} times of 2000: {shapes:?}");
        }
        // Without `/` and `exp`, powers are products and the other shapes are not drawn.
        let plain = Sampler {
            unary: vec!["sin"],
            binary: vec![BinOp::Add, BinOp::Mul],
            ..sampler()
        };
        for _ in 0..500 {
            let f = plain.factor(&mut rng);
            assert!(
                ["u", "* u u", "* u * u u", "sin * p u", "sin + * p u p"]
                    .contains(&shape(&f).as_str()),
                "{}",
                shape(&f)
            );
        }
    }

    /// The starting values of a tree's parameters, in order.
    fn starts(t: &Tree) -> Vec<f64> {
        t.nodes
            .iter()
            .filter_map(|n| match n {
                Node::Param(v) => Some(*v),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn named_shapes_start_at_the_inputs_centre_and_spread() {
        let s = Sampler {
            factors: Some(vec![
                FactorShape::Bell,
                FactorShape::Cusp,
                FactorShape::Saturating,
                FactorShape::Bump,
            ]),
            spreads: vec![(10.0, 2.0), (-1.0, 0.5)],
            ..sampler()
        };
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut seen = std::collections::BTreeMap::new();
        for _ in 0..2000 {
            let f = s.factor_of(&mut rng, 0);
            let (shape, values) = (shape(&f), starts(&f));
            let want: Option<&[f64]> = match shape.as_str() {
                "exp * p * + u p + u p" => Some(&[-0.125, -10.0, -10.0]),
                "exp * p abs + u p" => Some(&[-0.5, -10.0]),
                "/ u + u p" => Some(&[10.0]),
                "/ c * + c exp * p + u p + c exp * p + u p" => Some(&[-1.0, -8.0, 1.0, -12.0]),
                "sin * p u" => Some(&[0.5]),
                "log abs + * p u p" => Some(&[0.5, -5.0]),
                _ => None,
            };
            if let Some(want) = want {
                assert_eq!(values, want, "{shape}");
            }
            *seen.entry(shape).or_insert(0) += 1;
        }
        // Each named shape about 12 % of the time, the input itself about 14 %; shapes not
        // named (switch, power) never.
        for (want, least) in [
            ("exp * p * + u p + u p", 180),
            ("exp * p abs + u p", 180),
            ("/ u + u p", 180),
            ("/ c * + c exp * p + u p + c exp * p + u p", 180),
            ("u", 200),
        ] {
            let n = seen.get(want).copied().unwrap_or(0);
            assert!(n >= least, "{want}: {n} of 2000: {seen:?}");
        }
        assert!(!seen.contains_key("/ c + c exp * p + u p"), "{seen:?}");
        assert!(!seen.contains_key("pow u c"), "{seen:?}");
        // A named shape brings its own operators: drawn without `/` and `exp` in the grammar.
        let bare = Sampler {
            unary: vec!["sin"],
            binary: vec![BinOp::Add, BinOp::Mul],
            factors: Some(vec![FactorShape::Switch, FactorShape::Saturating]),
            ..s.clone()
        };
        let drawn: std::collections::BTreeSet<String> = (0..300)
            .map(|_| shape(&bare.factor_of(&mut rng, 0)))
            .collect();
        assert!(drawn.contains("/ c + c exp * p + u p"), "{drawn:?}");
        assert!(drawn.contains("/ u + u p"), "{drawn:?}");
        // The second input's spread; a missing input's is 0 and 1.
        let cusp = |input: u16, rng: &mut ChaCha8Rng| loop {
            let f = s.factor_of(rng, input);
            if shape(&f) == "exp * p abs + u p" {
                return starts(&f);
            }
        };
        assert_eq!(cusp(1, &mut rng), [-2.0, 1.0]);
        let narrow = Sampler {
            spreads: Vec::new(),
            ..s.clone()
        };
        assert_eq!(cusp(0, &mut rng).len(), 2);
        let f = loop {
            let f = narrow.factor_of(&mut rng, 0);
            if shape(&f) == "exp * p abs + u p" {
                break f;
            }
        };
        assert_eq!(starts(&f), [-1.0, -0.0]);
    }

    #[test]
    fn programs_respect_depth_params_and_domains() {
        let s = sampler();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut ops = std::collections::BTreeSet::new();
        for _ in 0..500 {
            let t = s.program(&mut rng);
            assert!(t.is_complete());
            assert!(t.n_params() <= 6, "{t:?}");
            // Sum nodes (≤ 3 terms + offset: 4 levels), a product of ≤ two factors (2 levels),
            // then a factor of ≤ 4 levels: each operator level below the first may add a guard
            // (`abs`, `tanh`) and an affine wrapper (`+`, `*`): 4 levels each.
            assert!(t.depth() <= 4 + 2 + 4 * 3 + 1, "{}", t.depth());
            for (i, n) in t.nodes.iter().enumerate() {
                match n {
                    Node::Unary(op @ ("log" | "sqrt")) => {
                        ops.insert(*op);
                        assert!(non_negative(&t.subtree(i + 1)), "{t:?}");
                    }
                    Node::Unary("asin") => {
                        assert_eq!(t.nodes[i + 1], Node::Unary("tanh"))
                    }
                    Node::Binary(op) => {
                        ops.insert(op.name());
                    }
                    _ => {}
                }
            }
        }
        let unsafe_tree = Tree {
            nodes: vec![
                Node::Binary(BinOp::Add),
                Node::Unary("log"),
                Node::Input(0),
                Node::Binary(BinOp::Pow),
                Node::Unary("sin"),
                Node::Input(1),
                Node::Const(0.5),
            ],
        };
        let guarded = guard(&unsafe_tree);
        assert_eq!(
            guarded.nodes,
            [
                Node::Binary(BinOp::Add),
                Node::Unary("log"),
                Node::Unary("abs"),
                Node::Input(0),
                Node::Binary(BinOp::Pow),
                Node::Unary("abs"),
                Node::Unary("sin"),
                Node::Input(1),
                Node::Const(0.5),
            ]
        );
        assert_eq!(guard(&guarded), guarded);
        for op in ["log", "sqrt", "+", "-", "*", "/", "pow"] {
            assert!(ops.contains(op), "{op} never drawn");
        }
    }
}
