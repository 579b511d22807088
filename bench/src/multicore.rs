//! Multicore scaling: candidates per second at 1, 2, … threads (rayon), each candidate one
//! `kalman2d_T80` forward+gradient run at its own `(q, r)`, and a check that every thread count
//! produces the same results, bit for bit, in the same order.
//!
//! Work is split statically into one contiguous chunk per thread; each chunk owns a warmed-up
//! [`KalmanRunner`] (its own heap, evaluator and buffers), so no state is shared between threads
//! and results land at their candidate's index. Candidates stand for distinct programs, so every
//! run walks (trace replay off): this measures the walk's scaling, not the replay's.

use rayon::prelude::*;
use serde::Serialize;

use crate::kalman::{KalmanCase, KalmanRunner};
use crate::timing::{self, Budget, Timing};
use ndvm_search::{Result, SearchError};

/// One thread count.
#[derive(Clone, Debug, Serialize)]
pub struct ScalingRow {
    /// Worker threads.
    pub n_threads: usize,
    /// Candidates per second (median pass).
    pub candidates_per_s: f64,
    /// `candidates_per_s` over the one-thread rate.
    pub speedup: f64,
    /// `speedup / n_threads`.
    pub efficiency: f64,
    /// Time per pass over all candidates (µs per pass, raw samples and median).
    pub pass: Timing,
}

/// The whole scaling run.
#[derive(Clone, Debug, Serialize)]
pub struct Scaling {
    /// Candidates per pass.
    pub n_candidates: usize,
    /// Lanes per candidate run.
    pub n_lanes_per_candidate: usize,
    /// Whether every thread count gave bit-identical results (always true: a mismatch panics).
    pub identical_results: bool,
    /// One row per thread count.
    pub rows: Vec<ScalingRow>,
}

/// Per-candidate `(value, d/dq, d/dr)`, bit patterns, for exact comparison.
type Outcome = [u64; 3];

/// The candidates: `(q, r)` spread over ±25% around the oracle point.
fn candidates(case: &KalmanCase, n: usize) -> Vec<(f64, f64)> {
    (0..n)
        .map(|i| {
            let t = i as f64 / n as f64 - 0.5;
            (case.q * (1.0 + 0.5 * t), case.r * (1.0 - 0.5 * t))
        })
        .collect()
}

/// One pass over every candidate on `runners.len()` threads of `pool`.
fn pass(
    pool: &rayon::ThreadPool,
    runners: &mut [KalmanRunner],
    cands: &[(f64, f64)],
    out: &mut [Outcome],
) -> Result<()> {
    let chunk = cands.len().div_ceil(runners.len());
    pool.install(|| {
        runners
            .par_iter_mut()
            .zip(out.par_chunks_mut(chunk))
            .zip(cands.par_chunks(chunk))
            .try_for_each(|((runner, out), cands)| {
                for (slot, &(q, r)) in out.iter_mut().zip(cands) {
                    runner.set_params(&[q], &[r]);
                    runner.run(true)?;
                    let (v, g, _) = runner.lane_result(0);
                    *slot = [v.to_bits(), g[0].to_bits(), g[1].to_bits()];
                }
                Ok::<(), SearchError>(())
            })
    })
}

/// One thread count's pool, per-thread runners and result slots.
struct Setup {
    pool: rayon::ThreadPool,
    runners: Vec<KalmanRunner>,
    out: Vec<Outcome>,
}

/// Runs `n_candidates` candidates at every thread count from 1 to `max_threads`. Passes at the
/// different thread counts are timed round-robin, so load from elsewhere falls on all alike.
pub fn scaling(
    case: &KalmanCase,
    n_candidates: usize,
    max_threads: usize,
    budget: &Budget,
    progress: &mut dyn FnMut(&str),
) -> Result<Scaling> {
    let cands = candidates(case, n_candidates);
    let thread_counts: Vec<usize> = (1..=max_threads.max(1)).collect();
    progress(&format!("multicore: {thread_counts:?} threads"));
    let mut setups = thread_counts
        .iter()
        .map(|&n_threads| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(n_threads)
                .build()
                .expect("a rayon thread pool");
            let runners = (0..n_threads)
                .map(|_| KalmanRunner::new(case, 1, false))
                .collect::<Result<Vec<_>>>()?;
            Ok(Setup {
                pool,
                runners,
                out: vec![[0u64; 3]; n_candidates],
            })
        })
        .collect::<Result<Vec<Setup>>>()?;

    let check = |setups: &[Setup]| {
        for (setup, n_threads) in setups.iter().zip(&thread_counts) {
            assert!(
                setup.out == setups[0].out,
                "results at {n_threads} threads differ from the one-thread results"
            );
        }
    };
    for setup in &mut setups {
        pass(&setup.pool, &mut setup.runners, &cands, &mut setup.out)?;
    }
    check(&setups);

    let mut closures: Vec<Box<dyn FnMut() -> Result<()> + '_>> = setups
        .iter_mut()
        .map(|setup| {
            let cands = &cands;
            Box::new(move || pass(&setup.pool, &mut setup.runners, cands, &mut setup.out))
                as Box<dyn FnMut() -> Result<()>>
        })
        .collect();
    let mut cases: Vec<&mut dyn FnMut() -> Result<()>> =
        closures.iter_mut().map(|c| &mut **c as _).collect();
    let timings = timing::measure_interleaved(budget, &mut cases)?;
    drop(cases);
    drop(closures);
    check(&setups);

    let mut rows: Vec<ScalingRow> = Vec::new();
    for (n_threads, pass_timing) in thread_counts.into_iter().zip(timings) {
        let candidates_per_s = n_candidates as f64 / (pass_timing.median_us * 1e-6);
        let base = rows
            .first()
            .map_or(candidates_per_s, |r| r.candidates_per_s);
        let speedup = candidates_per_s / base;
        rows.push(ScalingRow {
            n_threads,
            candidates_per_s,
            speedup,
            efficiency: speedup / n_threads as f64,
            pass: pass_timing,
        });
    }
    Ok(Scaling {
        n_candidates,
        n_lanes_per_candidate: 1,
        identical_results: true,
        rows,
    })
}

/// The scaling run as a text table.
pub fn table(s: &Scaling) -> String {
    let mut t = format!(
        "multicore: {} kalman2d_T80 candidates (forward+gradient, B = {} each) per pass; results identical across thread counts: {}\n",
        s.n_candidates, s.n_lanes_per_candidate, s.identical_results
    );
    t += &format!(
        "{:>8} | {:>14} {:>8} {:>10}\n",
        "threads", "candidates/s", "speed-up", "efficiency"
    );
    for row in &s.rows {
        t += &format!(
            "{:>8} | {:>14.0} {:>7.2}x {:>9.0}%\n",
            row.n_threads,
            row.candidates_per_s,
            row.speedup,
            100.0 * row.efficiency
        );
    }
    t
}
