//! The portfolio's racing screen (`CalibrateConfig::race`): survivors follow the full screen's
//! trajectories bit for bit, eliminated starts stop where the full screen was at the cut, the
//! result is the full screen's when the winner survives, runs are deterministic, schedules that
//! cut nothing change nothing, and bad schedules are refused by name. Also the screen's smaller
//! batch once a quarter of its starts has stopped.
//!
//! Oracle: the same calibration without racing (bit-identity), a run whose screen ends at the
//! cut (an eliminated start's state there), and each start run alone.

use ndvm_core::ParamKind;
use ndvm_core::{Heap, Program};
use ndvm_frontends::{Frontend, scheme::Scheme};
use ndvm_optimizers::{
    CalibrateConfig, Calibration, Calibrator, Dataset, Optimizer, ParamSpec, RaceCut, StartStatus,
};

/// A sine with a phase fitted to a damped cosine: several basins, so the starts rank
/// differently as the screen goes on.
const SRC: &str = "(params (a free 1.0) (b positive 1.5) (c free 0.0)) (* a (sin (+ (* b x) c)))";

fn data() -> Dataset {
    let xs: Vec<f64> = (0..30).map(|i| 0.1 + 0.2 * i as f64).collect();
    let ys = xs
        .iter()
        .map(|x| (-0.3 * x).exp() * (2.0 * x).cos())
        .collect();
    Dataset::new().column("x", xs).target(ys)
}

fn program(heap: &mut Heap) -> Program {
    Scheme.parse(heap, SRC).expect("the test program parses")
}

fn calibrate(config: CalibrateConfig) -> Calibration {
    let mut heap = Heap::new();
    let program = program(&mut heap);
    Calibrator::new(config)
        .unwrap()
        .calibrate(&mut heap, &program, &data())
        .unwrap()
}

/// 16 starts, a 60-step screen, 2 polished starts.
fn config(race: Vec<RaceCut>) -> CalibrateConfig {
    CalibrateConfig {
        n_starts: 16,
        screen_iters: 60,
        n_polish: 2,
        race,
        ..CalibrateConfig::recommended()
    }
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Everything a start reports, as bits.
fn start_bits(c: &Calibration, i: usize) -> (Vec<u64>, u64, usize, u64) {
    let s = &c.starts[i];
    (bits(&s.params), s.loss.to_bits(), s.iters, s.n_evals)
}

/// Everything a calibration reports but its wall time, as bits.
fn all_bits(c: &Calibration) -> Vec<(Vec<u64>, u64, usize, u64, bool, StartStatus)> {
    let mut v: Vec<_> = (0..c.starts.len())
        .map(|i| {
            let (p, l, it, n) = start_bits(c, i);
            (p, l, it, n, c.starts[i].polished, c.starts[i].status)
        })
        .collect();
    v.push((
        bits(&c.params),
        c.loss.to_bits(),
        c.best_start.unwrap_or(usize::MAX),
        c.n_evals,
        false,
        StartStatus::MaxIters,
    ));
    v
}

#[test]
fn survivors_follow_the_full_screen_and_the_eliminated_stop_at_their_cut() {
    let cuts = vec![RaceCut::new(10, 8), RaceCut::new(30, 4)];
    let raced = calibrate(config(cuts));
    let full = calibrate(config(Vec::new()));
    // The state of every start after 10 and after 30 steps of the full screen: a screen that ends
    // there, its polish limited to the best `n_polish` starts (which survive every cut).
    let at = |steps| {
        calibrate(CalibrateConfig {
            screen_iters: steps,
            ..config(Vec::new())
        })
    };
    let (at10, at30) = (at(10), at(30));
    let mut eliminated = [0usize; 2];
    for i in 0..16 {
        let s = &raced.starts[i];
        if s.status == StartStatus::Eliminated {
            assert!(!s.polished, "start {i}");
            let (cut, reference) = match s.n_evals {
                10 => (0, &at10),
                30 => (1, &at30),
                n => panic!("start {i} was eliminated after {n} evaluations"),
            };
            eliminated[cut] += 1;
            assert!(!reference.starts[i].polished, "start {i}");
            assert_eq!(start_bits(&raced, i), start_bits(reference, i), "start {i}");
        } else {
            // Survivors: the full screen's steps, then the same polish when both polish them.
            assert_eq!(s.polished, full.starts[i].polished, "start {i}");
            assert_eq!(start_bits(&raced, i), start_bits(&full, i), "start {i}");
        }
    }
    assert_eq!(eliminated, [8, 4]);
    // Evaluations are counted truthfully: 16×10 + 8×20 + 4×30 screen evaluations, the survivors'
    // polish, one prediction.
    let polish: u64 = raced
        .starts
        .iter()
        .filter(|s| s.polished)
        .map(|s| s.n_evals - 60)
        .sum();
    assert_eq!(raced.n_evals, 160 + 160 + 120 + polish + 1);
    assert_eq!(
        raced.n_evals,
        raced.starts.iter().map(|s| s.n_evals).sum::<u64>() + 1
    );
}

#[test]
fn the_result_is_the_full_screens_when_the_winner_survives() {
    let cuts = vec![RaceCut::new(20, 8), RaceCut::new(40, 4)];
    let raced = calibrate(config(cuts));
    let full = calibrate(config(Vec::new()));
    let best = full.best_start.unwrap();
    assert_ne!(raced.starts[best].status, StartStatus::Eliminated);
    assert_eq!(raced.best_start, Some(best));
    assert_eq!(bits(&raced.params), bits(&full.params));
    assert_eq!(raced.loss.to_bits(), full.loss.to_bits());
    assert_eq!(bits(&raced.grad), bits(&full.grad));
    assert_eq!(raced.r2.map(f64::to_bits), full.r2.map(f64::to_bits));
    assert_eq!(raced.stop_reason, full.stop_reason);
    assert!(full.r2.unwrap() > 0.5, "{:?}", full.r2);
    // The race did less: 16×20 + 8×20 + 4×20 screen evaluations instead of 16×60.
    let screen = |c: &Calibration| -> u64 {
        c.starts
            .iter()
            .map(|s| s.n_evals.min(if s.polished { 60 } else { u64::MAX }))
            .sum()
    };
    assert_eq!(screen(&full), 960);
    assert_eq!(screen(&raced), 320 + 160 + 80);
}

#[test]
fn racing_is_deterministic_and_leaves_a_reused_calibrator_clean() {
    let cuts = vec![RaceCut::new(5, 6), RaceCut::new(15, 3)];
    let a = calibrate(config(cuts.clone()));
    let b = calibrate(config(cuts.clone()));
    assert_eq!(all_bits(&a), all_bits(&b));
    let full = calibrate(config(Vec::new()));
    // One calibrator, its evaluator pool shared: full, raced, full, raced.
    let mut heap = Heap::new();
    let program = program(&mut heap);
    let mut cal = Calibrator::new(config(Vec::new())).unwrap();
    for (race, want) in [(&[][..], &full), (&cuts[..], &a)].repeat(2) {
        cal.reconfigure(config(race.to_vec())).unwrap();
        let got = cal.calibrate(&mut heap, &program, &data()).unwrap();
        assert_eq!(all_bits(&got), all_bits(want));
    }
    // The polish keeps n_polish = 2 starts whatever a cut keeps: a cut to 1 keeps 2.
    let clamped = calibrate(config(vec![RaceCut::new(10, 1)]));
    let kept = clamped
        .starts
        .iter()
        .filter(|s| s.status != StartStatus::Eliminated)
        .count();
    assert_eq!(kept, 2);
    assert!(clamped.starts.iter().filter(|s| s.polished).count() == 2);
}

#[test]
fn schedules_that_cut_nothing_change_nothing() {
    let full = calibrate(config(Vec::new()));
    // A cut at or after the screen's end, and a cut keeping every start.
    for cuts in [
        vec![RaceCut::new(60, 4)],
        vec![RaceCut::new(200, 4)],
        vec![RaceCut::new(10, 16), RaceCut::new(70, 2)],
    ] {
        let raced = calibrate(config(cuts.clone()));
        assert_eq!(all_bits(&raced), all_bits(&full), "{cuts:?}");
    }
    // Adam alone does not race.
    let adam = |race| CalibrateConfig {
        optimizer: Optimizer::Adam,
        max_iters: 40,
        ..config(race)
    };
    assert_eq!(
        all_bits(&calibrate(adam(vec![RaceCut::new(5, 2)]))),
        all_bits(&calibrate(adam(Vec::new())))
    );
}

#[test]
fn bad_schedules_are_refused_by_name() {
    let err = |cuts: Vec<RaceCut>| Calibrator::new(config(cuts)).unwrap_err().to_string();
    assert_eq!(
        err(vec![RaceCut::new(0, 4)]),
        "invalid calibration setting `race`: cut 1 is at step 0; a cut follows at least one step"
    );
    assert_eq!(
        err(vec![RaceCut::new(10, 8), RaceCut::new(20, 0)]),
        "invalid calibration setting `race`: cut 2 keeps no start; it must keep at least 1"
    );
    assert_eq!(
        err(vec![RaceCut::new(10, 8), RaceCut::new(5, 4)]),
        "invalid calibration setting `race`: cut 2 (step 5) must come after cut 1 (step 10)"
    );
    assert_eq!(
        err(vec![RaceCut::new(10, 8), RaceCut::new(20, 8)]),
        "invalid calibration setting `race`: cut 2 keeps 8 starts; it must keep fewer than cut 1 (8)"
    );
    // A bad schedule leaves a calibrator's settings as they were.
    let mut cal = Calibrator::new(config(vec![RaceCut::new(10, 4)])).unwrap();
    assert!(cal.reconfigure(config(vec![RaceCut::new(0, 4)])).is_err());
    assert_eq!(cal.config().race, vec![RaceCut::new(10, 4)]);
}

#[test]
fn starts_left_in_a_smaller_batch_follow_their_trajectory_alone() {
    // Starts with a < 0 take the log of a negative number at their first step and stop there
    // (non-finite), more than a quarter of the 64: the screen moves the others to a smaller batch.
    // Oracle: each start alone (one start from its initial point), bit for bit.
    let xs: Vec<f64> = (1..10).map(f64::from).collect();
    let ys = xs.iter().map(|x| 2f64.ln() * x).collect();
    let data = Dataset::new().column("x", xs).target(ys);
    let src = "(params (a free 0.0)) (* (log a) x)";
    let run = |config: CalibrateConfig| {
        let mut heap = Heap::new();
        let program = Scheme.parse(&mut heap, src).unwrap();
        Calibrator::new(config)
            .unwrap()
            .calibrate(&mut heap, &program, &data)
            .unwrap()
    };
    for optimizer in [Optimizer::Adam, Optimizer::Portfolio] {
        let config = CalibrateConfig {
            optimizer,
            n_starts: 64,
            max_iters: 60,
            n_polish: 64,
            ..CalibrateConfig::recommended()
        };
        let batch = run(config.clone());
        let dropped = batch
            .starts
            .iter()
            .filter(|s| s.status == StartStatus::NonFinite && s.n_evals == 1)
            .count();
        assert!(dropped > 16, "{dropped}");
        for (k, start) in batch.starts.iter().enumerate() {
            let alone = run(CalibrateConfig {
                n_starts: 1,
                params: vec![ParamSpec::new("a", ParamKind::Free, start.init[0])],
                ..config.clone()
            });
            let one = &alone.starts[0];
            assert_eq!(
                (
                    bits(&one.params),
                    one.loss.to_bits(),
                    one.iters,
                    one.n_evals
                ),
                (
                    bits(&start.params),
                    start.loss.to_bits(),
                    start.iters,
                    start.n_evals
                ),
                "{optimizer:?}, start {k}"
            );
            assert_eq!(one.status, start.status, "{optimizer:?}, start {k}");
        }
    }
}
