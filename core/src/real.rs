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
use crate::elementary32;

/// A lane element: `f64` or `f32`. Each method is the type's own (`f64::tan` for `f64`), except
/// f64's `exp`, `ln`, `sin` and `cos`, which are `elementary`'s, and f32's `exp`, `ln`, `sin`,
/// `cos`, `tanh`, `sinh`, `cosh`, `powf` and `atan2`, which are `elementary32`'s: the trait names
/// them for generic code.
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
    /// `exp`, …): the lanes run `elementary::lanes`' or `elementary32::lanes`' vector copies.
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
    (
        $t:ident,
        sin: $sin:path,
        cos: $cos:path,
        exp: $exp:path,
        ln: $ln:path,
        tanh: $tanh:path,
        sinh: $sinh:path,
        cosh: $cosh:path,
        powf: $powf:path,
        atan2: $atan2:path,
        lanes: $lanes:path,
        vector: $vector:expr
    ) => {
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
                $tanh(self)
            }
            #[inline(always)]
            fn sinh(self) -> Self {
                $sinh(self)
            }
            #[inline(always)]
            fn cosh(self) -> Self {
                $cosh(self)
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
                $powf(self, y)
            }
            #[inline(always)]
            fn atan2(self, y: Self) -> Self {
                $atan2(self, y)
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

// f64's exp, ln, sin and cos are this crate's (the same bits on every machine, vectorised), its
// tanh, sinh, cosh, powf and atan2 the C library's; f32's are all this crate's (`elementary32`:
// faithful, branch-free, vectorised).
real_impl!(
    f64,
    sin: elementary::sin,
    cos: elementary::cos,
    exp: elementary::exp,
    ln: elementary::ln,
    tanh: f64::tanh,
    sinh: f64::sinh,
    cosh: f64::cosh,
    powf: f64::powf,
    atan2: f64::atan2,
    lanes: elementary::lanes,
    vector: true
);
real_impl!(
    f32,
    sin: elementary32::sin,
    cos: elementary32::cos,
    exp: elementary32::exp,
    ln: elementary32::ln,
    tanh: elementary32::tanh,
    sinh: elementary32::sinh,
    cosh: elementary32::cosh,
    powf: elementary32::pow,
    atan2: elementary32::atan2,
    lanes: elementary32::lanes,
    vector: true
);

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
        // f64: elementary's exp, ln, sin, cos; the C library's tanh, sinh, cosh, powf, atan2.
        let y = 0.7f64;
        assert_eq!(Real::exp(y), elementary::exp(y));
        assert_eq!(Real::sin(y), elementary::sin(y));
        assert_eq!(Real::ln(y), elementary::ln(y));
        assert_eq!(Real::cos(y), elementary::cos(y));
        assert_eq!(Real::tanh(y), y.tanh());
        assert_eq!(Real::sinh(y), y.sinh());
        assert_eq!(Real::cosh(y), y.cosh());
        assert_eq!(Real::powf(y, 1.3), y.powf(1.3));
        assert_eq!(Real::atan2(y, -2.0), y.atan2(-2.0));
        let xs = [0.5f64, -3.0, 7.0];
        let mut out = [0.0f64; 3];
        f64::elementary_lanes(Elementary::Exp, &xs, &mut out);
        assert_eq!(out, xs.map(elementary::exp));
        const { assert!(<f32 as Real>::VECTOR_ELEMENTARY && <f64 as Real>::VECTOR_ELEMENTARY) };
    }

    /// A few f32 inputs where `elementary32`'s `f` is not the correctly rounded value (it may be
    /// 1 ulp off, and rarely is) — where a nearly correctly rounding C library would differ from
    /// it: found in a sweep of every 97th bit pattern, stopping at the fourth.
    fn misrounded(f: impl Fn(f32) -> f32, exact: impl Fn(f64) -> f64) -> Vec<f32> {
        let found: Vec<f32> = (0..=u32::MAX)
            .step_by(97)
            .map(f32::from_bits)
            .filter(|&x| {
                let (got, want) = (f(x), exact(x as f64) as f32);
                got.to_bits() != want.to_bits() && !(got.is_nan() && want.is_nan())
            })
            .take(4)
            .collect();
        assert!(!found.is_empty(), "no point to tell the functions apart");
        found
    }

    #[test]
    fn f32_functions_are_elementary32s() {
        type Case = (&'static str, fn(f32) -> f32, fn(f32) -> f32, fn(f64) -> f64);
        let cases: [Case; 7] = [
            ("exp", Real::exp, elementary32::exp, f64::exp),
            ("ln", Real::ln, elementary32::ln, f64::ln),
            ("sin", Real::sin, elementary32::sin, f64::sin),
            ("cos", Real::cos, elementary32::cos, f64::cos),
            ("tanh", Real::tanh, elementary32::tanh, f64::tanh),
            ("sinh", Real::sinh, elementary32::sinh, f64::sinh),
            ("cosh", Real::cosh, elementary32::cosh, f64::cosh),
        ];
        for (name, real, own, exact) in cases {
            for x in misrounded(own, exact) {
                assert_eq!(real(x).to_bits(), own(x).to_bits(), "{name} at {x:e}");
            }
        }
        let pow_at = |x: f32| elementary32::pow(x, 1.37);
        for x in misrounded(pow_at, |x| x.powf(1.37f32 as f64)) {
            assert_eq!(
                Real::powf(x, 1.37).to_bits(),
                pow_at(x).to_bits(),
                "pow at {x:e}"
            );
        }
        let atan2_at = |x: f32| elementary32::atan2(x, -0.83);
        for x in misrounded(atan2_at, |x| x.atan2(-0.83f32 as f64)) {
            let real = Real::atan2(x, -0.83);
            assert_eq!(real.to_bits(), atan2_at(x).to_bits(), "atan2 at {x:e}");
        }
        let xs: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) * 0.37).collect();
        for f in [
            Elementary::Exp,
            Elementary::Ln,
            Elementary::Sin,
            Elementary::Cos,
        ] {
            let mut out = vec![0.0f32; xs.len()];
            f32::elementary_lanes(f, &xs, &mut out);
            for (&x, &y) in xs.iter().zip(&out) {
                let want = elementary32::at(f, x);
                assert!(y.to_bits() == want.to_bits() || (y.is_nan() && want.is_nan()));
            }
        }
    }
}
