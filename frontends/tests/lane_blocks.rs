//! Cache-sized lane blocks: a replay split into blocks of lanes (each block's forward, then its
//! reverse sweep) returns, bit for bit, what the unsplit replay and a fresh walk return — values,
//! gradients and fault flags on every lane — for Kalman at B = 1, 7, 256 and 1000, for every
//! oracle program, for programs whose lanes take different branches and loop trip counts, and for
//! 100 seeded random programs with branches, `floor` and parameter-dependent loops.

mod common;

use common::{LaneBits, lane_bits, opts, oracle_programs};
use ndvm_core::{Dialect, EvalOptions, Evaluator, Heap, Inputs, LaneBlock, Precision};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Every lane's bits of each run of `seq` through one reused evaluator with `opts`; also whether
/// each run replayed.
fn runs(src: &str, opts: EvalOptions, seq: &[Inputs]) -> (Vec<Vec<LaneBits>>, Vec<bool>) {
    let mut heap = Heap::new();
    let program = ndvm_frontends::scheme::parse(&mut heap, src).expect("parses");
    let mut ev = Evaluator::new(opts.clone());
    let mut out = Vec::new();
    let mut replayed = Vec::new();
    for inputs in seq {
        match ev.eval_grad(&mut heap, &program, inputs) {
            Ok(e) => out.push((0..opts.n_lanes).map(|l| lane_bits(&e, l)).collect()),
            Err(e) => panic!("{src}: {e:?}"),
        }
        replayed.push(ev.last_run_replayed());
    }
    (out, replayed)
}

/// The runs of `seq` unsplit (one block), split into blocks of `width` lanes, and walked every
/// time agree bit for bit; returns which runs replayed (the same in both replaying evaluators).
fn check_blocks(
    name: &str,
    src: &str,
    base: EvalOptions,
    width: usize,
    seq: &[Inputs],
) -> Vec<bool> {
    let n_lanes = base.n_lanes;
    let (whole, r_whole) = runs(src, base.clone().with_lane_block(LaneBlock::Lanes(0)), seq);
    let (split, r_split) = runs(
        src,
        base.clone().with_lane_block(LaneBlock::Lanes(width)),
        seq,
    );
    let (walk, _) = runs(src, base.with_replay(false), seq);
    assert_eq!(r_whole, r_split, "{name}: the same runs replay");
    for k in 0..seq.len() {
        assert_eq!(
            split[k], whole[k],
            "{name}, B = {n_lanes}, blocks of {width}: run {k} (replayed: {})",
            r_split[k]
        );
        assert_eq!(
            split[k], walk[k],
            "{name}, B = {n_lanes}: run {k} vs a walk"
        );
    }
    r_split
}

/// Per-lane values spread around `v` (lane `l` of `n`), scaled by `s`.
fn spread(v: f64, s: f64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|l| v * s * (1.0 + 0.02 * l as f64 / n as f64))
        .collect()
}

#[test]
fn kalman_blocked_replay_is_bit_identical_at_several_lane_counts() {
    kalman_blocked_replay_is_bit_identical_at_several_lane_counts_in(Precision::F64);
}

#[test]
fn kalman_blocked_replay_is_bit_identical_at_several_lane_counts_in_f32() {
    kalman_blocked_replay_is_bit_identical_at_several_lane_counts_in(Precision::F32);
}

fn kalman_blocked_replay_is_bit_identical_at_several_lane_counts_in(precision: Precision) {
    let p = oracle_programs()
        .into_iter()
        .find(|p| p.name == "kalman2d_T80")
        .expect("kalman2d_T80 in the oracle file");
    for (n_lanes, width) in [(1, 1), (7, 3), (7, 2), (256, 64), (1000, 128)] {
        let seq: Vec<Inputs> = [1.0, 1.0001, 0.9999, 1.0002]
            .iter()
            .map(|&s| {
                let inputs = p.scalars.iter().fold(Inputs::new(), |acc, (n, v)| {
                    acc.param_lanes(n, spread(*v, s, n_lanes))
                });
                p.with_matrix(inputs)
            })
            .collect();
        let r = check_blocks(
            "kalman2d_T80",
            &p.src,
            opts(Dialect::Reference, n_lanes).with_precision(precision),
            width,
            &seq,
        );
        assert_eq!(r, [false, true, true, true], "B = {n_lanes}: replays");
    }
}

#[test]
fn oracle_programs_blocked_replay_is_bit_identical() {
    let mut replays = 0;
    for p in oracle_programs().iter().filter(|p| p.error.is_none()) {
        let seq: Vec<Inputs> = [1.0, 1.001, 0.999]
            .iter()
            .map(|&s| {
                let inputs = p.scalars.iter().fold(Inputs::new(), |acc, (n, v)| {
                    acc.param_lanes(n, spread(*v, s, 9))
                });
                p.with_matrix(inputs)
            })
            .collect();
        let r = check_blocks(&p.name, &p.src, opts(Dialect::Reference, 9), 4, &seq);
        replays += r.iter().filter(|&&x| x).count();
    }
    assert!(replays >= 40, "only {replays} oracle runs replayed");
}

#[test]
fn divergent_branches_and_loops_are_bit_identical_in_blocks() {
    // Lanes take either branch of `if`, `set!` under a branch, and loops whose trip counts differ
    // per lane: blocks cut through the lane masks of every one.
    let srcs = [
        "(if (< a 0.0) (* a a) (- (* 3.0 a)))",
        "(let ((y a) (s 0.0))
           (if (< a 0.0) (set! y (* y y)) (set! y (- (* 3.0 y))))
           (do ((x (abs a) (* x 0.5))) ((< x 1.0) (+ y s)) (set! s (+ s (* x a)))))",
        "(loop ((x a) (k 0)) (if (< (abs x) 1.0) (+ (* x x) k) (recur (* x 0.5) (+ k 1))))",
        "(let ((m (mat (vec a 0.5) (vec 0.25 (+ 2.0 (abs a))))))
           (if (> a 0.0) (log (det m)) (dot (matvec (inv m) (vec a 1.0)) (vec 1.0 a))))",
        // A merged value read directly and through another merge (the merge-aware sweep).
        "(let ((w (if (< a 0.0) a (* 2.0 a))) (u (if (< a 1.0) a 0.5)))
           (det (mat (vec w a u) (vec u w a) (vec a 0.5 (* w u)))))",
        // One matrix inverted, then its det and logdet (the replay copies the inverse), on all
        // lanes and under a branch.
        "(let* ((m (mat (vec (+ 3.0 a) 0.5 0.1) (vec 0.25 (+ 2.0 (abs a)) a) (vec 0.0 0.3 4.0)))
                (w (inv m)))
           (+ (ref (matvec w (vec 1.0 a 2.0)) 1) (log (abs (det m))) (logdet m)
              (if (> a 0.0) (* a (det m)) (trace (inv (inv m))))))",
    ];
    let n_lanes = 11;
    for src in srcs {
        let seq: Vec<Inputs> = [0.0, 1e-4, 2e-4, 3e-4]
            .iter()
            .map(|&d| {
                let a = (0..n_lanes)
                    .map(|l| [-7.3, 5.1, -0.4, 0.6, 2.9][l % 5] * (1.0 + d) + 0.01 * l as f64)
                    .collect();
                Inputs::new().param_lanes("a", a)
            })
            .collect();
        for width in [1, 2, 3, 5, 8] {
            let r = check_blocks(src, src, opts(Dialect::Default, n_lanes), width, &seq);
            assert_eq!(r, [false, true, true, true], "{src}: replays");
        }
    }
}

#[test]
fn random_programs_are_bit_identical_in_blocks() {
    random_programs_are_bit_identical_in_blocks_in(Precision::F64);
}

#[test]
fn random_programs_are_bit_identical_in_blocks_in_f32() {
    random_programs_are_bit_identical_in_blocks_in(Precision::F32);
}

fn random_programs_are_bit_identical_in_blocks_in(precision: Precision) {
    let mut rng = ChaCha8Rng::seed_from_u64(20261204);
    let mut replays = 0;
    let n_lanes = 7;
    for k in 0..100 {
        let src = common::random_guarded_expr(&mut rng, 4);
        let x: Vec<f64> = (0..n_lanes).map(|l| 0.5 + 0.7 * l as f64).collect();
        let (a0, b0) = (rng.random_range(-2.0..2.0), rng.random_range(-2.0..2.0));
        let seq: Vec<Inputs> = [(0.0, 0.0), (1e-4, -1e-4), (2e-4, 1e-4), (0.3, -0.2)]
            .iter()
            .map(|&(da, db)| {
                Inputs::new()
                    .param_lanes(
                        "a",
                        (0..n_lanes).map(|l| a0 + da + 0.4 * l as f64).collect(),
                    )
                    .param_lanes(
                        "b",
                        (0..n_lanes).map(|l| b0 + db - 0.3 * l as f64).collect(),
                    )
                    .input_lanes("x", x.clone())
            })
            .collect();
        let r = check_blocks(
            &format!("random #{k}: {src}"),
            &src,
            opts(Dialect::Default, n_lanes).with_precision(precision),
            3,
            &seq,
        );
        replays += r.iter().filter(|&&x| x).count();
    }
    assert!(replays >= 150, "only {replays} of 400 random runs replayed");
}

#[test]
fn cache_budget_picks_blocks() {
    let cache = LaneBlock::Cache { bytes: 8 << 20 };
    // Kalman's arena: about 4,000 floats per lane, 32 KiB: 255 lanes per 8 MiB block, so 1024
    // lanes go in four blocks of 256, 1000 in four of 256 (the last 232), and 256 in one.
    assert_eq!(cache.width(1024, 4_097 * 1024), 256);
    assert_eq!(cache.width(1000, 4_097 * 1000), 256);
    assert_eq!(cache.width(256, 4_097 * 256), 256);
    assert_eq!(cache.width(300, 4_097 * 300), 300);
    assert_eq!(cache.width(400, 4_097 * 400), 200);
    // Blocks of at least the smallest automatic fit, never above B.
    assert_eq!(cache.width(4096, 1 << 30), LaneBlock::MIN_AUTO_LANES);
    assert_eq!(cache.width(100, 1 << 30), 100);
    assert_eq!(LaneBlock::Lanes(0).width(50, 0), 50);
    assert_eq!(LaneBlock::Lanes(64).width(50, 0), 50);
    assert_eq!(LaneBlock::Lanes(16).width(50, 0), 16);
}

#[test]
fn the_memory_gauge_counts_the_block_arenas() {
    let src = "(let ((m (mat (vec a 0.5) (vec 0.25 (+ 2.0 (abs a)))))) (logdet (matmul m m)))";
    let n_lanes = 64;
    let a: Vec<f64> = (0..n_lanes).map(|l| 1.0 + 0.01 * l as f64).collect();
    let inputs = Inputs::new().param_lanes("a", a);
    let held = |block: usize| {
        let mut heap = Heap::new();
        let program = ndvm_frontends::scheme::parse(&mut heap, src).expect("parses");
        let opts = EvalOptions::new(n_lanes).with_lane_block(LaneBlock::Lanes(block));
        let mut ev = Evaluator::new(opts);
        for _ in 0..3 {
            ev.eval_grad(&mut heap, &program, &inputs).expect("runs");
        }
        assert!(ev.last_run_replayed());
        ev.memory_in_use()
    };
    let (whole, blocked) = (held(0), held(16));
    // A 16-lane block arena beside the 64-lane one (a quarter of its lanes; the gauge also
    // counts the tape, the heap and the decoded program): more than 5 % more.
    assert!(
        blocked > whole + whole / 20,
        "blocked {blocked} B, whole {whole} B"
    );
}
