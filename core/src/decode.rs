//! The decoded-form cache: heap data → a tree of `Code` with special-form ids, primitive opcodes and
//! lexical addresses resolved once, so the walker never looks a name up by string.
//!
//! Decoding is exactly equivalent to walking the heap data: scopes are static (lexical), so an
//! address resolved here is the binding the uncached walk would find. Every `Code` keeps the heap
//! node it came from for error spans.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::api::Dialect;
use crate::error::{CoreError, ErrorKind, Result};
use crate::heap::{Heap, Node, NodeId};
use crate::prims::{Compare, Prim};
use crate::symbol::Symbol;
use crate::vocab::{FORMS, Form, HIDDEN, WordKind, forms_interner, template, unsupported_reason};

/// Index of one decoded form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CodeId(pub(crate) u32);

/// A run of `CodeId`s in `Codes::lists`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CodeList {
    pub(crate) start: u32,
    pub(crate) len: u32,
}

/// How a `Let` evaluates its initialisers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LetKind {
    /// Inits see the enclosing scope only (R7RS `let`).
    Parallel,
    /// Inits run in order inside the new frame (`let*`, `letrec`, reference `let`).
    Sequential,
}

/// One decoded form.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Code {
    Num(f64),
    Bool(bool),
    Nil,
    /// Quoted symbol.
    Sym(Symbol),
    /// Quoted pair data on the heap.
    Datum(NodeId),
    Local {
        depth: u32,
        slot: u32,
    },
    Global(u32),
    PrimRef(Prim),
    If {
        test: CodeId,
        then: CodeId,
        els: Option<CodeId>,
    },
    /// New frame of `n_slots`; `inits` fill slots `0..inits.len`; then `body`.
    Let {
        kind: LetKind,
        n_slots: u32,
        inits: CodeList,
        body: CodeId,
    },
    Lambda {
        n_params: u32,
        rest: bool,
        n_slots: u32,
        body: CodeId,
    },
    Seq(CodeList),
    /// Assigns slot `slot` of the current frame.
    Define {
        slot: u32,
        value: CodeId,
    },
    DefineGlobal {
        slot: u32,
        value: CodeId,
    },
    /// `params` entry: binds the global unless an input already did.
    DeclareGlobal {
        slot: u32,
        value: CodeId,
    },
    /// `set!` of a local: assigns on the active lanes, the others keep the old value.
    SetLocal {
        depth: u32,
        slot: u32,
        value: CodeId,
    },
    /// `set!` of a global (an input, a parameter or a top-level define).
    SetGlobal {
        slot: u32,
        value: CodeId,
    },
    App {
        head: CodeId,
        args: CodeList,
    },
    PrimCall {
        prim: Prim,
        args: CodeList,
    },
    And(CodeList),
    Or(CodeList),
    Loop {
        n_slots: u32,
        inits: CodeList,
        body: CodeId,
    },
    Recur(CodeList),
    /// `(soft-choice (e1 e2 …) logits)`: the options, the logits, and the site (the soft-choice's
    /// ordinal in the program, which seeds its Gumbel noise and names it in the read-out).
    SoftChoice {
        options: CodeList,
        logits: CodeId,
        site: u32,
    },
}

/// The arena of decoded forms plus the global namespace they were resolved against.
#[derive(Clone, Debug, Default)]
pub(crate) struct Codes {
    pub(crate) codes: Vec<Code>,
    pub(crate) nodes: Vec<NodeId>,
    pub(crate) lists: Vec<CodeId>,
    /// Global name → slot.
    pub(crate) globals: HashMap<Symbol, u32, crate::symbol::FxBuild>,
    /// Global slot names, by slot.
    pub(crate) global_names: Vec<Symbol>,
    /// `soft-choice` forms decoded so far (the next one's site).
    pub(crate) n_choice_sites: u32,
    /// The decoder's work buffers, kept between decodes (a new program's decode reuses them).
    spare: Spare,
}

/// Work buffers a [`Decoder`] borrows and gives back: lists of a form's elements, binding lists,
/// scope frames, decoded ids. A decode takes them from its [`Codes`] and returns them when
/// [`Decoder::top_level`] ends, so decoding a new program allocates nothing once they have grown.
#[derive(Debug, Default)]
struct Spare {
    nodes: Vec<Vec<NodeId>>,
    syms: Vec<Vec<Symbol>>,
    ids: Vec<Vec<CodeId>>,
    binds: Vec<Vec<Binding>>,
    scopes: Vec<Scope>,
    loops: Vec<Option<LoopCtx>>,
    scratch: Vec<CodeId>,
    /// The top-level definitions found before decoding.
    defs: Vec<(Symbol, NodeId)>,
}

/// Buffers are scratch, not state: a copy starts without them.
impl Clone for Spare {
    fn clone(&self) -> Self {
        Spare::default()
    }
}

/// Spare buffers kept per kind, and the longest one kept (longer ones are freed, so a huge
/// program's buffers do not stay).
const SPARE_BUFFERS: usize = 32;
const SPARE_LEN: usize = 4096;

fn take_buf<T>(pool: &mut Vec<Vec<T>>) -> Vec<T> {
    pool.pop().unwrap_or_default()
}

fn give_buf<T>(pool: &mut Vec<Vec<T>>, mut v: Vec<T>) {
    if pool.len() < SPARE_BUFFERS && v.capacity() <= SPARE_LEN {
        v.clear();
        pool.push(v);
    }
}

/// One `(name value)` binding: the name, the value's node and the binding's node.
type Binding = (Symbol, NodeId, NodeId);

impl Codes {
    /// Empties every table, keeping the memory (a new program's decode reuses it).
    pub(crate) fn clear(&mut self) {
        self.codes.clear();
        self.nodes.clear();
        self.lists.clear();
        self.globals.clear();
        self.global_names.clear();
        self.n_choice_sites = 0;
    }

    /// Lengths of the arenas, to drop what later decodes (`eval`) append.
    pub(crate) fn lens(&self) -> (usize, usize, u32) {
        (self.codes.len(), self.lists.len(), self.n_choice_sites)
    }

    /// Drops the forms decoded after `lens` was taken.
    pub(crate) fn truncate(&mut self, lens: (usize, usize, u32)) {
        self.codes.truncate(lens.0);
        self.nodes.truncate(lens.0);
        self.lists.truncate(lens.1);
        self.n_choice_sites = lens.2;
    }

    /// Bytes held by the decoded forms.
    pub(crate) fn bytes(&self) -> u64 {
        (self.codes.len() * (std::mem::size_of::<Code>() + 4) + self.lists.len() * 4) as u64
    }

    #[inline]
    pub(crate) fn get(&self, id: CodeId) -> Code {
        self.codes[id.0 as usize]
    }

    #[inline]
    pub(crate) fn node(&self, id: CodeId) -> NodeId {
        self.nodes[id.0 as usize]
    }

    fn push(&mut self, code: Code, node: NodeId) -> CodeId {
        self.codes.push(code);
        self.nodes.push(node);
        CodeId(self.codes.len() as u32 - 1)
    }

    fn push_list(&mut self, items: &[CodeId]) -> CodeList {
        let start = self.lists.len() as u32;
        self.lists.extend_from_slice(items);
        CodeList {
            start,
            len: items.len() as u32,
        }
    }

    /// The slot of a global name, creating it when new.
    pub(crate) fn global_slot(&mut self, sym: Symbol) -> u32 {
        if let Some(&s) = self.globals.get(&sym) {
            return s;
        }
        let s = self.global_names.len() as u32;
        self.global_names.push(sym);
        self.globals.insert(sym, s);
        s
    }
}

/// Interned names of the special forms and keywords, one per row of [`FORMS`], plus the hidden
/// name of the decoder's own temporaries (a name no reader can produce, so no program can capture
/// or shadow it); and the tables that answer by id: a symbol's form, a form's symbol.
#[derive(Debug)]
struct Forms {
    hidden: Symbol,
    /// By symbol id up to the hidden name's: the form (first row) and the word kind it names.
    by_sym: Vec<Option<(Form, WordKind)>>,
    /// By `Form` discriminant: the symbol of the form's first row (the hidden name if none).
    by_form: [Symbol; N_FORMS],
}

/// Number of [`Form`] variants (`Unsupported` is the last).
const N_FORMS: usize = Form::Unsupported as usize + 1;

/// The primitive `sym` names in `dialect`, if any: a table look-up by id (every primitive name is
/// in the template, so a name outside it is no primitive).
fn prim_of(sym: Symbol, dialect: Dialect) -> Option<Prim> {
    let row = (*template().prim_rows.get(sym.0 as usize)?)?;
    Some(Prim::of_row(usize::from(row), dialect))
}

impl Forms {
    /// The form names' symbols: the same in every heap (see [`forms_interner`]).
    fn get() -> &'static Self {
        static FORMS_SYMS: OnceLock<Forms> = OnceLock::new();
        FORMS_SYMS.get_or_init(|| {
            let it = forms_interner();
            let sym = |name: &str| it.lookup(name).unwrap_or(Symbol(u32::MAX));
            let syms: [(Symbol, Form); FORMS.len()] =
                std::array::from_fn(|i| (sym(FORMS[i].name), FORMS[i].form));
            let hidden = sym(HIDDEN);
            let mut by_sym = vec![None; hidden.0 as usize + 1];
            let mut by_form = [hidden; N_FORMS];
            let mut seen = [false; N_FORMS];
            for (&(s, form), row) in syms.iter().zip(FORMS) {
                if let Some(slot) = by_sym.get_mut(s.0 as usize) {
                    // The first row's form; special when any row of the name is.
                    match slot {
                        None => *slot = Some((form, row.kind)),
                        Some(p) if row.kind == WordKind::SpecialForm => p.1 = row.kind,
                        Some(_) => {}
                    }
                }
                if !seen[form as usize] {
                    seen[form as usize] = true;
                    by_form[form as usize] = s;
                }
            }
            Forms {
                hidden,
                by_sym,
                by_form,
            }
        })
    }

    /// The form or keyword `s` names, if any. Every form name has a smaller id than the hidden
    /// name (the template interns it last), so the program's own names are rejected at once.
    #[inline]
    fn form(&self, s: Symbol) -> Option<Form> {
        self.by_sym
            .get(s.0 as usize)
            .copied()
            .flatten()
            .map(|p| p.0)
    }

    /// The symbol of `form` (its first row).
    #[inline]
    fn sym(&self, form: Form) -> Symbol {
        self.by_form[form as usize]
    }

    fn is_special(&self, s: Symbol) -> bool {
        self.by_sym
            .get(s.0 as usize)
            .copied()
            .flatten()
            .is_some_and(|p| p.1 == WordKind::SpecialForm)
    }
}

/// One lexical frame under construction.
#[derive(Clone, Debug, Default)]
struct Scope {
    names: Vec<Symbol>,
    /// How many leading names are visible (sequential inits reveal them one by one).
    visible: usize,
}

/// Where `recur` may appear.
#[derive(Clone, Copy, Debug)]
struct LoopCtx {
    arity: usize,
    /// A named let lowered to a loop: calls of this name are `recur`.
    alias: Option<Symbol>,
}

/// Heap → `Code` translator for one program.
pub(crate) struct Decoder<'a> {
    heap: &'a Heap,
    codes: &'a mut Codes,
    forms: &'static Forms,
    dialect: Dialect,
    /// Buffers taken from `codes` for this decode (given back by [`Self::top_level`]).
    spare: Spare,
    scopes: Vec<Scope>,
    loops: Vec<Option<LoopCtx>>,
    /// Decoded ids of the lists being built, innermost last (one buffer for every nesting level).
    scratch: Vec<CodeId>,
    depth: u32,
    max_depth: u32,
    /// Work units (cells visited) left before decoding stops with `ErrorKind::StepBudget`: run-time
    /// data handed to `eval` can share structure, so its tree may be exponentially larger than
    /// the cells it occupies.
    budget: std::cell::Cell<u64>,
    /// Work units spent so far.
    spent: std::cell::Cell<u64>,
    /// The error when the budget runs out (work, or memory when the budget stands for bytes).
    budget_kind: ErrorKind,
}

fn syntax(node: NodeId, msg: impl Into<String>) -> CoreError {
    CoreError::new(ErrorKind::Syntax, msg).at(node)
}

impl<'a> Decoder<'a> {
    /// A decoder over `heap` (whose form names every heap holds from the start).
    pub(crate) fn new(
        heap: &'a Heap,
        codes: &'a mut Codes,
        dialect: Dialect,
        max_depth: u32,
    ) -> Self {
        let forms = Forms::get();
        let mut spare = std::mem::take(&mut codes.spare);
        let scopes = std::mem::take(&mut spare.scopes);
        let mut loops = std::mem::take(&mut spare.loops);
        loops.push(None);
        let scratch = std::mem::take(&mut spare.scratch);
        Decoder {
            heap,
            codes,
            forms,
            dialect,
            spare,
            scopes,
            loops,
            scratch,
            depth: 0,
            max_depth,
            budget: std::cell::Cell::new(u64::MAX),
            spent: std::cell::Cell::new(0),
            budget_kind: ErrorKind::StepBudget,
        }
    }

    /// The same decoder, stopping after `units` cells visited with an error of `kind`.
    pub(crate) fn with_budget(mut self, units: u64, kind: ErrorKind) -> Self {
        self.budget.set(units);
        self.budget_kind = kind;
        self
    }

    /// Cells visited so far (work units to charge the run).
    pub(crate) fn work_done(&self) -> u64 {
        self.spent.get()
    }

    /// Spends one unit; false once the budget is gone.
    fn tick(&self) -> bool {
        let s = self.spent.get() + 1;
        self.spent.set(s);
        s <= self.budget.get()
    }

    fn over_budget(&self, node: NodeId) -> CoreError {
        let what = if self.budget_kind == ErrorKind::MemoryLimit {
            "the decoded forms would not fit in the memory left"
        } else {
            "decoding run-time data took more work units than were left"
        };
        CoreError::new(
            self.budget_kind,
            format!("{what} (stopped after {} cells)", self.budget.get()),
        )
        .at(node)
    }

    /// Decodes the top level: pre-declares every top-level `define`/`params` name as a global,
    /// then decodes each form. Returns the forms in order.
    pub(crate) fn top_level(&mut self, forms: &[NodeId]) -> Result<Vec<CodeId>> {
        let mut tops = Vec::new();
        self.top_level_into(forms, &mut tops).map(|()| tops)
    }

    /// [`Decoder::top_level`] into `tops` (cleared first), reusing its capacity.
    pub(crate) fn top_level_into(
        &mut self,
        forms: &[NodeId],
        tops: &mut Vec<CodeId>,
    ) -> Result<()> {
        let mut names = std::mem::take(&mut self.spare.defs);
        names.clear();
        let scanned = forms
            .iter()
            .try_for_each(|&f| self.scan_defines(f, &mut names, true, 0));
        if scanned.is_ok() {
            for &(sym, _) in &names {
                self.codes.global_slot(sym);
            }
        }
        if names.capacity() <= SPARE_LEN {
            self.spare.defs = names;
        }
        scanned?;
        tops.clear();
        let mut res = Ok(());
        for &f in forms {
            match self.expr(f, false) {
                Ok(c) => tops.push(c),
                Err(e) => {
                    res = Err(e);
                    break;
                }
            }
        }
        self.give_back();
        res
    }

    /// Returns the work buffers to `codes` for the next decode.
    fn give_back(&mut self) {
        let mut spare = std::mem::take(&mut self.spare);
        while let Some(scope) = self.scopes.pop() {
            give_buf(&mut spare.syms, scope.names);
        }
        spare.scopes = std::mem::take(&mut self.scopes);
        spare.loops = std::mem::take(&mut self.loops);
        spare.loops.clear();
        spare.scratch = std::mem::take(&mut self.scratch);
        spare.scratch.clear();
        self.codes.spare = spare;
    }

    /// An empty node list from the spare ones.
    fn node_buf(&mut self) -> Vec<NodeId> {
        take_buf(&mut self.spare.nodes)
    }

    /// An empty id list from the spare ones.
    fn id_buf(&mut self) -> Vec<CodeId> {
        take_buf(&mut self.spare.ids)
    }

    /// A new scope of the names `names` yields, `visible` of them visible, its name list a spare one.
    fn push_scope(&mut self, names: impl IntoIterator<Item = Symbol>, visible: Option<usize>) {
        let mut v = take_buf(&mut self.spare.syms);
        v.extend(names);
        let visible = visible.unwrap_or(v.len());
        self.scopes.push(Scope { names: v, visible });
    }

    /// Pops the innermost scope, returning its slot count and keeping its name list.
    fn pop_scope(&mut self) -> u32 {
        let Some(scope) = self.scopes.pop() else {
            return 0;
        };
        let n = scope.names.len() as u32;
        give_buf(&mut self.spare.syms, scope.names);
        n
    }

    /// The elements of the proper list `node` into `out` (the error [`Self::items`] gives
    /// otherwise).
    fn items_into(&self, node: NodeId, out: &mut Vec<NodeId>) -> Result<()> {
        let mut cur = node;
        loop {
            match self.heap.node(cur) {
                Node::Nil => return Ok(()),
                Node::Pair(a, d) => {
                    out.push(a);
                    cur = d;
                }
                _ => return Err(syntax(node, "improper list in a form")),
            }
        }
    }

    fn items(&self, node: NodeId) -> Result<Vec<NodeId>> {
        self.heap
            .list_items(node)
            .ok_or_else(|| syntax(node, "improper list in a form"))
    }

    fn symbol_of(&self, node: NodeId) -> Option<Symbol> {
        match self.heap.node(node) {
            Node::Sym(s) => Some(s),
            _ => None,
        }
    }

    fn head_symbol(&self, node: NodeId) -> Option<Symbol> {
        match self.heap.node(node) {
            Node::Pair(h, _) => self.symbol_of(h),
            _ => None,
        }
    }

    /// Collects names defined at body level of `node` (through `begin`, `if`, `when`, `unless`,
    /// `cond` arms, not through forms that open their own scope).
    fn scan_defines(
        &self,
        node: NodeId,
        out: &mut Vec<(Symbol, NodeId)>,
        top: bool,
        depth: u32,
    ) -> Result<()> {
        let Some(head) = self.head_symbol(node) else {
            return Ok(());
        };
        if !self.tick() {
            return Err(self.over_budget(node));
        }
        if depth > self.max_depth {
            return Err(
                CoreError::new(ErrorKind::DepthLimit, "program nesting is too deep").at(node),
            );
        }
        if depth % 32 == 31 {
            return stacker::maybe_grow(128 * 1024, 2 * 1024 * 1024, || {
                self.scan_defines_inner(node, head, out, top, depth)
            });
        }
        self.scan_defines_inner(node, head, out, top, depth)
    }

    fn scan_defines_inner(
        &self,
        node: NodeId,
        head: Symbol,
        out: &mut Vec<(Symbol, NodeId)>,
        top: bool,
        depth: u32,
    ) -> Result<()> {
        let f = self.forms;
        if head == f.sym(Form::Define) {
            self.check_proper(node)?;
            let target = self
                .nth(node, 1)
                .ok_or_else(|| syntax(node, "define needs a name"))?;
            let name = match self.heap.node(target) {
                Node::Sym(s) => s,
                Node::Pair(h, _) => self
                    .symbol_of(h)
                    .ok_or_else(|| syntax(target, "define needs a name"))?,
                _ => return Err(syntax(target, "define needs a name")),
            };
            out.push((name, node));
        } else if head == f.sym(Form::Params) && top {
            for entry in self.items(node)?.into_iter().skip(1) {
                let e = self.items(entry)?;
                if let Some(s) = e.first().and_then(|&n| self.symbol_of(n)) {
                    out.push((s, entry));
                }
            }
        } else if head == f.sym(Form::Begin)
            || head == f.sym(Form::If)
            || head == f.sym(Form::When)
            || head == f.sym(Form::Unless)
        {
            self.check_proper(node)?;
            let mut cur = node;
            let mut first = true;
            while let Node::Pair(sub, rest) = self.heap.node(cur) {
                if !first {
                    self.scan_defines(sub, out, top, depth + 1)?;
                }
                first = false;
                cur = rest;
            }
        } else if head == f.sym(Form::Cond) {
            for clause in self.items(node)?.into_iter().skip(1) {
                if let Some(parts) = self.heap.list_items(clause) {
                    for sub in parts.into_iter().skip(1) {
                        self.scan_defines(sub, out, top, depth + 1)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The `k`th element of the list `node` (`None` past its end or at an improper tail).
    fn nth(&self, node: NodeId, k: usize) -> Option<NodeId> {
        let mut cur = node;
        for _ in 0..k {
            match self.heap.node(cur) {
                Node::Pair(_, d) => cur = d,
                _ => return None,
            }
        }
        match self.heap.node(cur) {
            Node::Pair(a, _) => Some(a),
            _ => None,
        }
    }

    fn lookup(&self, sym: Symbol) -> Option<Code> {
        for (d, scope) in self.scopes.iter().rev().enumerate() {
            if let Some(i) = scope.names[..scope.visible].iter().rposition(|&s| s == sym) {
                return Some(Code::Local {
                    depth: d as u32,
                    slot: i as u32,
                });
            }
        }
        if let Some(&slot) = self.codes.globals.get(&sym) {
            return Some(Code::Global(slot));
        }
        prim_of(sym, self.dialect).map(Code::PrimRef)
    }

    fn is_loop_alias(&self, sym: Symbol) -> bool {
        self.loops
            .last()
            .copied()
            .flatten()
            .is_some_and(|ctx| ctx.alias == Some(sym))
    }

    fn shadowed_locally(&self, sym: Symbol) -> bool {
        self.scopes
            .iter()
            .any(|s| s.names[..s.visible].contains(&sym))
            || self.codes.globals.contains_key(&sym)
    }

    /// Decodes one expression; `tail` marks a tail position of the innermost loop body.
    pub(crate) fn expr(&mut self, node: NodeId, tail: bool) -> Result<CodeId> {
        if !self.tick() {
            return Err(self.over_budget(node));
        }
        self.depth += 1;
        if self.depth > self.max_depth {
            self.depth -= 1;
            return Err(
                CoreError::new(ErrorKind::DepthLimit, "program nesting is too deep").at(node),
            );
        }
        let res = if self.depth.is_multiple_of(32) {
            stacker::maybe_grow(128 * 1024, 2 * 1024 * 1024, || self.expr_inner(node, tail))
        } else {
            self.expr_inner(node, tail)
        };
        self.depth -= 1;
        res
    }

    fn expr_inner(&mut self, node: NodeId, tail: bool) -> Result<CodeId> {
        match self.heap.node(node) {
            Node::Nil => Err(syntax(node, "empty application ()")),
            Node::Bool(b) => Ok(self.codes.push(Code::Bool(b), node)),
            Node::Num(x) => Ok(self.codes.push(Code::Num(x), node)),
            Node::Sym(s) => match self.lookup(s) {
                Some(code) => Ok(self.codes.push(code, node)),
                None if self.forms.form(s) == Some(Form::Unsupported) => {
                    Err(self.unsupported(s, node))
                }
                None => {
                    let name = self.heap.symbol_name(s);
                    let msg = if self.forms.is_special(s) {
                        format!("`{name}` is a special form and cannot be used as a value")
                    } else {
                        format!("`{name}` is not bound")
                    };
                    let kind = if self.forms.is_special(s) {
                        ErrorKind::Syntax
                    } else {
                        ErrorKind::Unbound
                    };
                    Err(CoreError::new(kind, msg).at(node))
                }
            },
            Node::Pair(head, _) => {
                // `special` declines a name that is no form: ask that first (an id compare for
                // the program's own names) before the scope and global look-ups.
                if let Some(s) = self.symbol_of(head)
                    && self.forms.form(s).is_some()
                    && !self.shadowed_locally(s)
                    && !self.is_loop_alias(s)
                    && let Some(code) = self.special(s, node, tail)?
                {
                    return Ok(code);
                }
                self.application(node, tail)
            }
        }
    }

    fn exprs(&mut self, nodes: &[NodeId]) -> Result<CodeList> {
        let start = self.scratch.len();
        for &n in nodes {
            match self.expr(n, false) {
                Ok(id) => self.scratch.push(id),
                Err(e) => {
                    self.scratch.truncate(start);
                    return Err(e);
                }
            }
        }
        let list = self.codes.push_list(&self.scratch[start..]);
        self.scratch.truncate(start);
        Ok(list)
    }

    /// [`Self::exprs`] over the elements of `list`, a proper list (checked by the caller).
    fn exprs_of_list(&mut self, mut list: NodeId) -> Result<CodeList> {
        let start = self.scratch.len();
        while let Node::Pair(item, rest) = self.heap.node(list) {
            match self.expr(item, false) {
                Ok(id) => self.scratch.push(id),
                Err(e) => {
                    self.scratch.truncate(start);
                    return Err(e);
                }
            }
            list = rest;
        }
        let codes = self.codes.push_list(&self.scratch[start..]);
        self.scratch.truncate(start);
        Ok(codes)
    }

    /// Checks that `node` is a proper list (the error [`Self::items`] gives otherwise), without
    /// collecting it.
    fn check_proper(&self, mut node: NodeId) -> Result<()> {
        let start = node;
        loop {
            match self.heap.node(node) {
                Node::Nil => return Ok(()),
                Node::Pair(_, rest) => node = rest,
                _ => return Err(syntax(start, "improper list in a form")),
            }
        }
    }

    fn application(&mut self, node: NodeId, tail: bool) -> Result<CodeId> {
        self.check_proper(node)?;
        let Node::Pair(head, rest) = self.heap.node(node) else {
            return Err(syntax(node, "improper list in a form"));
        };
        if let Some(s) = self.symbol_of(head)
            && let Some(ctx) = self.loops.last().copied().flatten()
            && ctx.alias == Some(s)
        {
            let items = self.items(node)?;
            return self.recur(node, &items[1..], tail, ctx);
        }
        let args = self.exprs_of_list(rest)?;
        if let Some(s) = self.symbol_of(head)
            && let Some(Code::PrimRef(prim)) = self.lookup(s)
        {
            let (lo, hi) = prim.arity();
            let n = args.len;
            if n < lo || n > hi {
                return Err(arity_error(prim.name(), lo, hi, n as usize).at(node));
            }
            return Ok(self.codes.push(Code::PrimCall { prim, args }, node));
        }
        let head = self.expr(head, false)?;
        Ok(self.codes.push(Code::App { head, args }, node))
    }

    fn recur(&mut self, node: NodeId, args: &[NodeId], tail: bool, ctx: LoopCtx) -> Result<CodeId> {
        if !tail {
            return Err(syntax(node, "recur must be in tail position of its loop"));
        }
        if args.len() != ctx.arity {
            return Err(CoreError::new(
                ErrorKind::Arity,
                format!(
                    "recur takes {} arguments (the loop's variables), got {}",
                    ctx.arity,
                    args.len()
                ),
            )
            .at(node));
        }
        let list = self.exprs(args)?;
        Ok(self.codes.push(Code::Recur(list), node))
    }

    /// Decodes a body (a sequence with internal defines) in the innermost scope, which the caller
    /// pushed; the defined names are appended to that scope.
    fn body(&mut self, node: NodeId, forms: &[NodeId], tail: bool) -> Result<CodeId> {
        if forms.is_empty() {
            return Err(syntax(node, "empty body"));
        }
        let mut defs = Vec::new();
        for &f in forms {
            self.scan_defines(f, &mut defs, false, self.depth)?;
        }
        if let Some(scope) = self.scopes.last_mut() {
            for (s, _) in defs {
                if !scope.names.contains(&s) {
                    scope.names.push(s);
                }
            }
            scope.visible = scope.names.len();
        }
        self.sequence(node, forms, tail)
    }

    fn sequence(&mut self, node: NodeId, forms: &[NodeId], tail: bool) -> Result<CodeId> {
        if forms.len() == 1 {
            return self.expr(forms[0], tail);
        }
        let mut ids = self.id_buf();
        for (i, &f) in forms.iter().enumerate() {
            ids.push(self.expr(f, tail && i + 1 == forms.len())?);
        }
        let list = self.codes.push_list(&ids);
        give_buf(&mut self.spare.ids, ids);
        Ok(self.codes.push(Code::Seq(list), node))
    }

    fn special(&mut self, s: Symbol, node: NodeId, tail: bool) -> Result<Option<CodeId>> {
        let Some(form) = self.forms.form(s) else {
            return Ok(None);
        };
        let mut items = self.node_buf();
        self.items_into(node, &mut items)?;
        let res = self.special_form(form, s, node, &items, tail);
        give_buf(&mut self.spare.nodes, items);
        res
    }

    /// [`Self::special`] on the form's elements `items`.
    fn special_form(
        &mut self,
        form: Form,
        s: Symbol,
        node: NodeId,
        items: &[NodeId],
        tail: bool,
    ) -> Result<Option<CodeId>> {
        let n = items.len();
        let code = match form {
            Form::Quote => {
                if n != 2 {
                    return Err(syntax(node, "quote takes one datum"));
                }
                self.quote(items[1])
            }
            Form::Quasiquote => {
                if n != 2 {
                    return Err(syntax(node, "quasiquote takes one template"));
                }
                return self.quasi(items[1]).map(Some);
            }
            Form::If => {
                if !(3..=4).contains(&n) {
                    return Err(syntax(
                        node,
                        "if takes a test, a then arm and an optional else arm",
                    ));
                }
                let test = self.expr(items[1], false)?;
                let then = self.expr(items[2], tail)?;
                let els = if n == 4 {
                    Some(self.expr(items[3], tail)?)
                } else {
                    None
                };
                Code::If { test, then, els }
            }
            Form::When | Form::Unless => {
                if n < 3 {
                    return Err(syntax(node, "when/unless take a test and a body"));
                }
                let test = self.expr(items[1], false)?;
                let body = self.sequence(node, &items[2..], tail)?;
                let test = if form == Form::When {
                    test
                } else {
                    let args = self.one(test);
                    self.codes.push(
                        Code::PrimCall {
                            prim: Prim::Not,
                            args,
                        },
                        node,
                    )
                };
                Code::If {
                    test,
                    then: body,
                    els: None,
                }
            }
            Form::Begin => {
                if n == 1 {
                    return Err(syntax(node, "empty begin"));
                }
                return self.sequence(node, &items[1..], tail).map(Some);
            }
            Form::Define => return self.define(node, items).map(Some),
            Form::Set => return self.set(node, items).map(Some),
            Form::Params => return self.params(node, items).map(Some),
            Form::Lambda => {
                if n < 3 {
                    return Err(syntax(node, "lambda takes parameters and a body"));
                }
                return self.lambda(node, items[1], &items[2..]).map(Some);
            }
            Form::CaseLambda => return self.case_lambda(node, &items[1..]).map(Some),
            Form::Let => return self.let_form(node, items, tail).map(Some),
            Form::LetStar | Form::Letrec | Form::LetrecStar => {
                if n < 3 {
                    return Err(syntax(node, "let* and letrec take bindings and a body"));
                }
                let rec = form != Form::LetStar;
                return self
                    .let_frame(node, items[1], &items[2..], LetKind::Sequential, rec, tail)
                    .map(Some);
            }
            Form::Cond => return self.cond(node, &items[1..], tail).map(Some),
            Form::Case => return self.case(node, items, tail).map(Some),
            Form::And | Form::Or => {
                if n == 1 {
                    return Ok(Some(self.codes.push(Code::Bool(form == Form::And), node)));
                }
                let list = self.exprs(&items[1..])?;
                if form == Form::And {
                    Code::And(list)
                } else {
                    Code::Or(list)
                }
            }
            Form::Do => return self.do_form(node, items).map(Some),
            Form::Loop => {
                if n < 3 {
                    return Err(syntax(node, "loop takes bindings and a body"));
                }
                return self.loop_form(node, items[1], &items[2..], None).map(Some);
            }
            Form::Recur => {
                let ctx = match self.loops.last().copied().flatten() {
                    Some(ctx) => ctx,
                    None => return Err(syntax(node, "recur outside of a loop")),
                };
                return self.recur(node, &items[1..], tail, ctx).map(Some);
            }
            Form::SoftChoice => return self.soft_choice(node, items).map(Some),
            Form::Else | Form::Arrow | Form::Unquote | Form::UnquoteSplicing => {
                return Err(syntax(
                    node,
                    format!("`{}` is not allowed here", self.heap.symbol_name(s)),
                ));
            }
            Form::Unsupported => return Err(self.unsupported(s, node)),
        };
        Ok(Some(self.codes.push(code, node)))
    }

    /// The error for a known form outside the language, naming it and why.
    fn unsupported(&self, s: Symbol, node: NodeId) -> CoreError {
        let name = self.heap.symbol_name(s);
        syntax(
            node,
            format!("`{name}` is not supported: {}", unsupported_reason(name)),
        )
    }

    /// `(soft-choice (e1 e2 …) logits)`: at least two options.
    fn soft_choice(&mut self, node: NodeId, items: &[NodeId]) -> Result<CodeId> {
        const SHAPE: &str = "soft-choice takes a list of at least two option expressions and the logits: (soft-choice (e1 e2 …) logits)";
        if items.len() != 3 {
            return Err(syntax(node, SHAPE));
        }
        let options = self
            .heap
            .list_items(items[1])
            .filter(|o| o.len() >= 2)
            .ok_or_else(|| syntax(items[1], SHAPE))?;
        let options = self.exprs(&options)?;
        let logits = self.expr(items[2], false)?;
        let site = self.codes.n_choice_sites;
        self.codes.n_choice_sites += 1;
        Ok(self.codes.push(
            Code::SoftChoice {
                options,
                logits,
                site,
            },
            node,
        ))
    }

    fn one(&mut self, id: CodeId) -> CodeList {
        self.codes.push_list(&[id])
    }

    fn quote(&mut self, datum: NodeId) -> Code {
        match self.heap.node(datum) {
            Node::Nil => Code::Nil,
            Node::Bool(b) => Code::Bool(b),
            Node::Num(x) => Code::Num(x),
            Node::Sym(s) => Code::Sym(s),
            Node::Pair(..) => Code::Datum(datum),
        }
    }

    fn quasi(&mut self, t: NodeId) -> Result<CodeId> {
        if !self.tick() {
            return Err(self.over_budget(t));
        }
        if self.depth >= self.max_depth {
            return Err(CoreError::new(ErrorKind::DepthLimit, "program nesting is too deep").at(t));
        }
        self.depth += 1;
        let res = stacker::maybe_grow(128 * 1024, 2 * 1024 * 1024, || self.quasi_inner(t));
        self.depth -= 1;
        res
    }

    fn quasi_inner(&mut self, t: NodeId) -> Result<CodeId> {
        let f = self.forms;
        match self.heap.node(t) {
            Node::Pair(h, rest) => {
                if self.symbol_of(h) == Some(f.sym(Form::Unquote)) {
                    let items = self.items(t)?;
                    if items.len() != 2 {
                        return Err(syntax(t, "unquote takes one expression"));
                    }
                    return self.expr(items[1], false);
                }
                let _ = rest;
                // Walk the list, collecting append segments.
                let mut segments = Vec::new();
                let mut cur = t;
                loop {
                    match self.heap.node(cur) {
                        Node::Pair(elem, next) => {
                            if self.symbol_of(elem) == Some(f.sym(Form::Unquote)) {
                                // dotted unquote: `(a . ,b)`
                                let items = self.items(cur)?;
                                if items.len() == 2 {
                                    segments.push(self.expr(items[1], false)?);
                                    break;
                                }
                            }
                            if self.head_symbol(elem) == Some(f.sym(Form::UnquoteSplicing)) {
                                let items = self.items(elem)?;
                                if items.len() != 2 {
                                    return Err(syntax(
                                        elem,
                                        "unquote-splicing takes one expression",
                                    ));
                                }
                                segments.push(self.expr(items[1], false)?);
                            } else {
                                let e = self.quasi(elem)?;
                                let args = self.one(e);
                                segments.push(self.codes.push(
                                    Code::PrimCall {
                                        prim: Prim::List,
                                        args,
                                    },
                                    elem,
                                ));
                            }
                            cur = next;
                        }
                        Node::Nil => break,
                        _ => {
                            segments.push(self.quasi(cur)?);
                            break;
                        }
                    }
                }
                let args = self.codes.push_list(&segments);
                Ok(self.codes.push(
                    Code::PrimCall {
                        prim: Prim::Append,
                        args,
                    },
                    t,
                ))
            }
            _ => {
                let code = self.quote(t);
                Ok(self.codes.push(code, t))
            }
        }
    }

    fn define(&mut self, node: NodeId, items: &[NodeId]) -> Result<CodeId> {
        if items.len() < 3 {
            return Err(syntax(node, "define takes a name and a value"));
        }
        let target = items[1];
        let (name, value) = match self.heap.node(target) {
            Node::Sym(s) => {
                if items.len() != 3 {
                    return Err(syntax(node, "define of a variable takes exactly one value"));
                }
                (s, self.expr(items[2], false)?)
            }
            Node::Pair(h, params) => {
                let s = self
                    .symbol_of(h)
                    .ok_or_else(|| syntax(target, "define needs a name"))?;
                (s, self.lambda(node, params, &items[2..])?)
            }
            _ => return Err(syntax(target, "define needs a name")),
        };
        if let Some(scope) = self.scopes.last() {
            let slot = scope
                .names
                .iter()
                .rposition(|&s| s == name)
                .ok_or_else(|| {
                    syntax(
                        node,
                        "define is only allowed at the start of a body or at top level",
                    )
                })?;
            Ok(self.codes.push(
                Code::Define {
                    slot: slot as u32,
                    value,
                },
                node,
            ))
        } else {
            let slot = self.codes.global_slot(name);
            Ok(self.codes.push(Code::DefineGlobal { slot, value }, node))
        }
    }

    fn params(&mut self, node: NodeId, items: &[NodeId]) -> Result<CodeId> {
        if !self.scopes.is_empty() {
            return Err(syntax(node, "params is only allowed at top level"));
        }
        let mut ids = Vec::new();
        for &entry in &items[1..] {
            let decl = crate::params::parse_entry(self.heap, entry)?;
            let init = self.codes.push(Code::Num(decl.init), entry);
            let slot = self.codes.global_slot(decl.symbol);
            ids.push(
                self.codes
                    .push(Code::DeclareGlobal { slot, value: init }, entry),
            );
        }
        if ids.is_empty() {
            return Ok(self.codes.push(Code::Nil, node));
        }
        let list = self.codes.push_list(&ids);
        Ok(self.codes.push(Code::Seq(list), node))
    }

    fn lambda(&mut self, node: NodeId, params: NodeId, body: &[NodeId]) -> Result<CodeId> {
        let mut names = take_buf(&mut self.spare.syms);
        let mut rest = false;
        let mut cur = params;
        loop {
            match self.heap.node(cur) {
                Node::Nil => break,
                Node::Sym(s) => {
                    names.push(s);
                    rest = true;
                    break;
                }
                Node::Pair(p, next) => {
                    let s = self
                        .symbol_of(p)
                        .ok_or_else(|| syntax(p, "lambda parameters must be symbols"))?;
                    names.push(s);
                    cur = next;
                }
                _ => return Err(syntax(params, "lambda parameters must be symbols")),
            }
        }
        let n_params = names.len() as u32 - rest as u32;
        self.scopes.push(Scope {
            visible: names.len(),
            names,
        });
        self.loops.push(None);
        let body = self.body(node, body, false);
        self.loops.pop();
        let n_slots = self.pop_scope();
        let body = body?;
        Ok(self.codes.push(
            Code::Lambda {
                n_params,
                rest,
                n_slots,
                body,
            },
            node,
        ))
    }

    /// The `(name value)` bindings of the list `node`, in a spare list (give it back with
    /// [`Self::give_bindings`]).
    fn bindings(&mut self, node: NodeId) -> Result<Vec<Binding>> {
        self.check_proper(node)?;
        let mut out = take_buf(&mut self.spare.binds);
        let mut cur = node;
        while let Node::Pair(b, rest) = self.heap.node(cur) {
            // `(name value)`: a pair whose tail is a one-element proper list.
            let parts = match self.heap.node(b) {
                Node::Pair(name, tail) => match self.heap.node(tail) {
                    Node::Pair(value, Heap::NIL) => Some((name, value)),
                    _ => None,
                },
                _ => None,
            };
            let Some((name, value)) = parts else {
                return Err(syntax(b, "a binding is (name value)"));
            };
            let s = self
                .symbol_of(name)
                .ok_or_else(|| syntax(name, "a binding name must be a symbol"))?;
            out.push((s, value, b));
            cur = rest;
        }
        Ok(out)
    }

    fn give_bindings(&mut self, binds: Vec<Binding>) {
        give_buf(&mut self.spare.binds, binds);
    }

    fn let_form(&mut self, node: NodeId, items: &[NodeId], tail: bool) -> Result<CodeId> {
        if items.len() < 3 {
            return Err(syntax(node, "let takes bindings and a body"));
        }
        if let Some(name) = self.symbol_of(items[1]) {
            // named let
            if items.len() < 4 {
                return Err(syntax(node, "named let takes a name, bindings and a body"));
            }
            return self.named_let(node, name, items[2], &items[3..]);
        }
        let kind = if self.dialect == Dialect::Reference {
            LetKind::Sequential
        } else {
            LetKind::Parallel
        };
        self.let_frame(node, items[1], &items[2..], kind, false, tail)
    }

    fn let_frame(
        &mut self,
        node: NodeId,
        bindings: NodeId,
        body: &[NodeId],
        kind: LetKind,
        rec: bool,
        tail: bool,
    ) -> Result<CodeId> {
        let binds = self.bindings(bindings)?;
        let mut inits = self.id_buf();
        let res = self.let_frame_with(node, &binds, body, kind, rec, tail, &mut inits);
        give_buf(&mut self.spare.ids, inits);
        self.give_bindings(binds);
        res
    }

    /// [`Self::let_frame`] once the bindings are read (`inits`: an empty buffer).
    #[allow(clippy::too_many_arguments)]
    fn let_frame_with(
        &mut self,
        node: NodeId,
        binds: &[Binding],
        body: &[NodeId],
        kind: LetKind,
        rec: bool,
        tail: bool,
        inits: &mut Vec<CodeId>,
    ) -> Result<CodeId> {
        let names = binds.iter().map(|b| b.0);
        match kind {
            LetKind::Parallel => {
                for b in binds {
                    inits.push(self.expr(b.1, false)?);
                }
                self.push_scope(names, None);
            }
            LetKind::Sequential => {
                let visible = if rec { binds.len() } else { 0 };
                self.push_scope(names, Some(visible));
                for (i, b) in binds.iter().enumerate() {
                    let r = self.expr(b.1, false);
                    match r {
                        Ok(id) => inits.push(id),
                        Err(e) => {
                            self.pop_scope();
                            return Err(e);
                        }
                    }
                    if let Some(sc) = self.scopes.last_mut() {
                        sc.visible = sc.visible.max(i + 1);
                    }
                }
            }
        }
        let body = self.body(node, body, tail);
        let n_slots = self.pop_scope();
        let body = body?;
        let inits = self.codes.push_list(inits);
        Ok(self.codes.push(
            Code::Let {
                kind,
                n_slots,
                inits,
                body,
            },
            node,
        ))
    }

    fn loop_form(
        &mut self,
        node: NodeId,
        bindings: NodeId,
        body: &[NodeId],
        alias: Option<Symbol>,
    ) -> Result<CodeId> {
        let binds = self.bindings(bindings)?;
        let mut inits = self.id_buf();
        let res = self.loop_form_with(node, &binds, body, alias, &mut inits);
        give_buf(&mut self.spare.ids, inits);
        self.give_bindings(binds);
        res
    }

    /// [`Self::loop_form`] once the bindings are read (`inits`: an empty buffer).
    fn loop_form_with(
        &mut self,
        node: NodeId,
        binds: &[Binding],
        body: &[NodeId],
        alias: Option<Symbol>,
        inits: &mut Vec<CodeId>,
    ) -> Result<CodeId> {
        for b in binds {
            inits.push(self.expr(b.1, false)?);
        }
        let ctx = Some(LoopCtx {
            arity: binds.len(),
            alias,
        });
        let names = binds.iter().map(|b| b.0);
        self.loop_code(node, names, inits, ctx, |d| d.body(node, body, true))
    }

    /// A `Code::Loop` over slots `names` with `inits`: the body is decoded by `body` in a new
    /// scope of those names, inside loop context `ctx` (`None`: `recur` does not target it).
    fn loop_code(
        &mut self,
        node: NodeId,
        names: impl IntoIterator<Item = Symbol>,
        inits: &[CodeId],
        ctx: Option<LoopCtx>,
        body: impl FnOnce(&mut Self) -> Result<CodeId>,
    ) -> Result<CodeId> {
        self.push_scope(names, None);
        self.loops.push(ctx);
        let body = body(self);
        self.loops.pop();
        let n_slots = self.pop_scope();
        let body = body?;
        let inits = self.codes.push_list(inits);
        Ok(self.codes.push(
            Code::Loop {
                n_slots,
                inits,
                body,
            },
            node,
        ))
    }

    fn named_let(
        &mut self,
        node: NodeId,
        name: Symbol,
        bindings: NodeId,
        body: &[NodeId],
    ) -> Result<CodeId> {
        let binds = self.bindings(bindings)?;
        if body
            .iter()
            .all(|&b| self.only_tail_calls(b, name, binds.len(), true))
        {
            let mut inits = self.id_buf();
            let res = self.loop_form_with(node, &binds, body, Some(name), &mut inits);
            give_buf(&mut self.spare.ids, inits);
            self.give_bindings(binds);
            return res;
        }
        // General case: ((letrec ((name (lambda (vars...) body...))) name) inits...)
        let mut inits = Vec::with_capacity(binds.len());
        for b in &binds {
            inits.push(self.expr(b.1, false)?);
        }
        self.scopes.push(Scope {
            names: vec![name],
            visible: 1,
        });
        self.loops.push(None);
        let names: Vec<Symbol> = binds.iter().map(|b| b.0).collect();
        let n_params = names.len() as u32;
        self.scopes.push(Scope {
            visible: names.len(),
            names,
        });
        let lam_body = self.body(node, body, false);
        let lam_scope = self.scopes.pop().unwrap_or_default();
        self.loops.pop();
        let outer = self.scopes.pop().unwrap_or_default();
        let lam_body = lam_body?;
        let lam = self.codes.push(
            Code::Lambda {
                n_params,
                rest: false,
                n_slots: lam_scope.names.len() as u32,
                body: lam_body,
            },
            node,
        );
        let me = self.codes.push(Code::Local { depth: 0, slot: 0 }, node);
        let init_list = self.codes.push_list(&[lam]);
        let letrec = self.codes.push(
            Code::Let {
                kind: LetKind::Sequential,
                n_slots: outer.names.len() as u32,
                inits: init_list,
                body: me,
            },
            node,
        );
        let args = self.codes.push_list(&inits);
        Ok(self.codes.push(Code::App { head: letrec, args }, node))
    }

    /// True when every occurrence of `name` in `node` is the head of a tail call with `arity`
    /// arguments, and `name` is never rebound (so the named let can become a `loop`).
    /// Whether every call of `name` in `node` is a tail call of `arity` arguments. Conservative
    /// (false) past the work budget or the depth limit.
    fn only_tail_calls(&self, node: NodeId, name: Symbol, arity: usize, tail: bool) -> bool {
        self.only_tail_calls_at(node, name, arity, tail, 0)
    }

    fn only_tail_calls_at(
        &self,
        node: NodeId,
        name: Symbol,
        arity: usize,
        tail: bool,
        depth: u32,
    ) -> bool {
        if !self.tick() || depth > self.max_depth {
            return false;
        }
        stacker::maybe_grow(128 * 1024, 2 * 1024 * 1024, || {
            self.only_tail_calls_inner(node, name, arity, tail, depth + 1)
        })
    }

    fn only_tail_calls_inner(
        &self,
        node: NodeId,
        name: Symbol,
        arity: usize,
        tail: bool,
        depth: u32,
    ) -> bool {
        let f = self.forms;
        match self.heap.node(node) {
            Node::Sym(s) => s != name,
            Node::Pair(h, _) => {
                let Some(items) = self.heap.list_items(node) else {
                    return false;
                };
                let head = self.symbol_of(h);
                if head == Some(name) {
                    return tail
                        && items.len() == arity + 1
                        && items[1..]
                            .iter()
                            .all(|&a| self.only_tail_calls_at(a, name, arity, false, depth));
                }
                let all = |from: usize, tail_last: bool| {
                    items[from..].iter().enumerate().all(|(i, &a)| {
                        self.only_tail_calls_at(
                            a,
                            name,
                            arity,
                            tail_last && from + i + 1 == items.len(),
                            depth,
                        )
                    })
                };
                match head {
                    Some(s) if s == f.sym(Form::Quote) => true,
                    Some(s) if s == f.sym(Form::If) => {
                        items.len() >= 2
                            && self.only_tail_calls_at(items[1], name, arity, false, depth)
                            && items[2..]
                                .iter()
                                .all(|&a| self.only_tail_calls_at(a, name, arity, tail, depth))
                    }
                    Some(s)
                        if s == f.sym(Form::Begin)
                            || s == f.sym(Form::When)
                            || s == f.sym(Form::Unless) =>
                    {
                        (s == f.sym(Form::Begin)
                            || self.only_tail_calls_at(
                                items.get(1).copied().unwrap_or(node),
                                name,
                                arity,
                                false,
                                depth,
                            ))
                            && all(if s == f.sym(Form::Begin) { 1 } else { 2 }, tail)
                    }
                    Some(s) if s == f.sym(Form::Cond) => {
                        items[1..].iter().all(|&c| match self.heap.list_items(c) {
                            Some(parts) => parts.iter().enumerate().all(|(i, &p)| {
                                (i == 0 && self.symbol_of(p) == Some(f.sym(Form::Else)))
                                    || self.only_tail_calls_at(
                                        p,
                                        name,
                                        arity,
                                        tail && i > 0 && i + 1 == parts.len(),
                                        depth,
                                    )
                            }),
                            None => false,
                        })
                    }
                    Some(s)
                        if s == f.sym(Form::Let)
                            || s == f.sym(Form::LetStar)
                            || s == f.sym(Form::Letrec)
                            || s == f.sym(Form::Loop) =>
                    {
                        // Rebinding the name or a loop (whose tail belongs to it) disqualifies.
                        if s == f.sym(Form::Loop) {
                            return !self.mentions(node, name);
                        }
                        let Some(binds) = items.get(1).and_then(|&b| self.heap.list_items(b))
                        else {
                            return false;
                        };
                        binds.iter().all(|&b| match self.heap.list_items(b) {
                            Some(p) if p.len() == 2 => {
                                self.symbol_of(p[0]) != Some(name)
                                    && self.only_tail_calls_at(p[1], name, arity, false, depth)
                            }
                            _ => false,
                        }) && all(2, tail)
                    }
                    _ => items
                        .iter()
                        .all(|&a| self.only_tail_calls_at(a, name, arity, false, depth)),
                }
            }
            _ => true,
        }
    }

    /// Whether `name` occurs anywhere in `node` (an explicit stack; true past the work budget,
    /// the conservative answer).
    fn mentions(&self, node: NodeId, name: Symbol) -> bool {
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            if !self.tick() {
                return true;
            }
            match self.heap.node(n) {
                Node::Sym(s) if s == name => return true,
                Node::Pair(a, d) => {
                    stack.push(d);
                    stack.push(a);
                }
                _ => {}
            }
        }
        false
    }

    fn cond(&mut self, node: NodeId, clauses: &[NodeId], tail: bool) -> Result<CodeId> {
        let Some((&first, rest)) = clauses.split_first() else {
            return Ok(self.codes.push(Code::Bool(false), node));
        };
        let parts = self
            .heap
            .list_items(first)
            .ok_or_else(|| syntax(first, "a cond clause is (test body...)"))?;
        if parts.is_empty() {
            return Err(syntax(first, "empty cond clause"));
        }
        if self.symbol_of(parts[0]) == Some(self.forms.sym(Form::Else)) {
            if !rest.is_empty() {
                return Err(syntax(first, "else must be the last cond clause"));
            }
            if parts.len() < 2 {
                return Err(syntax(first, "else clause needs a body"));
            }
            return self.sequence(first, &parts[1..], tail);
        }
        if parts.len() >= 2 && self.symbol_of(parts[1]) == Some(self.forms.sym(Form::Arrow)) {
            return self.cond_arrow(node, first, &parts, rest, tail);
        }
        let test = self.expr(parts[0], false)?;
        let els = if rest.is_empty() {
            None
        } else {
            Some(self.cond(node, rest, tail)?)
        };
        if parts.len() == 1 {
            // (test) yields the test's value when true.
            let mut list = vec![test];
            list.extend(els);
            let list = self.codes.push_list(&list);
            return Ok(self.codes.push(Code::Or(list), first));
        }
        let then = self.sequence(first, &parts[1..], tail)?;
        let els = match els {
            Some(e) => e,
            None => self.codes.push(Code::Bool(false), node),
        };
        Ok(self.codes.push(
            Code::If {
                test,
                then,
                els: Some(els),
            },
            first,
        ))
    }

    /// `(test => receiver)`: `(let ((k test)) (if k (receiver k) <rest>))`, the temporary under
    /// the hidden name.
    fn cond_arrow(
        &mut self,
        node: NodeId,
        clause: NodeId,
        parts: &[NodeId],
        rest: &[NodeId],
        tail: bool,
    ) -> Result<CodeId> {
        if parts.len() != 3 {
            return Err(syntax(
                clause,
                "a cond clause with => is (test => receiver)",
            ));
        }
        let test = self.expr(parts[0], false)?;
        self.scopes.push(Scope {
            names: vec![self.forms.hidden],
            visible: 1,
        });
        let arms = self.expr(parts[2], false).and_then(|f| {
            let els = if rest.is_empty() {
                self.codes.push(Code::Bool(false), node)
            } else {
                self.cond(node, rest, tail)?
            };
            Ok((f, els))
        });
        self.scopes.pop();
        let (f, els) = arms?;
        let k = self.codes.push(Code::Local { depth: 0, slot: 0 }, parts[0]);
        let args = self.one(k);
        let then = self.codes.push(Code::App { head: f, args }, clause);
        let k = self.codes.push(Code::Local { depth: 0, slot: 0 }, parts[0]);
        let body = self.codes.push(
            Code::If {
                test: k,
                then,
                els: Some(els),
            },
            clause,
        );
        let inits = self.one(test);
        Ok(self.codes.push(
            Code::Let {
                kind: LetKind::Parallel,
                n_slots: 1,
                inits,
                body,
            },
            clause,
        ))
    }

    /// `(set! name value)` on a local or a global; under divergent control only the active lanes
    /// take the new value.
    fn set(&mut self, node: NodeId, items: &[NodeId]) -> Result<CodeId> {
        if items.len() != 3 {
            return Err(syntax(node, "set! takes a variable and a value"));
        }
        let name = self
            .symbol_of(items[1])
            .ok_or_else(|| syntax(items[1], "set! needs a variable name"))?;
        let value = self.expr(items[2], false)?;
        let code = match self.lookup(name) {
            Some(Code::Local { depth, slot }) => Code::SetLocal { depth, slot, value },
            Some(Code::Global(slot)) => Code::SetGlobal { slot, value },
            Some(_) => {
                return Err(syntax(
                    items[1],
                    format!(
                        "`{}` is a primitive; set! assigns variables",
                        self.heap.symbol_name(name)
                    ),
                ));
            }
            None => {
                return Err(CoreError::new(
                    ErrorKind::Unbound,
                    format!(
                        "set! of `{}`, which is not bound",
                        self.heap.symbol_name(name)
                    ),
                )
                .at(items[1]));
            }
        };
        Ok(self.codes.push(code, node))
    }

    /// `(do ((var init step)…) (test result…) command…)` as a `loop`: each iteration tests, then
    /// either yields the results or runs the commands and recurs with the steps (a variable
    /// without a step keeps its value, including what `set!` gave it).
    fn do_form(&mut self, node: NodeId, items: &[NodeId]) -> Result<CodeId> {
        const SHAPE: &str = "do takes ((var init step)…), (test result…) and commands";
        if items.len() < 3 {
            return Err(syntax(node, SHAPE));
        }
        let mut specs = Vec::new();
        for spec in self.items(items[1])? {
            let parts = self
                .heap
                .list_items(spec)
                .filter(|p| (2..=3).contains(&p.len()))
                .ok_or_else(|| syntax(spec, "a do variable is (name init) or (name init step)"))?;
            let name = self
                .symbol_of(parts[0])
                .ok_or_else(|| syntax(parts[0], "a do variable must be a symbol"))?;
            specs.push((name, parts[1], parts.get(2).copied()));
        }
        let exit = self
            .heap
            .list_items(items[2])
            .filter(|p| !p.is_empty())
            .ok_or_else(|| syntax(items[2], "a do exit clause is (test result…)"))?;
        let mut inits = Vec::with_capacity(specs.len());
        for &(_, init, _) in &specs {
            inits.push(self.expr(init, false)?);
        }
        let names: Vec<Symbol> = specs.iter().map(|s| s.0).collect();
        self.loop_code(node, names, &inits, None, |d| {
            d.do_body(node, &specs, &exit, &items[3..])
        })
    }

    /// The loop body of a `do`, in its scope: `(if test (begin result…) (begin command… (recur step…)))`.
    fn do_body(
        &mut self,
        node: NodeId,
        specs: &[(Symbol, NodeId, Option<NodeId>)],
        exit: &[NodeId],
        commands: &[NodeId],
    ) -> Result<CodeId> {
        let test = self.expr(exit[0], false)?;
        let then = if exit.len() == 1 {
            self.codes.push(Code::Nil, exit[0])
        } else {
            self.sequence(node, &exit[1..], false)?
        };
        let mut seq = Vec::with_capacity(commands.len() + 1);
        for &c in commands {
            seq.push(self.expr(c, false)?);
        }
        let mut steps = Vec::with_capacity(specs.len());
        for (i, &(_, init, step)) in specs.iter().enumerate() {
            steps.push(match step {
                Some(st) => self.expr(st, false)?,
                None => self.codes.push(
                    Code::Local {
                        depth: 0,
                        slot: i as u32,
                    },
                    init,
                ),
            });
        }
        let steps = self.codes.push_list(&steps);
        seq.push(self.codes.push(Code::Recur(steps), node));
        let els = if seq.len() == 1 {
            seq[0]
        } else {
            let list = self.codes.push_list(&seq);
            self.codes.push(Code::Seq(list), node)
        };
        Ok(self.codes.push(
            Code::If {
                test,
                then,
                els: Some(els),
            },
            node,
        ))
    }

    /// `(case-lambda (formals body…)…)`: the clauses' closures are made once, in a frame, and a
    /// variadic procedure applies the first whose arity fits the argument count (the last clause
    /// without a test, so a count no clause takes is that clause's arity error).
    fn case_lambda(&mut self, node: NodeId, clauses: &[NodeId]) -> Result<CodeId> {
        if clauses.is_empty() {
            return Err(syntax(node, "case-lambda takes at least one clause"));
        }
        let mut lambdas = Vec::with_capacity(clauses.len());
        let mut arities = Vec::with_capacity(clauses.len());
        for &clause in clauses {
            let parts = self
                .heap
                .list_items(clause)
                .filter(|p| p.len() >= 2)
                .ok_or_else(|| syntax(clause, "a case-lambda clause is (formals body…)"))?;
            arities.push(self.formals_arity(parts[0]));
            lambdas.push(self.lambda(clause, parts[0], &parts[1..])?);
        }
        let n = lambdas.len() as u32;
        let args = |d: &mut Self| d.codes.push(Code::Local { depth: 0, slot: 0 }, node);
        let apply = |d: &mut Self, i: u32| {
            let f = d
                .codes
                .push(Code::Local { depth: 1, slot: i }, clauses[i as usize]);
            let a = args(d);
            let list = d.codes.push_list(&[f, a]);
            d.codes.push(
                Code::PrimCall {
                    prim: Prim::Apply,
                    args: list,
                },
                clauses[i as usize],
            )
        };
        let mut chain = apply(self, n - 1);
        for i in (0..n - 1).rev() {
            let (required, rest) = arities[i as usize];
            let a = args(self);
            let one = self.one(a);
            let len = self.codes.push(
                Code::PrimCall {
                    prim: Prim::Length,
                    args: one,
                },
                node,
            );
            let k = self.codes.push(Code::Num(required as f64), node);
            let cmp = if rest { Compare::Ge } else { Compare::Eq };
            let list = self.codes.push_list(&[len, k]);
            let test = self.codes.push(
                Code::PrimCall {
                    prim: Prim::Compare(cmp),
                    args: list,
                },
                clauses[i as usize],
            );
            let then = apply(self, i);
            chain = self.codes.push(
                Code::If {
                    test,
                    then,
                    els: Some(chain),
                },
                clauses[i as usize],
            );
        }
        let dispatch = self.codes.push(
            Code::Lambda {
                n_params: 0,
                rest: true,
                n_slots: 1,
                body: chain,
            },
            node,
        );
        let inits = self.codes.push_list(&lambdas);
        Ok(self.codes.push(
            Code::Let {
                kind: LetKind::Parallel,
                n_slots: n,
                inits,
                body: dispatch,
            },
            node,
        ))
    }

    /// Required parameters of a formals list, and whether it takes a rest list.
    fn formals_arity(&self, formals: NodeId) -> (u32, bool) {
        let mut n = 0;
        let mut cur = formals;
        loop {
            match self.heap.node(cur) {
                Node::Pair(_, next) => {
                    n += 1;
                    cur = next;
                }
                Node::Sym(_) => return (n, true),
                _ => return (n, false),
            }
        }
    }

    fn case(&mut self, node: NodeId, items: &[NodeId], tail: bool) -> Result<CodeId> {
        if items.len() < 2 {
            return Err(syntax(node, "case takes a key and clauses"));
        }
        let key = self.expr(items[1], false)?;
        // (let ((k key)) (if (or (eqv? k d)...) body (if ... )))
        self.scopes.push(Scope {
            names: vec![self.forms.hidden],
            visible: 1,
        });
        let chain = self.case_clauses(node, &items[2..], tail);
        self.scopes.pop();
        let chain = chain?;
        let inits = self.codes.push_list(&[key]);
        Ok(self.codes.push(
            Code::Let {
                kind: LetKind::Parallel,
                n_slots: 1,
                inits,
                body: chain,
            },
            node,
        ))
    }

    fn case_clauses(&mut self, node: NodeId, clauses: &[NodeId], tail: bool) -> Result<CodeId> {
        let Some((&first, rest)) = clauses.split_first() else {
            return Ok(self.codes.push(Code::Bool(false), node));
        };
        let parts = self
            .heap
            .list_items(first)
            .ok_or_else(|| syntax(first, "a case clause is ((datum...) body...)"))?;
        if parts.len() < 2 {
            return Err(syntax(first, "a case clause is ((datum...) body...)"));
        }
        let body = self.sequence(first, &parts[1..], tail)?;
        if self.symbol_of(parts[0]) == Some(self.forms.sym(Form::Else)) {
            return Ok(body);
        }
        let datums = self.items(parts[0])?;
        let mut tests = Vec::new();
        for d in datums {
            let k = self.codes.push(Code::Local { depth: 0, slot: 0 }, d);
            let c = self.quote(d);
            let c = self.codes.push(c, d);
            let args = self.codes.push_list(&[k, c]);
            tests.push(self.codes.push(
                Code::PrimCall {
                    prim: Prim::EqP,
                    args,
                },
                d,
            ));
        }
        let tests = self.codes.push_list(&tests);
        let test = self.codes.push(Code::Or(tests), first);
        let els = self.case_clauses(node, rest, tail)?;
        Ok(self.codes.push(
            Code::If {
                test,
                then: body,
                els: Some(els),
            },
            first,
        ))
    }
}

pub(crate) fn arity_error(what: &str, lo: u32, hi: u32, got: usize) -> CoreError {
    let expected = if hi == u32::MAX {
        format!("at least {lo}")
    } else if lo == hi {
        format!("{lo}")
    } else {
        format!("{lo} to {hi}")
    };
    CoreError::new(
        ErrorKind::Arity,
        format!("{what} takes {expected} arguments, got {got}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_heap_starts_with_the_form_names_below_the_hidden_one() {
        // `Forms::form` rejects ids above the hidden name's: every form name must sit below it, at
        // the same id in every heap (new or cloned), whatever the program interned.
        let forms = Forms::get();
        let mut heap = Heap::new();
        heap.sym("x");
        let clone = heap.clone();
        let template = forms_interner();
        for row in FORMS {
            let sym = template.lookup(row.name).expect("in the template");
            assert!(sym.0 < forms.hidden.0, "{}", row.name);
            assert_eq!(heap.symbols().lookup(row.name), Some(sym), "{}", row.name);
            assert_eq!(clone.symbols().lookup(row.name), Some(sym), "{}", row.name);
            assert_eq!(forms.form(sym), Some(row.form), "{}", row.name);
            assert_eq!(
                forms.is_special(sym),
                row.kind == WordKind::SpecialForm,
                "{}",
                row.name
            );
        }
        // A form's symbol is its first row's.
        for form in [Form::If, Form::Let, Form::Unsupported, Form::Else] {
            let first = FORMS.iter().find(|r| r.form == form).map(|r| r.name);
            assert_eq!(
                first.and_then(|n| template.lookup(n)),
                Some(forms.sym(form))
            );
        }
        assert_eq!(heap.symbols().lookup(HIDDEN), Some(forms.hidden));
        let x = heap.intern("x");
        assert!(x.0 > forms.hidden.0);
        assert_eq!(forms.form(x), None);
        assert!(!forms.is_special(x));
        assert!(forms.is_special(forms.sym(Form::Lambda)));
    }

    /// A minimal reader for tests: parentheses, numbers and symbols.
    fn read(heap: &mut Heap, src: &str) -> NodeId {
        let spaced = src.replace('(', " ( ").replace(')', " ) ");
        let mut stack: Vec<Vec<NodeId>> = vec![Vec::new()];
        for tok in spaced.split_whitespace() {
            match tok {
                "(" => stack.push(Vec::new()),
                ")" => {
                    let items = stack.pop().expect("balanced");
                    let list = heap.list(&items);
                    stack.last_mut().expect("balanced").push(list);
                }
                t => {
                    let id = match t.parse::<f64>() {
                        Ok(x) => heap.num(x),
                        Err(_) => heap.sym(t),
                    };
                    stack.last_mut().expect("balanced").push(id);
                }
            }
        }
        stack[0][0]
    }

    #[test]
    fn reused_buffers_decode_as_fresh_ones() {
        // The spare buffers a decode leaves in `Codes` (after successes and errors) give the same
        // codes as a first decode, for every binding form that borrows them.
        let programs = [
            "(let ((a 1) (b 2)) (let* ((c a) (d c)) (+ a b c d)))",
            "(loop ((i 0) (s 0)) (if (< i 3) (recur (+ i 1) (+ s i)) s))",
            "((lambda (x y) (define z (* x y)) (begin (+ z 1) z)) 2 3)",
            "(letrec ((f (lambda (n) (if (< n 1) 0 (f (- n 1)))))) (f 3))",
            "(let loop ((k 0)) (if (< k 2) (loop (+ k 1)) k))",
            "(let ((a 1) (b)) a)",
            "(let ((a (let* ((b 1) (c q)) c))) a)",
            "(if (< 1 2) (let ((u 1)) (when (> u 0) u)) 3)",
        ];
        let decode = |codes: &mut Codes, src: &str| {
            let mut heap = Heap::new();
            let node = read(&mut heap, src);
            codes.clear();
            let tops = Decoder::new(&heap, codes, Dialect::Default, 1000)
                .top_level(&[node])
                .map_err(|e| e.to_string());
            (tops, codes.codes.clone(), codes.lists.clone())
        };
        let mut reused = Codes::default();
        for _ in 0..2 {
            for src in programs {
                let fresh = decode(&mut Codes::default(), src);
                assert_eq!(decode(&mut reused, src), fresh, "{src}");
            }
        }
        assert!(!reused.spare.binds.is_empty() && !reused.spare.syms.is_empty());
    }

    #[test]
    fn primitives_resolve_by_symbol_id_as_by_name() {
        // Oracle: `Prim::lookup` by name. Every primitive name is in the template, so the id
        // table agrees with it in both dialects, and a program's own name is no primitive.
        let mut heap = Heap::new();
        for row in crate::prims::PRIMITIVES {
            let sym = heap.intern(row.name);
            assert!(sym.0 < template().interner.len() as u32, "{}", row.name);
            for d in [Dialect::Default, Dialect::Reference] {
                assert_eq!(prim_of(sym, d), Prim::lookup(row.name, d), "{}", row.name);
            }
        }
        let own = heap.intern("not-a-primitive");
        assert_eq!(prim_of(own, Dialect::Default), None);
        assert_eq!(prim_of(Forms::get().sym(Form::If), Dialect::Default), None);
    }
}
