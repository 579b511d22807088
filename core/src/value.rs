//! `Value`: the scalar structure half of a value (tag plus index); numbers point into `Lanes`.

use crate::heap::NodeId;
use crate::lanes::PayloadId;
use crate::prims::Prim;
use crate::symbol::Symbol;

/// One runtime value. Copy-sized; the same for every lane (numbers carry per-lane payloads).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Value {
    /// The empty list.
    Nil,
    /// A per-lane boolean held as a 0/1 payload.
    Bool(PayloadId),
    /// A per-lane number.
    Num(PayloadId),
    /// A per-lane vector of `len` elements.
    Vector(PayloadId, u32),
    /// A per-lane matrix.
    Matrix(PayloadId, u16, u16),
    /// A symbol.
    Sym(Symbol),
    /// A pair built at run time (index into the evaluator's pair arena).
    Pair(u32),
    /// Quoted program data on the heap (a pair; atoms are converted when read).
    Datum(NodeId),
    /// A closure (index into the closure arena).
    Closure(u32),
    /// A primitive procedure.
    Prim(Prim),
    /// A binding declared but not yet assigned.
    Unassigned,
}

impl Value {
    /// A short name of the value's type, for error messages.
    pub(crate) fn type_name(self) -> &'static str {
        match self {
            Value::Nil => "empty list",
            Value::Bool(_) => "boolean",
            Value::Num(_) => "number",
            Value::Vector(..) => "vector",
            Value::Matrix(..) => "matrix",
            Value::Sym(_) => "symbol",
            Value::Pair(_) | Value::Datum(_) => "pair",
            Value::Closure(_) | Value::Prim(_) => "procedure",
            Value::Unassigned => "unassigned variable",
        }
    }

    /// The numeric payload, for numbers, booleans, vectors and matrices.
    pub(crate) fn payload(self) -> Option<PayloadId> {
        match self {
            Value::Num(p) | Value::Bool(p) | Value::Vector(p, _) | Value::Matrix(p, _, _) => {
                Some(p)
            }
            _ => None,
        }
    }

    /// True for values that reference no runtime structure (safe to keep across a region release).
    pub(crate) fn is_plain(self) -> bool {
        !matches!(self, Value::Pair(_) | Value::Closure(_))
    }
}
