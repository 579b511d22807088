//! The elementary functions of f32 lanes — `exp`, `ln`, `sin`, `cos`, `tanh`, `sinh`, `cosh`,
//! `pow`, `atan2` — computed here instead of by the C library: each widens its f32 arguments to
//! f64, evaluates straight-line code (no tables, no fused multiply-adds, selects instead of
//! branches) whose error is far below an f32 ulp, and rounds once, so every result is faithful
//! (one of the two floats around the exact value) and the same bits come out one element at a
//! time and at every vector width; [`lanes`] runs the four [`Elementary`] functions over a slice
//! in the widest vectors the processor has (`widest`).
//!
//! The f64 arithmetic leaves room: each polynomial's relative error is at most 2⁻³¹·⁸ (fits and
//! errors: `testdata/elementary/fit32.py`), the reductions' much less, where faithful rounding
//! needs less than 2⁻²⁵. The algorithms are those of `elementary.rs` with shorter polynomials:
//! e^t = 2ⁿ (1 + p(r)), ln x = e ln 2 + 2 atanh(f / (2 + f)), sin/cos after subtracting k π/2 in
//! two pieces (|x| ≤ 2²⁰; beyond, and for infinities and NaNs, the C library's f64 `sin`/`cos`
//! rounded), and the others built from these (`expm1` where a difference would cancel).

use crate::elementary::{Elementary, MAGIC, PIO2_1, TRIG_LIMIT, estrin, quadrant};
use std::f64::consts::{FRAC_2_PI, FRAC_PI_2, FRAC_PI_4, LN_2, LOG2_E, PI, SQRT_2};

/// π/2 − `PIO2_1` rounded to 53 bits: with `PIO2_1` it leaves π/2 to 2⁻⁸⁸, enough for the
/// smallest remainder of an f32 below 2²⁰.
const PIO2_2: f64 = 6.077_100_506_506_192e-11;

/// (e^r − 1 − r) / r² on |r| ≤ ln 2 / 2: relative error of e^r − 1 below 2⁻³⁶·⁵.
const EXP_Q: [f64; 7] = [
    0.5,
    0.166_666_667_190_289_36,
    0.041_666_666_719_012_26,
    0.008_333_298_469_800_59,
    0.001_388_885_403_566_671,
    0.000_198_992_855_758_962_82,
    2.485_958_983_458_905_6e-5,
];

/// (sin r − r) / r³ in z = r², |r| ≤ π/4: relative error below 2⁻³⁵·⁶.
const SIN_S: [f64; 4] = [
    -0.166_666_666_638_530_44,
    0.008_333_331_873_837_089,
    -0.000_198_400_862_637_554_43,
    2.724_986_465_513_958_5e-6,
];

/// (cos r − 1) / r² in z = r², |r| ≤ π/4: relative error below 2⁻³¹·⁸.
const COS_C: [f64; 4] = [
    -0.499_999_999_690_946_55,
    0.041_666_650_634_930_84,
    -0.001_388_758_863_781_580_5,
    2.446_372_116_361_199_8e-5,
];

/// (2 atanh s − 2s) / s³ in z = s², |s| ≤ 3 − 2√2, for `ln`: relative error below 2⁻³⁵·⁸.
const LN_R: [f64; 4] = [
    0.666_666_665_544_061_8,
    0.400_001_219_141_492_8,
    0.285_508_123_825_901_46,
    0.233_306_966_724_557_8,
];

/// The same to degree 4, for `pow`, whose y · ln x must be right to 2⁻³⁴ in absolute terms up
/// to |y ln x| = 104: relative error below 2⁻⁴³·¹.
const LN_R_POW: [f64; 5] = [
    0.666_666_666_673_758_1,
    0.399_999_987_963_595_65,
    0.285_717_547_355_818,
    0.221_913_881_547_209_76,
    0.193_628_999_726_493_5,
];

/// (atan v − v) / v³ in z = v², |v| ≤ √2 − 1: relative error below 2⁻³³·⁵.
const ATAN_A: [f64; 6] = [
    -0.333_333_332_791_942_6,
    0.199_999_772_377_739_5,
    -0.142_841_500_656_340_1,
    0.110_713_441_179_007_68,
    -0.086_245_202_734_562_75,
    0.050_477_363_420_271_77,
];

/// e^t = s (1 + p) for t in [−104, 90] (f32's range and a little more): s = 2ⁿ, exact and
/// normal, and p = e^r − 1 with t = n ln 2 + r, |r| ≤ ln 2 / 2. Returning the parts lets
/// `expm1` be (s − 1) + s p without cancelling.
#[inline(always)]
fn exp_parts(t: f64) -> (f64, f64) {
    let k = t * LOG2_E + MAGIC;
    let n = k - MAGIC;
    // n ln 2 rounds by at most 2⁻⁴⁷ for |n| ≤ 151: far below what an f32 result can see.
    let r = t - n * LN_2;
    let p = r + (r * r) * estrin(r, EXP_Q);
    let n_bits = k.to_bits().wrapping_sub(MAGIC.to_bits());
    (f64::from_bits(n_bits.wrapping_add(1023) << 52), p)
}

/// `t` clamped to [lo, hi]; a NaN stays NaN (both comparisons fail).
#[inline(always)]
fn clamp(t: f64, lo: f64, hi: f64) -> f64 {
    let t = if t > hi { hi } else { t };
    if t < lo { lo } else { t }
}

/// eˣ, faithfully rounded: +∞ above 88.72…, +0 below −103.97…, NaN for a NaN.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    // e⁸⁹ overflows f32 and e⁻¹⁰⁴ rounds to 0, so the clamp changes no result.
    let (s, p) = exp_parts(clamp(x as f64, -104.0, 89.0));
    (s + s * p) as f32
}

/// e^t − 1 for t in [−104, 90], with a small relative error near 0 too.
#[inline(always)]
fn expm1(t: f64) -> f64 {
    let (s, p) = exp_parts(t);
    (s - 1.0) + s * p
}

/// The bits of √2/2: subtracting them from a positive float's bits leaves in the top twelve
/// the exponent e of x = 2ᵉ m with m in [√2/2, √2) (two's complement, as in musl's `log`).
const SQRT_HALF_BITS: u64 = 0x3fe6_a09e_667f_3bcd;

/// ln x for a positive normal `x` (every positive finite f32 is one as an f64), to the relative
/// error of the polynomial `r` (`LN_R` or `LN_R_POW`).
#[inline(always)]
fn ln_positive<const N: usize>(x: f64, r: [f64; N]) -> f64 {
    let bits = x.to_bits();
    // x = 2ᵉ m, m in [√2/2, √2), without a compare: m − 1 is then exact.
    let tmp = bits.wrapping_sub(SQRT_HALF_BITS);
    let m = f64::from_bits(bits.wrapping_sub(tmp & 0xfff0_0000_0000_0000));
    // e + 2048 in twelve bits, then as a float through the magic constant's mantissa.
    let e_bits = tmp.wrapping_add(0x800 << 52) >> 52;
    let e = f64::from_bits(e_bits.wrapping_add(MAGIC.to_bits())) - (MAGIC + 2048.0);
    // ln(1 + f) = 2 atanh s = 2s + s z R(z), s = f / (2 + f).
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    e * LN_2 + (2.0 * s + s * (z * estrin(z, r)))
}

/// The natural logarithm, faithfully rounded; −∞ at ±0, NaN below 0 and for a NaN, +∞ at +∞.
#[inline(always)]
pub(crate) fn ln(x: f32) -> f32 {
    let v = ln_positive(x as f64, LN_R) as f32;
    let v = if x == f32::INFINITY { x } else { v };
    let v = if x == 0.0 { f32::NEG_INFINITY } else { v };
    #[allow(clippy::eq_op)]
    let nan = x < 0.0 || x != x;
    if nan { f32::NAN } else { v }
}

/// sin x or cos x (`cos` picks) for |x| ≤ [`TRIG_LIMIT`]: x = k π/2 + r, where x − k `PIO2_1`
/// is exact (k < 2²⁰, `PIO2_1` of 33 bits), then the two polynomials and the quadrant.
#[inline(always)]
fn trig_near(x: f32, cos: bool) -> f32 {
    let xd = x as f64;
    let t = xd * FRAC_2_PI + MAGIC;
    let k = t - MAGIC;
    let r = (xd - k * PIO2_1) - k * PIO2_2;
    let z = r * r;
    let s = r + (r * z) * estrin(z, SIN_S);
    let c = 1.0 + z * estrin(z, COS_C);
    let q = t.to_bits();
    // sin x = [s, c, −s, −c][q], cos x = [c, −s, −c, s][q].
    if cos {
        quadrant(c, s, q, q.wrapping_add(1)) as f32
    } else {
        // ±0 keeps its sign (the polynomial's sum makes it +0).
        let v = quadrant(s, c, q, q) as f32;
        if x == 0.0 { x } else { v }
    }
}

/// Whether `sin`/`cos` of `x` is computed here (else by the C library).
#[inline(always)]
fn trig_in_reach(x: f32) -> bool {
    x.abs() <= TRIG_LIMIT as f32
}

/// sin x beyond [`TRIG_LIMIT`], of ±∞ and of NaN: the C library's f64 `sin`, rounded.
fn sin_far(x: f32) -> f32 {
    (x as f64).sin() as f32
}

/// cos x beyond [`TRIG_LIMIT`], of ±∞ and of NaN: the C library's f64 `cos`, rounded.
fn cos_far(x: f32) -> f32 {
    (x as f64).cos() as f32
}

/// sin x, faithfully rounded.
#[inline]
pub(crate) fn sin(x: f32) -> f32 {
    if trig_in_reach(x) {
        trig_near(x, false)
    } else {
        sin_far(x)
    }
}

/// cos x, faithfully rounded.
#[inline]
pub(crate) fn cos(x: f32) -> f32 {
    if trig_in_reach(x) {
        trig_near(x, true)
    } else {
        cos_far(x)
    }
}

/// `x` with the sign of `sign`, by bits (vectorises everywhere).
#[inline(always)]
fn with_sign_of(x: f32, sign: f32) -> f32 {
    f32::from_bits((x.to_bits() & 0x7fff_ffff) | (sign.to_bits() & 0x8000_0000))
}

/// tanh x = (e²ˣ − 1) / (e²ˣ + 1), faithfully rounded; ±1 beyond |x| = 9.01…, ±0 at ±0.
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    // tanh 10 rounds to 1 in f32.
    let em1 = expm1(2.0 * clamp(x as f64, -10.0, 10.0));
    let v = (em1 / (em1 + 2.0)) as f32;
    // expm1 gives +0 for −0.
    if x == 0.0 { x } else { v }
}

/// sinh x = (eˣ − e⁻ˣ) / 2 from expm1 |x| (no cancellation near 0), faithfully rounded; ±∞
/// beyond |x| = 89.41…, ±0 at ±0.
#[inline(always)]
pub(crate) fn sinh(x: f32) -> f32 {
    // sinh 90 overflows f32.
    let em1 = expm1(clamp(x.abs() as f64, 0.0, 90.0));
    let v = 0.5 * (em1 + em1 / (em1 + 1.0));
    with_sign_of(v as f32, x)
}

/// cosh x = (e^|x| + e^−|x|) / 2, faithfully rounded; +∞ beyond |x| = 89.41….
#[inline(always)]
pub(crate) fn cosh(x: f32) -> f32 {
    let (s, p) = exp_parts(clamp(x.abs() as f64, 0.0, 90.0));
    let e = s + s * p;
    (0.5 * (e + 1.0 / e)) as f32
}

/// The sign bit of an f64.
const SIGN: u64 = 1 << 63;

/// xʸ = e^(y ln |x|) with C's sign and special cases (`powf`): 1 for y = ±0 and for x = 1 (even
/// NaNs), 1 for x = −1 and y = ±∞, a negative result for a negative x (−0 and −∞ included) and
/// an odd integer y, NaN (`f32::NAN`) for a NaN otherwise and for a finite negative x and a
/// finite non-integer y; faithfully rounded. Every test is on the f64 values, so that the
/// selects stay one width.
#[inline(always)]
pub(crate) fn pow(x: f32, y: f32) -> f32 {
    let (x, y) = (x as f64, y as f64);
    let ax = x.abs();
    let l = ln_positive(ax, LN_R_POW);
    let l = if ax == f64::INFINITY { ax } else { l };
    let l = if ax == 0.0 { f64::NEG_INFINITY } else { l };
    // A NaN makes t NaN, which the clamp keeps; ±∞ clamps to an exact 0 or ∞.
    let (s, p) = exp_parts(clamp(y * l, -104.0, 89.0));
    let v = s + s * p;
    // Every f32 from 2²⁴ up is an even integer; below, y + MAGIC holds y rounded to an integer
    // in its low bits, whose last bit, moved to the sign, meets x's sign.
    let small = y.abs() < 16_777_216.0;
    let k = y + MAGIC;
    let whole = k - MAGIC == y;
    let sign = (k.to_bits() << 63) & x.to_bits();
    let v = v.to_bits() | if small & whole { sign } else { 0 };
    // One NaN whatever the NaN operands: where two meet, which survives would depend on the
    // operand order the compiler chose for each vector width.
    #[allow(clippy::eq_op)]
    let nan = (x < 0.0) & (ax < f64::INFINITY) & small & !whole | (x != x) | (y != y);
    let v = if nan { f64::NAN } else { f64::from_bits(v) };
    let one = (y == 0.0) | (x == 1.0) | ((ax == 1.0) & (y.abs() == f64::INFINITY));
    (if one { 1.0 } else { v }) as f32
}

/// The angle of (x, y) from the positive x axis, in [−π, π] (`atan2f`: `y` first), with C's
/// special cases (±0 and ±π by the signs of zeros, multiples of π/4 for infinities, `f32::NAN`
/// for a NaN); faithfully rounded. atan of min/max(|x|, |y|) = u, reduced to |v| ≤ √2 − 1 by
/// atan u = π/4 + atan((u − 1)/(u + 1)), with one division; the quadrant's π/2 − a and π − a
/// as a selected constant plus a with a selected sign (cheap selects: the baseline build
/// vectorises it).
#[inline(always)]
pub(crate) fn atan2(y: f32, x: f32) -> f32 {
    let (y, x) = (y as f64, x as f64);
    let (ax, ay) = (x.abs(), y.abs());
    let steep = ay > ax;
    let lo = if steep { ax } else { ay };
    let hi = if steep { ay } else { ax };
    // Two infinities clamp to a ratio of 1, two zeros to 0 / 1e-300.
    let lo = if lo > 1e300 { 1e300 } else { lo };
    let hi = clamp(hi, 1e-300, 1e300);
    // lo ± hi are exact: two f32 values within a factor of 2.5 of each other.
    let shift = lo > (SQRT_2 - 1.0) * hi;
    let v = (lo - if shift { hi } else { 0.0 }) / (hi + if shift { lo } else { 0.0 });
    let z = v * v;
    let a = v + (v * z) * estrin(z, ATAN_A);
    let a = a + if shift { FRAC_PI_4 } else { 0.0 };
    let a = f64::from_bits(a.to_bits() ^ if steep { SIGN } else { 0 });
    let a = (if steep { FRAC_PI_2 } else { 0.0 }) + a;
    // x's sign as ±1 (a float compare vectorises on every target, a 64-bit integer one not).
    let x_sign = f64::from_bits((x.to_bits() & SIGN) | 1f64.to_bits());
    let a = f64::from_bits(a.to_bits() ^ (x.to_bits() & SIGN));
    let a = (if x_sign < 0.0 { PI } else { 0.0 }) + a;
    let a = f64::from_bits(a.to_bits() | (y.to_bits() & SIGN));
    // One NaN whatever the NaN operands (as in `pow`).
    #[allow(clippy::eq_op)]
    let nan = (x != x) | (y != y);
    (if nan { f64::NAN } else { a }) as f32
}

/// `f` at one point: bit for bit what [`lanes`] gives there.
#[cfg(test)]
pub(crate) fn at(f: Elementary, x: f32) -> f32 {
    match f {
        Elementary::Exp => exp(x),
        Elementary::Ln => ln(x),
        Elementary::Sin => sin(x),
        Elementary::Cos => cos(x),
    }
}

/// Lanes per block of the trigonometric kernels: each block is computed vectorised, then any of
/// its lanes out of reach of the reduction is recomputed by the C library.
const TRIG_BLOCK: usize = 64;

/// `out[i] = f(xs[i])` (the shorter length), bit for bit [`at`].
#[inline(always)]
fn lanes_portable(f: Elementary, xs: &[f32], out: &mut [f32]) {
    let n = xs.len().min(out.len());
    let (xs, out) = (&xs[..n], &mut out[..n]);
    match f {
        Elementary::Exp => {
            for (o, &x) in out.iter_mut().zip(xs) {
                *o = exp(x);
            }
        }
        Elementary::Ln => {
            for (o, &x) in out.iter_mut().zip(xs) {
                *o = ln(x);
            }
        }
        Elementary::Sin => trig_blocks(xs, out, false, sin_far),
        Elementary::Cos => trig_blocks(xs, out, true, cos_far),
    }
}

/// `trig_near` over each block of lanes, then `far` on the block's lanes out of its reach.
#[inline(always)]
fn trig_blocks(xs: &[f32], out: &mut [f32], cos: bool, far: fn(f32) -> f32) {
    for (xb, ob) in xs.chunks(TRIG_BLOCK).zip(out.chunks_mut(TRIG_BLOCK)) {
        // A `for` loop: `for_each` over a zip left this loop in a baseline function of its own.
        for (o, &x) in ob.iter_mut().zip(xb) {
            *o = trig_near(x, cos);
        }
        if !xb.iter().fold(true, |all, &x| all & trig_in_reach(x)) {
            for (o, &x) in ob.iter_mut().zip(xb) {
                if !trig_in_reach(x) {
                    *o = far(x);
                }
            }
        }
    }
}

/// [`lanes`]' arguments, as the kernel `widest` compiles in the processor's widest vectors.
struct Lanes<'a> {
    f: Elementary,
    xs: &'a [f32],
    out: &'a mut [f32],
}

impl crate::widest::WideKernel for Lanes<'_> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        lanes_portable(self.f, self.xs, self.out)
    }
}

/// `out[i] = f(xs[i])` for i below the shorter length, in the widest vectors the processor has
/// (`widest`): the same bits as [`at`] at every point (the copies differ only in vector width,
/// and none contracts a multiply and an add). [`crate::real::Real::elementary_lanes`] of f32.
pub(crate) fn lanes(f: Elementary, xs: &[f32], out: &mut [f32]) {
    crate::widest::with_widest_vectors(Lanes { f, xs, out })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha8Rng;
    use rand_chacha::rand_core::{RngCore, SeedableRng};

    const ALL: [Elementary; 4] = [
        Elementary::Exp,
        Elementary::Ln,
        Elementary::Sin,
        Elementary::Cos,
    ];

    /// A one-argument function with its reference: the C library's f64 function, whose
    /// rounding to f32 is within half an ulp (or, when the f64 value rounds a second time,
    /// one) of the exact value.
    type Unary = (&'static str, fn(f32) -> f32, fn(f64) -> f64);

    const UNARY: [Unary; 7] = [
        ("exp", exp, f64::exp),
        ("ln", ln, f64::ln),
        ("sin", sin, f64::sin),
        ("cos", cos, f64::cos),
        ("tanh", tanh, f64::tanh),
        ("sinh", sinh, f64::sinh),
        ("cosh", cosh, f64::cosh),
    ];

    /// `x`'s place in the order of the floats (−0 just below +0, ∞ just above the largest).
    fn ordinal(x: f32) -> i64 {
        let b = x.to_bits();
        if b >> 31 == 1 {
            -i64::from(b & 0x7fff_ffff) - 1
        } else {
            i64::from(b)
        }
    }

    /// How many floats apart `got` and `want` are (0 for two NaNs, `u64::MAX` for one); a
    /// faithful result is at most 1 from the reference.
    fn ulps(got: f32, want: f32) -> u64 {
        match (got.is_nan(), want.is_nan()) {
            (true, true) => 0,
            (false, false) => ordinal(got).abs_diff(ordinal(want)),
            _ => u64::MAX,
        }
    }

    /// Asserts `got` is within 1 ulp of `want` (the reference rounded), with `want`'s class
    /// where that is a NaN or an exact zero's sign.
    fn check(what: &str, x: impl std::fmt::Debug, got: f32, want: f32) {
        let d = ulps(got, want);
        // ±0 against ∓0 is 1 apart: only a tiny nonzero result may stand for a zero.
        let zero_sign = got == 0.0 && want == 0.0 && got.to_bits() != want.to_bits();
        assert!(
            d <= 1 && !zero_sign,
            "{what} at {x:?}: {got:e} ({:#x}), reference {want:e} ({:#x})",
            got.to_bits(),
            want.to_bits()
        );
    }

    /// ±0, the smallest and largest subnormals and normals, ±∞, NaNs, and the edges of each
    /// function's range: overflow, underflow, saturation, the trigonometric reach, 2²⁴.
    fn special_points() -> Vec<f32> {
        let mut xs = vec![
            0.0,
            f32::from_bits(1),
            f32::from_bits(0x007f_ffff),
            f32::MIN_POSITIVE,
            f32::MAX,
            f32::INFINITY,
            f32::NAN,
            f32::EPSILON,
            1.0,
            0.5,
            2.0,
            88.72283,
            88.722_84,
            89.415_98,
            89.416,
            -87.336_55,
            -103.972_08,
            -103.972_09,
            9.010_913,
            TRIG_LIMIT as f32,
            f32::from_bits((TRIG_LIMIT as f32).to_bits() + 1),
            16_777_216.0,
            1e22,
            std::f32::consts::PI,
            std::f32::consts::FRAC_PI_2,
            std::f32::consts::FRAC_PI_4,
            // An f32 near a multiple of π/2, where the reduction cancels.
            103_993.0 * std::f32::consts::FRAC_PI_2,
        ];
        let negated: Vec<f32> = xs.iter().map(|&x| -x).collect();
        xs.extend(negated);
        xs.push(f32::from_bits(0xffc0_0001));
        xs
    }

    /// ChaCha8 points: random bit patterns and uniform points in the ranges the functions are
    /// used on.
    fn random_points(n: usize, seed: u64) -> Vec<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|i| {
                let u = (rng.next_u32() >> 8) as f32 / (1u32 << 24) as f32;
                match i % 4 {
                    0 => f32::from_bits(rng.next_u32()),
                    1 => (u * 2.0 - 1.0) * 110.0,
                    2 => (u * 2.0 - 1.0) * 2.5e6,
                    _ => (u * 2.0 - 1.0) * 8.0,
                }
            })
            .collect()
    }

    /// Every 97th f32 bit pattern (of both signs, so every binade), the specials and ChaCha8
    /// points.
    fn sweep() -> impl Iterator<Item = f32> {
        (0..=u32::MAX)
            .step_by(97)
            .map(f32::from_bits)
            .chain(special_points())
            .chain(random_points(200_000, 0xf32))
    }

    /// Asserts `f` is within 1 ulp of its reference at every point of [`sweep`].
    fn faithful_over_the_sweep((name, f, reference): Unary) {
        for x in sweep() {
            check(name, x, f(x), reference(x as f64) as f32);
        }
    }

    #[test]
    fn exp_is_faithful_over_a_dense_sweep() {
        faithful_over_the_sweep(UNARY[0]);
    }

    #[test]
    fn ln_is_faithful_over_a_dense_sweep() {
        faithful_over_the_sweep(UNARY[1]);
    }

    #[test]
    fn sin_is_faithful_over_a_dense_sweep() {
        faithful_over_the_sweep(UNARY[2]);
    }

    #[test]
    fn cos_is_faithful_over_a_dense_sweep() {
        faithful_over_the_sweep(UNARY[3]);
    }

    #[test]
    fn tanh_is_faithful_over_a_dense_sweep() {
        faithful_over_the_sweep(UNARY[4]);
    }

    #[test]
    fn sinh_is_faithful_over_a_dense_sweep() {
        faithful_over_the_sweep(UNARY[5]);
    }

    #[test]
    fn cosh_is_faithful_over_a_dense_sweep() {
        faithful_over_the_sweep(UNARY[6]);
    }

    /// (x, y) pairs for `pow`: x from the sweep with y chosen so that y ln|x| spans the
    /// representable results, integer y for negative x, and every pair of special values.
    fn pow_points() -> Vec<(f32, f32)> {
        let mut rng = ChaCha8Rng::seed_from_u64(0x90e);
        let mut pairs = Vec::new();
        for (i, x) in (0..=u32::MAX).step_by(977).map(f32::from_bits).enumerate() {
            let u = (rng.next_u32() >> 8) as f64 / (1u32 << 24) as f64;
            let l = (x as f64).abs().ln();
            let y = match i % 4 {
                0 => (u * 2.0 - 1.0) * 110.0 / l,
                1 => (u * 2.0 - 1.0) * 40.0,
                2 => ((u * 2.0 - 1.0) * 100.0 / l).round(),
                _ => f32::from_bits(rng.next_u32()) as f64,
            };
            pairs.push((x, y as f32));
        }
        let specials = special_points();
        let ys = [
            0.5,
            1.0,
            2.0,
            3.0,
            -1.0,
            -2.0,
            -3.0,
            1.5,
            -0.5,
            1.0 / 3.0,
            127.0,
            -149.0,
            16_777_215.0,
        ];
        for &x in &specials {
            for &y in specials.iter().chain(&ys).chain(&ys.map(|y| -y)) {
                pairs.push((x, y));
            }
        }
        pairs
    }

    #[test]
    fn pow_is_faithful_with_cs_special_cases() {
        for (x, y) in pow_points() {
            check("pow", (x, y), pow(x, y), (x as f64).powf(y as f64) as f32);
        }
        // Exact results stay exact, and the C99 table.
        assert_eq!(pow(2.0, 10.0), 1024.0);
        assert_eq!(pow(-2.0, 3.0), -8.0);
        assert_eq!(pow(4.0, 0.5), 2.0);
        assert_eq!(pow(2.0, -149.0), f32::from_bits(1));
        assert_eq!(pow(f32::NAN, 0.0), 1.0);
        assert_eq!(pow(f32::NAN, -0.0), 1.0);
        assert_eq!(pow(1.0, f32::NAN), 1.0);
        assert_eq!(pow(-1.0, f32::INFINITY), 1.0);
        assert_eq!(pow(-1.0, f32::NEG_INFINITY), 1.0);
        assert!(pow(-1.0, f32::NAN).is_nan() && pow(f32::NAN, 1.0).is_nan());
        assert!(pow(-8.0, 1.0 / 3.0).is_nan() && pow(-0.5, 2.5).is_nan());
        assert_eq!(pow(-0.0, -1.0), f32::NEG_INFINITY);
        assert_eq!(pow(-0.0, -2.0), f32::INFINITY);
        assert_eq!(pow(-0.0, 3.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(pow(-0.0, 0.5).to_bits(), 0);
        assert_eq!(pow(f32::NEG_INFINITY, -3.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(pow(f32::NEG_INFINITY, 3.0), f32::NEG_INFINITY);
        assert_eq!(pow(f32::NEG_INFINITY, 0.5), f32::INFINITY);
        assert_eq!(pow(0.5, f32::INFINITY).to_bits(), 0);
        assert_eq!(pow(0.5, f32::NEG_INFINITY), f32::INFINITY);
        assert_eq!(pow(-3.0, 16_777_216.0), f32::INFINITY);
        assert_eq!(pow(-1.0, 16_777_215.0), -1.0);
        assert_eq!(pow(-1.0, 33_554_432.0), 1.0);
        for &x in &special_points() {
            for &y in &special_points() {
                let (got, want) = (pow(x, y), x.powf(y));
                let exact = want.is_nan() || want.is_infinite() || want == 0.0 || want.abs() == 1.0;
                if exact {
                    check("pow (C library)", (x, y), got, want);
                    assert_eq!(got.is_nan(), want.is_nan());
                    assert!(
                        want.is_nan() || got.to_bits() == want.to_bits(),
                        "pow({x}, {y})"
                    );
                }
            }
        }
    }

    #[test]
    fn atan2_is_faithful_with_cs_special_cases() {
        let mut rng = ChaCha8Rng::seed_from_u64(0xa7a2);
        let xs = (0..=u32::MAX).step_by(97).map(f32::from_bits);
        for (i, y) in xs.enumerate() {
            // x: a random pattern, or near y's magnitude (the reduction's two branches).
            let r = rng.next_u32();
            let x = match i % 3 {
                0 => f32::from_bits(r),
                1 => y * (r as f32 / u32::MAX as f32 * 6.0 - 3.0),
                _ => f32::from_bits(y.to_bits() ^ (r & 0x80ff_ffff)),
            };
            check(
                "atan2",
                (y, x),
                atan2(y, x),
                (y as f64).atan2(x as f64) as f32,
            );
        }
        let specials = special_points();
        for &y in &specials {
            for &x in &specials {
                let (got, want) = (atan2(y, x), y.atan2(x));
                check("atan2", (y, x), got, (y as f64).atan2(x as f64) as f32);
                // The C library's correctly rounded multiples of π/4 and its zeros, exactly.
                if want.is_nan() || want == 0.0 || x.is_infinite() || y.is_infinite() {
                    assert!(
                        got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan(),
                        "atan2({y}, {x}) = {got}, C: {want}"
                    );
                }
            }
        }
        let pi = std::f32::consts::PI;
        assert_eq!(atan2(0.0, -0.0), pi);
        assert_eq!(atan2(-0.0, -0.0), -pi);
        assert_eq!(atan2(-0.0, 0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(atan2(f32::INFINITY, f32::NEG_INFINITY), 3.0 * pi / 4.0);
        assert_eq!(atan2(1.0, 1.0), pi / 4.0);
        assert_eq!(atan2(1.0, 0.0), pi / 2.0);
    }

    #[test]
    fn special_values() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(1.0), std::f32::consts::E);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(f32::NEG_INFINITY).to_bits(), 0);
        assert_eq!(exp(88.8), f32::INFINITY);
        assert_eq!(exp(-104.0).to_bits(), 0);
        assert_eq!(exp(-103.9), f32::from_bits(1));
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(ln(1.0).to_bits(), 0);
        // The float nearest e is below it by 3e-8 of 1: its logarithm rounds below 1.
        assert_eq!(ln(std::f32::consts::E), 0.999_999_94);
        assert_eq!(ln(0.0), f32::NEG_INFINITY);
        assert_eq!(ln(-0.0), f32::NEG_INFINITY);
        assert_eq!(ln(f32::INFINITY), f32::INFINITY);
        assert!(ln(-1.0).is_nan() && ln(f32::NEG_INFINITY).is_nan() && ln(f32::NAN).is_nan());
        assert_eq!(ln(f32::from_bits(1)), -103.278_93);
        assert_eq!(ln(f32::MAX), 88.722_84);
        assert_eq!(sin(0.0).to_bits(), 0);
        assert_eq!(sin(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(sin(-f32::from_bits(1)), -f32::from_bits(1));
        assert_eq!(cos(0.0), 1.0);
        assert_eq!(cos(-0.0), 1.0);
        // sin of the float nearest π is that float's distance from π.
        assert_eq!(sin(std::f32::consts::PI), -8.742_278e-8);
        assert!(sin(f32::INFINITY).is_nan() && cos(f32::NEG_INFINITY).is_nan());
        assert!(sin(f32::NAN).is_nan() && cos(f32::NAN).is_nan());
        assert_eq!(sin(1e22), 1e22f32.sin());
        assert_eq!(tanh(0.0).to_bits(), 0);
        assert_eq!(tanh(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(tanh(f32::INFINITY), 1.0);
        assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
        assert_eq!(tanh(9.1), 1.0);
        assert_eq!(tanh(-f32::from_bits(1)), -f32::from_bits(1));
        assert!(tanh(f32::NAN).is_nan());
        assert_eq!(sinh(0.0).to_bits(), 0);
        assert_eq!(sinh(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(sinh(f32::NEG_INFINITY), f32::NEG_INFINITY);
        assert_eq!(sinh(89.5), f32::INFINITY);
        assert_eq!(sinh(-f32::from_bits(1)), -f32::from_bits(1));
        assert!(sinh(f32::NAN).is_nan());
        assert_eq!(cosh(0.0), 1.0);
        assert_eq!(cosh(-0.0), 1.0);
        assert_eq!(cosh(f32::NEG_INFINITY), f32::INFINITY);
        assert_eq!(cosh(-89.5), f32::INFINITY);
        assert!(cosh(f32::NAN).is_nan());
    }

    /// Which of the functions without a slice entry [`Map`] runs.
    #[derive(Clone, Copy, Debug)]
    enum Other {
        Tanh,
        Sinh,
        Cosh,
        Pow,
        Atan2,
    }

    impl Other {
        #[inline(always)]
        fn at(self, x: f32, y: f32) -> f32 {
            match self {
                Other::Tanh => tanh(x),
                Other::Sinh => sinh(x),
                Other::Cosh => cosh(x),
                Other::Pow => pow(x, y),
                Other::Atan2 => atan2(x, y),
            }
        }
    }

    /// A lane loop over one of the other functions, as the evaluator's kernels run them.
    struct Map<'a> {
        f: Other,
        xs: &'a [f32],
        ys: &'a [f32],
        out: &'a mut [f32],
    }

    impl crate::widest::WideKernel for Map<'_> {
        type Output = ();
        #[inline(always)]
        fn run(self) {
            let f = self.f;
            for ((o, &x), &y) in self.out.iter_mut().zip(self.xs).zip(self.ys) {
                *o = f.at(x, y);
            }
        }
    }

    #[test]
    fn every_vector_width_gives_the_bits_of_one_point_at_a_time() {
        let mut xs = random_points(20_000, 0x5eed);
        xs.extend(special_points());
        let mut out = vec![0.0; xs.len()];
        for f in ALL {
            for w in crate::widest::available_widths() {
                out.fill(0.5);
                crate::widest::run_at(
                    w,
                    Lanes {
                        f,
                        xs: &xs,
                        out: &mut out,
                    },
                );
                for (&x, &y) in xs.iter().zip(&out) {
                    assert_eq!(y.to_bits(), at(f, x).to_bits(), "{f:?} at {x:e} ({w:?})");
                }
            }
            // The dispatched entry, on a slice that is not a multiple of any width or block.
            lanes(f, &xs[..1001], &mut out[..1001]);
            for (&x, &y) in xs.iter().zip(&out[..1001]) {
                assert_eq!(y.to_bits(), at(f, x).to_bits(), "{f:?} at {x:e}");
            }
        }
        // Random pairs, then every pair of special values (two NaNs meeting included).
        let mut ys = xs.clone();
        ys.rotate_left(7);
        for &a in &special_points() {
            for &b in &special_points() {
                xs.push(a);
                ys.push(b);
            }
        }
        out.resize(xs.len(), 0.0);
        for f in [
            Other::Tanh,
            Other::Sinh,
            Other::Cosh,
            Other::Pow,
            Other::Atan2,
        ] {
            for w in crate::widest::available_widths() {
                out.fill(0.5);
                let (xs, ys, out) = (&xs, &ys, &mut out);
                crate::widest::run_at(w, Map { f, xs, ys, out });
                for ((&x, &y), &z) in xs.iter().zip(ys).zip(out.iter()) {
                    let want = f.at(x, y);
                    assert_eq!(
                        z.to_bits(),
                        want.to_bits(),
                        "{f:?} at ({x:e}, {y:e}) ({w:?})"
                    );
                }
            }
        }
    }
}
