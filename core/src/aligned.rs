//! `AlignedVec`: a growable float buffer whose first float sits on a 64-byte boundary (a cache
//! line, and the width of the widest vectors), so that a payload placed at a multiple of
//! [`AlignedVec::LINE`] floats starts on one: a lane loop's vector loads then never straddle two
//! lines. The arenas of payloads (`lanes.rs`) and of adjoints (`tape.rs`) are such buffers.

use std::ops::{Deref, DerefMut};

use crate::real::Real;

/// Floats per block of storage: 64 bytes of f32, 128 of f64, in both cases a whole number of
/// 64-byte lines, so blocks follow one another without padding.
const BLOCK: usize = 16;

/// One block of storage, aligned to a line.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Block<R>([R; BLOCK]);

/// A `Vec<R>`-like buffer of `len` floats, line-aligned (see the module's documentation).
#[derive(Clone, Debug)]
pub(crate) struct AlignedVec<R: Real> {
    blocks: Vec<Block<R>>,
    len: usize,
}

impl<R: Real> Default for AlignedVec<R> {
    fn default() -> Self {
        AlignedVec {
            blocks: Vec::new(),
            len: 0,
        }
    }
}

impl<R: Real> AlignedVec<R> {
    /// Floats per 64-byte line: a payload whose offset is a multiple of this starts on a line.
    pub(crate) const LINE: usize = 64 / R::BYTES;

    /// An empty buffer.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Floats the buffer holds without growing.
    pub(crate) fn capacity(&self) -> usize {
        self.blocks.capacity() * BLOCK
    }

    /// Gives back capacity above `floats` (rounded up to a block), shortening the buffer to it
    /// when longer, as `Vec::truncate` then `Vec::shrink_to`.
    pub(crate) fn shrink_to(&mut self, floats: usize) {
        let blocks = floats.div_ceil(BLOCK);
        self.blocks.truncate(blocks);
        self.blocks.shrink_to(blocks);
        self.len = self.len.min(self.blocks.len() * BLOCK);
    }

    /// Sets the length to `len`, as `Vec::resize`: floats past the old length are `value`.
    pub(crate) fn resize(&mut self, len: usize, value: R) {
        if len > self.len {
            // Floats of the last block past the old length may be stale: set them first.
            let have = (self.blocks.len() * BLOCK).min(len);
            let old = self.len;
            self.len = have;
            self[old..].fill(value);
            self.blocks
                .resize(len.div_ceil(BLOCK), Block([value; BLOCK]));
        }
        self.len = len;
    }
}

impl<R: Real> Deref for AlignedVec<R> {
    type Target = [R];

    #[inline]
    fn deref(&self) -> &[R] {
        // SAFETY: `Block<R>` is `repr(C)` around `[R; BLOCK]`, and BLOCK floats of f32 or f64
        // fill whole 64-byte lines, so the blocks are `blocks.len() * BLOCK` consecutive,
        // initialised floats with no padding between them; `len` never exceeds that count
        // (`resize` keeps the blocks ahead of it). The slice borrows `self`.
        unsafe { std::slice::from_raw_parts(self.blocks.as_ptr().cast::<R>(), self.len) }
    }
}

impl<R: Real> DerefMut for AlignedVec<R> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [R] {
        // SAFETY: as in `deref`; the slice borrows `self` mutably, so it is the only view.
        unsafe { std::slice::from_raw_parts_mut(self.blocks.as_mut_ptr().cast::<R>(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resizes_as_a_vec<R: Real>() {
        let mut a = AlignedVec::<R>::new();
        let mut v: Vec<R> = Vec::new();
        // Growing, shrinking (stale floats stay behind) and growing again over them.
        for (k, len) in [0, 5, 16, 17, 3, 40, 1, 33, 100, 0, 64]
            .into_iter()
            .enumerate()
        {
            let x = R::of(k as f64 + 0.5);
            a.resize(len, x);
            v.resize(len, x);
            assert_eq!(&a[..], &v[..], "length {len}");
            assert_eq!(a.as_ptr() as usize % 64, 0, "aligned at length {len}");
            assert!(a.capacity() >= len);
            // Write through the mutable view: the next resize must not bring these back.
            for (i, y) in a.iter_mut().enumerate() {
                *y = R::of(-(i as f64));
            }
            v.iter_mut()
                .enumerate()
                .for_each(|(i, y)| *y = R::of(-(i as f64)));
        }
        let b = a.clone();
        assert_eq!(&b[..], &a[..]);
        // Giving back capacity keeps what fits, aligned.
        a.shrink_to(20);
        assert_eq!(&a[..], &v[..32]);
        assert!(a.capacity() < 64 && (a.as_ptr() as usize).is_multiple_of(64));
        a.resize(50, R::ZERO);
        v.truncate(32);
        v.resize(50, R::ZERO);
        assert_eq!(&a[..], &v[..]);
        assert_eq!(AlignedVec::<R>::LINE * R::BYTES, 64);
        assert_eq!(std::mem::size_of::<Block<R>>(), BLOCK * R::BYTES);
    }

    #[test]
    fn an_aligned_vec_resizes_as_a_vec_does() {
        resizes_as_a_vec::<f64>();
        resizes_as_a_vec::<f32>();
    }
}
