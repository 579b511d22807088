//! ndvm-optimizers: fits a program's constants to data. K starts × N data points run as K·N lanes
//! of one evaluator walk; Adam (batched over starts), L-BFGS (argmin, per start),
//! Levenberg–Marquardt (per start, for the squared-error losses) or a portfolio (an Adam screen,
//! then L-BFGS or LM on the best starts) find the parameters with the lowest loss.
//!
//! ```
//! use ndvm_core::Heap;
//! use ndvm_frontends::{Frontend, scheme::Scheme};
//! use ndvm_optimizers::{CalibrateConfig, Calibrator, Dataset};
//!
//! let mut heap = Heap::new();
//! let src = "(params (a positive 1.0) (b positive 1.0)) (* a (exp (* (- 0 b) x)))";
//! let program = Scheme.parse(&mut heap, src).unwrap();
//! // Noisy samples of 3 exp(-0.7 x).
//! let xs: Vec<f64> = (0..30).map(|i| i as f64 * 0.2).collect();
//! let noise = |i: usize| 0.01 * ((i * 7919 % 13) as f64 - 6.0) / 6.0;
//! let ys = xs.iter().enumerate().map(|(i, x)| 3.0 * (-0.7 * x).exp() + noise(i)).collect();
//! let data = Dataset::new().column("x", xs).target(ys);
//! let fit = Calibrator::new(CalibrateConfig::recommended())?.calibrate(&mut heap, &program, &data)?;
//! assert!((fit.param("a").unwrap() - 3.0).abs() < 0.02);
//! assert!((fit.param("b").unwrap() - 0.7).abs() < 0.02);
//! # Ok::<(), ndvm_optimizers::CalibrateError>(())
//! ```
//!
//! # How it works
//!
//! Parameters come from the program's `(params (name kind init) …)` forms and/or
//! [`CalibrateConfig::params`]. Each is optimized in an unconstrained coordinate `u` mapped onto its
//! domain: free = identity, positive = softplus, unit = sigmoid, bounded = `lo + (hi − lo)·sigmoid`.
//! Start 0 is the initial values; starts 1… are drawn from a ChaCha8 stream seeded by
//! [`CalibrateConfig::seed`] (free: ±2·max(|init|, 1); positive: a decade either way; unit and
//! bounded: ±3 in logit space). A start whose loss or gradient goes non-finite is dropped and keeps
//! its best finite point; the others continue. Each start stops on its own, so a start in a batch
//! of K follows, bit for bit, the trajectory it would follow alone, and no thread count changes a
//! result (the libm of the platform does, as for any evaluation).
//!
//! # Defaults and how they were chosen
//!
//! [`CalibrateConfig::recommended`]: portfolio, K = 32 starts, 100 Adam screen steps at learning
//! rate 0.1, L-BFGS (memory 10, ≤ 200 iterations) on the best 4, gradient tolerance 1e-10, MSE.
//! `examples/choose_defaults.rs` fits the seven acceptance models (Michaelis–Menten, Arrhenius,
//! damped oscillator, logistic growth, Lotka–Volterra, 12-step IIR filter, Kalman MLE) over a grid
//! of settings. Measured (evaluations summed over the seven models):
//!
//! | setting | recovered | evaluations |
//! |---|---|---|
//! | Adam alone, K = 32, 2000 steps, lr 0.03 / 0.1 / 0.3 | 5 / 6 / 7 of 7 | 337k / 278k / 231k |
//! | L-BFGS alone, K = 1 / 32 | 7 / 7 of 7 | 150 / 6.8k |
//! | portfolio K = 32, lr 0.1, screen 50, polish 1 | 7 of 7 | 11.1k |
//! | **portfolio K = 32, lr 0.1, screen 100, polish 4** | 7 of 7 | 22.7k |
//! | portfolio K = 32, lr 0.1, screen 200, polish 4 | 7 of 7 | 44.3k |
//!
//! Adam alone stalls short of 1e-3 relative accuracy (a fixed step size), so the polish is
//! L-BFGS. Every portfolio setting recovered all seven; the default takes twice the cheapest screen
//! and polishes four starts (about 3% more evaluations than one) for margin when the screen
//! ranks starts wrongly. K = 32 is kept although K = 1 suffices on these models: with the
//! oscillator's ω only declared positive, one L-BFGS start from ω = 8 stops in a local minimum
//! while 32 starts reach a zero-loss fit.
//!
//! The racing screen ([`CalibrateConfig::race`]) is off by default. `choose_defaults --race`:
//! every schedule from `50:8` to `10:4` recovers all seven models at seeds 0–4, with 36–77 %
//! fewer evaluations. On the co-search replay stream (`results/bench/race_quality.py`, 4 seeds ×
//! 192 candidates, each fit against the full screen at its seed) the first success and the best
//! held-out R² stay, but fits end worse more often than better: `50:8` 8 worse / 2 better (loss
//! differing by > 0.1 %), 1.2–1.6× the calibrations per second; `20:8,50:4` 38 / 2, ≈ 2×;
//! `10:4` 84 / 4, 2.4–2.9×. A different seed, for scale, moves 40 up and 40 down: the screen's
//! ranking of the starts changes until its last steps, so a cut drops starts that would have
//! won.
#![forbid(unsafe_code)]

mod adam;
mod calibrator;
pub mod config;
pub mod data;
pub mod error;
mod lbfgs;
mod lm;
mod multistart;
mod objective;
pub mod stop;
mod transform;

pub use calibrator::{Calibration, Calibrator, Choice, StartResult};
pub use config::{
    CalibrateConfig, Loss, Optimizer, ParamSpec, Polish, RaceCut, SoftChoiceConfig, race_problem,
};
pub use data::{Column, Dataset, Shared};
pub use error::{CalibrateError, Result};
/// The `ndvm-core` types this crate's API names (the heap and program a calibration reads, the
/// parameter kinds of [`ParamSpec`], the dialect of [`CalibrateConfig`], the evaluator's error
/// inside [`CalibrateError::Eval`]), so that callers can name them from here.
pub use ndvm_core::{ChoiceMode, CoreError, Dialect, ErrorKind, Heap, ParamKind, Program};
pub use stop::{StartStatus, StopReason};
