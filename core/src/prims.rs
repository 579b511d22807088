//! The closed set of primitives: names, arities, and each scalar op's forward beside its derivative.
//!
//! Adding a `Unary` or `Binary` variant does not compile until both its forward (`apply`) and its
//! derivative (`deriv` / `partials`) arms exist; tensor ops pair forward and VJP in `linalg.rs`.

use crate::api::Dialect;

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
    pub(crate) fn apply(self, x: f64) -> f64 {
        match self {
            Unary::Neg => -x,
            Unary::Recip => 1.0 / x,
            Unary::Sin => x.sin(),
            Unary::Cos => x.cos(),
            Unary::Tan => x.tan(),
            Unary::Exp => x.exp(),
            Unary::Log => x.ln(),
            Unary::LogClamped => x.max(CLAMP).ln(),
            Unary::Sqrt => x.sqrt(),
            Unary::SqrtClamped => x.max(CLAMP).sqrt(),
            Unary::Abs => x.abs(),
            Unary::Tanh => x.tanh(),
            Unary::Sinh => x.sinh(),
            Unary::Cosh => x.cosh(),
            Unary::Asin => x.asin(),
            Unary::Acos => x.acos(),
            Unary::Atan => x.atan(),
            Unary::Square => x * x,
            Unary::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            Unary::Floor => x.floor(),
            Unary::Ceiling => x.ceil(),
            Unary::Round => x.round_ties_even(),
            Unary::Truncate => x.trunc(),
        }
    }

    /// dy/dx at input `x` with output `y`.
    #[inline]
    pub(crate) fn deriv(self, x: f64, y: f64) -> f64 {
        match self {
            Unary::Neg => -1.0,
            Unary::Recip => -y * y,
            Unary::Sin => x.cos(),
            Unary::Cos => -x.sin(),
            Unary::Tan => 1.0 + y * y,
            Unary::Exp => y,
            Unary::Log => 1.0 / x,
            Unary::LogClamped => {
                if x > CLAMP {
                    1.0 / x
                } else {
                    0.0
                }
            }
            Unary::Sqrt => 0.5 / y,
            Unary::SqrtClamped => {
                if x > CLAMP {
                    0.5 / y
                } else {
                    0.0
                }
            }
            Unary::Abs => {
                if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
            Unary::Tanh => 1.0 - y * y,
            Unary::Sinh => x.cosh(),
            Unary::Cosh => x.sinh(),
            Unary::Asin => 1.0 / (1.0 - x * x).sqrt(),
            Unary::Acos => -1.0 / (1.0 - x * x).sqrt(),
            Unary::Atan => 1.0 / (1.0 + x * x),
            Unary::Square => 2.0 * x,
            Unary::Sigmoid => y * (1.0 - y),
            Unary::Floor | Unary::Ceiling | Unary::Round | Unary::Truncate => 0.0,
        }
    }

    /// Whether the op has a nonzero derivative anywhere (piecewise-constant ops record nothing).
    pub(crate) fn differentiable(self) -> bool {
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
    /// Forward value.
    #[inline]
    pub(crate) fn apply(self, x: f64, y: f64) -> f64 {
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
    pub(crate) fn partials(self, x: f64, y: f64, z: f64) -> (f64, f64) {
        match self {
            Binary::Add => (1.0, 1.0),
            Binary::Sub => (1.0, -1.0),
            Binary::Mul => (y, x),
            Binary::Div => (1.0 / y, -z / y),
            Binary::Pow => {
                let dx = if y == 0.0 { 0.0 } else { y * x.powf(y - 1.0) };
                let dy = if x > 0.0 {
                    z * x.ln()
                } else if x == 0.0 {
                    0.0
                } else {
                    f64::NAN
                };
                (dx, dy)
            }
            Binary::Min => {
                if x < y {
                    (1.0, 0.0)
                } else if y < x {
                    (0.0, 1.0)
                } else {
                    (0.5, 0.5)
                }
            }
            Binary::Max => {
                if x > y {
                    (1.0, 0.0)
                } else if y > x {
                    (0.0, 1.0)
                } else {
                    (0.5, 0.5)
                }
            }
            Binary::Atan2 => {
                let r = x * x + y * y;
                (y / r, -x / r)
            }
            Binary::FloorMod => (1.0, -(x / y).floor()),
            Binary::TruncMod => (1.0, -(x / y).trunc()),
            Binary::Quotient => (0.0, 0.0),
        }
    }

    pub(crate) fn differentiable(self) -> bool {
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
    pub(crate) fn apply(self, x: f64, y: f64) -> bool {
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

/// Whether `name` is a primitive of the runtime. Both dialects know the same names (they differ
/// only in what some of them compute), so no dialect is asked for.
pub fn is_primitive(name: &str) -> bool {
    Prim::lookup(name, Dialect::Default).is_some()
}

impl Prim {
    /// The primitive a global name denotes in `dialect`, if any.
    pub(crate) fn lookup(name: &str, dialect: Dialect) -> Option<Prim> {
        let reference = dialect == Dialect::Reference;
        Some(match name {
            "+" => Prim::Add,
            "-" => Prim::Sub,
            "*" => Prim::Mul,
            "/" => Prim::Div,
            "min" => Prim::Min,
            "max" => Prim::Max,
            "sin" => Prim::Unary(Unary::Sin),
            "cos" => Prim::Unary(Unary::Cos),
            "tan" => Prim::Unary(Unary::Tan),
            "exp" => Prim::Unary(Unary::Exp),
            "log" if reference => Prim::Unary(Unary::LogClamped),
            "log" => Prim::Unary(Unary::Log),
            "sqrt" if reference => Prim::Unary(Unary::SqrtClamped),
            "sqrt" => Prim::Unary(Unary::Sqrt),
            "abs" => Prim::Unary(Unary::Abs),
            "tanh" => Prim::Unary(Unary::Tanh),
            "sinh" => Prim::Unary(Unary::Sinh),
            "cosh" => Prim::Unary(Unary::Cosh),
            "asin" => Prim::Unary(Unary::Asin),
            "acos" => Prim::Unary(Unary::Acos),
            "atan" => Prim::Unary(Unary::Atan),
            "square" => Prim::Unary(Unary::Square),
            "sigmoid" => Prim::Unary(Unary::Sigmoid),
            "floor" => Prim::Unary(Unary::Floor),
            "ceiling" => Prim::Unary(Unary::Ceiling),
            "round" => Prim::Unary(Unary::Round),
            "truncate" => Prim::Unary(Unary::Truncate),
            "pow" | "expt" => Prim::Binary(Binary::Pow),
            "atan2" => Prim::Binary(Binary::Atan2),
            "modulo" if reference => Prim::Binary(Binary::TruncMod),
            "modulo" => Prim::Binary(Binary::FloorMod),
            "remainder" if reference => Prim::Binary(Binary::FloorMod),
            "remainder" => Prim::Binary(Binary::TruncMod),
            "quotient" => Prim::Binary(Binary::Quotient),
            "=" => Prim::Compare(Compare::Eq),
            "<" => Prim::Compare(Compare::Lt),
            ">" => Prim::Compare(Compare::Gt),
            "<=" => Prim::Compare(Compare::Le),
            ">=" => Prim::Compare(Compare::Ge),
            "not" => Prim::Not,
            "zero?" => Prim::ZeroP,
            "positive?" => Prim::PositiveP,
            "negative?" => Prim::NegativeP,
            "number?" => Prim::NumberP,
            "boolean?" => Prim::BooleanP,
            "symbol?" => Prim::SymbolP,
            "null?" => Prim::NullP,
            "pair?" => Prim::PairP,
            "procedure?" => Prim::ProcedureP,
            "vector?" => Prim::VectorP,
            "eq?" | "eqv?" => Prim::EqP,
            "equal?" => Prim::EqualP,
            "cons" => Prim::Cons,
            "car" => Prim::Car,
            "cdr" => Prim::Cdr,
            "cadr" => Prim::Cadr,
            "cddr" => Prim::Cddr,
            "caar" => Prim::Caar,
            "cdar" => Prim::Cdar,
            "caddr" => Prim::Caddr,
            "list" => Prim::List,
            "length" => Prim::Length,
            "append" => Prim::Append,
            "reverse" => Prim::Reverse,
            "list-ref" => Prim::ListRef,
            "apply" => Prim::Apply,
            "map" => Prim::Map,
            "filter" => Prim::Filter,
            "fold-left" | "fold" => Prim::FoldLeft,
            "fold-right" => Prim::FoldRight,
            "eval" => Prim::Eval,
            "vec" | "vector" => Prim::Vec,
            "mat" => Prim::Mat,
            "ref" | "vector-ref" => Prim::Ref,
            "dot" => Prim::Dot,
            "cross" => Prim::Cross,
            "norm" => Prim::Norm,
            "normalize" => Prim::Normalize,
            "vsum" => Prim::VSum,
            "vlen" | "vector-length" => Prim::VLen,
            "scale" => Prim::Scale,
            "matvec" => Prim::MatVec,
            "matmul" => Prim::MatMul,
            "transpose" => Prim::Transpose,
            "trace" => Prim::Trace,
            "det" => Prim::Det,
            "logdet" => Prim::LogDet,
            "inv" => Prim::Inv,
            "outer" => Prim::Outer,
            "eye" => Prim::Eye,
            "zeros" => Prim::Zeros,
            "ones" => Prim::Ones,
            _ => return None,
        })
    }

    /// Allowed argument counts.
    pub(crate) fn arity(self) -> (u32, u32) {
        match self {
            Prim::Add | Prim::Mul | Prim::List | Prim::Append | Prim::Vec | Prim::Mat => (0, ANY),
            Prim::Sub | Prim::Div | Prim::Min | Prim::Max => (1, ANY),
            Prim::Compare(_) => (1, ANY),
            Prim::Unary(Unary::Atan) => (1, 2),
            Prim::Unary(_) => (1, 1),
            Prim::Binary(_) => (2, 2),
            Prim::Map => (2, ANY),
            Prim::Apply => (2, ANY),
            Prim::Filter => (2, 2),
            Prim::FoldLeft | Prim::FoldRight => (3, 3),
            Prim::Ref => (2, 3),
            Prim::Cons
            | Prim::EqP
            | Prim::EqualP
            | Prim::ListRef
            | Prim::Dot
            | Prim::Cross
            | Prim::Scale
            | Prim::MatVec
            | Prim::MatMul
            | Prim::Outer => (2, 2),
            Prim::Not
            | Prim::ZeroP
            | Prim::PositiveP
            | Prim::NegativeP
            | Prim::NumberP
            | Prim::BooleanP
            | Prim::SymbolP
            | Prim::NullP
            | Prim::PairP
            | Prim::ProcedureP
            | Prim::VectorP
            | Prim::Car
            | Prim::Cdr
            | Prim::Cadr
            | Prim::Cddr
            | Prim::Caar
            | Prim::Cdar
            | Prim::Caddr
            | Prim::Length
            | Prim::Reverse
            | Prim::Eval
            | Prim::Norm
            | Prim::Normalize
            | Prim::VSum
            | Prim::VLen
            | Prim::Transpose
            | Prim::Trace
            | Prim::Det
            | Prim::LogDet
            | Prim::Inv
            | Prim::Eye
            | Prim::Zeros
            | Prim::Ones => (1, 1),
        }
    }

    /// The name of the primitive, for messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Prim::Add => "+",
            Prim::Sub => "-",
            Prim::Mul => "*",
            Prim::Div => "/",
            Prim::Min => "min",
            Prim::Max => "max",
            Prim::Unary(Unary::Sin) => "sin",
            Prim::Unary(Unary::Cos) => "cos",
            Prim::Unary(Unary::Tan) => "tan",
            Prim::Unary(Unary::Exp) => "exp",
            Prim::Unary(Unary::LogClamped) => "log",
            Prim::Unary(Unary::Log) => "log",
            Prim::Unary(Unary::SqrtClamped) => "sqrt",
            Prim::Unary(Unary::Sqrt) => "sqrt",
            Prim::Unary(Unary::Abs) => "abs",
            Prim::Unary(Unary::Tanh) => "tanh",
            Prim::Unary(Unary::Sinh) => "sinh",
            Prim::Unary(Unary::Cosh) => "cosh",
            Prim::Unary(Unary::Asin) => "asin",
            Prim::Unary(Unary::Acos) => "acos",
            Prim::Unary(Unary::Atan) => "atan",
            Prim::Unary(Unary::Square) => "square",
            Prim::Unary(Unary::Sigmoid) => "sigmoid",
            Prim::Unary(Unary::Floor) => "floor",
            Prim::Unary(Unary::Ceiling) => "ceiling",
            Prim::Unary(Unary::Round) => "round",
            Prim::Unary(Unary::Truncate) => "truncate",
            Prim::Binary(Binary::Pow) => "pow",
            Prim::Binary(Binary::Atan2) => "atan2",
            Prim::Binary(Binary::TruncMod) => "modulo",
            Prim::Binary(Binary::FloorMod) => "modulo",
            Prim::Binary(Binary::Quotient) => "quotient",
            Prim::Compare(Compare::Eq) => "=",
            Prim::Compare(Compare::Lt) => "<",
            Prim::Compare(Compare::Gt) => ">",
            Prim::Compare(Compare::Le) => "<=",
            Prim::Compare(Compare::Ge) => ">=",
            Prim::Not => "not",
            Prim::ZeroP => "zero?",
            Prim::PositiveP => "positive?",
            Prim::NegativeP => "negative?",
            Prim::NumberP => "number?",
            Prim::BooleanP => "boolean?",
            Prim::SymbolP => "symbol?",
            Prim::NullP => "null?",
            Prim::PairP => "pair?",
            Prim::ProcedureP => "procedure?",
            Prim::VectorP => "vector?",
            Prim::EqP => "eq?",
            Prim::EqualP => "equal?",
            Prim::Cons => "cons",
            Prim::Car => "car",
            Prim::Cdr => "cdr",
            Prim::Cadr => "cadr",
            Prim::Cddr => "cddr",
            Prim::Caar => "caar",
            Prim::Cdar => "cdar",
            Prim::Caddr => "caddr",
            Prim::List => "list",
            Prim::Length => "length",
            Prim::Append => "append",
            Prim::Reverse => "reverse",
            Prim::ListRef => "list-ref",
            Prim::Apply => "apply",
            Prim::Map => "map",
            Prim::Filter => "filter",
            Prim::FoldLeft => "fold-left",
            Prim::FoldRight => "fold-right",
            Prim::Eval => "eval",
            Prim::Vec => "vec",
            Prim::Mat => "mat",
            Prim::Ref => "ref",
            Prim::Dot => "dot",
            Prim::Cross => "cross",
            Prim::Norm => "norm",
            Prim::Normalize => "normalize",
            Prim::VSum => "vsum",
            Prim::VLen => "vlen",
            Prim::Scale => "scale",
            Prim::MatVec => "matvec",
            Prim::MatMul => "matmul",
            Prim::Transpose => "transpose",
            Prim::Trace => "trace",
            Prim::Det => "det",
            Prim::LogDet => "logdet",
            Prim::Inv => "inv",
            Prim::Outer => "outer",
            Prim::Eye => "eye",
            Prim::Zeros => "zeros",
            Prim::Ones => "ones",
            Prim::Unary(_) | Prim::Binary(_) => "numeric primitive",
        }
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
        let ops = [
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
        ];
        for op in ops {
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
