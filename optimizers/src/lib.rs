//! ndvm-optimizers: fits a program's constants to data (the calibrator is not built yet; see issue 3).
#![forbid(unsafe_code)]
