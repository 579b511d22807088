//! The structure-recovery experiment (`ndvm-bench recovery`) in its CI size, 2 tasks × 4
//! restarts, asserting recovery, and its data generator. (`tasks/recovery.yaml` through
//! `ndvm-search` is tested in search/tests/recovery.rs.)
//!
//! Oracles: known answers (the generating structure and α* of each task).

use ndvm_bench::recovery::{
    self, RecoverySettings, TASKS, dataset, equivalents, inputs, run_tasks, totals,
};

#[test]
fn two_tasks_four_restarts_recover_their_structure() {
    let settings = RecoverySettings::standard();
    let results = run_tasks(&TASKS[..2], 4, &settings, &mut |_| {}).unwrap();
    let t = totals(&results, settings.starts);
    assert_eq!(t.restarts, 8);
    assert!(
        t.equivalent >= 7,
        "{}",
        recovery::table(&results, settings.starts)
    );
    assert!(
        t.strict >= 5,
        "{}",
        recovery::table(&results, settings.starts)
    );
    for r in results.iter().flat_map(|t| &t.restarts) {
        if r.equivalent {
            assert!(r.alpha_error < 0.01, "{r:?}");
            assert!(r.loss < 1e-2, "{r:?}");
        }
        assert!(r.starts_recovered <= settings.starts);
    }
    let table = recovery::table(&results, settings.starts);
    assert!(table.contains("| 0.5·x·sin x | 0.5 |"), "{table}");
}

#[test]
fn the_data_and_the_equivalences() {
    let xs = inputs();
    assert_eq!(xs.len(), 64);
    assert!(xs[..32].iter().all(|x| (0.2..=3.0).contains(x)));
    assert!(xs[..32].iter().zip(&xs[32..]).all(|(a, b)| *a == -*b));
    let task = TASKS[0];
    let data = dataset(&task, 1000);
    let clean = recovery::clean(&task, &xs);
    let y = data.target.as_ref().unwrap();
    let rms = (clean.iter().map(|v| v * v).sum::<f64>() / 64.0).sqrt();
    let noise = (y
        .iter()
        .zip(&clean)
        .map(|(a, b)| (a - b).powi(2))
        .sum::<f64>()
        / 64.0)
        .sqrt();
    assert!(
        noise > 0.005 * rms && noise < 0.02 * rms,
        "{noise} vs {rms}"
    );
    assert_eq!(dataset(&task, 1000).target, data.target, "seeded");
    // x·2x at α = 0.5 is x·(−x) at α = −1; x·sin x has no twin.
    let eq = equivalents(&task);
    assert_eq!(eq.len(), 2);
    assert_eq!(eq[1].0, (2, 1));
    assert!((eq[1].1 + 1.0).abs() < 1e-12);
    assert_eq!(equivalents(&TASKS[1]).len(), 1);
}
