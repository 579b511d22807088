//! Calibration throughput: 50-step Adam calibrations per second over two replayed streams, 44
//! data lanes each, with K = 1, 8 and 32 multistarts (K·44 lanes per walk), one thread:
//! - `symreg`: the 247 symbolic-regression candidates of `cosearch_candidates_valid.jsonl`, on the
//!   original experiment's data: y = exp(−0.3x)·cos(2x) + N(0, 0.02²) on 64 evenly spaced x in
//!   [0.1, 6.0] (noise from a ChaCha stream, seed 0), of which 44 points train;
//! - `recurrence`: the loop/recur candidates of `tasks/recurrence.yaml`'s cache, on that task's
//!   generated training table and parameter declarations.

use std::path::Path;
use std::time::Instant;

use ndvm_core::{Heap, ParamKind, Program};
use ndvm_optimizers::{CalibrateConfig, Calibrator, Dataset, Optimizer, ParamSpec};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use ndvm_search::{Result, SearchError};

/// One candidate, parsed, with the parameters it is calibrated over.
struct Candidate {
    heap: Heap,
    program: Program,
    params: Vec<ParamSpec>,
}

/// A replayed stream: its candidates and the data they are fitted to.
struct Stream {
    name: &'static str,
    cands: Vec<Candidate>,
    data: Dataset,
}

/// One multistart setting on one stream.
#[derive(Clone, Debug, Serialize)]
pub struct ThroughputRow {
    /// `symreg` or `recurrence`.
    pub stream: &'static str,
    /// Candidates in the stream.
    pub n_candidates: usize,
    /// Starts K.
    pub n_starts: usize,
    /// Lanes per walk (K × 44).
    pub n_lanes: usize,
    /// Calibrations per second (best pass).
    pub calibrations_per_s: f64,
    /// Seconds per pass over the stream, every pass.
    pub pass_s: Vec<f64>,
    /// Calibrations that ended in an error (a candidate the runtime rejects).
    pub n_failed: usize,
    /// Best training R² over the stream (a sanity check that the fits are real; `best_r_squared`
    /// in files written before 0.1 named R² `r2` everywhere).
    pub best_r2: f64,
}

/// The training data: 44 of the 64 grid points (every point whose index mod 16 is below 11).
pub fn symreg_train() -> (Vec<f64>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let mut normal = || {
        // Box–Muller from two uniforms in (0, 1].
        let u1: f64 = 1.0 - rng.random::<f64>();
        let u2: f64 = rng.random::<f64>();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    };
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for i in 0..64 {
        let x = 0.1 + 5.9 * i as f64 / 63.0;
        let y = (-0.3 * x).exp() * (2.0 * x).cos() + 0.02 * normal();
        if i % 16 < 11 {
            xs.push(x);
            ys.push(y);
        }
    }
    (xs, ys)
}

/// The first `limit` non-empty lines of a JSONL file, parsed.
fn read_jsonl(path: &Path, limit: usize) -> Result<Vec<serde_json::Value>> {
    let text = std::fs::read_to_string(path).map_err(|source| SearchError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .take(limit)
        .map(|line| {
            serde_json::from_str(line).map_err(|e| SearchError::BadArgument {
                arg: path.display().to_string(),
                message: format!("bad JSON line: {e}"),
            })
        })
        .collect()
}

fn load_symreg(seed_data: &Path, limit: usize) -> Result<Vec<Candidate>> {
    let path = seed_data.join("cosearch_candidates_valid.jsonl");
    let registry = ndvm_frontends::Registry::default();
    let frontend = registry
        .choose(None, Some(&path))
        .map_err(|message| SearchError::UnknownFrontend { message })?;
    let mut out = Vec::new();
    for rec in read_jsonl(&path, limit)? {
        let src = rec["src"].as_str().unwrap_or_default();
        let mut heap = Heap::new();
        let Ok(program) = frontend.parse(&mut heap, src) else {
            continue;
        };
        let params = rec["params"]
            .as_array()
            .map(|ps| {
                ps.iter()
                    .filter_map(|p| p.as_str())
                    .map(|p| ParamSpec::new(p, ParamKind::Free, 0.5))
                    .collect()
            })
            .unwrap_or_default();
        out.push(Candidate {
            heap,
            program,
            params,
        });
    }
    Ok(out)
}

/// `tasks/recurrence.yaml` beside this crate.
pub fn recurrence_task() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tasks/recurrence.yaml")
}

/// The recurrence task's cached candidates (each over the task parameters it uses) and its
/// training table.
fn load_recurrence(limit: usize) -> Result<Stream> {
    let task = ndvm_search::task::load(&recurrence_task())?;
    let ndvm_search::task::ProposerConfig::Replay { cache } = &task.proposer else {
        return Err(SearchError::BadArgument {
            arg: task.path.display().to_string(),
            message: "the recurrence task must replay a cache".into(),
        });
    };
    let names: Vec<String> = task.params.iter().map(|p| p.name.clone()).collect();
    let mut cands = Vec::new();
    for rec in read_jsonl(cache, limit)? {
        let src = rec["src"].as_str().unwrap_or_default();
        // The parameters a candidate uses, as the engine finds them.
        let (heap, program, checked) = ndvm_search::validate::check_source(
            task.frontend_named(&task.frontend)?,
            src,
            &task.inputs,
            &names,
            &task.forbidden_forms,
        )
        .map_err(|r| SearchError::BadArgument {
            arg: cache.display().to_string(),
            message: format!("candidate `{src}` rejected: {r:?}"),
        })?;
        let params = task
            .params
            .iter()
            .filter(|p| checked.params.contains(&p.name))
            .cloned()
            .collect();
        cands.push(Candidate {
            heap,
            program,
            params,
        });
    }
    let data = ndvm_search::engine::dataset(&task, &task.train);
    Ok(Stream {
        name: "recurrence",
        cands,
        data,
    })
}

/// Runs the suite: `passes` passes over (the first `limit`) candidates of each stream at each K.
pub fn throughput(
    seed_data: &Path,
    limit: usize,
    starts: &[usize],
    passes: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<ThroughputRow>> {
    let (xs, ys) = symreg_train();
    let symreg = Stream {
        name: "symreg",
        cands: load_symreg(seed_data, limit)?,
        data: Dataset::new().column("x", xs).target(ys),
    };
    let mut rows = Vec::new();
    for mut stream in [symreg, load_recurrence(limit)?] {
        for &k in starts {
            progress(&format!(
                "calibration: {}, K = {k}, {} candidates × {passes} passes",
                stream.name,
                stream.cands.len()
            ));
            rows.push(one_setting(&mut stream, k, passes));
        }
    }
    Ok(rows)
}

fn one_setting(stream: &mut Stream, k: usize, passes: usize) -> ThroughputRow {
    let mut pass_s = Vec::new();
    let (mut n_failed, mut best_r2) = (0, f64::NEG_INFINITY);
    for _ in 0..passes {
        n_failed = 0;
        let t = Instant::now();
        for c in &mut stream.cands {
            let config = CalibrateConfig {
                optimizer: Optimizer::Adam,
                n_starts: k,
                max_iters: 50,
                tol_grad: 0.0,
                params: c.params.clone(),
                ..CalibrateConfig::recommended()
            };
            let fit = Calibrator::new(config)
                .and_then(|mut cal| cal.calibrate(&mut c.heap, &c.program, &stream.data));
            match fit {
                Ok(fit) => best_r2 = best_r2.max(fit.r2.unwrap_or(f64::NEG_INFINITY)),
                Err(_) => n_failed += 1,
            }
        }
        pass_s.push(t.elapsed().as_secs_f64());
    }
    let best = pass_s.iter().copied().fold(f64::INFINITY, f64::min);
    ThroughputRow {
        stream: stream.name,
        n_candidates: stream.cands.len(),
        n_starts: k,
        n_lanes: k * stream.data.n_points(),
        calibrations_per_s: stream.cands.len() as f64 / best,
        pass_s,
        n_failed,
        best_r2,
    }
}

/// A Markdown table of the rows.
pub fn table(rows: &[ThroughputRow]) -> String {
    let mut s = String::from(
        "calibration throughput: replayed candidate streams, 50 Adam steps, 44 points, one thread\n\n\
         | stream | candidates | K | lanes | calibrations/s | best pass (s) | failed | best train R² |\n\
         |:--|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    for r in rows {
        let best = r.pass_s.iter().copied().fold(f64::INFINITY, f64::min);
        s += &format!(
            "| {} | {} | {} | {} | {:.0} | {:.3} | {} | {:.4} |\n",
            r.stream,
            r.n_candidates,
            r.n_starts,
            r.n_lanes,
            r.calibrations_per_s,
            best,
            r.n_failed,
            r.best_r2
        );
    }
    s
}
