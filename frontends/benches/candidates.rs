//! Per-evaluation cost on the replayed symbolic-regression stream: every candidate of
//! `testdata/seed-data/cosearch_candidates_valid.jsonl`, forward+gradient at B = 44 data lanes.
//!
//! Run with `cargo bench -p ndvm-frontends --bench candidates`.

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::time::Instant;

use ndvm_core::{EvalOptions, Evaluation, Evaluator, Heap, Inputs};

mod seed;

fn main() {
    let text = seed::read_seed("cosearch_candidates_valid.jsonl");
    let x: Vec<f64> = (0..44).map(|i| 0.1 + 5.9 * i as f64 / 63.0).collect();
    let reps: usize = std::env::var("NDVM_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let mut ev = Evaluator::new(EvalOptions::new(44));
    let mut out = Evaluation::empty();
    let (mut total_s, mut n_evals, mut steps, mut n_ok) = (0.0, 0usize, 0u64, 0usize);
    for line in text.lines() {
        let rec: serde_json::Value = serde_json::from_str(line).expect("json line");
        let src = rec["src"].as_str().expect("src");
        let mut heap = Heap::new();
        let Ok(program) = ndvm_frontends::scheme::parse(&mut heap, src) else {
            continue;
        };
        let mut inputs = Inputs::new().input_lanes("x", x.clone());
        for p in rec["params"].as_array().expect("params") {
            inputs = inputs.param(p.as_str().expect("name"), 0.5);
        }
        if ev
            .eval_into(&mut heap, &program, &inputs, true, &mut out)
            .is_err()
        {
            continue;
        }
        n_ok += 1;
        steps += ev.last_steps();
        let t = Instant::now();
        for _ in 0..reps {
            ev.eval_into(&mut heap, &program, &inputs, true, &mut out)
                .expect("runs");
        }
        total_s += t.elapsed().as_secs_f64();
        n_evals += reps;
    }
    println!("{n_ok} candidates, {reps} forward+gradient evaluations each at B = 44");
    println!(
        "mean {:.2} us per evaluation, {:.1} steps per evaluation, {:.0} ns per step",
        total_s / n_evals as f64 * 1e6,
        steps as f64 / n_ok as f64,
        total_s / n_evals as f64 * 1e9 / (steps as f64 / n_ok as f64)
    );
}
