//! `ndvm-bench recovery`: the discrete structure-recovery experiment of the predecessor
//! (its Exp E), reproduced with `soft-choice` and the batched multistart calibrator.
//!
//! The template is f(x) = α · outer(x, inner(x)), each of inner and outer a `soft-choice` over 8
//! options ([`INNER`], [`OUTER`]); 12 tasks ([`TASKS`]) generate 64 points each (32 on a grid of
//! [0.2, 3] and their mirror images, plus Gaussian noise of 1 % of the signal's RMS, ChaCha8 from
//! the task's index). A restart is one calibration with its own seed: K starts as lanes of one
//! walk, straight-through soft-choice with the temperature annealed, then L-BFGS on the best
//! starts, and the best start's `argmax` read-out is the recovered structure.
//!
//! Recovery, as in the predecessor, is the read-out naming the generating (outer, inner) pair;
//! `equivalent` also counts a pair whose function is the generating one up to α (α fitted by least
//! squares to the noise-free data leaves a relative RMS error below 1e-9: here x·(−x) for x·2x).
//! |α − α*| is measured on strict recoveries (an equivalent pair has its own α*).

use std::time::Instant;

use ndvm_frontends::{Frontend, scheme::Scheme};
use ndvm_optimizers::{
    CalibrateConfig, Calibration, Calibrator, ChoiceMode, Dataset, Heap, Optimizer, ParamKind,
    ParamSpec, SoftChoiceConfig,
};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::SeedableRng;
use serde::Serialize;

use ndvm_search::{Result, SearchError};

/// The inner options, as Scheme over `x`.
pub const INNER: [&str; 8] = [
    "(* 2.0 x)",
    "(- x)",
    "(* x x)",
    "(/ 1.0 (+ (abs x) 0.001))",
    "(sin x)",
    "(cos x)",
    "(exp x)",
    "(log (+ (abs x) 0.001))",
];

/// The outer options, as Scheme over `x` and the inner value `in`.
pub const OUTER: [&str; 8] = [
    "(+ x in)",
    "(- x in)",
    "(* x in)",
    "(/ x (+ (abs in) 0.001))",
    "(sin in)",
    "(cos in)",
    "(exp in)",
    "(log (+ (abs in) 0.001))",
];

/// One task: the generating outer and inner options and α*.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RecoveryTask {
    /// The target as a formula.
    pub name: &'static str,
    /// Index into [`OUTER`].
    pub outer: usize,
    /// Index into [`INNER`].
    pub inner: usize,
    /// α*.
    pub alpha: f64,
}

const fn t(name: &'static str, outer: usize, inner: usize, alpha: f64) -> RecoveryTask {
    RecoveryTask {
        name,
        outer,
        inner,
        alpha,
    }
}

/// The predecessor's 12 tasks, in its order.
pub const TASKS: [RecoveryTask; 12] = [
    t("0.5·x·2x", 2, 0, 0.5),
    t("0.5·x·sin x", 2, 4, 0.5),
    t("0.5·x·exp x", 2, 6, 0.5),
    t("0.5·(x+x²)", 0, 2, 0.5),
    t("sin(x²)", 4, 2, 1.0),
    t("x+cos x", 0, 5, 1.0),
    t("x−sin x", 1, 4, 1.0),
    t("cos(x²)", 5, 2, 1.0),
    t("2·(x+x²)", 0, 2, 2.0),
    t("2·cos 2x", 5, 0, 2.0),
    t("2·sin 2x", 4, 0, 2.0),
    t("2·x·cos x", 2, 5, 2.0),
];

/// The inner option `i` at `x`, in plain Rust (the data generator).
pub fn inner_value(i: usize, x: f64) -> f64 {
    match i {
        0 => 2.0 * x,
        1 => -x,
        2 => x * x,
        3 => 1.0 / (x.abs() + 0.001),
        4 => x.sin(),
        5 => x.cos(),
        6 => x.exp(),
        _ => (x.abs() + 0.001).ln(),
    }
}

/// The outer option `o` at `x` and inner value `v`, in plain Rust.
pub fn outer_value(o: usize, x: f64, v: f64) -> f64 {
    match o {
        0 => x + v,
        1 => x - v,
        2 => x * v,
        3 => x / (v.abs() + 0.001),
        4 => v.sin(),
        5 => v.cos(),
        6 => v.exp(),
        _ => (v.abs() + 0.001).ln(),
    }
}

/// The template program: α times the outer choice of the inner choice, logits `u0…u7` (inner)
/// and `v0…v7` (outer).
pub fn program() -> String {
    let logits = |p: &str| {
        let names: Vec<String> = (0..8).map(|i| format!("{p}{i}")).collect();
        format!("(vector {})", names.join(" "))
    };
    format!(
        "(let ((in (soft-choice ({}) {}))) (* alpha (soft-choice ({}) {})))",
        INNER.join(" "),
        logits("u"),
        OUTER.join(" "),
        logits("v")
    )
}

/// The 64 inputs: 32 grid points on [0.2, 3] and their mirror images.
pub fn inputs() -> Vec<f64> {
    let half: Vec<f64> = (0..32).map(|i| 0.2 + 2.8 * i as f64 / 31.0).collect();
    half.iter()
        .copied()
        .chain(half.iter().map(|x| -x))
        .collect()
}

/// The clean target of `task` at `xs`.
pub fn clean(task: &RecoveryTask, xs: &[f64]) -> Vec<f64> {
    xs.iter()
        .map(|&x| task.alpha * outer_value(task.outer, x, inner_value(task.inner, x)))
        .collect()
}

/// The task's data: the clean target plus N(0, (0.01·RMS)²) noise from ChaCha8(`seed`)
/// (Box–Muller, in point order).
pub fn dataset(task: &RecoveryTask, seed: u64) -> Dataset {
    let xs = inputs();
    let ys = clean(task, &xs);
    let rms = (ys.iter().map(|y| y * y).sum::<f64>() / ys.len() as f64).sqrt();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let noisy = ys
        .iter()
        .map(|y| {
            let u1: f64 = 1.0 - rng.random::<f64>();
            let u2: f64 = rng.random::<f64>();
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            y + 0.01 * rms * z
        })
        .collect();
    Dataset::new().column("x", xs).target(noisy)
}

/// The (outer, inner) pairs whose function equals the task's up to α on the noise-free data,
/// with that α (the generating pair first).
pub fn equivalents(task: &RecoveryTask) -> Vec<((usize, usize), f64)> {
    let xs = inputs();
    let ys = clean(task, &xs);
    let norm = ys.iter().map(|y| y * y).sum::<f64>().sqrt();
    let mut out = vec![((task.outer, task.inner), task.alpha)];
    for o in 0..8 {
        for i in 0..8 {
            if (o, i) == (task.outer, task.inner) {
                continue;
            }
            let p: Vec<f64> = xs
                .iter()
                .map(|&x| outer_value(o, x, inner_value(i, x)))
                .collect();
            let pp: f64 = p.iter().map(|v| v * v).sum();
            let a = p.iter().zip(&ys).map(|(v, y)| v * y).sum::<f64>() / pp;
            let res = p
                .iter()
                .zip(&ys)
                .map(|(v, y)| (a * v - y).powi(2))
                .sum::<f64>()
                .sqrt();
            if pp > 0.0 && res <= 1e-9 * norm {
                out.push(((o, i), a));
            }
        }
    }
    out
}

/// How each restart calibrates.
#[derive(Clone, Debug, Serialize)]
pub struct RecoverySettings {
    /// Multistart lanes K per restart.
    pub starts: usize,
    /// Adam steps (straight-through, annealed).
    pub adam_steps: usize,
    /// Adam's learning rate.
    pub learning_rate: f64,
    /// Temperature at the first and the last Adam step.
    pub temperature: (f64, f64),
    /// Starts polished by L-BFGS, and its iterations.
    pub polish: (usize, usize),
    /// The soft-choice mode of the Adam steps: `soft` or `straight-through` (the polish and
    /// the read-out run at the final temperature in the same mode).
    pub mode: &'static str,
    /// Fresh Gumbel noise at every Adam step.
    pub gumbel: bool,
}

impl RecoverySettings {
    /// The settings of the reported run.
    pub fn standard() -> Self {
        RecoverySettings {
            starts: 64,
            adam_steps: 200,
            learning_rate: 0.1,
            temperature: (1.0, 0.1),
            polish: (8, 50),
            mode: "straight-through",
            gumbel: false,
        }
    }

    /// The calibration of one restart with seed `seed`.
    pub fn config(&self, seed: u64) -> CalibrateConfig {
        let mut params = vec![ParamSpec::new("alpha", ParamKind::Free, 1.0)];
        for p in ["u", "v"] {
            for i in 0..8 {
                params.push(ParamSpec::new(&format!("{p}{i}"), ParamKind::Free, 0.0));
            }
        }
        CalibrateConfig {
            optimizer: Optimizer::Portfolio,
            n_starts: self.starts,
            screen_iters: self.adam_steps,
            learning_rate: self.learning_rate,
            n_polish: self.polish.0,
            max_iters: self.polish.1,
            seed,
            params,
            soft_choice: SoftChoiceConfig {
                mode: if self.mode == "soft" {
                    ChoiceMode::Soft
                } else {
                    ChoiceMode::StraightThrough
                },
                temperature: self.temperature.0,
                final_temperature: self.temperature.1,
                gumbel: self.gumbel,
            },
            ..CalibrateConfig::recommended()
        }
    }
}

/// One restart's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct RestartResult {
    /// The calibration seed.
    pub seed: u64,
    /// The read-out (outer, inner).
    pub picked: (usize, usize),
    /// The generating pair.
    pub strict: bool,
    /// The generating pair or an equivalent one.
    pub equivalent: bool,
    /// The fitted α.
    pub alpha: f64,
    /// |α − α*| of the picked pair (its own α* when equivalent), NaN otherwise.
    pub alpha_error: f64,
    /// The best start's training MSE.
    pub loss: f64,
    /// Starts whose own read-out is the generating pair or an equivalent.
    pub starts_recovered: usize,
    /// Wall-clock seconds of the calibration.
    pub wall_s: f64,
}

/// One task's restarts.
#[derive(Clone, Debug, Serialize)]
pub struct TaskResult {
    /// The task.
    pub task: RecoveryTask,
    /// Its equivalent pairs (the generating one first) and their α*.
    pub equivalents: Vec<((usize, usize), f64)>,
    /// Every restart.
    pub restarts: Vec<RestartResult>,
}

/// Runs one restart of `task` with calibration seed `seed`.
pub fn restart(
    task: &RecoveryTask,
    data: &Dataset,
    settings: &RecoverySettings,
    seed: u64,
) -> Result<RestartResult> {
    let mut heap = Heap::new();
    let program = Scheme
        .parse(&mut heap, &program())
        .map_err(|e| SearchError::BadArgument {
            arg: "recovery template".to_string(),
            message: e.to_string(),
        })?;
    let started = Instant::now();
    let fit = Calibrator::new(settings.config(seed))
        .and_then(|mut c| c.calibrate(&mut heap, &program, data))
        .map_err(|e| SearchError::BadArgument {
            arg: format!("recovery {} seed {seed}", task.name),
            message: e.to_string(),
        })?;
    let wall_s = started.elapsed().as_secs_f64();
    Ok(judge(task, &fit, seed, wall_s))
}

fn judge(task: &RecoveryTask, fit: &Calibration, seed: u64, wall_s: f64) -> RestartResult {
    let eq = equivalents(task);
    let pair = |picks: &[usize]| match picks {
        [inner, outer] => (*outer, *inner),
        _ => (usize::MAX, usize::MAX),
    };
    let best = fit.choices.iter().map(|c| c.index).collect::<Vec<_>>();
    let picked = pair(&best);
    let alpha = fit.param("alpha").unwrap_or(f64::NAN);
    let hit = eq.iter().find(|(p, _)| *p == picked);
    RestartResult {
        seed,
        picked,
        strict: picked == (task.outer, task.inner),
        equivalent: hit.is_some(),
        alpha,
        alpha_error: hit.map_or(f64::NAN, |(_, a)| (alpha - a).abs()),
        loss: fit.loss,
        starts_recovered: fit
            .starts
            .iter()
            .filter(|s| eq.iter().any(|(p, _)| *p == pair(&s.picks)))
            .count(),
        wall_s,
    }
}

/// Runs `n_restarts` restarts (seeds 0, 1, …) of each task in `tasks`.
pub fn run_tasks(
    tasks: &[RecoveryTask],
    n_restarts: u64,
    settings: &RecoverySettings,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<TaskResult>> {
    let mut out = Vec::new();
    for (ti, task) in tasks.iter().enumerate() {
        progress(&format!("recovery: {} ({n_restarts} restarts)", task.name));
        let data = dataset(task, 1000 + ti as u64);
        let restarts = (0..n_restarts)
            .map(|seed| restart(task, &data, settings, seed))
            .collect::<Result<Vec<_>>>()?;
        out.push(TaskResult {
            task: *task,
            equivalents: equivalents(task),
            restarts,
        });
    }
    Ok(out)
}

/// Totals over every task.
#[derive(Clone, Debug, Serialize)]
pub struct Totals {
    /// Restarts run.
    pub restarts: usize,
    /// Restarts whose read-out is the generating pair.
    pub strict: usize,
    /// Restarts whose read-out is the generating pair or an equivalent.
    pub equivalent: usize,
    /// Median |α − α*| over the strict recoveries.
    pub median_alpha_error: f64,
    /// Largest |α − α*| over the strict recoveries.
    pub max_alpha_error: f64,
    /// Mean wall-clock seconds per restart.
    pub mean_wall_s: f64,
    /// Largest wall-clock seconds of a restart.
    pub max_wall_s: f64,
    /// Fraction of all starts (K per restart) whose own read-out recovers (or is equivalent).
    pub start_rate: f64,
}

/// The totals of `results` with `k` starts per restart.
pub fn totals(results: &[TaskResult], k: usize) -> Totals {
    let all: Vec<&RestartResult> = results.iter().flat_map(|t| &t.restarts).collect();
    let mut errs: Vec<f64> = all
        .iter()
        .filter(|r| r.strict)
        .map(|r| r.alpha_error)
        .collect();
    errs.sort_by(f64::total_cmp);
    let n = all.len().max(1) as f64;
    Totals {
        restarts: all.len(),
        strict: all.iter().filter(|r| r.strict).count(),
        equivalent: all.iter().filter(|r| r.equivalent).count(),
        median_alpha_error: errs.get(errs.len() / 2).copied().unwrap_or(f64::NAN),
        max_alpha_error: errs.last().copied().unwrap_or(f64::NAN),
        mean_wall_s: all.iter().map(|r| r.wall_s).sum::<f64>() / n,
        max_wall_s: all.iter().map(|r| r.wall_s).fold(0.0, f64::max),
        start_rate: all.iter().map(|r| r.starts_recovered).sum::<usize>() as f64 / (n * k as f64),
    }
}

/// The results as a Markdown table, one row per task and a total.
pub fn table(results: &[TaskResult], k: usize) -> String {
    let mut s = String::from(
        "| task | α* | recovered | with equivalents | median \\|α−α*\\| | starts recovering | s/restart |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    for t in results {
        let tot = totals(std::slice::from_ref(t), k);
        s += &format!(
            "| {} | {} | {}/{} | {}/{} | {:.1e} | {:.0} % | {:.3} |\n",
            t.task.name,
            t.task.alpha,
            tot.strict,
            tot.restarts,
            tot.equivalent,
            tot.restarts,
            tot.median_alpha_error,
            100.0 * tot.start_rate,
            tot.mean_wall_s
        );
    }
    let tot = totals(results, k);
    s += &format!(
        "| **all** | | **{}/{} ({:.1} %)** | {}/{} ({:.1} %) | {:.1e} (max {:.1e}) | {:.0} % | {:.3} (max {:.3}) |\n",
        tot.strict,
        tot.restarts,
        100.0 * tot.strict as f64 / tot.restarts.max(1) as f64,
        tot.equivalent,
        tot.restarts,
        100.0 * tot.equivalent as f64 / tot.restarts.max(1) as f64,
        tot.median_alpha_error,
        tot.max_alpha_error,
        100.0 * tot.start_rate,
        tot.mean_wall_s,
        tot.max_wall_s
    );
    s
}
