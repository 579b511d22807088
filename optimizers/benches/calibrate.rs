//! Calibrations per second: a 50-step Adam fit of `(* a (exp (* (- 0 b) x)))` to 44 points with
//! K = 1 and K = 32 starts (K·44 lanes per walk), on one thread.
//!
//! Run: `cargo bench -p ndvm-optimizers --bench calibrate`.
#![allow(clippy::print_stdout)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use ndvm_core::{Heap, ParamKind};
use ndvm_frontends::{Frontend, scheme::Scheme};
use ndvm_optimizers::{CalibrateConfig, Calibrator, Dataset, Optimizer, ParamSpec};

fn main() {
    let mut heap = Heap::new();
    let program = Scheme
        .parse(&mut heap, "(* a (exp (* (- 0 b) x)))")
        .expect("the benchmark program parses");
    let xs: Vec<f64> = (0..44).map(|i| i as f64 * 0.1).collect();
    let ys = xs.iter().map(|x| 2.5 * (-0.8 * x).exp()).collect();
    let data = Dataset::new().column("x", xs).target(ys);
    println!("| starts K | lanes | calibrations/s | µs/calibration | start-steps/s |");
    println!("|---:|---:|---:|---:|---:|");
    for n_starts in [1usize, 32] {
        let config = CalibrateConfig {
            optimizer: Optimizer::Adam,
            n_starts,
            max_iters: 50,
            tol_grad: 0.0,
            params: vec![
                ParamSpec::new("a", ParamKind::Positive, 1.0),
                ParamSpec::new("b", ParamKind::Positive, 1.0),
            ],
            ..CalibrateConfig::recommended()
        };
        let mut calibrator = Calibrator::new(config).expect("the benchmark config is valid");
        // Warm up (decodes the program once, sizes the arenas), then time for about two seconds.
        for _ in 0..3 {
            black_box(calibrator.calibrate(&mut heap, &program, &data).unwrap());
        }
        // NDVM_BENCH_RUNS fixes the number of timed calibrations (for instruction-count profiling).
        let fixed: Option<u64> = std::env::var("NDVM_BENCH_RUNS")
            .ok()
            .and_then(|v| v.parse().ok());
        let budget = Duration::from_secs(2);
        let started = Instant::now();
        let mut n = 0u64;
        while fixed.map_or(started.elapsed() < budget, |k| n < k) {
            let fit = calibrator.calibrate(&mut heap, &program, &data).unwrap();
            assert_eq!(fit.starts[0].iters, 50);
            black_box(fit);
            n += 1;
        }
        let secs = started.elapsed().as_secs_f64();
        let per_s = n as f64 / secs;
        println!(
            "| {n_starts} | {} | {per_s:.0} | {:.1} | {:.0} |",
            n_starts * 44,
            1e6 / per_s,
            per_s * 50.0 * n_starts as f64
        );
    }
}
