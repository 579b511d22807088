//! Steady-state evaluation allocates nothing: a counting global allocator watches 100 repeated
//! forward+backward walks (and replays, whole and in lane blocks) of warmed-up programs (the
//! Kalman filter, a loop, a closure program).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use ndvm_core::{Dialect, EvalOptions, Evaluation, Evaluator, Heap, Inputs, LaneBlock, Precision};

mod common;

/// Counts every allocation and reallocation made through the global allocator, per thread (the
/// test harness runs tests on parallel threads).
struct Counting;

thread_local!(static ALLOCS: Cell<usize> = const { Cell::new(0) });

fn count() {
    ALLOCS.with(|c| c.set(c.get() + 1));
}

fn allocs_so_far() -> usize {
    ALLOCS.with(Cell::get)
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract is upheld by `System`; the counter is a const-initialised thread-local
// cell, whose access never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (all allocations go through it).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged; the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `src` 100 times after three warm-up runs and returns the number of allocations in those
/// 100, summed over walking every run (replay off), replaying the recorded trace (replay on),
/// replaying it in blocks of 6 lanes (when there are more), and forward-only runs (which record
/// on their second run and replay after), each in `f64` and in `f32` lanes.
fn allocations(src: &str, dialect: Dialect, n_lanes: usize, inputs: &Inputs) -> usize {
    let mut heap = Heap::new();
    let program = ndvm_frontends::scheme::parse(&mut heap, src).expect("parses");
    let mut total = 0;
    let runs = [
        (false, 0, true),
        (true, 0, true),
        (true, 6, true),
        (true, 0, false),
    ];
    let precisions = [Precision::F64, Precision::F32];
    for (precision, (replay, block, grad)) in precisions
        .into_iter()
        .flat_map(|p| runs.into_iter().map(move |r| (p, r)))
    {
        let opts = EvalOptions::new(n_lanes)
            .with_dialect(dialect)
            .with_replay(replay)
            .with_lane_block(LaneBlock::Lanes(block))
            .with_precision(precision);
        let mut ev = Evaluator::new(opts);
        let mut out = Evaluation::empty();
        for _ in 0..3 {
            ev.eval_into(&mut heap, &program, inputs, grad, &mut out)
                .expect("runs");
        }
        let before = allocs_so_far();
        for _ in 0..100 {
            ev.eval_into(&mut heap, &program, inputs, grad, &mut out)
                .expect("runs");
        }
        total += allocs_so_far() - before;
        if !replay {
            assert!(!ev.last_run_replayed());
        }
    }
    total
}

#[test]
fn warmed_up_kalman_walks_allocate_nothing() {
    let kalman = common::oracle_programs()
        .into_iter()
        .find(|p| p.name == "kalman2d_T80")
        .expect("kalman2d_T80");
    for n_lanes in [1usize, 16] {
        let q: Vec<f64> = (0..n_lanes).map(|l| 0.05 + 0.001 * l as f64).collect();
        let r: Vec<f64> = (0..n_lanes).map(|l| 0.10 + 0.001 * l as f64).collect();
        let m = kalman.matrix.as_ref().expect("kalman has obs");
        let inputs = Inputs::new()
            .param_lanes("q", q)
            .param_lanes("r", r)
            .matrix(&m.name, m.rows, m.cols, m.data.clone());
        assert_eq!(
            allocations(&kalman.src, Dialect::Reference, n_lanes, &inputs),
            0,
            "B = {n_lanes}"
        );
    }
}

#[test]
fn warmed_up_scalar_loop_and_closure_walks_allocate_nothing() {
    let x: Vec<f64> = (0..44).map(|i| 0.1 + 0.13 * i as f64).collect();
    let cases = [
        "(* a (exp (* (- 0 b) x)))",
        "(loop ((i 0) (s 0.0)) (if (< i 12) (recur (+ i 1) (+ (* a s) (* b x))) s))",
        "(define (f y) (if (> y 1.0) (sqrt y) (* b y))) (+ (f (* a x)) (min a b x))",
        "(let* ((u (vec a b x)) (m (outer u u))) (+ (trace m) (ref u 2) (dot u u)))",
    ];
    for src in cases {
        let inputs = Inputs::new()
            .param("a", 0.7)
            .param("b", 1.3)
            .input_lanes("x", x.clone());
        assert_eq!(allocations(src, Dialect::Default, 44, &inputs), 0, "{src}");
    }
}

#[test]
fn warmed_up_candidate_stream_walks_allocate_nothing() {
    let text = common::read_testdata("seed-data/cosearch_candidates_valid.jsonl");
    let x: Vec<f64> = (0..44).map(|i| 0.1 + 5.9 * i as f64 / 63.0).collect();
    let mut checked = 0;
    for line in text.lines() {
        let rec: serde_json::Value = serde_json::from_str(line).expect("json line");
        let src = rec["src"].as_str().expect("src");
        if src.contains("(-1.0)") {
            continue; // applies a number: an error, not a walk
        }
        // Parameters per lane (multistart) and uniform (one start).
        let mut per_lane = Inputs::new().input_lanes("x", x.clone());
        let mut uniform = Inputs::new().input_lanes("x", x.clone());
        for (k, p) in rec["params"].as_array().expect("params").iter().enumerate() {
            let name = p.as_str().expect("name");
            per_lane = per_lane.param_lanes(name, vec![0.5 + 0.1 * k as f64; 44]);
            uniform = uniform.param(name, 0.5 + 0.1 * k as f64);
        }
        assert_eq!(
            allocations(src, Dialect::Default, 44, &per_lane),
            0,
            "{src}"
        );
        assert_eq!(
            allocations(src, Dialect::Default, 44, &uniform),
            0,
            "{src} (uniform parameters)"
        );
        checked += 1;
    }
    assert_eq!(checked, 246);
}
