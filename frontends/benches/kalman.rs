//! Kalman benchmark: `kalman2d_T80` forward+gradient time per lane at B = 1 … 1024 (median of runs).
//!
//! Run with `cargo bench -p ndvm-frontends --bench kalman`. Reads the program and its 80×2
//! observations from `testdata/seed-data/oracle_refs.json`. `NDVM_BENCH_WALK=1` turns the trace
//! replay off (every run walks), `NDVM_BENCH_FWD=1` times forward-only runs, `NDVM_BENCH_B=k`
//! runs one lane count, `NDVM_BENCH_RUNS=n` a fixed number of runs and `NDVM_BENCH_BLOCK=w`
//! replays in lane blocks of `w` lanes (0: one block; unset: the default cache budget);
//! `NDVM_BENCH_F32=1` evaluates in f32 lanes.

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::time::{Duration, Instant};

use ndvm_core::{Dialect, EvalOptions, Evaluator, Heap, Inputs, LaneBlock};

mod seed;

fn main() {
    let seed::Kalman {
        src,
        rows,
        cols,
        obs,
    } = seed::kalman();

    let mut heap = Heap::new();
    let program = ndvm_frontends::scheme::parse(&mut heap, &src).expect("parse");
    println!("kalman2d_T80 forward+gradient (reference dialect), median of runs");
    println!("{:>6} {:>14} {:>16}", "B", "per call (us)", "per lane (us)");
    let only: Option<usize> = std::env::var("NDVM_BENCH_B")
        .ok()
        .and_then(|v| v.parse().ok());
    for b in [1usize, 8, 64, 256, 1024] {
        if only.is_some_and(|o| o != b) {
            continue;
        }
        let walk = std::env::var_os("NDVM_BENCH_WALK").is_some();
        let fwd = std::env::var_os("NDVM_BENCH_FWD").is_some();
        let mut opts = EvalOptions::new(b).with_dialect(Dialect::Reference);
        if walk {
            opts = opts.with_replay(false);
        }
        if std::env::var_os("NDVM_BENCH_F32").is_some() {
            opts = opts.with_precision(ndvm_core::Precision::F32);
        }
        if let Some(w) = std::env::var("NDVM_BENCH_BLOCK")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            opts = opts.with_lane_block(LaneBlock::Lanes(w));
        }
        let mut ev = Evaluator::new(opts);
        let q: Vec<f64> = (0..b).map(|l| 0.05 * (1.0 + 0.001 * l as f64)).collect();
        let r: Vec<f64> = (0..b).map(|l| 0.10 * (1.0 + 0.001 * l as f64)).collect();
        let inputs = Inputs::new()
            .param_lanes("q", q)
            .param_lanes("r", r)
            .matrix("obs", rows, cols, obs.clone());
        let res = ev
            .eval_grad(&mut heap, &program, &inputs)
            .expect("kalman runs");
        assert!(res.faults.iter().all(|f| !f));
        let budget = Duration::from_millis(if b >= 256 { 3000 } else { 1500 });
        let mut samples = Vec::new();
        let start = Instant::now();
        let fixed_runs: Option<usize> = std::env::var("NDVM_BENCH_RUNS")
            .ok()
            .and_then(|v| v.parse().ok());
        while fixed_runs.map_or(start.elapsed() < budget || samples.len() < 5, |n| {
            samples.len() < n
        }) {
            let t = Instant::now();
            let res = if fwd {
                ev.eval(&mut heap, &program, &inputs)
            } else {
                ev.eval_grad(&mut heap, &program, &inputs)
            }
            .expect("kalman runs");
            std::hint::black_box(&res);
            samples.push(t.elapsed().as_secs_f64() * 1e6);
        }
        samples.sort_by(f64::total_cmp);
        let med = samples[samples.len() / 2];
        if b == 1 {
            println!(
                "(steps per run: {}, tape nodes: {}, arena floats: {}, replayed: {})",
                ev.last_steps(),
                ev.last_tape_len(),
                ev.arena_floats(),
                ev.last_run_replayed()
            );
        }
        println!("{b:>6} {med:>14.1} {:>16.3}", med / b as f64);
    }
}
