//! A fuzzing pass: programs `start .. start + n` of a seed, checked on worker threads (each with a
//! pooled evaluator), failures shrunk and written as regression files, coverage counted. The
//! summary does not depend on the thread count (results are put back in program order).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{FuzzError, Result};
use crate::generate::{self, Case};
use crate::oracle::{self, Failure, Oracle, Pool, Skip};
use crate::shrink;
use crate::sx::{self, Sx};

/// The settings of one pass.
#[derive(Clone, Debug)]
pub struct Config {
    /// Number of programs.
    pub programs: u64,
    /// Index of the first program.
    pub start: u64,
    /// The run seed.
    pub seed: u64,
    /// Lanes per program.
    pub lanes: usize,
    /// Worker threads.
    pub threads: usize,
    /// Shrink failures before reporting them.
    pub shrink: bool,
}

/// One failing program: where it came from, what failed, and its shrunk form.
#[derive(Clone, Debug)]
pub struct Found {
    /// The program's index in the pass.
    pub index: u64,
    /// The first failed check.
    pub failure: Failure,
    /// The case as generated.
    pub case: Case,
    /// The shrunk case (equal to `case` without shrinking).
    pub shrunk: Case,
}

/// What a pass found.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Programs generated.
    pub programs: u64,
    /// Programs checked by every oracle.
    pub checked: u64,
    /// Programs skipped, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Failing programs, in program order.
    pub found: Vec<Found>,
    /// Failures per oracle.
    pub by_oracle: BTreeMap<String, u64>,
    /// Forms and primitives with their number of occurrences.
    pub coverage: BTreeMap<String, u64>,
    /// Gradient entries checked against finite differences.
    pub grads_checked: u64,
    /// Gradient entries skipped because a branch decision changed within the step.
    pub grads_at_kink: u64,
    /// Programs whose replay oracle ran a true replay.
    pub replayed: u64,
    /// Programs the infix printer could spell (and were round-tripped through infix).
    pub infix_printed: u64,
    /// Programs whose f32 values and gradients were compared with f64 (the others were
    /// ill-conditioned at their point, or stopped at an earlier check).
    pub f32_compared: u64,
    /// Digest of every runtime output bit, in program order.
    pub digest: u64,
}

struct Partial {
    index: u64,
    outcome: oracle::Outcome,
    heads: Vec<String>,
    found: Option<Found>,
}

/// Runs a pass; `progress(done)` is called from the workers every 1,000 programs.
pub fn run(config: &Config, progress: &(dyn Fn(u64, u64) + Sync)) -> Summary {
    let next = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let failed = AtomicU64::new(0);
    let results: Mutex<Vec<Partial>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..config.threads.max(1) {
            s.spawn(|| {
                let mut pool = Pool::new();
                let mut mine = Vec::new();
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= config.programs {
                        break;
                    }
                    let p = check_one(config, config.start + k, &mut pool);
                    if p.found.is_some() {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                    mine.push(p);
                    let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if d.is_multiple_of(1000) {
                        progress(d, failed.load(Ordering::Relaxed));
                    }
                }
                if let Ok(mut all) = results.lock() {
                    all.append(&mut mine);
                }
            });
        }
    });
    let mut parts = results.into_inner().unwrap_or_default();
    parts.sort_by_key(|p| p.index);
    summarize(config, parts)
}

fn check_one(config: &Config, index: u64, pool: &mut Pool) -> Partial {
    let case = generate::generate(config.seed, index, config.lanes);
    let outcome = oracle::check(&case, pool, None);
    let mut heads = Vec::new();
    case.program.for_each_head(|h| {
        // Forms and primitives only, not the program's own function names.
        if ndvm_core::word(h).is_some() {
            heads.push(h.to_string());
        }
    });
    let found = outcome.failures.first().map(|f| {
        let shrunk = if config.shrink {
            shrink::shrink(&case, f.oracle, pool)
        } else {
            case.clone()
        };
        // The detail of the shrunk case's failure is the one worth reading.
        let failure = oracle::check(&shrunk, pool, Some(f.oracle))
            .failures
            .into_iter()
            .next()
            .unwrap_or_else(|| f.clone());
        Found {
            index,
            failure,
            case: case.clone(),
            shrunk,
        }
    });
    Partial {
        index,
        outcome,
        heads,
        found,
    }
}

fn summarize(config: &Config, parts: Vec<Partial>) -> Summary {
    let mut s = Summary {
        programs: config.programs,
        digest: 0xcbf2_9ce4_8422_2325,
        ..Summary::default()
    };
    for p in parts {
        for h in p.heads {
            *s.coverage.entry(h).or_default() += 1;
        }
        let o = &p.outcome;
        match o.skipped {
            Some(k) => {
                let name = match k {
                    Skip::Unsupported => "unsupported",
                    Skip::Budget => "budget",
                    Skip::Domain => "domain",
                    Skip::Tie => "tie",
                };
                *s.skipped.entry(name.to_string()).or_default() += 1;
            }
            None => s.checked += 1,
        }
        s.grads_checked += o.grads_checked;
        s.grads_at_kink += o.grads_at_kink;
        s.replayed += u64::from(o.replayed);
        s.infix_printed += u64::from(o.infix_printed);
        s.f32_compared += u64::from(o.f32_compared);
        s.digest = (s.digest ^ o.digest).wrapping_mul(0x0100_0000_01b3);
        for f in &o.failures {
            *s.by_oracle.entry(f.oracle.name().to_string()).or_default() += 1;
        }
        if let Some(f) = p.found {
            s.found.push(f);
        }
    }
    s
}

/// Text of a regression file for `found` (its shrunk case).
pub fn regression_text(found: &Found, seed: u64) -> String {
    let mut text = format!("; ndvm-fuzz regression, oracle: {}\n", found.failure.oracle);
    for line in found.failure.detail.lines().take(6) {
        text.push_str(&format!("; {line}\n"));
    }
    text.push_str(&format!("; found: seed {seed}, program {}\n", found.index));
    for (name, vals) in &found.shrunk.params {
        let vals: Vec<String> = vals.iter().map(|v| format!("{v:?}")).collect();
        text.push_str(&format!(";; param {name}: {}\n", vals.join(" ")));
    }
    text.push_str(&found.shrunk.program.to_text());
    text.push('\n');
    text
}

/// A stable short hash of a program's text (the regression file's name).
fn text_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Writes each failure's shrunk case into `dir` as `<oracle>-<hash>.scm`; returns the paths.
pub fn write_regressions(dir: &Path, summary: &Summary, seed: u64) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| FuzzError::io(dir, e))?;
    let mut paths = Vec::new();
    for found in &summary.found {
        let text = regression_text(found, seed);
        let hash = text_hash(&found.shrunk.program.to_text());
        let path = dir.join(format!("{}-{:08x}.scm", found.failure.oracle, hash as u32));
        std::fs::write(&path, text).map_err(|e| FuzzError::io(&path, e))?;
        paths.push(path);
    }
    Ok(paths)
}

/// A regression file read back: the oracle that failed and the case.
#[derive(Clone, Debug)]
pub struct Regression {
    /// The oracle named in the file (every oracle is checked on replay).
    pub oracle: Option<Oracle>,
    /// The case.
    pub case: Case,
}

/// Reads a regression file's text.
pub fn read_regression(path: &Path, text: &str) -> Result<Regression> {
    let mut params = Vec::new();
    let mut oracle = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(";; param ") {
            let (name, vals) = rest
                .split_once(':')
                .ok_or_else(|| FuzzError::format(path, "a param line without `:`"))?;
            let vals = vals
                .split_whitespace()
                .map(str::parse::<f64>)
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| FuzzError::format(path, format!("param {name}: {e}")))?;
            params.push((name.trim().to_string(), vals));
        } else if let Some(rest) = line.strip_prefix("; ndvm-fuzz regression, oracle: ") {
            oracle = Oracle::from_name(rest.trim());
        }
    }
    let program: Sx = sx::read(text).map_err(|e| FuzzError::format(path, e))?;
    let n = params.first().map_or(1, |p: &(String, Vec<f64>)| p.1.len());
    if n == 0 || params.iter().any(|p| p.1.len() != n) {
        return Err(FuzzError::format(
            path,
            "params need one value per lane, the same number each",
        ));
    }
    Ok(Regression {
        oracle,
        case: Case { program, params },
    })
}
