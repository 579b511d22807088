//! Per-lane cost of forward+gradient on programs whose lanes diverge (piecewise models, per-lane
//! trip counts), at B = 256 data lanes: what the merge-aware reverse sweep costs.
//!
//! Run with `cargo bench -p ndvm-frontends --bench divergent` (`NDVM_BENCH_REPS` repetitions,
//! default 300; the median of 5 rounds is reported).

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::time::Instant;

use ndvm_core::{EvalOptions, Evaluation, Evaluator, Heap, Inputs};

const B: usize = 256;

const PROGRAMS: [(&str, &str); 5] = [
    (
        "piecewise",
        "(if (< x c) (* a (- x c)) (* b (square (- x c))))",
    ),
    (
        "piecewise, value reused",
        "(let ((w (if (< x c) (* a x) b))) (+ (* w w x) (tanh (* w c)) w))",
    ),
    (
        "per-lane trip count",
        "(loop ((i 0.0) (s a)) (if (< i (* 8.0 x)) (recur (+ i 1.0) (+ (* s b) c)) s))",
    ),
    (
        "branches inside a loop",
        "(loop ((i 0.0) (s 0.0)) (if (= i 12.0) s (recur (+ i 1.0) (if (< (sin (* x i a)) 0.0) (- s (* b x)) (+ s (* c x x))))))",
    ),
    (
        "two branchy accumulators",
        "(loop ((i 0.0) (s a) (t b)) (if (= i 200.0) (* s (+ s t)) (recur (+ i 1.0) (if (< (sin (* 7.0 x i)) 0.0) s (+ s (* c t))) (if (< (cos (* 3.0 x i)) 0.0) (* t 0.999) t))))",
    ),
];

fn main() {
    let reps: usize = std::env::var("NDVM_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let x: Vec<f64> = (0..B).map(|i| 0.01 + 0.99 * i as f64 / B as f64).collect();
    let mut ev = Evaluator::new(EvalOptions::new(B));
    let mut out = Evaluation::empty();
    println!("forward+gradient at B = {B}, {reps} evaluations per round, median of 5 rounds");
    for (name, src) in PROGRAMS {
        let mut heap = Heap::new();
        let program = ndvm_frontends::scheme::parse(&mut heap, src).expect("parses");
        let inputs = Inputs::new()
            .input_lanes("x", x.clone())
            .param("a", 0.7)
            .param("b", 1.3)
            .param("c", 0.45);
        ev.eval_into(&mut heap, &program, &inputs, true, &mut out)
            .expect("runs");
        let mut rounds: Vec<f64> = (0..5)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..reps {
                    ev.eval_into(&mut heap, &program, &inputs, true, &mut out)
                        .expect("runs");
                }
                t.elapsed().as_secs_f64() / (reps * B) as f64 * 1e9
            })
            .collect();
        rounds.sort_by(f64::total_cmp);
        println!("{name:<26} {:>8.2} ns per lane", rounds[2]);
    }
}
