//! The timing harness: warm-up, repeated samples of a calibrated number of calls, and the median.
//!
//! No statistics library: each sample times `reps` back-to-back calls (chosen during warm-up so a
//! sample lasts at least `Budget::min_sample`), records the time per call, and the summary is the
//! median of the samples. The raw samples are kept so reports can show the spread.

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde::Serialize;

/// How long to warm up and measure one benchmark case.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Budget {
    /// Warm-up time before any sample is taken (at least one call always runs).
    #[serde(serialize_with = "as_seconds")]
    pub warmup: Duration,
    /// Measuring time; sampling stops once it is spent and `min_samples` are taken.
    #[serde(serialize_with = "as_seconds")]
    pub measure: Duration,
    /// Shortest duration of one sample; short calls are repeated to reach it.
    #[serde(serialize_with = "as_seconds")]
    pub min_sample: Duration,
    /// Fewest samples taken, whatever the time.
    pub min_samples: usize,
    /// Most samples taken.
    pub max_samples: usize,
}

impl Budget {
    /// A full run: about a second of samples per case.
    pub fn full() -> Budget {
        Budget {
            warmup: Duration::from_millis(200),
            measure: Duration::from_millis(1000),
            min_sample: Duration::from_millis(5),
            min_samples: 10,
            max_samples: 1000,
        }
    }

    /// A smoke run: a handful of short samples per case.
    pub fn quick() -> Budget {
        Budget {
            warmup: Duration::from_millis(2),
            measure: Duration::from_millis(10),
            min_sample: Duration::from_micros(500),
            min_samples: 3,
            max_samples: 20,
        }
    }
}

fn as_seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// The samples of one benchmark case, in microseconds per call.
#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    /// Calls timed together in each sample.
    pub reps_per_sample: u64,
    /// Time per call of each sample, in the order taken (µs).
    pub samples_us: Vec<f64>,
    /// Median of `samples_us`.
    pub median_us: f64,
    /// Smallest sample.
    pub min_us: f64,
    /// Largest sample.
    pub max_us: f64,
}

impl Timing {
    /// A summary of raw per-call samples (µs); `samples_us` must not be empty.
    pub fn from_samples(reps_per_sample: u64, samples_us: Vec<f64>) -> Timing {
        let mut sorted = samples_us.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median_us = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            0.5 * (sorted[n / 2 - 1] + sorted[n / 2])
        };
        Timing {
            reps_per_sample,
            median_us,
            min_us: sorted[0],
            max_us: sorted[n - 1],
            samples_us,
        }
    }
}

/// Times `call` under `budget`; the first error stops the measurement and is returned.
pub fn measure<E>(budget: &Budget, mut call: impl FnMut() -> Result<(), E>) -> Result<Timing, E> {
    // Warm-up, which also estimates the time per call.
    let start = Instant::now();
    let mut n_calls = 0u64;
    loop {
        black_box(call()?);
        n_calls += 1;
        if start.elapsed() >= budget.warmup {
            break;
        }
    }
    let per_call = start.elapsed().as_secs_f64() / n_calls as f64;
    let reps = ((budget.min_sample.as_secs_f64() / per_call.max(1e-9)).ceil() as u64).max(1);

    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < budget.max_samples
        && (samples.len() < budget.min_samples || start.elapsed() < budget.measure)
    {
        let t = Instant::now();
        for _ in 0..reps {
            black_box(call()?);
        }
        samples.push(t.elapsed().as_secs_f64() * 1e6 / reps as f64);
    }
    Ok(Timing::from_samples(reps, samples))
}

/// Times several cases under one `budget`, taking their samples round-robin (one sample of each
/// case in turn) so that load from elsewhere on the machine falls on all of them alike and their
/// ratios stay meaningful. Each sample follows one untimed call of its own case, so what is timed
/// is the case's steady state and not the cache misses the previous case left behind (a Kalman
/// replay at B = 256 keeps an 8 MiB tape; the ceilings, a few KiB). The budget applies to the
/// whole set; results are in the order given.
pub fn measure_interleaved<E>(
    budget: &Budget,
    cases: &mut [&mut dyn FnMut() -> Result<(), E>],
) -> Result<Vec<Timing>, E> {
    let mut reps = Vec::with_capacity(cases.len());
    for call in cases.iter_mut() {
        let start = Instant::now();
        let mut n_calls = 0u64;
        loop {
            black_box(call()?);
            n_calls += 1;
            if start.elapsed() >= budget.warmup {
                break;
            }
        }
        let per_call = start.elapsed().as_secs_f64() / n_calls as f64;
        reps.push(((budget.min_sample.as_secs_f64() / per_call.max(1e-9)).ceil() as u64).max(1));
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    let measure = budget.measure * cases.len() as u32;
    let start = Instant::now();
    let mut n_rounds = 0;
    while n_rounds < budget.max_samples
        && (n_rounds < budget.min_samples || start.elapsed() < measure)
    {
        for ((call, &reps), samples) in cases.iter_mut().zip(&reps).zip(&mut samples) {
            // One untimed call first: the case before this one has just filled the caches with its
            // own working set, which a case run back to back (as a calibrator replays its tape)
            // never meets. Each sample is then of the case's steady state, like `measure`'s.
            black_box(call()?);
            let t = Instant::now();
            for _ in 0..reps {
                black_box(call()?);
            }
            samples.push(t.elapsed().as_secs_f64() * 1e6 / reps as f64);
        }
        n_rounds += 1;
    }
    Ok(reps
        .into_iter()
        .zip(samples)
        .map(|(reps, samples)| Timing::from_samples(reps, samples))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let t = Timing::from_samples(1, vec![3.0, 1.0, 2.0]);
        assert_eq!((t.median_us, t.min_us, t.max_us), (2.0, 1.0, 3.0));
        assert_eq!(t.samples_us, vec![3.0, 1.0, 2.0], "raw order kept");
        let t = Timing::from_samples(1, vec![4.0, 1.0, 2.0, 3.0]);
        assert_eq!(t.median_us, 2.5);
    }

    #[test]
    fn measure_takes_at_least_the_minimum_samples() {
        let mut n = 0u64;
        let t = measure(&Budget::quick(), || {
            n += 1;
            Ok::<(), ()>(())
        })
        .unwrap();
        assert!(t.samples_us.len() >= Budget::quick().min_samples);
        assert!(n >= t.reps_per_sample * t.samples_us.len() as u64);
    }

    #[test]
    fn interleaved_cases_get_equal_sample_counts() {
        let (mut a, mut b) = (0u64, 0u64);
        let ts = measure_interleaved(
            &Budget::quick(),
            &mut [
                &mut || {
                    a += 1;
                    Ok::<(), ()>(())
                },
                &mut || {
                    b += 2;
                    Ok(())
                },
            ],
        )
        .unwrap();
        assert_eq!(ts.len(), 2);
        assert_eq!(ts[0].samples_us.len(), ts[1].samples_us.len());
        assert!(ts[0].samples_us.len() >= Budget::quick().min_samples);
        assert!(a > 0 && b > 0);
    }
}
