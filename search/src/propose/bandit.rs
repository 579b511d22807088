//! `Bandit`: adaptive choice among a fixed set of moves (an evolving population's mutations, the
//! factor shapes it draws) by what has paid off during the run. Each move's chance follows its
//! recent success rate (probability matching over exponentially discounted counts, so the choice
//! follows a search whose needs change) with a floor that keeps every move alive. Credit arrives
//! with the engine's feedback, in candidate order, so the choices are the same at any thread
//! count.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Discount applied to every count at each credit: the memory spans about 1 / (1 − DECAY)
/// credits.
const DECAY: f64 = 0.995;

/// Prior successes and tries of every move (a rate of 1/2 until evidence accumulates).
const PRIOR: (f64, f64) = (0.5, 1.0);

/// Share of the choice spread evenly over the moves whatever their record.
const EXPLORE: f64 = 0.2;

/// Chances of a fixed set of moves, learned from their outcomes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Bandit {
    /// Prior weight of each move (relative; the chances before any credit).
    base: Vec<f64>,
    /// Discounted successes per move.
    wins: Vec<f64>,
    /// Discounted tries per move.
    tries: Vec<f64>,
}

impl Bandit {
    /// A bandit over moves with the prior weights `base` (each positive).
    pub(crate) fn new(base: Vec<f64>) -> Bandit {
        let n = base.len();
        Bandit {
            base,
            wins: vec![0.0; n],
            tries: vec![0.0; n],
        }
    }

    /// Number of moves.
    pub(crate) fn len(&self) -> usize {
        self.base.len()
    }

    /// The chance of each move now (summing to 1 over the moves `allowed` admits; 0 elsewhere).
    pub(crate) fn chances(&self, allowed: impl Fn(usize) -> bool) -> Vec<f64> {
        let n = self.len();
        let rate = |k: usize| (self.wins[k] + PRIOR.0) / (self.tries[k] + PRIOR.1);
        let merit: Vec<f64> = (0..n)
            .map(|k| match allowed(k) {
                true => self.base[k] * rate(k),
                false => 0.0,
            })
            .collect();
        let base_sum: f64 = (0..n).filter(|&k| allowed(k)).map(|k| self.base[k]).sum();
        let merit_sum: f64 = merit.iter().sum();
        if base_sum <= 0.0 || merit_sum <= 0.0 {
            return vec![0.0; n];
        }
        (0..n)
            .map(|k| match allowed(k) {
                true => EXPLORE * self.base[k] / base_sum + (1.0 - EXPLORE) * merit[k] / merit_sum,
                false => 0.0,
            })
            .collect()
    }

    /// A move drawn by its chance among those `allowed` admits (`None` when it admits none).
    pub(crate) fn pick(
        &self,
        rng: &mut ChaCha8Rng,
        allowed: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let chances = self.chances(allowed);
        let total: f64 = chances.iter().sum();
        if total <= 0.0 {
            return None;
        }
        let mut roll = rng.random::<f64>() * total;
        let last = chances.iter().rposition(|&c| c > 0.0)?;
        for (k, &c) in chances.iter().enumerate() {
            if roll < c {
                return Some(k);
            }
            roll -= c;
        }
        Some(last)
    }

    /// Records one outcome of `arm` (`won`: it paid off), discounting the past.
    pub(crate) fn credit(&mut self, arm: usize, won: bool) {
        if arm >= self.len() {
            return;
        }
        for k in 0..self.len() {
            self.wins[k] *= DECAY;
            self.tries[k] *= DECAY;
        }
        self.tries[arm] += 1.0;
        if won {
            self.wins[arm] += 1.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn chances_start_at_the_prior_weights_and_sum_to_one() {
        let b = Bandit::new(vec![1.0, 3.0]);
        let c = b.chances(|_| true);
        assert!(
            (c[0] - 0.25).abs() < 1e-12 && (c[1] - 0.75).abs() < 1e-12,
            "{c:?}"
        );
        let only = b.chances(|k| k == 1);
        assert!(only[0] == 0.0 && (only[1] - 1.0).abs() < 1e-12, "{only:?}");
        assert_eq!(b.chances(|_| false), vec![0.0, 0.0]);
    }

    #[test]
    fn a_move_that_pays_gains_chance_and_the_floor_keeps_the_others() {
        let mut b = Bandit::new(vec![1.0; 3]);
        for i in 0..300 {
            b.credit(0, i % 2 == 0);
            b.credit(1, false);
            b.credit(2, false);
        }
        let c = b.chances(|_| true);
        // Rates: about 1/2 for move 0 and under 1 % for the others; each keeps EXPLORE / 3, and
        // move 0 takes nearly all the rest.
        assert!(c[0] > 0.8, "{c:?}");
        assert!(c[1] >= EXPLORE / 3.0 && c[2] >= EXPLORE / 3.0, "{c:?}");
        assert!((c.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        // Draws follow the chances.
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let n = 10_000;
        let zeros = (0..n)
            .filter(|_| b.pick(&mut rng, |_| true) == Some(0))
            .count();
        let share = zeros as f64 / n as f64;
        assert!((share - c[0]).abs() < 0.02, "{share} vs {}", c[0]);
        assert_eq!(b.pick(&mut rng, |k| k == 2), Some(2));
        assert_eq!(b.pick(&mut rng, |_| false), None);
    }

    #[test]
    fn old_outcomes_fade() {
        let mut b = Bandit::new(vec![1.0; 2]);
        for _ in 0..500 {
            b.credit(0, true);
            b.credit(1, false);
        }
        let early = b.chances(|_| true)[0];
        for _ in 0..2000 {
            b.credit(0, false);
            b.credit(1, true);
        }
        let late = b.chances(|_| true)[0];
        assert!(early > 0.85 && late < 0.15, "{early} then {late}");
    }
}
