//! ndvm-fuzz: a differential fuzzer that hunts wrong values and gradients in the runtime.
//!
//! [`generate`] draws seeded, well-typed programs (scalars, vectors, matrices, lists, closures,
//! loops, divergent branches, `eval`); [`oracle`] checks each against an independent reference
//! evaluator ([`reference`]), finite differences, lane decomposition, replay, a pooled evaluator
//! and print → parse round trips; [`shrink`] reduces a failure; [`run`] drives a pass and reads and
//! writes the regression files under `fuzz/regressions/`.

pub mod error;
pub mod generate;
pub mod oracle;
pub mod reference;
pub mod run;
pub mod shrink;
pub mod sx;

pub use error::{FuzzError, Result};
