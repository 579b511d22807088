//! The lane-batched compiled ceiling: `kalman2d_T80`'s negative log-likelihood and its gradient in
//! `q` and `r`, for blocks of lanes at once, in plain Rust, f64 and f32.
//!
//! Structure of arrays: every quantity of the filter (state, covariance, their tangents) is a
//! `[T; W]` over the `W` lanes of a block, and each step of the filter is one loop over the lanes,
//! which the compiler vectorises for the build's target (SSE2 on a default x86-64 build; AVX2 or
//! AVX-512 with `-C target-cpu=native`). The math is the model program's (general 2×2 closed forms,
//! no symmetry assumed, as [`ceiling`]), written as fast plain code would be: one division per step
//! (`S⁻¹ = adj(S)/det S`) and forward-mode tangents in `(q, r)` propagated through the matrix
//! identities (`dS⁻¹ = (adj dS − S⁻¹·d det S)/det S`, `d log det S = d(det S)/det S`, …), with no arithmetic on the
//! tangents of constants. The logarithm is fdlibm's (musl's `log`/`logf`) written over the lanes
//! so that it vectorises too, as a SIMD math library does (the interpreter calls `libm` per lane). f32 rounds every operation to f32 (observations and `(q, r)` rounded once; results widened).
//!
//! B lanes are processed in blocks of `W`; a last partial block is padded with copies of its last
//! lane, whose results are dropped (so below `W` lanes the per-lane cost is that of a full block).

use std::ops::{Add, Div, Mul, Neg, Sub};

#[cfg(test)]
use crate::ceiling;

/// Lanes per block in f64 (the fastest of 4, 8, 16 and 32 on the machine of
/// `results/history/BENCHMARKS-rounds.md`).
pub const LANES_F64: usize = 8;
/// Lanes per block in f32.
pub const LANES_F32: usize = 16;

/// A lane element: `f64` or `f32`.
pub trait Elem:
    Copy
    + Default
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    /// `v` rounded to this type.
    fn of(v: f64) -> Self;
    /// Natural logarithm, lane by lane (std's, `libm`).
    fn ln(self) -> Self;
    /// Natural logarithm of every lane in place, in a form the compiler vectorises (fdlibm's
    /// reduction and polynomial, as musl writes them, within an ulp of `ln`); lanes outside the
    /// positive normal range go to [`Elem::ln`].
    fn ln_lanes<const W: usize>(x: &mut [Self; W]);
    /// Widened to f64.
    fn wide(self) -> f64;
}

impl Elem for f64 {
    #[inline(always)]
    fn of(v: f64) -> f64 {
        v
    }
    #[inline(always)]
    fn ln(self) -> f64 {
        f64::ln(self)
    }
    #[inline(always)]
    fn wide(self) -> f64 {
        self
    }
    #[inline(always)]
    fn ln_lanes<const W: usize>(x: &mut [f64; W]) {
        // fdlibm's constants, by their bits.
        let ln2_hi = f64::from_bits(0x3fe6_2e42_fee0_0000);
        let ln2_lo = f64::from_bits(0x3dea_39ef_3579_3c76);
        let lg = [
            0x3fe5_5555_5555_5593,
            0x3fd9_9999_9997_fa04,
            0x3fd2_4924_9422_9359,
            0x3fcc_71c5_1d8e_78af,
            0x3fc7_4664_96cb_03de,
            0x3fc3_9a09_d078_c69f,
            0x3fc2_f112_df3e_5244,
        ]
        .map(f64::from_bits);
        let normal = x.iter().fold(true, |ok, v| {
            ok & (v.to_bits().wrapping_sub(1 << 52) < (0x7fe << 52))
        });
        if !normal {
            for v in x.iter_mut() {
                *v = v.ln();
            }
            return;
        }
        for v in x.iter_mut() {
            let ix = v.to_bits();
            let hx = (ix >> 32) + (0x3ff0_0000 - 0x3fe6_a09e);
            let k = ((hx >> 20) as i32 - 0x3ff) as f64;
            let hx = (hx & 0x000f_ffff) + 0x3fe6_a09e;
            let f = f64::from_bits((hx << 32) | (ix & 0xffff_ffff)) - 1.0;
            let hfsq = 0.5 * f * f;
            let s = f / (2.0 + f);
            let z = s * s;
            let w = z * z;
            let t1 = w * (lg[1] + w * (lg[3] + w * lg[5]));
            let t2 = z * (lg[0] + w * (lg[2] + w * (lg[4] + w * lg[6])));
            let r = t2 + t1;
            *v = s * (hfsq + r) + k * ln2_lo - hfsq + f + k * ln2_hi;
        }
    }
}

impl Elem for f32 {
    #[inline(always)]
    fn of(v: f64) -> f32 {
        v as f32
    }
    #[inline(always)]
    fn ln(self) -> f32 {
        f32::ln(self)
    }
    #[inline(always)]
    fn wide(self) -> f64 {
        f64::from(self)
    }
    #[inline(always)]
    fn ln_lanes<const W: usize>(x: &mut [f32; W]) {
        let ln2_hi = f32::from_bits(0x3f31_7180);
        let ln2_lo = f32::from_bits(0x3717_f7d1);
        let lg = [0x3f2a_aaaa, 0x3ecc_ce13, 0x3e91_e9ee, 0x3e78_9e26].map(f32::from_bits);
        let normal = x.iter().fold(true, |ok, v| {
            ok & (v.to_bits().wrapping_sub(1 << 23) < (0xfe << 23))
        });
        if !normal {
            for v in x.iter_mut() {
                *v = v.ln();
            }
            return;
        }
        for v in x.iter_mut() {
            let ix = v.to_bits() + (0x3f80_0000 - 0x3f35_04f3);
            let k = ((ix >> 23) as i32 - 0x7f) as f32;
            let f = f32::from_bits((ix & 0x007f_ffff) + 0x3f35_04f3) - 1.0;
            let s = f / (2.0 + f);
            let z = s * s;
            let w = z * z;
            let t1 = w * (lg[1] + w * lg[3]);
            let t2 = z * (lg[0] + w * lg[2]);
            let r = t2 + t1;
            let hfsq = 0.5 * f * f;
            *v = s * (hfsq + r) + k * ln2_lo - hfsq + f + k * ln2_hi;
        }
    }
}

/// One quantity over the `W` lanes of a block; every operation is a loop over the lanes.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct L<T, const W: usize>([T; W]);

macro_rules! lane_op {
    ($trait:ident, $method:ident, $op:tt) => {
        impl<T: Elem, const W: usize> $trait for L<T, W> {
            type Output = Self;
            #[inline(always)]
            fn $method(self, o: Self) -> Self {
                let mut out = self.0;
                for (x, &y) in out.iter_mut().zip(&o.0) {
                    *x = *x $op y;
                }
                L(out)
            }
        }
    };
}

lane_op!(Add, add, +);
lane_op!(Sub, sub, -);
lane_op!(Mul, mul, *);
lane_op!(Div, div, /);

impl<T: Elem, const W: usize> Neg for L<T, W> {
    type Output = Self;
    #[inline(always)]
    fn neg(self) -> Self {
        let mut out = self.0;
        for x in &mut out {
            *x = -*x;
        }
        L(out)
    }
}

impl<T: Elem, const W: usize> L<T, W> {
    #[inline(always)]
    fn splat(v: T) -> Self {
        L([v; W])
    }
}

/// Arithmetic on lane packs (the 2×2 helpers are written once for it).
trait Ar:
    Copy + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Neg<Output = Self>
{
}
impl<T: Elem, const W: usize> Ar for L<T, W> {}

/// A 2×2 matrix `[a00, a01, a10, a11]`.
type M2<A> = [A; 4];

#[inline(always)]
fn mm<A: Ar>(a: M2<A>, b: M2<A>) -> M2<A> {
    [
        a[0] * b[0] + a[1] * b[2],
        a[0] * b[1] + a[1] * b[3],
        a[2] * b[0] + a[3] * b[2],
        a[2] * b[1] + a[3] * b[3],
    ]
}

#[inline(always)]
fn mv<A: Ar>(a: M2<A>, v: [A; 2]) -> [A; 2] {
    [a[0] * v[0] + a[1] * v[1], a[2] * v[0] + a[3] * v[1]]
}

#[inline(always)]
fn madd<A: Ar>(a: M2<A>, b: M2<A>) -> M2<A> {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]]
}

#[inline(always)]
fn mneg<A: Ar>(a: M2<A>) -> M2<A> {
    [-a[0], -a[1], -a[2], -a[3]]
}

/// The filter's state over a block.
struct Block<T, const W: usize> {
    x: [L<T, W>; 2],
    p: M2<L<T, W>>,
    /// Tangents of `x` and `P`: `[d/dq, d/dr]`.
    dx: [[L<T, W>; 2]; 2],
    dp: [M2<L<T, W>>; 2],
    /// `Σ e·S⁻¹e` and its tangents.
    quad: L<T, W>,
    dquad: [L<T, W>; 2],
    /// `Σ log det S` and its tangents.
    logdet: L<T, W>,
    dlogdet: [L<T, W>; 2],
}

/// One filter step on every lane of `b` (with tangents when `GRAD`).
#[inline(always)]
fn step<T: Elem, const W: usize, const GRAD: bool>(
    b: &mut Block<T, W>,
    y: [L<T, W>; 2],
    q: L<T, W>,
    r: L<T, W>,
) {
    let one = L::<T, W>::splat(T::of(1.0));
    let p = b.p;
    let pp = [p[0] + q, p[1], p[2], p[3] + q];
    let s = [pp[0] + r, pp[1], pp[2], pp[3] + r];
    let det = s[0] * s[3] - s[1] * s[2];
    let inv = one / det;
    let sinv = [s[3] * inv, -(s[1] * inv), -(s[2] * inv), s[0] * inv];
    let k = mm(pp, sinv);
    let e = [y[0] - b.x[0], y[1] - b.x[1]];
    let se = mv(sinv, e);
    let ke = mv(k, e);
    let imk = [one - k[0], -k[1], -k[2], one - k[3]];
    b.quad = b.quad + (e[0] * se[0] + e[1] * se[1]);
    let mut ln = det.0;
    T::ln_lanes(&mut ln);
    b.logdet = b.logdet + L(ln);
    if GRAD {
        // One function per tangent with `G` fixed: a loop over the tangents kept them in memory,
        // indexed at run time, and selected `(cq, cr)` lane by lane (1.7× the C++ ceiling's
        // instructions under AVX-512).
        let st = Shared {
            s,
            sinv,
            inv,
            pp,
            k,
            imk,
            e,
            se,
        };
        tangent::<T, W, 0>(b, &st);
        tangent::<T, W, 1>(b, &st);
    }
    b.x = [b.x[0] + ke[0], b.x[1] + ke[1]];
    b.p = mm(imk, pp);
}

/// The values of one step that both tangents read.
struct Shared<A> {
    s: M2<A>,
    sinv: M2<A>,
    inv: A,
    pp: M2<A>,
    k: M2<A>,
    imk: M2<A>,
    e: [A; 2],
    se: [A; 2],
}

/// Tangent `G` (0: d/dq, 1: d/dr) of one step over the lanes of `b`.
#[inline(always)]
fn tangent<T: Elem, const W: usize, const G: usize>(b: &mut Block<T, W>, st: &Shared<L<T, W>>) {
    let (one, zero) = (L::splat(T::of(1.0)), L::splat(T::of(0.0)));
    let Shared {
        s,
        sinv,
        inv,
        pp,
        k,
        imk,
        e,
        se,
    } = *st;
    // d q / d q = 1 on tangent 0, d r / d r = 1 on tangent 1.
    let (cq, cr) = if G == 0 { (one, zero) } else { (zero, one) };
    let dp = b.dp[G];
    let dpp = [dp[0] + cq, dp[1], dp[2], dp[3] + cq];
    let ds = [dpp[0] + cr, dpp[1], dpp[2], dpp[3] + cr];
    let ddet = ds[0] * s[3] + s[0] * ds[3] - ds[1] * s[2] - s[1] * ds[2];
    // d(adj S / det S) = (adj dS − S⁻¹·d det S) / det S.
    let adj_ds = [ds[3], -ds[1], -ds[2], ds[0]];
    let dsinv = [
        (adj_ds[0] - sinv[0] * ddet) * inv,
        (adj_ds[1] - sinv[1] * ddet) * inv,
        (adj_ds[2] - sinv[2] * ddet) * inv,
        (adj_ds[3] - sinv[3] * ddet) * inv,
    ];
    let dk = madd(mm(dpp, sinv), mm(pp, dsinv));
    let de = [-b.dx[G][0], -b.dx[G][1]];
    let dse = madd2(mv(dsinv, e), mv(sinv, de));
    b.dquad[G] = b.dquad[G] + (de[0] * se[0] + de[1] * se[1] + e[0] * dse[0] + e[1] * dse[1]);
    b.dlogdet[G] = b.dlogdet[G] + ddet * inv;
    let dke = madd2(mv(dk, e), mv(k, de));
    b.dx[G] = [b.dx[G][0] + dke[0], b.dx[G][1] + dke[1]];
    b.dp[G] = madd(mm(imk, dpp), mm(mneg(dk), pp));
}

#[inline(always)]
fn madd2<A: Ar>(a: [A; 2], b: [A; 2]) -> [A; 2] {
    [a[0] + b[0], a[1] + b[1]]
}

/// The per-lane results of a lane-batched run: value and `[d/dq, d/dr]` per lane (gradients stay
/// zero after a forward-only run). Buffers are reused across runs.
#[derive(Clone, Debug, Default)]
pub struct LaneResults {
    /// Value per lane.
    pub value: Vec<f64>,
    /// Gradient per lane (zero when forward only).
    pub grad: Vec<[f64; 2]>,
}

/// One block: the `W` lanes starting at `start` (padded with the last lane), tangents when `GRAD`.
#[inline(always)]
fn block<T: Elem, const W: usize, const GRAD: bool>(
    obs: &[[f64; 2]],
    q: &[f64],
    r: &[f64],
    start: usize,
    out: &mut LaneResults,
) {
    let n = q.len();
    let lane = |i: usize| (start + i).min(n - 1);
    let (zero, one) = (L::splat(T::of(0.0)), L::splat(T::of(1.0)));
    let (mut qs, mut rs) = (zero, zero);
    for i in 0..W {
        qs.0[i] = T::of(q[lane(i)]);
        rs.0[i] = T::of(r[lane(i)]);
    }
    let mut b = Block::<T, W> {
        x: [zero; 2],
        p: [one, zero, zero, one],
        dx: [[zero; 2]; 2],
        dp: [[zero; 4]; 2],
        quad: zero,
        dquad: [zero; 2],
        logdet: zero,
        dlogdet: [zero; 2],
    };
    for y in obs {
        let y = [L::splat(T::of(y[0])), L::splat(T::of(y[1]))];
        step::<T, W, GRAD>(&mut b, y, qs, rs);
    }
    let value = b.logdet + b.quad;
    let grad = [b.dlogdet[0] + b.dquad[0], b.dlogdet[1] + b.dquad[1]];
    for i in 0..W.min(n - start) {
        out.value[start + i] = value.0[i].wide();
        if GRAD {
            out.grad[start + i] = [grad[0].0[i].wide(), grad[1].0[i].wide()];
        }
    }
}

#[inline(always)]
fn run<T: Elem, const W: usize>(
    obs: &[[f64; 2]],
    q: &[f64],
    r: &[f64],
    grad: bool,
    out: &mut LaneResults,
) {
    let n = q.len().min(r.len());
    out.value.resize(n, 0.0);
    out.grad.resize(n, [0.0; 2]);
    if !grad {
        out.grad.fill([0.0; 2]);
    }
    for start in (0..n).step_by(W) {
        if grad {
            block::<T, W, true>(obs, q, r, start, out);
        } else {
            block::<T, W, false>(obs, q, r, start, out);
        }
    }
}

/// The NLL (and with `grad` its gradient) at every lane's `(q[l], r[l])`, in f64, `LANES_F64` lanes
/// per block; results in `out` (resized to the lane count, no allocation once it has grown).
pub fn kalman_lanes_f64(obs: &[[f64; 2]], q: &[f64], r: &[f64], grad: bool, out: &mut LaneResults) {
    run::<f64, LANES_F64>(obs, q, r, grad, out);
}

/// As [`kalman_lanes_f64`], every operation in f32 (`LANES_F32` lanes per block).
pub fn kalman_lanes_f32(obs: &[[f64; 2]], q: &[f64], r: &[f64], grad: bool, out: &mut LaneResults) {
    run::<f32, LANES_F32>(obs, q, r, grad, out);
}

/// [`kalman_lanes_f64`] compiled for the widest vectors this processor has (AVX-512F or AVX2,
/// chosen at run time by `ndvm_core::widest`; the build's target elsewhere): what a
/// `-C target-cpu=native` build of this ceiling gives, in the default build. Same operations,
/// nothing fused: the same results, bit for bit.
pub fn kalman_lanes_f64_widest(
    obs: &[[f64; 2]],
    q: &[f64],
    r: &[f64],
    grad: bool,
    out: &mut LaneResults,
) {
    ndvm_core::widest::with_widest_vectors(LanesF64 {
        obs,
        q,
        r,
        grad,
        out,
    });
}

/// [`kalman_lanes_f64`]'s arguments, as the kernel `ndvm_core::widest` compiles in wider vectors.
struct LanesF64<'a> {
    obs: &'a [[f64; 2]],
    q: &'a [f64],
    r: &'a [f64],
    grad: bool,
    out: &'a mut LaneResults,
}

impl ndvm_core::widest::WideKernel for LanesF64<'_> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        run::<f64, LANES_F64>(self.obs, self.q, self.r, self.grad, self.out);
    }
}

/// A lane count at a given block width, for the width experiment of the bench's documentation.
pub fn kalman_lanes_f64_width<const W: usize>(
    obs: &[[f64; 2]],
    q: &[f64],
    r: &[f64],
    out: &mut LaneResults,
) {
    run::<f64, W>(obs, q, r, true, out);
}

/// The SIMD features the build's target enables (what the packs' loops can use).
pub fn simd_target() -> &'static str {
    if cfg!(target_feature = "avx512f") {
        "avx512f"
    } else if cfg!(target_feature = "avx2") {
        "avx2"
    } else if cfg!(target_feature = "sse2") {
        "sse2"
    } else {
        "none"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{default_seed_data, kalman};

    fn case() -> kalman::KalmanCase {
        kalman::KalmanCase::load(&default_seed_data())
            .unwrap_or_else(|e| panic!("{e} (see testdata/README.md; tests never skip)"))
    }

    /// 37 lanes: four full f64 blocks and a padded one, two full f32 blocks and a padded one.
    fn points() -> (Vec<f64>, Vec<f64>) {
        let q = (0..37).map(|l| 0.01 + 0.03 * l as f64).collect();
        let r = (0..37).map(|l| 1.0 / (1.0 + l as f64)).collect();
        (q, r)
    }

    fn rel(a: f64, b: f64) -> f64 {
        (a - b).abs() / b.abs()
    }

    #[test]
    fn f64_lanes_equal_the_scalar_ceiling() {
        // Oracle: the scalar ceiling (dual numbers, four divisions per step), lane by lane; the
        // lane kernel rounds differently (one division, tangents through matrix identities), so
        // relative 1e-12 (observed ≤ 1e-14); forward only gives the same values and zero gradients.
        let case = case();
        let (q, r) = points();
        let mut out = LaneResults::default();
        kalman_lanes_f64(&case.obs, &q, &r, true, &mut out);
        let mut fwd = LaneResults::default();
        kalman_lanes_f64(&case.obs, &q, &r, false, &mut fwd);
        let mut worst = 0.0f64;
        for l in 0..q.len() {
            let (v, g) = ceiling::kalman_nll_grad(&case.obs, q[l], r[l]);
            for (got, want) in [
                (out.value[l], v),
                (out.grad[l][0], g[0]),
                (out.grad[l][1], g[1]),
            ] {
                worst = worst.max(rel(got, want));
            }
            assert_eq!(fwd.value[l], out.value[l], "forward only, lane {l}");
            assert_eq!(fwd.grad[l], [0.0; 2]);
        }
        assert!(worst <= 1e-12, "relative {worst:e}");
        let mut w4 = LaneResults::default();
        kalman_lanes_f64_width::<4>(&case.obs, &q, &r, &mut w4);
        assert_eq!(w4.value, out.value, "block width changes nothing");
        assert_eq!(w4.grad, out.grad);
    }

    #[test]
    fn lanes_equal_the_interpreter() {
        // Oracle: the interpreter's `eval_grad` (reference dialect) on the same 37 lanes. f64:
        // relative 1e-9 (observed ≤ 3e-15); f32: relative 1e-4 on values and gradients (80 steps
        // of f32 rounding; observed ≤ 1.3e-6 in the bench sweep).
        let case = case();
        let (q, r) = points();
        let mut runner = kalman::KalmanRunner::new(&case, q.len(), true).unwrap();
        runner.set_params(&q, &r);
        runner.run(true).unwrap();
        let mut lanes64 = LaneResults::default();
        kalman_lanes_f64(&case.obs, &q, &r, true, &mut lanes64);
        let mut lanes32 = LaneResults::default();
        kalman_lanes_f32(&case.obs, &q, &r, true, &mut lanes32);
        let (mut worst64, mut worst32) = (0.0f64, 0.0f64);
        for l in 0..q.len() {
            let (v, g, fault) = runner.lane_result(l);
            assert!(!fault);
            for (k, want) in [v, g[0], g[1]].into_iter().enumerate() {
                let got64 = [lanes64.value[l], lanes64.grad[l][0], lanes64.grad[l][1]][k];
                let got32 = [lanes32.value[l], lanes32.grad[l][0], lanes32.grad[l][1]][k];
                worst64 = worst64.max(rel(got64, want));
                worst32 = worst32.max(rel(got32, want));
            }
        }
        assert!(worst64 <= 1e-9, "f64 lanes: relative {worst64:e}");
        assert!(worst32 <= 1e-4, "f32 lanes: relative {worst32:e}");
        assert!(worst32 > 0.0, "f32 really rounds");
    }

    #[test]
    fn lane_logarithm_is_within_an_ulp_of_std() {
        // Oracle: std's `ln` (glibc's correctly rounded-in-practice `log`), over 4000 values from
        // 1e-300 to 1e300 and around 1; specials (0, negatives, ∞, NaN, subnormals) go to std.
        let mut worst = (0.0f64, 0.0f64);
        for i in 0..4000 {
            let x = 10f64.powf(-300.0 + 600.0 * i as f64 / 3999.0);
            let near1 = 1.0 + (i as f64 - 2000.0) * 1e-4;
            for v in [x, near1] {
                let mut a = [v; 4];
                f64::ln_lanes(&mut a);
                let want = v.ln();
                let ulp = f64::EPSILON * want.abs().max(f64::MIN_POSITIVE);
                worst.0 = worst.0.max((a[0] - want).abs() / ulp);
                let v32 = v as f32;
                if v32.is_normal() {
                    let mut b = [v32; 8];
                    f32::ln_lanes(&mut b);
                    let want = v32.ln();
                    let ulp = f32::EPSILON * want.abs().max(f32::MIN_POSITIVE);
                    worst.1 = worst.1.max(f64::from((b[0] - want).abs() / ulp));
                }
            }
        }
        assert!(worst.0 <= 1.0 && worst.1 <= 1.0, "ulps: {worst:?}");
        let mut specials = [0.0, -1.0, f64::INFINITY, 1e-310];
        f64::ln_lanes(&mut specials);
        assert_eq!(specials[0], f64::NEG_INFINITY);
        assert!(specials[1].is_nan());
        assert_eq!(specials[2], f64::INFINITY);
        assert_eq!(specials[3], 1e-310f64.ln());
        let mut nan = [f32::NAN, 2.0];
        f32::ln_lanes(&mut nan);
        assert!(nan[0].is_nan() && nan[1] == 2f32.ln());
    }

    #[test]
    fn the_widest_build_gives_the_same_results() {
        // Same operations in wider vectors, nothing fused: the same bits, forward and with
        // tangents.
        let case = case();
        let (q, r) = points();
        let bits = |r: &LaneResults| -> Vec<u64> {
            let grads = r.grad.iter().flatten();
            r.value.iter().chain(grads).map(|x| x.to_bits()).collect()
        };
        for grad in [false, true] {
            let (mut want, mut got) = (LaneResults::default(), LaneResults::default());
            kalman_lanes_f64(&case.obs, &q, &r, grad, &mut want);
            kalman_lanes_f64_widest(&case.obs, &q, &r, grad, &mut got);
            assert_eq!(
                bits(&got),
                bits(&want),
                "{}",
                ndvm_core::widest::widest_vectors()
            );
        }
    }

    #[test]
    fn one_lane_and_reuse() {
        // A single lane (a padded block) equals the scalar ceiling; a reused buffer shrinks to the
        // new lane count.
        let case = case();
        let mut out = LaneResults::default();
        kalman_lanes_f64(&case.obs, &[0.1; 40], &[0.2; 40], true, &mut out);
        kalman_lanes_f64(&case.obs, &[case.q], &[case.r], true, &mut out);
        assert_eq!(out.value.len(), 1);
        let (v, g) = ceiling::kalman_nll_grad(&case.obs, case.q, case.r);
        assert!(rel(out.value[0], v) <= 1e-12, "{} vs {v}", out.value[0]);
        assert!(rel(out.grad[0][0], g[0]) <= 1e-12 && rel(out.grad[0][1], g[1]) <= 1e-12);
        kalman_lanes_f64(&case.obs, &[], &[], true, &mut out);
        assert!(out.value.is_empty());
    }
}
