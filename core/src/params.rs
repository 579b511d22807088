//! First-class parameter declarations: `(params (name kind init [lo hi]) …)` with kinds free, positive,
//! unit (interval) and bounded.

use crate::error::{CoreError, ErrorKind, Result};
use crate::heap::{Heap, Node, NodeId, Program};
use crate::symbol::Symbol;

/// The constraint a parameter lives under; calibrators map it to a transform.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParamKind {
    /// Any real number.
    Free,
    /// Strictly positive.
    Positive,
    /// In the open unit interval (0, 1).
    Unit,
    /// In the open interval (lo, hi).
    Bounded {
        /// Lower bound.
        lo: f64,
        /// Upper bound.
        hi: f64,
    },
}

impl ParamKind {
    /// Whether `v` lies strictly inside this kind's domain (a valid starting value).
    pub fn admits(self, v: f64) -> bool {
        match self {
            ParamKind::Free => v.is_finite(),
            ParamKind::Positive => v.is_finite() && v > 0.0,
            ParamKind::Unit => v > 0.0 && v < 1.0,
            ParamKind::Bounded { lo, hi } => v > lo && v < hi,
        }
    }
}

/// One declared parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamDecl {
    /// Its name.
    pub name: String,
    /// Its constraint.
    pub kind: ParamKind,
    /// Its initial value (used when the caller binds nothing).
    pub init: f64,
    /// The declaration's heap node (for spans).
    pub node: NodeId,
    pub(crate) symbol: Symbol,
}

fn bad(node: NodeId, msg: &str) -> CoreError {
    CoreError::new(ErrorKind::Syntax, msg).at(node)
}

/// Parses one `(name kind init [lo hi])` entry.
pub(crate) fn parse_entry(heap: &Heap, entry: NodeId) -> Result<ParamDecl> {
    const SHAPE: &str = "a params entry is (name kind init), kind one of free, positive, unit, or (name bounded init lo hi)";
    let parts = heap.list_items(entry).ok_or_else(|| bad(entry, SHAPE))?;
    let sym = |i: usize| match parts.get(i).map(|&n| heap.node(n)) {
        Some(Node::Sym(s)) => Some(s),
        _ => None,
    };
    let num = |i: usize| match parts.get(i).map(|&n| heap.node(n)) {
        Some(Node::Num(x)) => Some(x),
        _ => None,
    };
    let symbol = sym(0).ok_or_else(|| bad(entry, SHAPE))?;
    let kind_sym = sym(1).ok_or_else(|| bad(entry, SHAPE))?;
    let init = num(2).ok_or_else(|| bad(entry, SHAPE))?;
    let kind = match heap.symbol_name(kind_sym) {
        "free" if parts.len() == 3 => ParamKind::Free,
        "positive" if parts.len() == 3 => ParamKind::Positive,
        "unit" if parts.len() == 3 => ParamKind::Unit,
        "bounded" if parts.len() == 5 => {
            let (lo, hi) = (
                num(3).ok_or_else(|| bad(entry, SHAPE))?,
                num(4).ok_or_else(|| bad(entry, SHAPE))?,
            );
            if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
                return Err(bad(entry, "bounded parameter needs lo < hi"));
            }
            ParamKind::Bounded { lo, hi }
        }
        _ => return Err(bad(entry, SHAPE)),
    };
    let ok = match kind {
        ParamKind::Free => init.is_finite(),
        ParamKind::Positive => init > 0.0 && init.is_finite(),
        ParamKind::Unit => init > 0.0 && init < 1.0,
        ParamKind::Bounded { lo, hi } => init > lo && init < hi,
    };
    if !ok {
        return Err(bad(
            entry,
            "the initial value lies outside the parameter's domain",
        ));
    }
    Ok(ParamDecl {
        name: heap.symbol_name(symbol).to_string(),
        kind,
        init,
        node: entry,
        symbol,
    })
}

/// Every parameter declared by top-level `params` forms of `program`, in order.
pub fn declarations(heap: &Heap, program: &Program) -> Result<Vec<ParamDecl>> {
    program.check_heap(heap)?;
    let mut out = Vec::new();
    for &form in program.forms() {
        let Node::Pair(h, _) = heap.node(form) else {
            continue;
        };
        let Node::Sym(s) = heap.node(h) else { continue };
        if heap.symbol_name(s) != "params" {
            continue;
        }
        let items = heap
            .list_items(form)
            .ok_or_else(|| bad(form, "improper params form"))?;
        for &entry in &items[1..] {
            out.push(parse_entry(heap, entry)?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::ParamKind;

    #[test]
    fn admits_only_the_open_domain() {
        assert!(ParamKind::Free.admits(-3.0));
        assert!(!ParamKind::Free.admits(f64::NAN));
        assert!(ParamKind::Positive.admits(1e-9) && !ParamKind::Positive.admits(0.0));
        assert!(ParamKind::Unit.admits(0.5) && !ParamKind::Unit.admits(1.0));
        let b = ParamKind::Bounded { lo: -1.0, hi: 2.0 };
        assert!(b.admits(1.9) && !b.admits(2.0) && !b.admits(-1.0) && !b.admits(f64::NAN));
    }
}
