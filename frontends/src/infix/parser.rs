//! Infix tokens to heap forms: a precedence-climbing parser that lowers as it goes, so every pair
//! and atom it builds carries the span of the infix text it came from.
//!
//! Nesting is bounded by [`MAX_DEPTH`]: deeper input is the error `P008`, never a stack overflow.

use ndvm_core::{Heap, NodeId, Program};

use super::lexer::{Tok, Token, tokenize};
use crate::error::{ParseError, ParseErrorKind};
use crate::span::Span;

/// The deepest expression nesting the parser follows: each expression inside parentheses,
/// brackets, a block, an argument list, a prefix operator or an operand of a binary operator is
/// one level deeper than what contains it.
pub const MAX_DEPTH: usize = 10_000;

/// Binding strengths, loosest first.
pub(crate) const PREC_OR: u8 = 1;
pub(crate) const PREC_AND: u8 = 2;
pub(crate) const PREC_NOT: u8 = 3;
pub(crate) const PREC_CMP: u8 = 4;
pub(crate) const PREC_ADD: u8 = 5;
pub(crate) const PREC_MUL: u8 = 6;
pub(crate) const PREC_UNARY: u8 = 7;
pub(crate) const PREC_POW: u8 = 8;

/// A binary operator: its text, the heap symbol it lowers to, and its binding strength.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BinOp {
    pub(crate) text: &'static str,
    pub(crate) head: &'static str,
    pub(crate) prec: u8,
}

/// Every binary operator. `!=` lowers to `(not (= a b))`.
pub(crate) const BINOPS: &[BinOp] = &[
    BinOp {
        text: "or",
        head: "or",
        prec: PREC_OR,
    },
    BinOp {
        text: "and",
        head: "and",
        prec: PREC_AND,
    },
    BinOp {
        text: "==",
        head: "=",
        prec: PREC_CMP,
    },
    BinOp {
        text: "!=",
        head: "=",
        prec: PREC_CMP,
    },
    BinOp {
        text: "<",
        head: "<",
        prec: PREC_CMP,
    },
    BinOp {
        text: "<=",
        head: "<=",
        prec: PREC_CMP,
    },
    BinOp {
        text: ">",
        head: ">",
        prec: PREC_CMP,
    },
    BinOp {
        text: ">=",
        head: ">=",
        prec: PREC_CMP,
    },
    BinOp {
        text: "+",
        head: "+",
        prec: PREC_ADD,
    },
    BinOp {
        text: "-",
        head: "-",
        prec: PREC_ADD,
    },
    BinOp {
        text: "*",
        head: "*",
        prec: PREC_MUL,
    },
    BinOp {
        text: "/",
        head: "/",
        prec: PREC_MUL,
    },
    BinOp {
        text: "^",
        head: "expt",
        prec: PREC_POW,
    },
];

impl BinOp {
    /// `a + b + c` lowers to one `(+ a b c)`; so do `*`, `and` and `or`.
    pub(crate) fn flattens(self) -> bool {
        matches!(self.text, "+" | "*" | "and" | "or")
    }
}

/// How an expression was written, where that changes what surrounds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tag {
    Plain,
    /// In parentheses: `-(2)` negates, `-2` is a literal.
    Paren,
    /// A bare number literal.
    Num,
    /// A bare vector literal `[…]` (rows of a matrix literal).
    Vec,
}

/// One parsed expression: its heap form, the span of its text, how it was written.
#[derive(Clone, Copy, Debug)]
struct Expr {
    node: NodeId,
    span: Span,
    tag: Tag,
}

/// A form with its span.
type Form = (NodeId, Span);

/// One `name = init` of a `let` or `loop`.
#[derive(Clone, Copy, Debug)]
struct Bind {
    name: Form,
    init: Form,
}

/// A statement of a block before `let`s are grouped with what follows them.
#[derive(Clone, Debug)]
enum Stmt {
    /// `let a = 1, b = 2` without `in`: scopes over the rest of the block.
    Let { binds: Vec<Bind>, span: Span },
    /// Any other statement; `params` marks a parameter declaration.
    Form { form: Form, params: bool },
}

struct Parser<'src, 'h> {
    src: &'src str,
    toks: Vec<Token>,
    pos: usize,
    heap: &'h mut Heap,
    depth: usize,
    /// Whether a line break ends the current expression (at the top level and in `{ }`).
    lines: bool,
}

fn err(kind: ParseErrorKind, span: Span, message: impl Into<String>) -> ParseError {
    ParseError::new(kind, span, message)
}

/// Parses a whole infix program onto `heap`.
pub(crate) fn parse_program(heap: &mut Heap, src: &str) -> Result<Program, ParseError> {
    let toks = tokenize(src)?;
    let mut p = Parser {
        src,
        toks,
        pos: 0,
        heap,
        depth: 0,
        lines: true,
    };
    let stmts = p.stmts(true, None)?;
    if let Some(t) = p.peek() {
        return Err(p.unexpected_close(t));
    }
    if stmts.is_empty() {
        return Err(err(
            ParseErrorKind::EmptyProgram,
            Span::at(src.len()),
            "empty program: expected at least one expression",
        ));
    }
    let forms = p.group_lets(stmts, true)?;
    Ok(Program::new(p.heap, forms.iter().map(|f| f.0).collect()))
}

impl Parser<'_, '_> {
    // ---- tokens ----

    fn peek(&self) -> Option<Token> {
        self.toks.get(self.pos).copied()
    }

    fn text(&self, t: Token) -> &str {
        &self.src[t.start..t.end]
    }

    fn is_punct(&self, p: &str) -> bool {
        self.peek().is_some_and(|t| is_punct(t, p))
    }

    fn is_keyword(&self, k: &str) -> bool {
        self.peek()
            .is_some_and(|t| t.tok == Tok::Keyword && self.text(t) == k)
    }

    fn eat_punct(&mut self, p: &str) -> Option<Token> {
        let t = self.peek().filter(|_| self.is_punct(p))?;
        self.pos += 1;
        Some(t)
    }

    fn eat_keyword(&mut self, k: &str) -> Option<Token> {
        let t = self.peek().filter(|_| self.is_keyword(k))?;
        self.pos += 1;
        Some(t)
    }

    /// The span to blame for "found …": the next token, or the end of the last token.
    fn here(&self) -> Span {
        match self.peek() {
            Some(t) => t.span(),
            None => Span::at(self.toks.last().map_or(self.src.len(), |t| t.end)),
        }
    }

    fn describe_next(&self) -> String {
        match self.peek() {
            None => "the end of input".into(),
            Some(t) => format!("`{}`", self.text(t)),
        }
    }

    /// "expected WHAT, found …", as `UnexpectedEof` at the end of input.
    fn expected(&self, what: &str) -> ParseError {
        let kind = if self.peek().is_none() {
            ParseErrorKind::UnexpectedEof
        } else {
            ParseErrorKind::Expected
        };
        err(
            kind,
            self.here(),
            format!("expected {what}, found {}", self.describe_next()),
        )
    }

    fn unexpected_close(&self, t: Token) -> ParseError {
        let text = self.text(t);
        if matches!(text, ")" | "]" | "}") {
            err(
                ParseErrorKind::UnexpectedClose,
                t.span(),
                format!("`{text}` closes nothing"),
            )
        } else {
            err(
                ParseErrorKind::Expected,
                t.span(),
                format!("expected a new line or `;` before `{text}`"),
            )
        }
    }

    /// Consumes the closer of `open` or fails: unclosed at the end of input, else expected.
    fn close(&mut self, open: Token, close: &str, what: &str) -> Result<Token, ParseError> {
        if let Some(t) = self.eat_punct(close) {
            return Ok(t);
        }
        if self.peek().is_none() {
            let o = self.text(open).to_string();
            return Err(err(
                ParseErrorKind::UnbalancedOpen,
                open.span(),
                format!("unclosed `{o}`: expected `{close}` before the end of input"),
            ));
        }
        Err(self.expected(&format!("{what} or `{close}`")))
    }

    // ---- heap building ----

    fn sym(&mut self, name: &str, span: Span) -> Form {
        let id = self.heap.sym(name);
        self.heap.set_span(id, span.into());
        (id, span)
    }

    fn num(&mut self, x: f64, span: Span) -> NodeId {
        let id = self.heap.num(x);
        self.heap.set_span(id, span.into());
        id
    }

    /// A proper list of `items`; the first pair spans `whole`, each later pair its element to
    /// the end of `whole`.
    fn list(&mut self, items: &[Form], whole: Span) -> NodeId {
        let mut tail = Heap::NIL;
        for (i, &(item, span)) in items.iter().enumerate().rev() {
            tail = self.heap.cons(item, tail);
            let start = if i == 0 { whole.start } else { span.start };
            self.heap.set_span(
                tail,
                Span {
                    start,
                    end: whole.end,
                }
                .into(),
            );
        }
        tail
    }

    fn form(&mut self, items: &[Form], whole: Span) -> Expr {
        Expr {
            node: self.list(items, whole),
            span: whole,
            tag: Tag::Plain,
        }
    }

    // ---- statements ----

    /// Statements up to `close` (or the end of input), separated by new lines or `;`.
    fn stmts(&mut self, top: bool, close: Option<&str>) -> Result<Vec<Stmt>, ParseError> {
        let mut out = Vec::new();
        loop {
            while self.eat_punct(";").is_some() {}
            let Some(t) = self.peek() else { break };
            if close.is_some_and(|c| self.is_punct(c)) {
                break;
            }
            if matches!(t.tok, Tok::Punct(")" | "]" | "}")) {
                return Err(self.unexpected_close(t));
            }
            out.push(self.stmt(top)?);
            match self.peek() {
                None => {}
                Some(t) if t.newline_before || t.tok == Tok::Punct(";") => {}
                Some(_) if close.is_some_and(|c| self.is_punct(c)) => {}
                Some(t) => return Err(self.unexpected_close(t)),
            }
        }
        Ok(out)
    }

    fn stmt(&mut self, top: bool) -> Result<Stmt, ParseError> {
        let Some(t) = self.peek() else {
            return Err(self.expected("a statement"));
        };
        let next_is = |p: &Self, s: &str| p.toks.get(p.pos + 1).is_some_and(|n| is_punct(*n, s));
        match t.tok {
            Tok::Keyword if self.text(t) == "params" => {
                if !top {
                    return Err(err(
                        ParseErrorKind::Misplaced,
                        t.span(),
                        "`params` declarations belong at the top level of the program",
                    ));
                }
                let form = self.params()?;
                Ok(Stmt::Form { form, params: true })
            }
            Tok::Keyword if self.text(t) == "let" && !self.star_follows(t) => {
                self.pos += 1;
                let binds = self.binds("`let`")?;
                if self.is_keyword("in") {
                    let e = self.let_in(t, binds, false)?;
                    return Ok(Stmt::Form {
                        form: (e.node, e.span),
                        params: false,
                    });
                }
                let end = binds.last().map_or(t.span(), |b| b.init.1);
                Ok(Stmt::Let {
                    binds,
                    span: t.span().to(end),
                })
            }
            Tok::Keyword
                if self.text(t) == "fn"
                    && self
                        .toks
                        .get(self.pos + 1)
                        .is_some_and(|n| matches!(n.tok, Tok::Name | Tok::Quoted)) =>
            {
                let form = self.fn_define()?;
                Ok(Stmt::Form {
                    form,
                    params: false,
                })
            }
            Tok::Name | Tok::Quoted if next_is(self, "=") => {
                let name = self.name("a name")?;
                self.pos += 1;
                let value = self.expr()?;
                let whole = name.1.to(value.span);
                let define = self.sym("define", name.1);
                let node = self.list(&[define, name, (value.node, value.span)], whole);
                Ok(Stmt::Form {
                    form: (node, whole),
                    params: false,
                })
            }
            _ => {
                let e = self.expr()?;
                Ok(Stmt::Form {
                    form: (e.node, e.span),
                    params: false,
                })
            }
        }
    }

    /// Groups each `let` statement with the statements after it: one single-binding `let` is
    /// `(let ((x e)) rest…)`, a run of them `(let* (…) rest…)`, a `let a = …, b = …` statement
    /// `(let ((a …) (b …)) rest…)`. Works from the end, without recursion.
    fn group_lets(&mut self, stmts: Vec<Stmt>, top: bool) -> Result<Vec<Form>, ParseError> {
        if top {
            let first_let = stmts.iter().position(|s| matches!(s, Stmt::Let { .. }));
            if let Some(Stmt::Form { form, .. }) = first_let.and_then(|i| {
                stmts[i..]
                    .iter()
                    .find(|s| matches!(s, Stmt::Form { params: true, .. }))
            }) {
                return Err(err(
                    ParseErrorKind::Misplaced,
                    form.1,
                    "`params` must come before the first `let` (a `let` encloses the statements after it)",
                ));
            }
        }
        let single = |s: &Stmt| matches!(s, Stmt::Let { binds, .. } if binds.len() == 1);
        let mut tail: Vec<Form> = Vec::new(); // reversed
        let mut i = stmts.len();
        while i > 0 {
            i -= 1;
            let (binds, span) = match &stmts[i] {
                Stmt::Form { form, .. } => {
                    tail.push(*form);
                    continue;
                }
                Stmt::Let { binds, span } => (binds, *span),
            };
            let mut j = i;
            if binds.len() == 1 {
                while j > 0 && single(&stmts[j - 1]) {
                    j -= 1;
                }
            }
            let mut all = Vec::new();
            let mut start = span;
            for s in &stmts[j..=i] {
                if let Stmt::Let { binds, span } = s {
                    all.extend_from_slice(binds);
                    start = start.to(*span);
                }
            }
            if tail.is_empty() {
                return Err(err(
                    ParseErrorKind::Expected,
                    span,
                    "a `let` needs an expression after it in its block (the value it is for)",
                ));
            }
            tail.reverse();
            let keyword_span = Span::new(start.start as usize, start.start as usize + 3);
            let head = if i > j { "let*" } else { "let" };
            let head = self.sym(head, keyword_span);
            let form = self.let_form(head, &all, &tail, start);
            tail = vec![form];
            i = j;
        }
        tail.reverse();
        Ok(tail)
    }

    /// `(HEAD ((name init) …) body…)`, spanning `start` to the end of the body.
    fn let_form(&mut self, head: Form, binds: &[Bind], body: &[Form], start: Span) -> Form {
        let whole = body.last().map_or(start, |b| start.to(b.1));
        let bindings = self.bindings(binds, start);
        let mut items = vec![head, bindings];
        items.extend_from_slice(body);
        (self.list(&items, whole), whole)
    }

    fn bindings(&mut self, binds: &[Bind], fallback: Span) -> Form {
        let pairs: Vec<Form> = binds
            .iter()
            .map(|b| {
                let span = b.name.1.to(b.init.1);
                (self.list(&[b.name, b.init], span), span)
            })
            .collect();
        let span = match (pairs.first(), pairs.last()) {
            (Some(a), Some(b)) => a.1.to(b.1),
            _ => fallback,
        };
        (self.list(&pairs, span), span)
    }

    /// `name = expr, …` (at least one).
    fn binds(&mut self, after: &str) -> Result<Vec<Bind>, ParseError> {
        let mut binds = Vec::new();
        loop {
            let name = self.name(&format!("a name after {after}"))?;
            if self.eat_punct("=").is_none() {
                return Err(self.expected(&format!(
                    "`=` after `{}`",
                    self.src
                        .get(name.1.start as usize..name.1.end as usize)
                        .unwrap_or("")
                )));
            }
            let init = self.expr()?;
            binds.push(Bind {
                name,
                init: (init.node, init.span),
            });
            if self.eat_punct(",").is_none() {
                return Ok(binds);
            }
        }
    }

    /// A name (plain or backquoted) as a symbol atom.
    fn name(&mut self, what: &str) -> Result<Form, ParseError> {
        match self.peek() {
            Some(t) if t.tok == Tok::Name => {
                self.pos += 1;
                let name = self.text(t).to_string();
                Ok(self.sym(&name, t.span()))
            }
            Some(t) if t.tok == Tok::Quoted => {
                self.pos += 1;
                let name = self.src[t.start + 1..t.end - 1].to_string();
                Ok(self.sym(&name, t.span()))
            }
            Some(t) if t.tok == Tok::Keyword => {
                let k = self.text(t);
                Err(err(
                    ParseErrorKind::Expected,
                    t.span(),
                    format!(
                        "expected {what}, found the keyword `{k}` (write `` `{k}` `` for a name spelled like a keyword)"
                    ),
                ))
            }
            _ => Err(self.expected(what)),
        }
    }

    /// `params a: positive = 1.0, b = 0.1, c, d: bounded(0, 10) = 2`.
    fn params(&mut self) -> Result<Form, ParseError> {
        let Some(kw) = self.eat_keyword("params") else {
            return Err(self.expected("`params`"));
        };
        let head = self.sym("params", kw.span());
        let mut items = vec![head];
        loop {
            items.push(self.param_entry()?);
            if self.eat_punct(",").is_none() {
                break;
            }
        }
        let whole = kw.span().to(items.last().map_or(kw.span(), |f| f.1));
        Ok((self.list(&items, whole), whole))
    }

    fn param_entry(&mut self) -> Result<Form, ParseError> {
        let name = self.name("a parameter name")?;
        let mut kind = ("free", name.1);
        let mut bounds = None;
        if self.eat_punct(":").is_some() {
            let Some(t) = self.peek().filter(|t| t.tok == Tok::Name) else {
                return Err(
                    self.expected("a parameter kind (free, positive, unit or bounded(lo, hi))")
                );
            };
            kind = match self.text(t) {
                "free" => ("free", t.span()),
                "positive" => ("positive", t.span()),
                "unit" => ("unit", t.span()),
                "bounded" => ("bounded", t.span()),
                other => {
                    return Err(err(
                        ParseErrorKind::Expected,
                        t.span(),
                        format!(
                            "unknown parameter kind `{other}`: expected free, positive, unit or bounded(lo, hi)"
                        ),
                    ));
                }
            };
            self.pos += 1;
            if kind.0 == "bounded" {
                let Some(open) = self.eat_punct("(") else {
                    return Err(self.expected("`(` after `bounded` (write bounded(lo, hi))"));
                };
                let lo = self.signed_number("the lower bound")?;
                if self.eat_punct(",").is_none() {
                    return Err(self.expected("`,` between the bounds"));
                }
                let hi = self.signed_number("the upper bound")?;
                self.close(open, ")", "`)` after the bounds")?;
                bounds = Some((lo, hi));
            }
        }
        let init = if self.eat_punct("=").is_some() {
            self.signed_number("an initial value (a number)")?
        } else {
            let x = match (kind.0, bounds) {
                ("unit", _) => 0.5,
                (_, Some((lo, hi))) => 0.5 * (lo.0 + hi.0),
                _ => 1.0,
            };
            (x, name.1)
        };
        let kind_sym = self.sym(kind.0, kind.1);
        let init_node = self.num(init.0, init.1);
        let mut items = vec![name, kind_sym, (init_node, init.1)];
        let mut end = init.1.to(kind.1);
        if let Some((lo, hi)) = bounds {
            let lo_node = self.num(lo.0, lo.1);
            let hi_node = self.num(hi.0, hi.1);
            items.push((lo_node, lo.1));
            items.push((hi_node, hi.1));
            end = end.to(hi.1);
        }
        let whole = name.1.to(end);
        Ok((self.list(&items, whole), whole))
    }

    /// A number literal, optionally negated: `2`, `-0.5`, `inf`.
    fn signed_number(&mut self, what: &str) -> Result<(f64, Span), ParseError> {
        let minus = self.eat_punct("-");
        let Some(t) = self.peek() else {
            return Err(self.expected(what));
        };
        let x = match t.tok {
            Tok::Num(x) => x,
            Tok::Keyword if self.text(t) == "inf" => f64::INFINITY,
            Tok::Keyword if self.text(t) == "nan" => f64::NAN,
            _ => return Err(self.expected(what)),
        };
        self.pos += 1;
        Ok(match minus {
            Some(m) => (-x, m.span().to(t.span())),
            None => (x, t.span()),
        })
    }

    /// `fn f(a, b) = body` as `(define (f a b) body…)`.
    fn fn_define(&mut self) -> Result<Form, ParseError> {
        let Some(kw) = self.eat_keyword("fn") else {
            return Err(self.expected("`fn`"));
        };
        let name = self.name("a function name")?;
        let (params, _) = self.param_list()?;
        let mut target = vec![name];
        target.extend_from_slice(&params);
        let target_span = name.1.to(params.last().map_or(name.1, |p| p.1));
        let target = (self.list(&target, target_span), target_span);
        let body = self.body_after_eq()?;
        let define = self.sym("define", kw.span());
        let whole = kw.span().to(body.last().map_or(kw.span(), |b| b.1));
        let mut items = vec![define, target];
        items.extend_from_slice(&body);
        Ok((self.list(&items, whole), whole))
    }

    /// `(a, b)` of a function: names only.
    fn param_list(&mut self) -> Result<(Vec<Form>, Span), ParseError> {
        let Some(open) = self.eat_punct("(") else {
            return Err(self.expected("`(` and the parameter names"));
        };
        let saved = std::mem::replace(&mut self.lines, false);
        let mut names = Vec::new();
        while !self.is_punct(")") {
            if self.peek().is_none() {
                break;
            }
            names.push(self.name("a parameter name")?);
            if self.eat_punct(",").is_none() {
                break;
            }
        }
        let close = self.close(open, ")", "`,`");
        self.lines = saved;
        let close = close?;
        Ok((names, open.span().to(close.span())))
    }

    /// `= body`: a bare `{ … }` block gives its statements as the body, anything else one form.
    fn body_after_eq(&mut self) -> Result<Vec<Form>, ParseError> {
        if self.eat_punct("=").is_none() {
            return Err(self.expected("`=` before the function body"));
        }
        self.body()
    }

    fn body(&mut self) -> Result<Vec<Form>, ParseError> {
        if let Some(open) = self.eat_punct("{") {
            return self.block_forms(open);
        }
        let e = self.expr()?;
        Ok(vec![(e.node, e.span)])
    }

    /// The statements of a block whose `{` was just read, up to and including its `}`.
    fn block_forms(&mut self, open: Token) -> Result<Vec<Form>, ParseError> {
        let saved = std::mem::replace(&mut self.lines, true);
        let stmts = self.stmts(false, Some("}"));
        self.lines = saved;
        let stmts = stmts?;
        self.close(open, "}", "a new line")?;
        if stmts.is_empty() {
            return Err(err(
                ParseErrorKind::Expected,
                open.span(),
                "empty block: expected at least one expression between `{` and `}`",
            ));
        }
        self.group_lets(stmts, false)
    }

    // ---- expressions ----

    fn enter(&mut self, span: Span) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(err(
                ParseErrorKind::TooDeep,
                span,
                format!(
                    "expressions nest deeper than {MAX_DEPTH} levels: name some parts with `let`"
                ),
            ));
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<Expr, ParseError> {
        self.binary(0)
    }

    /// The next binary operator, if it continues the current expression.
    fn peek_binop(&self) -> Option<(BinOp, Token)> {
        let t = self.peek()?;
        if t.newline_before && self.lines {
            return None;
        }
        let text = self.text(t);
        let is_op = matches!(t.tok, Tok::Punct(_)) || matches!(text, "and" | "or");
        let op = BINOPS.iter().find(|op| op.text == text).filter(|_| is_op)?;
        Some((*op, t))
    }

    /// Operators binding at least as tightly as `min_prec`, by precedence climbing.
    fn binary(&mut self, min_prec: u8) -> Result<Expr, ParseError> {
        stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.binary_inner(min_prec))
    }

    fn binary_inner(&mut self, min_prec: u8) -> Result<Expr, ParseError> {
        self.enter(self.here())?;
        let first = self.prefix()?;
        let mut chain: Option<(BinOp, Token)> = None;
        let mut items = vec![first];
        while let Some((op, tok)) = self.peek_binop() {
            if op.prec < min_prec {
                break;
            }
            if let Some((prev, _)) = chain
                && prev.prec == PREC_CMP
                && op.prec == PREC_CMP
            {
                return Err(err(
                    ParseErrorKind::Misplaced,
                    tok.span(),
                    "comparisons do not chain: write `a < b and b < c`",
                ));
            }
            self.pos += 1;
            let right_prec = if op.text == "^" { op.prec } else { op.prec + 1 };
            let rhs = self.binary(right_prec)?;
            match chain {
                Some((prev, _)) if prev == op && op.flattens() => items.push(rhs),
                _ => {
                    let lhs = self.finish(chain, std::mem::take(&mut items));
                    items = vec![lhs, rhs];
                    chain = Some((op, tok));
                }
            }
        }
        self.depth -= 1;
        Ok(self.finish(chain, items))
    }

    /// `(op items…)` for a chain, or the one item.
    fn finish(&mut self, chain: Option<(BinOp, Token)>, items: Vec<Expr>) -> Expr {
        let Some((op, tok)) = chain else {
            return items[0];
        };
        let whole = items[0].span.to(items[items.len() - 1].span);
        let head = self.sym(op.head, tok.span());
        let mut forms = vec![head];
        forms.extend(items.iter().map(|e| (e.node, e.span)));
        let e = self.form(&forms, whole);
        if op.text == "!=" {
            let not = self.sym("not", tok.span());
            return self.form(&[not, (e.node, e.span)], whole);
        }
        e
    }

    /// Prefix `-` and `not`, then a postfix expression.
    fn prefix(&mut self) -> Result<Expr, ParseError> {
        if let Some(minus) = self.eat_punct("-") {
            let operand = self.binary(PREC_POW)?;
            let whole = minus.span().to(operand.span);
            if operand.tag == Tag::Num
                && let ndvm_core::Node::Num(x) = self.heap.node(operand.node)
            {
                let node = self.num(-x, whole);
                return Ok(Expr {
                    node,
                    span: whole,
                    tag: Tag::Plain,
                });
            }
            let head = self.sym("-", minus.span());
            return Ok(self.form(&[head, (operand.node, operand.span)], whole));
        }
        if let Some(not) = self.eat_keyword("not") {
            let operand = self.binary(PREC_CMP)?;
            let whole = not.span().to(operand.span);
            let head = self.sym("not", not.span());
            return Ok(self.form(&[head, (operand.node, operand.span)], whole));
        }
        let mut e = self.primary()?;
        while let Some(t) = self.peek() {
            if t.newline_before && self.lines {
                break;
            }
            if t.tok == Tok::Punct("(") {
                e = self.call(e)?;
            } else if t.tok == Tok::Punct("[") {
                e = self.index(e)?;
            } else {
                break;
            }
        }
        Ok(e)
    }

    /// Comma-separated expressions up to `close` (a trailing comma is allowed).
    fn list_of(&mut self, open: Token, close: &str) -> Result<(Vec<Expr>, Token), ParseError> {
        let saved = std::mem::replace(&mut self.lines, false);
        let mut items = Vec::new();
        let result = loop {
            if self.is_punct(close) || self.peek().is_none() {
                break self.close(open, close, "an expression");
            }
            match self.expr() {
                Ok(e) => items.push(e),
                Err(e) => break Err(e),
            }
            if self.eat_punct(",").is_none() {
                break self.close(open, close, "`,`");
            }
        };
        self.lines = saved;
        Ok((items, result?))
    }

    fn call(&mut self, head: Expr) -> Result<Expr, ParseError> {
        let Some(open) = self.eat_punct("(") else {
            return Err(self.expected("`(`"));
        };
        let (args, close) = self.list_of(open, ")")?;
        let mut forms = vec![(head.node, head.span)];
        forms.extend(args.iter().map(|a| (a.node, a.span)));
        Ok(self.form(&forms, head.span.to(close.span())))
    }

    /// `v[i]` as `(ref v i)`, `m[i, j]` as `(ref (ref m i) j)`.
    fn index(&mut self, base: Expr) -> Result<Expr, ParseError> {
        let Some(open) = self.eat_punct("[") else {
            return Err(self.expected("`[`"));
        };
        let (args, close) = self.list_of(open, "]")?;
        if args.is_empty() {
            return Err(err(
                ParseErrorKind::Expected,
                open.span().to(close.span()),
                "expected an index between `[` and `]`",
            ));
        }
        let brackets = open.span().to(close.span());
        let mut e = base;
        for a in args {
            let head = self.sym("ref", brackets);
            e = self.form(
                &[head, (e.node, e.span), (a.node, a.span)],
                base.span.to(close.span()),
            );
        }
        Ok(e)
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        let Some(t) = self.peek() else {
            return Err(self.expected("an expression"));
        };
        let plain = |node, tag| Expr {
            node,
            span: t.span(),
            tag,
        };
        match t.tok {
            Tok::Num(x) => {
                self.pos += 1;
                let node = self.num(x, t.span());
                Ok(plain(node, Tag::Num))
            }
            Tok::Name | Tok::Quoted => {
                let (node, _) = self.name("a name")?;
                Ok(plain(node, Tag::Plain))
            }
            Tok::Punct("(") => {
                self.pos += 1;
                let saved = std::mem::replace(&mut self.lines, false);
                let inner = if self.is_punct(")") {
                    Err(self.expected("an expression inside `( )`"))
                } else {
                    self.expr()
                };
                let close = inner.and_then(|inner| Ok((inner, self.close(t, ")", "an operator")?)));
                self.lines = saved;
                let (inner, close) = close?;
                Ok(Expr {
                    node: inner.node,
                    span: t.span().to(close.span()),
                    tag: Tag::Paren,
                })
            }
            Tok::Punct("[") => {
                self.pos += 1;
                self.vector(t)
            }
            Tok::Punct("{") => {
                self.pos += 1;
                let forms = self.block_forms(t)?;
                let close_end = self.toks[self.pos - 1].span();
                let whole = t.span().to(close_end);
                if forms.len() == 1 {
                    return Ok(Expr {
                        node: forms[0].0,
                        span: forms[0].1,
                        tag: Tag::Plain,
                    });
                }
                let head = self.sym("begin", t.span());
                let mut items = vec![head];
                items.extend_from_slice(&forms);
                Ok(self.form(&items, whole))
            }
            Tok::Keyword => self.keyword_expr(t),
            Tok::Punct(")" | "]" | "}") => Err(err(
                ParseErrorKind::UnexpectedClose,
                t.span(),
                format!(
                    "expected an expression, found `{}`, which closes nothing here",
                    self.text(t)
                ),
            )),
            Tok::Punct(p) if BINOPS.iter().any(|op| op.text == p) => {
                let hint = if t.newline_before {
                    " (a line cannot start with an operator: end the previous line with it to continue that line)"
                } else {
                    ""
                };
                Err(err(
                    ParseErrorKind::Expected,
                    t.span(),
                    format!("expected an expression, found the operator `{p}`{hint}"),
                ))
            }
            Tok::Punct(_) => Err(self.expected("an expression")),
        }
    }

    fn keyword_expr(&mut self, t: Token) -> Result<Expr, ParseError> {
        let plain = |node, tag| Expr {
            node,
            span: t.span(),
            tag,
        };
        match self.text(t) {
            "true" | "false" => {
                self.pos += 1;
                let node = if self.text(t) == "true" {
                    Heap::TRUE
                } else {
                    Heap::FALSE
                };
                Ok(plain(node, Tag::Plain))
            }
            "inf" | "nan" => {
                self.pos += 1;
                let x = if self.text(t) == "inf" {
                    f64::INFINITY
                } else {
                    f64::NAN
                };
                let node = self.num(x, t.span());
                Ok(plain(node, Tag::Num))
            }
            "if" => self.if_expr(t),
            "let" => {
                let star = self.star_follows(t);
                self.pos += if star { 2 } else { 1 };
                let binds = self.binds(if star { "`let*`" } else { "`let`" })?;
                self.let_in(t, binds, star)
            }
            "fn" => {
                self.pos += 1;
                if !self.is_punct("(") {
                    return Err(self.expected(
                        "`(` of an anonymous function `fn(y) = …` (a named `fn f(y) = …` stands on its own line)",
                    ));
                }
                let (params, params_span) = self.param_list()?;
                let params = (self.list(&params, params_span), params_span);
                let body = self.body_after_eq()?;
                let head = self.sym("lambda", t.span());
                let whole = t.span().to(body.last().map_or(t.span(), |b| b.1));
                let mut items = vec![head, params];
                items.extend_from_slice(&body);
                Ok(self.form(&items, whole))
            }
            "loop" => self.loop_expr(t),
            "next" => {
                self.pos += 1;
                let Some(open) = self.peek().filter(|o| o.tok == Tok::Punct("(")) else {
                    return Err(self.expected("`(` and the new values after `next`"));
                };
                self.pos += 1;
                let (args, close) = self.list_of(open, ")")?;
                let head = self.sym("recur", t.span());
                let mut items = vec![head];
                items.extend(args.iter().map(|a| (a.node, a.span)));
                Ok(self.form(&items, t.span().to(close.span())))
            }
            "params" => Err(err(
                ParseErrorKind::Misplaced,
                t.span(),
                "`params` declarations belong at the top level of the program, on their own line",
            )),
            other => Err(err(
                ParseErrorKind::Expected,
                t.span(),
                format!("expected an expression, found the keyword `{other}`"),
            )),
        }
    }

    /// Whether the `let` at the current position is written `let*` (the `*` right after it).
    fn star_follows(&self, kw: Token) -> bool {
        self.toks
            .get(self.pos + 1)
            .is_some_and(|s| is_punct(*s, "*") && s.start == kw.end)
    }

    /// `let a = 1, b = 2 in body` or `let* … in body` (the bindings are already read).
    fn let_in(&mut self, kw: Token, binds: Vec<Bind>, star: bool) -> Result<Expr, ParseError> {
        if self.eat_keyword("in").is_none() {
            return Err(self.expected(if star {
                "`in` and the body (`let* x = … in …`)"
            } else {
                "`in` and the body (`let x = … in …`; a `let` on its own line scopes over the lines after it)"
            }));
        }
        let body = self.body()?;
        let head = if star {
            self.sym("let*", Span::new(kw.start, kw.end + 1))
        } else {
            self.sym("let", kw.span())
        };
        let form = self.let_form(head, &binds, &body, kw.span());
        Ok(Expr {
            node: form.0,
            span: form.1,
            tag: Tag::Plain,
        })
    }

    /// `if c then a [elif c2 then b]… [else d]`: `(if c a d)`, or `(cond …)` with `elif`s.
    fn if_expr(&mut self, kw: Token) -> Result<Expr, ParseError> {
        self.pos += 1;
        let mut clauses: Vec<(Expr, Expr)> = Vec::new();
        loop {
            let test = self.expr()?;
            if self.eat_keyword("then").is_none() {
                return Err(self.expected("`then` after the condition"));
            }
            let arm = self.expr()?;
            clauses.push((test, arm));
            if self.eat_keyword("elif").is_none() {
                break;
            }
        }
        let els = match self.eat_keyword("else") {
            Some(e) => Some((e, self.expr()?)),
            None => None,
        };
        let end = els.map_or(clauses[clauses.len() - 1].1.span, |(_, e)| e.span);
        let whole = kw.span().to(end);
        if clauses.len() == 1 {
            let (test, arm) = clauses[0];
            let head = self.sym("if", kw.span());
            let mut items = vec![head, (test.node, test.span), (arm.node, arm.span)];
            if let Some((_, e)) = els {
                items.push((e.node, e.span));
            }
            return Ok(self.form(&items, whole));
        }
        let head = self.sym("cond", kw.span());
        let mut items = vec![head];
        for (test, arm) in clauses {
            let span = test.span.to(arm.span);
            items.push((
                self.list(&[(test.node, test.span), (arm.node, arm.span)], span),
                span,
            ));
        }
        if let Some((kw_else, e)) = els {
            let else_sym = self.sym("else", kw_else.span());
            let span = kw_else.span().to(e.span);
            items.push((self.list(&[else_sym, (e.node, e.span)], span), span));
        }
        Ok(self.form(&items, whole))
    }

    /// `loop k = 0, x = 1 { body }` as `(loop ((k 0) (x 1)) body…)`, or
    /// `loop k = 0, x = 1 until STOP then RESULT { update }` as
    /// `(loop ((k 0) (x 1)) (if STOP RESULT update))`.
    fn loop_expr(&mut self, kw: Token) -> Result<Expr, ParseError> {
        self.pos += 1;
        let binds = if self.is_punct("{") || self.is_keyword("until") {
            Vec::new()
        } else {
            self.binds("`loop`")?
        };
        let head = self.sym("loop", kw.span());
        let bindings = self.bindings(&binds, kw.span());
        let body = if let Some(until) = self.eat_keyword("until") {
            let stop = self.expr()?;
            if self.eat_keyword("then").is_none() {
                return Err(self.expected("`then` and the loop's result after the stop condition"));
            }
            let result = self.expr()?;
            let Some(open) = self.eat_punct("{") else {
                return Err(self.expected("`{` and the update block (ending in `next(…)`)"));
            };
            let forms = self.block_forms(open)?;
            let close = self.toks[self.pos - 1].span();
            let update = if forms.len() == 1 {
                forms[0]
            } else {
                let begin = self.sym("begin", open.span());
                let mut items = vec![begin];
                items.extend_from_slice(&forms);
                let span = open.span().to(close);
                (self.list(&items, span), span)
            };
            let if_sym = self.sym("if", until.span());
            let span = until.span().to(close);
            let form = self.list(
                &[
                    if_sym,
                    (stop.node, stop.span),
                    (result.node, result.span),
                    update,
                ],
                span,
            );
            vec![(form, span)]
        } else {
            let Some(open) = self.eat_punct("{") else {
                return Err(self.expected("`{` and the loop body, or `until`"));
            };
            self.block_forms(open)?
        };
        let whole = kw.span().to(self.toks[self.pos - 1].span());
        let mut items = vec![head, bindings];
        items.extend_from_slice(&body);
        Ok(self.form(&items, whole))
    }

    /// `[a, b]` as `(vec a b)`; `[[1, 2], [3, 4]]` (every element a bare vector literal) as
    /// `(mat (vec 1 2) (vec 3 4))`.
    fn vector(&mut self, open: Token) -> Result<Expr, ParseError> {
        let (items, close) = self.list_of(open, "]")?;
        let whole = open.span().to(close.span());
        let is_mat = !items.is_empty() && items.iter().all(|e| e.tag == Tag::Vec);
        let head = self.sym(if is_mat { "mat" } else { "vec" }, open.span());
        let mut forms = vec![head];
        forms.extend(items.iter().map(|e| (e.node, e.span)));
        let mut e = self.form(&forms, whole);
        if !is_mat {
            e.tag = Tag::Vec;
        }
        Ok(e)
    }
}

/// Whether `t` is the punctuation `p`.
fn is_punct(t: Token, p: &str) -> bool {
    matches!(t.tok, Tok::Punct(x) if x == p)
}
