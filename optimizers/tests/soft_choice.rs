//! Calibrating programs with `soft-choice`: the structure read-out of the best start and of every
//! start, annealing and Gumbel noise passed per calibration (two calibrators with different
//! settings in one process do not interfere), and the settings' validation.
//!
//! Oracles: known answers (the structure that generated the data, its coefficient).

use ndvm_frontends::{Frontend, scheme::Scheme};
use ndvm_optimizers::{
    CalibrateConfig, CalibrateError, Calibration, Calibrator, ChoiceMode, Dataset, Heap, Optimizer,
    ParamKind, ParamSpec, SoftChoiceConfig,
};

const PROG: &str = "(* a (soft-choice ((sin x) (cos x) (exp x) (* x x)) (vector w0 w1 w2 w3)))";

fn data() -> Dataset {
    let xs: Vec<f64> = (0..24).map(|i| -2.0 + i as f64 * 0.17).collect();
    let ys = xs.iter().map(|x| 1.5 * x.cos()).collect();
    Dataset::new().column("x", xs).target(ys)
}

fn config(soft_choice: SoftChoiceConfig) -> CalibrateConfig {
    let mut params = vec![ParamSpec::new("a", ParamKind::Free, 1.0)];
    for w in ["w0", "w1", "w2", "w3"] {
        params.push(ParamSpec::new(w, ParamKind::Free, 0.0));
    }
    CalibrateConfig {
        optimizer: Optimizer::Portfolio,
        n_starts: 16,
        screen_iters: 150,
        max_iters: 50,
        seed: 3,
        params,
        soft_choice,
        ..CalibrateConfig::recommended()
    }
}

fn calibrate(config: CalibrateConfig) -> Result<Calibration, CalibrateError> {
    let mut heap = Heap::new();
    let program = Scheme.parse(&mut heap, PROG).unwrap();
    Calibrator::new(config)?.calibrate(&mut heap, &program, &data())
}

fn straight_through(gumbel: bool) -> SoftChoiceConfig {
    SoftChoiceConfig {
        mode: ChoiceMode::StraightThrough,
        temperature: 1.0,
        final_temperature: 0.1,
        gumbel,
    }
}

#[test]
fn the_read_out_names_the_generating_structure() {
    for sc in [straight_through(false), straight_through(true)] {
        let fit = calibrate(config(sc)).unwrap();
        assert_eq!(fit.choices.len(), 1, "{sc:?}");
        let c = &fit.choices[0];
        assert_eq!((c.site, c.index, c.n_options), (0, 1, 4), "{sc:?}");
        assert_eq!(c.option, "(cos x)");
        assert_eq!(c.weights.len(), 4);
        let top = (0..4).max_by(|&i, &j| c.weights[i].total_cmp(&c.weights[j]));
        assert_eq!(top, Some(1));
        assert!(
            (fit.param("a").unwrap() - 1.5).abs() < 1e-9,
            "{:?}",
            fit.params
        );
        // Every start reports its own pick, the best start's among them.
        assert!(
            fit.starts
                .iter()
                .all(|s| s.picks.len() == 1 && s.picks[0] < 4)
        );
        assert_eq!(fit.starts[fit.best_start.unwrap()].picks, vec![1]);
        // Deterministic: the same calibration again gives the same bytes.
        let again = calibrate(config(sc)).unwrap();
        assert_eq!(again.params, fit.params);
        assert_eq!(again.starts, fit.starts);
    }
}

#[test]
fn settings_belong_to_the_calibration() {
    // A calibrator reconfigured from soft to straight-through gives what a fresh one gives.
    let mut heap = Heap::new();
    let program = Scheme.parse(&mut heap, PROG).unwrap();
    let mut cal = Calibrator::new(config(SoftChoiceConfig::default())).unwrap();
    let soft = cal.calibrate(&mut heap, &program, &data()).unwrap();
    cal.reconfigure(config(straight_through(false))).unwrap();
    let reused = cal.calibrate(&mut heap, &program, &data()).unwrap();
    let fresh = calibrate(config(straight_through(false))).unwrap();
    assert_eq!(reused.params, fresh.params);
    assert_eq!(reused.starts, fresh.starts);
    assert_ne!(soft.params, fresh.params);
    // A program without soft-choice has no read-out.
    let plain = Scheme.parse(&mut heap, "(* a (cos x))").unwrap();
    let mut cfg = config(straight_through(false));
    cfg.params.truncate(1);
    let fit = Calibrator::new(cfg)
        .unwrap()
        .calibrate(&mut heap, &plain, &data())
        .unwrap();
    assert!(fit.choices.is_empty() && fit.starts.iter().all(|s| s.picks.is_empty()));
}

#[test]
fn bad_temperatures_are_refused() {
    for (t0, t1) in [
        (0.0, 1.0),
        (1.0, -0.1),
        (f64::NAN, 1.0),
        (1.0, f64::INFINITY),
    ] {
        let sc = SoftChoiceConfig {
            temperature: t0,
            final_temperature: t1,
            ..straight_through(false)
        };
        match calibrate(config(sc)) {
            Err(CalibrateError::InvalidConfig { field, .. }) => assert_eq!(field, "soft_choice"),
            other => panic!("{t0} {t1}: {other:?}"),
        }
    }
}
