//! The resource governor and `eval` with gradients: `eval` of data holding differentiated or
//! lane-varying numbers is exact (known answers, finite differences, replay equals a walk), a
//! pooled evaluator is re-armed with new limits and deadlines, a raised cancel flag stops walks
//! and replays, and limits release the arenas.

use std::time::{Duration, Instant};

use ndvm_core::{Cancel, ErrorKind, EvalOptions, Evaluation, Evaluator, Heap, Inputs, Program};

fn parse(src: &str) -> (Heap, Program) {
    let mut heap = Heap::new();
    let program = ndvm_frontends::scheme::parse(&mut heap, src).expect("parses");
    (heap, program)
}

fn grad_run(src: &str, n_lanes: usize, inputs: &Inputs) -> Evaluation {
    let (mut heap, program) = parse(src);
    let mut ev = Evaluator::new(EvalOptions::new(n_lanes));
    ev.eval_grad(&mut heap, &program, inputs)
        .unwrap_or_else(|e| panic!("{src}: {e}"))
}

#[test]
fn eval_of_differentiated_numbers_has_exact_gradients() {
    // Known answer: a = 3, b = 5: a·b = 15, d/da = b = 5, d/db = a = 3.
    let inputs = Inputs::new().param("a", 3.0).param("b", 5.0);
    let e = grad_run("(eval (list '* a b))", 1, &inputs);
    assert_eq!(e.value.number(0), Some(15.0));
    assert_eq!(e.grad("a"), Some(&[5.0][..]));
    assert_eq!(e.grad("b"), Some(&[3.0][..]));
    // The same as the program written out, bit for bit.
    let direct = grad_run("(* a b)", 1, &inputs);
    assert_eq!(e, direct);
}

#[test]
fn eval_of_lane_varying_numbers_works_per_lane() {
    let a = vec![1.0, 2.0, -0.5, 4.0];
    let b = vec![3.0, 0.25, 7.0, -1.0];
    let inputs = Inputs::new()
        .param_lanes("a", a.clone())
        .param_lanes("b", b.clone());
    let e = grad_run("(eval (list '* a b))", 4, &inputs);
    let direct = grad_run("(* a b)", 4, &inputs);
    assert_eq!(e, direct);
    for l in 0..4 {
        assert_eq!(e.value.number(l), Some(a[l] * b[l]));
        assert_eq!(e.grad("a").unwrap()[l], b[l]);
        assert_eq!(e.grad("b").unwrap()[l], a[l]);
    }
    // Forward-only with a lane-varying input (not differentiated) works too.
    let (mut heap, program) = parse("(eval (list '+ x 1))");
    let mut ev = Evaluator::new(EvalOptions::new(3));
    let inputs = Inputs::new().input_lanes("x", vec![1.0, 2.0, 3.0]);
    let out = ev.eval(&mut heap, &program, &inputs).expect("runs");
    assert_eq!(out.value.number(2), Some(4.0));
}

#[test]
fn eval_gradient_matches_finite_differences() {
    // f(a, b) = a² + b, built as data and evaluated: df/da = 2a, df/db = 1.
    let src = "(eval (list '+ (list '* a a) b))";
    let f = |a: f64, b: f64| {
        let (mut heap, program) = parse(src);
        let mut ev = Evaluator::new(EvalOptions::new(1));
        let inputs = Inputs::new().input("a", a).input("b", b);
        ev.eval(&mut heap, &program, &inputs)
            .expect("runs")
            .value
            .number(0)
            .expect("a number")
    };
    let (a, b) = (1.7, -0.3);
    let e = grad_run(src, 1, &Inputs::new().param("a", a).param("b", b));
    assert_eq!(e.value.number(0), Some(a * a + b));
    let h = 1e-6;
    let fd_a = (f(a + h, b) - f(a - h, b)) / (2.0 * h);
    let fd_b = (f(a, b + h) - f(a, b - h)) / (2.0 * h);
    let ga = e.grad("a").unwrap()[0];
    let gb = e.grad("b").unwrap()[0];
    assert!((ga - fd_a).abs() < 1e-6, "d/da {ga} vs {fd_a}");
    assert!((gb - fd_b).abs() < 1e-6, "d/db {gb} vs {fd_b}");
    assert_eq!(ga, 2.0 * a);
    assert_eq!(gb, 1.0);
}

#[test]
fn eval_with_gradients_replays_like_a_fresh_walk() {
    let src =
        "(define f (eval (list 'lambda '(x) (list '* a 'x 'x))))\n(+ (f 2.0) (eval (list '* a b)))";
    let (mut heap, program) = parse(src);
    let mut pooled = Evaluator::new(EvalOptions::new(2));
    for k in 0..4 {
        let a = vec![1.0 + k as f64, 0.5];
        let b = vec![2.0, -3.0 + k as f64];
        let inputs = Inputs::new()
            .param_lanes("a", a.clone())
            .param_lanes("b", b);
        let again = pooled
            .eval_grad(&mut heap, &program, &inputs)
            .expect("runs");
        let (mut h2, p2) = parse(src);
        let fresh = Evaluator::new(EvalOptions::new(2))
            .eval_grad(&mut h2, &p2, &inputs)
            .expect("runs");
        assert_eq!(again, fresh, "run {k}");
        // d/da = 4 + b.
        assert_eq!(again.grad("a").unwrap()[0], 4.0 + 2.0);
    }
}

#[test]
fn pooled_evaluator_is_rearmed_and_released_after_a_limit() {
    let (mut heap, program) = parse("(loop ((acc '())) (recur (cons 1.0 acc)))");
    let mut ev = Evaluator::new(EvalOptions::new(1).with_max_memory(64 << 20));
    let err = ev
        .eval(&mut heap, &program, &Inputs::new())
        .expect_err("a memory limit");
    assert_eq!(err.kind, ErrorKind::MemoryLimit);
    assert!(err.message.contains("67108864 bytes"), "{}", err.message);
    assert_eq!(err.kind.class(), "memory");
    assert!(ev.memory_in_use() < 1 << 20);
    // Re-armed with a small work budget, the same evaluator stops on work instead.
    ev.set_limits(10_000, 100, 1 << 30);
    let err = ev
        .eval(&mut heap, &program, &Inputs::new())
        .expect_err("a work limit");
    assert_eq!(err.kind, ErrorKind::StepBudget);
    assert!(ev.last_work() > 10_000);
    // A deadline in the past ends the next run at once.
    ev.set_limits(u64::MAX, 100, 1 << 30);
    ev.set_deadline(Some(Instant::now()));
    let start = Instant::now();
    let err = ev
        .eval(&mut heap, &program, &Inputs::new())
        .expect_err("a deadline");
    assert_eq!(err.kind, ErrorKind::Deadline);
    assert!(start.elapsed() < Duration::from_secs(1));
    // Without limits in the way, a good program runs on the same evaluator.
    let (mut h2, p2) = parse("(length (list 1 2 3))");
    ev.set_deadline(None);
    let out = ev.eval(&mut h2, &p2, &Inputs::new()).expect("runs");
    assert_eq!(out.value.number(0), Some(3.0));
}

#[test]
fn replay_stops_at_the_deadline() {
    // A long recorded trace: replay is taken on the second run and stops at a past deadline.
    let src = "(loop ((i 0) (s 0.0)) (if (= i 20000) s (recur (+ i 1) (+ s (* a a)))))";
    let (mut heap, program) = parse(src);
    let mut ev = Evaluator::new(EvalOptions::new(1));
    let inputs = Inputs::new().param("a", 0.5);
    ev.eval_grad(&mut heap, &program, &inputs).expect("records");
    ev.set_deadline(Some(Instant::now()));
    let err = ev
        .eval_grad(&mut heap, &program, &inputs)
        .expect_err("deadline");
    assert_eq!(err.kind, ErrorKind::Deadline);
    // Re-armed, the evaluator walks again and agrees with a fresh one.
    ev.set_deadline(None);
    let again = ev.eval_grad(&mut heap, &program, &inputs).expect("runs");
    assert_eq!(again.grad("a"), Some(&[20000.0][..]));
}

#[test]
fn a_raised_cancel_stops_walks_and_replays() {
    // Raised before the run: the walk stops at its first look, as at a passed deadline.
    let src = "(loop ((i 0) (s 0.0)) (if (= i 20000) s (recur (+ i 1) (+ s (* a a)))))";
    let (mut heap, program) = parse(src);
    let inputs = Inputs::new().param("a", 0.5);
    let cancel = Cancel::new();
    let mut ev = Evaluator::new(EvalOptions::new(1));
    let recorded = ev.eval_grad(&mut heap, &program, &inputs).expect("records");
    ev.set_cancel(Some(cancel.clone()));
    cancel.raise();
    // The second run would replay the recording: the replay stops too.
    let err = ev
        .eval_grad(&mut heap, &program, &inputs)
        .expect_err("cancelled replay");
    assert_eq!(err.kind, ErrorKind::Deadline);
    assert!(err.message.contains("cancelled"), "{err}");
    let mut fresh = Evaluator::new(EvalOptions::new(1).with_cancel(Some(cancel.clone())));
    let err = fresh
        .eval_grad(&mut heap, &program, &inputs)
        .expect_err("cancelled walk");
    assert_eq!(err.kind, ErrorKind::Deadline);
    assert!(err.message.contains("cancelled"), "{err}");
    // Another flag (or none) runs again and agrees with the recording.
    ev.set_cancel(Some(Cancel::new()));
    assert_eq!(
        ev.eval_grad(&mut heap, &program, &inputs).unwrap(),
        recorded
    );
    ev.set_cancel(None);
    assert_eq!(
        ev.eval_grad(&mut heap, &program, &inputs).unwrap(),
        recorded
    );
}

#[test]
fn a_cancel_raised_by_another_thread_stops_an_endless_run() {
    // Endless: without the cancel it would run into the 1 GiB memory limit (seconds of work).
    let (mut heap, program) = parse("(loop ((i 0)) (recur (+ i 1)))");
    let cancel = Cancel::new();
    let opts = EvalOptions::new(1)
        .with_max_steps(u64::MAX)
        .with_max_memory(1 << 30)
        .with_cancel(Some(cancel.clone()));
    let mut ev = Evaluator::new(opts);
    let raiser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        cancel.raise();
    });
    let err = ev
        .eval(&mut heap, &program, &Inputs::new())
        .expect_err("cancelled");
    raiser.join().unwrap();
    assert_eq!(err.kind, ErrorKind::Deadline);
    assert!(err.message.contains("cancelled"), "{err}");
}

#[test]
fn work_is_charged_by_elements_touched() {
    // A tensor op is charged its multiply-adds before it runs.
    let (mut heap, program) = parse("(matmul (eye 100) (eye 100))");
    let mut ev = Evaluator::new(EvalOptions::new(1).with_max_steps(500_000));
    let err = ev
        .eval(&mut heap, &program, &Inputs::new())
        .expect_err("1e6 multiply-adds over a budget of 5e5");
    assert_eq!(err.kind, ErrorKind::StepBudget);
    let mut ev = Evaluator::new(EvalOptions::new(1).with_max_steps(2_000_000));
    ev.eval(&mut heap, &program, &Inputs::new()).expect("fits");
    assert!(ev.last_work() >= 1_000_000, "{}", ev.last_work());
}
