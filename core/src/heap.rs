//! The program heap: an arena of cons cells and atoms addressed by `NodeId`; programs are data here.

use crate::error::{CoreError, ErrorKind};
use crate::symbol::{Interner, Symbol};

/// Address of one cell in a [`Heap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// One heap cell: an atom or a pair.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Node {
    /// The empty list `()`.
    Nil,
    /// `#t` or `#f`.
    Bool(bool),
    /// A number literal (all numbers are f64 in the heap).
    Num(f64),
    /// A symbol.
    Sym(Symbol),
    /// A cons cell.
    Pair(NodeId, NodeId),
}

/// A byte range `[start, end)` in the source text a node was read from. Core treats it as opaque;
/// front ends map it to line and column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct SrcSpan {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

static NEXT_HEAP_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn fresh_heap_id() -> u64 {
    NEXT_HEAP_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The arena holding program data (and data built at run time that is handed back to `eval`).
///
/// Cells are immutable once allocated, so a decoded form stays valid for the life of the heap;
/// every heap (and every clone) has its own identity for the evaluator's decoded-form cache.
#[derive(Debug)]
pub struct Heap {
    id: u64,
    nodes: Vec<Node>,
    spans: Vec<Option<SrcSpan>>,
    symbols: Interner,
}

impl Default for Heap {
    fn default() -> Self {
        Self::new()
    }
}

impl Heap {
    /// The node id of `()`: always the first cell.
    pub const NIL: NodeId = NodeId(0);
    /// The node id of `#f`.
    pub const FALSE: NodeId = NodeId(1);
    /// The node id of `#t`.
    pub const TRUE: NodeId = NodeId(2);

    /// An empty heap holding only the shared `()`, `#f` and `#t` cells; its symbol table starts
    /// with the special forms' names (the same ids in every heap). Its buffers are those of a
    /// heap this thread dropped, when there is one (see [`SPARE_HEAPS`]).
    pub fn new() -> Self {
        const FIRST: [Node; 3] = [Node::Nil, Node::Bool(false), Node::Bool(true)];
        let template = crate::vocab::forms_interner();
        let spare = SPARE_HEAPS
            .try_with(|p| p.try_borrow_mut().ok().and_then(|mut p| p.pop()))
            .ok()
            .flatten();
        let (nodes, spans, symbols) = match spare {
            Some(mut s) => {
                s.nodes.clear();
                s.nodes.extend_from_slice(&FIRST);
                s.spans.clear();
                s.spans.extend_from_slice(&[None; 3]);
                s.symbols.reset_on(template);
                (s.nodes, s.spans, s.symbols)
            }
            None => (
                Self::with_room(FIRST),
                Self::with_room([None; 3]),
                Interner::on_base(template),
            ),
        };
        Heap {
            id: fresh_heap_id(),
            nodes,
            spans,
            symbols,
        }
    }

    /// The three shared cells' entries, with room for a few more cells (the reader reserves
    /// what its source needs: one growth, without copying a larger first buffer).
    fn with_room<T: Copy>(first: [T; 3]) -> Vec<T> {
        let mut v = Vec::with_capacity(32);
        v.extend_from_slice(&first);
        v
    }

    /// This heap's identity, from a process-wide counter: fresh for every new or cloned heap. A
    /// [`Program`] records it, and is run only with this heap.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Allocates a cell.
    pub fn alloc(&mut self, node: Node) -> NodeId {
        self.push(node, None)
    }

    /// Allocates a cell read from `span` of the source: [`Self::alloc`] then [`Self::set_span`]
    /// in one step (the shared `()`, `#f` and `#t` cells take no span).
    #[inline]
    pub fn alloc_spanned(&mut self, node: Node, span: SrcSpan) -> NodeId {
        self.push(node, Some(span))
    }

    /// A new cell holding `node` with `span` (the shared `()`, `#f` and `#t` cells are reused).
    #[inline]
    fn push(&mut self, node: Node, span: Option<SrcSpan>) -> NodeId {
        match node {
            Node::Nil => return Self::NIL,
            Node::Bool(false) => return Self::FALSE,
            Node::Bool(true) => return Self::TRUE,
            _ => {}
        }
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(node);
        self.spans.push(span);
        id
    }

    /// Makes room for `cells` more cells without growing (a reader's estimate from the source
    /// length: one growth to the right size instead of several doublings).
    pub fn reserve(&mut self, cells: usize) {
        self.nodes.reserve(cells);
        self.spans.reserve(cells);
    }

    /// Drops the cells from `len` on (cells `eval` added during a run, which nothing refers to
    /// once the run is over). Interned names stay.
    pub(crate) fn truncate(&mut self, len: usize) {
        if len >= 3 {
            self.nodes.truncate(len);
            self.spans.truncate(len);
        }
    }

    /// The cell at `id`.
    #[inline]
    pub fn node(&self, id: NodeId) -> Node {
        self.nodes[id.0 as usize]
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always false: a heap holds at least `()`, `#f` and `#t`.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// A number cell.
    pub fn num(&mut self, x: f64) -> NodeId {
        self.alloc(Node::Num(x))
    }

    /// A symbol cell for `name`.
    pub fn sym(&mut self, name: &str) -> NodeId {
        let s = self.symbols.intern(name);
        self.alloc(Node::Sym(s))
    }

    /// A pair cell.
    pub fn cons(&mut self, car: NodeId, cdr: NodeId) -> NodeId {
        self.alloc(Node::Pair(car, cdr))
    }

    /// A proper list of `items`.
    pub fn list(&mut self, items: &[NodeId]) -> NodeId {
        let mut tail = Self::NIL;
        for &item in items.iter().rev() {
            tail = self.cons(item, tail);
        }
        tail
    }

    /// The elements of a proper list, or `None` when `id` is not one.
    pub fn list_items(&self, mut id: NodeId) -> Option<Vec<NodeId>> {
        let mut out = Vec::new();
        loop {
            match self.node(id) {
                Node::Nil => return Some(out),
                Node::Pair(a, d) => {
                    out.push(a);
                    id = d;
                }
                _ => return None,
            }
        }
    }

    /// Interns a symbol name.
    #[inline]
    pub fn intern(&mut self, name: &str) -> Symbol {
        self.symbols.intern(name)
    }

    /// The symbol table.
    pub fn symbols(&self) -> &Interner {
        &self.symbols
    }

    /// The text of a symbol.
    pub fn symbol_name(&self, sym: Symbol) -> &str {
        self.symbols.name(sym)
    }

    /// Records where a node came from in the source text.
    pub fn set_span(&mut self, id: NodeId, span: SrcSpan) {
        if id.0 >= 3 {
            self.spans[id.0 as usize] = Some(span);
        }
    }

    /// Where a node came from, if it was read from text.
    pub fn span(&self, id: NodeId) -> Option<SrcSpan> {
        self.spans.get(id.0 as usize).copied().flatten()
    }
}

/// The buffers of a dropped heap, for the next [`Heap::new`] on the same thread.
struct SpareHeap {
    nodes: Vec<Node>,
    spans: Vec<Option<SrcSpan>>,
    symbols: Interner,
}

/// Heaps kept per thread, and the most cells a kept heap may have room for (a large program's
/// buffers are freed, so the pool holds at most a few hundred KiB).
const SPARE_HEAPS_MAX: usize = 4;
const SPARE_CELLS_MAX: usize = 1 << 13;

thread_local! {
    /// Buffers of heaps this thread dropped. Every candidate program is read into a new heap
    /// that is dropped after its evaluations: reusing the buffers spares the allocations (and
    /// their growth) of every new heap.
    static SPARE_HEAPS: std::cell::RefCell<Vec<SpareHeap>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

impl Drop for Heap {
    fn drop(&mut self) {
        if self.nodes.capacity() > SPARE_CELLS_MAX || self.spans.capacity() > SPARE_CELLS_MAX {
            return;
        }
        let spare = SpareHeap {
            nodes: std::mem::take(&mut self.nodes),
            spans: std::mem::take(&mut self.spans),
            symbols: std::mem::take(&mut self.symbols),
        };
        // Never panics: a thread being torn down, or a pool in use, just frees the buffers.
        let _ = SPARE_HEAPS.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut()
                && p.len() < SPARE_HEAPS_MAX
            {
                p.push(spare);
            }
        });
    }
}

impl Clone for Heap {
    fn clone(&self) -> Self {
        Heap {
            id: fresh_heap_id(),
            nodes: self.nodes.clone(),
            spans: self.spans.clone(),
            symbols: self.symbols.clone(),
        }
    }
}

/// A program: top-level forms on one heap, evaluated in order; the value is the last form's.
///
/// A program remembers which heap its forms live on (the heap's [`Heap::id`]), so running,
/// printing or reading the declarations of a program with another heap (a clone included) is the
/// error `ErrorKind::ForeignProgram`, found once at entry, never an out-of-bounds panic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    heap: u64,
    forms: Vec<NodeId>,
}

impl Program {
    /// A program of the `forms` of `heap`.
    pub fn new(heap: &Heap, forms: Vec<NodeId>) -> Self {
        Program {
            heap: heap.id(),
            forms,
        }
    }

    /// The top-level forms in source order.
    pub fn forms(&self) -> &[NodeId] {
        &self.forms
    }

    /// The [`Heap::id`] of the heap the forms live on.
    pub fn heap_id(&self) -> u64 {
        self.heap
    }

    /// Checks that the program's forms live on `heap`: the same heap identity, and every form a
    /// cell of it. One comparison per top-level form; callers check once per call, not per step.
    pub fn check_heap(&self, heap: &Heap) -> crate::error::Result<()> {
        if self.heap != heap.id() {
            return Err(CoreError::new(
                ErrorKind::ForeignProgram,
                "run it with the heap it was read into, or read it again into this one",
            ));
        }
        if let Some(form) = self.forms.iter().find(|f| f.0 as usize >= heap.len()) {
            return Err(CoreError::new(
                ErrorKind::ForeignProgram,
                format!(
                    "form #{} is not a cell of this heap ({} cells)",
                    form.0,
                    heap.len()
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a program can see of a heap: its cells with spans, and its names.
    fn state(heap: &Heap) -> (Vec<Node>, Vec<Option<SrcSpan>>, Vec<String>) {
        let n = heap.len();
        let nodes = (0..n as u32).map(|i| heap.node(NodeId(i))).collect();
        let spans = (0..n as u32).map(|i| heap.span(NodeId(i))).collect();
        let names = (0..heap.symbols().len() as u32)
            .map(|i| heap.symbol_name(Symbol(i)).to_string())
            .collect();
        (nodes, spans, names)
    }

    fn fill(heap: &mut Heap, names: &[&str]) -> Vec<NodeId> {
        names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let s = heap.intern(n);
                let id = heap.alloc_spanned(
                    Node::Sym(s),
                    SrcSpan {
                        start: i as u32,
                        end: 9,
                    },
                );
                let x = heap.num(i as f64);
                heap.cons(id, x)
            })
            .collect()
    }

    #[test]
    fn a_heap_on_spare_buffers_is_a_fresh_heap() {
        // Heaps dropped on this thread lend their buffers to the next ones: the next heap must
        // start as the first did (three cells, the template's names only) and give the same ids.
        let fresh = Heap::new();
        let first = state(&fresh);
        let ids_fresh = {
            let mut h = Heap::new();
            fill(&mut h, &["zeta", "a-long-name-here", "+", "zeta", "p0"])
        };
        let mut seen = vec![fresh.id()];
        for round in 0..6 {
            // Heaps with many names and cells, dropped in a different order each round.
            let mut big: Vec<Heap> = (0..3).map(|_| Heap::new()).collect();
            for (k, h) in big.iter_mut().enumerate() {
                let names: Vec<String> = (0..50 * (k + round)).map(|i| format!("n{i}")).collect();
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                fill(h, &refs);
                seen.push(h.id());
            }
            big.rotate_left(round % 3);
            drop(big);
            let mut h = Heap::new();
            assert!(!seen.contains(&h.id()), "every heap has a fresh id");
            seen.push(h.id());
            assert_eq!(state(&h), first, "round {round}");
            let ids = fill(&mut h, &["zeta", "a-long-name-here", "+", "zeta", "p0"]);
            assert_eq!(ids, ids_fresh, "round {round}");
            let zeta = h.intern("zeta");
            assert_eq!(h.symbol_name(zeta), "zeta");
            assert_eq!(h.symbols().lookup("n1"), None, "no name of a dropped heap");
        }
    }
}
