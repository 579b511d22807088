//! `Real`: the element type of the lanes (`f64` or `f32`), with the arithmetic and the elementary
//! functions the kernels, the tape and the tensor ops are written against.
//!
//! Everything numeric in the runtime is generic over `Real`, so one source gives an `f64` and an
//! `f32` evaluator (see `api::Precision`); structure (tags, symbols, control) never
//! touches it. Values cross the API as `f64` both ways: inputs are rounded to the lane type once,
//! results and gradients are widened exactly.

use std::fmt::Debug;
use std::iter::Sum;
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Rem, Sub, SubAssign};

use crate::elementary::{self, Elementary};

/// A lane element: `f64` or `f32`. Each method is the type's own (`f32::sin` for `f32`), except
/// f64's `exp`, `ln`, `sin` and `cos`, which are `elementary`'s: the trait names them for generic
/// code.
pub(crate) trait Real:
    Copy
    + Default
    + Debug
    + PartialEq
    + PartialOrd
    + Send
    + Sync
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Rem<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + Sum
    + for<'a> Sum<&'a Self>
{
    /// Bytes per element.
    const BYTES: usize;
    const ZERO: Self;
    const ONE: Self;
    const NAN: Self;
    const NEG_INFINITY: Self;

    /// `x` rounded to this type (exact for `f64`).
    fn of(x: f64) -> Self;
    /// This value as an `f64` (always exact).
    fn f64(self) -> f64;
    /// `i` converted (exact for small integers).
    fn of_usize(i: usize) -> Self;
    /// The bits, widened to 64 (for bit-for-bit comparisons and hashing).
    fn bits(self) -> u64;

    /// `out[i] = f(xs[i])` over the shorter length, bit for bit the one-element method (`sin`,
    /// `exp`, …): the f64 lanes run `elementary::lanes`' vector copies.
    fn elementary_lanes(f: Elementary, xs: &[Self], out: &mut [Self]);
    /// Whether [`Real::elementary_lanes`] is vectorised (worth an extra pass to reach).
    const VECTOR_ELEMENTARY: bool;

    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tan(self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    fn abs(self) -> Self;
    fn tanh(self) -> Self;
    fn sinh(self) -> Self;
    fn cosh(self) -> Self;
    fn asin(self) -> Self;
    fn acos(self) -> Self;
    fn atan(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn round_ties_even(self) -> Self;
    fn trunc(self) -> Self;
    fn powf(self, y: Self) -> Self;
    fn atan2(self, y: Self) -> Self;
    fn max(self, y: Self) -> Self;
    fn is_finite(self) -> bool;
}

macro_rules! real_impl {
    ($t:ident, sin: $sin:path, cos: $cos:path, exp: $exp:path, ln: $ln:path, lanes: $lanes:path, vector: $vector:expr) => {
        impl Real for $t {
            const VECTOR_ELEMENTARY: bool = $vector;
            const BYTES: usize = std::mem::size_of::<$t>();
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NAN: Self = $t::NAN;
            const NEG_INFINITY: Self = $t::NEG_INFINITY;

            #[inline(always)]
            fn of(x: f64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn of_usize(i: usize) -> Self {
                i as $t
            }
            #[inline(always)]
            fn bits(self) -> u64 {
                self.to_bits() as u64
            }
            #[inline(always)]
            fn elementary_lanes(f: Elementary, xs: &[Self], out: &mut [Self]) {
                $lanes(f, xs, out)
            }
            #[inline(always)]
            fn sin(self) -> Self {
                $sin(self)
            }
            #[inline(always)]
            fn cos(self) -> Self {
                $cos(self)
            }
            #[inline(always)]
            fn tan(self) -> Self {
                $t::tan(self)
            }
            #[inline(always)]
            fn exp(self) -> Self {
                $exp(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                $ln(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                $t::sqrt(self)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                $t::abs(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                $t::tanh(self)
            }
            #[inline(always)]
            fn sinh(self) -> Self {
                $t::sinh(self)
            }
            #[inline(always)]
            fn cosh(self) -> Self {
                $t::cosh(self)
            }
            #[inline(always)]
            fn asin(self) -> Self {
                $t::asin(self)
            }
            #[inline(always)]
            fn acos(self) -> Self {
                $t::acos(self)
            }
            #[inline(always)]
            fn atan(self) -> Self {
                $t::atan(self)
            }
            #[inline(always)]
            fn floor(self) -> Self {
                $t::floor(self)
            }
            #[inline(always)]
            fn ceil(self) -> Self {
                $t::ceil(self)
            }
            #[inline(always)]
            fn round_ties_even(self) -> Self {
                $t::round_ties_even(self)
            }
            #[inline(always)]
            fn trunc(self) -> Self {
                $t::trunc(self)
            }
            #[inline(always)]
            fn powf(self, y: Self) -> Self {
                $t::powf(self, y)
            }
            #[inline(always)]
            fn atan2(self, y: Self) -> Self {
                $t::atan2(self, y)
            }
            #[inline(always)]
            fn max(self, y: Self) -> Self {
                $t::max(self, y)
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                $t::is_finite(self)
            }
        }
    };
}

// f64's exp, ln, sin and cos are this crate's (the same bits on every machine, vectorised); f32's
// are the C library's.
real_impl!(
    f64,
    sin: elementary::sin,
    cos: elementary::cos,
    exp: elementary::exp,
    ln: elementary::ln,
    lanes: elementary::lanes,
    vector: true
);
real_impl!(
    f32,
    sin: f32::sin,
    cos: f32::cos,
    exp: f32::exp,
    ln: f32::ln,
    lanes: f32_lanes,
    vector: false
);

/// [`Real::elementary_lanes`] of f32: the C library's, one element at a time.
fn f32_lanes(f: Elementary, xs: &[f32], out: &mut [f32]) {
    let g = match f {
        Elementary::Exp => f32::exp,
        Elementary::Ln => f32::ln,
        Elementary::Sin => f32::sin,
        Elementary::Cos => f32::cos,
    };
    out.iter_mut().zip(xs).for_each(|(o, &x)| *o = g(x));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip<R: Real>(x: f64) -> f64 {
        R::of(x).f64()
    }

    #[test]
    fn conversions_round_once_and_widen_exactly() {
        assert_eq!(roundtrip::<f64>(0.1), 0.1);
        assert_eq!(roundtrip::<f32>(0.1), 0.1f32 as f64);
        assert_ne!(roundtrip::<f32>(0.1), 0.1);
        assert_eq!(<f32 as Real>::of(1e40), f32::INFINITY);
        assert_eq!(<f32 as Real>::BYTES, 4);
        assert_eq!(<f32 as Real>::of(0.5).bits(), 0x3f00_0000);
    }

    #[test]
    fn functions_are_the_types_own_or_elementarys() {
        let x = 0.7f32;
        assert_eq!(Real::sin(x), x.sin());
        assert_eq!(Real::powf(x, 1.3), x.powf(1.3));
        assert_eq!(Real::exp(0.7f64), elementary::exp(0.7));
        assert_eq!(Real::sin(0.7f64), elementary::sin(0.7));
        assert_eq!(Real::ln(0.7f64), elementary::ln(0.7));
        assert_eq!(Real::cos(0.7f64), elementary::cos(0.7));
        assert_eq!(Real::cos(x), x.cos());
        assert_eq!(Real::ln(x), x.ln());
        let xs = [0.5f32, -3.0, 7.0];
        let mut out = [0.0f32; 3];
        f32::elementary_lanes(Elementary::Exp, &xs, &mut out);
        assert_eq!(out, xs.map(f32::exp));
    }
}
