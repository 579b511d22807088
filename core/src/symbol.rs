//! Interned symbols: one interner per `Heap`, ids assigned in first-seen order.

use std::collections::HashMap;

/// An interned symbol name; compare by id, look the text up in the owning [`Interner`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Symbol(pub u32);

/// Maps symbol text to dense ids and back.
#[derive(Clone, Debug, Default)]
pub struct Interner {
    ids: HashMap<Box<str>, Symbol>,
    names: Vec<Box<str>>,
}

impl Interner {
    /// The id of `name`, interning it on first sight.
    pub fn intern(&mut self, name: &str) -> Symbol {
        if let Some(&sym) = self.ids.get(name) {
            return sym;
        }
        let sym = Symbol(self.names.len() as u32);
        self.names.push(name.into());
        self.ids.insert(name.into(), sym);
        sym
    }

    /// The id of `name` if it was interned before.
    pub fn lookup(&self, name: &str) -> Option<Symbol> {
        self.ids.get(name).copied()
    }

    /// The text of `sym`.
    pub fn name(&self, sym: Symbol) -> &str {
        &self.names[sym.0 as usize]
    }

    /// Number of interned symbols.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when nothing has been interned.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}
