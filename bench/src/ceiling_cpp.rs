//! The compiled C++ ceiling: `bench/cpp/kalman_lanes.cpp`, built by `bench/build.rs` with the
//! system compiler at `-O3 -march=native` when one is present, called over FFI.
//!
//! It is the strongest honest baseline the bench has: the lane ceiling's structure of arrays and
//! math, compiled by GCC or Clang for this processor's widest vectors, with FMA contraction
//! (`Cpp::Fast`); `Cpp::Exact` is the same source with contraction off, which gives the Rust lane
//! ceiling's bits (the check that the two compute the same thing).

use crate::ceiling_lanes::LaneResults;

/// Which build of the C++ source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cpp {
    /// The compiler's default contraction of `a*b + c` into FMA: the fastest.
    Fast,
    /// `-ffp-contract=off`: every operation rounded as the Rust ceiling rounds it.
    Exact,
}

/// Element type of the lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    /// Double precision, 8 lanes per block.
    F64,
    /// Single precision, 16 lanes per block (inputs rounded once, results widened).
    F32,
}

/// The compiler and flags the C++ ceiling was built with, or why it was not built.
pub fn built_with() -> Result<&'static str, &'static str> {
    match option_env!("NDVM_CPP_CEILING_COMPILER") {
        Some(c) => Ok(c),
        None => Err(option_env!("NDVM_CPP_CEILING_MISSING").unwrap_or("not built")),
    }
}

/// The vector width (bits) the C++ ceiling was compiled for, when built.
pub fn vector_bits() -> Option<u32> {
    imp::vector_bits()
}

/// The NLL and its gradient (with `grad`) at every lane's `(q[l], r[l])` into `out` (resized to
/// the lane count, no allocation once grown). False, and `out` untouched, when the C++ ceiling
/// was not built.
pub fn kalman_cpp(
    build: Cpp,
    elem: Elem,
    obs: &[[f64; 2]],
    (q, r): (&[f64], &[f64]),
    grad: bool,
    out: &mut LaneResults,
) -> bool {
    if vector_bits().is_none() {
        return false;
    }
    let n = q.len().min(r.len());
    out.value.resize(n, 0.0);
    out.grad.resize(n, [0.0; 2]);
    if !grad {
        out.grad.fill([0.0; 2]);
    }
    imp::call(build, elem, obs, (&q[..n], &r[..n]), grad, out);
    true
}

#[cfg(ndvm_cpp_ceiling)]
mod imp {
    use super::{Cpp, Elem, LaneResults};

    type Kernel = unsafe extern "C" fn(
        obs: *const f64,
        steps: usize,
        q: *const f64,
        r: *const f64,
        n: usize,
        with_grad: i32,
        value: *mut f64,
        grad: *mut f64,
    );

    /// Declares the C++ kernels, each with [`Kernel`]'s signature.
    macro_rules! kernels {
        ($($name:ident),*) => {
            unsafe extern "C" {
                $(fn $name(
                    obs: *const f64,
                    steps: usize,
                    q: *const f64,
                    r: *const f64,
                    n: usize,
                    with_grad: i32,
                    value: *mut f64,
                    grad: *mut f64,
                );)*
                fn ndvm_kalman_cpp_vector_bits_fast() -> i32;
            }
        };
    }

    kernels!(
        ndvm_kalman_cpp_f64_fast,
        ndvm_kalman_cpp_f32_fast,
        ndvm_kalman_cpp_f64_exact,
        ndvm_kalman_cpp_f32_exact
    );

    pub(super) fn vector_bits() -> Option<u32> {
        // SAFETY: a C function without arguments that returns a compile-time constant.
        let bits = unsafe { ndvm_kalman_cpp_vector_bits_fast() };
        u32::try_from(bits).ok()
    }

    pub(super) fn call(
        build: Cpp,
        elem: Elem,
        obs: &[[f64; 2]],
        (q, r): (&[f64], &[f64]),
        grad: bool,
        out: &mut LaneResults,
    ) {
        let kernel: Kernel = match (build, elem) {
            (Cpp::Fast, Elem::F64) => ndvm_kalman_cpp_f64_fast,
            (Cpp::Fast, Elem::F32) => ndvm_kalman_cpp_f32_fast,
            (Cpp::Exact, Elem::F64) => ndvm_kalman_cpp_f64_exact,
            (Cpp::Exact, Elem::F32) => ndvm_kalman_cpp_f32_exact,
        };
        let n = q.len();
        assert!(r.len() == n && out.value.len() == n && out.grad.len() == n);
        // SAFETY: the kernel reads `2 * steps` f64 from `obs` (`[[f64; 2]]` is that many,
        // contiguous), `n` from `q` and `r`, and writes `n` values and (with `grad`) `2n` gradient
        // entries (`[[f64; 2]]` of length n), all lengths checked above; it keeps no pointer past
        // the call and allocates nothing.
        unsafe {
            kernel(
                obs.as_ptr().cast(),
                obs.len(),
                q.as_ptr(),
                r.as_ptr(),
                n,
                i32::from(grad),
                out.value.as_mut_ptr(),
                out.grad.as_mut_ptr().cast(),
            );
        }
    }
}

#[cfg(not(ndvm_cpp_ceiling))]
mod imp {
    use super::{Cpp, Elem, LaneResults};

    pub(super) fn vector_bits() -> Option<u32> {
        None
    }

    pub(super) fn call(
        _build: Cpp,
        _elem: Elem,
        _obs: &[[f64; 2]],
        _params: (&[f64], &[f64]),
        _grad: bool,
        _out: &mut LaneResults,
    ) {
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceiling_lanes;
    use crate::{default_seed_data, kalman};

    /// Where a C++ compiler is present (CI installs one), the ceiling must have been built.
    #[test]
    fn the_cpp_ceiling_is_built_where_a_compiler_is_present() {
        let have_cxx = std::process::Command::new("c++")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if have_cxx {
            assert!(built_with().is_ok(), "{:?}", built_with());
            assert!(vector_bits().is_some_and(|b| b >= 128));
        } else {
            assert!(built_with().is_err());
        }
    }

    /// `Exact` gives the Rust lane ceiling's bits; `Fast` (FMA) agrees to rounding; f32 to f32
    /// rounding. 37 lanes: full blocks and a padded one.
    #[test]
    fn the_cpp_ceiling_computes_the_rust_ceilings_numbers() {
        if built_with().is_err() {
            let mut out = LaneResults::default();
            let ran = kalman_cpp(Cpp::Fast, Elem::F64, &[], (&[1.0], &[1.0]), true, &mut out);
            assert!(!ran && out.value.is_empty());
            return;
        }
        let case = kalman::KalmanCase::load(&default_seed_data())
            .unwrap_or_else(|e| panic!("{e} (see testdata/README.md; tests never skip)"));
        let q: Vec<f64> = (0..37).map(|l| 0.01 + 0.03 * l as f64).collect();
        let r: Vec<f64> = (0..37).map(|l| 0.5 + 0.02 * l as f64).collect();
        let cpp = |build, elem| {
            let mut out = LaneResults::default();
            assert!(kalman_cpp(build, elem, &case.obs, (&q, &r), true, &mut out));
            out
        };
        let mut rust = LaneResults::default();
        ceiling_lanes::kalman_lanes_f64(&case.obs, &q, &r, true, &mut rust);
        let mut rust32 = LaneResults::default();
        ceiling_lanes::kalman_lanes_f32(&case.obs, &q, &r, true, &mut rust32);
        for (elem, want) in [(Elem::F64, &rust), (Elem::F32, &rust32)] {
            let exact = cpp(Cpp::Exact, elem);
            assert_eq!((&exact.value, &exact.grad), (&want.value, &want.grad));
        }
        let close = |a: &LaneResults, tol: f64| {
            for l in 0..37 {
                let pairs = [
                    (a.value[l], rust.value[l]),
                    (a.grad[l][0], rust.grad[l][0]),
                    (a.grad[l][1], rust.grad[l][1]),
                ];
                for (x, y) in pairs {
                    assert!(
                        (x - y).abs() <= tol * y.abs().max(1.0),
                        "lane {l}: {x} vs {y}"
                    );
                }
            }
        };
        close(&cpp(Cpp::Fast, Elem::F64), 1e-10);
        close(&cpp(Cpp::Fast, Elem::F32), 1e-3);
        let mut fast = LaneResults::default();
        // Forward only leaves zero gradients.
        assert!(kalman_cpp(
            Cpp::Fast,
            Elem::F64,
            &case.obs,
            (&q, &r),
            false,
            &mut fast
        ));
        assert!(fast.grad.iter().all(|g| *g == [0.0; 2]));
        for (x, y) in fast.value.iter().zip(&rust.value) {
            assert!((x - y).abs() <= 1e-10 * y.abs().max(1.0), "{x} vs {y}");
        }
    }
}
