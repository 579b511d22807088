//! The closed set of primitives: one row per name (`PRIMITIVES`: opcode, arity, family,
//! differentiable), and each scalar op's forward beside its derivative.
//!
//! Adding a `Unary` or `Binary` variant does not compile until both its forward (`apply`) and its
//! derivative (`deriv` / `partials`) arms exist; tensor ops pair forward and VJP in `linalg.rs`.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

use crate::api::Dialect;
use crate::elementary::Elementary;
use crate::real::Real;
use crate::vocab::Group;

/// Elementwise one-argument numeric ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Unary {
    Neg,
    Recip,
    Sin,
    Cos,
    Tan,
    Exp,
    Log,
    /// `log` clamping its argument to at least 1e-8 (reference dialect).
    LogClamped,
    Sqrt,
    /// `sqrt` clamping its argument to at least 1e-8 (reference dialect).
    SqrtClamped,
    Abs,
    Tanh,
    Sinh,
    Cosh,
    Asin,
    Acos,
    Atan,
    Square,
    Sigmoid,
    Floor,
    Ceiling,
    Round,
    Truncate,
}

const CLAMP: f64 = 1e-8;

impl Unary {
    /// Forward value.
    #[inline]
    pub(crate) fn apply<R: Real>(self, x: R) -> R {
        let one = R::ONE;
        match self {
            Unary::Neg => -x,
            Unary::Recip => one / x,
            Unary::Sin => x.sin(),
            Unary::Cos => x.cos(),
            Unary::Tan => x.tan(),
            Unary::Exp => x.exp(),
            Unary::Log => x.ln(),
            Unary::LogClamped => x.max(R::of(CLAMP)).ln(),
            Unary::Sqrt => x.sqrt(),
            Unary::SqrtClamped => x.max(R::of(CLAMP)).sqrt(),
            Unary::Abs => x.abs(),
            Unary::Tanh => x.tanh(),
            Unary::Sinh => x.sinh(),
            Unary::Cosh => x.cosh(),
            Unary::Asin => x.asin(),
            Unary::Acos => x.acos(),
            Unary::Atan => x.atan(),
            Unary::Square => x * x,
            Unary::Sigmoid => one / (one + (-x).exp()),
            Unary::Floor => x.floor(),
            Unary::Ceiling => x.ceil(),
            Unary::Round => x.round_ties_even(),
            Unary::Truncate => x.trunc(),
        }
    }

    /// dy/dx at input `x` with output `y`.
    #[inline]
    pub(crate) fn deriv<R: Real>(self, x: R, y: R) -> R {
        let (zero, one, half) = (R::ZERO, R::ONE, R::of(0.5));
        match self {
            Unary::Neg => -one,
            Unary::Recip => -y * y,
            Unary::Sin => x.cos(),
            Unary::Cos => -x.sin(),
            Unary::Tan => one + y * y,
            Unary::Exp => y,
            Unary::Log => one / x,
            Unary::LogClamped => {
                if x > R::of(CLAMP) {
                    one / x
                } else {
                    zero
                }
            }
            Unary::Sqrt => half / y,
            Unary::SqrtClamped => {
                if x > R::of(CLAMP) {
                    half / y
                } else {
                    zero
                }
            }
            Unary::Abs => {
                if x > zero {
                    one
                } else if x < zero {
                    -one
                } else {
                    zero
                }
            }
            Unary::Tanh => one - y * y,
            Unary::Sinh => x.cosh(),
            Unary::Cosh => x.sinh(),
            Unary::Asin => one / (one - x * x).sqrt(),
            Unary::Acos => -one / (one - x * x).sqrt(),
            Unary::Atan => one / (one + x * x),
            Unary::Square => R::of(2.0) * x,
            Unary::Sigmoid => y * (one - y),
            Unary::Floor | Unary::Ceiling | Unary::Round | Unary::Truncate => zero,
        }
    }

    /// The elementary function this op is, when it has a vectorised lane kernel
    /// ([`Real::elementary_lanes`]).
    #[inline]
    pub(crate) const fn elementary(self) -> Option<Elementary> {
        match self {
            Unary::Exp => Some(Elementary::Exp),
            Unary::Log => Some(Elementary::Ln),
            Unary::Sin => Some(Elementary::Sin),
            Unary::Cos => Some(Elementary::Cos),
            _ => None,
        }
    }

    /// `dst[i] = self.apply(src[i])` through the elementary lane kernels when the op is one of
    /// them, or a clamped logarithm where those are vectorised (the clamp applied first, a block
    /// at a time), with the bits of `apply`; `false` (nothing written) for any other op.
    #[inline]
    pub(crate) fn apply_elementary_lanes<R: Real>(self, src: &[R], dst: &mut [R]) -> bool {
        if let Some(f) = self.elementary() {
            R::elementary_lanes(f, src, dst);
            return true;
        }
        if self != Unary::LogClamped || !R::VECTOR_ELEMENTARY {
            return false;
        }
        const BLOCK: usize = 64;
        let mut clamped = [R::ZERO; BLOCK];
        for (xs, out) in src.chunks(BLOCK).zip(dst.chunks_mut(BLOCK)) {
            for (c, &x) in clamped.iter_mut().zip(xs) {
                *c = x.max(R::of(CLAMP));
            }
            R::elementary_lanes(Elementary::Ln, &clamped[..xs.len()], out);
        }
        true
    }

    /// Whether the op has a nonzero derivative anywhere (piecewise-constant ops record nothing).
    pub(crate) const fn differentiable(self) -> bool {
        !matches!(
            self,
            Unary::Floor | Unary::Ceiling | Unary::Round | Unary::Truncate
        )
    }
}

/// Elementwise two-argument numeric ops (with scalar broadcast).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Min,
    Max,
    Atan2,
    /// Floored remainder: sign of the divisor (R7RS `modulo`).
    FloorMod,
    /// Truncated remainder: sign of the dividend (R7RS `remainder`, C `fmod`).
    TruncMod,
    /// Truncated integer quotient (R7RS `quotient`), zero derivative.
    Quotient,
}

impl Binary {
    /// Every binary op, for tests that go through them all.
    #[cfg(test)]
    pub(crate) const ALL: [Binary; 11] = [
        Binary::Add,
        Binary::Sub,
        Binary::Mul,
        Binary::Div,
        Binary::Pow,
        Binary::Min,
        Binary::Max,
        Binary::Atan2,
        Binary::FloorMod,
        Binary::TruncMod,
        Binary::Quotient,
    ];

    /// Forward value.
    #[inline]
    pub(crate) fn apply<R: Real>(self, x: R, y: R) -> R {
        match self {
            Binary::Add => x + y,
            Binary::Sub => x - y,
            Binary::Mul => x * y,
            Binary::Div => x / y,
            Binary::Pow => x.powf(y),
            Binary::Min => {
                if y < x {
                    y
                } else {
                    x
                }
            }
            Binary::Max => {
                if y > x {
                    y
                } else {
                    x
                }
            }
            Binary::Atan2 => x.atan2(y),
            Binary::FloorMod => x - y * (x / y).floor(),
            Binary::TruncMod => x % y,
            Binary::Quotient => (x / y).trunc(),
        }
    }

    /// (dz/dx, dz/dy) at inputs `x`, `y` with output `z`.
    #[inline]
    pub(crate) fn partials<R: Real>(self, x: R, y: R, z: R) -> (R, R) {
        let (zero, one, half) = (R::ZERO, R::ONE, R::of(0.5));
        match self {
            Binary::Add => (one, one),
            Binary::Sub => (one, -one),
            Binary::Mul => (y, x),
            Binary::Div => (one / y, -z / y),
            Binary::Pow => {
                let dx = if y == zero { zero } else { y * x.powf(y - one) };
                let dy = if x > zero {
                    z * x.ln()
                } else if x == zero {
                    zero
                } else {
                    R::NAN
                };
                (dx, dy)
            }
            Binary::Min => {
                if x < y {
                    (one, zero)
                } else if y < x {
                    (zero, one)
                } else {
                    (half, half)
                }
            }
            Binary::Max => {
                if x > y {
                    (one, zero)
                } else if y > x {
                    (zero, one)
                } else {
                    (half, half)
                }
            }
            Binary::Atan2 => {
                let r = x * x + y * y;
                (y / r, -x / r)
            }
            Binary::FloorMod => (one, -(x / y).floor()),
            Binary::TruncMod => (one, -(x / y).trunc()),
            Binary::Quotient => (zero, zero),
        }
    }

    pub(crate) const fn differentiable(self) -> bool {
        !matches!(self, Binary::Quotient)
    }
}

/// Expands `$body` once per `Binary` variant with `$name` bound to that variant as a constant, so
/// the op's `match` folds away inside lane loops and they vectorize.
macro_rules! each_binary {
    ($op:expr, $name:ident => $body:expr) => {
        match $op {
            Binary::Add => {
                let $name = Binary::Add;
                $body
            }
            Binary::Sub => {
                let $name = Binary::Sub;
                $body
            }
            Binary::Mul => {
                let $name = Binary::Mul;
                $body
            }
            Binary::Div => {
                let $name = Binary::Div;
                $body
            }
            Binary::Pow => {
                let $name = Binary::Pow;
                $body
            }
            Binary::Min => {
                let $name = Binary::Min;
                $body
            }
            Binary::Max => {
                let $name = Binary::Max;
                $body
            }
            Binary::Atan2 => {
                let $name = Binary::Atan2;
                $body
            }
            Binary::FloorMod => {
                let $name = Binary::FloorMod;
                $body
            }
            Binary::TruncMod => {
                let $name = Binary::TruncMod;
                $body
            }
            Binary::Quotient => {
                let $name = Binary::Quotient;
                $body
            }
        }
    };
}

/// The `Unary` counterpart of [`each_binary`].
macro_rules! each_unary {
    ($op:expr, $name:ident => $body:expr) => {
        match $op {
            Unary::Neg => {
                let $name = Unary::Neg;
                $body
            }
            Unary::Recip => {
                let $name = Unary::Recip;
                $body
            }
            Unary::Sin => {
                let $name = Unary::Sin;
                $body
            }
            Unary::Cos => {
                let $name = Unary::Cos;
                $body
            }
            Unary::Tan => {
                let $name = Unary::Tan;
                $body
            }
            Unary::Exp => {
                let $name = Unary::Exp;
                $body
            }
            Unary::Log => {
                let $name = Unary::Log;
                $body
            }
            Unary::LogClamped => {
                let $name = Unary::LogClamped;
                $body
            }
            Unary::Sqrt => {
                let $name = Unary::Sqrt;
                $body
            }
            Unary::SqrtClamped => {
                let $name = Unary::SqrtClamped;
                $body
            }
            Unary::Abs => {
                let $name = Unary::Abs;
                $body
            }
            Unary::Tanh => {
                let $name = Unary::Tanh;
                $body
            }
            Unary::Sinh => {
                let $name = Unary::Sinh;
                $body
            }
            Unary::Cosh => {
                let $name = Unary::Cosh;
                $body
            }
            Unary::Asin => {
                let $name = Unary::Asin;
                $body
            }
            Unary::Acos => {
                let $name = Unary::Acos;
                $body
            }
            Unary::Atan => {
                let $name = Unary::Atan;
                $body
            }
            Unary::Square => {
                let $name = Unary::Square;
                $body
            }
            Unary::Sigmoid => {
                let $name = Unary::Sigmoid;
                $body
            }
            Unary::Floor => {
                let $name = Unary::Floor;
                $body
            }
            Unary::Ceiling => {
                let $name = Unary::Ceiling;
                $body
            }
            Unary::Round => {
                let $name = Unary::Round;
                $body
            }
            Unary::Truncate => {
                let $name = Unary::Truncate;
                $body
            }
        }
    };
}
pub(crate) use {each_binary, each_unary};

/// Numeric comparisons (record nothing on the tape).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Compare {
    Eq,
    Lt,
    Gt,
    Le,
    Ge,
}

impl Compare {
    #[inline]
    pub(crate) fn apply<R: Real>(self, x: R, y: R) -> bool {
        match self {
            Compare::Eq => x == y,
            Compare::Lt => x < y,
            Compare::Gt => x > y,
            Compare::Le => x <= y,
            Compare::Ge => x >= y,
        }
    }
}

/// Every primitive procedure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Prim {
    /// Variadic `+`.
    Add,
    /// `-`: negation or left fold.
    Sub,
    /// Variadic `*`.
    Mul,
    /// `/`: reciprocal or left fold.
    Div,
    /// Variadic `min`.
    Min,
    /// Variadic `max`.
    Max,
    Unary(Unary),
    Binary(Binary),
    Compare(Compare),
    Not,
    ZeroP,
    PositiveP,
    NegativeP,
    NumberP,
    BooleanP,
    SymbolP,
    NullP,
    PairP,
    ProcedureP,
    VectorP,
    EqP,
    EqualP,
    Cons,
    Car,
    Cdr,
    Cadr,
    Cddr,
    Caar,
    Cdar,
    Caddr,
    List,
    Length,
    Append,
    Reverse,
    ListRef,
    Apply,
    Map,
    Filter,
    FoldLeft,
    FoldRight,
    Eval,
    Vec,
    Mat,
    Ref,
    Dot,
    Cross,
    Norm,
    Normalize,
    VSum,
    VLen,
    Scale,
    MatVec,
    MatMul,
    Transpose,
    Trace,
    Det,
    LogDet,
    Inv,
    Outer,
    Eye,
    Zeros,
    Ones,
}

/// Argument count bounds: `(min, max)`, `max = u32::MAX` for variadic.
const ANY: u32 = u32::MAX;

/// One primitive of the vocabulary: its name, the opcode it decodes to (and the reference
/// dialect's variant), how many arguments it takes, its family and whether gradients flow through
/// it. The opcode's forward sits beside its derivative (`Unary::apply`/`deriv`,
/// `Binary::apply`/`partials`, tensor ops in `linalg.rs`), in exhaustive matches, so an opcode
/// without a derivative does not compile.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PrimRow {
    pub(crate) name: &'static str,
    pub(crate) prim: Prim,
    /// What the name denotes in the reference dialect (`prim` unless the dialects differ).
    pub(crate) reference: Prim,
    pub(crate) arity: (u32, u32),
    pub(crate) group: Group,
    pub(crate) differentiable: bool,
}

/// Gradients flow through (`D`) or not (`N`).
const D: bool = true;
const N: bool = false;

const fn p(name: &'static str, prim: Prim, arity: (u32, u32), group: Group, d: bool) -> PrimRow {
    PrimRow {
        name,
        prim,
        reference: prim,
        arity,
        group,
        differentiable: d,
    }
}

/// A row whose name denotes `reference` in the reference dialect.
const fn pd(name: &'static str, prim: Prim, reference: Prim, group: Group, d: bool) -> PrimRow {
    let arity = match prim {
        Prim::Binary(_) => (2, 2),
        _ => (1, 1),
    };
    PrimRow {
        name,
        prim,
        reference,
        arity,
        group,
        differentiable: d,
    }
}

const fn u(name: &'static str, op: Unary) -> PrimRow {
    p(
        name,
        Prim::Unary(op),
        (1, 1),
        Group::Elementwise,
        op.differentiable(),
    )
}

const fn b(name: &'static str, op: Binary) -> PrimRow {
    p(
        name,
        Prim::Binary(op),
        (2, 2),
        Group::Arithmetic,
        op.differentiable(),
    )
}

use Group::{Arithmetic, Comparison, HigherOrder, List, Predicate, Quotation, Tensor};

/// Every primitive, one row per name (aliases are rows of their own). Adding a primitive is one
/// row here plus its opcode's forward and derivative.
pub(crate) const PRIMITIVES: &[PrimRow] = &[
    p("+", Prim::Add, (0, ANY), Arithmetic, D),
    p("-", Prim::Sub, (1, ANY), Arithmetic, D),
    p("*", Prim::Mul, (0, ANY), Arithmetic, D),
    p("/", Prim::Div, (1, ANY), Arithmetic, D),
    p("min", Prim::Min, (1, ANY), Arithmetic, D),
    p("max", Prim::Max, (1, ANY), Arithmetic, D),
    u("sin", Unary::Sin),
    u("cos", Unary::Cos),
    u("tan", Unary::Tan),
    u("exp", Unary::Exp),
    pd(
        "log",
        Prim::Unary(Unary::Log),
        Prim::Unary(Unary::LogClamped),
        Group::Elementwise,
        D,
    ),
    pd(
        "sqrt",
        Prim::Unary(Unary::Sqrt),
        Prim::Unary(Unary::SqrtClamped),
        Group::Elementwise,
        D,
    ),
    u("abs", Unary::Abs),
    u("tanh", Unary::Tanh),
    u("sinh", Unary::Sinh),
    u("cosh", Unary::Cosh),
    u("asin", Unary::Asin),
    u("acos", Unary::Acos),
    p(
        "atan",
        Prim::Unary(Unary::Atan),
        (1, 2),
        Group::Elementwise,
        D,
    ),
    u("square", Unary::Square),
    u("sigmoid", Unary::Sigmoid),
    u("floor", Unary::Floor),
    u("ceiling", Unary::Ceiling),
    u("round", Unary::Round),
    u("truncate", Unary::Truncate),
    b("pow", Binary::Pow),
    b("expt", Binary::Pow),
    b("atan2", Binary::Atan2),
    pd(
        "modulo",
        Prim::Binary(Binary::FloorMod),
        Prim::Binary(Binary::TruncMod),
        Arithmetic,
        D,
    ),
    pd(
        "remainder",
        Prim::Binary(Binary::TruncMod),
        Prim::Binary(Binary::FloorMod),
        Arithmetic,
        D,
    ),
    b("quotient", Binary::Quotient),
    p("=", Prim::Compare(Compare::Eq), (1, ANY), Comparison, N),
    p("<", Prim::Compare(Compare::Lt), (1, ANY), Comparison, N),
    p(">", Prim::Compare(Compare::Gt), (1, ANY), Comparison, N),
    p("<=", Prim::Compare(Compare::Le), (1, ANY), Comparison, N),
    p(">=", Prim::Compare(Compare::Ge), (1, ANY), Comparison, N),
    p("not", Prim::Not, (1, 1), Predicate, N),
    p("zero?", Prim::ZeroP, (1, 1), Predicate, N),
    p("positive?", Prim::PositiveP, (1, 1), Predicate, N),
    p("negative?", Prim::NegativeP, (1, 1), Predicate, N),
    p("number?", Prim::NumberP, (1, 1), Predicate, N),
    p("boolean?", Prim::BooleanP, (1, 1), Predicate, N),
    p("symbol?", Prim::SymbolP, (1, 1), Predicate, N),
    p("null?", Prim::NullP, (1, 1), Predicate, N),
    p("pair?", Prim::PairP, (1, 1), Predicate, N),
    p("procedure?", Prim::ProcedureP, (1, 1), Predicate, N),
    p("vector?", Prim::VectorP, (1, 1), Predicate, N),
    p("eq?", Prim::EqP, (2, 2), Predicate, N),
    p("eqv?", Prim::EqP, (2, 2), Predicate, N),
    p("equal?", Prim::EqualP, (2, 2), Predicate, N),
    p("cons", Prim::Cons, (2, 2), List, D),
    p("car", Prim::Car, (1, 1), List, D),
    p("cdr", Prim::Cdr, (1, 1), List, D),
    p("cadr", Prim::Cadr, (1, 1), List, D),
    p("cddr", Prim::Cddr, (1, 1), List, D),
    p("caar", Prim::Caar, (1, 1), List, D),
    p("cdar", Prim::Cdar, (1, 1), List, D),
    p("caddr", Prim::Caddr, (1, 1), List, D),
    p("list", Prim::List, (0, ANY), List, D),
    p("length", Prim::Length, (1, 1), List, N),
    p("append", Prim::Append, (0, ANY), List, D),
    p("reverse", Prim::Reverse, (1, 1), List, D),
    p("list-ref", Prim::ListRef, (2, 2), List, D),
    p("apply", Prim::Apply, (2, ANY), HigherOrder, D),
    p("map", Prim::Map, (2, ANY), HigherOrder, D),
    p("filter", Prim::Filter, (2, 2), HigherOrder, D),
    p("fold-left", Prim::FoldLeft, (3, 3), HigherOrder, D),
    p("fold", Prim::FoldLeft, (3, 3), HigherOrder, D),
    p("fold-right", Prim::FoldRight, (3, 3), HigherOrder, D),
    p("eval", Prim::Eval, (1, 1), Quotation, D),
    p("vec", Prim::Vec, (0, ANY), Tensor, D),
    p("vector", Prim::Vec, (0, ANY), Tensor, D),
    p("mat", Prim::Mat, (0, ANY), Tensor, D),
    p("ref", Prim::Ref, (2, 3), Tensor, D),
    p("vector-ref", Prim::Ref, (2, 3), Tensor, D),
    p("dot", Prim::Dot, (2, 2), Tensor, D),
    p("cross", Prim::Cross, (2, 2), Tensor, D),
    p("norm", Prim::Norm, (1, 1), Tensor, D),
    p("normalize", Prim::Normalize, (1, 1), Tensor, D),
    p("vsum", Prim::VSum, (1, 1), Tensor, D),
    p("vlen", Prim::VLen, (1, 1), Tensor, N),
    p("vector-length", Prim::VLen, (1, 1), Tensor, N),
    p("scale", Prim::Scale, (2, 2), Tensor, D),
    p("matvec", Prim::MatVec, (2, 2), Tensor, D),
    p("matmul", Prim::MatMul, (2, 2), Tensor, D),
    p("transpose", Prim::Transpose, (1, 1), Tensor, D),
    p("trace", Prim::Trace, (1, 1), Tensor, D),
    p("det", Prim::Det, (1, 1), Tensor, D),
    p("logdet", Prim::LogDet, (1, 1), Tensor, D),
    p("inv", Prim::Inv, (1, 1), Tensor, D),
    p("outer", Prim::Outer, (2, 2), Tensor, D),
    p("eye", Prim::Eye, (1, 1), Tensor, N),
    p("zeros", Prim::Zeros, (1, 1), Tensor, N),
    p("ones", Prim::Ones, (1, 1), Tensor, N),
];

/// Row index by name, and the first row of each opcode (its name in messages, its arity).
struct Index {
    by_name: HashMap<&'static str, usize, crate::symbol::FxBuild>,
    /// Read when a primitive value is applied (its arity), so hashed with a few multiplies.
    by_prim: HashMap<Prim, usize, BuildHasherDefault<OpcodeHasher>>,
}

/// A multiply-rotate hasher for opcodes (a `Prim` hashes as one or two small discriminants).
#[derive(Default)]
struct OpcodeHasher(u64);

impl Hasher for OpcodeHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_isize(&mut self, x: isize) {
        self.write_u64(x as u64);
    }

    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
}

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut by_prim = HashMap::default();
        for (i, r) in PRIMITIVES.iter().enumerate() {
            by_prim.entry(r.prim).or_insert(i);
        }
        for (i, r) in PRIMITIVES.iter().enumerate() {
            by_prim.entry(r.reference).or_insert(i);
        }
        Index {
            by_name: PRIMITIVES
                .iter()
                .enumerate()
                .map(|(i, r)| (r.name, i))
                .collect(),
            by_prim,
        }
    })
}

impl Prim {
    /// The primitive a global name denotes in `dialect`, if any.
    #[cfg(test)]
    pub(crate) fn lookup(name: &str, dialect: Dialect) -> Option<Prim> {
        Some(Prim::of_row(Prim::lookup_row(name)?, dialect))
    }

    /// The row of [`PRIMITIVES`] a name denotes, if any.
    pub(crate) fn lookup_row(name: &str) -> Option<usize> {
        index().by_name.get(name).copied()
    }

    /// The primitive row `row` of [`PRIMITIVES`] denotes in `dialect` (the row of
    /// [`Prim::lookup_row`]).
    pub(crate) fn of_row(row: usize, dialect: Dialect) -> Prim {
        let row = &PRIMITIVES[row];
        match dialect {
            Dialect::Reference => row.reference,
            _ => row.prim,
        }
    }

    fn row(self) -> Option<&'static PrimRow> {
        index().by_prim.get(&self).map(|&i| &PRIMITIVES[i])
    }

    /// Allowed argument counts.
    pub(crate) fn arity(self) -> (u32, u32) {
        match self.row() {
            Some(r) => r.arity,
            None if matches!(self, Prim::Binary(_)) => (2, 2),
            None => (1, 1),
        }
    }

    /// The name of the primitive, for messages.
    pub(crate) fn name(self) -> &'static str {
        self.row().map_or("numeric primitive", |r| r.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every differentiable unary derivative agrees with a central finite difference.
    #[test]
    fn unary_derivatives_match_finite_differences() {
        let ops = [
            Unary::Neg,
            Unary::Recip,
            Unary::Sin,
            Unary::Cos,
            Unary::Tan,
            Unary::Exp,
            Unary::Log,
            Unary::LogClamped,
            Unary::Sqrt,
            Unary::SqrtClamped,
            Unary::Abs,
            Unary::Tanh,
            Unary::Sinh,
            Unary::Cosh,
            Unary::Asin,
            Unary::Acos,
            Unary::Atan,
            Unary::Square,
            Unary::Sigmoid,
        ];
        for op in ops {
            for x in [0.3, 0.7, -0.4] {
                if matches!(
                    op,
                    Unary::Log | Unary::Sqrt | Unary::LogClamped | Unary::SqrtClamped
                ) && x < 0.0
                {
                    continue;
                }
                let h = 1e-6;
                let fd = (op.apply(x + h) - op.apply(x - h)) / (2.0 * h);
                let d = op.deriv(x, op.apply(x));
                assert!(
                    (fd - d).abs() < 1e-6 * (1.0 + d.abs()),
                    "{op:?} at {x}: {d} vs {fd}"
                );
            }
        }
    }

    #[test]
    fn binary_partials_match_finite_differences() {
        // Quotient's derivative is zero by definition, not a finite difference.
        for op in Binary::ALL.into_iter().filter(|&op| op != Binary::Quotient) {
            let (x, y) = (1.7, 0.6);
            let h = 1e-6;
            let z = op.apply(x, y);
            let (dx, dy) = op.partials(x, y, z);
            let fx = (op.apply(x + h, y) - op.apply(x - h, y)) / (2.0 * h);
            let fy = (op.apply(x, y + h) - op.apply(x, y - h)) / (2.0 * h);
            assert!((fx - dx).abs() < 1e-6, "{op:?} dx {dx} vs {fx}");
            assert!((fy - dy).abs() < 1e-6, "{op:?} dy {dy} vs {fy}");
        }
    }

    /// A row's differentiable flag is its opcode's (the tape records exactly those ops).
    #[test]
    fn rows_agree_with_their_opcodes() {
        for r in PRIMITIVES {
            match r.prim {
                Prim::Unary(op) => assert_eq!(r.differentiable, op.differentiable(), "{}", r.name),
                Prim::Binary(op) => assert_eq!(r.differentiable, op.differentiable(), "{}", r.name),
                Prim::Compare(_) => assert!(!r.differentiable, "{}", r.name),
                _ => {}
            }
            assert_eq!(Prim::lookup(r.name, Dialect::Default), Some(r.prim));
            assert_eq!(Prim::lookup(r.name, Dialect::Reference), Some(r.reference));
            assert!(
                r.prim.arity() == r.arity || r.prim.name() != r.name,
                "{}",
                r.name
            );
        }
        assert_eq!(Prim::Unary(Unary::LogClamped).name(), "log");
        assert_eq!(Prim::Binary(Binary::Pow).name(), "pow");
        assert_eq!(Prim::Unary(Unary::Neg).name(), "numeric primitive");
    }

    #[test]
    fn dialect_naming_of_modulo_and_remainder() {
        let m = |d| match Prim::lookup("modulo", d) {
            Some(Prim::Binary(b)) => b.apply(-7.0, 2.0),
            _ => f64::NAN,
        };
        assert_eq!(m(Dialect::Default), 1.0);
        assert_eq!(m(Dialect::Reference), -1.0);
    }
}
