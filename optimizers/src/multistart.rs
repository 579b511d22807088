//! Seeded start points: start 0 is the parameters' initial values, start k ≥ 1 draws one uniform
//! number per parameter from a ChaCha8 stream (in start order, then parameter order) and spreads
//! it around the initial value according to the parameter's kind.

use ndvm_core::ParamKind;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

use crate::transform::{logit, sigmoid};

/// A uniform number in [0, 1) from the top 53 bits of one `u64` (the same on every platform).
fn uniform(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// The value of a parameter of `kind` with initial value `init` for spread `v` in [−1, 1):
/// free `init ± 2·max(|init|, 1)`; positive `init · 10^v` (a decade either way); unit and bounded
/// `±3` around the initial value in logit space.
fn spread(kind: ParamKind, init: f64, v: f64) -> f64 {
    match kind {
        ParamKind::Free => init + 2.0 * init.abs().max(1.0) * v,
        ParamKind::Positive => init * (v * std::f64::consts::LN_10).exp(),
        ParamKind::Unit => sigmoid(logit(init) + 3.0 * v),
        ParamKind::Bounded { lo, hi } => {
            lo + (hi - lo) * sigmoid(logit((init - lo) / (hi - lo)) + 3.0 * v)
        }
    }
}

/// K×P start points in parameter (user) space.
pub(crate) fn start_points(
    kinds: &[ParamKind],
    inits: &[f64],
    n_starts: usize,
    seed: u64,
) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(n_starts * inits.len());
    out.extend_from_slice(inits);
    for _ in 1..n_starts {
        for (&kind, &init) in kinds.iter().zip(inits) {
            let v = 2.0 * uniform(&mut rng) - 1.0;
            out.push(spread(kind, init, v));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_are_a_prefix_and_stay_in_domain() {
        let kinds = [
            ParamKind::Free,
            ParamKind::Positive,
            ParamKind::Unit,
            ParamKind::Bounded { lo: 1.0, hi: 2.0 },
        ];
        let inits = [0.5, 3.0, 0.2, 1.5];
        let long = start_points(&kinds, &inits, 64, 7);
        let short = start_points(&kinds, &inits, 8, 7);
        assert_eq!(&long[..short.len()], &short[..]);
        assert_eq!(&long[..4], &inits);
        for row in long.chunks(4) {
            assert!((-1.5..2.5).contains(&row[0]));
            assert!(row[1] >= 0.3 && row[1] <= 30.0);
            assert!(row[2] > 0.0 && row[2] < 1.0);
            assert!(row[3] > 1.0 && row[3] < 2.0);
        }
        assert_ne!(start_points(&kinds, &inits, 8, 8), short);
    }

    #[test]
    fn the_stream_is_pinned() {
        // Known answer: the first draw of seed 0, recorded when the generator was chosen; a change
        // here means every seeded start in every saved run would move.
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let u = uniform(&mut rng);
        assert_eq!(u.to_bits(), PINNED_FIRST_DRAW, "{u:e} = {:#x}", u.to_bits());
    }

    const PINNED_FIRST_DRAW: u64 = 0x3fe6_b0be_ecf4_f347;
}
