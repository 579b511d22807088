//! Interned symbols: one interner per `Heap`, ids assigned in first-seen order; and the fast hasher
//! the interner and the decoder's tables use.
//!
//! Every heap's interner sits on one shared template of the form and primitive names (a new heap
//! copies nothing). The interner keeps its own names in one string (no allocation per symbol)
//! and finds them through an open-addressing table of ids hashed with [`FxHasher`] (rustc's
//! multiply-rotate hash: a few cycles per word, where SipHash took a fifth of a new program's
//! first evaluation). Keys come from program text, which is untrusted: a crafted program can make
//! its own names collide, which costs it time (linear probing, bounded by the source size and the
//! step budget), never correctness.

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
            self.add(tail_word(rest));
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

/// The last 1–7 bytes of a hashed text as one word, every byte in it (for a given length, distinct
/// bytes give distinct words), without a variable-length copy (a `memcpy` call per name).
#[inline]
fn tail_word(rest: &[u8]) -> u64 {
    let n = rest.len();
    if let (Some(a), Some(b)) = (rest.first_chunk::<4>(), rest.last_chunk::<4>()) {
        // 4–7 bytes: two overlapping 4-byte reads.
        return u64::from(u32::from_le_bytes(*a)) | (u64::from(u32::from_le_bytes(*b)) << 32);
    }
    match (rest.first(), rest.get(n / 2), rest.last()) {
        (Some(&a), Some(&m), Some(&z)) => u64::from(a) | (u64::from(m) << 8) | (u64::from(z) << 16),
        _ => 0,
    }
}

/// A `HashMap`/`HashSet` hasher builder for [`FxHasher`].
pub(crate) type FxBuild = BuildHasherDefault<FxHasher>;

/// What a table slot holds to find a name without reading its text: the hash, the length and the
/// first word (the whole name up to 8 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key {
    /// FxHash of the name's words and length, high bits folded down (the table indexes with the
    /// low ones).
    hash: u64,
    /// Bits 32..48 of `hash` and the length (saturated at `u16::MAX`) above them: compared with
    /// the slot's before anything else.
    tag: u64,
    /// The first 8 bytes (a name of 1–7 bytes as [`tail_word`] gives it; 0 when empty): for a name
    /// of up to 8 bytes, equal tags and words mean equal names.
    word: u64,
}

impl Key {
    #[inline]
    fn of(name: &str) -> Key {
        let b = name.as_bytes();
        let mut h = FxHasher::default();
        let word = match b.first_chunk::<8>() {
            // Most names: one word, hashed as the loop below would hash it.
            None if b.is_empty() => None,
            None => {
                let w = tail_word(b);
                h.add(w);
                Some(w)
            }
            Some(first) => {
                let mut chunks = b.chunks_exact(8);
                for c in &mut chunks {
                    h.add(c.first_chunk::<8>().map_or(0, |c| u64::from_le_bytes(*c)));
                }
                let rest = chunks.remainder();
                if !rest.is_empty() {
                    h.add(tail_word(rest));
                }
                Some(u64::from_le_bytes(*first))
            }
        };
        h.add(b.len() as u64);
        let hash = h.0 ^ (h.0 >> 29);
        let len = b.len().min(usize::from(u16::MAX)) as u64;
        Key {
            hash,
            tag: (hash & 0xffff_0000_0000) | (len << 48),
            word: word.unwrap_or(0),
        }
    }

    /// The name is wholly in `word` (no text to compare).
    #[inline]
    fn short(&self) -> bool {
        self.tag >> 48 <= 8
    }
}

/// One occupied table slot: the key's tag with the own index + 1 in the low 32 bits, and its word
/// (`[0, _]` is empty).
type Slot = [u64; 2];

/// Maps symbol text to dense ids and back.
///
/// An interner may sit on a shared base (every heap's sits on the template of form and primitive
/// names): the base's names keep its ids, this interner's own names follow them, and a new heap
/// copies nothing.
#[derive(Clone, Debug, Default)]
pub struct Interner {
    /// The names below `base_len`, shared and read-only (itself without a base).
    base: Option<&'static Interner>,
    /// Number of names in `base` (the first own name's id).
    base_len: u32,
    /// Every own name, concatenated in id order.
    text: String,
    /// End of each own name in `text` (its start is the previous end).
    ends: Vec<u32>,
    /// Open addressing, linear probing, at most half full, a power of two long.
    table: Vec<Slot>,
}

impl Interner {
    /// An interner whose first names are `base`'s, at the same ids.
    pub(crate) fn on_base(base: &'static Interner) -> Interner {
        if base.base.is_some() {
            // One level only: a base on a base is copied instead.
            return base.clone();
        }
        Interner {
            base: Some(base),
            base_len: base.len() as u32,
            ..Interner::default()
        }
    }

    /// Empties this interner onto `base` (as [`Self::on_base`] makes it), keeping its buffers
    /// unless they grew large.
    pub(crate) fn reset_on(&mut self, base: &'static Interner) {
        if base.base.is_some() {
            *self = Interner::on_base(base);
            return;
        }
        self.base = Some(base);
        self.base_len = base.len() as u32;
        self.text.clear();
        self.ends.clear();
        if self.table.len() > 256 {
            self.table = Vec::new();
        } else {
            self.table.fill([0, 0]);
        }
    }

    /// The id of `name`, interning it on first sight.
    #[inline]
    pub fn intern(&mut self, name: &str) -> Symbol {
        let key = Key::of(name);
        if let Some(s) = self.base.and_then(|b| b.find_own(name, &key)) {
            return s;
        }
        if (self.ends.len() + 1) * 2 > self.table.len() {
            self.grow();
        }
        let mask = self.table.len() - 1;
        let mut i = key.hash as usize & mask;
        loop {
            let [meta, word] = self.table[i];
            if meta == 0 {
                break;
            }
            if let Some(s) = self.matches(meta, word, name, &key) {
                return s;
            }
            i = (i + 1) & mask;
        }
        let own = self.ends.len() as u32;
        self.text.push_str(name);
        self.ends.push(self.text.len() as u32);
        self.table[i] = [key.tag | u64::from(own + 1), key.word];
        Symbol(self.base_len + own)
    }

    /// The symbol of the slot `[meta, word]` when it holds `name` (key `key`).
    #[inline]
    fn matches(&self, meta: u64, word: u64, name: &str, key: &Key) -> Option<Symbol> {
        let own = meta as u32 - 1;
        let same = (meta & !0xffff_ffff) == key.tag
            && word == key.word
            && (key.short() || self.own_name(own) == name);
        same.then_some(Symbol(self.base_len + own))
    }

    /// Doubles the table (32 slots at first) and re-inserts every own name.
    #[cold]
    fn grow(&mut self) {
        let size = (self.table.len() * 2).max(32);
        if self.text.capacity() == 0 {
            self.text.reserve(128);
            self.ends.reserve(16);
        }
        self.table.clear();
        self.table.resize(size, [0, 0]);
        let mask = size - 1;
        for own in 0..self.ends.len() as u32 {
            let key = Key::of(self.own_name(own));
            let mut i = key.hash as usize & mask;
            while self.table[i][0] != 0 {
                i = (i + 1) & mask;
            }
            self.table[i] = [key.tag | u64::from(own + 1), key.word];
        }
    }

    /// Makes the table at least `slots` long (a sparser table: fewer probes per look-up).
    pub(crate) fn spread(&mut self, slots: usize) {
        while self.table.len() < slots {
            self.grow();
        }
    }

    /// The id of own name `name` (key `key`), if interned before.
    #[inline(always)]
    fn find_own(&self, name: &str, key: &Key) -> Option<Symbol> {
        if self.table.is_empty() {
            return None;
        }
        let mask = self.table.len() - 1;
        let mut i = key.hash as usize & mask;
        loop {
            let [meta, word] = self.table[i];
            if meta == 0 {
                return None;
            }
            if let Some(s) = self.matches(meta, word, name, key) {
                return Some(s);
            }
            i = (i + 1) & mask;
        }
    }

    /// The id of `name` if it was interned before.
    pub fn lookup(&self, name: &str) -> Option<Symbol> {
        let key = Key::of(name);
        self.base
            .and_then(|b| b.find_own(name, &key))
            .or_else(|| self.find_own(name, &key))
    }

    /// The text of own name number `own`.
    #[inline]
    fn own_name(&self, own: u32) -> &str {
        let i = own as usize;
        let Some(&end) = self.ends.get(i) else {
            return "";
        };
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.text.get(start as usize..end as usize).unwrap_or("")
    }

    /// The text of `sym` (empty for an id this interner never gave out).
    pub fn name(&self, sym: Symbol) -> &str {
        match self.base {
            Some(b) if sym.0 < self.base_len => b.own_name(sym.0),
            _ => self.own_name(sym.0.wrapping_sub(self.base_len)),
        }
    }

    /// Number of interned symbols (the base's included).
    pub fn len(&self) -> usize {
        self.base_len as usize + self.ends.len()
    }

    /// True when nothing has been interned.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
    fn names_of_up_to_8_bytes_are_told_apart_by_their_keys() {
        // Short names match on the key alone: equal keys must mean equal names.
        let mut names = vec![String::new()];
        for n in 1..=9 {
            for i in 0..n {
                let mut v = vec![b'a'; n];
                v[i] = b'b';
                names.push(String::from_utf8(v).expect("ascii"));
            }
            names.push("a".repeat(n));
        }
        names.push("λ→".into());
        names.push("λ←".into());
        let mut it = Interner::default();
        let ids: Vec<Symbol> = names.iter().map(|n| it.intern(n)).collect();
        for (i, a) in names.iter().enumerate() {
            for (j, b) in names.iter().enumerate() {
                let (ka, kb) = (Key::of(a), Key::of(b));
                if a.len() <= 8 && b.len() <= 8 {
                    assert_eq!(ka == kb, a == b, "{a:?} {b:?}");
                }
                assert_eq!(ids[i] == ids[j], a == b, "{a:?} {b:?}");
            }
            assert_eq!(it.lookup(a), Some(ids[i]));
            assert_eq!(it.name(ids[i]), a);
        }
    }

    #[test]
    fn fx_hasher_reads_every_byte() {
        let h = |b: &[u8]| {
            let mut x = FxHasher::default();
            x.write(b);
            x.finish()
        };
        assert_ne!(h(b"abcdefgh1"), h(b"abcdefgh2"));
        // Every byte of a 1–7 byte tail counts, at every position.
        for n in 1..8 {
            let base = vec![b'a'; n];
            for i in 0..n {
                let mut other = base.clone();
                other[i] = b'b';
                assert_ne!(h(&base), h(&other), "length {n}, byte {i}");
            }
        }
        assert_ne!(h(b"abcdefgh"), h(b"abcdefgi"));
        assert_eq!(h(b"same"), h(b"same"));
    }
}
