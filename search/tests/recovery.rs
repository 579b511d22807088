//! `tasks/recovery.yaml` (the structure-recovery experiment as a co-search task) through the
//! binary, whose events and summary carry the `soft-choice` read-out. The experiment itself
//! (`ndvm-bench recovery`) is tested in bench/tests/recovery.rs.
//!
//! Oracle: the known answer (the generating structure and α* of the task).

mod common;

use common::{root, run_ok, scratch, summary};

#[test]
fn the_recovery_task_reports_the_chosen_structure() {
    let dir = scratch("recovery", "task");
    let out = dir.join("run");
    let task = root().join("tasks/recovery.yaml");
    run_ok(&[
        "run",
        task.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    let events = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    let event: serde_json::Value = serde_json::from_str(events.lines().next().unwrap()).unwrap();
    let picks: Vec<(u64, &str)> = event["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["index"].as_u64().unwrap(), c["option"].as_str().unwrap()))
        .collect();
    assert_eq!(picks, vec![(0, "(* 2.0 x)"), (5, "(cos in)")]);
    assert!((event["params"]["alpha"].as_f64().unwrap() - 2.0).abs() < 0.01);
    let s = summary(&out);
    assert_eq!(s["best"]["choices"], event["choices"]);
    assert!(s["best"]["validation_r2"].as_f64().unwrap() > 0.999);
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        md.contains("Soft-choice 1 picks option 5 of 8: `(cos in)`."),
        "{md}"
    );
}
