//! Heap forms to infix text with the fewest parentheses the precedences allow; a form the notation
//! cannot spell is an error naming it. Parsing the output gives back the same heap forms.

use ndvm_core::{CoreError, ErrorKind, Heap, Node, NodeId, Program, is_special_form};

use super::lexer::KEYWORDS;
use super::parser::{
    PREC_ADD, PREC_AND, PREC_CMP, PREC_MUL, PREC_NOT, PREC_OR, PREC_POW, PREC_UNARY,
};

type Result<T> = std::result::Result<T, CoreError>;

/// Open-ended forms (`if`, `let … in`, `fn(…) = …`) extend as far right as they can.
const PREC_OPEN: u8 = 0;
const PREC_POSTFIX: u8 = 9;
const PREC_ATOM: u8 = 10;

/// The deepest heap nesting printed (its infix text stays well inside the parser's limit).
pub const MAX_PRINT_DEPTH: usize = 3000;

/// Printed text and how tightly it binds.
type Text = (String, u8);

/// A trailing `let` written as lines: the lines, whether they are single-binding lines (which
/// would merge with a following run of them), and the body forms.
struct LetLines {
    lines: Vec<String>,
    single: bool,
    body: Vec<NodeId>,
}

/// The program as infix text, one top-level statement per line.
pub(crate) fn print_program(heap: &Heap, program: &Program) -> Result<String> {
    program.check_heap(heap)?;
    let mut p = Printer { heap, depth: 0 };
    let lines = p.block_lines(program.forms(), 0, true)?;
    Ok(lines.join("\n"))
}

fn cannot(node: NodeId, what: impl Into<String>) -> CoreError {
    CoreError::new(
        ErrorKind::Syntax,
        format!("cannot be written in infix: {}", what.into()),
    )
    .at(node)
}

fn indent(level: usize) -> String {
    "  ".repeat(level)
}

/// The text of a number literal that reads back as the same `f64` (a negative one as `-x`).
pub(crate) fn number_text(x: f64) -> String {
    if x.is_nan() {
        "nan".into()
    } else if x == f64::INFINITY {
        "inf".into()
    } else if x == f64::NEG_INFINITY {
        "-inf".into()
    } else {
        // Shortest round-trip text, without the `.0` of an integral value (`2`, not `2.0`).
        let text = format!("{x:?}");
        match text.strip_suffix(".0") {
            Some(int) => int.to_string(),
            None => text,
        }
    }
}

/// Whether `name` reads as a plain infix name (else it is written backquoted).
pub(crate) fn is_plain_name(name: &str) -> bool {
    let body = name.strip_suffix('?').unwrap_or(name);
    let mut chars = body.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&name)
}

struct Printer<'h> {
    heap: &'h Heap,
    depth: usize,
}

impl<'h> Printer<'h> {
    fn items(&self, node: NodeId) -> Result<Vec<NodeId>> {
        self.heap
            .list_items(node)
            .ok_or_else(|| cannot(node, "an improper (dotted) list"))
    }

    /// The head symbol's name and the elements of a proper list with a symbol head.
    fn head(&self, node: NodeId) -> Option<(&'h str, Vec<NodeId>)> {
        let heap: &'h Heap = self.heap;
        let items = heap.list_items(node)?;
        match heap.node(*items.first()?) {
            Node::Sym(s) => Some((heap.symbol_name(s), items)),
            _ => None,
        }
    }

    fn name(&self, node: NodeId) -> Result<String> {
        let Node::Sym(s) = self.heap.node(node) else {
            return Err(cannot(node, "a name was expected here"));
        };
        let name = self.heap.symbol_name(s);
        if is_plain_name(name) {
            Ok(name.to_string())
        } else if !name.is_empty() && !name.contains(['`', '\n', '\r']) {
            Ok(format!("`{name}`"))
        } else {
            Err(cannot(node, format!("the name {name:?}")))
        }
    }

    // ---- blocks and statements ----

    /// The lines of a block (or the top level): each form a statement; a trailing `let` is written
    /// as `let` lines followed by its body's lines.
    fn block_lines(&mut self, forms: &[NodeId], ind: usize, top: bool) -> Result<Vec<String>> {
        let mut out = Vec::new();
        let mut forms = forms.to_vec();
        let mut prev_single = false;
        let mut in_let = false;
        loop {
            let Some((&last, init)) = forms.split_last() else {
                return Ok(out);
            };
            for &f in init {
                out.push(self.stmt(f, ind, top && !in_let)?);
            }
            if let Some(group) = self.let_lines(last, ind)?
                && !(prev_single && group.single)
            {
                out.extend(group.lines);
                prev_single = group.single && group.body.len() == 1;
                in_let = true;
                forms = group.body;
                continue;
            }
            out.push(self.stmt(last, ind, top && !in_let)?);
            return Ok(out);
        }
    }

    /// `let` lines for a `let` (any number of bindings) or a `let*` of two or more.
    fn let_lines(&mut self, node: NodeId, ind: usize) -> Result<Option<LetLines>> {
        let Some((head, items)) = self.head(node) else {
            return Ok(None);
        };
        if !matches!(head, "let" | "let*") || items.len() < 3 {
            return Ok(None);
        }
        let Some(binds) = self.heap.list_items(items[1]) else {
            return Ok(None);
        };
        if binds.is_empty() || (head == "let*" && binds.len() < 2) {
            return Ok(None);
        }
        let texts = self.bind_texts(&binds, ind)?;
        let lines = if head == "let" {
            vec![format!("let {}", texts.join(", "))]
        } else {
            texts.iter().map(|t| format!("let {t}")).collect()
        };
        let single = head == "let*" || binds.len() == 1;
        Ok(Some(LetLines {
            lines,
            single,
            body: items[2..].to_vec(),
        }))
    }

    /// `name = init` for each `(name init)`.
    fn bind_texts(&mut self, binds: &[NodeId], ind: usize) -> Result<Vec<String>> {
        binds
            .iter()
            .map(|&b| {
                let pair = self.items(b)?;
                let [name, init] = pair[..] else {
                    return Err(cannot(b, "a binding that is not (name value)"));
                };
                Ok(format!(
                    "{} = {}",
                    self.name(name)?,
                    self.expr(init, ind)?.0
                ))
            })
            .collect()
    }

    fn stmt(&mut self, node: NodeId, ind: usize, top: bool) -> Result<String> {
        match self.head(node) {
            Some(("define", items)) => self.define(node, &items, ind),
            Some(("params", items)) if top => self.params(&items),
            Some(("params", _)) => Err(cannot(
                node,
                "`params` below the top level or after a `let` (infix declares parameters first)",
            )),
            _ => Ok(self.expr(node, ind)?.0),
        }
    }

    /// `fn f(a, b) = body` or `x = value`.
    fn define(&mut self, node: NodeId, items: &[NodeId], ind: usize) -> Result<String> {
        if items.len() < 3 {
            return Err(cannot(node, "`define` without a value"));
        }
        if let Node::Sym(_) = self.heap.node(items[1]) {
            if items.len() != 3 {
                return Err(cannot(node, "`define` of a name with several values"));
            }
            return Ok(format!(
                "{} = {}",
                self.name(items[1])?,
                self.expr(items[2], ind)?.0
            ));
        }
        let target = self.items(items[1])?;
        let Some((&name, params)) = target.split_first() else {
            return Err(cannot(node, "`(define () …)`"));
        };
        Ok(format!(
            "fn {}({}) = {}",
            self.name(name)?,
            self.names(params)?.join(", "),
            self.body(&items[2..], ind)?
        ))
    }

    fn names(&self, nodes: &[NodeId]) -> Result<Vec<String>> {
        nodes.iter().map(|&n| self.name(n)).collect()
    }

    /// `params a: positive = 2.0, b, c: bounded(0.0, 1.0)`.
    fn params(&self, items: &[NodeId]) -> Result<String> {
        let mut entries = Vec::new();
        for &entry in &items[1..] {
            let parts = self.items(entry)?;
            let num = |i: usize| match parts.get(i).map(|&n| self.heap.node(n)) {
                Some(Node::Num(x)) => Some(x),
                _ => None,
            };
            let kind = match parts.get(1).map(|&n| self.heap.node(n)) {
                Some(Node::Sym(s)) => self.heap.symbol_name(s),
                _ => "",
            };
            let (Some(name), Some(init)) = (parts.first(), num(2)) else {
                return Err(cannot(
                    entry,
                    "a params entry that is not (name kind init …)",
                ));
            };
            let mut text = self.name(*name)?;
            let default = match (kind, parts.len(), num(3), num(4)) {
                ("free" | "positive", 3, _, _) => 1.0,
                ("unit", 3, _, _) => 0.5,
                ("bounded", 5, Some(lo), Some(hi)) => {
                    text.push_str(&format!(
                        ": bounded({}, {})",
                        number_text(lo),
                        number_text(hi)
                    ));
                    0.5 * (lo + hi)
                }
                _ => return Err(cannot(entry, "a params entry of an unknown kind or length")),
            };
            if matches!(kind, "positive" | "unit") {
                text.push_str(&format!(": {kind}"));
            }
            if init.to_bits() != default.to_bits() {
                text.push_str(&format!(" = {}", number_text(init)));
            }
            entries.push(text);
        }
        if entries.is_empty() {
            return Err(cannot(items[0], "`(params)` with no entries"));
        }
        Ok(format!("params {}", entries.join(", ")))
    }

    /// A function, lambda, `let … in` or loop body: one expression, or a `{ }` block of several.
    fn body(&mut self, forms: &[NodeId], ind: usize) -> Result<String> {
        match forms {
            [] => Err(cannot(Heap::NIL, "a body with no forms")),
            [one] => {
                let (text, _) = self.expr(*one, ind)?;
                // A body that starts with `{` is a block of statements: `{ a; b }` would be
                // two body forms where `({ a; b })` is one `begin`, and `{ … } + 1` no body.
                Ok(if text.starts_with('{') {
                    format!("({text})")
                } else {
                    text
                })
            }
            _ => self.block(forms, ind),
        }
    }

    /// `{`, the block's lines one level deeper, `}`.
    fn block(&mut self, forms: &[NodeId], ind: usize) -> Result<String> {
        let lines = self.block_lines(forms, ind + 1, false)?;
        let pad = indent(ind + 1);
        let body: Vec<String> = lines.iter().map(|l| format!("{pad}{l}")).collect();
        Ok(format!("{{\n{}\n{}}}", body.join("\n"), indent(ind)))
    }

    // ---- expressions ----

    fn expr(&mut self, node: NodeId, ind: usize) -> Result<Text> {
        self.depth += 1;
        if self.depth > MAX_PRINT_DEPTH {
            return Err(cannot(
                node,
                format!("forms nested deeper than {MAX_PRINT_DEPTH} levels"),
            ));
        }
        let text = stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.expr_inner(node, ind));
        self.depth -= 1;
        text
    }

    /// `node` printed so that it binds at least as tightly as `need`.
    fn operand(&mut self, node: NodeId, ind: usize, need: u8) -> Result<String> {
        let (text, prec) = self.expr(node, ind)?;
        Ok(if prec < need {
            format!("({text})")
        } else {
            text
        })
    }

    fn expr_inner(&mut self, node: NodeId, ind: usize) -> Result<Text> {
        match self.heap.node(node) {
            Node::Nil => Err(cannot(node, "the empty list `()`")),
            Node::Bool(b) => Ok((if b { "true" } else { "false" }.into(), PREC_ATOM)),
            Node::Num(x) => {
                let prec = if x.is_sign_negative() && !x.is_nan() {
                    PREC_UNARY
                } else {
                    PREC_ATOM
                };
                Ok((number_text(x), prec))
            }
            Node::Sym(_) => Ok((self.name(node)?, PREC_ATOM)),
            Node::Pair(..) => {
                let items = self.items(node)?;
                match self.head(node) {
                    Some((head, _)) => self.form(node, head, &items, ind),
                    None => self.call(&items, ind),
                }
            }
        }
    }

    /// `f(a, b)` for `(f a b)`.
    fn call(&mut self, items: &[NodeId], ind: usize) -> Result<Text> {
        let head = self.operand(items[0], ind, PREC_POSTFIX)?;
        let args = self.args(&items[1..], ind)?;
        Ok((format!("{head}({args})"), PREC_POSTFIX))
    }

    fn args(&mut self, nodes: &[NodeId], ind: usize) -> Result<String> {
        let texts: Result<Vec<String>> = nodes.iter().map(|&n| Ok(self.expr(n, ind)?.0)).collect();
        Ok(texts?.join(", "))
    }

    fn is_head(&self, node: NodeId, name: &str) -> bool {
        self.head(node).is_some_and(|(h, _)| h == name)
    }

    fn form(&mut self, node: NodeId, head: &str, items: &[NodeId], ind: usize) -> Result<Text> {
        let args = &items[1..];
        let n = args.len();
        match head {
            "+" | "*" | "and" | "or" if n >= 2 => self.chain(head, args, ind),
            "-" | "/" if n == 2 => {
                let prec = if head == "-" { PREC_ADD } else { PREC_MUL };
                self.binary(head, args, prec, (prec, prec + 1), ind)
            }
            "expt" if n == 2 => self.binary("^", args, PREC_POW, (PREC_POSTFIX, PREC_UNARY), ind),
            "=" | "<" | "<=" | ">" | ">=" if n == 2 => {
                let op = if head == "=" { "==" } else { head };
                self.binary(op, args, PREC_CMP, (PREC_CMP + 1, PREC_CMP + 1), ind)
            }
            "-" if n == 1 => {
                let operand = if matches!(self.heap.node(args[0]), Node::Num(_)) {
                    format!("({})", self.expr(args[0], ind)?.0)
                } else {
                    self.operand(args[0], ind, PREC_POW)?
                };
                Ok((format!("-{operand}"), PREC_UNARY))
            }
            "not" if n == 1 => {
                if self.is_head(args[0], "=")
                    && let Some((_, inner)) = self.head(args[0])
                    && inner.len() == 3
                {
                    return self.binary(
                        "!=",
                        &inner[1..],
                        PREC_CMP,
                        (PREC_CMP + 1, PREC_CMP + 1),
                        ind,
                    );
                }
                let operand = self.operand(args[0], ind, PREC_CMP)?;
                Ok((format!("not {operand}"), PREC_NOT))
            }
            "vec" if !self.all_vec(args) => Ok((format!("[{}]", self.args(args, ind)?), PREC_ATOM)),
            "mat" if n >= 1 && self.all_vec(args) => {
                Ok((format!("[{}]", self.args(args, ind)?), PREC_ATOM))
            }
            "ref" if n == 2 => {
                let base = self.operand(args[0], ind, PREC_POSTFIX)?;
                let index = self.expr(args[1], ind)?.0;
                Ok((format!("{base}[{index}]"), PREC_POSTFIX))
            }
            _ if is_special_form(head) => self.special(node, head, items, ind),
            _ => self.call(items, ind),
        }
    }

    /// Whether every node is a `(vec …)` that prints as a vector literal.
    fn all_vec(&self, nodes: &[NodeId]) -> bool {
        !nodes.is_empty()
            && nodes.iter().all(|&n| {
                self.head(n)
                    .is_some_and(|(h, items)| h == "vec" && !self.all_vec(&items[1..]))
            })
    }

    /// `a + b + c` for `(+ a b c)`: the first operand may be any chain but its own kind.
    fn chain(&mut self, head: &str, args: &[NodeId], ind: usize) -> Result<Text> {
        let prec = match head {
            "+" => PREC_ADD,
            "*" => PREC_MUL,
            "and" => PREC_AND,
            _ => PREC_OR,
        };
        let mut parts = Vec::new();
        for (i, &a) in args.iter().enumerate() {
            let same = self
                .head(a)
                .is_some_and(|(h, items)| h == head && items.len() >= 3);
            let need = if i == 0 && !same { prec } else { prec + 1 };
            parts.push(self.operand(a, ind, need)?);
        }
        Ok((parts.join(&format!(" {head} ")), prec))
    }

    fn binary(
        &mut self,
        op: &str,
        args: &[NodeId],
        prec: u8,
        (left, right): (u8, u8),
        ind: usize,
    ) -> Result<Text> {
        let l = self.operand(args[0], ind, left)?;
        let r = self.operand(args[1], ind, right)?;
        Ok((format!("{l} {op} {r}"), prec))
    }

    fn special(&mut self, node: NodeId, head: &str, items: &[NodeId], ind: usize) -> Result<Text> {
        let args = &items[1..];
        let bad = |what: &str| Err(cannot(node, format!("`({head} …)` {what}")));
        match head {
            "if" if args.len() == 2 || args.len() == 3 => {
                self.if_form(&[(args[0], args[1])], args.get(2).copied(), ind)
            }
            "cond" => self.cond(node, args, ind),
            "let" if args.len() >= 2 => {
                let binds = self.items(args[0])?;
                if binds.is_empty() {
                    return bad("with no bindings");
                }
                let texts = self.bind_texts(&binds, ind)?;
                let body = self.body(&args[1..], ind)?;
                Ok((format!("let {} in {body}", texts.join(", ")), PREC_OPEN))
            }
            "let*" if args.len() >= 2 => {
                let binds = self.items(args[0])?;
                if binds.is_empty() {
                    return bad("with no bindings");
                }
                if binds.len() >= 2 {
                    return Ok((self.block(&[node], ind)?, PREC_ATOM));
                }
                // One binding: `let* u = … in …` (a `let` line would read back as `let`).
                let texts = self.bind_texts(&binds, ind)?;
                let body = self.body(&args[1..], ind)?;
                Ok((format!("let* {} in {body}", texts.join(", ")), PREC_OPEN))
            }
            "define" => Ok((
                format!("{{ {} }}", self.define(node, items, ind)?),
                PREC_ATOM,
            )),
            "lambda" if args.len() >= 2 => {
                let Some(params) = self.heap.list_items(args[0]) else {
                    return bad("with a rest parameter");
                };
                let params = self.names(&params)?.join(", ");
                let body = self.body(&args[1..], ind)?;
                Ok((format!("fn({params}) = {body}"), PREC_OPEN))
            }
            "begin" if args.len() >= 2 => Ok((self.block(args, ind)?, PREC_ATOM)),
            "loop" if args.len() >= 2 => self.loop_form(args, ind),
            "recur" => Ok((format!("next({})", self.args(args, ind)?), PREC_POSTFIX)),
            _ => bad("has no infix spelling"),
        }
    }

    /// `if t then a [elif …] [else e]`; an open-ended arm before `elif`/`else` is parenthesised.
    fn if_form(
        &mut self,
        clauses: &[(NodeId, NodeId)],
        els: Option<NodeId>,
        ind: usize,
    ) -> Result<Text> {
        let mut text = String::new();
        for (i, &(test, arm)) in clauses.iter().enumerate() {
            let more = i + 1 < clauses.len() || els.is_some();
            let test = self.expr(test, ind)?.0;
            let arm = self.operand(arm, ind, if more { PREC_OR } else { PREC_OPEN })?;
            let kw = if i == 0 { "if" } else { " elif" };
            text.push_str(&format!("{kw} {test} then {arm}"));
        }
        if let Some(e) = els {
            text.push_str(&format!(" else {}", self.expr(e, ind)?.0));
        }
        Ok((text, PREC_OPEN))
    }

    /// `(cond (t1 a1) (t2 a2) … [(else e)])` with two or more tests as `if … elif …`.
    fn cond(&mut self, node: NodeId, clauses: &[NodeId], ind: usize) -> Result<Text> {
        let mut tests = Vec::new();
        let mut els = None;
        for (i, &c) in clauses.iter().enumerate() {
            let parts = self.items(c)?;
            let is_else = parts.first().is_some_and(
                |&h| matches!(self.heap.node(h), Node::Sym(s) if self.heap.symbol_name(s) == "else"),
            );
            match parts[..] {
                [_, e] if is_else && i + 1 == clauses.len() => els = Some(e),
                [t, a] if !is_else => tests.push((t, a)),
                _ => {
                    return Err(cannot(
                        c,
                        "a `cond` clause that is not (test value), or `else` before the end",
                    ));
                }
            }
        }
        if tests.len() < 2 {
            return Err(cannot(
                node,
                "a `cond` with fewer than two tests (`if … elif … then …` needs two; write `if`)",
            ));
        }
        self.if_form(&tests, els, ind)
    }

    /// `loop k = 0 until stop then result { update }` when the body is one `(if stop result
    /// update)`, else `loop k = 0 { body }`.
    fn loop_form(&mut self, args: &[NodeId], ind: usize) -> Result<Text> {
        let binds = self.items(args[0])?;
        let texts = self.bind_texts(&binds, ind)?;
        let header = if texts.is_empty() {
            "loop".to_string()
        } else {
            format!("loop {}", texts.join(", "))
        };
        if let [body] = args[1..]
            && let Some(("if", parts)) = self.head(body)
            && parts.len() == 4
        {
            let stop = self.expr(parts[1], ind)?.0;
            let result = self.expr(parts[2], ind)?.0;
            let update = parts[3];
            let forms = match self.head(update) {
                Some(("begin", items)) if items.len() >= 3 => items[1..].to_vec(),
                _ => vec![update],
            };
            let block = self.block(&forms, ind)?;
            return Ok((
                format!("{header} until {stop} then {result} {block}"),
                PREC_ATOM,
            ));
        }
        let block = self.block(&args[1..], ind)?;
        Ok((format!("{header} {block}"), PREC_ATOM))
    }
}
