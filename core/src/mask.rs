//! `LaneMask`: which of the B lanes are live on the current control path; divergence splits and merges.

/// An interned set of active lanes; `MaskId::FULL` is every lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct MaskId(pub(crate) u32);

impl MaskId {
    pub(crate) const FULL: MaskId = MaskId(0);
}

/// Arena of lane sets: each is a sorted list of lane indices (the full set is implicit).
#[derive(Clone, Debug)]
pub(crate) struct LaneMask {
    n_lanes: usize,
    full: Vec<u32>,
    starts: Vec<u32>,
    lanes: Vec<u32>,
}

impl LaneMask {
    pub(crate) fn new(n_lanes: usize) -> Self {
        LaneMask {
            n_lanes,
            full: (0..n_lanes as u32).collect(),
            starts: vec![0, 0],
            lanes: Vec::new(),
        }
    }

    pub(crate) fn clear(&mut self) {
        self.starts.truncate(2);
        self.lanes.clear();
    }

    /// The active lanes of `id`, ascending.
    #[inline]
    pub(crate) fn lanes(&self, id: MaskId) -> &[u32] {
        if id == MaskId::FULL {
            return &self.full;
        }
        let i = id.0 as usize;
        &self.lanes[self.starts[i] as usize..self.starts[i + 1] as usize]
    }

    /// Makes `out` the masks of lanes `lo .. hi` seen as the lanes `0 .. hi - lo` of a block,
    /// under the same ids (a mask keeps its id even when the block holds none or all of its
    /// lanes), reusing `out`'s capacity.
    pub(crate) fn restrict_into(&self, lo: usize, hi: usize, out: &mut LaneMask) {
        out.n_lanes = hi - lo;
        out.full.clear();
        out.full.extend(0..(hi - lo) as u32);
        out.starts.clear();
        out.starts.extend([0, 0]);
        out.lanes.clear();
        for i in 1..self.starts.len() - 1 {
            let ls = self.lanes(MaskId(i as u32));
            let (a, z) = (
                ls.partition_point(|&l| (l as usize) < lo),
                ls.partition_point(|&l| (l as usize) < hi),
            );
            out.lanes.extend(ls[a..z].iter().map(|&l| l - lo as u32));
            out.starts.push(out.lanes.len() as u32);
        }
    }

    /// Bytes held by the lane lists.
    pub(crate) fn bytes(&self) -> u64 {
        (self.full.len() + self.starts.len() + self.lanes.len()) as u64 * 4
    }

    /// Interns a sorted lane list; the full list becomes `FULL`.
    pub(crate) fn intern(&mut self, lanes: &[u32]) -> MaskId {
        if lanes.len() == self.n_lanes {
            return MaskId::FULL;
        }
        self.lanes.extend_from_slice(lanes);
        self.starts.push(self.lanes.len() as u32);
        MaskId(self.starts.len() as u32 - 2)
    }

    /// Lanes of `a` or `b` (both sorted, disjoint or not).
    pub(crate) fn union(&mut self, a: MaskId, b: MaskId, scratch: &mut Vec<u32>) -> MaskId {
        if a == MaskId::FULL || b == MaskId::FULL {
            return MaskId::FULL;
        }
        scratch.clear();
        let (la, lb) = (self.lanes(a), self.lanes(b));
        let (mut i, mut j) = (0, 0);
        while i < la.len() || j < lb.len() {
            let x = if j >= lb.len() || (i < la.len() && la[i] <= lb[j]) {
                let x = la[i];
                i += 1;
                if j < lb.len() && lb[j] == x {
                    j += 1;
                }
                x
            } else {
                let x = lb[j];
                j += 1;
                x
            };
            scratch.push(x);
        }
        let s = std::mem::take(scratch);
        let id = self.intern(&s);
        *scratch = s;
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_and_full_collapse() {
        let mut m = LaneMask::new(4);
        let a = m.intern(&[0, 2]);
        let b = m.intern(&[1, 2]);
        let mut s = Vec::new();
        let u = m.union(a, b, &mut s);
        assert_eq!(m.lanes(u), &[0, 1, 2]);
        let c = m.intern(&[3]);
        assert_eq!(m.union(u, c, &mut s), MaskId::FULL);
        assert_eq!(m.lanes(MaskId::FULL), &[0, 1, 2, 3]);
    }
}
