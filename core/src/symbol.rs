//! Interned symbols: one interner per `Heap`, ids assigned in first-seen order; and the fast hasher
//! the interner and the decoder's tables use.
//!
//! The interner keeps every name in one string (no allocation per symbol) and finds them through
//! an open-addressing table of ids hashed with [`FxHasher`] (rustc's multiply-rotate hash: a few
//! cycles per word, where SipHash took a fifth of a new program's first evaluation). Keys come
//! from program text, which is untrusted: a crafted program can make its own names collide, which
//! costs it time (linear probing, bounded by the source size and the step budget), never
//! correctness.

use std::hash::{BuildHasherDefault, Hasher};

/// An interned symbol name; compare by id, look the text up in the owning [`Interner`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Symbol(pub u32);

/// rustc's FxHash: `h = (h.rotl(5) ^ word) · K` per 8-byte word. Not for keys an adversary picks to
/// make a service slow; here the cost of collisions falls on the program that made them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FxHasher(u64);

const FX_K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(FX_K);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u8(&mut self, x: u8) {
        self.add(u64::from(x));
    }

    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.add(u64::from(x));
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.add(x);
    }

    #[inline]
    fn write_usize(&mut self, x: usize) {
        self.add(x as u64);
    }
}

/// A `HashMap`/`HashSet` hasher builder for [`FxHasher`].
pub(crate) type FxBuild = BuildHasherDefault<FxHasher>;

/// The hash of a name: FxHash of its bytes, then its length (so `"a"` and `"a\0"` differ), with
/// the high bits folded down (the table indexes with the low ones).
#[inline]
fn hash_name(name: &str) -> u64 {
    let mut h = FxHasher::default();
    h.write(name.as_bytes());
    h.add(name.len() as u64);
    h.0 ^ (h.0 >> 29)
}

/// Maps symbol text to dense ids and back.
#[derive(Clone, Debug, Default)]
pub struct Interner {
    /// Every name, concatenated in id order.
    text: String,
    /// End of each name in `text` (its start is the previous end).
    ends: Vec<u32>,
    /// Open addressing, linear probing: `id + 1` per occupied slot, 0 for empty; a power of two
    /// long, at most half full.
    table: Vec<u32>,
}

impl Interner {
    /// The id of `name`, interning it on first sight.
    pub fn intern(&mut self, name: &str) -> Symbol {
        if (self.ends.len() + 1) * 2 > self.table.len() {
            self.grow();
        }
        let mask = self.table.len() - 1;
        let mut i = hash_name(name) as usize & mask;
        loop {
            match self.table[i] {
                0 => break,
                s if self.name(Symbol(s - 1)) == name => return Symbol(s - 1),
                _ => i = (i + 1) & mask,
            }
        }
        let sym = Symbol(self.ends.len() as u32);
        self.text.push_str(name);
        self.ends.push(self.text.len() as u32);
        self.table[i] = sym.0 + 1;
        sym
    }

    /// Doubles the table (64 slots at first) and re-inserts every id.
    #[cold]
    fn grow(&mut self) {
        let size = (self.table.len() * 2).max(64);
        if self.text.capacity() == 0 {
            self.text.reserve(512);
            self.ends.reserve(64);
        }
        self.table.clear();
        self.table.resize(size, 0);
        let mask = size - 1;
        for id in 0..self.ends.len() as u32 {
            let mut i = hash_name(self.name(Symbol(id))) as usize & mask;
            while self.table[i] != 0 {
                i = (i + 1) & mask;
            }
            self.table[i] = id + 1;
        }
    }

    /// Makes room for `names` more names of `bytes` bytes in all without growing.
    pub(crate) fn reserve(&mut self, names: usize, bytes: usize) {
        self.text.reserve(bytes);
        self.ends.reserve(names);
        while (self.ends.len() + names) * 2 > self.table.len() {
            self.grow();
        }
    }

    /// A copy with the same room left as this one (a clone keeps only what is used).
    pub(crate) fn copy_with_room(&self) -> Interner {
        let mut text = String::with_capacity(self.text.capacity());
        text.push_str(&self.text);
        let mut ends = Vec::with_capacity(self.ends.capacity());
        ends.extend_from_slice(&self.ends);
        Interner {
            text,
            ends,
            table: self.table.clone(),
        }
    }

    /// The id of `name` if it was interned before.
    pub fn lookup(&self, name: &str) -> Option<Symbol> {
        if self.table.is_empty() {
            return None;
        }
        let mask = self.table.len() - 1;
        let mut i = hash_name(name) as usize & mask;
        loop {
            match self.table[i] {
                0 => return None,
                s if self.name(Symbol(s - 1)) == name => return Some(Symbol(s - 1)),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// The text of `sym` (empty for an id this interner never gave out).
    pub fn name(&self, sym: Symbol) -> &str {
        let i = sym.0 as usize;
        let Some(&end) = self.ends.get(i) else {
            return "";
        };
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.text.get(start as usize..end as usize).unwrap_or("")
    }

    /// Number of interned symbols.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when nothing has been interned.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_in_first_seen_order_and_text_back() {
        let mut it = Interner::default();
        assert_eq!(it.lookup("x"), None);
        let names: Vec<String> = (0..1000).map(|i| format!("n{i}")).collect();
        for (i, n) in names.iter().enumerate() {
            assert_eq!(it.intern(n), Symbol(i as u32));
        }
        for (i, n) in names.iter().enumerate() {
            assert_eq!(it.intern(n), Symbol(i as u32), "interned again");
            assert_eq!(it.lookup(n), Some(Symbol(i as u32)));
            assert_eq!(it.name(Symbol(i as u32)), n);
        }
        assert_eq!(it.len(), 1000);
        // Prefixes, the empty name and non-ASCII text are names of their own.
        let e = it.intern("");
        let a = it.intern("n1\0");
        let u = it.intern("λ→");
        assert_eq!((it.name(e), it.name(a), it.name(u)), ("", "n1\0", "λ→"));
        assert_ne!(a, Symbol(1));
        assert_eq!(it.lookup("n10000"), None);
        assert_eq!(it.name(Symbol(5000)), "", "unknown ids read as empty");
        let clone = it.clone();
        assert_eq!(clone.lookup("λ→"), Some(u));
    }

    #[test]
    fn fx_hasher_reads_every_byte() {
        let h = |b: &[u8]| {
            let mut x = FxHasher::default();
            x.write(b);
            x.finish()
        };
        assert_ne!(h(b"abcdefgh1"), h(b"abcdefgh2"));
        assert_ne!(h(b"abcdefgh"), h(b"abcdefgi"));
        assert_eq!(h(b"same"), h(b"same"));
    }
}
