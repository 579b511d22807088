//! Bounded memory: a forward-only loop releases each iteration's payloads, so the arena does not grow
//! with the trip count (the seed runtime grew by four B-wide payloads per iteration).

use ndvm_core::{EvalOptions, Evaluator, Heap, Inputs, Output};

fn arena_after(n_iter: u64, n_lanes: usize, grad: bool) -> (usize, Output) {
    let src = format!(
        "(loop ((i 0) (s 0.0) (v (vec 1.0 2.0))) \
           (if (= i {n_iter}) (+ s (vsum v)) \
               (recur (+ i 1) (+ s (* a 0.5)) (scale 1.0 v))))"
    );
    let mut heap = Heap::new();
    let program = ndvm_frontends::scheme::parse(&mut heap, &src).expect("parses");
    let mut ev = Evaluator::new(EvalOptions::new(n_lanes));
    let a: Vec<f64> = (0..n_lanes).map(|l| 1.0 + l as f64).collect();
    let inputs = Inputs::new().param_lanes("a", a);
    let res = if grad {
        ev.eval_grad(&mut heap, &program, &inputs)
    } else {
        ev.eval(&mut heap, &program, &inputs)
    };
    (ev.arena_floats(), res.expect("runs").value)
}

#[test]
fn million_iteration_forward_loop_runs_in_bounded_memory() {
    let (small, _) = arena_after(1_000, 1, false);
    let (big, value) = arena_after(1_000_000, 1, false);
    assert_eq!(
        big, small,
        "arena grew with the trip count: {small} floats after 1e3 iterations, {big} after 1e6"
    );
    assert_eq!(value, Output::Number(vec![500_000.0 + 3.0]));
}

#[test]
fn batched_forward_loop_runs_in_bounded_memory() {
    let (small, _) = arena_after(100, 64, false);
    let (big, value) = arena_after(20_000, 64, false);
    assert_eq!(big, small);
    let Output::Number(v) = value else {
        panic!("number expected")
    };
    for (l, x) in v.iter().enumerate() {
        assert_eq!(*x, 20_000.0 * 0.5 * (1.0 + l as f64) + 3.0);
    }
}

#[test]
fn recording_keeps_the_trace_so_it_grows() {
    // With a tape every iteration's primals are needed by the reverse sweep.
    let (small, _) = arena_after(100, 1, true);
    let (big, _) = arena_after(1_000, 1, true);
    assert!(big > small);
}

#[test]
fn repeated_forward_runs_of_a_long_loop_stop_recording_and_stay_bounded() {
    // A repeated forward-only run records a trace for the runs after it to replay, but gives up
    // past its cap (64 MiB, or a quarter of the memory limit): here 1 MiB of a 4 MiB limit.
    let src = "(loop ((i 0) (s 0.0) (v (vec 1.0 2.0))) \
               (if (= i 1000000) (+ s (vsum v)) (recur (+ i 1) (+ s (* a 0.5)) (scale 1.0 v))))";
    let mut heap = Heap::new();
    let program = ndvm_frontends::scheme::parse(&mut heap, src).expect("parses");
    let mut ev = Evaluator::new(
        EvalOptions::new(1)
            .with_max_memory(4 << 20)
            .with_max_steps(1 << 40),
    );
    let inputs = Inputs::new().param("a", 1.0);
    let mut floats = Vec::new();
    for _ in 0..3 {
        let e = ev.eval(&mut heap, &program, &inputs).expect("runs");
        assert_eq!(e.value, Output::Number(vec![500_000.0 + 3.0]));
        assert!(!ev.last_run_replayed());
        floats.push(ev.arena_floats());
    }
    // The second run recorded up to the cap, then released its loop as a plain walk; the third
    // did not try again.
    assert!(floats[1] <= (1 << 20) / 8 + 4096, "{floats:?}");
    assert_eq!(floats[2], floats[0], "{floats:?}");
}
