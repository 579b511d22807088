//! Primitive application: arithmetic kernels over lanes (with scalar broadcast), comparisons, lists,
//! higher-order list functions and tensor ops, each recording its tape node when differentiable.

use super::governor::RESERVE_ABOVE;
use super::replay::{BoolTest, Guard};
use super::{At, Machine, Result, Shape, err, kernels};
use crate::api::{Dialect, Output};
use crate::decode::{CodeId, Decoder};
use crate::error::{CoreError, ErrorKind};
use crate::heap::{Heap, Node, NodeId};
use crate::lanes::PayloadId;
use crate::linalg::TensorOp;
use crate::prims::{Binary, Compare, Prim, Unary};
use crate::real::Real;
use crate::tape::TapeOp;
use crate::value::Value;

/// What an operation is called in its error messages: a primitive's name is looked up in the
/// vocabulary only when an error is raised, never on the numeric path.
#[derive(Clone, Copy, Debug)]
pub(super) enum What {
    Prim(Prim),
    Text(&'static str),
}

impl What {
    fn name(self) -> &'static str {
        match self {
            What::Prim(p) => p.name(),
            What::Text(s) => s,
        }
    }
}

impl From<Prim> for What {
    fn from(p: Prim) -> Self {
        What::Prim(p)
    }
}

impl From<&'static str> for What {
    fn from(s: &'static str) -> Self {
        What::Text(s)
    }
}

#[cold]
fn type_error(what: &str, expected: &str, got: Value) -> Box<CoreError> {
    err(
        ErrorKind::Type,
        format!("{what} expects {expected}, got a {}", got.type_name()),
    )
}

impl<R: Real> Machine<R> {
    fn arg(&self, base: usize, i: usize) -> Value {
        self.argstack[base + i]
    }

    pub(super) fn call_prim(&mut self, p: Prim, base: usize, at: CodeId) -> Result<Value> {
        let node = self.codes.node(at);
        self.call_prim_inner(p, base, at).map_err(|e| e.at(node))
    }

    /// `call_prim` with one argument, passed by value (the common primitives skip the stack).
    #[inline(never)]
    pub(super) fn call_prim1(&mut self, p: Prim, x: Value, at: CodeId) -> Result<Value> {
        let res = match p {
            Prim::Add | Prim::Mul | Prim::Min | Prim::Max => self.numeric(x, p).map(|_| x),
            Prim::Sub => self.unary(Unary::Neg, x, "-"),
            Prim::Div => self.unary(Unary::Recip, x, "/"),
            Prim::Unary(u) => self.unary(u, x, p),
            Prim::Det | Prim::LogDet | Prim::Inv => self.det_family(p, x),
            Prim::Eye | Prim::Zeros | Prim::Ones => self.prim_fill(p, x),
            _ => {
                let base = self.argstack.len();
                self.argstack.push(x);
                let v = self.call_prim_inner(p, base, at);
                self.argstack.truncate(base);
                v
            }
        };
        res.map_err(|e| e.at(self.codes.node(at)))
    }

    /// `call_prim` with two arguments, passed by value (the common primitives skip the stack).
    #[inline(always)]
    pub(super) fn call_prim2(&mut self, p: Prim, x: Value, y: Value, at: CodeId) -> Result<Value> {
        let op = match p {
            Prim::Add => Binary::Add,
            Prim::Sub => Binary::Sub,
            Prim::Mul => Binary::Mul,
            Prim::Div => Binary::Div,
            Prim::Min => Binary::Min,
            Prim::Max => Binary::Max,
            Prim::Unary(Unary::Atan) => Binary::Atan2,
            Prim::Binary(b) => b,
            _ => return self.call_prim2_other(p, x, y, at),
        };
        self.binary(op, x, y, p)
            .map_err(|e| e.at(self.codes.node(at)))
    }

    #[inline(never)]
    fn call_prim2_other(&mut self, p: Prim, x: Value, y: Value, at: CodeId) -> Result<Value> {
        let res = match p {
            Prim::Dot => self.prim_dot(x, y),
            Prim::Scale => self.prim_scale(x, y),
            Prim::MatVec => self.prim_matvec(x, y),
            Prim::MatMul => self.prim_matmul(x, y),
            Prim::Compare(c) => self.compare2(c, x, y),
            _ => {
                let base = self.argstack.len();
                self.argstack.push(x);
                self.argstack.push(y);
                let v = self.call_prim_inner(p, base, at);
                self.argstack.truncate(base);
                v
            }
        };
        res.map_err(|e| e.at(self.codes.node(at)))
    }

    /// `(eye k)`, `(zeros k)`, `(ones k)`.
    fn prim_fill(&mut self, p: Prim, x: Value) -> Result<Value> {
        let k = self.uniform_index(x, p.name())?;
        if k > 4096 {
            return Err(err(
                ErrorKind::Index,
                format!("{} size {k} is too large", p.name()),
            ));
        }
        let (nel, shape) = if p == Prim::Eye {
            (k * k, Shape::Matrix(k as u16, k as u16))
        } else {
            (k, Shape::Vector(k as u32))
        };
        self.charge(nel as u64)?;
        if nel > RESERVE_ABOVE {
            self.reserve(self.payload_bytes(nel, false))?;
        }
        let out = self.lanes.alloc(nel, false, false);
        let off = self.lanes.meta(out).off as usize;
        let dst = &mut self.lanes.data[off..off + nel];
        match p {
            Prim::Eye => {
                let w = k.max(1);
                for (e, d) in dst.iter_mut().enumerate() {
                    *d = if e / w == e % w { R::ONE } else { R::ZERO };
                }
            }
            Prim::Ones => dst.fill(R::ONE),
            _ => dst.fill(R::ZERO),
        }
        Ok(shape.value(out))
    }

    /// A two-argument comparison: `compare_chain` over `x, y` without the argument stack (the
    /// guard, when one is needed, reads them from it).
    fn compare2(&mut self, c: Compare, x: Value, y: Value) -> Result<Value> {
        let mut varying = false;
        for v in [x, y] {
            match self.numeric(v, "comparison")? {
                (p, Shape::Scalar) => varying |= self.lanes.is_varying(p),
                _ => return Err(type_error("comparison", "numbers", v)),
            }
        }
        let px = x.payload().unwrap_or(self.false_p);
        let py = y.payload().unwrap_or(self.false_p);
        let out = if !varying {
            if c.apply(self.get(px, 0, 0), self.get(py, 0, 0)) {
                self.true_p
            } else {
                self.false_p
            }
        } else {
            let out = self.lanes.alloc(1, true, false);
            let lanes = self.take_lanes(true);
            for &l in &lanes {
                let l = l as usize;
                let ok = c.apply(self.get(px, 0, l), self.get(py, 0, l));
                self.set(out, 0, l, f64::from(u8::from(ok)));
            }
            self.lane_buf = lanes;
            out
        };
        if self.recording && (self.lanes.meta(px).grad || self.lanes.meta(py).grad) {
            let base = self.argstack.len();
            self.argstack.push(x);
            self.argstack.push(y);
            self.guard_compare(c, base, 2, out);
            self.argstack.truncate(base);
        }
        Ok(Value::Bool(out))
    }

    fn prim_dot(&mut self, x: Value, y: Value) -> Result<Value> {
        let (a, sa) = self.tensor_arg(x, "dot")?;
        let (b, sb) = self.tensor_arg(y, "dot")?;
        match (sa, sb) {
            (Shape::Vector(x), Shape::Vector(y)) if x == y => {
                self.tensor(TensorOp::Dot, a, Some(b), Shape::Scalar)
            }
            _ => Err(shape_error("dot", sa, sb)),
        }
    }

    fn prim_scale(&mut self, x: Value, y: Value) -> Result<Value> {
        if !matches!(x, Value::Num(_)) && !matches!(y, Value::Num(_)) {
            return Err(type_error("scale", "a number and a vector or matrix", x));
        }
        self.binary(Binary::Mul, x, y, "scale")
    }

    fn prim_matvec(&mut self, x: Value, y: Value) -> Result<Value> {
        let (a, sa) = self.tensor_arg(x, "matvec")?;
        let (b, sb) = self.tensor_arg(y, "matvec")?;
        self.matvec(a, sa, b, sb)
    }

    fn prim_matmul(&mut self, x: Value, y: Value) -> Result<Value> {
        let (a, sa) = self.tensor_arg(x, "matmul")?;
        let (b, sb) = self.tensor_arg(y, "matmul")?;
        match (sa, sb) {
            (Shape::Matrix(m, k), Shape::Matrix(k2, nn)) if k == k2 => self.tensor(
                TensorOp::MatMul { m, k, n: nn },
                a,
                Some(b),
                Shape::Matrix(m, nn),
            ),
            (Shape::Matrix(..), Shape::Vector(_)) => self.matvec(a, sa, b, sb),
            _ => Err(shape_error("matmul", sa, sb)),
        }
    }

    fn call_prim_inner(&mut self, p: Prim, base: usize, site: CodeId) -> Result<Value> {
        let n = self.argstack.len() - base;
        let name = || p.name();
        match p {
            Prim::Add | Prim::Mul => {
                if n == 0 {
                    return Ok(self.num(if p == Prim::Add { 0.0 } else { 1.0 }));
                }
                let op = if p == Prim::Add {
                    Binary::Add
                } else {
                    Binary::Mul
                };
                self.fold(op, base, n, p)
            }
            Prim::Sub | Prim::Div => {
                if n == 1 {
                    let u = if p == Prim::Sub {
                        Unary::Neg
                    } else {
                        Unary::Recip
                    };
                    return self.unary(u, self.arg(base, 0), p);
                }
                let op = if p == Prim::Sub {
                    Binary::Sub
                } else {
                    Binary::Div
                };
                self.fold(op, base, n, p)
            }
            Prim::Min => self.fold(Binary::Min, base, n, "min"),
            Prim::Max => self.fold(Binary::Max, base, n, "max"),
            Prim::Unary(Unary::Atan) if n == 2 => {
                self.binary(Binary::Atan2, self.arg(base, 0), self.arg(base, 1), "atan")
            }
            Prim::Unary(u) => self.unary(u, self.arg(base, 0), p),
            Prim::Binary(b) => self.binary(b, self.arg(base, 0), self.arg(base, 1), p),
            Prim::Compare(c) => self.compare_chain(c, base, n),
            Prim::Not => {
                let v = self.arg(base, 0);
                match v {
                    Value::Bool(p) => self.map_bool(p, BoolTest::Zero),
                    Value::Num(p) if self.opts.dialect == Dialect::Reference => {
                        self.map_bool(p, BoolTest::Zero)
                    }
                    Value::Nil if self.opts.dialect == Dialect::Reference => {
                        Ok(self.bool_value(true))
                    }
                    _ => Ok(self.bool_value(false)),
                }
            }
            Prim::ZeroP | Prim::PositiveP | Prim::NegativeP => {
                let v = self.arg(base, 0);
                let Value::Num(q) = v else {
                    return Err(type_error(name(), "a number", v));
                };
                match p {
                    Prim::ZeroP => self.map_bool(q, BoolTest::Zero),
                    Prim::PositiveP => self.map_bool(q, BoolTest::Positive),
                    _ => self.map_bool(q, BoolTest::Negative),
                }
            }
            Prim::NumberP => Ok(self.bool_value(matches!(self.arg(base, 0), Value::Num(_)))),
            Prim::BooleanP => Ok(self.bool_value(matches!(self.arg(base, 0), Value::Bool(_)))),
            Prim::SymbolP => Ok(self.bool_value(matches!(self.arg(base, 0), Value::Sym(_)))),
            Prim::NullP => Ok(self.bool_value(matches!(self.arg(base, 0), Value::Nil))),
            Prim::PairP => Ok(self.bool_value(matches!(
                self.arg(base, 0),
                Value::Pair(_) | Value::Datum(_)
            ))),
            Prim::ProcedureP => Ok(self.bool_value(matches!(
                self.arg(base, 0),
                Value::Closure(_) | Value::Prim(_)
            ))),
            Prim::VectorP => Ok(self.bool_value(matches!(
                self.arg(base, 0),
                Value::Vector(..) | Value::Matrix(..)
            ))),
            Prim::EqP => self.eq(self.arg(base, 0), self.arg(base, 1), false),
            Prim::EqualP => self.eq(self.arg(base, 0), self.arg(base, 1), true),
            Prim::Cons
            | Prim::Car
            | Prim::Cdr
            | Prim::Cadr
            | Prim::Cddr
            | Prim::Caar
            | Prim::Cdar
            | Prim::Caddr
            | Prim::List
            | Prim::Length
            | Prim::Append
            | Prim::Reverse
            | Prim::ListRef
            | Prim::Apply
            | Prim::Map
            | Prim::Filter
            | Prim::FoldLeft
            | Prim::FoldRight => self.call_list_prim(p, base, site),
            Prim::Eval
            | Prim::Vec
            | Prim::Mat
            | Prim::Ref
            | Prim::Dot
            | Prim::VSum
            | Prim::Norm
            | Prim::Normalize
            | Prim::Cross
            | Prim::Scale
            | Prim::MatVec
            | Prim::MatMul
            | Prim::Transpose
            | Prim::Trace
            | Prim::Outer
            | Prim::Det
            | Prim::LogDet
            | Prim::Inv
            | Prim::Eye
            | Prim::Zeros
            | Prim::Ones
            | Prim::VLen => self.call_tensor_prim(p, base),
        }
    }

    /// The list primitives (and `apply`, `map`, `filter`, the folds) of [`Self::call_prim_inner`].
    #[inline]
    fn call_list_prim(&mut self, p: Prim, base: usize, site: CodeId) -> Result<Value> {
        let n = self.argstack.len() - base;
        let name = || p.name();
        match p {
            Prim::Cons => {
                self.pairs.push((self.arg(base, 0), self.arg(base, 1)));
                Ok(Value::Pair(self.pairs.len() as u32 - 1))
            }
            Prim::Car => self.car_cdr(self.arg(base, 0), true, "car"),
            Prim::Cdr => self.car_cdr(self.arg(base, 0), false, "cdr"),
            Prim::Cadr | Prim::Cddr | Prim::Caar | Prim::Cdar | Prim::Caddr => {
                let path: &[bool] = match p {
                    Prim::Cadr => &[false, true],
                    Prim::Cddr => &[false, false],
                    Prim::Caar => &[true, true],
                    Prim::Cdar => &[true, false],
                    _ => &[false, false, true],
                };
                let mut v = self.arg(base, 0);
                for &is_car in path {
                    v = self.car_cdr(v, is_car, name())?;
                }
                Ok(v)
            }
            Prim::List => {
                let items: Vec<Value> = self.argstack[base..].to_vec();
                self.list_from(&items, Value::Nil)
            }
            Prim::Length => {
                // Walks without collecting, one work unit per cell.
                let mut v = self.arg(base, 0);
                let mut n = 0u64;
                while v != Value::Nil {
                    let Some((_, d)) = self.pair_of(v) else {
                        return Err(type_error("length", "a proper list", v));
                    };
                    v = d;
                    n += 1;
                    if n.is_multiple_of(4096) {
                        self.charge(4096)?;
                    }
                }
                self.charge(n % 4096)?;
                Ok(self.num(n as f64))
            }
            Prim::Append => {
                if n == 0 {
                    return Ok(Value::Nil);
                }
                let mut tail = self.arg(base, n - 1);
                for i in (0..n - 1).rev() {
                    let items = self.list_items(self.arg(base, i), "append")?;
                    tail = self.list_from(&items, tail)?;
                }
                Ok(tail)
            }
            Prim::Reverse => {
                let mut items = self.list_items(self.arg(base, 0), "reverse")?;
                items.reverse();
                self.list_from(&items, Value::Nil)
            }
            Prim::ListRef => {
                let items = self.list_items(self.arg(base, 0), "list-ref")?;
                let i = self.uniform_index(self.arg(base, 1), "list-ref")?;
                items.get(i).copied().ok_or_else(|| {
                    err(
                        ErrorKind::Index,
                        format!(
                            "list-ref index {i} out of range for a list of {}",
                            items.len()
                        ),
                    )
                })
            }
            Prim::Apply => {
                let f = self.arg(base, 0);
                let mut items: Vec<Value> = self.argstack[base + 1..base + n - 1].to_vec();
                items.extend(self.list_items(self.arg(base, n - 1), "apply")?);
                self.apply_value(f, &items, site)
            }
            Prim::Map => {
                let f = self.arg(base, 0);
                let mut lists = Vec::with_capacity(n - 1);
                for i in 1..n {
                    lists.push(self.list_items(self.arg(base, i), "map")?);
                }
                let len = lists.iter().map(Vec::len).min().unwrap_or(0);
                let mut out = Vec::with_capacity(len);
                let mut args = Vec::with_capacity(lists.len());
                for k in 0..len {
                    self.charge(1)?;
                    args.clear();
                    args.extend(lists.iter().map(|l| l[k]));
                    out.push(self.apply_value(f, &args, site)?);
                }
                self.list_from(&out, Value::Nil)
            }
            Prim::Filter => {
                let f = self.arg(base, 0);
                let items = self.list_items(self.arg(base, 1), "filter")?;
                let mut out = Vec::new();
                for x in items {
                    self.charge(1)?;
                    let keep = self.apply_value(f, &[x], site)?;
                    match self.classify(keep) {
                        super::Truth::True => out.push(x),
                        super::Truth::False => {}
                        super::Truth::Mixed(..) => {
                            return Err(err(
                                ErrorKind::Divergence,
                                "filter's predicate differs across lanes (the result list would differ in shape)",
                            ));
                        }
                    }
                }
                self.list_from(&out, Value::Nil)
            }
            Prim::FoldLeft | Prim::FoldRight => {
                let f = self.arg(base, 0);
                let mut acc = self.arg(base, 1);
                let mut items = self.list_items(self.arg(base, 2), name())?;
                if p == Prim::FoldRight {
                    items.reverse();
                }
                for x in items {
                    self.charge(1)?;
                    let args = if p == Prim::FoldLeft {
                        [acc, x]
                    } else {
                        [x, acc]
                    };
                    acc = self.apply_value(f, &args, site)?;
                }
                Ok(acc)
            }
            _ => unreachable!("call_list_prim of {p:?}"),
        }
    }

    /// `eval` and the vector and matrix primitives of [`Self::call_prim_inner`].
    #[inline(always)]
    fn call_tensor_prim(&mut self, p: Prim, base: usize) -> Result<Value> {
        let n = self.argstack.len() - base;
        let name = || p.name();
        match p {
            Prim::Eval => self.eval_datum(self.arg(base, 0)),
            Prim::Vec => self.make_vec(base, n),
            Prim::Mat => self.make_mat(base, n),
            Prim::Ref => self.tensor_ref(base, n),
            Prim::Dot => self.prim_dot(self.arg(base, 0), self.arg(base, 1)),
            Prim::VSum => {
                let (a, _) = self.tensor_arg(self.arg(base, 0), "vsum")?;
                self.tensor(TensorOp::Sum, a, None, Shape::Scalar)
            }
            Prim::Norm | Prim::Normalize => {
                let (a, sa) = self.tensor_arg(self.arg(base, 0), name())?;
                let Shape::Vector(_) = sa else {
                    return Err(type_error(name(), "a vector", self.arg(base, 0)));
                };
                if p == Prim::Norm {
                    self.tensor(TensorOp::Norm, a, None, Shape::Scalar)
                } else {
                    self.tensor(TensorOp::Normalize, a, None, sa)
                }
            }
            Prim::Cross => {
                let (a, sa) = self.tensor_arg(self.arg(base, 0), "cross")?;
                let (b, sb) = self.tensor_arg(self.arg(base, 1), "cross")?;
                if sa != Shape::Vector(3) || sb != Shape::Vector(3) {
                    return Err(shape_error("cross", sa, sb));
                }
                self.tensor(TensorOp::Cross, a, Some(b), sa)
            }
            Prim::Scale => self.prim_scale(self.arg(base, 0), self.arg(base, 1)),
            Prim::MatVec => self.prim_matvec(self.arg(base, 0), self.arg(base, 1)),
            Prim::MatMul => self.prim_matmul(self.arg(base, 0), self.arg(base, 1)),
            Prim::Transpose => {
                let v = self.arg(base, 0);
                let (a, sa) = self.tensor_arg(v, "transpose")?;
                match sa {
                    Shape::Matrix(r, c) => {
                        self.tensor(TensorOp::Transpose { r, c }, a, None, Shape::Matrix(c, r))
                    }
                    _ => Err(type_error("transpose", "a matrix", v)),
                }
            }
            Prim::Trace => {
                let v = self.arg(base, 0);
                let (a, sa) = self.tensor_arg(v, "trace")?;
                match sa {
                    Shape::Matrix(r, c) => {
                        self.tensor(TensorOp::Trace { r, c }, a, None, Shape::Scalar)
                    }
                    _ => Err(type_error("trace", "a matrix", v)),
                }
            }
            Prim::Outer => {
                let (a, sa) = self.tensor_arg(self.arg(base, 0), "outer")?;
                let (b, sb) = self.tensor_arg(self.arg(base, 1), "outer")?;
                match (sa, sb) {
                    (Shape::Vector(m), Shape::Vector(k))
                        if m <= u16::MAX as u32 && k <= u16::MAX as u32 =>
                    {
                        self.tensor(
                            TensorOp::Outer,
                            a,
                            Some(b),
                            Shape::Matrix(m as u16, k as u16),
                        )
                    }
                    _ => Err(shape_error("outer", sa, sb)),
                }
            }
            Prim::Det | Prim::LogDet | Prim::Inv => self.det_family(p, self.arg(base, 0)),
            Prim::Eye | Prim::Zeros | Prim::Ones => self.prim_fill(p, self.arg(base, 0)),
            Prim::VLen => match self.arg(base, 0) {
                Value::Vector(_, n) => Ok(self.num(n as f64)),
                Value::Matrix(_, r, _) => Ok(self.num(r as f64)),
                v => Err(type_error("vlen", "a vector", v)),
            },
            _ => unreachable!("call_tensor_prim of {p:?}"),
        }
    }

    // ------------------------------------------------------------ numbers

    fn numeric(&self, v: Value, what: impl Into<What>) -> Result<(PayloadId, Shape)> {
        match v {
            Value::Num(p) => Ok((p, Shape::Scalar)),
            Value::Bool(p) if self.opts.dialect == Dialect::Reference => Ok((p, Shape::Scalar)),
            Value::Vector(p, n) => Ok((p, Shape::Vector(n))),
            Value::Matrix(p, r, c) => Ok((p, Shape::Matrix(r, c))),
            _ => Err(type_error(what.into().name(), "numbers", v)),
        }
    }

    fn tensor_arg(&self, v: Value, what: &str) -> Result<(PayloadId, Shape)> {
        match v {
            Value::Vector(p, n) => Ok((p, Shape::Vector(n))),
            Value::Matrix(p, r, c) => Ok((p, Shape::Matrix(r, c))),
            _ => Err(type_error(what, "a vector or matrix", v)),
        }
    }

    fn fold(&mut self, op: Binary, base: usize, n: usize, what: impl Into<What>) -> Result<Value> {
        let what = what.into();
        let mut acc = self.arg(base, 0);
        if n == 1 {
            self.numeric(acc, what)?;
            return Ok(acc);
        }
        for i in 1..n {
            // One unit per operation, so a call with millions of operands meets the periodic
            // look (memory, deadline) like a loop does.
            self.charge(1)?;
            acc = self.binary(op, acc, self.arg(base, i), what)?;
        }
        Ok(acc)
    }

    pub(super) fn unary(&mut self, op: Unary, v: Value, what: impl Into<What>) -> Result<Value> {
        let (a, shape) = self.numeric(v, what)?;
        let ma = self.lanes.meta(a);
        let grad = self.recording && ma.grad && op.differentiable();
        if ma.n as usize > RESERVE_ABOVE {
            self.charge(ma.n as u64)?;
            self.reserve(self.payload_bytes(ma.n as usize, ma.varying))?;
        } else {
            self.charge_small(u64::from(ma.n).saturating_sub(1));
        }
        let out = self.lanes.alloc(ma.n as usize, ma.varying, grad);
        kernels::unary(&mut self.lanes, &self.masks, self.mask, op, out, a);
        if self.recording && ma.grad && !grad {
            self.guard(Guard::Unary(op), out, a, a);
        }
        if grad {
            self.tape.push(TapeOp::Unary(op), out, a, a, self.mask);
        }
        Ok(shape.value(out))
    }

    pub(super) fn binary(
        &mut self,
        op: Binary,
        x: Value,
        y: Value,
        what: impl Into<What>,
    ) -> Result<Value> {
        let what = what.into();
        let (a, sa) = self.numeric(x, what)?;
        let (bq, sb) = self.numeric(y, what)?;
        let shape = match (sa, sb) {
            _ if sa == sb => sa,
            (Shape::Scalar, s) | (s, Shape::Scalar) => s,
            _ => return Err(shape_error(what.name(), sa, sb)),
        };
        let ma = self.lanes.meta(a);
        let mb = self.lanes.meta(bq);
        let varying = ma.varying || mb.varying;
        let grad = self.recording && (ma.grad || mb.grad) && op.differentiable();
        let n = shape.n();
        if n > RESERVE_ABOVE {
            self.charge(n as u64)?;
            self.reserve(self.payload_bytes(n, varying))?;
        } else {
            self.charge_small((n as u64).saturating_sub(1));
        }
        let out = self.lanes.alloc(n, varying, grad);
        kernels::binary(&mut self.lanes, &self.masks, self.mask, op, out, a, bq);
        if self.recording && (ma.grad || mb.grad) && !grad {
            self.guard(Guard::Binary(op), out, a, bq);
        }
        if grad {
            self.tape.push(TapeOp::Binary(op), out, a, bq, self.mask);
        }
        Ok(shape.value(out))
    }

    fn map_bool(&mut self, p: PayloadId, t: BoolTest) -> Result<Value> {
        let m = self.lanes.meta(p);
        let v = if !m.varying {
            self.bool_value(t.holds(self.get(p, 0, 0)))
        } else {
            let out = self.lanes.alloc(1, true, false);
            for &l in self.masks.lanes(self.mask) {
                let x = self.lanes.get(p, 0, l as usize);
                self.lanes
                    .set(out, 0, l as usize, f64::from(u8::from(t.holds(x))));
            }
            Value::Bool(out)
        };
        if self.recording && m.grad {
            let out = v.payload().unwrap_or(self.false_p);
            self.guard(Guard::Test(t), out, p, p);
        }
        Ok(v)
    }

    fn compare_chain(&mut self, c: Compare, base: usize, n: usize) -> Result<Value> {
        // Each lane compares up to n pairs.
        self.charge(n as u64)?;
        let mut varying = false;
        for i in 0..n {
            let v = self.arg(base, i);
            match self.numeric(v, "comparison")? {
                (p, Shape::Scalar) => varying |= self.lanes.is_varying(p),
                _ => return Err(type_error("comparison", "numbers", v)),
            }
        }
        let payload = |ev: &Self, i: usize| ev.arg(base, i).payload().unwrap_or(ev.false_p);
        let holds = |ev: &Self, l: usize| {
            (1..n).all(|i| {
                c.apply(
                    ev.get(payload(ev, i - 1), 0, l),
                    ev.get(payload(ev, i), 0, l),
                )
            })
        };
        let out = if !varying {
            let ok = holds(self, 0);
            if ok { self.true_p } else { self.false_p }
        } else {
            let out = self.lanes.alloc(1, true, false);
            let lanes = self.take_lanes(true);
            for &l in &lanes {
                let ok = holds(self, l as usize);
                self.set(out, 0, l as usize, f64::from(u8::from(ok)));
            }
            self.lane_buf = lanes;
            out
        };
        if self.recording && (0..n).any(|i| self.lanes.meta(payload(self, i)).grad) {
            self.guard_compare(c, base, n, out);
        }
        Ok(Value::Bool(out))
    }

    /// The value of an index argument, identical on every active lane.
    fn uniform_index(&mut self, v: Value, what: &str) -> Result<usize> {
        let Value::Num(p) = v else {
            return Err(type_error(what, "an index number", v));
        };
        self.taint_if_grad(p);
        let l0 = self.first_lane();
        let x = self.get(p, 0, if self.lanes.is_varying(p) { l0 } else { 0 });
        if self.lanes.is_varying(p) {
            for &l in self.masks.lanes(self.mask) {
                if self.get(p, 0, l as usize).trunc() != x.trunc() {
                    return Err(err(
                        ErrorKind::Index,
                        format!("{what}: the index differs across lanes"),
                    ));
                }
            }
        }
        if !(0.0..1e9).contains(&x) {
            return Err(err(
                ErrorKind::Index,
                format!("{what}: index {x} is not a non-negative integer"),
            ));
        }
        Ok(x as usize)
    }

    /// `eq?` (`deep` false) and `equal?` (`deep` true). Deep comparison walks both structures on
    /// an explicit stack, charging one work unit per cell pair, and compares each pair of cells
    /// once (shared structure costs linear time).
    fn eq(&mut self, x: Value, y: Value, deep: bool) -> Result<Value> {
        if !deep || self.pair_of_key(x).is_none() || self.pair_of_key(y).is_none() {
            return self.eq_leaf(x, y, deep);
        }
        let mut stack = vec![(x, y)];
        let mut seen: std::collections::HashSet<(u64, u64)> = std::collections::HashSet::new();
        let mut acc = self.bool_value(true);
        while let Some((x, y)) = stack.pop() {
            self.charge(1)?;
            let r = match (self.pair_of_key(x), self.pair_of_key(y)) {
                (Some(kx), Some(ky)) => {
                    if !seen.insert((kx, ky)) {
                        continue;
                    }
                    let (xa, xd) = self.pair_of(x).unwrap_or((Value::Nil, Value::Nil));
                    let (ya, yd) = self.pair_of(y).unwrap_or((Value::Nil, Value::Nil));
                    stack.push((xd, yd));
                    stack.push((xa, ya));
                    continue;
                }
                _ => self.eq_leaf(x, y, true)?,
            };
            acc = self.and_bools(acc, r)?;
            if let Value::Bool(p) = acc
                && !self.lanes.is_varying(p)
                && self.get(p, 0, 0) == 0.0
            {
                break;
            }
        }
        Ok(acc)
    }

    /// A key for a pair-like value (run-time pair or heap pair), for the visited set of `eq`.
    pub(super) fn pair_of_key(&self, v: Value) -> Option<u64> {
        match v {
            Value::Pair(i) => Some(u64::from(i)),
            Value::Datum(n) => match self.heap.node(n) {
                Node::Pair(..) => Some((1 << 32) | u64::from(n.0)),
                _ => None,
            },
            _ => None,
        }
    }

    /// `eq`/`equal?` of values that are not both pairs (deep: vectors elementwise, heap data
    /// structurally).
    fn eq_leaf(&mut self, x: Value, y: Value, deep: bool) -> Result<Value> {
        match (x, y) {
            (Value::Num(_), Value::Num(_)) | (Value::Bool(_), Value::Bool(_)) => {
                self.argstack.push(x);
                self.argstack.push(y);
                let base = self.argstack.len() - 2;
                let r = self.compare_chain(Compare::Eq, base, 2);
                self.argstack.truncate(base);
                r
            }
            (Value::Vector(a, n), Value::Vector(b, m)) if deep && n == m => {
                self.elementwise_equal(a, b, n as usize)
            }
            (Value::Matrix(a, r, c), Value::Matrix(b, r2, c2)) if deep && r == r2 && c == c2 => {
                self.elementwise_equal(a, b, r as usize * c as usize)
            }
            (Value::Datum(a), Value::Datum(b)) => {
                let same = a == b || (deep && self.datum_equal(a, b)?);
                Ok(self.bool_value(same))
            }
            _ => Ok(self.bool_value(x == y)),
        }
    }

    /// Structural equality of two heap data, on an explicit stack, each pair of cells once.
    fn datum_equal(&mut self, a: NodeId, b: NodeId) -> Result<bool> {
        let mut stack = vec![(a, b)];
        let mut seen: std::collections::HashSet<(NodeId, NodeId)> =
            std::collections::HashSet::new();
        while let Some((x, y)) = stack.pop() {
            self.charge(1)?;
            match (self.heap.node(x), self.heap.node(y)) {
                (Node::Pair(xa, xd), Node::Pair(ya, yd)) => {
                    if x != y && seen.insert((x, y)) {
                        stack.push((xa, ya));
                        stack.push((xd, yd));
                    }
                }
                (p, q) if p == q => {}
                _ => return Ok(false),
            }
        }
        Ok(true)
    }

    fn elementwise_equal(&mut self, a: PayloadId, b: PayloadId, n: usize) -> Result<Value> {
        self.charge(n as u64)?;
        self.taint_if_grad(a);
        self.taint_if_grad(b);
        let out = self.lanes.alloc(1, true, false);
        for &l in self.masks.lanes(self.mask).to_vec().iter() {
            let l = l as usize;
            let ok = (0..n).all(|e| self.get(a, e, l) == self.get(b, e, l));
            self.set(out, 0, l, f64::from(u8::from(ok)));
        }
        Ok(Value::Bool(out))
    }

    fn and_bools(&mut self, x: Value, y: Value) -> Result<Value> {
        let (Value::Bool(a), Value::Bool(b)) = (x, y) else {
            return Ok(self.bool_value(false));
        };
        self.taint_if_grad(a);
        self.taint_if_grad(b);
        if !self.lanes.is_varying(a) && !self.lanes.is_varying(b) {
            return Ok(self.bool_value(self.get(a, 0, 0) != 0.0 && self.get(b, 0, 0) != 0.0));
        }
        let out = self.lanes.alloc(1, true, false);
        for &l in self.masks.lanes(self.mask).to_vec().iter() {
            let l = l as usize;
            let ok = self.get(a, 0, l) != 0.0 && self.get(b, 0, l) != 0.0;
            self.set(out, 0, l, f64::from(u8::from(ok)));
        }
        Ok(Value::Bool(out))
    }

    // ------------------------------------------------------------ lists

    /// Converts one heap datum cell to a value.
    pub(super) fn datum_value(&mut self, n: NodeId) -> Value {
        match self.heap.node(n) {
            Node::Nil => Value::Nil,
            Node::Bool(b) => self.bool_value(b),
            Node::Num(x) => self.num(x),
            Node::Sym(s) => Value::Sym(s),
            Node::Pair(..) => Value::Datum(n),
        }
    }

    /// Car and cdr of a quoted pair.
    pub(super) fn datum_pair(&mut self, n: NodeId) -> Option<(Value, Value)> {
        match self.heap.node(n) {
            Node::Pair(a, d) => {
                let a = self.datum_value(a);
                let d = self.datum_value(d);
                Some((a, d))
            }
            _ => None,
        }
    }

    pub(super) fn pair_of(&mut self, v: Value) -> Option<(Value, Value)> {
        match v {
            Value::Pair(i) => Some(self.pairs[i as usize]),
            Value::Datum(n) => self.datum_pair(n),
            _ => None,
        }
    }

    fn car_cdr(&mut self, v: Value, car: bool, what: &str) -> Result<Value> {
        match self.pair_of(v) {
            Some((a, d)) => Ok(if car { a } else { d }),
            None => Err(type_error(what, "a pair", v)),
        }
    }

    fn list_items(&mut self, mut v: Value, what: &str) -> Result<Vec<Value>> {
        let mut out = Vec::new();
        loop {
            if out.len() % 4096 == 4095 {
                self.charge(4096)?;
            }
            match v {
                Value::Nil => {
                    self.charge((out.len() % 4096) as u64)?;
                    return Ok(out);
                }
                _ => match self.pair_of(v) {
                    Some((a, d)) => {
                        out.push(a);
                        v = d;
                    }
                    None => return Err(type_error(what, "a proper list", v)),
                },
            }
        }
    }

    fn list_from(&mut self, items: &[Value], tail: Value) -> Result<Value> {
        self.charge(items.len() as u64)?;
        let mut out = tail;
        for &x in items.iter().rev() {
            self.pairs.push((x, out));
            out = Value::Pair(self.pairs.len() as u32 - 1);
        }
        Ok(out)
    }

    /// `(eval datum)`: decodes run-time data in the global scope and evaluates it.
    fn eval_datum(&mut self, v: Value) -> Result<Value> {
        let mut heap = std::mem::take(&mut self.heap);
        let node = self.store_in_heap(&mut heap, v);
        self.heap = heap;
        let node = node?;
        let left = self.opts.max_steps.saturating_sub(self.steps);
        // Each decoded cell costs a form (and its node and list entries): about 64 bytes.
        let room = self.opts.max_memory.saturating_sub(self.memory_in_use()) / 64;
        let (units, kind) = if room < left {
            (room, ErrorKind::MemoryLimit)
        } else {
            (left, ErrorKind::StepBudget)
        };
        let mut decoder = Decoder::new(
            &self.heap,
            &mut self.codes,
            self.opts.dialect,
            self.opts.max_depth,
        )
        .with_budget(units, kind);
        let tops = decoder.top_level(&[node]);
        let spent = decoder.work_done();
        self.charge(spent)?;
        let tops = tops?;
        self.globals
            .resize(self.codes.global_names.len(), Value::Unassigned);
        let mut out = Value::Nil;
        for t in tops {
            out = self.eval_value(t, super::NO_FRAME)?;
        }
        Ok(out)
    }

    /// Copies run-time data into `heap` for `eval`, on an explicit stack, one work unit per cell;
    /// a run-time pair shared in several places is copied once (shared structure costs linear
    /// time, and the heap datum shares it too).
    fn store_in_heap(&mut self, heap: &mut Heap, v: Value) -> Result<NodeId> {
        enum Task {
            Visit(Value),
            Build(u32),
        }
        let mut tasks = vec![Task::Visit(v)];
        let mut done: Vec<NodeId> = Vec::new();
        let mut memo: std::collections::HashMap<u32, NodeId> = std::collections::HashMap::new();
        while let Some(t) = tasks.pop() {
            match t {
                Task::Visit(Value::Pair(i)) => {
                    if let Some(&n) = memo.get(&i) {
                        done.push(n);
                        continue;
                    }
                    self.charge(1)?;
                    let (a, d) = self.pairs[i as usize];
                    tasks.push(Task::Build(i));
                    tasks.push(Task::Visit(d));
                    tasks.push(Task::Visit(a));
                }
                Task::Visit(leaf) => {
                    self.charge(1)?;
                    let n = self.store_leaf(heap, leaf)?;
                    done.push(n);
                }
                Task::Build(i) => {
                    let d = done.pop().unwrap_or(Heap::NIL);
                    let a = done.pop().unwrap_or(Heap::NIL);
                    let n = heap.cons(a, d);
                    memo.insert(i, n);
                    done.push(n);
                }
            }
        }
        Ok(done.pop().unwrap_or(Heap::NIL))
    }

    /// One atom of `eval`'s data as a heap cell. A number that varies across lanes or carries a
    /// gradient is not copied (that would cut its lanes and its tape node): it is bound to a hidden
    /// global whose name the reader cannot produce (`#<eval-value P>`, P its payload), and the
    /// datum holds that name, so the decoded code reads the original payload exactly. (Inside a
    /// quoted datum such a number therefore reads back as that symbol.)
    fn store_leaf(&mut self, heap: &mut Heap, v: Value) -> Result<NodeId> {
        Ok(match v {
            Value::Nil => Heap::NIL,
            Value::Sym(s) => heap.alloc(Node::Sym(s)),
            Value::Datum(n) => n,
            Value::Num(p) | Value::Bool(p) => {
                let m = self.lanes.meta(p);
                if m.varying || (self.recording && m.grad) {
                    // One name per payload: storing it again reuses the binding, so the names
                    // (and global slots) are bounded by the payloads a run can hold.
                    let kind = if matches!(v, Value::Bool(_)) {
                        "bool"
                    } else {
                        "value"
                    };
                    let name = format!("#<eval-{kind} {}>", p.0);
                    let sym = heap.intern(&name);
                    let slot = self.codes.global_slot(sym) as usize;
                    if self.globals.len() <= slot {
                        self.globals.resize(slot + 1, Value::Unassigned);
                    }
                    self.globals[slot] = v;
                    return Ok(heap.alloc(Node::Sym(sym)));
                }
                let x = self.get(p, 0, 0);
                if matches!(v, Value::Bool(_)) {
                    heap.alloc(Node::Bool(x != 0.0))
                } else {
                    heap.num(x)
                }
            }
            other => return Err(type_error("eval", "program data", other)),
        })
    }

    // ------------------------------------------------------------ tensors

    /// Concatenates the elements of `parts` into one payload (records a `Concat` node).
    fn concat(&mut self, parts: &[PayloadId]) -> Result<PayloadId> {
        let n: usize = parts.iter().map(|&p| self.lanes.n_elems(p)).sum();
        let varying = parts.iter().any(|&p| self.lanes.is_varying(p));
        let grad = self.recording && parts.iter().any(|&p| self.lanes.meta(p).grad);
        self.charge(n as u64)?;
        self.reserve(self.payload_bytes(n, varying))?;
        let out = self.lanes.alloc(n, varying, grad);
        kernels::concat(&mut self.lanes, &self.masks, self.mask, out, parts);
        if grad {
            let start = self.tape.extra.len() as u32;
            self.tape.extra.extend_from_slice(parts);
            self.tape.push(
                TapeOp::Concat {
                    start,
                    len: parts.len() as u32,
                },
                out,
                parts[0],
                parts[0],
                self.mask,
            );
        }
        Ok(out)
    }

    /// The items of `(vec a b …)` / `(mat r1 r2 …)` as a range of the argument stack: the
    /// arguments themselves, or the elements of a single list argument pushed above them.
    fn items_range(&mut self, base: usize, n: usize, what: &str) -> Result<(usize, usize)> {
        if n == 1 {
            let v = self.arg(base, 0);
            if self.pair_of(v).is_some() {
                let items = self.list_items(v, what)?;
                let start = self.argstack.len();
                self.argstack.extend_from_slice(&items);
                return Ok((start, items.len()));
            }
        }
        Ok((base, n))
    }

    fn make_vec(&mut self, base: usize, n: usize) -> Result<Value> {
        let (start, len) = self.items_range(base, n, "vec")?;
        let mut parts = std::mem::take(&mut self.payload_buf);
        parts.clear();
        for i in start..start + len {
            let v = self.argstack[i];
            match self.numeric(v, "vec")? {
                (p, Shape::Scalar) => parts.push(p),
                _ => return Err(type_error("vec", "numbers", v)),
            }
        }
        let p = self.concat(&parts);
        let len = parts.len() as u32;
        let p = match p {
            Ok(p) => p,
            Err(e) => {
                self.payload_buf = parts;
                return Err(e);
            }
        };
        self.payload_buf = parts;
        Ok(Value::Vector(p, len))
    }

    fn make_mat(&mut self, base: usize, n: usize) -> Result<Value> {
        let (start, len) = self.items_range(base, n, "mat")?;
        let mut parts = std::mem::take(&mut self.payload_buf);
        parts.clear();
        let mut cols = None;
        for i in start..start + len {
            match self.argstack[i] {
                Value::Vector(p, c) => {
                    if cols.is_some_and(|k| k != c) {
                        return Err(err(
                            ErrorKind::Shape,
                            "mat: rows must be vectors of equal length",
                        ));
                    }
                    cols = Some(c);
                    parts.push(p);
                }
                other => return Err(type_error("mat", "row vectors", other)),
            }
        }
        let c = cols.unwrap_or(0);
        if parts.len() > u16::MAX as usize || c > u16::MAX as u32 {
            return Err(err(ErrorKind::Shape, "mat: matrix too large"));
        }
        let p = self.concat(&parts);
        let rows = parts.len() as u16;
        let p = match p {
            Ok(p) => p,
            Err(e) => {
                self.payload_buf = parts;
                return Err(e);
            }
        };
        self.payload_buf = parts;
        Ok(Value::Matrix(p, rows, c as u16))
    }

    fn gather(&mut self, a: PayloadId, start: usize, n: usize) -> PayloadId {
        let m = self.lanes.meta(a);
        let grad = self.recording && m.grad;
        let out = self.lanes.alloc(n, m.varying, grad);
        kernels::gather(&mut self.lanes, &self.masks, self.mask, out, a, start);
        if grad {
            self.tape.push(
                TapeOp::Gather {
                    start: start as u32,
                },
                out,
                a,
                a,
                self.mask,
            );
        }
        out
    }

    fn tensor_ref(&mut self, base: usize, n: usize) -> Result<Value> {
        let v = self.arg(base, 0);
        let i = self.uniform_index(self.arg(base, 1), "ref")?;
        let range = |i: usize, k: usize| {
            if i < k {
                Ok(())
            } else {
                Err(err(
                    ErrorKind::Index,
                    format!("ref: index {i} out of range 0..{k}"),
                ))
            }
        };
        match v {
            Value::Vector(p, len) if n == 2 => {
                range(i, len as usize)?;
                Ok(Value::Num(self.gather(p, i, 1)))
            }
            Value::Matrix(p, r, c) => {
                range(i, r as usize)?;
                self.charge(c as u64)?;
                if n == 3 {
                    let j = self.uniform_index(self.arg(base, 2), "ref")?;
                    range(j, c as usize)?;
                    Ok(Value::Num(self.gather(p, i * c as usize + j, 1)))
                } else {
                    Ok(Value::Vector(
                        self.gather(p, i * c as usize, c as usize),
                        c as u32,
                    ))
                }
            }
            Value::Vector(..) => Err(err(ErrorKind::Arity, "ref of a vector takes one index")),
            other => Err(type_error("ref", "a vector or matrix", other)),
        }
    }

    fn matvec(&mut self, a: PayloadId, sa: Shape, b: PayloadId, sb: Shape) -> Result<Value> {
        match (sa, sb) {
            (Shape::Matrix(m, k), Shape::Vector(k2)) if k as u32 == k2 => self.tensor(
                TensorOp::MatVec { m, n: k },
                a,
                Some(b),
                Shape::Vector(m as u32),
            ),
            _ => Err(shape_error("matvec", sa, sb)),
        }
    }

    /// Runs a per-lane tensor op and records it, after charging its multiply-adds and
    /// reserving its output (and the term list the kernels build for it).
    fn tensor(
        &mut self,
        op: TensorOp,
        a: PayloadId,
        b: Option<PayloadId>,
        shape: Shape,
    ) -> Result<Value> {
        let ma = self.lanes.meta(a);
        let mb = b.map(|b| self.lanes.meta(b));
        let varying = ma.varying || mb.is_some_and(|m| m.varying);
        let grad = self.recording && (ma.grad || mb.is_some_and(|m| m.grad));
        let n_out = shape.n();
        let (na, nb) = (ma.n as usize, mb.map_or(0, |m| m.n as usize));
        // Work: the multiply-adds (one per term), or the elements read or written.
        let n_terms = op.term_count(na, nb);
        let units = n_terms.max(na).max(n_out);
        if units <= RESERVE_ABOVE {
            self.charge_small(units as u64);
        } else {
            self.charge(units as u64)?;
            // Below the direct threshold the kernels keep one 24-byte term per multiply-add
            // (the tape keeps another when recording); above it they loop directly.
            let terms = if n_terms > crate::linalg::DIRECT_TERMS {
                0
            } else {
                (n_terms as u64).saturating_mul(if grad { 48 } else { 24 })
            };
            self.reserve(self.payload_bytes(n_out, varying).saturating_add(terms))?;
        }
        let out = self.lanes.alloc(n_out, varying, grad);
        kernels::tensor(
            &mut self.lanes,
            &self.masks,
            self.mask,
            &mut self.term_cache,
            &mut self.fbuf,
            op,
            out,
            a,
            b,
        );
        if grad {
            self.tape
                .push(TapeOp::Tensor(op), out, a, b.unwrap_or(a), self.mask);
        }
        Ok(shape.value(out))
    }

    fn det_family(&mut self, p: Prim, v: Value) -> Result<Value> {
        let (a, sa) = self.tensor_arg(v, p.name())?;
        let Shape::Matrix(r, c) = sa else {
            return Err(type_error(p.name(), "a square matrix", v));
        };
        if r != c {
            return Err(err(
                ErrorKind::Shape,
                format!("{} needs a square matrix, got {r}x{c}", p.name()),
            ));
        }
        let m = r as usize;
        let ma = self.lanes.meta(a);
        let grad = self.recording && ma.grad;
        if m * m + 2 > RESERVE_ABOVE {
            self.charge((m as u64).pow(3))?;
            self.reserve(self.payload_bytes(m * m + 2, ma.varying))?;
        } else {
            self.charge_small((m as u64).pow(3));
        }
        let inv = self.lanes.alloc(m * m, ma.varying, grad && p != Prim::Inv);
        let det = self.lanes.alloc(1, ma.varying, false);
        // `det` sits right after `inv`: the replay finds it there (see `replay.rs`).
        debug_assert_eq!(det.0, inv.0 + 1);
        kernels::det_inv(
            &mut self.lanes,
            &self.masks,
            self.mask,
            &mut self.fbuf,
            m,
            a,
            inv,
            det,
        );
        let abs = self.opts.dialect == Dialect::Reference;
        match p {
            Prim::Inv => {
                if grad {
                    self.lanes.meta[inv.0 as usize].grad = true;
                    self.tape
                        .push(TapeOp::Tensor(TensorOp::Inv { m: r }), inv, a, a, self.mask);
                }
                Ok(Value::Matrix(inv, r, r))
            }
            Prim::Det => {
                self.lanes.meta[det.0 as usize].grad = grad;
                if grad {
                    self.tape.push(
                        TapeOp::Tensor(TensorOp::Det { m: r }),
                        det,
                        a,
                        inv,
                        self.mask,
                    );
                }
                Ok(Value::Num(det))
            }
            _ => {
                let out = self.lanes.alloc(1, ma.varying, grad);
                kernels::log_det(&mut self.lanes, &self.masks, self.mask, det, out, abs);
                if grad {
                    self.tape.push(
                        TapeOp::Tensor(TensorOp::LogDet { m: r, abs }),
                        out,
                        a,
                        inv,
                        self.mask,
                    );
                }
                Ok(Value::Num(out))
            }
        }
    }

    /// The lanes to compute on: the active lanes for a varying result, lane 0 for a uniform one.
    /// Hand the vector back through `lane_buf` to reuse its capacity.
    fn take_lanes(&mut self, varying: bool) -> Vec<u32> {
        let mut v = std::mem::take(&mut self.lane_buf);
        v.clear();
        if varying {
            v.extend_from_slice(self.masks.lanes(self.mask));
        } else {
            v.push(0);
        }
        v
    }

    // ------------------------------------------------------------ output

    /// Writes the per-lane value of `v` into `out`, reusing its buffer when the kind matches.
    pub(super) fn output_into(&mut self, v: Value, out: &mut Output) {
        let b = self.lanes.n_lanes();
        let mut buf = match std::mem::replace(out, Output::Bool(Vec::new())) {
            Output::Number(d) | Output::Vector { data: d, .. } | Output::Matrix { data: d, .. } => {
                d
            }
            _ => Vec::new(),
        };
        buf.clear();
        let (p, n) = match v {
            Value::Num(p) => (p, 1),
            Value::Vector(p, n) => (p, n as usize),
            Value::Matrix(p, r, c) => (p, r as usize * c as usize),
            Value::Bool(p) => {
                *out = Output::Bool((0..b).map(|l| self.get(p, 0, l) != 0.0).collect());
                return;
            }
            _ => {
                // Printed (and bounded) by `run_decoded` before the run finished.
                *out = Output::Other(std::mem::take(&mut self.shown));
                return;
            }
        };
        let m = self.lanes.meta(p);
        let off = m.off as usize;
        if n == 1 && m.varying {
            buf.extend(self.lanes.data[off..off + b].iter().map(|x| x.f64()));
        } else if n == 1 {
            buf.resize(b, self.lanes.data[off].f64());
        } else {
            for l in 0..b {
                for e in 0..n {
                    buf.push(self.get(p, e, l));
                }
            }
        }
        *out = match v {
            Value::Vector(_, n) => Output::Vector {
                len: n as usize,
                data: buf,
            },
            Value::Matrix(_, r, c) => Output::Matrix {
                rows: r as usize,
                cols: c as usize,
                data: buf,
            },
            _ => Output::Number(buf),
        };
    }

    /// The printed form of a value for lane 0 (structure is shared by all lanes): an explicit
    /// stack (any depth), one work unit per character, and at most `MAX_SHOW` bytes (beyond that,
    /// `ErrorKind::MemoryLimit`; shared structure would otherwise print exponentially). A list
    /// longer than 10,000 elements prints its first 10,000 and ` ...`.
    pub(super) fn show(&mut self, v: Value) -> Result<String> {
        #[derive(Clone, Copy)]
        enum Item {
            V(Value),
            N(NodeId),
        }
        enum Task {
            Item(Item),
            /// The rest of a list after `count` elements.
            Tail(Item, u32),
            Close,
        }
        let mut out = String::new();
        let mut stack = vec![Task::Item(Item::V(v))];
        let parts = |ev: &Self, it: Item| -> Option<(Item, Item)> {
            let n = match it {
                Item::V(Value::Pair(i)) => {
                    let (a, d) = ev.pairs[i as usize];
                    return Some((Item::V(a), Item::V(d)));
                }
                Item::V(Value::Datum(n)) | Item::N(n) => n,
                Item::V(_) => return None,
            };
            match ev.heap.node(n) {
                Node::Pair(a, d) => Some((Item::N(a), Item::N(d))),
                _ => None,
            }
        };
        let is_nil = |ev: &Self, it: Item| match it {
            Item::V(v) => v == Value::Nil,
            Item::N(n) => matches!(ev.heap.node(n), Node::Nil),
        };
        while let Some(task) = stack.pop() {
            let before = out.len();
            match task {
                Task::Item(it) => match parts(self, it) {
                    Some((a, d)) => {
                        out.push('(');
                        stack.push(Task::Tail(d, 1));
                        stack.push(Task::Item(a));
                    }
                    None => self.show_atom(it_value(it), &mut out),
                },
                Task::Tail(it, count) => {
                    if is_nil(self, it) {
                        out.push(')');
                    } else if let Some((a, d)) = parts(self, it) {
                        if count >= 10_000 {
                            out.push_str(" ...)");
                        } else {
                            out.push(' ');
                            stack.push(Task::Tail(d, count + 1));
                            stack.push(Task::Item(a));
                        }
                    } else {
                        out.push_str(" . ");
                        stack.push(Task::Close);
                        stack.push(Task::Item(it));
                    }
                }
                Task::Close => out.push(')'),
            }
            self.charge((out.len() - before) as u64)?;
            if out.len() > MAX_SHOW {
                return Err(err(
                    ErrorKind::MemoryLimit,
                    format!("printing the value would take more than {MAX_SHOW} bytes"),
                ));
            }
        }
        return Ok(out);

        fn it_value(it: Item) -> std::result::Result<Value, NodeId> {
            match it {
                Item::V(v) => Ok(v),
                Item::N(n) => Err(n),
            }
        }
    }

    /// Appends the text of an atom: a value (`Ok`) or a heap cell (`Err`).
    fn show_atom(&mut self, it: std::result::Result<Value, NodeId>, out: &mut String) {
        let v = match it {
            Ok(v) => v,
            Err(n) => {
                match self.heap.node(n) {
                    Node::Nil => out.push_str("()"),
                    Node::Bool(b) => out.push_str(if b { "#t" } else { "#f" }),
                    Node::Num(x) => out.push_str(&crate::print::number_to_string(x)),
                    Node::Sym(s) => out.push_str(self.heap.symbol_name(s)),
                    Node::Pair(..) => out.push_str("#<pair>"),
                }
                return;
            }
        };
        if let Some(p) = v.payload() {
            self.taint_if_grad(p);
        }
        match v {
            Value::Nil => out.push_str("()"),
            Value::Num(p) => out.push_str(&crate::print::number_to_string(self.get(p, 0, 0))),
            Value::Bool(p) => out.push_str(if self.get(p, 0, 0) != 0.0 { "#t" } else { "#f" }),
            Value::Sym(s) => out.push_str(self.heap.symbol_name(s)),
            Value::Datum(n) => out.push_str(&crate::print::display(&self.heap, n)),
            Value::Closure(_) => out.push_str("#<procedure>"),
            Value::Prim(p) => {
                out.push_str("#<primitive ");
                out.push_str(p.name());
                out.push('>');
            }
            Value::Unassigned => out.push_str("#<unassigned>"),
            Value::Vector(..) | Value::Matrix(..) => {
                out.push_str("#<");
                out.push_str(v.type_name());
                out.push('>');
            }
            Value::Pair(_) => out.push_str("#<pair>"),
        }
    }
}

/// The most bytes `show` writes (a program's printed result).
const MAX_SHOW: usize = 1 << 20;

#[cold]
fn shape_error(what: &str, a: Shape, b: Shape) -> Box<CoreError> {
    let d = |s: Shape| match s {
        Shape::Scalar => "a number".to_string(),
        Shape::Vector(n) => format!("a vector of {n}"),
        Shape::Matrix(r, c) => format!("a {r}x{c} matrix"),
    };
    err(
        ErrorKind::Shape,
        format!("{what} cannot combine {} with {}", d(a), d(b)),
    )
}
