//! Criterion micro-benchmarks of the runtime: `kalman2d_T80` forward+gradient (replayed and walked)
//! and forward-only at B = 1 and 256, and one symbolic-regression candidate at 44 lanes.
//!
//! Run with `cargo bench -p ndvm-frontends --bench micro` (criterion's statistics, one case at a
//! time). The side-by-side comparison with the compiled ceiling is `ndvm-bench kalman`.
//! Reads `testdata/seed-data/oracle_refs.json`.

#![allow(missing_docs)] // `criterion_group!` generates undocumented items

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ndvm_core::{Dialect, EvalOptions, Evaluation, Evaluator, Heap, Inputs, Program};

mod seed;

/// One warmed-up evaluator on one program, its inputs changed in place between runs.
struct Case {
    heap: Heap,
    program: Program,
    ev: Evaluator,
    inputs: [Inputs; 2],
    out: Evaluation,
    flip: bool,
}

impl Case {
    fn new(src: &str, opts: EvalOptions, inputs: [Inputs; 2]) -> Case {
        let mut heap = Heap::new();
        let program = ndvm_frontends::scheme::parse(&mut heap, src).expect("parses");
        Case {
            heap,
            program,
            ev: Evaluator::new(opts),
            inputs,
            out: Evaluation::empty(),
            flip: false,
        }
    }

    /// One run, alternating between the two parameter sets.
    fn run(&mut self, grad: bool) {
        self.flip = !self.flip;
        let inputs = &self.inputs[usize::from(self.flip)];
        self.ev
            .eval_into(&mut self.heap, &self.program, inputs, grad, &mut self.out)
            .expect("runs");
        black_box(&self.out);
    }
}

fn kalman_benches(c: &mut Criterion) {
    let seed::Kalman {
        src,
        rows,
        cols,
        obs,
    } = seed::kalman();
    let mut group = c.benchmark_group("kalman2d_T80");
    for b in [1usize, 256] {
        let point = |s: f64| {
            Inputs::new()
                .param_lanes(
                    "q",
                    (0..b).map(|l| s * 0.05 * (1.0 + 1e-3 * l as f64)).collect(),
                )
                .param_lanes(
                    "r",
                    (0..b).map(|l| s * 0.10 * (1.0 + 1e-3 * l as f64)).collect(),
                )
                .matrix("obs", rows, cols, obs.clone())
        };
        group.throughput(Throughput::Elements(b as u64));
        for (name, replay, grad) in [
            ("fwd+grad replay", true, true),
            ("fwd+grad walk", false, true),
            ("fwd walk", false, false),
        ] {
            let opts = EvalOptions::new(b)
                .with_dialect(Dialect::Reference)
                .with_replay(replay);
            let mut case = Case::new(&src, opts, [point(1.0), point(1.0001)]);
            case.run(grad);
            group.bench_function(BenchmarkId::new(name, b), |bench| {
                bench.iter(|| case.run(grad))
            });
        }
    }
    group.finish();
}

fn candidate_benches(c: &mut Criterion) {
    // A typical replayed candidate (damped oscillation) on 44 data lanes, as calibration runs it.
    let src = "(* a (exp (* (- 0.0 b) x)) (cos (* c x)))";
    let x: Vec<f64> = (0..44).map(|i| 0.1 + 5.9 * i as f64 / 43.0).collect();
    let point = |s: f64| {
        Inputs::new()
            .param("a", s)
            .param("b", 0.3 * s)
            .param("c", 2.0 * s)
            .input_lanes("x", x.clone())
    };
    let mut group = c.benchmark_group("candidate");
    group.throughput(Throughput::Elements(44));
    for (name, replay) in [("fwd+grad replay", true), ("fwd+grad walk", false)] {
        let opts = EvalOptions::new(44).with_replay(replay);
        let mut case = Case::new(src, opts, [point(1.0), point(1.01)]);
        case.run(true);
        group.bench_function(BenchmarkId::new(name, 44), |bench| {
            bench.iter(|| case.run(true))
        });
    }
    group.finish();
}

criterion_group!(benches, kalman_benches, candidate_benches);
criterion_main!(benches);
