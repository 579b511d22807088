//! `Tree`: the expression form the `evolve` proposer and the tree grammar breed: a flat prefix
//! sequence of nodes (a subtree is a contiguous range), so every walk is a loop, never native
//! recursion, and a splice is a `Vec` operation. Converts to heap data (printed by the task's
//! front end) and back from heap data (seeds from a cache or an LLM), with an explicit stack.

use ndvm_core::{Heap, Node as Cell, NodeId};

/// One node of a [`Tree`], in prefix order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Node {
    /// The task input with this position in `inputs`.
    Input(u16),
    /// A fitted parameter, with its inherited value (NaN: none yet, the task's `init` is used).
    Param(f64),
    /// A literal number (not fitted).
    Const(f64),
    /// A one-argument primitive of the vocabulary (`exp`, `log`, …).
    Unary(&'static str),
    /// A two-argument operator.
    Binary(BinOp),
}

/// The two-argument operators of a tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    /// `(pow base exponent)`.
    Pow,
}

impl BinOp {
    /// Every operator, in the order the task's `binary:` key names them.
    #[cfg(test)]
    pub(crate) const ALL: [BinOp; 5] = [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Pow];

    /// The primitive's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Pow => "pow",
        }
    }

    /// The operator a primitive's name denotes (`expt` is `pow`).
    pub(crate) fn named(name: &str) -> Option<BinOp> {
        match name {
            "+" => Some(BinOp::Add),
            "-" => Some(BinOp::Sub),
            "*" => Some(BinOp::Mul),
            "/" => Some(BinOp::Div),
            "pow" | "expt" => Some(BinOp::Pow),
            _ => None,
        }
    }

    fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            BinOp::Add => a + b,
            BinOp::Sub => a - b,
            BinOp::Mul => a * b,
            BinOp::Div => a / b,
            BinOp::Pow => a.powf(b),
        }
    }
}

impl Node {
    fn arity(self) -> usize {
        match self {
            Node::Input(_) | Node::Param(_) | Node::Const(_) => 0,
            Node::Unary(_) => 1,
            Node::Binary(_) => 2,
        }
    }
}

/// An expression in prefix order. Invariant: the nodes form exactly one complete expression.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Tree {
    pub(crate) nodes: Vec<Node>,
}

/// What a tree is made of, for heap conversion: input and parameter names.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Names<'a> {
    pub(crate) inputs: &'a [String],
    pub(crate) params: &'a [String],
}

impl Tree {
    /// A one-node tree.
    pub(crate) fn leaf(node: Node) -> Tree {
        Tree { nodes: vec![node] }
    }

    /// `(op a b)`.
    pub(crate) fn binary(op: BinOp, a: &Tree, b: &Tree) -> Tree {
        let mut nodes = Vec::with_capacity(1 + a.len() + b.len());
        nodes.push(Node::Binary(op));
        nodes.extend_from_slice(&a.nodes);
        nodes.extend_from_slice(&b.nodes);
        Tree { nodes }
    }

    /// `(op a)`.
    pub(crate) fn unary(op: &'static str, a: &Tree) -> Tree {
        let mut nodes = Vec::with_capacity(1 + a.len());
        nodes.push(Node::Unary(op));
        nodes.extend_from_slice(&a.nodes);
        Tree { nodes }
    }

    /// Number of nodes.
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// One past the last node of the subtree starting at `i`.
    pub(crate) fn end(&self, i: usize) -> usize {
        let mut need = 1usize;
        let mut j = i;
        while need > 0 && j < self.nodes.len() {
            need = need + self.nodes[j].arity() - 1;
            j += 1;
        }
        j
    }

    /// The subtree starting at `i`.
    pub(crate) fn subtree(&self, i: usize) -> Tree {
        Tree {
            nodes: self.nodes[i..self.end(i)].to_vec(),
        }
    }

    /// This tree with the subtree at `i` replaced by `with`.
    pub(crate) fn replace(&self, i: usize, with: &Tree) -> Tree {
        let end = self.end(i);
        let mut nodes = Vec::with_capacity(self.len() - (end - i) + with.len());
        nodes.extend_from_slice(&self.nodes[..i]);
        nodes.extend_from_slice(&with.nodes);
        nodes.extend_from_slice(&self.nodes[end..]);
        Tree { nodes }
    }

    /// Levels of nesting (a leaf is 1).
    #[cfg(test)]
    pub(crate) fn depth(&self) -> usize {
        let mut stack: Vec<usize> = Vec::with_capacity(self.len());
        for node in self.nodes.iter().rev() {
            let k = node.arity();
            let deepest = (0..k).filter_map(|_| stack.pop()).max().unwrap_or(0);
            stack.push(deepest + 1);
        }
        stack.pop().unwrap_or(0)
    }

    /// Number of parameter nodes.
    pub(crate) fn n_params(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| matches!(n, Node::Param(_)))
            .count()
    }

    /// Whether the nodes form exactly one expression.
    pub(crate) fn is_complete(&self) -> bool {
        !self.nodes.is_empty() && self.end(0) == self.nodes.len() && {
            let mut need = 1i64;
            for n in &self.nodes {
                if need <= 0 {
                    return false;
                }
                need += n.arity() as i64 - 1;
            }
            need == 0
        }
    }

    /// The parameters' inherited values in appearance order, by their names in `names.params`.
    pub(crate) fn inherited(&self, names: &Names) -> Vec<(String, f64)> {
        self.nodes
            .iter()
            .filter_map(|n| match n {
                Node::Param(v) => Some(*v),
                _ => None,
            })
            .zip(names.params)
            .filter(|(v, _)| v.is_finite())
            .map(|(v, name)| (name.clone(), v))
            .collect()
    }

    /// Sets the parameters' values from a fit (`value_of(name)`, names in appearance order).
    pub(crate) fn set_params(&mut self, names: &Names, value_of: impl Fn(&str) -> Option<f64>) {
        let mut k = 0;
        for n in &mut self.nodes {
            if let Node::Param(v) = n {
                *v = names
                    .params
                    .get(k)
                    .and_then(|name| value_of(name))
                    .unwrap_or(f64::NAN);
                k += 1;
            }
        }
    }

    /// The tree as heap data: parameters take `names.params` in appearance order. `None` when
    /// there are more parameters than names or an input index is out of range.
    pub(crate) fn to_heap(&self, heap: &mut Heap, names: &Names) -> Option<NodeId> {
        if self.n_params() > names.params.len() || !self.is_complete() {
            return None;
        }
        let mut param_at = vec![0usize; self.len()];
        let mut k = 0;
        for (i, n) in self.nodes.iter().enumerate() {
            if matches!(n, Node::Param(_)) {
                param_at[i] = k;
                k += 1;
            }
        }
        let mut stack: Vec<NodeId> = Vec::with_capacity(self.len());
        for (i, node) in self.nodes.iter().enumerate().rev() {
            let cell = match *node {
                Node::Input(j) => heap.sym(names.inputs.get(j as usize)?),
                Node::Param(_) => heap.sym(&names.params[param_at[i]]),
                Node::Const(c) => heap.num(c),
                Node::Unary(op) => {
                    let a = stack.pop()?;
                    let op = heap.sym(op);
                    heap.list(&[op, a])
                }
                Node::Binary(op) => {
                    let a = stack.pop()?;
                    let b = stack.pop()?;
                    let op = heap.sym(op.name());
                    heap.list(&[op, a, b])
                }
            };
            stack.push(cell);
        }
        stack.pop()
    }

    /// Reads heap data as a tree: numbers, inputs, parameters (valued by `value_of`), `+ - * /`
    /// with any number of arguments, `pow`/`expt` and the `unary` operators. `None` for anything
    /// else or past `max_nodes` nodes.
    pub(crate) fn from_heap(
        heap: &Heap,
        root: NodeId,
        names: &Names,
        unary: &[&'static str],
        value_of: impl Fn(&str) -> Option<f64>,
        max_nodes: usize,
    ) -> Option<Tree> {
        let mut nodes = Vec::new();
        let mut work = vec![Work::Cell(root)];
        while let Some(item) = work.pop() {
            if nodes.len() >= max_nodes {
                return None;
            }
            let cell = match item {
                Work::Fold(op, mut args) => {
                    nodes.push(Node::Binary(op));
                    let left_nested = matches!(op, BinOp::Sub | BinOp::Div);
                    if left_nested {
                        let last = args.pop()?;
                        work.push(Work::Cell(last));
                        work.push(rest(op, args));
                    } else {
                        let first = args.remove(0);
                        work.push(rest(op, args));
                        work.push(Work::Cell(first));
                    }
                    continue;
                }
                Work::Cell(c) => c,
            };
            match heap.node(cell) {
                Cell::Num(x) => nodes.push(Node::Const(x)),
                Cell::Sym(s) => {
                    let name = heap.symbol_name(s);
                    if let Some(i) = names.inputs.iter().position(|n| n == name) {
                        nodes.push(Node::Input(i as u16));
                    } else if names.params.iter().any(|n| n == name) {
                        nodes.push(Node::Param(value_of(name).unwrap_or(f64::NAN)));
                    } else {
                        return None;
                    }
                }
                Cell::Pair(..) => {
                    let items = heap.list_items(cell)?;
                    let (&head, args) = items.split_first()?;
                    let Cell::Sym(s) = heap.node(head) else {
                        return None;
                    };
                    let name = heap.symbol_name(s);
                    match (BinOp::named(name), args.len()) {
                        (Some(BinOp::Add), 0) => nodes.push(Node::Const(0.0)),
                        (Some(BinOp::Mul), 0) => nodes.push(Node::Const(1.0)),
                        (Some(BinOp::Add | BinOp::Mul), 1) => work.push(Work::Cell(args[0])),
                        (Some(BinOp::Sub), 1) => {
                            nodes.push(Node::Binary(BinOp::Mul));
                            nodes.push(Node::Const(-1.0));
                            work.push(Work::Cell(args[0]));
                        }
                        (Some(BinOp::Div), 1) => {
                            nodes.push(Node::Binary(BinOp::Div));
                            nodes.push(Node::Const(1.0));
                            work.push(Work::Cell(args[0]));
                        }
                        (Some(op), n) if n >= 2 && (op != BinOp::Pow || n == 2) => {
                            work.push(Work::Fold(op, args.to_vec()));
                        }
                        (None, 1) => {
                            let op = unary.iter().find(|u| **u == name)?;
                            nodes.push(Node::Unary(op));
                            work.push(Work::Cell(args[0]));
                        }
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
        let tree = Tree { nodes };
        tree.is_complete().then_some(tree)
    }

    /// Folds literal and parameter subexpressions: a subexpression of no input becomes a literal
    /// (of literals, where its value is finite) or one parameter (of parameters: any function of
    /// free constants is a free constant); `(* p (* q x))` and `(+ p (+ q x))` drop the inner
    /// parameter; `(* 1 x)`, `(+ x 0)`, `(pow x 1)`, … become `x`. Values follow where known.
    pub(crate) fn simplify(&self) -> Tree {
        let mut stack: Vec<Vec<Node>> = Vec::with_capacity(self.len());
        for node in self.nodes.iter().rev() {
            let mut part = match *node {
                Node::Binary(op) => match (stack.pop(), stack.pop()) {
                    (Some(a), Some(b)) => fold(op, a, b),
                    _ => return self.clone(),
                },
                Node::Unary(op) => match stack.pop() {
                    Some(a) => std::iter::once(Node::Unary(op)).chain(a).collect(),
                    None => return self.clone(),
                },
                leaf => vec![leaf],
            };
            if part.len() > 1 && !part.iter().any(|n| matches!(n, Node::Input(_))) {
                part = fold_constant(part);
            }
            stack.push(part);
        }
        match stack.pop() {
            Some(nodes) if stack.is_empty() => Tree { nodes },
            _ => self.clone(),
        }
    }
}

/// An input-free subexpression folded: one parameter if it has any (valued where computable),
/// else its literal value (unchanged when that is not finite or not computable here).
fn fold_constant(part: Vec<Node>) -> Vec<Node> {
    let value = evaluate(&part);
    if part.iter().any(|n| matches!(n, Node::Param(_))) {
        return vec![Node::Param(value.unwrap_or(f64::NAN))];
    }
    match value {
        Some(v) if v.is_finite() => vec![Node::Const(v)],
        _ => part,
    }
}

/// The value of an input-free expression, where every operator is one computed here.
fn evaluate(nodes: &[Node]) -> Option<f64> {
    let mut stack: Vec<f64> = Vec::with_capacity(nodes.len());
    for node in nodes.iter().rev() {
        let v = match *node {
            Node::Const(c) | Node::Param(c) => c,
            Node::Input(_) => return None,
            Node::Unary(op) => unary_value(op, stack.pop()?)?,
            Node::Binary(op) => {
                let a = stack.pop()?;
                op.apply(a, stack.pop()?)
            }
        };
        stack.push(v);
    }
    stack.pop().filter(|v| v.is_finite())
}

/// A unary primitive's value (the common ones; `None` for the rest).
fn unary_value(op: &str, x: f64) -> Option<f64> {
    Some(match op {
        "exp" => x.exp(),
        "log" => x.ln(),
        "sqrt" => x.sqrt(),
        "sin" => x.sin(),
        "cos" => x.cos(),
        "tan" => x.tan(),
        "tanh" => x.tanh(),
        "sinh" => x.sinh(),
        "cosh" => x.cosh(),
        "abs" => x.abs(),
        "square" => x * x,
        "asin" => x.asin(),
        "acos" => x.acos(),
        "atan" => x.atan(),
        "sigmoid" => 1.0 / (1.0 + (-x).exp()),
        _ => return None,
    })
}

/// Work left to emit while reading heap data, in prefix order.
enum Work {
    Cell(NodeId),
    /// `op` folded over at least two `args` (right-nested for `+ *`, left-nested for `- /`).
    Fold(BinOp, Vec<NodeId>),
}

/// The remaining arguments of a fold: one is that argument, more are a smaller fold.
fn rest(op: BinOp, mut args: Vec<NodeId>) -> Work {
    match args.len() {
        1 => Work::Cell(args.remove(0)),
        _ => Work::Fold(op, args),
    }
}

/// The value of a literal or parameter node.
fn value(nodes: &[Node]) -> Option<(f64, bool)> {
    match nodes {
        [Node::Const(c)] => Some((*c, false)),
        [Node::Param(v)] => Some((*v, true)),
        _ => None,
    }
}

/// `(op a b)` with literal and parameter parts folded (see [`Tree::simplify`]).
fn fold(op: BinOp, a: Vec<Node>, b: Vec<Node>) -> Vec<Node> {
    let linear = matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div);
    match (value(&a), value(&b)) {
        (Some((x, false)), Some((y, false))) => return vec![Node::Const(op.apply(x, y))],
        (Some((x, pa)), Some((y, pb))) if linear && (pa || pb) => {
            return vec![Node::Param(op.apply(x, y))];
        }
        _ => {}
    }
    // Identities: (* 1 x), (* x 1), (+ 0 x), (+ x 0), (- x 0), (/ x 1), (pow x 1) are x.
    let one = |n: &[Node]| matches!(n, [Node::Const(c)] if *c == 1.0);
    let zero = |n: &[Node]| matches!(n, [Node::Const(c)] if *c == 0.0);
    match op {
        BinOp::Mul if one(&a) => return b,
        BinOp::Mul | BinOp::Div | BinOp::Pow if one(&b) => return a,
        BinOp::Add if zero(&a) => return b,
        BinOp::Add | BinOp::Sub if zero(&b) => return a,
        _ => {}
    }
    // (* p (* q x)) → (* p x); (+ p (+ q x)) → (+ p x): the inner parameter is redundant.
    if let (Some((p, true)), BinOp::Add | BinOp::Mul) = (value(&a), op)
        && b.len() > 2
        && b[0] == Node::Binary(op)
        && let Node::Param(q) = b[1]
    {
        let mut nodes = vec![Node::Binary(op), Node::Param(op.apply(p, q))];
        nodes.extend_from_slice(&b[2..]);
        return nodes;
    }
    let mut nodes = Vec::with_capacity(1 + a.len() + b.len());
    nodes.push(Node::Binary(op));
    nodes.extend(a);
    nodes.extend(b);
    match op {
        BinOp::Add | BinOp::Mul => merge_constants(op, nodes),
        _ => nodes,
    }
}

/// A chain of `+` (or `*`) with all its parameters and literals merged into one parameter (or
/// one literal, when it has no parameter): `(* (* p x) q)` is `(* p x)`, `(+ (+ x p) (+ q 2))`
/// is `(+ x p)`. The other operands keep their order; the parameter comes first in a product and
/// last in a sum. The value follows where known.
fn merge_constants(op: BinOp, nodes: Vec<Node>) -> Vec<Node> {
    let chain = Tree { nodes };
    // The chain's operands: the subtrees below nested `op` nodes (an explicit stack).
    let mut operands: Vec<(usize, usize)> = Vec::new();
    let mut todo = vec![0usize];
    while let Some(i) = todo.pop() {
        if chain.nodes[i] == Node::Binary(op) {
            let second = chain.end(i + 1);
            todo.push(second);
            todo.push(i + 1);
        } else {
            operands.push((i, chain.end(i)));
        }
    }
    let unit = if op == BinOp::Add { 0.0 } else { 1.0 };
    let (mut merged, mut params, mut literals) = (unit, 0, 0);
    let mut rest: Vec<&[Node]> = Vec::new();
    for &(i, end) in &operands {
        match chain.nodes[i..end] {
            [Node::Param(v)] => {
                merged = op.apply(merged, v);
                params += 1;
            }
            [Node::Const(c)] => {
                merged = op.apply(merged, c);
                literals += 1;
            }
            ref other => rest.push(other),
        }
    }
    if params + literals <= 1 || rest.is_empty() {
        return chain.nodes;
    }
    let constant = match params {
        0 => Node::Const(merged),
        _ => Node::Param(merged),
    };
    let identity = params == 0 && merged == unit;
    let mut out: Vec<Node> = Vec::with_capacity(chain.len());
    let n = rest.len() + usize::from(!identity);
    out.extend(std::iter::repeat_n(Node::Binary(op), n - 1));
    if op == BinOp::Mul && !identity {
        out.push(constant);
    }
    for part in rest {
        out.extend_from_slice(part);
    }
    if op == BinOp::Add && !identity {
        out.push(constant);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndvm_frontends::Frontend as _;
    use ndvm_frontends::scheme::Scheme;

    fn names() -> (Vec<String>, Vec<String>) {
        (
            vec!["x".into(), "v".into()],
            ["a", "b", "c", "d"].map(String::from).to_vec(),
        )
    }

    /// `src` read as a tree (parameters valued 0.5 each), or `None`.
    fn read(src: &str) -> Option<Tree> {
        let (inputs, params) = names();
        let names = Names {
            inputs: &inputs,
            params: &params,
        };
        let mut heap = Heap::new();
        let program = Scheme.parse(&mut heap, src).unwrap();
        let unary: Vec<&'static str> = ndvm_core::unary_operators().collect();
        Tree::from_heap(&heap, program.forms()[0], &names, &unary, |_| Some(0.5), 64)
    }

    fn print(t: &Tree) -> String {
        let (inputs, params) = names();
        let names = Names {
            inputs: &inputs,
            params: &params,
        };
        let mut heap = Heap::new();
        let root = t.to_heap(&mut heap, &names).unwrap();
        Scheme
            .print(&heap, &ndvm_core::Program::new(&heap, vec![root]))
            .unwrap()
    }

    #[test]
    fn heap_round_trip_and_folds_of_n_ary_operators() {
        for (src, printed) in [
            ("(* a (exp (* b x)))", "(* a (exp (* b x)))"),
            ("(+ x v a)", "(+ x (+ v a))"),
            ("(- x v a)", "(- (- x v) a)"),
            ("(/ x v a)", "(/ (/ x v) a)"),
            ("(- x)", "(* -1.0 x)"),
            ("(/ v)", "(/ 1.0 v)"),
            ("(expt (abs x) b)", "(pow (abs x) a)"),
            ("(+)", "0.0"),
            ("(* x)", "x"),
        ] {
            let t = read(src).unwrap_or_else(|| panic!("{src}"));
            assert!(t.is_complete(), "{src}");
            assert_eq!(print(&t), printed, "{src}");
        }
        // Parameters are renamed in order of appearance and keep their values.
        let t = read("(+ (* c x) d)").unwrap();
        assert_eq!(print(&t), "(+ (* a x) b)");
        let (inputs, params) = names();
        let n = Names {
            inputs: &inputs,
            params: &params,
        };
        assert_eq!(t.inherited(&n), [("a".into(), 0.5), ("b".into(), 0.5)]);
    }

    #[test]
    fn non_expressions_are_not_read() {
        for src in [
            "(let ((y x)) y)",
            "(if (< x 0) x v)",
            "(pow x v a)",
            "(* z x)",
            "(frob x)",
            "#t",
        ] {
            assert_eq!(read(src), None, "{src}");
        }
        // Past the node limit: refused (the walk is a loop: depth costs no native stack).
        let deep = format!("{}x{}", "(sin ".repeat(100), ")".repeat(100));
        assert_eq!(read(&deep), None);
    }

    #[test]
    fn subtrees_are_ranges_and_splices_keep_one_expression() {
        let t = read("(+ (* a x) (sin v))").unwrap();
        assert_eq!(t.len(), 6);
        assert_eq!(t.end(0), 6);
        assert_eq!(t.end(1), 4);
        assert_eq!(print(&t.subtree(4)), "(sin v)");
        let u = t.replace(1, &read("(cos x)").unwrap());
        assert!(u.is_complete());
        assert_eq!(print(&u), "(+ (cos x) (sin v))");
        assert_eq!(u.depth(), 3);
        assert!(
            !Tree {
                nodes: vec![Node::Binary(BinOp::Add), Node::Input(0)]
            }
            .is_complete()
        );
        assert!(
            !Tree {
                nodes: vec![Node::Input(0), Node::Input(0)]
            }
            .is_complete()
        );
    }

    #[test]
    fn simplification_folds_literals_parameters_and_identities() {
        for (src, simplified) in [
            ("(+ 2 3)", "5.0"),
            ("(* (+ a 2) x)", "(* a x)"),
            ("(* a (* b x))", "(* a x)"),
            ("(+ a (+ b (sin x)))", "(+ a (sin x))"),
            ("(* 1 (sin x))", "(sin x)"),
            ("(pow (sin x) 1)", "(sin x)"),
            ("(+ (sin x) 0)", "(sin x)"),
            ("(- (* a b) x)", "(- a x)"),
            ("(* (* a (sin x)) b)", "(* a (sin x))"),
            ("(+ (+ (+ (* a x) b) c) d)", "(+ (* a x) b)"),
            ("(+ (+ x a) (+ v 2))", "(+ (+ x v) a)"),
            ("(* (* 2 x) (* v 0.5))", "(* x v)"),
            ("(* (* 2 x) (* v 3))", "(* (* 6.0 x) v)"),
            ("(+ (sin x) (cos v))", "(+ (sin x) (cos v))"),
            ("(sin (+ x v))", "(sin (+ x v))"),
            ("(* (cos (exp 0)) x)", "(* 0.5403023058681398 x)"),
            ("(+ x (pow (sin a) 3))", "(+ x a)"),
        ] {
            assert_eq!(print(&read(src).unwrap().simplify()), simplified, "{src}");
        }
        // Folded parameters carry the folded value.
        let t = read("(* a (* b x))").unwrap().simplify();
        assert_eq!(t.nodes[1], Node::Param(0.25));
    }
}
