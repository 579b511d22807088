//! The first-evaluation suite: what every new candidate pays before any replay — a fresh heap, the
//! Scheme reader, the decoder and the first forward+gradient walk — over the 200 programs of
//! `fuzz_corpus.jsonl` at B = 1, beside the same program's replay and the reader alone.
//!
//! One [`Evaluator`] serves every program (as the calibrator reuses one); each timed call reads the
//! program into a new heap, so the evaluator's decoded-form cache never hits. Per program the three
//! cases are sampled round-robin; the summary is the median over programs of each per-program median.

use std::path::Path;

use ndvm_core::{EvalOptions, Evaluation, Evaluator, Heap, Inputs, Program};
use serde::Serialize;

use crate::timing::{self, Budget, Timing};
use ndvm_search::{Result, SearchError};

/// The corpus file in the seed-data folder.
pub const CORPUS: &str = "fuzz_corpus.jsonl";

/// One corpus program: its source and its parameters' values.
#[derive(Clone, Debug)]
pub struct CorpusProgram {
    /// The Scheme source.
    pub src: String,
    /// `(name, value)` of every parameter (all differentiable).
    pub params: Vec<(String, f64)>,
}

#[derive(serde::Deserialize)]
struct Line {
    src: String,
    params: indexmap::IndexMap<String, f64>,
}

/// Reads `seed_data/fuzz_corpus.jsonl`.
pub fn load(seed_data: &Path) -> Result<Vec<CorpusProgram>> {
    let path = seed_data.join(CORPUS);
    let text = std::fs::read_to_string(&path).map_err(|source| SearchError::Read {
        path: path.clone(),
        source,
    })?;
    let mut out = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let rec: Line = serde_json::from_str(line).map_err(|e| SearchError::Read {
            path: path.clone(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("line {}: {e}", i + 1),
            ),
        })?;
        out.push(CorpusProgram {
            src: rec.src,
            params: rec.params.into_iter().collect(),
        });
    }
    Ok(out)
}

/// Medians over the corpus (µs per call) and the raw per-program medians.
#[derive(Clone, Debug, Serialize)]
pub struct FirstEvalReport {
    /// Programs timed (those that read and run without error).
    pub n_programs: usize,
    /// Median over programs: new heap + reader + decoder + first forward+gradient walk.
    pub first_eval_us: f64,
    /// Median over programs: new heap + reader only.
    pub parse_us: f64,
    /// Median over programs: a replay of the same program (the steady state it is compared with).
    pub replay_us: f64,
    /// `first_eval_us / replay_us`, median over programs of the per-program ratio.
    pub first_over_replay: f64,
    /// Mean over programs of first evaluation (µs), the corpus' total cost per program.
    pub first_eval_mean_us: f64,
    /// Per program, in corpus order: `[first_eval, parse, replay]` medians (µs).
    pub per_program_us: Vec<[f64; 3]>,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

fn parse(heap: &mut Heap, src: &str) -> Result<Program> {
    ndvm_frontends::scheme::parse(heap, src).map_err(|error| SearchError::Parse {
        rendered: error.to_string(),
        error,
    })
}

fn eval_error(error: ndvm_core::CoreError) -> SearchError {
    SearchError::Eval {
        rendered: error.to_string(),
        error,
    }
}

/// Times every program of `corpus` (the per-program budget is `budget`, its times split among the
/// three cases); programs that fail to read or run are skipped.
pub fn run(
    corpus: &[CorpusProgram],
    budget: &Budget,
    progress: &mut dyn FnMut(&str),
) -> Result<FirstEvalReport> {
    let mut ev = Evaluator::new(EvalOptions::new(1));
    let mut out = Evaluation::empty();
    let mut per_program = Vec::new();
    for (i, prog) in corpus.iter().enumerate() {
        if i % 50 == 0 {
            progress(&format!("firsteval: programs {i}…"));
        }
        let inputs = prog
            .params
            .iter()
            .fold(Inputs::new(), |acc, (n, v)| acc.param(n, *v));
        let mut heap = Heap::new();
        let Ok(program) = ndvm_frontends::scheme::parse(&mut heap, &prog.src) else {
            continue;
        };
        if ev
            .eval_into(&mut heap, &program, &inputs, true, &mut out)
            .is_err()
        {
            continue;
        }
        let mut first = || -> Result<()> {
            let mut heap = Heap::new();
            let program = parse(&mut heap, &prog.src)?;
            ev.eval_into(&mut heap, &program, &inputs, true, &mut out)
                .map_err(eval_error)?;
            std::hint::black_box(&out);
            Ok(())
        };
        let mut parse_only = || -> Result<()> {
            let mut heap = Heap::new();
            std::hint::black_box(parse(&mut heap, &prog.src)?);
            Ok(())
        };
        let mut ev2 = Evaluator::new(EvalOptions::new(1));
        let mut out2 = Evaluation::empty();
        ev2.eval_into(&mut heap, &program, &inputs, true, &mut out2)
            .map_err(eval_error)?;
        let mut replay = || -> Result<()> {
            ev2.eval_into(&mut heap, &program, &inputs, true, &mut out2)
                .map_err(eval_error)?;
            std::hint::black_box(&out2);
            Ok(())
        };
        let t: Vec<Timing> =
            timing::measure_interleaved(budget, &mut [&mut first, &mut parse_only, &mut replay])?;
        per_program.push([t[0].median_us, t[1].median_us, t[2].median_us]);
    }
    let col = |k: usize| per_program.iter().map(|p| p[k]).collect::<Vec<f64>>();
    let n = per_program.len();
    Ok(FirstEvalReport {
        n_programs: n,
        first_eval_us: median(col(0)),
        parse_us: median(col(1)),
        replay_us: median(col(2)),
        first_over_replay: median(per_program.iter().map(|p| p[0] / p[2]).collect()),
        first_eval_mean_us: col(0).iter().sum::<f64>() / n.max(1) as f64,
        per_program_us: per_program,
    })
}

/// The per-program budget of a full run: about 30 ms per program for the three cases.
pub fn budget(quick: bool) -> Budget {
    if quick {
        Budget {
            warmup: std::time::Duration::from_micros(200),
            measure: std::time::Duration::from_micros(500),
            min_sample: std::time::Duration::from_micros(100),
            min_samples: 3,
            max_samples: 5,
        }
    } else {
        Budget {
            warmup: std::time::Duration::from_millis(2),
            measure: std::time::Duration::from_millis(8),
            min_sample: std::time::Duration::from_micros(500),
            min_samples: 7,
            max_samples: 200,
        }
    }
}

/// The report as a text table.
pub fn table(r: &FirstEvalReport) -> String {
    format!(
        "first evaluation of a new program (fuzz_corpus.jsonl, {} programs, B = 1), medians over programs, µs:\n\
         {:>14} {:>10} {:>10} {:>12} {:>10}\n\
         {:>14.2} {:>10.2} {:>10.3} {:>11.1}x {:>10.2}\n",
        r.n_programs,
        "first eval",
        "parse",
        "replay",
        "first/replay",
        "mean first",
        r.first_eval_us,
        r.parse_us,
        r.replay_us,
        r.first_over_replay,
        r.first_eval_mean_us
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_loads_and_a_quick_run_covers_it() {
        // The vendored corpus: 200 programs, each with 1 to 4 parameters.
        let corpus = load(&crate::default_seed_data()).unwrap();
        assert_eq!(corpus.len(), 200);
        assert!(corpus.iter().all(|p| (1..=4).contains(&p.params.len())));
        let r = run(&corpus[..5], &budget(true), &mut |_| {}).unwrap();
        assert_eq!(r.n_programs, 5);
        assert_eq!(r.per_program_us.len(), 5);
        assert!(r.per_program_us.iter().flatten().all(|t| *t > 0.0));
    }
}
