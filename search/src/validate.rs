//! Candidate validation: parse, check that every free variable is an input or a parameter and that
//! no forbidden form appears, and compute the canonical skeleton (commutative arguments sorted,
//! locals renamed, literals `C`, parameters `P`) used to deduplicate, plus a complexity count.

use std::collections::BTreeSet;

use ndvm_core::{Heap, Node, NodeId, Program, WordKind, print};
use ndvm_frontends::Frontend;

/// Whether `name` is a special form or an auxiliary keyword (`else`, `=>`, `unquote`) of the
/// runtime's vocabulary ([`ndvm_core::vocabulary`]); the primitive operators come from the same
/// rows ([`ndvm_core::is_primitive`]), so the validator accepts exactly what the runtime knows.
fn is_syntax_word(name: &str) -> bool {
    ndvm_core::word(name)
        .is_some_and(|w| matches!(w.kind, WordKind::SpecialForm | WordKind::Keyword))
}

/// Longest candidate source accepted, in bytes (64 KiB). Real candidates are a few hundred bytes;
/// the bound keeps a runaway answer from costing parse time and memory on every rerun.
pub const MAX_SOURCE_BYTES: usize = 64 * 1024;

/// Most nested lists (parentheses, and `'x` quote forms) a candidate may have. The canonical
/// form, complexity count and evaluator recurse once per level, so the bound keeps them far from
/// the stack limit; real candidates nest fewer than 20 levels.
pub const MAX_DEPTH: usize = 256;

/// Stack left below which the skeleton walk continues on a fresh segment, and that segment's size.
const STACK_RED_ZONE: usize = 64 * 1024;
const STACK_GROWTH: usize = 1024 * 1024;

/// Most cells (atoms and pairs) a candidate may have (20,000; a 64 KiB source can hold about
/// 32,000). Bounds the work of the canonical form and of every evaluation.
pub const MAX_CELLS: usize = 20_000;

/// What validation learned about a candidate that passed.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Checked {
    /// Canonical skeleton (deduplication key).
    pub skeleton: String,
    /// Task parameters the program uses, in task order.
    pub params: Vec<String>,
    /// Number of atoms and pairs in the program (a complexity measure).
    pub complexity: usize,
}

/// Why a candidate was rejected.
#[derive(Clone, Debug, PartialEq)]
pub struct Rejection {
    /// A short class: `parse`, `too-large` (over [`MAX_SOURCE_BYTES`] or [`MAX_CELLS`]),
    /// `too-deep` (over [`MAX_DEPTH`]), `free-variable`, `unknown-operator`, `forbidden-form`,
    /// `no-parameters`, `foreign-program` (checked with another heap than the one it was read
    /// into).
    pub class: &'static str,
    /// A human-readable reason.
    pub message: String,
}

struct Walk<'a> {
    heap: &'a Heap,
    inputs: &'a [String],
    params: &'a [String],
    declared: Vec<String>,
    forbidden: &'a [String],
    used: BTreeSet<String>,
    env: Vec<String>,
    complexity: usize,
    /// Memo of [`is_syntax_word`] by name.
    forms: std::collections::HashMap<String, bool>,
}

fn reject(class: &'static str, message: String) -> Rejection {
    Rejection { class, message }
}

impl Walk<'_> {
    fn sym(&self, id: NodeId) -> Option<&str> {
        match self.heap.node(id) {
            Node::Sym(s) => Some(self.heap.symbol_name(s)),
            _ => None,
        }
    }

    fn is_form(&mut self, name: &str) -> bool {
        if let Some(&known) = self.forms.get(name) {
            return known;
        }
        let known = is_syntax_word(name);
        self.forms.insert(name.to_string(), known);
        known
    }

    fn local(&self, name: &str) -> Option<usize> {
        self.env.iter().rposition(|n| n == name)
    }

    fn atom(&mut self, id: NodeId, operator: bool) -> Result<String, Rejection> {
        self.complexity += 1;
        Ok(match self.heap.node(id) {
            Node::Num(_) => "C".to_string(),
            Node::Bool(b) => if b { "#t" } else { "#f" }.to_string(),
            Node::Nil => "()".to_string(),
            Node::Pair(..) => unreachable!("atom called on a pair"),
            Node::Sym(s) => {
                let name = self.heap.symbol_name(s).to_string();
                let param = self.params.contains(&name) || self.declared.contains(&name);
                if operator && self.local(&name).is_none() && (param || self.inputs.contains(&name))
                {
                    // A parameter is a number and an input is data: neither can be applied, so
                    // the call would fail in every evaluation.
                    let what = if param { "a parameter" } else { "an input" };
                    return Err(reject(
                        "unknown-operator",
                        format!(
                            "`{name}` is {what}, not an operator: `({name} …)` cannot be applied"
                        ),
                    ));
                }
                if let Some(k) = self.local(&name) {
                    format!("v{k}")
                } else if param {
                    self.used.insert(name);
                    "P".to_string()
                } else if self.inputs.contains(&name)
                    || ndvm_core::is_primitive(&name)
                    || ndvm_core::word(&name).is_some_and(|w| w.kind == WordKind::Keyword)
                {
                    name
                } else if operator {
                    return Err(reject(
                        "unknown-operator",
                        format!("unknown operator `{name}`"),
                    ));
                } else {
                    return Err(reject(
                        "free-variable",
                        format!(
                            "free variable `{name}` is neither an input nor a parameter ({})",
                            self.bound_names()
                        ),
                    ));
                }
            }
        })
    }

    /// What the task binds, for a free-variable rejection: `inputs: x; parameters: a, b`.
    fn bound_names(&self) -> String {
        let list = |names: Vec<&str>| {
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        };
        let inputs = self.inputs.iter().map(String::as_str).collect();
        let params = self
            .params
            .iter()
            .chain(self.declared.iter().filter(|d| !self.params.contains(d)))
            .map(String::as_str)
            .collect();
        format!("inputs: {}; parameters: {}", list(inputs), list(params))
    }

    fn bind(&mut self, name: Option<&str>) -> String {
        let name = name.unwrap_or("_").to_string();
        self.env.push(name);
        format!("v{}", self.env.len() - 1)
    }

    /// `((v e) …)` bindings: `sequential` evaluates each init after the previous binding
    /// (`let*`); `recursive` binds all first (`letrec`).
    fn bindings(
        &mut self,
        list: NodeId,
        sequential: bool,
        recursive: bool,
    ) -> Result<String, Rejection> {
        let items = self.heap.list_items(list).unwrap_or_default();
        let mut pairs = Vec::new();
        for &b in &items {
            let parts = self.heap.list_items(b).unwrap_or_default();
            pairs.push((
                parts.first().and_then(|&n| self.sym(n)).map(str::to_string),
                parts.get(1).copied(),
            ));
        }
        let mut out = Vec::new();
        if recursive {
            let names: Vec<String> = pairs.iter().map(|(n, _)| self.bind(n.as_deref())).collect();
            for ((_, init), name) in pairs.iter().zip(names) {
                let init = match init {
                    Some(i) => self.expr(*i)?,
                    None => String::new(),
                };
                out.push(format!("({name} {init})"));
            }
        } else if sequential {
            for (n, init) in &pairs {
                let init = match init {
                    Some(i) => self.expr(*i)?,
                    None => String::new(),
                };
                let name = self.bind(n.as_deref());
                out.push(format!("({name} {init})"));
            }
        } else {
            let inits: Vec<String> = pairs
                .iter()
                .map(|(_, i)| i.map_or(Ok(String::new()), |i| self.expr(i)))
                .collect::<Result<_, _>>()?;
            for ((n, _), init) in pairs.iter().zip(inits) {
                let name = self.bind(n.as_deref());
                out.push(format!("({name} {init})"));
            }
        }
        Ok(format!("({})", out.join(" ")))
    }

    /// Binds a formals list, proper or dotted (`(u v . rest)`), or a lone rest symbol.
    fn formals(&mut self, formals: Option<NodeId>) -> Vec<String> {
        let mut names = Vec::new();
        let mut cur = formals;
        while let Some(id) = cur {
            cur = match self.heap.node(id) {
                Node::Pair(p, next) => {
                    let s = self.sym(p).map(str::to_string);
                    names.push(self.bind(s.as_deref()));
                    Some(next)
                }
                Node::Sym(s) => {
                    let s = self.heap.symbol_name(s).to_string();
                    names.push(self.bind(Some(&s)));
                    None
                }
                _ => None,
            };
        }
        names
    }

    /// `(do ((v init step)…) (test result…) command…)`: inits outside, the rest with the
    /// variables bound.
    fn do_form(&mut self, items: &[NodeId]) -> Result<String, Rejection> {
        let specs: Vec<Vec<NodeId>> = items
            .get(1)
            .and_then(|&s| self.heap.list_items(s))
            .unwrap_or_default()
            .into_iter()
            .map(|s| self.heap.list_items(s).unwrap_or_default())
            .collect();
        let mut inits = Vec::new();
        for p in &specs {
            inits.push(p.get(1).map(|&i| self.expr(i)).transpose()?);
        }
        let names: Vec<String> = specs
            .iter()
            .map(|p| {
                let n = p.first().and_then(|&n| self.sym(n)).map(str::to_string);
                self.bind(n.as_deref())
            })
            .collect();
        let mut out = Vec::new();
        for ((p, name), init) in specs.iter().zip(names).zip(inits) {
            let step = match p.get(2) {
                Some(&st) => format!(" {}", self.expr(st)?),
                None => String::new(),
            };
            out.push(format!("({name} {}{step})", init.unwrap_or_default()));
        }
        let exit = items
            .get(2)
            .and_then(|&e| self.heap.list_items(e))
            .unwrap_or_default();
        let exit = self.body(&exit)?;
        let commands = self.body(items.get(3..).unwrap_or(&[]))?;
        Ok(format!(
            "(do ({}) ({}) {})",
            out.join(" "),
            exit.join(" "),
            commands.join(" ")
        ))
    }

    fn body(&mut self, items: &[NodeId]) -> Result<Vec<String>, Rejection> {
        items.iter().map(|&i| self.expr(i)).collect()
    }

    /// The skeleton of `id`. The walk recurses once per nesting level, at most [`MAX_DEPTH`]
    /// (deeper programs were rejected by `measure`), on a stack grown on demand so that no
    /// build's frame size can overflow a worker thread's stack.
    fn expr(&mut self, id: NodeId) -> Result<String, Rejection> {
        stacker::maybe_grow(STACK_RED_ZONE, STACK_GROWTH, || self.expr_here(id))
    }

    fn expr_here(&mut self, id: NodeId) -> Result<String, Rejection> {
        let Node::Pair(head, _) = self.heap.node(id) else {
            return self.atom(id, false);
        };
        self.complexity += 1;
        let Some(items) = self.heap.list_items(id) else {
            return Ok(print::display(self.heap, id));
        };
        let head_name = self.sym(head).map(str::to_string);
        let is_form = match head_name.as_deref() {
            Some(h) => self.local(h).is_none() && self.is_form(h),
            None => false,
        };
        let form = head_name.as_deref().filter(|_| is_form);
        if let Some(f) = form
            && self.forbidden.iter().any(|x| x == f)
        {
            return Err(reject(
                "forbidden-form",
                format!("the form `{f}` is not allowed in this task"),
            ));
        }
        let depth = self.env.len();
        let res = match form {
            Some("quote") => Ok(print::display(self.heap, id)),
            Some("params") => {
                for &e in &items[1..] {
                    let parts = self.heap.list_items(e).unwrap_or_default();
                    if let Some(n) = parts.first().and_then(|&n| self.sym(n)) {
                        let n = n.to_string();
                        self.used.insert(n.clone());
                        self.declared.push(n);
                    }
                }
                Ok("(params)".to_string())
            }
            Some(f @ ("let" | "let*" | "letrec" | "letrec*" | "loop")) => {
                let mut rest = &items[1..];
                let mut named = String::new();
                if f == "let"
                    && let Some(&n) = rest.first()
                    && let Some(name) = self.sym(n)
                {
                    let name = name.to_string();
                    named = self.bind(Some(&name)) + " ";
                    rest = &rest[1..];
                }
                let Some((&binds, body)) = rest.split_first() else {
                    return Ok(print::display(self.heap, id));
                };
                let b = self.bindings(binds, f == "let*", f.starts_with("letrec"))?;
                let body = self.body(body)?;
                Ok(format!("({f} {named}{b} {})", body.join(" ")))
            }
            Some("do") => self.do_form(&items),
            Some("case-lambda") => {
                let mut clauses = Vec::new();
                for &c in &items[1..] {
                    let parts = self.heap.list_items(c).unwrap_or_default();
                    let names = self.formals(parts.first().copied());
                    let body = self.body(parts.get(1..).unwrap_or(&[]))?;
                    self.env.truncate(depth);
                    clauses.push(format!("(({}) {})", names.join(" "), body.join(" ")));
                }
                Ok(format!("(case-lambda {})", clauses.join(" ")))
            }
            Some("lambda") => {
                let params = items.get(1).copied();
                let mut names = Vec::new();
                if let Some(p) = params {
                    if let Some(s) = self.sym(p) {
                        let s = s.to_string();
                        names.push(self.bind(Some(&s)));
                    } else {
                        for a in self.heap.list_items(p).unwrap_or_default() {
                            let s = self.sym(a).map(str::to_string);
                            names.push(self.bind(s.as_deref()));
                        }
                    }
                }
                let body = self.body(items.get(2..).unwrap_or(&[]))?;
                Ok(format!("(lambda ({}) {})", names.join(" "), body.join(" ")))
            }
            Some("define") => {
                // (define name e) or (define (f args…) body…); the name stays bound afterwards.
                let target = items.get(1).copied();
                let out = match target.map(|t| self.heap.node(t)) {
                    Some(Node::Pair(..)) => {
                        let parts = self
                            .heap
                            .list_items(target.unwrap_or(id))
                            .unwrap_or_default();
                        let fname = parts.first().and_then(|&n| self.sym(n)).map(str::to_string);
                        let f = self.bind(fname.as_deref());
                        let inner = self.env.len();
                        let mut args = Vec::new();
                        for &a in parts.iter().skip(1) {
                            let s = self.sym(a).map(str::to_string);
                            args.push(self.bind(s.as_deref()));
                        }
                        let body = self.body(items.get(2..).unwrap_or(&[]))?;
                        self.env.truncate(inner);
                        format!("(define ({f} {}) {})", args.join(" "), body.join(" "))
                    }
                    _ => {
                        let name = target.and_then(|t| self.sym(t)).map(str::to_string);
                        let f = self.bind(name.as_deref());
                        let body = self.body(items.get(2..).unwrap_or(&[]))?;
                        format!("(define {f} {})", body.join(" "))
                    }
                };
                return Ok(out); // keep the binding for later forms
            }
            Some(f) => {
                let args = self.body(&items[1..])?;
                Ok(format!("({f} {})", args.join(" ")))
            }
            None => {
                let op = if head_name.is_some() {
                    self.atom(head, true)?
                } else {
                    self.expr(head)?
                };
                let mut args = self.body(&items[1..])?;
                if (op == "+" || op == "*") && head_name.as_deref() == Some(op.as_str()) {
                    args.sort();
                }
                Ok(format!("({op} {})", args.join(" ")))
            }
        };
        self.env.truncate(depth);
        res
    }
}

/// Measures the program without recursing: rejects it as `too-deep` when lists nest more than
/// [`MAX_DEPTH`] levels (a `car` step is one level, a `cdr` step none) and as `too-large` when it
/// has more than [`MAX_CELLS`] cells, so that the recursive walk after it stays bounded.
fn measure(heap: &Heap, program: &Program) -> Result<(), Rejection> {
    let mut stack: Vec<(NodeId, usize)> = program.forms().iter().map(|&f| (f, 0)).collect();
    let mut cells = 0usize;
    while let Some((id, depth)) = stack.pop() {
        cells += 1;
        if cells > MAX_CELLS {
            return Err(reject(
                "too-large",
                format!("the program has more than {MAX_CELLS} cells"),
            ));
        }
        if let Node::Pair(a, d) = heap.node(id) {
            if depth + 1 > MAX_DEPTH {
                return Err(reject(
                    "too-deep",
                    format!("the program nests lists more than {MAX_DEPTH} deep"),
                ));
            }
            stack.push((d, depth));
            stack.push((a, depth + 1));
        }
    }
    Ok(())
}

/// Deepest parenthesis nesting of `text` (`(`/`[` open, `)`/`]` close), counted in one pass
/// without parsing; string literals and `;` comments are skipped. Unbalanced text is fine: the
/// count is an upper bound check before the reader runs.
pub fn paren_depth(text: &str) -> usize {
    let bytes = text.as_bytes();
    let (mut depth, mut max) = (0usize, 0usize);
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b';' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'(' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    max
}

/// The size and nesting checks made on a candidate's text before it is parsed: `too-large`
/// over [`MAX_SOURCE_BYTES`], `too-deep` over [`MAX_DEPTH`] parentheses.
pub fn precheck_source(src: &str) -> Result<(), Rejection> {
    if src.len() > MAX_SOURCE_BYTES {
        return Err(reject(
            "too-large",
            format!(
                "the program is {} bytes, over the limit of {MAX_SOURCE_BYTES}",
                src.len()
            ),
        ));
    }
    let depth = paren_depth(src);
    if depth > MAX_DEPTH {
        return Err(reject(
            "too-deep",
            format!("the program nests parentheses {depth} deep, over the limit of {MAX_DEPTH}"),
        ));
    }
    Ok(())
}

/// Checks a parsed program against the task's inputs, parameters and forbidden forms.
pub fn check(
    heap: &Heap,
    program: &Program,
    inputs: &[String],
    params: &[String],
    forbidden: &[String],
) -> Result<Checked, Rejection> {
    program
        .check_heap(heap)
        .map_err(|e| reject(e.kind.class(), e.to_string()))?;
    let mut walk = Walk {
        heap,
        inputs,
        params,
        declared: Vec::new(),
        forbidden,
        used: BTreeSet::new(),
        env: Vec::new(),
        complexity: 0,
        forms: std::collections::HashMap::new(),
    };
    measure(heap, program)?;
    let mut forms = Vec::new();
    for &f in program.forms() {
        forms.push(walk.expr(f)?);
    }
    let used: Vec<String> = params
        .iter()
        .filter(|p| walk.used.contains(*p))
        .cloned()
        .chain(
            walk.declared
                .iter()
                .filter(|d| !params.contains(d))
                .cloned(),
        )
        .collect();
    if used.is_empty() {
        return Err(reject(
            "no-parameters",
            "the program uses no parameter".to_string(),
        ));
    }
    Ok(Checked {
        skeleton: forms.join(" "),
        params: used,
        complexity: walk.complexity,
    })
}

/// Parses `src` with `frontend` and checks it.
pub fn check_source(
    frontend: &dyn Frontend,
    src: &str,
    inputs: &[String],
    params: &[String],
    forbidden: &[String],
) -> Result<(Heap, Program, Checked), Rejection> {
    precheck_source(src)?;
    let mut heap = Heap::new();
    let program = frontend.parse(&mut heap, src).map_err(|e| {
        let (line, col) = ndvm_frontends::LineIndex::new(src).line_col(e.span.start);
        reject("parse", format!("{} (at {line}:{col})", e.message))
    })?;
    let checked = check(&heap, &program, inputs, params, forbidden)?;
    Ok((heap, program, checked))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEME: ndvm_frontends::scheme::Scheme = ndvm_frontends::scheme::Scheme;

    fn skel(src: &str) -> Result<Checked, Rejection> {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        check_source(
            &SCHEME,
            src,
            &s(&["x"]),
            &s(&["a", "b", "c", "d"]),
            &s(&["define"]),
        )
        .map(|r| r.2)
    }

    #[test]
    fn a_parse_rejection_says_line_and_column() {
        let r = skel("(+ a\n   x))").unwrap_err();
        assert_eq!(r.class, "parse");
        assert!(r.message.ends_with("(at 2:6)"), "{}", r.message);
    }

    #[test]
    fn skeleton_sorts_commutative_args_and_abstracts_literals_and_params() {
        let a = skel("(+ (* a x) 1.5)").unwrap();
        let b = skel("(+ 2 (* x b))").unwrap();
        assert_eq!(a.skeleton, b.skeleton);
        assert_eq!(a.skeleton, "(+ (* P x) C)");
        assert_eq!(a.params, ["a"]);
        assert_ne!(
            skel("(- (* a x) 1)").unwrap().skeleton,
            skel("(- 1 (* a x))").unwrap().skeleton
        );
    }

    #[test]
    fn locals_are_renamed() {
        let a = skel("(let ((u (* a x))) (sin u))").unwrap();
        let b = skel("(let ((w (* b x))) (sin w))").unwrap();
        assert_eq!(a.skeleton, b.skeleton);
        assert_eq!(a.skeleton, "(let ((v0 (* P x))) (sin v0))");
    }

    #[test]
    fn rejections_have_classes() {
        assert_eq!(skel("(+ a y)").unwrap_err().class, "free-variable");
        assert_eq!(skel("(frob a x)").unwrap_err().class, "unknown-operator");
        // A parameter or an input at the head of a call: never a procedure.
        let applied = skel("(+ (a x) b)").unwrap_err();
        assert_eq!(applied.class, "unknown-operator");
        assert_eq!(
            applied.message,
            "`a` is a parameter, not an operator: `(a …)` cannot be applied"
        );
        let input = skel("(* a (x 2))").unwrap_err();
        assert_eq!(
            input.message,
            "`x` is an input, not an operator: `(x …)` cannot be applied"
        );
        let declared = check_source(&SCHEME, "(params (k free 1.0)) (k 2)", &[], &[], &[]);
        assert_eq!(declared.unwrap_err().class, "unknown-operator");
        // A local of the same name (a procedure) shadows the parameter.
        assert!(skel("(let ((a (lambda (t) (* t b)))) (a x))").is_ok());
        assert_eq!(skel("(define q a) q").unwrap_err().class, "forbidden-form");
        assert_eq!(skel("(+ x 1)").unwrap_err().class, "no-parameters");
        assert_eq!(skel("(+ a").unwrap_err().class, "parse");
        assert!(skel("(loop ((i 0) (s a)) (if (< i 3) (recur (+ i 1) (* s x)) s))").is_ok());
    }

    /// Issue 11: a free variable's rejection says what the task binds.
    #[test]
    fn issue_11_free_variable_names_the_inputs_and_parameters() {
        assert_eq!(
            skel("(+ a y)").unwrap_err().message,
            "free variable `y` is neither an input nor a parameter (inputs: x; parameters: a, b, c, d)"
        );
        let declared =
            check_source(&SCHEME, "(params (k free 1.0)) (* k t)", &[], &[], &[]).unwrap_err();
        assert_eq!(
            declared.message,
            "free variable `t` is neither an input nor a parameter (inputs: none; parameters: k)"
        );
    }

    /// The validator accepts exactly the runtime's vocabulary: every primitive as an operator,
    /// every special form and keyword, and no refused or unknown word.
    #[test]
    fn the_validator_accepts_exactly_the_vocabulary() {
        let words = ndvm_core::vocabulary();
        assert!(words.len() > 80, "{words:?}");
        for w in words {
            let r = skel(&format!("({} a x)", w.name));
            match w.kind {
                WordKind::Primitive => assert!(r.is_ok(), "`{}` rejected: {r:?}", w.name),
                WordKind::SpecialForm | WordKind::Keyword => {
                    assert!(is_syntax_word(w.name), "{}", w.name);
                }
                WordKind::Unsupported => {
                    assert!(!is_syntax_word(w.name), "{}", w.name);
                    assert_eq!(r.unwrap_err().class, "unknown-operator", "{}", w.name);
                }
            }
        }
        for name in ["softplus", "log1p", "expm1", "frobnicate"] {
            assert!(ndvm_core::word(name).is_none(), "{name}");
            let r = skel(&format!("({name} a x)")).unwrap_err();
            assert_eq!(r.class, "unknown-operator", "{name}: {r:?}");
        }
        assert!(skel("(cond ((< x a) x) (else a))").is_ok());
        assert!(skel("(cond ((* x a) => (lambda (v) (* v v))) (else a))").is_ok());
        assert!(
            skel("(let ((s 0.0)) (do ((i 0 (+ i 1))) ((= i 3) s) (set! s (+ s (* a x)))))").is_ok()
        );
        let cl = skel("((case-lambda ((u) (* a u)) ((u . r) (apply + u r))) x)").unwrap();
        assert_eq!(
            cl.skeleton,
            "((case-lambda ((v0) (* P v0)) ((v0 v1) (apply + v0 v1))) x)"
        );
        assert_eq!(
            skel("(do ((i 0 (+ i 1))) ((= i 3) j) (* a x))")
                .unwrap_err()
                .class,
            "free-variable"
        );
    }

    fn nested(depth: usize) -> String {
        format!("{}a{}", "(+ x ".repeat(depth), ")".repeat(depth))
    }

    #[test]
    fn deep_and_large_programs_are_rejected_without_overflow() {
        assert!(skel(&nested(MAX_DEPTH)).is_ok());
        let r = skel(&nested(MAX_DEPTH + 1)).unwrap_err();
        assert_eq!(r.class, "too-deep", "{r:?}");
        let r = skel(&nested(10_000)).unwrap_err();
        assert_eq!(r.class, "too-deep");
        assert!(r.message.contains("10000 deep"), "{}", r.message);
        // Quote marks nest without parentheses: only the heap measurement sees them.
        let quotes = format!("(+ a {}x)", "'".repeat(10_000));
        assert_eq!(skel(&quotes).unwrap_err().class, "too-deep");
        let long = format!("(+ a {})", "x ".repeat(MAX_SOURCE_BYTES / 2));
        let r = skel(&long).unwrap_err();
        assert_eq!(r.class, "too-large");
        assert!(r.message.contains("65536"), "{}", r.message);
        let wide = format!("(+ a {})", "x ".repeat(MAX_CELLS));
        assert!(wide.len() < MAX_SOURCE_BYTES);
        let r = skel(&wide).unwrap_err();
        assert_eq!(r.class, "too-large");
        assert!(r.message.contains("20000 cells"), "{}", r.message);
        assert_eq!(paren_depth("(a \"((((\" ; ((((\n [b (c)])"), 3);
    }
}
