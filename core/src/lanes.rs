//! `Lanes`: the structure-of-arrays arena of numeric payloads, each uniform (one value) or B lanes wide.
//!
//! A payload holds `n` elements (1 for a scalar, `len` for a vector, `rows*cols` for a matrix). A
//! uniform payload stores each element once; a varying payload stores B lanes per element,
//! element-major (`data[off + e*B + lane]`), so lane loops are contiguous.

use crate::aligned::AlignedVec;
use crate::real::Real;

/// Index of one payload in a [`Lanes`] arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct PayloadId(pub u32);

/// Where a payload lives and how it is shaped.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Meta {
    /// First float in `data`.
    pub(crate) off: u32,
    /// Number of elements.
    pub(crate) n: u32,
    /// B lanes per element (true) or one value for all lanes (false).
    pub(crate) varying: bool,
    /// Depends on a differentiable input (gets an adjoint in the reverse sweep).
    pub(crate) grad: bool,
}

/// A saved arena length, to release everything allocated after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LanesMark {
    data: usize,
    meta: usize,
}

impl LanesMark {
    /// Number of payloads alive at the mark.
    pub(crate) fn meta_len(self) -> usize {
        self.meta
    }
}

/// Where a payload of `n_lanes` lanes per element goes in a line-aligned arena whose free space
/// begins at `top`: a varying payload of a line's worth of lanes or more starts on the next
/// 64-byte line (its lane loops then load whole lines), anything else at `top`.
#[inline]
pub(crate) fn line_start<R: Real>(top: usize, varying: bool, n_lanes: usize) -> usize {
    let line = AlignedVec::<R>::LINE;
    if varying && n_lanes >= line {
        top.next_multiple_of(line)
    } else {
        top
    }
}

/// The payload arena of one evaluator, in its lane precision `R`.
#[derive(Clone, Debug)]
pub(crate) struct Lanes<R: Real = f64> {
    n_lanes: usize,
    /// Floats `[0, top)` are in use; the rest is capacity kept from earlier runs (stale values,
    /// never read: every kernel writes the lanes it later reads).
    pub(crate) data: AlignedVec<R>,
    top: usize,
    pub(crate) meta: Vec<Meta>,
}

impl<R: Real> Lanes<R> {
    /// An empty arena for `n_lanes` lanes.
    pub(crate) fn new(n_lanes: usize) -> Self {
        Lanes {
            n_lanes,
            data: AlignedVec::new(),
            top: 0,
            meta: Vec::new(),
        }
    }

    /// The lane count B.
    #[inline]
    pub(crate) fn n_lanes(&self) -> usize {
        self.n_lanes
    }

    /// Number of payloads alive.
    pub(crate) fn len(&self) -> usize {
        self.meta.len()
    }

    /// Number of floats in use (primal values).
    pub(crate) fn n_floats(&self) -> usize {
        self.top
    }

    /// Drops every payload (keeps capacity).
    pub(crate) fn clear(&mut self) {
        self.top = 0;
        self.meta.clear();
    }

    pub(crate) fn mark(&self) -> LanesMark {
        LanesMark {
            data: self.top,
            meta: self.meta.len(),
        }
    }

    pub(crate) fn release(&mut self, mark: LanesMark) {
        self.top = mark.data;
        self.meta.truncate(mark.meta);
    }

    /// Allocates a payload of `n` elements. Its values are unspecified (capacity is reused
    /// without clearing): the caller writes every lane it, or anyone after it, will read.
    #[inline]
    pub(crate) fn alloc(&mut self, n: usize, varying: bool, grad: bool) -> PayloadId {
        let off = line_start::<R>(self.top, varying, self.n_lanes);
        let w = if varying { self.n_lanes } else { 1 };
        self.top = off + n * w;
        if self.top > self.data.len() {
            self.data.resize(self.top, R::ZERO);
        }
        let id = PayloadId(self.meta.len() as u32);
        self.meta.push(Meta {
            off: off as u32,
            n: n as u32,
            varying,
            grad,
        });
        id
    }

    /// A uniform scalar payload.
    #[inline]
    pub(crate) fn scalar(&mut self, x: f64) -> PayloadId {
        let id = self.alloc(1, false, false);
        let off = self.meta[id.0 as usize].off as usize;
        self.data[off] = R::of(x);
        id
    }

    #[inline]
    pub(crate) fn meta(&self, id: PayloadId) -> Meta {
        self.meta[id.0 as usize]
    }

    /// Element count of a payload.
    #[inline]
    pub(crate) fn n_elems(&self, id: PayloadId) -> usize {
        self.meta[id.0 as usize].n as usize
    }

    /// Whether a payload is stored per lane.
    #[inline]
    pub(crate) fn is_varying(&self, id: PayloadId) -> bool {
        self.meta[id.0 as usize].varying
    }

    /// Index of element `e`, lane `lane` in `data`.
    #[inline]
    pub(crate) fn index(&self, m: Meta, e: usize, lane: usize) -> usize {
        if m.varying {
            m.off as usize + e * self.n_lanes + lane
        } else {
            m.off as usize + e
        }
    }

    /// Value of element `e` on `lane`.
    #[inline]
    pub(crate) fn get(&self, id: PayloadId, e: usize, lane: usize) -> f64 {
        let m = self.meta(id);
        self.data[self.index(m, e, lane)].f64()
    }

    /// Element `e` of `id` on `lane`, in the lane precision.
    #[inline]
    pub(crate) fn at(&self, id: PayloadId, e: usize, lane: usize) -> R {
        let m = self.meta(id);
        self.data[self.index(m, e, lane)]
    }

    /// Sets element `e` of `id` on `lane`, in the lane precision.
    #[inline]
    pub(crate) fn put(&mut self, id: PayloadId, e: usize, lane: usize, x: R) {
        let m = self.meta(id);
        let i = self.index(m, e, lane);
        self.data[i] = x;
    }

    /// Makes this arena a compact copy of lanes `lo .. hi` of `whole`: the same payloads (ids,
    /// element counts, flags) with `hi - lo` lanes each, reusing this arena's capacity.
    pub(crate) fn restrict_from(&mut self, whole: &Lanes<R>, lo: usize, hi: usize) {
        self.n_lanes = hi - lo;
        self.clear();
        for m in &whole.meta {
            let id = self.alloc(m.n as usize, m.varying, m.grad);
            self.copy_in(whole, id, lo);
        }
    }

    /// Payload `p` of `whole` into this block arena (which holds lanes `lo ..` of `whole`).
    pub(crate) fn copy_in(&mut self, whole: &Lanes<R>, p: PayloadId, lo: usize) {
        let (mb, mw) = (self.meta(p), whole.meta(p));
        let (ob, ow, n) = (mb.off as usize, mw.off as usize, mb.n as usize);
        if !mb.varying {
            self.data[ob..ob + n].copy_from_slice(&whole.data[ow..ow + n]);
            return;
        }
        let (w, b) = (self.n_lanes, whole.n_lanes);
        for e in 0..n {
            let all = ow + e * b + lo..ow + e * b + lo + w;
            self.data[ob + e * w..ob + (e + 1) * w].copy_from_slice(&whole.data[all]);
        }
    }

    /// The lanes of payload `p` in the block arena `blk` (lanes `lo ..` of this one) back into
    /// this arena; a uniform payload is left as it is (every block computes the same value).
    pub(crate) fn copy_back(&mut self, blk: &Lanes<R>, p: PayloadId, lo: usize) {
        let (mb, mw) = (blk.meta(p), self.meta(p));
        if !mb.varying {
            return;
        }
        let (ob, ow, n) = (mb.off as usize, mw.off as usize, mb.n as usize);
        let (w, b) = (blk.n_lanes, self.n_lanes);
        for e in 0..n {
            let all = ow + e * b + lo..ow + e * b + lo + w;
            self.data[all].copy_from_slice(&blk.data[ob + e * w..ob + (e + 1) * w]);
        }
    }

    /// Sets element `e` on `lane`.
    #[inline]
    pub(crate) fn set(&mut self, id: PayloadId, e: usize, lane: usize, x: f64) {
        let m = self.meta(id);
        let i = self.index(m, e, lane);
        self.data[i] = R::of(x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every varying payload of a line's worth of lanes or more starts on a 64-byte line, however
    /// the uniform payloads between them fall; smaller ones and uniform ones are packed.
    fn payloads_start_on_lines<R: Real>() {
        let line = AlignedVec::<R>::LINE;
        for n_lanes in [1, 3, line - 1, line, line + 1, 37, 256] {
            let mut lanes = Lanes::<R>::new(n_lanes);
            let mut ids = Vec::new();
            for (k, n) in [1, 3, 4, 1, 2, 9, 1].into_iter().enumerate() {
                ids.push((lanes.scalar(k as f64), false));
                ids.push((lanes.alloc(n, true, k % 2 == 0), true));
            }
            let mut end = 0;
            for (id, varying) in ids {
                let m = lanes.meta(id);
                let addr = lanes.data.as_ptr() as usize + m.off as usize * R::BYTES;
                if varying && n_lanes >= line {
                    assert_eq!(addr % 64, 0, "B = {n_lanes}: payload {id:?} at {}", m.off);
                } else {
                    assert_eq!(
                        m.off as usize, end,
                        "B = {n_lanes}: payload {id:?} is packed"
                    );
                }
                end = m.off as usize + m.n as usize * if varying { n_lanes } else { 1 };
            }
            assert_eq!(lanes.n_floats(), end);
        }
    }

    #[test]
    fn wide_payloads_start_on_cache_lines() {
        payloads_start_on_lines::<f64>();
        payloads_start_on_lines::<f32>();
    }
}
