//! Lane-parallel kernels of small matrix products (matmul, matvec, dot and outer of 2-element
//! shapes, both inputs varying) over every lane of a block: one pass over the lanes
//! per node and per adjoint, where the term kernels of `linalg.rs` make one pass per element.
//!
//! Each is the term form's arithmetic for one lane, unrolled: an output element is
//! `((0 + a₀b₀) + a₁b₁) + …` over `s`, an input adjoint `((d + g₀q₀) + g₁q₁) + …` over its terms in
//! term order, `d` the old adjoint or `0` when the region is fresh (`FRESH`). These are the
//! expressions and the order of accumulation of [`crate::linalg::terms_forward`] and
//! [`crate::linalg::terms_vjp`] (every coefficient is 1, so a term is `p · q`), hence the same bits;
//! `tests` below checks it against them on NaN, infinite and signed-zero lanes (every bit but
//! which of two NaNs an add returns, which follows the operand order the compiler picks for each
//! code shape).

#![allow(clippy::needless_range_loop)] // element indices mirror the maths

use crate::linalg::TensorOp;
use crate::real::Real;
use crate::widest::Width;

/// A product `A (M×K) · B (K×N)` (matvec: `N = 1`, dot: `M = N = 1`, outer: `K = 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dims {
    m: usize,
    k: usize,
    n: usize,
}

/// The product shape of `op` with inputs of `na` and `nb` elements, when it has a kernel here.
#[inline]
pub(crate) fn dims(op: TensorOp, na: usize, nb: usize) -> Option<Dims> {
    let d = match op {
        TensorOp::MatMul { m, k, n } => Dims {
            m: m as usize,
            k: k as usize,
            n: n as usize,
        },
        TensorOp::MatVec { m, n } => Dims {
            m: m as usize,
            k: n as usize,
            n: 1,
        },
        TensorOp::Dot if na == nb => Dims { m: 1, k: na, n: 1 },
        TensorOp::Outer => Dims { m: na, k: 1, n: nb },
        _ => return None,
    };
    let ok = d.m * d.k == na && d.k * d.n == nb;
    (ok && shape_id(d).is_some()).then_some(d)
}

/// The shapes with a kernel.
const SHAPES: [(usize, usize, usize); 4] = [(2, 2, 2), (2, 2, 1), (1, 2, 1), (2, 1, 2)];

#[inline]
fn shape_id(d: Dims) -> Option<usize> {
    SHAPES.iter().position(|&s| s == (d.m, d.k, d.n))
}

/// Calls `$f::<R, M, K, N, M·K, K·N, M·N>($args)` for the shape `$d`.
macro_rules! by_shape {
    ($d:expr, $f:ident :: <$($g:tt),*> ($($arg:expr),*)) => {
        match ($d.m, $d.k, $d.n) {
            (2, 2, 2) => $f::<$($g,)* 2, 2, 2, 4, 4, 4>($($arg),*),
            (2, 2, 1) => $f::<$($g,)* 2, 2, 1, 4, 2, 2>($($arg),*),
            (1, 2, 1) => $f::<$($g,)* 1, 2, 1, 2, 2, 1>($($arg),*),
            (2, 1, 2) => $f::<$($g,)* 2, 1, 2, 2, 2, 4>($($arg),*),
            _ => {}
        }
    };
}

/// `E` consecutive elements of `nl` lanes each from `x`, each sliced to exactly `nl`.
#[inline(always)]
fn elems<R: Real, const E: usize>(x: &[R], nl: usize) -> [&[R]; E] {
    let mut out = [&x[..0]; E];
    for (e, o) in out.iter_mut().enumerate() {
        *o = &x[e * nl..][..nl];
    }
    out
}

/// `E` consecutive elements of `nl` lanes each from `x`, as disjoint mutable slices of exactly
/// `nl`.
#[inline(always)]
fn elems_mut<R: Real, const E: usize>(x: &mut [R], nl: usize) -> [&mut [R]; E] {
    // Split off one element at a time, so each view's length is `nl` by construction (and the
    // lane loops over them need no bounds checks).
    let mut rest = &mut x[..E * nl];
    let mut out: [&mut [R]; E] = [(); E].map(|()| <&mut [R]>::default());
    for o in out.iter_mut() {
        let (e, tail) = std::mem::take(&mut rest).split_at_mut(nl);
        rest = tail;
        *o = e;
    }
    out
}

/// The forward of the product `d` over `nl` lanes: `a` holds `M·K` elements, `b` `K·N`, `out`
/// `M·N`, each `nl` lanes wide.
pub(crate) fn forward<R: Real>(d: Dims, a: &[R], b: &[R], out: &mut [R], nl: usize) {
    // SAFETY: `width()` names only an instruction set this processor has.
    unsafe { forward_on(crate::widest::width(), d, a, b, out, nl) }
}

/// [`forward`] compiled for `w`: a function of its own per instruction set, taking the slices as
/// arguments (measured faster than the same loops inside a `WideKernel`'s copy: Kalman B = 256
/// 2.30 → 2.15 µs per lane).
///
/// # Safety
/// The processor must have `w`'s instruction set.
unsafe fn forward_on<R: Real>(w: Width, d: Dims, a: &[R], b: &[R], out: &mut [R], nl: usize) {
    match w {
        // SAFETY: the processor has AVX-512F (this function's contract).
        #[cfg(target_arch = "x86_64")]
        Width::Avx512 => unsafe { forward_avx512(d, a, b, out, nl) },
        // SAFETY: the processor has AVX2 (this function's contract).
        #[cfg(target_arch = "x86_64")]
        Width::Avx2 => unsafe { forward_avx2(d, a, b, out, nl) },
        Width::Baseline => forward_shapes(d, a, b, out, nl),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn forward_avx512<R: Real>(d: Dims, a: &[R], b: &[R], out: &mut [R], nl: usize) {
    forward_shapes(d, a, b, out, nl);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn forward_avx2<R: Real>(d: Dims, a: &[R], b: &[R], out: &mut [R], nl: usize) {
    forward_shapes(d, a, b, out, nl);
}

/// [`forward`] with the shape made constants.
#[inline(always)]
fn forward_shapes<R: Real>(d: Dims, a: &[R], b: &[R], out: &mut [R], nl: usize) {
    by_shape!(d, forward_k::<R>(a, b, out, nl));
}

#[inline(always)]
fn forward_k<
    R: Real,
    const M: usize,
    const K: usize,
    const N: usize,
    const MK: usize,
    const KN: usize,
    const MN: usize,
>(
    a: &[R],
    b: &[R],
    out: &mut [R],
    nl: usize,
) {
    let (a, b) = (elems::<R, MK>(a, nl), elems::<R, KN>(b, nl));
    let out = elems_mut::<R, MN>(out, nl);
    for l in 0..nl {
        for r in 0..M {
            for c in 0..N {
                let mut acc = R::ZERO + a[r * K][l] * b[c][l];
                for s in 1..K {
                    acc += a[r * K + s][l] * b[s * N + c][l];
                }
                out[r * N + c][l] = acc;
            }
        }
    }
}

/// Accumulates the adjoints of the product `d`'s inputs over `nl` lanes from the output's `g`:
/// `da` (`M·K` elements) from `g` and `b`, then `db` (`K·N`) from `g` and `a`; `fresh[k]`: that
/// region's floats are stale and are written as if zeroed first.
#[allow(clippy::too_many_arguments)] // the two inputs, their adjoints and flags, the width
pub(crate) fn vjp<R: Real>(
    d: Dims,
    a: &[R],
    b: &[R],
    g: &[R],
    da: Option<&mut [R]>,
    db: Option<&mut [R]>,
    nl: usize,
    fresh: [bool; 2],
) {
    let w = crate::widest::width();
    // SAFETY: `width()` names only an instruction set this processor has.
    unsafe { vjp_on(w, d, [a, b, g], [da, db], nl, fresh) }
}

/// [`vjp`] compiled for `w` (as [`forward_on`]).
///
/// # Safety
/// The processor must have `w`'s instruction set.
unsafe fn vjp_on<R: Real>(
    w: Width,
    d: Dims,
    abg: [&[R]; 3],
    dadb: [Option<&mut [R]>; 2],
    nl: usize,
    fresh: [bool; 2],
) {
    let ([a, b, g], [da, db]) = (abg, dadb);
    match w {
        // SAFETY: the processor has AVX-512F (this function's contract).
        #[cfg(target_arch = "x86_64")]
        Width::Avx512 => unsafe { vjp_avx512(d, a, b, g, da, db, nl, fresh) },
        // SAFETY: the processor has AVX2 (this function's contract).
        #[cfg(target_arch = "x86_64")]
        Width::Avx2 => unsafe { vjp_avx2(d, a, b, g, da, db, nl, fresh) },
        Width::Baseline => vjp_baseline(d, a, b, g, da, db, nl, fresh),
    }
}

/// One copy of [`vjp_shapes`] as a function of its own, taking the slices as arguments, under
/// the attributes given (an instruction set, or none).
macro_rules! vjp_copy {
    ($(#[$attr:meta])* $name:ident) => {
        $(#[$attr])*
        #[allow(clippy::too_many_arguments)] // as vjp
        fn $name<R: Real>(
            d: Dims,
            a: &[R],
            b: &[R],
            g: &[R],
            da: Option<&mut [R]>,
            db: Option<&mut [R]>,
            nl: usize,
            fresh: [bool; 2],
        ) {
            vjp_shapes(d, a, b, g, da, db, nl, fresh);
        }
    };
}

vjp_copy!(
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    vjp_avx512
);
vjp_copy!(
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    vjp_avx2
);
vjp_copy!(
    #[inline(never)]
    vjp_baseline
);

/// [`vjp`] with the shape and flags made constants.
#[inline(always)]
#[allow(clippy::too_many_arguments)] // as vjp
fn vjp_shapes<R: Real>(
    d: Dims,
    a: &[R],
    b: &[R],
    g: &[R],
    da: Option<&mut [R]>,
    db: Option<&mut [R]>,
    nl: usize,
    fresh: [bool; 2],
) {
    if let Some(da) = da {
        if fresh[0] {
            by_shape!(d, vjp_a::<R, true>(b, g, da, nl));
        } else {
            by_shape!(d, vjp_a::<R, false>(b, g, da, nl));
        }
    }
    if let Some(db) = db {
        if fresh[1] {
            by_shape!(d, vjp_b::<R, true>(a, g, db, nl));
        } else {
            by_shape!(d, vjp_b::<R, false>(a, g, db, nl));
        }
    }
}

/// `da[r,s] (+)= Σ_c g[r,c] · b[s,c]`, `c` ascending (the terms of `a[r,s]` in term order).
#[inline(always)]
fn vjp_a<
    R: Real,
    const FRESH: bool,
    const M: usize,
    const K: usize,
    const N: usize,
    const MK: usize,
    const KN: usize,
    const MN: usize,
>(
    b: &[R],
    g: &[R],
    da: &mut [R],
    nl: usize,
) {
    let (b, g) = (elems::<R, KN>(b, nl), elems::<R, MN>(g, nl));
    let da = elems_mut::<R, MK>(da, nl);
    for l in 0..nl {
        for r in 0..M {
            for s in 0..K {
                let d = &mut da[r * K + s][l];
                let mut acc = if FRESH { R::ZERO } else { *d } + g[r * N][l] * b[s * N][l];
                for c in 1..N {
                    acc += g[r * N + c][l] * b[s * N + c][l];
                }
                *d = acc;
            }
        }
    }
}

/// `db[s,c] (+)= Σ_r g[r,c] · a[r,s]`, `r` ascending (the terms of `b[s,c]` in term order).
#[inline(always)]
fn vjp_b<
    R: Real,
    const FRESH: bool,
    const M: usize,
    const K: usize,
    const N: usize,
    const MK: usize,
    const KN: usize,
    const MN: usize,
>(
    a: &[R],
    g: &[R],
    db: &mut [R],
    nl: usize,
) {
    let (a, g) = (elems::<R, MK>(a, nl), elems::<R, MN>(g, nl));
    let db = elems_mut::<R, KN>(db, nl);
    for l in 0..nl {
        for s in 0..K {
            for c in 0..N {
                let d = &mut db[s * N + c][l];
                let mut acc = if FRESH { R::ZERO } else { *d } + g[c][l] * a[s][l];
                for r in 1..M {
                    acc += g[r * N + c][l] * a[r * K + s][l];
                }
                *d = acc;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linalg::{Strided, Term, group_terms, terms_forward, terms_vjp};

    /// Seeded values with zeros of both signs, infinities and NaNs among them.
    fn values<R: Real>(n: usize, seed: u64) -> Vec<R> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                match s % 23 {
                    0 => R::ZERO,
                    1 => -R::ZERO,
                    2 => R::of(f64::INFINITY),
                    3 => R::NEG_INFINITY,
                    4 => R::NAN,
                    k => R::of((k as f64 - 12.0) * 0.37 + (s >> 40) as f64 * 1e-7),
                }
            })
            .collect()
    }

    /// The bits of each float, every NaN as one: which of two NaNs an add returns follows the
    /// order the compiler gives its operands, which may differ between any two code shapes.
    fn bits<R: Real>(x: &[R]) -> Vec<u64> {
        x.iter()
            .map(|v| if v.f64().is_nan() { u64::MAX } else { v.bits() })
            .collect()
    }

    /// Every shape, in both precisions, at lane counts around the chunk width: forward and both
    /// adjoints (fresh and accumulating) bit for bit against the term kernels.
    fn same_as_terms<R: Real>() {
        let ops = [
            (TensorOp::MatMul { m: 2, k: 2, n: 2 }, 4, 4),
            (TensorOp::MatVec { m: 2, n: 2 }, 4, 2),
            (TensorOp::Dot, 2, 2),
            (TensorOp::Outer, 2, 2),
        ];
        for (op, na, nb) in ops {
            let d = dims(op, na, nb).expect("a kernel for every listed shape");
            let n_out = d.m * d.n;
            let mut terms: Vec<Term> = Vec::new();
            op.terms(na, nb, &mut terms);
            let (mut by_i, mut by_j) = (Vec::new(), Vec::new());
            group_terms(&terms, &mut by_i, &mut by_j);
            for nl in [2, 3, 8, 13, 64] {
                let seed = (na * 31 + nb * 7 + nl) as u64;
                let a = values::<R>(na * nl, seed);
                let b = values::<R>(nb * nl, seed + 1);
                let g = values::<R>(n_out * nl, seed + 2);
                fn view<R: Real>(x: &[R], nl: usize) -> Strided<'_, R> {
                    Strided {
                        data: x,
                        w: nl,
                        s: 1,
                    }
                }
                let mut want = values::<R>(n_out * nl, seed + 3);
                let mut got = values::<R>(n_out * nl, seed + 4);
                terms_forward(&terms, true, view(&a, nl), view(&b, nl), &mut want, nl);
                forward(d, &a, &b, &mut got, nl);
                assert_eq!(bits(&got), bits(&want), "{op:?} forward, {nl} lanes");
                for fresh in [false, true] {
                    let (da0, db0) = (values::<R>(na * nl, seed + 5), values::<R>(nb * nl, 6));
                    let (mut wa, mut wb) = (da0.clone(), db0.clone());
                    let (mut ga, mut gb) = (da0, db0);
                    let f = [fresh; 2];
                    let (sa, sb) = (view(&a, nl), view(&b, nl));
                    terms_vjp(
                        &by_i,
                        &by_j,
                        true,
                        sa,
                        sb,
                        &g,
                        Some(&mut wa),
                        Some(&mut wb),
                        nl,
                        f,
                    );
                    vjp(d, &a, &b, &g, Some(&mut ga), Some(&mut gb), nl, f);
                    assert_eq!(bits(&ga), bits(&wa), "{op:?} da, {nl} lanes, {fresh}");
                    assert_eq!(bits(&gb), bits(&wb), "{op:?} db, {nl} lanes, {fresh}");
                }
            }
        }
    }

    #[test]
    fn products_equal_the_term_kernels_bit_for_bit() {
        same_as_terms::<f64>();
        same_as_terms::<f32>();
    }

    /// Every shape's forward and VJPs give the baseline's bits at every vector width.
    #[test]
    fn products_give_the_same_bits_at_every_width() {
        use crate::widest::{assert_every_width_same_bits, available_widths, test_values};
        let nl = 37;
        for d in [(2, 2, 2), (2, 2, 1), (1, 2, 1), (2, 1, 2)].map(|(m, k, n)| Dims { m, k, n }) {
            let (a, b) = (
                test_values(d.m * d.k * nl, 31),
                test_values(d.k * d.n * nl, 32),
            );
            let g = test_values(d.m * d.n * nl, 33);
            let (old_a, old_b) = (test_values(a.len(), 34), test_values(b.len(), 35));
            assert_every_width_same_bits(&format!("{d:?} forward"), |w: Width| {
                assert!(available_widths().contains(&w));
                let mut out = vec![0.0; g.len()];
                // SAFETY: `w` is available (asserted above).
                unsafe { forward_on(w, d, &a, &b, &mut out, nl) };
                out
            });
            for fresh in [[false, false], [true, true]] {
                assert_every_width_same_bits(&format!("{d:?} vjp {fresh:?}"), |w: Width| {
                    assert!(available_widths().contains(&w));
                    let (mut da, mut db) = (old_a.clone(), old_b.clone());
                    let dadb = [Some(&mut da[..]), Some(&mut db[..])];
                    // SAFETY: `w` is available (asserted above).
                    unsafe { vjp_on(w, d, [&a, &b, &g], dadb, nl, fresh) };
                    [da, db].concat()
                });
            }
        }
    }

    #[test]
    fn only_listed_shapes_have_kernels() {
        assert!(dims(TensorOp::MatMul { m: 2, k: 3, n: 2 }, 6, 6).is_none());
        assert!(dims(TensorOp::Dot, 3, 3).is_none());
        assert!(dims(TensorOp::MatMul { m: 3, k: 3, n: 3 }, 9, 9).is_none());
        assert!(dims(TensorOp::Cross, 3, 3).is_none());
        assert!(dims(TensorOp::MatVec { m: 2, n: 2 }, 4, 3).is_none());
        assert_eq!(
            dims(TensorOp::MatVec { m: 2, n: 2 }, 4, 2),
            Some(Dims { m: 2, k: 2, n: 1 })
        );
    }
}
