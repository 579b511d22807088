//! Fits `a·exp(−b·x)` to noisy samples with the default calibrator and prints the result.
//!
//! Run: `cargo run --release -p ndvm-optimizers --example fit_decay`.
#![allow(clippy::print_stdout)]

use ndvm_core::Heap;
use ndvm_frontends::{Frontend, scheme::Scheme};
use ndvm_optimizers::{CalibrateConfig, Calibrator, Dataset};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut heap = Heap::new();
    let src = "(params (a positive 1.0) (b positive 1.0))
               (* a (exp (* (- 0 b) x)))";
    let program = Scheme.parse(&mut heap, src)?;

    // 40 samples of 3·exp(−0.7·x) with a deterministic ±1% wiggle standing in for noise.
    let xs: Vec<f64> = (0..40).map(|i| i as f64 * 0.15).collect();
    let ys = xs
        .iter()
        .enumerate()
        .map(|(i, x)| 3.0 * (-0.7 * x).exp() * (1.0 + 0.01 * (i as f64 * 2.3).sin()))
        .collect();
    let data = Dataset::new().column("x", xs).target(ys);

    let mut calibrator = Calibrator::new(CalibrateConfig::recommended())?;
    let fit = calibrator.calibrate(&mut heap, &program, &data)?;
    for (name, value) in fit.names.iter().zip(&fit.params) {
        println!("{name} = {value}");
    }
    println!("loss (MSE) = {:e}", fit.loss);
    println!("R² = {}", fit.r2.unwrap_or(f64::NAN));
    println!("stop = {}", fit.stop_reason);
    println!(
        "evaluations = {} over {} starts in {:?}",
        fit.n_evals,
        fit.starts.len(),
        fit.wall_time
    );
    Ok(())
}
