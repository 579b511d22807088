//! Overhead of the self-hosted evaluator (`bootstrap/evaluator.scm`): forward+gradient time of a
//! program run directly and run through the evaluator (the program as quoted data), walked and
//! replayed, at B = 1 and 256, with the ratio; and the prelude's list procedures
//! (`bootstrap/prelude.scm`) beside the native primitives.
//!
//! Run with `cargo bench -p ndvm-frontends --bench selfhost` (median of runs, about 0.3 s per
//! cell; `NDVM_BENCH_SECONDS=s` changes it). Reads `kalman2d_T80` from
//! `testdata/seed-data/oracle_refs.json`.

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::path::Path;
use std::time::{Duration, Instant};

use ndvm_core::{Dialect, EvalOptions, Evaluation, Evaluator, Heap, Inputs, Program};

mod seed;

fn bootstrap(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../bootstrap")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// How a program is run.
#[derive(Clone, Copy)]
enum Setup {
    Direct,
    Via,
    Prelude,
}

fn program(src: &str, setup: Setup, inputs: &Inputs) -> (Heap, Program) {
    let mut heap = Heap::new();
    let prog = ndvm_frontends::scheme::parse(&mut heap, src).expect("parses");
    let prog = match setup {
        Setup::Direct => prog,
        Setup::Via => {
            let ev = ndvm_frontends::scheme::parse(&mut heap, &bootstrap("evaluator.scm"))
                .expect("evaluator parses");
            let names: Vec<&str> = inputs.entries.iter().map(|i| i.name.as_str()).collect();
            ndvm_core::selfhost::via(&mut heap, &ev, &prog, &names).expect("via")
        }
        Setup::Prelude => {
            let pre = ndvm_frontends::scheme::parse(&mut heap, &bootstrap("prelude.scm"))
                .expect("prelude parses");
            ndvm_core::selfhost::with_prelude(&heap, &pre, &prog).expect("prelude")
        }
    };
    (heap, prog)
}

/// Median seconds of one forward+gradient run, alternating two parameter sets (so a replay
/// really recomputes), after one warm-up run.
fn time(src: &str, setup: Setup, opts: &EvalOptions, inputs: &[Inputs; 2]) -> f64 {
    let (mut heap, prog) = program(src, setup, &inputs[0]);
    let mut ev = Evaluator::new(opts.clone());
    let mut out = Evaluation::empty();
    ev.eval_into(&mut heap, &prog, &inputs[0], true, &mut out)
        .expect("runs");
    let budget = Duration::from_secs_f64(
        std::env::var("NDVM_BENCH_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0.3),
    );
    let start = Instant::now();
    let mut samples = Vec::new();
    while samples.len() < 5 || (start.elapsed() < budget && samples.len() < 100_000) {
        let inputs = &inputs[samples.len() % 2];
        let t = Instant::now();
        ev.eval_into(&mut heap, &prog, inputs, true, &mut out)
            .expect("runs");
        samples.push(t.elapsed().as_secs_f64());
        std::hint::black_box(&out);
    }
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Per-lane parameters `name` scaled by `s`, slightly different on each of `b` lanes.
fn lanes(name: &str, base: f64, s: f64, b: usize, inputs: Inputs) -> Inputs {
    inputs.param_lanes(
        name,
        (0..b).map(|l| s * base * (1.0 + 1e-3 * l as f64)).collect(),
    )
}

fn overhead_row(label: &str, src: &str, dialect: Dialect, b: usize, inputs: &[Inputs; 2]) {
    for (mode, replay) in [("replay", true), ("walk", false)] {
        let opts = EvalOptions::new(b)
            .with_dialect(dialect)
            .with_replay(replay);
        let direct = time(src, Setup::Direct, &opts, inputs);
        let via = time(src, Setup::Via, &opts, inputs);
        println!(
            "{label:<22} {b:>5} {mode:>7} {:>12.2} {:>12.2} {:>8.2}",
            direct * 1e6,
            via * 1e6,
            via / direct
        );
    }
}

fn main() {
    println!("self-hosted evaluator overhead: forward+gradient per call, median (us)");
    println!(
        "{:<22} {:>5} {:>7} {:>12} {:>12} {:>8}",
        "program", "B", "mode", "direct", "via", "ratio"
    );
    let k = seed::kalman();
    let cand = "(* a (* (exp (* b x)) (sin (* c x))))";
    for b in [1usize, 256] {
        let kin = |s: f64| {
            let i = lanes("q", 0.05, s, b, Inputs::new());
            lanes("r", 0.10, s, b, i).matrix("obs", k.rows, k.cols, k.obs.clone())
        };
        overhead_row(
            "kalman2d_T80",
            &k.src,
            Dialect::Reference,
            b,
            &[kin(1.0), kin(1.1)],
        );
        let cin = |s: f64| {
            let i = lanes("a", 1.5, s, b, Inputs::new());
            let i = lanes("b", -0.3, s, b, i);
            lanes("c", 2.0, s, b, i).input_lanes("x", (0..b).map(|l| 0.1 * l as f64).collect())
        };
        overhead_row(
            "candidate (exp·sin)",
            cand,
            Dialect::Default,
            b,
            &[cin(1.0), cin(1.1)],
        );
    }

    println!();
    println!("prelude (Scheme) vs native list primitives: forward+gradient walk per call (us)");
    println!(
        "{:<40} {:>12} {:>12} {:>8}",
        "program", "native", "prelude", "ratio"
    );
    let list =
        "(define (iota n) (loop ((k n) (acc '())) (if (= k 0) acc (recur (- k 1) (cons k acc))))) ";
    for (name, body) in [
        ("map", "(car (map (lambda (x) (* a x)) (iota 200)))"),
        (
            "filter",
            "(car (filter (lambda (x) (> x 10)) (map (lambda (x) (* a x)) (iota 200))))",
        ),
        (
            "fold-left",
            "(fold-left + 0 (map (lambda (x) (* a x)) (iota 200)))",
        ),
        (
            "fold-right",
            "(fold-right + 0 (map (lambda (x) (* a x)) (iota 200)))",
        ),
        ("append", "(* a (length (append (iota 200) (iota 200))))"),
        ("reverse", "(* a (car (reverse (iota 200))))"),
        ("length", "(* a (length (iota 200)))"),
        ("list-ref", "(* a (list-ref (iota 200) 150))"),
    ] {
        let src = format!("{list}{body}");
        let opts = EvalOptions::new(1).with_replay(false);
        let ins = [Inputs::new().param("a", 0.5), Inputs::new().param("a", 0.6)];
        let native = time(&src, Setup::Direct, &opts, &ins);
        let prelude = time(&src, Setup::Prelude, &opts, &ins);
        println!(
            "{name:<40} {:>12.2} {:>12.2} {:>8.2}",
            native * 1e6,
            prelude * 1e6,
            prelude / native
        );
    }
}
