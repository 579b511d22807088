//! `ndvm-bench suite`: the broad benchmark with known ground truth, this project's co-search side
//! by side with pyoperon: the problem table ([`PROBLEMS`]), its seeded data generator, the task
//! files it writes, the runs of both tools, the medians, the winners and the report.
//!
//! Each problem × noise level × seed is one run of each tool for the same seconds at the same
//! threads. This project runs the generated task file in process, exactly as `bench search` does
//! (its `run_ndvm`); pyoperon runs `results/bench/pyoperon_search.py` in its own virtual
//! environment (`results/bench/.venv-pyoperon`, created on first use; `--no-pyoperon` skips it).
//!
//! Problems: the seven of `results/bench/selection_suite.py`, Feynman-style formulas, Nguyen
//! benchmarks, Strogatz-style ODE right-hand sides (each with its formula, an in-range box and an
//! out-of-range box per input) and the two shipped LLM-SR problems (`tasks/data/llmsr/`: no
//! closed form here, so no recovery; run once per seed under the data's own noise, `data`).
//!
//! Data ([`generate`]): [`TRAIN_ROWS`] training rows and [`TEST_ROWS`] `test_id` rows drawn
//! uniformly in the in-range box, [`TEST_ROWS`] `test_ood` rows in the out-of-range box (all three
//! noisy), and `truth`, [`TEST_ROWS`] noise-free rows in each box. The generator is a
//! `ChaCha8Rng` seeded by [`data_seed`] (FNV-1a of the problem's name and the noise level), so a
//! problem × noise has the same rows in every run and for every seed; the noise is Gaussian
//! (Box–Muller from two uniforms) with standard deviation noise × RMS of the noise-free training
//! target. The CSV files (every value in Rust's shortest round-trip form) and one task file per
//! seed go to `<out>/suite-data/`. A task is what a user writes: `name`, `seed`, `data: {csv,
//! tests}`, `inputs`, `target`, ten parameters and `budget: {seconds}`, nothing else (the defaults
//! are measured), unless `--task-keys FILE` adds its top-level keys to every task.
//!
//! Measures: NMSE (MSE / population variance of the target) of the model each tool selects on
//! `test_id`, `test_ood` and `truth`; its size (this project: atoms and pairs of the answer,
//! `complexity`; pyoperon: nodes of its tree); *recovered*: truth NMSE below [`RECOVERED_BELOW`].
//! Per problem × noise: the median over seeds of each (a run without a finite value counting as
//! +∞), the recovery count, and who wins each of in range (`test_id`), out of range (`test_ood`)
//! and truth by [`winner`]. Written to `<out>/suite.json` and `<out>/suite.md` (the table).
//!
//! Each finished run is appended to `<out>/suite-runs.jsonl` ([`crate::journal`]) the moment it
//! ends; a rerun into the same `<out>` takes every run whose key matches from there (pyoperon's
//! runs whatever this project's code; this project's while the sources it is built from,
//! [`BUILT_FROM`], are committed and unchanged), so a killed or interrupted suite resumes where
//! it stopped, a change to this project reruns only its side, and `--no-ndvm` fills in
//! pyoperon's side alone.
//!
//! Run it (hours at the defaults: 24 problems × 2 noise levels × 3 seeds × 2 tools × 60 s):
//!
//! ```text
//! cargo build --release -p ndvm-bench && target/release/ndvm-bench suite --out results/suite
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize, Serializer};

use crate::journal::{Journal, RunKey, digest};
use crate::search::{
    self, CsvFiles, Pyoperon, RunSettings, SeedRun, Spread, Tables, Tool, ToolStatus,
};
use crate::{Machine, loadavg, write_json};
use ndvm_search::{Result, SearchError};

/// Training rows of a generated problem.
pub const TRAIN_ROWS: usize = 200;

/// Rows of `test_id`, of `test_ood`, and of each half of `truth`.
pub const TEST_ROWS: usize = 100;

/// A model is recovered when its NMSE on `truth` is below this. `truth` samples the formula
/// densely without noise, in and out of range, so this holds for the true formula with its
/// constants within roughly 1e-3 relative (a relative error ε in the prediction gives an NMSE of
/// about ε² × mean(y²) / var(y)), and for hardly anything else.
pub const RECOVERED_BELOW: f64 = 1e-5;

/// Two medians within this fraction of the larger are a tie.
pub const TIE_WITHIN: f64 = 0.05;

/// Two medians both below this are a tie (both exact to rounding).
pub const BOTH_EXACT_BELOW: f64 = 1e-20;

/// The target column of the generated tables.
pub const TARGET: &str = "f";

/// Parameters of every generated task (`p0` … `p9`).
pub const N_PARAMS: usize = 10;

/// The folder under `<out>` receiving the generated data and task files.
pub const DATA_DIR: &str = "suite-data";

/// The keys every generated task writes; `--task-keys` may not set them (except `params`, which
/// replaces the ten generated parameters).
pub const GENERATED_KEYS: [&str; 7] = [
    "name", "seed", "data", "inputs", "target", "params", "budget",
];

/// Where a problem comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// The model-selection suite (`results/bench/selection_suite.py`).
    Selection,
    /// Formulas of the Feynman Lectures (AI Feynman's benchmark), constants rescaled to about 1.
    Feynman,
    /// The Nguyen symbolic-regression benchmarks.
    Nguyen,
    /// Right-hand sides of the Strogatz ODE benchmarks.
    Strogatz,
    /// The LLM-SR problems shipped in `tasks/data/llmsr/`.
    LlmSr,
}

/// A formula of a problem's inputs, in the order of [`Problem::inputs`].
pub type Formula = fn(&[f64]) -> f64;

/// A problem's ground truth.
#[derive(Clone, Copy, Debug)]
pub enum Truth {
    /// A known formula, sampled in an in-range and an out-of-range box.
    Formula {
        /// The formula.
        f: Formula,
        /// `(low, high)` per input: the training and `test_id` rows.
        range: &'static [(f64, f64)],
        /// `(low, high)` per input: the `test_ood` rows; disjoint from `range` (on at least one
        /// input the two intervals share at most an end point).
        ood: &'static [(f64, f64)],
    },
    /// Shipped data with no closed form here: `<checkout>/<dir>/{train,test_id,test_ood}.csv`.
    Shipped {
        /// The folder, relative to the checkout.
        dir: &'static str,
        /// The target column.
        target: &'static str,
    },
}

/// One benchmark problem.
#[derive(Clone, Copy, Debug)]
pub struct Problem {
    /// Its name (a task name: letters, digits, `-`).
    pub name: &'static str,
    /// Where it comes from.
    pub family: Family,
    /// The benchmark entry it follows (`Feynman I.6.2a`, `Nguyen-1`, …).
    pub reference: &'static str,
    /// The input columns.
    pub inputs: &'static [&'static str],
    /// The formula as text (the same as [`Truth::Formula`]'s `f`).
    pub formula: &'static str,
    /// The ground truth.
    pub truth: Truth,
}

impl Problem {
    /// The problem named `name`.
    pub fn by_name(name: &str) -> Option<&'static Problem> {
        PROBLEMS.iter().find(|p| p.name == name)
    }

    /// Whether it has a known formula (and so a `truth` table and a recovery count).
    pub fn has_truth(&self) -> bool {
        matches!(self.truth, Truth::Formula { .. })
    }

    /// The tables both tools are scored on: `train`, `test_id`, `test_ood`, and `truth` when the
    /// formula is known.
    pub fn tables(&self) -> &'static [&'static str] {
        if self.has_truth() {
            &["train", "test_id", "test_ood", "truth"]
        } else {
            &search::SEARCH_TABLES
        }
    }
}

/// Every problem of the suite, in the order of its report.
pub const PROBLEMS: &[Problem] = &[
    // The seven of results/bench/selection_suite.py, formulas and boxes as written there.
    Problem {
        name: "damped-oscillation",
        family: Family::Selection,
        reference: "selection_suite.py",
        inputs: &["x"],
        formula: "exp(-0.3*x)*cos(2*x)",
        truth: Truth::Formula {
            f: |v| (-0.3 * v[0]).exp() * (2.0 * v[0]).cos(),
            range: &[(0.1, 6.0)],
            ood: &[(6.0, 8.0)],
        },
    },
    Problem {
        name: "enzyme-inhibition",
        family: Family::Selection,
        reference: "selection_suite.py",
        inputs: &["S", "I"],
        formula: "2.5*S/(1.2*(1 + I/0.8) + S)",
        truth: Truth::Formula {
            f: |v| 2.5 * v[0] / (1.2 * (1.0 + v[1] / 0.8) + v[0]),
            range: &[(0.1, 5.0), (0.0, 2.0)],
            ood: &[(5.0, 10.0), (2.0, 3.0)],
        },
    },
    Problem {
        name: "arrhenius",
        family: Family::Selection,
        reference: "selection_suite.py",
        inputs: &["T"],
        formula: "3*exp(-2/T)",
        truth: Truth::Formula {
            f: |v| 3.0 * (-2.0 / v[0]).exp(),
            range: &[(0.5, 3.0)],
            ood: &[(3.0, 5.0)],
        },
    },
    Problem {
        name: "logistic-growth",
        family: Family::Selection,
        reference: "selection_suite.py",
        inputs: &["t"],
        formula: "5/(1 + exp(-1.2*(t - 3)))",
        truth: Truth::Formula {
            f: |v| 5.0 / (1.0 + (-1.2 * (v[0] - 3.0)).exp()),
            range: &[(0.0, 5.0)],
            ood: &[(5.0, 8.0)],
        },
    },
    Problem {
        name: "power-law",
        family: Family::Selection,
        reference: "selection_suite.py",
        inputs: &["x"],
        formula: "1.7*x^1.5",
        truth: Truth::Formula {
            f: |v| 1.7 * v[0].powf(1.5),
            range: &[(0.5, 4.0)],
            ood: &[(4.0, 6.0)],
        },
    },
    Problem {
        name: "cubic",
        family: Family::Selection,
        reference: "selection_suite.py",
        inputs: &["x"],
        formula: "0.5*x^3 - 1.2*x^2 + 0.8*x",
        truth: Truth::Formula {
            f: |v| 0.5 * v[0].powi(3) - 1.2 * v[0].powi(2) + 0.8 * v[0],
            range: &[(-1.0, 2.0)],
            ood: &[(2.0, 3.0)],
        },
    },
    Problem {
        name: "gravity",
        family: Family::Selection,
        reference: "selection_suite.py",
        inputs: &["m1", "m2", "r"],
        formula: "1.5*m1*m2/r^2",
        truth: Truth::Formula {
            f: |v| 1.5 * v[0] * v[1] / (v[2] * v[2]),
            range: &[(1.0, 3.0), (1.0, 3.0), (1.0, 2.0)],
            ood: &[(3.0, 4.0), (3.0, 4.0), (2.0, 3.0)],
        },
    },
    // Feynman-style: constants rescaled to about 1, boxes clear of every pole in and out of range.
    Problem {
        name: "feynman-gaussian",
        family: Family::Feynman,
        reference: "Feynman I.6.2a",
        inputs: &["theta"],
        formula: "exp(-theta^2/2)/sqrt(2*pi)",
        truth: Truth::Formula {
            f: |v| (-v[0] * v[0] / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt(),
            range: &[(-2.0, 2.0)],
            ood: &[(2.0, 4.0)],
        },
    },
    Problem {
        name: "feynman-coulomb",
        family: Family::Feynman,
        reference: "Feynman I.12.2 (1/(4 pi epsilon) rescaled to 0.8)",
        inputs: &["q1", "q2", "r"],
        formula: "0.8*q1*q2/r^2",
        truth: Truth::Formula {
            f: |v| 0.8 * v[0] * v[1] / (v[2] * v[2]),
            range: &[(0.5, 2.0), (0.5, 2.0), (0.5, 1.5)],
            ood: &[(2.0, 3.0), (2.0, 3.0), (1.5, 2.5)],
        },
    },
    Problem {
        name: "feynman-kinetic-energy",
        family: Family::Feynman,
        reference: "Feynman I.13.4 (one velocity component)",
        inputs: &["m", "v"],
        formula: "0.5*m*v^2",
        truth: Truth::Formula {
            f: |v| 0.5 * v[0] * v[1] * v[1],
            range: &[(1.0, 5.0), (0.5, 3.0)],
            ood: &[(5.0, 8.0), (3.0, 5.0)],
        },
    },
    Problem {
        name: "feynman-relativistic-mass",
        family: Family::Feynman,
        reference: "Feynman I.10.7 (v/c at most 0.8 in both boxes)",
        inputs: &["m0", "v", "c"],
        formula: "m0/sqrt(1 - v^2/c^2)",
        truth: Truth::Formula {
            f: |v| v[0] / (1.0 - v[1] * v[1] / (v[2] * v[2])).sqrt(),
            range: &[(1.0, 5.0), (0.1, 0.8), (1.0, 2.0)],
            ood: &[(5.0, 7.0), (0.8, 1.2), (1.5, 2.0)],
        },
    },
    Problem {
        name: "feynman-distance",
        family: Family::Feynman,
        reference: "Feynman I.8.14",
        inputs: &["x1", "x2", "y1", "y2"],
        formula: "sqrt((x2 - x1)^2 + (y2 - y1)^2)",
        truth: Truth::Formula {
            f: |v| ((v[1] - v[0]).powi(2) + (v[3] - v[2]).powi(2)).sqrt(),
            range: &[(0.0, 1.0), (1.0, 3.0), (0.0, 1.0), (1.0, 3.0)],
            ood: &[(-1.0, 0.0), (3.0, 4.0), (-1.0, 0.0), (3.0, 4.0)],
        },
    },
    Problem {
        name: "feynman-centre-of-mass",
        family: Family::Feynman,
        reference: "Feynman I.18.4",
        inputs: &["m1", "m2", "r1", "r2"],
        formula: "(m1*r1 + m2*r2)/(m1 + m2)",
        truth: Truth::Formula {
            f: |v| (v[0] * v[2] + v[1] * v[3]) / (v[0] + v[1]),
            range: &[(1.0, 5.0), (1.0, 5.0), (1.0, 5.0), (1.0, 5.0)],
            ood: &[(5.0, 8.0), (5.0, 8.0), (5.0, 8.0), (5.0, 8.0)],
        },
    },
    Problem {
        name: "feynman-ideal-gas",
        family: Family::Feynman,
        reference: "Feynman I.39.22 (kB rescaled to 1.38)",
        inputs: &["n", "T", "V"],
        formula: "1.38*n*T/V",
        truth: Truth::Formula {
            f: |v| 1.38 * v[0] * v[1] / v[2],
            range: &[(1.0, 5.0), (1.0, 5.0), (1.0, 5.0)],
            ood: &[(5.0, 8.0), (5.0, 8.0), (5.0, 8.0)],
        },
    },
    Problem {
        name: "feynman-dipole-field",
        family: Family::Feynman,
        reference: "Feynman II.6.15a (epsilon rescaled to 1)",
        inputs: &["p", "r", "x", "y", "z"],
        formula: "3/(4*pi)*p*z*sqrt(x^2 + y^2)/r^5",
        truth: Truth::Formula {
            f: |v| {
                3.0 / (4.0 * std::f64::consts::PI)
                    * v[0]
                    * v[4]
                    * (v[2] * v[2] + v[3] * v[3]).sqrt()
                    / v[1].powi(5)
            },
            range: &[(1.0, 3.0), (1.0, 2.0), (1.0, 3.0), (1.0, 3.0), (1.0, 3.0)],
            ood: &[(3.0, 4.0), (2.0, 3.0), (3.0, 4.0), (3.0, 4.0), (3.0, 4.0)],
        },
    },
    Problem {
        name: "feynman-planck",
        family: Family::Feynman,
        reference: "Feynman I.41.16 (h, c, kB and pi^2 rescaled to 1)",
        inputs: &["omega", "T"],
        formula: "omega^3/(exp(omega/T) - 1)",
        truth: Truth::Formula {
            f: |v| v[0].powi(3) / ((v[0] / v[1]).exp() - 1.0),
            range: &[(0.5, 3.0), (1.0, 3.0)],
            ood: &[(3.0, 5.0), (3.0, 4.0)],
        },
    },
    // Nguyen: their formulas and (where they are intervals) their ranges; out of range beyond.
    Problem {
        name: "nguyen-1",
        family: Family::Nguyen,
        reference: "Nguyen-1",
        inputs: &["x"],
        formula: "x^3 + x^2 + x",
        truth: Truth::Formula {
            f: |v| v[0].powi(3) + v[0].powi(2) + v[0],
            range: &[(-1.0, 1.0)],
            ood: &[(1.0, 2.0)],
        },
    },
    Problem {
        name: "nguyen-5",
        family: Family::Nguyen,
        reference: "Nguyen-5",
        inputs: &["x"],
        formula: "sin(x^2)*cos(x) - 1",
        truth: Truth::Formula {
            f: |v| (v[0] * v[0]).sin() * v[0].cos() - 1.0,
            range: &[(-1.0, 1.0)],
            ood: &[(1.0, 2.0)],
        },
    },
    Problem {
        name: "nguyen-7",
        family: Family::Nguyen,
        reference: "Nguyen-7",
        inputs: &["x"],
        formula: "log(x + 1) + log(x^2 + 1)",
        truth: Truth::Formula {
            f: |v| (v[0] + 1.0).ln() + (v[0] * v[0] + 1.0).ln(),
            range: &[(0.0, 2.0)],
            ood: &[(2.0, 4.0)],
        },
    },
    Problem {
        name: "nguyen-8",
        family: Family::Nguyen,
        reference: "Nguyen-8",
        inputs: &["x"],
        formula: "sqrt(x)",
        truth: Truth::Formula {
            f: |v| v[0].sqrt(),
            range: &[(0.0, 4.0)],
            ood: &[(4.0, 8.0)],
        },
    },
    Problem {
        name: "nguyen-10",
        family: Family::Nguyen,
        reference: "Nguyen-10",
        inputs: &["x", "y"],
        formula: "2*sin(x)*cos(y)",
        truth: Truth::Formula {
            f: |v| 2.0 * v[0].sin() * v[1].cos(),
            range: &[(0.0, 1.0), (0.0, 1.0)],
            ood: &[(1.0, 2.0), (1.0, 2.0)],
        },
    },
    Problem {
        name: "nguyen-12",
        family: Family::Nguyen,
        reference: "Nguyen-12",
        inputs: &["x", "y"],
        formula: "x^4 - x^3 + y^2/2 - y",
        truth: Truth::Formula {
            f: |v| v[0].powi(4) - v[0].powi(3) + v[1] * v[1] / 2.0 - v[1],
            range: &[(0.0, 1.0), (0.0, 1.0)],
            ood: &[(1.0, 2.0), (1.0, 2.0)],
        },
    },
    // Strogatz: dx/dt of two ODE systems of the ODE-Strogatz benchmark.
    Problem {
        name: "strogatz-bacres",
        family: Family::Strogatz,
        reference: "Strogatz bacterial respiration, dx/dt",
        inputs: &["x", "y"],
        formula: "20 - x - x*y/(1 + 0.5*x^2)",
        truth: Truth::Formula {
            f: |v| 20.0 - v[0] - v[0] * v[1] / (1.0 + 0.5 * v[0] * v[0]),
            range: &[(0.5, 5.0), (0.5, 5.0)],
            ood: &[(5.0, 8.0), (5.0, 8.0)],
        },
    },
    Problem {
        name: "strogatz-predprey",
        family: Family::Strogatz,
        reference: "Strogatz predator-prey, dx/dt",
        inputs: &["x", "y"],
        formula: "x*(4 - x - y/(1 + x))",
        truth: Truth::Formula {
            f: |v| v[0] * (4.0 - v[0] - v[1] / (1.0 + v[0])),
            range: &[(0.5, 5.0), (0.5, 5.0)],
            ood: &[(5.0, 8.0), (5.0, 8.0)],
        },
    },
    // The shipped LLM-SR problems, inputs and target as tasks/llmsr-<name>.yaml names them.
    Problem {
        name: "llmsr-oscillator1",
        family: Family::LlmSr,
        reference: "LLM-SR oscillator1",
        inputs: &["x", "v"],
        formula: "unknown (a damped nonlinear oscillator's acceleration)",
        truth: Truth::Shipped {
            dir: "tasks/data/llmsr/oscillator1",
            target: "a",
        },
    },
    Problem {
        name: "llmsr-bactgrow",
        family: Family::LlmSr,
        reference: "LLM-SR bactgrow",
        inputs: &["b", "s", "temp", "pH"],
        formula: "unknown (E. coli growth rate)",
        truth: Truth::Shipped {
            dir: "tasks/data/llmsr/bactgrow",
            target: "db",
        },
    },
];

/// The seed of a problem × noise level's data: the 64-bit FNV-1a hash of the bytes of
/// `<name>/noise=<noise>` (the noise in Rust's `{:?}` form: `0.0`, `0.01`).
pub fn data_seed(name: &str, noise: f64) -> u64 {
    fnv1a(format!("{name}/noise={noise:?}").as_bytes())
}

/// 64-bit FNV-1a.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Rows of one table: the inputs of each row and the target.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rows {
    /// One vector of inputs per row, in the problem's input order.
    pub x: Vec<Vec<f64>>,
    /// The target per row.
    pub y: Vec<f64>,
}

impl Rows {
    /// `n` rows uniform in `bounds`, with the noise-free target.
    fn sample(rng: &mut ChaCha8Rng, f: Formula, bounds: &[(f64, f64)], n: usize) -> Rows {
        let x: Vec<Vec<f64>> = (0..n)
            .map(|_| {
                bounds
                    .iter()
                    .map(|&(lo, hi)| lo + (hi - lo) * rng.random::<f64>())
                    .collect()
            })
            .collect();
        let y = x.iter().map(|r| f(r)).collect();
        Rows { x, y }
    }

    /// Adds Gaussian noise of standard deviation `sd` to each target (none drawn when `sd` is 0).
    fn add_noise(&mut self, rng: &mut ChaCha8Rng, sd: f64) {
        if sd > 0.0 {
            for y in &mut self.y {
                *y += sd * gaussian(rng);
            }
        }
    }

    /// The headed CSV text of these rows, every value in Rust's shortest round-trip form.
    pub fn csv(&self, inputs: &[&str], target: &str) -> String {
        let mut s = inputs.join(",") + "," + target + "\n";
        for (x, y) in self.x.iter().zip(&self.y) {
            for v in x {
                let _ = write!(s, "{v:?},");
            }
            let _ = writeln!(s, "{y:?}");
        }
        s
    }
}

/// A standard normal draw by Box–Muller from two uniforms (the cosine branch only).
fn gaussian(rng: &mut ChaCha8Rng) -> f64 {
    let u1 = 1.0 - rng.random::<f64>(); // (0, 1]: the logarithm stays finite
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// The four tables of a generated problem × noise level.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// Training rows (in range, noisy).
    pub train: Rows,
    /// In-range test rows (noisy).
    pub test_id: Rows,
    /// Out-of-range test rows (noisy).
    pub test_ood: Rows,
    /// Noise-free rows, [`TEST_ROWS`] in range then [`TEST_ROWS`] out of range.
    pub truth: Rows,
    /// The standard deviation of the noise added.
    pub noise_sd: f64,
}

/// The data of `problem` at `noise` (a fraction of the RMS of the noise-free training target),
/// from a generator seeded by [`data_seed`]: first every input (train, test_id, test_ood, truth
/// in range, truth out of range), then the noise (train, test_id, test_ood). `None` for a problem
/// without a formula.
pub fn generate(problem: &Problem, noise: f64) -> Option<Dataset> {
    let Truth::Formula { f, range, ood } = problem.truth else {
        return None;
    };
    let mut rng = ChaCha8Rng::seed_from_u64(data_seed(problem.name, noise));
    let mut train = Rows::sample(&mut rng, f, range, TRAIN_ROWS);
    let mut test_id = Rows::sample(&mut rng, f, range, TEST_ROWS);
    let mut test_ood = Rows::sample(&mut rng, f, ood, TEST_ROWS);
    let mut truth = Rows::sample(&mut rng, f, range, TEST_ROWS);
    let out = Rows::sample(&mut rng, f, ood, TEST_ROWS);
    truth.x.extend(out.x);
    truth.y.extend(out.y);
    let rms = (train.y.iter().map(|y| y * y).sum::<f64>() / train.y.len() as f64).sqrt();
    let noise_sd = noise * rms;
    train.add_noise(&mut rng, noise_sd);
    test_id.add_noise(&mut rng, noise_sd);
    test_ood.add_noise(&mut rng, noise_sd);
    Some(Dataset {
        train,
        test_id,
        test_ood,
        truth,
        noise_sd,
    })
}

/// A cell's noise: a fraction of the training target's RMS, or the shipped data's own.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Noise {
    /// Gaussian noise of this fraction of the RMS of the noise-free training target.
    Fraction(f64),
    /// The noise the shipped data has (LLM-SR).
    Data,
}

impl Noise {
    /// As the table shows it: `0`, `0.01`, `data`.
    pub fn label(self) -> String {
        match self {
            Noise::Fraction(x) => format!("{x}"),
            Noise::Data => "data".to_string(),
        }
    }
}

impl Serialize for Noise {
    /// A number, or the string `data`.
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Noise::Fraction(x) => s.serialize_f64(*x),
            Noise::Data => s.serialize_str("data"),
        }
    }
}

/// The file stem of a problem × noise: `<name>-n<noise>` with `.` spelled `p` (`cubic-n0p01`), or
/// the name for shipped data.
fn stem(problem: &Problem, noise: Noise) -> String {
    match noise {
        Noise::Fraction(x) => format!("{}-n{}", problem.name, format!("{x}").replace('.', "p")),
        Noise::Data => problem.name.to_string(),
    }
}

/// `--task-keys FILE`: top-level keys added to every generated task.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskKeys {
    /// The file.
    pub path: PathBuf,
    /// Its text, as read.
    pub content: String,
    /// Its top-level keys, in order.
    pub keys: Vec<String>,
}

impl TaskKeys {
    /// Reads and checks the file (see [`TaskKeys::parse`]).
    pub fn read(path: &Path) -> Result<TaskKeys> {
        let text = ndvm_search::textfile::read(
            path,
            ndvm_search::textfile::MAX_TASK_BYTES,
            "task keys are a few lines of YAML",
        )?;
        TaskKeys::parse(path, &text)
    }

    /// Checks `content`: a block mapping whose top-level keys are not ones the suite writes
    /// ([`GENERATED_KEYS`]) other than `params`. Everything else is checked when the tasks
    /// load, before anything runs.
    pub fn parse(path: &Path, content: &str) -> Result<TaskKeys> {
        let bad = |message: String| SearchError::BadArgument {
            arg: format!("--task-keys {}", path.display()),
            message,
        };
        let mut keys = Vec::new();
        for line in content.lines() {
            let first = line.chars().next();
            if line.trim().is_empty()
                || first.is_some_and(|c| c.is_whitespace() || c == '#' || c == '-')
            {
                continue;
            }
            let Some((key, _)) = line.split_once(':') else {
                return Err(bad(format!(
                    "expected top-level `key: value` lines (a YAML block mapping), not `{line}`"
                )));
            };
            let key = key.trim().trim_matches(|c| c == '"' || c == '\'');
            if GENERATED_KEYS.contains(&key) && key != "params" {
                return Err(bad(format!(
                    "`{key}` is written by the suite for every task (--seconds and \
                     --calibrations set the budget); only `params` may be replaced"
                )));
            }
            keys.push(key.to_string());
        }
        Ok(TaskKeys {
            path: path.to_path_buf(),
            content: content.to_string(),
            keys,
        })
    }

    fn sets(&self, key: &str) -> bool {
        self.keys.iter().any(|k| k == key)
    }
}

/// A path as a single-quoted YAML scalar.
fn yaml_quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "''"))
}

/// The text of the task file of `problem` × `noise` × `seed`: the keys a user writes, then the
/// `--task-keys` content. Generated problems read `<stem>-<table>.csv` beside the task; shipped
/// ones read `<checkout>/<dir>/<table>.csv`.
pub fn task_text(
    problem: &Problem,
    noise: Noise,
    seed: u64,
    seconds: f64,
    keys: Option<&TaskKeys>,
) -> String {
    let stem = stem(problem, noise);
    let csv = |table: &str| match problem.truth {
        Truth::Formula { .. } => format!("{stem}-{table}.csv"),
        Truth::Shipped { dir, .. } => {
            yaml_quoted(&search::workspace().join(dir).join(format!("{table}.csv")))
        }
    };
    let target = match problem.truth {
        Truth::Formula { .. } => TARGET,
        Truth::Shipped { target, .. } => target,
    };
    let noise_text = match noise {
        Noise::Fraction(x) => format!("noise {x} of the target's RMS"),
        Noise::Data => "the data's own noise".to_string(),
    };
    let mut s = format!(
        "# ndvm-bench suite: {} ({}: {}), {noise_text}, seed {seed}.\n\
         name: {stem}-s{seed}\nseed: {seed}\ndata:\n  csv: {}\n  tests:\n",
        problem.name,
        problem.reference,
        problem.formula,
        csv("train")
    );
    for &t in &problem.tables()[1..] {
        let _ = writeln!(s, "    - {{name: {t}, csv: {}}}", csv(t));
    }
    let _ = writeln!(
        s,
        "inputs: [{}]\ntarget: {target}",
        problem.inputs.join(", ")
    );
    if !keys.is_some_and(|k| k.sets("params")) {
        s += "params:\n";
        for i in 0..N_PARAMS {
            let _ = writeln!(s, "  - {{name: p{i}}}");
        }
    }
    let _ = writeln!(s, "budget: {{seconds: {seconds}}}");
    if let Some(k) = keys {
        let _ = writeln!(s, "# from --task-keys {}:", k.path.display());
        s += &k.content;
        if !k.content.ends_with('\n') {
            s.push('\n');
        }
    }
    s
}

/// What `bench suite` runs.
#[derive(Clone, Debug)]
pub struct SuiteOptions {
    /// Problem names (see [`PROBLEMS`]).
    pub problems: Vec<String>,
    /// Seeds: the task's master seed for this project, `random_state` for pyoperon.
    pub seeds: Vec<u64>,
    /// Noise levels of the generated problems (fractions of the training target's RMS).
    pub noise: Vec<f64>,
    /// Wall-clock seconds per run, both tools.
    pub seconds: f64,
    /// Threads per run, both tools.
    pub threads: usize,
    /// Also stop this project's runs after this many calibrations (smoke runs).
    pub calibrations: Option<usize>,
    /// Whether this project runs (`--no-ndvm`: pyoperon only, to fill the journal).
    pub ndvm: bool,
    /// The pyoperon side.
    pub pyoperon: Pyoperon,
    /// The pyoperon script.
    pub script: PathBuf,
    /// `--task-keys`: a YAML file of top-level keys added to every task.
    pub task_keys: Option<PathBuf>,
}

impl SuiteOptions {
    /// The defaults: every problem, seeds 1, 2, 3, noise 0 and 0.01, 60 s at 2 threads, pyoperon
    /// in `results/bench/.venv-pyoperon`, no task keys.
    pub fn standard() -> SuiteOptions {
        let root = search::workspace();
        SuiteOptions {
            problems: PROBLEMS.iter().map(|p| p.name.to_string()).collect(),
            seeds: vec![1, 2, 3],
            noise: vec![0.0, 0.01],
            seconds: 60.0,
            threads: 2,
            calibrations: None,
            ndvm: true,
            pyoperon: Pyoperon::Venv(root.join("results/bench/.venv-pyoperon")),
            script: root.join("results/bench/pyoperon_search.py"),
            task_keys: None,
        }
    }

    /// `--quick`: the defaults at 5 s, seed 1 and noise 0 only.
    pub fn quick() -> SuiteOptions {
        SuiteOptions {
            seconds: 5.0,
            seeds: vec![1],
            noise: vec![0.0],
            ..SuiteOptions::standard()
        }
    }

    fn settings(&self) -> RunSettings<'_> {
        RunSettings {
            seconds: self.seconds,
            threads: self.threads,
            calibrations: self.calibrations,
            script: &self.script,
        }
    }

    /// The problems, each checked to exist, and the noise levels, each checked.
    fn checked_problems(&self) -> Result<Vec<&'static Problem>> {
        let bad = |arg: String, message: String| SearchError::BadArgument { arg, message };
        if let Some(x) = self.noise.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
            return Err(bad(
                format!("--noise {x}"),
                "a noise level is a fraction of the target's RMS, finite and at least 0".into(),
            ));
        }
        if self.seeds.is_empty() || self.noise.is_empty() {
            return Err(bad(
                "--seeds, --noise".into(),
                "give at least one seed and one noise level".into(),
            ));
        }
        self.problems
            .iter()
            .map(|name| {
                Problem::by_name(name).ok_or_else(|| {
                    let all: Vec<&str> = PROBLEMS.iter().map(|p| p.name).collect();
                    bad(
                        format!("--problems {name}"),
                        format!("no such problem; the suite has {}", all.join(", ")),
                    )
                })
            })
            .collect()
    }
}

/// The command line that reproduces a run with these options (`--problems` only when not all).
pub fn command(opts: &SuiteOptions) -> String {
    let list = |v: Vec<String>| v.join(",");
    let mut s = format!(
        "ndvm-bench suite --seconds {} --threads {} --seeds {} --noise {}",
        opts.seconds,
        opts.threads,
        list(opts.seeds.iter().map(u64::to_string).collect()),
        list(opts.noise.iter().map(f64::to_string).collect()),
    );
    let all: Vec<String> = PROBLEMS.iter().map(|p| p.name.to_string()).collect();
    if opts.problems != all {
        s += &format!(" --problems {}", list(opts.problems.clone()));
    }
    if let Some(c) = opts.calibrations {
        s += &format!(" --calibrations {c}");
    }
    if let Some(k) = &opts.task_keys {
        s += &format!(" --task-keys {}", k.display());
    }
    if opts.pyoperon == Pyoperon::Skip {
        s += " --no-pyoperon";
    }
    if !opts.ndvm {
        s += " --no-ndvm";
    }
    s
}

/// One cell ready to run: its task files written and loaded.
struct Prepared {
    problem: &'static Problem,
    noise: Noise,
    /// One task file per seed.
    tasks: Vec<(u64, PathBuf)>,
    rows: Tables<usize>,
}

/// Writes the data of `problem` × `noise` into `dir` (nothing for shipped data).
fn write_data(dir: &Path, problem: &Problem, noise: Noise) -> Result<()> {
    let Noise::Fraction(level) = noise else {
        return Ok(());
    };
    let Some(data) = generate(problem, level) else {
        return Ok(());
    };
    let stem = stem(problem, noise);
    for (table, rows) in [
        ("train", &data.train),
        ("test_id", &data.test_id),
        ("test_ood", &data.test_ood),
        ("truth", &data.truth),
    ] {
        let path = dir.join(format!("{stem}-{table}.csv"));
        let text = rows.csv(problem.inputs, TARGET);
        ndvm_search::textfile::write_atomic(&path, text.as_bytes())?;
    }
    Ok(())
}

/// Writes every cell's data and task files into `dir` and loads each task (a bad task key
/// costs no minutes).
fn prepare(
    problems: &[&'static Problem],
    opts: &SuiteOptions,
    keys: Option<&TaskKeys>,
    dir: &Path,
) -> Result<Vec<Prepared>> {
    std::fs::create_dir_all(dir).map_err(|source| SearchError::Write { source })?;
    let mut cells = Vec::new();
    for &problem in problems {
        let levels: Vec<Noise> = if problem.has_truth() {
            opts.noise.iter().map(|&x| Noise::Fraction(x)).collect()
        } else {
            vec![Noise::Data]
        };
        for noise in levels {
            write_data(dir, problem, noise)?;
            let mut tasks = Vec::new();
            let mut rows = Tables::default();
            for &seed in &opts.seeds {
                let path = dir.join(format!("{}-s{seed}.yaml", stem(problem, noise)));
                let text = task_text(problem, noise, seed, opts.seconds, keys);
                ndvm_search::textfile::write_atomic(&path, text.as_bytes())?;
                let task = search::load_task(&path, seed)?;
                rows = Tables::from_names(problem.tables(), |name| match name {
                    "train" => search::train_table(&task).n_rows(),
                    _ => search::test_rows(&task, name),
                });
                tasks.push((seed, path));
            }
            cells.push(Prepared {
                problem,
                noise,
                tasks,
                rows,
            });
        }
    }
    Ok(cells)
}

/// One run of one tool in one cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SuiteRun {
    /// The run: seed, NMSE per table, model, wall time, work done, error.
    #[serde(flatten)]
    pub run: SeedRun,
    /// The size of its model (this project: atoms and pairs; pyoperon: nodes of its tree).
    pub size: Option<u64>,
    /// Truth NMSE below [`RECOVERED_BELOW`] (absent for shipped data).
    pub recovered: Option<bool>,
}

/// One tool in one cell.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCell {
    /// The tool.
    pub tool: Tool,
    /// Whether it ran.
    pub status: ToolStatus,
    /// Why it did not run, or the versions it ran with.
    pub note: Option<String>,
    /// One per seed (empty when it did not run).
    pub runs: Vec<SuiteRun>,
    /// Per table: the median NMSE over the runs, a run without a finite value counting as +∞
    /// (absent when that median is not finite).
    pub median: Tables<Option<f64>>,
    /// Per table: median and range of the finite values, and how many were not finite.
    pub nmse: Tables<Spread>,
    /// Runs recovered (absent for shipped data or a tool that did not run).
    pub recovered: Option<usize>,
    /// Median size of the models over the runs that gave one.
    pub median_size: Option<f64>,
}

/// The median of `values`, a missing or non-finite value counting as +∞; `None` when that
/// median is not finite (or there are no values).
pub fn median_counting_failures(values: &[Option<f64>]) -> Option<f64> {
    let mut v: Vec<f64> = values
        .iter()
        .map(|x| x.filter(|x| x.is_finite()).unwrap_or(f64::INFINITY))
        .collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let m = match n {
        0 => return None,
        _ if n % 2 == 1 => v[n / 2],
        _ => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    };
    m.is_finite().then_some(m)
}

impl ToolCell {
    fn new(
        tool: Tool,
        status: ToolStatus,
        note: Option<String>,
        runs: Vec<SuiteRun>,
        names: &[&str],
    ) -> ToolCell {
        let nmse = search::spreads(runs.iter().map(|r| &r.run), names);
        let median = Tables::from_names(names, |name| {
            let v: Vec<Option<f64>> = runs
                .iter()
                .map(|r| r.run.nmse.get(name).copied().flatten())
                .collect();
            median_counting_failures(&v)
        });
        let recovered = (status == ToolStatus::Ran && names.contains(&"truth"))
            .then(|| runs.iter().filter(|r| r.recovered == Some(true)).count());
        let sizes: Vec<Option<f64>> = runs.iter().map(|r| r.size.map(|s| s as f64)).collect();
        ToolCell {
            tool,
            status,
            note,
            median,
            nmse,
            recovered,
            median_size: Spread::of(&sizes).median,
            runs,
        }
    }
}

/// Who has the lower median NMSE of a cell's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Winner {
    /// This project.
    Ndvm,
    /// pyoperon.
    Pyoperon,
    /// Within [`TIE_WITHIN`] of each other, both below [`BOTH_EXACT_BELOW`], or both without a
    /// finite median.
    Tie,
}

/// The winner of two medians (`None`: not finite): the lower one, unless they are within
/// [`TIE_WITHIN`] of the larger or both below [`BOTH_EXACT_BELOW`] (a tie); a finite median
/// beats none, and two missing ones tie.
pub fn winner(ndvm: Option<f64>, pyoperon: Option<f64>) -> Winner {
    match (ndvm, pyoperon) {
        (None, None) => Winner::Tie,
        (Some(_), None) => Winner::Ndvm,
        (None, Some(_)) => Winner::Pyoperon,
        (Some(a), Some(b)) => {
            if (a < BOTH_EXACT_BELOW && b < BOTH_EXACT_BELOW)
                || (a - b).abs() <= TIE_WITHIN * a.max(b)
            {
                Winner::Tie
            } else if a < b {
                Winner::Ndvm
            } else {
                Winner::Pyoperon
            }
        }
    }
}

/// The winners of a cell (absent where pyoperon did not run, or the cell has no `truth`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Winners {
    /// In range: `test_id`.
    pub test_id: Option<Winner>,
    /// Out of range: `test_ood`.
    pub test_ood: Option<Winner>,
    /// Noise-free, in and out of range: `truth`.
    pub truth: Option<Winner>,
}

/// One problem × noise level.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CellResult {
    /// The problem.
    pub problem: &'static str,
    /// Its family.
    pub family: Family,
    /// The noise level.
    pub noise: Noise,
    /// The task file of each seed.
    pub tasks: Vec<PathBuf>,
    /// Rows per table as this project read them.
    pub rows: Tables<usize>,
    /// This project, then pyoperon.
    pub tools: Vec<ToolCell>,
    /// Who wins each table.
    pub winner: Winners,
}

impl CellResult {
    fn tool(&self, tool: Tool) -> Option<&ToolCell> {
        self.tools.iter().find(|t| t.tool == tool)
    }
}

/// The pyoperon environment: its Python and versions, or why there is none (empty: skipped).
type PyoperonEnv = std::result::Result<(PathBuf, String), String>;

/// The journal and the code identities of its keys.
struct Ledger {
    journal: Journal,
    /// This project's version, profile and clean commit (absent: uncommitted changes).
    ndvm_code: Option<String>,
}

impl Ledger {
    /// The key of `tool`'s run of `cell` at `seed` (`task`: its task file).
    fn key(
        &self,
        tool: Tool,
        cell: &Prepared,
        (seed, task): (u64, &Path),
        opts: &SuiteOptions,
        code: Option<String>,
    ) -> Result<RunKey> {
        let files: CsvFiles = search::csv_files(task)?;
        let mut read: Vec<&Path> = vec![&files.train];
        read.extend(files.tests.iter().map(|(_, p)| p.as_path()));
        read.push(match tool {
            Tool::Ndvm => task,
            Tool::Pyoperon => &opts.script,
        });
        Ok(RunKey {
            tool,
            problem: cell.problem.name.to_string(),
            noise: cell.noise.label(),
            seed,
            seconds: opts.seconds,
            threads: opts.threads,
            calibrations: opts.calibrations.filter(|_| tool == Tool::Ndvm),
            inputs: digest(&read)?,
            code,
        })
    }

    /// The journaled run of `key`, or `run()`'s, journaled unless it failed.
    fn run_once(
        &mut self,
        key: RunKey,
        progress: &mut dyn FnMut(&str),
        run: impl FnOnce() -> Result<SuiteRun>,
    ) -> Result<SuiteRun> {
        let what = format!(
            "suite: {} noise {}, {}, seed {}",
            key.problem,
            key.noise,
            key.tool.label(),
            key.seed
        );
        if let Some(done) = self.journal.find(&key) {
            progress(&format!("{what} (from the journal)"));
            return Ok(done);
        }
        progress(&what);
        let result = run()?;
        if result.run.error.is_none() {
            self.journal.record(key, result.clone())?;
        }
        Ok(result)
    }
}

/// This project's runs of one cell.
fn ndvm_cell(
    cell: &Prepared,
    opts: &SuiteOptions,
    ledger: &mut Ledger,
    progress: &mut dyn FnMut(&str),
) -> Result<ToolCell> {
    let names = cell.problem.tables();
    if !opts.ndvm {
        let note = Some("skipped (--no-ndvm)".to_string());
        let status = ToolStatus::Skipped;
        return Ok(ToolCell::new(Tool::Ndvm, status, note, vec![], names));
    }
    let mut runs = Vec::new();
    for (seed, path) in &cell.tasks {
        let code = ledger.ndvm_code.clone();
        let key = ledger.key(Tool::Ndvm, cell, (*seed, path), opts, code)?;
        runs.push(ledger.run_once(key, progress, || {
            let (run, size) = search::run_ndvm(path, *seed, &opts.settings(), names)?;
            Ok(suite_run(cell.problem, run, size))
        })?);
    }
    Ok(ToolCell::new(
        Tool::Ndvm,
        ToolStatus::Ran,
        None,
        runs,
        names,
    ))
}

/// A run with its size and recovery.
fn suite_run(problem: &Problem, run: SeedRun, size: Option<u64>) -> SuiteRun {
    let recovered = problem.has_truth().then(|| {
        run.nmse
            .get("truth")
            .copied()
            .flatten()
            .is_some_and(|x| x < RECOVERED_BELOW)
    });
    SuiteRun {
        run,
        size,
        recovered,
    }
}

/// pyoperon's runs of one cell.
fn pyoperon_cell(
    cell: &Prepared,
    opts: &SuiteOptions,
    env: &PyoperonEnv,
    ledger: &mut Ledger,
    progress: &mut dyn FnMut(&str),
) -> Result<ToolCell> {
    let names = cell.problem.tables();
    let (python, versions) = match (&opts.pyoperon, env) {
        (Pyoperon::Skip, _) => {
            let note = Some("skipped (--no-pyoperon)".to_string());
            let status = ToolStatus::Skipped;
            return Ok(ToolCell::new(Tool::Pyoperon, status, note, vec![], names));
        }
        (Pyoperon::Venv(_), Err(why)) => {
            let (status, note) = (ToolStatus::Unavailable, Some(why.clone()));
            return Ok(ToolCell::new(Tool::Pyoperon, status, note, vec![], names));
        }
        (Pyoperon::Venv(_), Ok(pair)) => pair,
    };
    let mut runs = Vec::new();
    for (seed, path) in &cell.tasks {
        let code = Some(versions.clone());
        let key = ledger.key(Tool::Pyoperon, cell, (*seed, path), opts, code)?;
        runs.push(ledger.run_once(key, progress, || {
            let files: CsvFiles = search::csv_files(path)?;
            let (run, size) = search::run_pyoperon(python, &files, *seed, &opts.settings(), names);
            Ok(suite_run(cell.problem, run, size))
        })?);
    }
    let note = Some(versions.clone());
    Ok(ToolCell::new(
        Tool::Pyoperon,
        ToolStatus::Ran,
        note,
        runs,
        names,
    ))
}

/// The winners of a cell from its two tools' medians.
fn winners(ours: &ToolCell, theirs: &ToolCell) -> Winners {
    if theirs.status != ToolStatus::Ran || ours.status != ToolStatus::Ran {
        return Winners::default();
    }
    let w = |name: &str| {
        ours.median.get(name).map(|&a| {
            let b = theirs.median.get(name).copied().flatten();
            winner(a, b)
        })
    };
    Winners {
        test_id: w("test_id"),
        test_ood: w("test_ood"),
        truth: w("truth"),
    }
}

/// Wins of each tool and ties over the cells where both ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Tally {
    /// Cells this project wins.
    pub ndvm: usize,
    /// Cells pyoperon wins.
    pub pyoperon: usize,
    /// Ties.
    pub ties: usize,
    /// Cells compared.
    pub of: usize,
}

impl Tally {
    fn add(&mut self, w: Option<Winner>) {
        let Some(w) = w else { return };
        self.of += 1;
        match w {
            Winner::Ndvm => self.ndvm += 1,
            Winner::Pyoperon => self.pyoperon += 1,
            Winner::Tie => self.ties += 1,
        }
    }
}

/// Recovered runs out of the runs with a `truth` table.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Recovery {
    /// Recovered runs.
    pub recovered: usize,
    /// Runs with a known formula.
    pub runs: usize,
}

/// The summary lines of the suite.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Totals {
    /// Problem × noise cells.
    pub cells: usize,
    /// In range (`test_id`).
    pub in_range: Tally,
    /// Out of range (`test_ood`).
    pub out_of_range: Tally,
    /// Noise-free, in and out of range (`truth`).
    pub truth: Tally,
    /// This project's recoveries.
    pub recovery_ndvm: Recovery,
    /// pyoperon's recoveries.
    pub recovery_pyoperon: Recovery,
}

/// The totals over `cells`.
pub fn totals(cells: &[CellResult]) -> Totals {
    let mut t = Totals {
        cells: cells.len(),
        ..Totals::default()
    };
    for c in cells {
        t.in_range.add(c.winner.test_id);
        t.out_of_range.add(c.winner.test_ood);
        t.truth.add(c.winner.truth);
        for (tool, rec) in [
            (Tool::Ndvm, &mut t.recovery_ndvm),
            (Tool::Pyoperon, &mut t.recovery_pyoperon),
        ] {
            if let Some(tc) = c.tool(tool)
                && let Some(k) = tc.recovered
            {
                rec.recovered += k;
                rec.runs += tc.runs.len();
            }
        }
    }
    t
}

/// A problem as `suite.json` describes it.
#[derive(Clone, Debug, Serialize)]
pub struct ProblemInfo {
    /// Name.
    pub name: &'static str,
    /// Family.
    pub family: Family,
    /// The benchmark entry it follows.
    pub reference: &'static str,
    /// Input columns.
    pub inputs: &'static [&'static str],
    /// The formula as text.
    pub formula: &'static str,
    /// In-range box, `[low, high]` per input (generated problems).
    pub range: Option<Vec<[f64; 2]>>,
    /// Out-of-range box, `[low, high]` per input (generated problems).
    pub ood: Option<Vec<[f64; 2]>>,
    /// The shipped data's folder (LLM-SR).
    pub data: Option<&'static str>,
}

impl ProblemInfo {
    fn of(p: &Problem) -> ProblemInfo {
        let boxed = |b: &[(f64, f64)]| b.iter().map(|&(lo, hi)| [lo, hi]).collect();
        let (range, ood, data) = match p.truth {
            Truth::Formula { range, ood, .. } => (Some(boxed(range)), Some(boxed(ood)), None),
            Truth::Shipped { dir, .. } => (None, None, Some(dir)),
        };
        ProblemInfo {
            name: p.name,
            family: p.family,
            reference: p.reference,
            inputs: p.inputs,
            formula: p.formula,
            range,
            ood,
            data,
        }
    }
}

/// `suite.json`.
#[derive(Serialize)]
pub struct SuiteFile<'a> {
    /// `suite`.
    pub suite: &'static str,
    /// The command that reproduces it.
    pub command: String,
    /// Seconds per run.
    pub seconds: f64,
    /// Threads per run.
    pub threads: usize,
    /// The seeds.
    pub seeds: &'a [u64],
    /// The noise levels of the generated problems.
    pub noise: &'a [f64],
    /// Calibration cap of this project's runs, when set.
    pub calibrations: Option<usize>,
    /// How the data is made.
    pub data: &'static str,
    /// How NMSE, medians, recovery, sizes and winners are computed.
    pub metric: &'static str,
    /// The truth NMSE below which a model counts as recovered.
    pub recovered_below: f64,
    /// `--task-keys`: the file and its content (absent: the defaults).
    pub task_keys: Option<&'a TaskKeys>,
    /// The machine.
    pub machine: &'a Machine,
    /// `/proc/loadavg` when the suite finished.
    pub loadavg_at_end: Option<String>,
    /// The problems run.
    pub problems: Vec<ProblemInfo>,
    /// Per problem × noise: every run, the medians and the winners.
    pub cells: &'a [CellResult],
    /// The summary lines.
    pub totals: &'a Totals,
}

const DATA_TEXT: &str = "generated in Rust: ChaCha8Rng seeded by FNV-1a of `<problem>/noise=<noise>`; \
     200 train and 100 test_id rows uniform in the in-range box, 100 test_ood rows in the \
     out-of-range box, all three with Gaussian noise (Box-Muller) of sd = noise x RMS of the \
     noise-free training target; truth: 100 noise-free rows in each box. LLM-SR: the shipped \
     files, noise `data`";

const METRIC_TEXT: &str = "NMSE = MSE / population variance of the target, of the model each \
     tool selects; medians over seeds count a run without a finite value as +inf; recovered: \
     truth NMSE < recovered_below; size: this project's answer's complexity (atoms and pairs), \
     pyoperon's tree length (nodes); winner: the lower median, a tie when within 5 % of the \
     larger or both below 1e-20, a finite median beating none";

/// What the suite's binary is built from: a journaled run of this project is reused only while
/// these are unchanged and committed.
pub const BUILT_FROM: [&str; 6] = [
    "Cargo.lock",
    "core",
    "frontends",
    "optimizers",
    "search",
    "bench",
];

/// This project's code identity: version, build profile and a digest of the git trees of
/// [`BUILT_FROM`] at `HEAD`, when none of them has uncommitted changes (else none, and its runs
/// are journaled but never reused). A commit that changes only other files (results, docs,
/// another crate) keeps the identity.
pub fn ndvm_code(profile: &str) -> Option<String> {
    let root = search::workspace();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let mut status = vec!["status", "--porcelain", "--untracked-files=no", "--"];
    status.extend(BUILT_FROM);
    if !git(&status)?.trim().is_empty() {
        return None;
    }
    let revs: Vec<String> = BUILT_FROM.iter().map(|p| format!("HEAD:{p}")).collect();
    let mut rev_parse = vec!["rev-parse"];
    rev_parse.extend(revs.iter().map(String::as_str));
    let trees = git(&rev_parse)?;
    Some(format!(
        "{} {profile} sources {:016x}",
        Tool::Ndvm.label(),
        fnv1a(trees.as_bytes())
    ))
}

/// Runs the suite and writes `<out>/suite.json`, `<out>/suite.md` and the data and task files
/// under `<out>/suite-data/`; returns the JSON's path and the Markdown table.
pub fn run(
    opts: &SuiteOptions,
    out_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<(PathBuf, String)> {
    let problems = opts.checked_problems()?;
    let keys = opts.task_keys.as_deref().map(TaskKeys::read).transpose()?;
    let machine = Machine::probe();
    let prepared = prepare(&problems, opts, keys.as_ref(), &out_dir.join(DATA_DIR))?;
    let env: PyoperonEnv = match &opts.pyoperon {
        Pyoperon::Skip => Err(String::new()),
        Pyoperon::Venv(venv) => {
            let env = search::ensure_venv(venv, progress);
            if let Err(why) = &env {
                progress(&format!("suite: pyoperon unavailable: {why}"));
            }
            env
        }
    };
    let journal = Journal::open(out_dir)?;
    if !journal.is_empty() || journal.skipped > 0 {
        progress(&format!(
            "suite: {} holds {} finished run(s){}; a run with the same key is not run again",
            journal.path().display(),
            journal.len(),
            match journal.skipped {
                0 => String::new(),
                n => format!(" and {n} unreadable line(s), skipped"),
            }
        ));
    }
    let mut ledger = Ledger {
        journal,
        ndvm_code: ndvm_code(machine.profile),
    };
    let mut cells = Vec::new();
    for cell in &prepared {
        let ours = ndvm_cell(cell, opts, &mut ledger, progress)?;
        let theirs = pyoperon_cell(cell, opts, &env, &mut ledger, progress)?;
        cells.push(CellResult {
            problem: cell.problem.name,
            family: cell.problem.family,
            noise: cell.noise,
            tasks: cell.tasks.iter().map(|(_, p)| search::shown(p)).collect(),
            rows: cell.rows.clone(),
            winner: winners(&ours, &theirs),
            tools: vec![ours, theirs],
        });
    }
    let totals = totals(&cells);
    let file = SuiteFile {
        suite: "suite",
        command: command(opts),
        seconds: opts.seconds,
        threads: opts.threads,
        seeds: &opts.seeds,
        noise: &opts.noise,
        calibrations: opts.calibrations,
        data: DATA_TEXT,
        metric: METRIC_TEXT,
        recovered_below: RECOVERED_BELOW,
        task_keys: keys.as_ref(),
        machine: &machine,
        loadavg_at_end: loadavg(),
        problems: problems.iter().map(|p| ProblemInfo::of(p)).collect(),
        cells: &cells,
        totals: &totals,
    };
    let path = write_json(out_dir, "suite", &file)?;
    let md = table(opts, &cells, &totals);
    ndvm_search::textfile::write_atomic(&out_dir.join("suite.md"), md.as_bytes())?;
    Ok((path, md))
}

/// A median NMSE as the table shows it.
fn nmse_text(x: Option<f64>) -> String {
    x.map_or("–".to_string(), |v| format!("{v:.2e}"))
}

/// One cell's row of the table.
fn row(c: &CellResult) -> String {
    let tool = |t: Tool| c.tool(t).filter(|t| t.status == ToolStatus::Ran);
    let (ours, theirs) = (tool(Tool::Ndvm), tool(Tool::Pyoperon));
    let median =
        |t: Option<&ToolCell>, name: &str| t.and_then(|t| t.median.get(name).copied().flatten());
    let has = |name: &str| c.rows.get(name).is_some();
    let med = |t: Option<&ToolCell>, name: &str| {
        if has(name) && t.is_some() {
            nmse_text(median(t, name))
        } else {
            "–".to_string()
        }
    };
    let win = |w: Option<Winner>| match w {
        Some(Winner::Ndvm) => "ndvm",
        Some(Winner::Pyoperon) => "pyoperon",
        Some(Winner::Tie) => "tie",
        None => "–",
    };
    let rec = |t: Option<&ToolCell>| match t.and_then(|t| t.recovered.map(|k| (k, t.runs.len()))) {
        Some((k, n)) => format!("{k}/{n}"),
        None => "–".to_string(),
    };
    let size = |t: Option<&ToolCell>| {
        t.and_then(|t| t.median_size)
            .map_or("–".to_string(), |s| format!("{s}"))
    };
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
        c.problem,
        c.noise.label(),
        med(ours, "test_id"),
        med(theirs, "test_id"),
        win(c.winner.test_id),
        med(ours, "test_ood"),
        med(theirs, "test_ood"),
        win(c.winner.test_ood),
        med(ours, "truth"),
        med(theirs, "truth"),
        rec(ours),
        rec(theirs),
        size(ours),
        size(theirs),
    )
}

/// The summary lines under the table.
pub fn summary_lines(t: &Totals) -> String {
    let tally = |x: &Tally| {
        format!(
            "{} of {} cells (pyoperon {}, ties {})",
            x.ndvm, x.of, x.pyoperon, x.ties
        )
    };
    format!(
        "ndvm wins in range on {}; out of range on {}; on truth on {}.\n\
         Recovery (truth NMSE < {RECOVERED_BELOW:e}): ndvm {}/{} vs pyoperon {}/{}.\n",
        tally(&t.in_range),
        tally(&t.out_of_range),
        tally(&t.truth),
        t.recovery_ndvm.recovered,
        t.recovery_ndvm.runs,
        t.recovery_pyoperon.recovered,
        t.recovery_pyoperon.runs,
    )
}

/// The Markdown report: one row per problem × noise, the summary lines, then what did not run
/// and the runs that gave no model.
pub fn table(opts: &SuiteOptions, cells: &[CellResult], totals: &Totals) -> String {
    let seeds: Vec<String> = opts.seeds.iter().map(u64::to_string).collect();
    let mut s = format!(
        "suite: median NMSE over seeds {} ({} s per run at {} thread(s); a run without a finite \
         value counts as +∞) of the model each tool selects, {} (ndvm) vs {} (pyoperon); winner: \
         the lower median, a tie within {} % of the larger or both below {BOTH_EXACT_BELOW:e}; \
         recovered: truth NMSE < {RECOVERED_BELOW:e}; size: ndvm atoms and pairs, pyoperon tree \
         nodes (medians)\n\n\
         | problem | noise | test_id ndvm | test_id pyoperon | in range | test_ood ndvm | \
         test_ood pyoperon | out of range | truth ndvm | truth pyoperon | recovered ndvm | \
         recovered pyoperon | size ndvm | size pyoperon |\n\
         |---|---|--:|--:|:-:|--:|--:|:-:|--:|--:|--:|--:|--:|--:|\n",
        seeds.join(", "),
        opts.seconds,
        opts.threads,
        Tool::Ndvm.label(),
        Tool::Pyoperon.label(),
        TIE_WITHIN * 100.0,
    );
    for c in cells {
        s += &row(c);
    }
    s += "\n";
    s += &summary_lines(totals);
    let mut notes: Vec<String> = Vec::new();
    for c in cells {
        for t in &c.tools {
            if t.status != ToolStatus::Ran {
                let note = format!("{}: {}", t.tool.label(), t.note.as_deref().unwrap_or(""));
                if !notes.contains(&note) {
                    notes.push(note);
                }
            }
            for r in &t.runs {
                if let Some(e) = &r.run.error {
                    notes.push(format!(
                        "{} noise {}, {}, seed {}: no model: {e}",
                        c.problem,
                        c.noise.label(),
                        t.tool.label(),
                        r.run.seed
                    ));
                }
            }
        }
    }
    if !notes.is_empty() {
        s += "\n";
        for n in notes {
            s += &format!("- {n}\n");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A problem's formula, in-range box and out-of-range box.
    type Parts = (Formula, &'static [(f64, f64)], &'static [(f64, f64)]);

    fn formula(p: &Problem) -> Parts {
        match p.truth {
            Truth::Formula { f, range, ood } => (f, range, ood),
            Truth::Shipped { .. } => panic!("{} has no formula", p.name),
        }
    }

    fn generated() -> impl Iterator<Item = &'static Problem> {
        PROBLEMS.iter().filter(|p| p.has_truth())
    }

    #[test]
    fn the_table_is_broad_and_well_formed() {
        assert!(PROBLEMS.len() >= 22, "{} problems", PROBLEMS.len());
        let count = |f: Family| PROBLEMS.iter().filter(|p| p.family == f).count();
        assert_eq!(count(Family::Selection), 7);
        assert!(count(Family::Feynman) >= 7);
        assert!(count(Family::Nguyen) >= 5);
        assert!(count(Family::Strogatz) >= 2);
        assert_eq!(count(Family::LlmSr), 2);
        for (i, p) in PROBLEMS.iter().enumerate() {
            assert!(
                PROBLEMS[..i].iter().all(|q| q.name != p.name),
                "{} twice",
                p.name
            );
            assert!(
                p.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-'),
                "{}",
                p.name
            );
            assert!(!p.inputs.contains(&TARGET), "{}", p.name);
            if let Truth::Formula { range, ood, .. } = p.truth {
                assert_eq!(range.len(), p.inputs.len(), "{}", p.name);
                assert_eq!(ood.len(), p.inputs.len(), "{}", p.name);
                assert!(
                    range.iter().chain(ood).all(|(lo, hi)| lo < hi),
                    "{}",
                    p.name
                );
            }
        }
        // Feynman-style: at least seven of two to five inputs (and none of more).
        let feynman: Vec<usize> = PROBLEMS
            .iter()
            .filter(|p| p.family == Family::Feynman)
            .map(|p| p.inputs.len())
            .collect();
        assert!(feynman.iter().all(|&n| n <= 5), "{feynman:?}");
        assert!(
            feynman.iter().filter(|&&n| n >= 2).count() >= 7,
            "{feynman:?}"
        );
    }

    #[test]
    fn formulas_give_known_values() {
        let cases: &[(&str, &[f64], f64)] = &[
            ("gravity", &[2.0, 3.0, 1.5], 4.0),
            ("arrhenius", &[2.0], 3.0 * (-1.0f64).exp()),
            ("damped-oscillation", &[0.0], 1.0),
            ("enzyme-inhibition", &[1.2, 0.0], 1.25),
            ("enzyme-inhibition", &[2.5, 0.8], 2.5 * 2.5 / 4.9),
            ("logistic-growth", &[3.0], 2.5),
            ("power-law", &[4.0], 13.6),
            ("cubic", &[2.0], 0.8),
            ("feynman-gaussian", &[0.0], 0.398_942_280_401_432_7),
            ("feynman-coulomb", &[2.0, 5.0, 2.0], 2.0),
            ("feynman-kinetic-energy", &[2.0, 3.0], 9.0),
            ("feynman-relativistic-mass", &[3.0, 0.6, 1.0], 3.75),
            ("feynman-distance", &[0.0, 3.0, 0.0, 4.0], 5.0),
            ("feynman-centre-of-mass", &[1.0, 3.0, 2.0, 6.0], 5.0),
            ("feynman-ideal-gas", &[2.0, 3.0, 1.38], 6.0),
            (
                "feynman-dipole-field",
                &[1.0, 1.0, 3.0, 4.0, 1.0],
                15.0 / (4.0 * std::f64::consts::PI),
            ),
            ("feynman-planck", &[1.0, 1.0], 0.581_976_706_869_326_5),
            ("nguyen-1", &[2.0], 14.0),
            ("nguyen-5", &[0.0], -1.0),
            ("nguyen-7", &[1.0], 2.0 * std::f64::consts::LN_2),
            ("nguyen-8", &[4.0], 2.0),
            ("nguyen-10", &[std::f64::consts::FRAC_PI_2, 0.0], 2.0),
            ("nguyen-12", &[1.0, 1.0], -0.5),
            ("strogatz-bacres", &[2.0, 3.0], 16.0),
            ("strogatz-predprey", &[1.0, 2.0], 2.0),
        ];
        for &(name, x, want) in cases {
            let p = Problem::by_name(name).unwrap();
            let got = formula(p).0(x);
            assert!(
                (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                "{name}{x:?} = {got}, want {want}"
            );
        }
        // Every formula problem has a known value checked above.
        for p in generated() {
            assert!(cases.iter().any(|c| c.0 == p.name), "{} unchecked", p.name);
        }
    }

    #[test]
    fn formulas_are_finite_on_both_boxes() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for p in generated() {
            let (f, range, ood) = formula(p);
            for bounds in [range, ood] {
                let rows = Rows::sample(&mut rng, f, bounds, 1000);
                assert!(rows.y.iter().all(|y| y.is_finite()), "{}", p.name);
                // Every sample lies in its box.
                for x in &rows.x {
                    assert!(x.iter().zip(bounds).all(|(v, (lo, hi))| lo <= v && v <= hi));
                }
            }
        }
    }

    #[test]
    fn out_of_range_boxes_do_not_overlap_the_range() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for p in generated() {
            let (f, range, ood) = formula(p);
            // On some input the two intervals share at most an end point.
            let apart = range
                .iter()
                .zip(ood)
                .any(|((lo, hi), (olo, ohi))| ohi <= lo || olo >= hi);
            assert!(apart, "{}: {range:?} and {ood:?} overlap", p.name);
            // So no out-of-range sample falls strictly inside the in-range box.
            let rows = Rows::sample(&mut rng, f, ood, 1000);
            for x in &rows.x {
                let inside = x.iter().zip(range).all(|(v, (lo, hi))| lo < v && v < hi);
                assert!(!inside, "{}: {x:?} is in range", p.name);
            }
        }
    }

    #[test]
    fn the_generator_is_deterministic() {
        // FNV-1a's published test vectors.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(data_seed("cubic", 0.01), fnv1a(b"cubic/noise=0.01"));
        assert_eq!(data_seed("cubic", 0.0), fnv1a(b"cubic/noise=0.0"));
        let p = Problem::by_name("enzyme-inhibition").unwrap();
        let bytes = |noise: f64| {
            let d = generate(p, noise).unwrap();
            [&d.train, &d.test_id, &d.test_ood, &d.truth].map(|r| r.csv(p.inputs, TARGET))
        };
        let a = bytes(0.01);
        assert_eq!(a, bytes(0.01));
        assert_ne!(a, bytes(0.0));
        assert_ne!(a, bytes(0.02));
        assert_eq!(a[0].lines().count(), TRAIN_ROWS + 1);
        assert_eq!(a[3].lines().count(), 2 * TEST_ROWS + 1);
        assert!(a[0].starts_with("S,I,f\n"));
        // The written values read back exactly.
        let d = generate(p, 0.01).unwrap();
        for (line, (x, y)) in a[0].lines().skip(1).zip(d.train.x.iter().zip(&d.train.y)) {
            let v: Vec<f64> = line.split(',').map(|s| s.parse().unwrap()).collect();
            assert_eq!(v, [x[0], x[1], *y]);
        }
    }

    #[test]
    fn noise_free_data_is_the_formula_and_noise_has_its_spread() {
        for p in generated() {
            let (f, range, ood) = formula(p);
            let d = generate(p, 0.0).unwrap();
            assert_eq!(d.noise_sd, 0.0);
            for rows in [&d.train, &d.test_id, &d.test_ood, &d.truth] {
                for (x, y) in rows.x.iter().zip(&rows.y) {
                    assert_eq!(f(x).to_bits(), y.to_bits(), "{}", p.name);
                }
            }
            let inside = |x: &[f64], b: &[(f64, f64)]| {
                x.iter().zip(b).all(|(v, (lo, hi))| lo <= v && v <= hi)
            };
            assert!(d.test_ood.x.iter().all(|x| inside(x, ood)));
            assert!(d.truth.x[..TEST_ROWS].iter().all(|x| inside(x, range)));
            assert!(d.truth.x[TEST_ROWS..].iter().all(|x| inside(x, ood)));

            let noisy = generate(p, 0.01).unwrap();
            let rms = (noisy.train.x.iter().map(|x| f(x).powi(2)).sum::<f64>() / TRAIN_ROWS as f64)
                .sqrt();
            assert!(
                (noisy.noise_sd - 0.01 * rms).abs() <= 1e-15 * rms,
                "{}",
                p.name
            );
            // truth stays exact; the residuals of the training rows have the noise's spread.
            for (x, y) in noisy.truth.x.iter().zip(&noisy.truth.y) {
                assert_eq!(f(x).to_bits(), y.to_bits());
            }
            let r: Vec<f64> = noisy
                .train
                .x
                .iter()
                .zip(&noisy.train.y)
                .map(|(x, y)| y - f(x))
                .collect();
            let sd = (r.iter().map(|e| e * e).sum::<f64>() / r.len() as f64).sqrt();
            let ratio = sd / noisy.noise_sd;
            assert!((0.8..1.2).contains(&ratio), "{}: sd ratio {ratio}", p.name);
        }
    }

    #[test]
    fn every_generated_task_is_what_a_user_writes_and_loads() {
        let dir = std::env::temp_dir().join(format!("ndvm-suite-tasks-{}", std::process::id()));
        let opts = SuiteOptions::quick();
        let all: Vec<&'static Problem> = PROBLEMS.iter().collect();
        let cells = prepare(&all, &opts, None, &dir).unwrap();
        assert_eq!(cells.len(), PROBLEMS.len());
        for c in &cells {
            let (seed, path) = &c.tasks[0];
            let text = std::fs::read_to_string(path).unwrap();
            let keys: Vec<&str> = text
                .lines()
                .filter(|l| !l.starts_with([' ', '#', '-']))
                .map(|l| l.split(':').next().unwrap())
                .collect();
            assert_eq!(keys, GENERATED_KEYS, "{}", path.display());
            let task = ndvm_search::task::load_seeded(path, *seed).unwrap();
            assert_eq!(task.inputs, c.problem.inputs, "{}", c.problem.name);
            assert_eq!(task.params.len(), N_PARAMS);
            assert_eq!(task.budget_seconds, Some(5.0));
            let tests: Vec<&str> = task.tests.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(tests, c.problem.tables()[1..], "{}", c.problem.name);
            if c.problem.has_truth() {
                assert_eq!(c.noise, Noise::Fraction(0.0));
                assert_eq!(c.rows.get("train"), Some(&TRAIN_ROWS));
                assert_eq!(c.rows.get("truth"), Some(&(2 * TEST_ROWS)));
                assert!(text.contains("  csv: ") && text.contains("-n0-train.csv\n"));
            } else {
                assert_eq!(c.noise, Noise::Data);
                assert!(c.rows.get("train").is_some_and(|&n| n > 1000));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_llmsr_problems_match_their_shipped_tasks() {
        for p in PROBLEMS.iter().filter(|p| p.family == Family::LlmSr) {
            let Truth::Shipped { dir, target } = p.truth else {
                panic!()
            };
            let shipped = p.name.strip_prefix("llmsr-").unwrap();
            let files =
                search::csv_files(&search::workspace().join(format!("tasks/llmsr-{shipped}.yaml")))
                    .unwrap();
            assert_eq!(files.inputs, p.inputs);
            assert_eq!(files.target, target);
            assert!(files.train.ends_with(format!("{dir}/train.csv")));
        }
    }

    #[test]
    fn task_keys_are_merged_into_every_task() {
        let path = Path::new("keys.yaml");
        let content = "# an alternative\nproposer:\n  population: 64\ncalibrator: {starts: 2}\nselection: lowest-error\n";
        let keys = TaskKeys::parse(path, content).unwrap();
        assert_eq!(keys.keys, ["proposer", "calibrator", "selection"]);
        let p = Problem::by_name("cubic").unwrap();
        let text = task_text(p, Noise::Fraction(0.01), 2, 7.5, Some(&keys));
        assert!(text.ends_with(content), "{text}");
        assert!(text.contains("name: cubic-n0p01-s2\nseed: 2\n"));
        assert!(text.contains("budget: {seconds: 7.5}\n"));
        assert!(text.contains("  - {name: p9}\n"));
        // Without them, no proposer or calibrator key.
        let plain = task_text(p, Noise::Fraction(0.01), 2, 7.5, None);
        assert!(!plain.contains("proposer") && !plain.contains("calibrator"));
        assert!(text.starts_with(&plain));
        // `params` replaces the generated ten; the suite's own keys are refused.
        let params = TaskKeys::parse(path, "params:\n- {name: a, kind: positive}\n").unwrap();
        let text = task_text(p, Noise::Fraction(0.0), 1, 5.0, Some(&params));
        assert!(!text.contains("{name: p0}") && text.contains("{name: a, kind: positive}"));
        for bad in [
            "data: {csv: x.csv}\n",
            "budget:\n  seconds: 1\n",
            "'seed': 3\n",
        ] {
            let err = TaskKeys::parse(path, bad).unwrap_err().to_string();
            assert!(err.contains("written by the suite"), "{bad}: {err}");
        }
        let err = TaskKeys::parse(path, "just text\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("block mapping"), "{err}");
    }

    #[test]
    fn medians_winners_and_totals() {
        assert_eq!(
            median_counting_failures(&[Some(1.0), None, Some(3.0)]),
            Some(3.0)
        );
        assert_eq!(
            median_counting_failures(&[Some(1.0), Some(f64::NAN), None]),
            None
        );
        assert_eq!(median_counting_failures(&[Some(1.0), Some(2.0)]), Some(1.5));
        assert_eq!(median_counting_failures(&[]), None);

        assert_eq!(winner(Some(1e-3), Some(2e-3)), Winner::Ndvm);
        assert_eq!(winner(Some(2e-3), Some(1e-3)), Winner::Pyoperon);
        assert_eq!(winner(Some(1.0e-3), Some(1.04e-3)), Winner::Tie);
        assert_eq!(winner(Some(1.0e-3), Some(1.06e-3)), Winner::Ndvm);
        assert_eq!(winner(Some(1e-25), Some(1e-22)), Winner::Tie);
        assert_eq!(winner(Some(1e-25), Some(1e-19)), Winner::Ndvm);
        assert_eq!(winner(None, Some(5.0)), Winner::Pyoperon);
        assert_eq!(winner(Some(5.0), None), Winner::Ndvm);
        assert_eq!(winner(None, None), Winner::Tie);

        let run = |seed, truth: Option<f64>| {
            let mut r = SeedRun::failed(
                seed,
                1.0,
                &["train", "test_id", "test_ood", "truth"],
                String::new(),
            );
            r.error = None;
            r.nmse.0.insert("test_id".into(), truth.map(|t| t * 10.0));
            r.nmse.0.insert("test_ood".into(), truth.map(|t| t * 100.0));
            r.nmse.0.insert("truth".into(), truth);
            suite_run(Problem::by_name("cubic").unwrap(), r, Some(seed))
        };
        let names = Problem::by_name("cubic").unwrap().tables();
        let ours = ToolCell::new(
            Tool::Ndvm,
            ToolStatus::Ran,
            None,
            vec![run(1, Some(1e-9)), run(2, Some(1e-2)), run(3, None)],
            names,
        );
        assert_eq!(ours.recovered, Some(1));
        assert_eq!(ours.median.get("truth"), Some(&Some(1e-2)));
        assert_eq!(ours.median_size, Some(2.0));
        assert_eq!(ours.nmse.get("truth").unwrap().not_finite, 1);
        let theirs = ToolCell::new(
            Tool::Pyoperon,
            ToolStatus::Ran,
            None,
            vec![run(1, Some(1e-3)), run(2, Some(1e-3)), run(3, Some(1e-3))],
            names,
        );
        let w = winners(&ours, &theirs);
        assert_eq!(
            w,
            Winners {
                test_id: Some(Winner::Pyoperon),
                test_ood: Some(Winner::Pyoperon),
                truth: Some(Winner::Pyoperon)
            }
        );
        let skipped = ToolCell::new(Tool::Pyoperon, ToolStatus::Skipped, None, vec![], names);
        assert_eq!(winners(&ours, &skipped), Winners::default());
        assert_eq!(skipped.recovered, None);
        let cell = CellResult {
            problem: "cubic",
            family: Family::Selection,
            noise: Noise::Fraction(0.0),
            tasks: vec![],
            rows: Tables::from_names(names, |_| 1),
            tools: vec![ours, theirs],
            winner: w,
        };
        let t = totals(std::slice::from_ref(&cell));
        assert_eq!(
            t.in_range,
            Tally {
                ndvm: 0,
                pyoperon: 1,
                ties: 0,
                of: 1
            }
        );
        assert_eq!(
            t.recovery_ndvm,
            Recovery {
                recovered: 1,
                runs: 3
            }
        );
        assert_eq!(
            t.recovery_pyoperon,
            Recovery {
                recovered: 0,
                runs: 3
            }
        );
        assert!(
            summary_lines(&t).contains("ndvm wins in range on 0 of 1 cells (pyoperon 1, ties 0)")
        );
        assert!(summary_lines(&t).contains("ndvm 1/3 vs pyoperon 0/3"));
        assert!(row(&cell).starts_with("| cubic | 0 | 1.00e-1 | 1.00e-2 | pyoperon | 1.00e0 | 1.00e-1 | pyoperon | 1.00e-2 | 1.00e-3 | 1/3 | 0/3 | 2 | 2 |"), "{}", row(&cell));
    }

    #[test]
    fn the_command_names_every_option() {
        let mut o = SuiteOptions::standard();
        assert_eq!(
            command(&o),
            "ndvm-bench suite --seconds 60 --threads 2 --seeds 1,2,3 --noise 0,0.01"
        );
        o = SuiteOptions::quick();
        o.problems = vec!["arrhenius".into()];
        o.calibrations = Some(200);
        o.pyoperon = Pyoperon::Skip;
        o.task_keys = Some(PathBuf::from("k.yaml"));
        assert_eq!(
            command(&o),
            "ndvm-bench suite --seconds 5 --threads 2 --seeds 1 --noise 0 --problems arrhenius \
             --calibrations 200 --task-keys k.yaml --no-pyoperon"
        );
        o.problems = vec!["arrhenus".into()];
        let err = o.checked_problems().unwrap_err().to_string();
        assert!(
            err.contains("no such problem") && err.contains("nguyen-12"),
            "{err}"
        );
        o.problems = vec!["arrhenius".into()];
        o.noise = vec![-0.1];
        assert!(o.checked_problems().is_err());
    }
}
