//! The elementary functions of f64 lanes — `exp`, `ln`, `sin`, `cos` — computed here instead of by
//! the C library: straight-line code (no branches, tables or fused multiply-adds) that the
//! compiler vectorises over lanes, so that one definition gives the same bits one element at a
//! time, at any vector width, and on every machine; [`lanes`] runs it over a slice in the widest
//! vectors the processor has (AVX-512, AVX2, or the baseline target's; `widest`).
//!
//! Accuracy: every result is one of the two doubles around the exact value (error < 1 ulp,
//! "faithful"), checked against correctly rounded values computed at 80 digits (mpmath) in
//! `testdata/elementary/` and against the C library over a million points per function. `sin`
//! and `cos` of |x| > 2²⁰ (or of a NaN or an infinity) go to the C library: their reduction below
//! is exact only while the multiple of π/2 has at most 20 bits.
//!
//! The algorithms are the textbook ones: a multiple of ln 2 or π/2 split off in pieces short enough
//! that each product is exact (Cody–Waite), then a polynomial on the remainder whose coefficients
//! are near-minimax fits (Chebyshev, mpmath; `testdata/elementary/fit.py` prints them).

/// 1.5 · 2⁵²: adding it to a float of magnitude below 2⁵¹ rounds that to an integer (to even),
/// which then sits in the low bits of the sum's representation.
pub(crate) const MAGIC: f64 = 6_755_399_441_055_744.0;

/// ln 2 to 32 significant bits (so that n · `LN2_HI` is exact for |n| < 2²¹), and the rest.
const LN2_HI: f64 = 0.693_147_180_601_954_5;
const LN2_LO: f64 = -4.200_915_072_681_084_6e-11;

/// π/2 = P1 + P2 + P3 + P4 to 152 bits: P1, P2, P3 with 33 significant bits, so that k · Pi is
/// exact for |k| < 2²⁰; P4 rounded to 53.
pub(crate) const PIO2_1: f64 = 1.570_796_326_734_125_6;
const PIO2_2: f64 = 6.077_100_506_303_966e-11;
const PIO2_3: f64 = 2.022_266_248_711_166_5e-21;
const PIO2_4: f64 = 8.478_427_660_368_9e-32;

/// Beyond this magnitude `sin` and `cos` call the C library.
pub const TRIG_LIMIT: f64 = 1_048_576.0;

/// The functions [`lanes`] maps over a slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elementary {
    /// eˣ.
    Exp,
    /// The natural logarithm.
    Ln,
    /// sin x.
    Sin,
    /// cos x.
    Cos,
}

impl Elementary {
    /// The function at one point: bit for bit what [`lanes`] gives there.
    pub fn at(self, x: f64) -> f64 {
        match self {
            Elementary::Exp => exp(x),
            Elementary::Ln => ln(x),
            Elementary::Sin => sin(x),
            Elementary::Cos => cos(x),
        }
    }
}

/// `c[0] + c[1] x + … + c[N−1] x^(N−1)` by Estrin's scheme: pairs `c[i] + c[i+1] x`, then pairs
/// of those with x², and so on. The same operations as Horner's rule in number, but a dependency
/// chain of ⌈log₂ N⌉ steps instead of N, which is what a one-lane (scalar) call waits for.
#[inline(always)]
pub(crate) fn estrin<const N: usize>(x: f64, c: [f64; N]) -> f64 {
    let mut v = c;
    let mut len = N;
    let mut power = x;
    while len > 1 {
        let half = len.div_ceil(2);
        for i in 0..half {
            v[i] = if 2 * i + 1 < len {
                v[2 * i] + v[2 * i + 1] * power
            } else {
                v[2 * i]
            };
        }
        len = half;
        power = power * power;
    }
    v[0]
}

/// eˣ, faithfully rounded; +∞ above 709.78…, +0 below −745.13…, NaN for a NaN.
#[inline(always)]
pub fn exp(x: f64) -> f64 {
    // Clamped so that 2ⁿ below stays within two normal factors; a NaN passes both tests.
    let xc = if x > 709.8 { 709.8 } else { x };
    let xc = if xc < -745.2 { -745.2 } else { xc };
    let t = xc * std::f64::consts::LOG2_E + MAGIC;
    let n = t - MAGIC;
    // x = n ln 2 + r, |r| ≤ ln 2 / 2.
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    // eʳ = 1 + r + r² Q(r).
    let q = estrin(
        r,
        [
            0.5,
            0.166_666_666_666_666_7,
            0.041_666_666_666_666_67,
            8.333_333_333_326_135e-3,
            1.388_888_888_888_374_8e-3,
            1.984_126_987_482_062_5e-4,
            2.480_158_732_554_774_2e-5,
            2.755_725_540_020_642_4e-6,
            2.755_727_364_311_03e-7,
            2.510_521_700_472_074_5e-8,
            2.091_468_696_808_687_7e-9,
        ],
    );
    let p = 1.0 + (r + (r * r) * q);
    // 2ⁿ as 2ⁿ¹ · 2ⁿ², both normal for n in [−1076, 1024]: the first product is exact, the
    // second rounds once (to a subnormal, or overflows to ∞).
    let n1 = (n * 0.5 + MAGIC) - MAGIC;
    let n1_bits = (n1 + MAGIC).to_bits().wrapping_sub(MAGIC.to_bits());
    let n2_bits = t
        .to_bits()
        .wrapping_sub(MAGIC.to_bits())
        .wrapping_sub(n1_bits);
    let s1 = f64::from_bits(n1_bits.wrapping_add(1023) << 52);
    let s2 = f64::from_bits(n2_bits.wrapping_add(1023) << 52);
    p * s1 * s2
}

/// The natural logarithm, faithfully rounded; −∞ at ±0, NaN below 0 and for a NaN, +∞ at +∞.
#[inline(always)]
pub fn ln(x: f64) -> f64 {
    // A subnormal is scaled by 2⁵² first.
    let sub = x < f64::MIN_POSITIVE;
    let xs = if sub { x * 4_503_599_627_370_496.0 } else { x };
    let bits = xs.to_bits();
    // x = 2ᵉ m, m in [√2/2, √2).
    let m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    let big = m > std::f64::consts::SQRT_2;
    let m = if big { m * 0.5 } else { m };
    // The biased exponent as a float, through the magic constant's mantissa.
    let e = f64::from_bits(((bits >> 52) & 0x7ff).wrapping_add(MAGIC.to_bits())) - (MAGIC + 1023.0);
    let e = e + if big { 1.0 } else { 0.0 } - if sub { 52.0 } else { 0.0 };
    // ln(1 + f) = f − f²/2 + s (f²/2 + R), s = f / (2 + f), R = 2s²/3 + 2s⁴/5 + …
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let r = estrin(
        z,
        [
            0.666_666_666_666_666_7,
            0.400_000_000_000_008_8,
            0.285_714_285_708_028_5,
            0.222_222_223_918_870_66,
            0.181_817_956_216_327_83,
            0.153_862_407_089_696_64,
            0.132_687_461_955_965_95,
            0.130_869_078_879_650_27,
        ],
    );
    let hfsq = 0.5 * f * f;
    let v = e * LN2_HI + (f - (hfsq - (s * (hfsq + z * r) + e * LN2_LO)));
    let v = if x == f64::INFINITY { x } else { v };
    let v = if x == 0.0 { f64::NEG_INFINITY } else { v };
    #[allow(clippy::eq_op)]
    let nan = x < 0.0 || x != x;
    if nan { f64::NAN } else { v }
}

/// sin and cos of the reduced argument, and the bits whose low two hold the quadrant.
/// Meaningful for |x| ≤ [`TRIG_LIMIT`].
#[inline(always)]
fn sin_cos_reduced(x: f64) -> (f64, f64, u64) {
    let t = x * std::f64::consts::FRAC_2_PI + MAGIC;
    let k = t - MAGIC;
    // x = k π/2 + (r + rl): the first difference is exact, the second's rounding error is kept
    // (TwoSum), the last two pieces are far below it.
    let a = x - k * PIO2_1;
    let b = k * PIO2_2;
    let r1 = a - b;
    let bv = a - r1;
    let e1 = (a - (r1 + bv)) + (bv - b);
    let tail = e1 - (k * PIO2_3 + k * PIO2_4);
    let r = r1 + tail;
    let rl = (r1 - r) + tail;
    let z = r * r;
    // sin r = r + r³ S(r²), cos r = 1 − r²/2 + r⁴ C(r²), |r| ≤ π/4; rl enters to first order.
    let s = -7.586_685_070_091_267e-13;
    let s = s * z + 1.605_853_141_458_901e-10;
    let s = s * z - 2.505_210_623_115_790_5e-8;
    let s = s * z + 2.755_731_921_933_545_3e-6;
    let s = s * z - 1.984_126_984_126_506e-4;
    let s = s * z + 8.333_333_333_333_331e-3;
    let s = s * z - 0.166_666_666_666_666_66;
    let sin_r = r + ((r * z) * s + rl * (1.0 - 0.5 * z));
    let c = -1.138_261_486_855_632_5e-11;
    let c = c * z + 2.087_614_602_468_974_7e-9;
    let c = c * z - 2.755_731_727_056_032_4e-7;
    let c = c * z + 2.480_158_729_876_343_3e-5;
    let c = c * z - 1.388_888_888_888_739_6e-3;
    let c = c * z + 0.041_666_666_666_666_664;
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    let cos_r = w + (((1.0 - w) - hz) + ((z * z) * c - r * rl));
    (sin_r, cos_r, t.to_bits())
}

/// `b` when bit 0 of `take_b` is set, else `a`; then negated when bit 1 of `neg` is set. Bit
/// operations, so that it vectorises on every target.
#[inline(always)]
pub(crate) fn quadrant(a: f64, b: f64, take_b: u64, neg: u64) -> f64 {
    let m = 0u64.wrapping_sub(take_b & 1);
    let v = (a.to_bits() & !m) | (b.to_bits() & m);
    f64::from_bits(v ^ ((neg & 2) << 62))
}

/// sin x for |x| ≤ [`TRIG_LIMIT`].
#[inline(always)]
fn sin_near(x: f64) -> f64 {
    let (s, c, q) = sin_cos_reduced(x);
    // sin x = [s, c, −s, −c][q]; ±0 keeps its sign (the reduction's sums make it +0)
    let v = quadrant(s, c, q, q);
    if x == 0.0 { x } else { v }
}

/// cos x for |x| ≤ [`TRIG_LIMIT`].
#[inline(always)]
fn cos_near(x: f64) -> f64 {
    let (s, c, q) = sin_cos_reduced(x);
    // cos x = [c, −s, −c, s][q]
    quadrant(c, s, q, q.wrapping_add(1))
}

/// Whether `sin`/`cos` of `x` is computed here (else by the C library).
#[inline(always)]
fn trig_near(x: f64) -> bool {
    x.abs() <= TRIG_LIMIT
}

/// sin x, faithfully rounded (|x| > 2²⁰, infinities and NaNs: the C library's).
#[inline]
pub fn sin(x: f64) -> f64 {
    if trig_near(x) { sin_near(x) } else { x.sin() }
}

/// cos x, faithfully rounded (|x| > 2²⁰, infinities and NaNs: the C library's).
#[inline]
pub fn cos(x: f64) -> f64 {
    if trig_near(x) { cos_near(x) } else { x.cos() }
}

/// Lanes per block of the trigonometric kernels: each block is computed vectorised, then any of
/// its lanes out of reach of the reduction is recomputed by the C library.
const TRIG_BLOCK: usize = 64;

/// `out[i] = f(xs[i])` (the shorter length), bit for bit [`Elementary::at`].
#[inline(always)]
fn lanes_portable(f: Elementary, xs: &[f64], out: &mut [f64]) {
    let n = xs.len().min(out.len());
    let (xs, out) = (&xs[..n], &mut out[..n]);
    match f {
        Elementary::Exp => out.iter_mut().zip(xs).for_each(|(o, &x)| *o = exp(x)),
        Elementary::Ln => out.iter_mut().zip(xs).for_each(|(o, &x)| *o = ln(x)),
        Elementary::Sin => trig_blocks(xs, out, sin_near, f64::sin),
        Elementary::Cos => trig_blocks(xs, out, cos_near, f64::cos),
    }
}

#[inline(always)]
fn trig_blocks(xs: &[f64], out: &mut [f64], near: fn(f64) -> f64, far: fn(f64) -> f64) {
    for (xb, ob) in xs.chunks(TRIG_BLOCK).zip(out.chunks_mut(TRIG_BLOCK)) {
        ob.iter_mut().zip(xb).for_each(|(o, &x)| *o = near(x));
        if !xb.iter().fold(true, |all, &x| all & trig_near(x)) {
            for (o, &x) in ob.iter_mut().zip(xb) {
                if !trig_near(x) {
                    *o = far(x);
                }
            }
        }
    }
}

/// [`lanes`]' arguments, as the kernel `widest` compiles in the processor's widest vectors.
struct Lanes<'a> {
    f: Elementary,
    xs: &'a [f64],
    out: &'a mut [f64],
}

impl crate::widest::WideKernel for Lanes<'_> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        lanes_portable(self.f, self.xs, self.out)
    }
}

/// `out[i] = f(xs[i])` for i below the shorter length, in the widest vectors the processor has
/// (`widest`): the same bits as [`Elementary::at`] at every point (the copies differ only in
/// vector width, and none contracts a multiply and an add).
pub fn lanes(f: Elementary, xs: &[f64], out: &mut [f64]) {
    crate::widest::with_widest_vectors(Lanes { f, xs, out })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Elementary; 4] = [
        Elementary::Exp,
        Elementary::Ln,
        Elementary::Sin,
        Elementary::Cos,
    ];

    /// The distance from `got` to `want` in units of `want`'s last place (0 for equal bits or
    /// two NaNs).
    fn ulps(got: f64, want: f64) -> f64 {
        if got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()) {
            return 0.0;
        }
        if want.is_infinite() || got.is_infinite() {
            return f64::INFINITY;
        }
        let a = want.abs().max(f64::MIN_POSITIVE * f64::EPSILON);
        let ulp = f64::from_bits(a.to_bits() + 1) - a;
        ((got - want) / ulp).abs()
    }

    /// Points that exercise every branch-free path: all binades (bit patterns), specials, and
    /// ranges each function is used on.
    fn points(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut xs = vec![
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -f64::NAN,
            f64::MIN_POSITIVE,
            5e-324,
            -5e-324,
            f64::MAX,
            709.8,
            -745.2,
            TRIG_LIMIT,
            -TRIG_LIMIT,
            TRIG_LIMIT * (1.0 + f64::EPSILON),
        ];
        while xs.len() < n {
            let u = (next() >> 11) as f64 / (1u64 << 53) as f64;
            xs.push(match xs.len() % 5 {
                0 => (u * 2.0 - 1.0) * 800.0,
                1 => (u * 2.0 - 1.0) * 2.5e6,
                2 => f64::from_bits(next()),
                3 => (u * 2.0 - 1.0) * 8.0,
                _ => u * 100.0,
            });
        }
        xs
    }

    #[test]
    fn every_vector_width_gives_the_bits_of_one_point_at_a_time() {
        let xs = points(20_000, 0x5eed);
        let mut out = vec![0.0; xs.len()];
        for f in ALL {
            for w in crate::widest::available_widths() {
                out.fill(0.5);
                let kernel = Lanes {
                    f,
                    xs: &xs,
                    out: &mut out,
                };
                // SAFETY: `available_widths` lists only what this processor has.
                unsafe { crate::widest::run_as(w, kernel) };
                for (&x, &y) in xs.iter().zip(&out) {
                    assert_eq!(y.to_bits(), f.at(x).to_bits(), "{f:?} at {x:e} ({w:?})");
                }
            }
            // The dispatched entry, on a slice that is not a multiple of any width or block.
            lanes(f, &xs[..1001], &mut out[..1001]);
            for (&x, &y) in xs.iter().zip(&out[..1001]) {
                assert_eq!(y.to_bits(), f.at(x).to_bits(), "{f:?} at {x:e}");
            }
        }
    }

    #[test]
    fn within_one_ulp_of_the_c_library_everywhere() {
        // The C library is within 1 ulp of the exact value, these within 1 too; so at most 2
        // apart, and in practice 1.
        let xs = points(400_000, 0xc11b);
        for f in ALL {
            let libm = |x: f64| match f {
                Elementary::Exp => x.exp(),
                Elementary::Ln => x.ln(),
                Elementary::Sin => x.sin(),
                Elementary::Cos => x.cos(),
            };
            let worst = xs
                .iter()
                .map(|&x| (ulps(f.at(x), libm(x)), x))
                .fold((0.0, 0.0), |a, b| if b.0 > a.0 { b } else { a });
            assert!(
                worst.0 <= 1.0,
                "{f:?}: {} ulps from libm at {:e}",
                worst.0,
                worst.1
            );
        }
    }

    #[test]
    fn special_values() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(f64::INFINITY), f64::INFINITY);
        assert_eq!(exp(f64::NEG_INFINITY).to_bits(), 0);
        assert_eq!(exp(710.0), f64::INFINITY);
        assert_eq!(exp(-746.0).to_bits(), 0);
        assert_eq!(exp(-745.0), 5e-324);
        assert!(exp(f64::NAN).is_nan());
        assert_eq!(ln(1.0).to_bits(), 0);
        assert_eq!(ln(0.0), f64::NEG_INFINITY);
        assert_eq!(ln(-0.0), f64::NEG_INFINITY);
        assert_eq!(ln(f64::INFINITY), f64::INFINITY);
        assert!(ln(-1.0).is_nan() && ln(f64::NEG_INFINITY).is_nan() && ln(f64::NAN).is_nan());
        assert_eq!(ln(5e-324), -744.440_071_921_381_2);
        assert_eq!(ln(std::f64::consts::E), 1.0);
        assert_eq!(sin(0.0).to_bits(), 0);
        assert_eq!(sin(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(sin(-5e-324), -5e-324);
        assert_eq!(cos(0.0), 1.0);
        assert_eq!(cos(-0.0), 1.0);
        // sin of the double nearest π is that double's distance from π.
        assert_eq!(sin(std::f64::consts::PI), 1.224_646_799_147_353_2e-16);
        assert!(sin(f64::INFINITY).is_nan() && cos(f64::NAN).is_nan());
        assert_eq!(sin(1e22), 1e22f64.sin());
    }
}
