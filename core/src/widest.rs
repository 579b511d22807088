//! Running numeric code in the widest vectors the processor has: AVX-512F or AVX2 on x86-64,
//! detected once per process, the build's own target elsewhere.
//!
//! The build targets the baseline of its architecture (SSE2 on x86-64), so its loops use the
//! narrowest vectors. [`with_widest_vectors`] runs a [`WideKernel`] from inside a copy of itself
//! compiled for a wider instruction set; the kernel's `run`, being `#[inline(always)]`, is compiled
//! into that copy, with everything it inlines in turn. Rust never fuses a multiply and an add
//! unless asked, and every IEEE operation rounds the same in any vector width, so such code gives
//! the same bits as its baseline build.

/// The instruction sets a kernel can run under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Width {
    Baseline,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

pub(crate) fn width() -> Width {
    static WIDTH: std::sync::OnceLock<Width> = std::sync::OnceLock::new();
    *WIDTH.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return Width::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                return Width::Avx2;
            }
        }
        Width::Baseline
    })
}

/// The instruction set [`with_widest_vectors`] compiles for on this processor: `"avx512f"`,
/// `"avx2"` or `"baseline"`.
pub fn widest_vectors() -> &'static str {
    match width() {
        Width::Baseline => "baseline",
        #[cfg(target_arch = "x86_64")]
        Width::Avx2 => "avx2",
        #[cfg(target_arch = "x86_64")]
        Width::Avx512 => "avx512f",
    }
}

/// Numeric code to compile in wider vectors: implement [`WideKernel::run`] with
/// `#[inline(always)]` (and the functions it calls likewise), so that it is compiled into each
/// copy of [`with_widest_vectors`].
pub trait WideKernel {
    /// What the kernel returns.
    type Output;
    /// The work; mark the implementation `#[inline(always)]`.
    fn run(self) -> Self::Output;
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn run_avx2<K: WideKernel>(k: K) -> K::Output {
    k.run()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn run_avx512<K: WideKernel>(k: K) -> K::Output {
    k.run()
}

/// `kernel.run()`, compiled for the widest vectors the processor has (see the module's
/// documentation).
pub fn with_widest_vectors<K: WideKernel>(kernel: K) -> K::Output {
    // SAFETY: `width()` names only an instruction set it detected on this processor.
    unsafe { run_as(width(), kernel) }
}

/// `kernel.run()` compiled for `w`.
///
/// # Safety
/// The processor must have `w`'s instruction set: `w` comes from `width()` or
/// [`available_widths`].
pub(crate) unsafe fn run_as<K: WideKernel>(w: Width, kernel: K) -> K::Output {
    match w {
        Width::Baseline => kernel.run(),
        // SAFETY: the processor has AVX2 (this function's contract).
        #[cfg(target_arch = "x86_64")]
        Width::Avx2 => unsafe { run_avx2(kernel) },
        // SAFETY: the processor has AVX-512F (this function's contract).
        #[cfg(target_arch = "x86_64")]
        Width::Avx512 => unsafe { run_avx512(kernel) },
    }
}

/// Every instruction set this processor can run a kernel under, the baseline first.
#[cfg(test)]
pub(crate) fn available_widths() -> Vec<Width> {
    let mut widths = vec![Width::Baseline];
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            widths.push(Width::Avx2);
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            widths.push(Width::Avx512);
        }
    }
    widths
}

/// `kernel.run()` compiled for `w`, for tests; panics unless this processor has `w`.
#[cfg(test)]
pub(crate) fn run_at<K: WideKernel>(w: Width, kernel: K) -> K::Output {
    assert!(available_widths().contains(&w), "{w:?} is not available");
    // SAFETY: the processor has `w` (asserted above).
    unsafe { run_as(w, kernel) }
}

/// Asserts that `run` (a kernel run under the width it is given, returning its outputs) gives
/// the baseline's bits under every width this processor has (any NaN as any other: where two
/// NaNs meet, which one's sign survives depends on the operand order the compiler chose).
#[cfg(test)]
pub(crate) fn assert_every_width_same_bits(what: &str, run: impl Fn(Width) -> Vec<f64>) {
    let bits = |v: Vec<f64>| {
        v.into_iter()
            .map(|x| if x.is_nan() { u64::MAX } else { x.to_bits() })
            .collect::<Vec<_>>()
    };
    let base = bits(run(Width::Baseline));
    for w in available_widths() {
        assert_eq!(
            bits(run(w)),
            base,
            "{what}: {w:?} differs from the baseline"
        );
    }
}

/// Kernel test inputs: `n` values of mixed signs and magnitudes, with ±0, ±∞, NaN and a
/// subnormal among them, different for each `seed`.
#[cfg(test)]
pub(crate) fn test_values(n: usize, seed: u64) -> Vec<f64> {
    (0..n)
        .map(|k| match (k as u64 * 7 + seed) % 23 {
            3 => -0.0,
            5 => 0.0,
            7 => f64::INFINITY,
            11 => f64::NEG_INFINITY,
            13 => f64::NAN,
            17 => 3e-310,
            _ => (seed as f64 + 0.37 * k as f64).sin() * 10f64.powi((k % 7) as i32 - 3),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Roots<'a>(&'a [f64], &'a mut [f64]);

    impl WideKernel for Roots<'_> {
        type Output = f64;
        #[inline(always)]
        fn run(self) -> f64 {
            for (o, &x) in self.1.iter_mut().zip(self.0) {
                *o = x.sqrt() * 0.5 + x / 3.0;
            }
            self.1.iter().sum()
        }
    }

    #[test]
    fn a_kernel_gives_its_baseline_bits() {
        let xs: Vec<f64> = (0..1001).map(|i| i as f64 * 0.731).collect();
        let (mut wide, mut base) = (vec![0.0; xs.len()], vec![0.0; xs.len()]);
        let s_base = Roots(&xs, &mut base).run();
        let s_wide = with_widest_vectors(Roots(&xs, &mut wide));
        assert_eq!(s_wide.to_bits(), s_base.to_bits());
        assert_eq!(wide, base);
        for w in available_widths() {
            // SAFETY: `available_widths` lists only what this processor has.
            let s_w = unsafe { run_as(w, Roots(&xs, &mut wide)) };
            assert_eq!((s_w.to_bits(), &wide), (s_base.to_bits(), &base), "{w:?}");
        }
        assert!(["avx512f", "avx2", "baseline"].contains(&widest_vectors()));
    }
}
