//! Test-only planted bugs: wrong derivatives the fuzzer's gate self-test must catch. The switch
//! ([`plant`]) exists only with the `planted-bugs` cargo feature and is off until a test flips it;
//! without the feature [`is_planted`] is a constant `false` and the checks compile away.

/// A wrong derivative that can be planted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Bug {
    /// The det VJP is scaled by 1.01.
    DetVjp = 1,
    /// The then-lanes of a divergent select get 1.25 times their adjoint.
    SelectMerge = 2,
    /// A loop's carried numbers pass their adjoint twice at the first recur.
    LoopCarried = 3,
}

#[cfg(feature = "planted-bugs")]
static PLANTED: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Plants `bug` (or none) for every evaluator in the process.
#[cfg(feature = "planted-bugs")]
pub fn plant(bug: Option<Bug>) {
    PLANTED.store(
        bug.map_or(0, |b| b as u8),
        std::sync::atomic::Ordering::SeqCst,
    );
}

/// Whether `bug` is planted.
#[inline(always)]
pub(crate) fn is_planted(bug: Bug) -> bool {
    #[cfg(feature = "planted-bugs")]
    {
        PLANTED.load(std::sync::atomic::Ordering::Relaxed) == bug as u8
    }
    #[cfg(not(feature = "planted-bugs"))]
    {
        let _ = bug;
        false
    }
}
