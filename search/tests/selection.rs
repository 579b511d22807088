//! Model selection end to end (`selection:`): a noisy law and a richer program that contains it,
//! both calibrated and both on the front, and the rule answers with the law while the
//! lowest-error model is still reported as such; with no noise and a richer model that is
//! genuinely better, the rule answers with the richer one; `selection: lowest-error` keeps the
//! old answer; constants that make `exp` a step over the data are found as switches.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ndvm_core::Heap;
use serde_json::Value;

const LAW: &str = "(* a (exp (* b x)))";
const RICHER: &str = "(+ (* a (exp (* b x))) (* c (sin (* d x))))";

/// A task over `formula` on 60 grid points in [0, 5] with Gaussian noise `noise`, replaying
/// the law and the richer program.
fn write_task(dir: &Path, formula: &str, noise: f64, extra: &str) -> PathBuf {
    std::fs::write(
        dir.join("cache.jsonl"),
        format!("{{\"src\": \"{LAW}\"}}\n{{\"src\": \"{RICHER}\"}}\n"),
    )
    .unwrap();
    let task = dir.join("law.yaml");
    std::fs::write(
        &task,
        format!(
            "name: law\nseed: 2\ndata:\n  generate: {{formula: \"{formula}\", from: 0, to: 5, n: 60, noise: {noise}}}\n\
             inputs: [x]\ntarget: y\nparams:\n  - {{name: a, init: 1}}\n  - {{name: b, init: -0.1}}\n\
             \x20 - {{name: c, init: 0.1}}\n  - {{name: d, init: 1}}\n\
             proposer: {{cache: cache.jsonl}}\ncalibrator: {{starts: 8}}\n{extra}"
        ),
    )
    .unwrap();
    task
}

/// Runs `task` into `dir/out`; returns its stderr, summary and `summary.md`.
fn run(task: &Path, out: &Path) -> (String, Value, String) {
    let (t, o) = (task.to_str().unwrap(), out.to_str().unwrap());
    let done = common::run_ok(&["run", t, "--out", o, "--threads", "2"]);
    let stderr = String::from_utf8_lossy(&done.stderr).to_string();
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    (stderr, common::summary(out), md)
}

fn id_of(summary: &Value, src: &str) -> u64 {
    summary["leaderboard"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["src"] == src)
        .unwrap_or_else(|| panic!("{src} is not on the leaderboard: {summary}"))["id"]
        .as_u64()
        .unwrap()
}

#[test]
fn the_rule_answers_with_the_law_when_the_richer_model_only_fits_noise() {
    let dir = common::scratch("selection", "noisy");
    let task = write_task(
        &dir,
        "(* 2.5 (exp (* -0.7 x)))",
        0.05,
        "selection: simplest-equivalent\n",
    );
    let (stderr, s, md) = run(&task, &dir.join("run"));
    assert!(
        stderr.contains("selection: simplest-equivalent"),
        "{stderr}"
    );
    let (law, richer) = (id_of(&s, LAW), id_of(&s, RICHER));
    // Both on the front, the richer with the lower validation error.
    let front: Vec<(u64, f64)> = s["pareto"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_u64().unwrap(), p["error"].as_f64().unwrap()))
        .collect();
    assert_eq!(front.len(), 2, "{front:?}");
    assert_eq!((front[0].0, front[1].0), (law, richer));
    assert!(front[1].1 < front[0].1, "{front:?}");
    // The old answer stays reported as the lowest-error model; the rule answers with the law.
    assert_eq!(s["lowest_error"]["src"], RICHER);
    assert_eq!(s["leaderboard"][0]["src"], RICHER);
    assert_eq!(s["best"]["src"], LAW);
    let sel = &s["selection"];
    assert_eq!(sel["rule"], "simplest-equivalent");
    assert_eq!(sel["chosen"], law);
    assert_eq!(sel["lowest_error"], richer);
    let finalists = sel["finalists"].as_array().unwrap();
    assert_eq!(finalists.len(), 2);
    let f_law = &finalists[0];
    assert_eq!(f_law["id"], law);
    assert_eq!(f_law["chosen"], true);
    assert_eq!(f_law["equivalent"], true);
    let score = f_law["score"].as_f64().unwrap();
    assert!(score > 0.0 && score <= 1.0, "{f_law}");
    // The law's refitted constants are the truth's within 5 % (noise 0.05 on 42 training rows).
    let (a, b) = (
        s["best"]["params"]["a"].as_f64().unwrap(),
        s["best"]["params"]["b"].as_f64().unwrap(),
    );
    assert!(
        (a - 2.5).abs() < 0.125 && (b + 0.7).abs() < 0.035,
        "a {a}, b {b}"
    );
    // The summary's front marks both, and one line says why.
    let marks: Vec<&str> = s["pareto"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["selected"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(marks, ["chosen", "lowest-error"]);
    assert_eq!(s["pareto"][1]["n_params"], 4);
    let reason = sel["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("candidate {law} (complexity 9"))
            && reason.contains("cannot tell apart from the lowest-error candidate"),
        "{reason}"
    );
    assert!(
        md.contains("## Model selection (simplest-equivalent)"),
        "{md}"
    );
    assert!(md.contains(reason), "{md}");
    assert!(
        md.contains("| chosen |") && md.contains("| lowest-error |"),
        "{md}"
    );
    // The Pareto plot draws both marks (their legend entries).
    let svg = std::fs::read_to_string(dir.join("run/plot-pareto.svg")).unwrap();
    assert!(svg.contains("chosen") && svg.contains("lowest error"));

    // `selection: lowest-error` keeps the old answer, with no refit.
    let dir2 = common::scratch("selection", "lowest");
    let task = write_task(
        &dir2,
        "(* 2.5 (exp (* -0.7 x)))",
        0.05,
        "selection: lowest-error\n",
    );
    let (stderr, s2, _) = run(&task, &dir2.join("run"));
    assert!(stderr.contains("selection: lowest-error"), "{stderr}");
    assert_eq!(s2["best"], s2["leaderboard"][0]);
    assert_eq!(s2["best"]["src"], RICHER);
    assert_eq!(s2["selection"]["finalists"], Value::Array(Vec::new()));
    assert_eq!(s2["leaderboard"], s["leaderboard"]);
}

#[test]
fn without_noise_a_genuinely_better_richer_model_wins() {
    let dir = common::scratch("selection", "exact");
    let task = write_task(
        &dir,
        "(+ (* 2.5 (exp (* -0.7 x))) (* 0.2 (sin (* 3 x))))",
        0.0,
        "",
    );
    let (_, s, _) = run(&task, &dir.join("run"));
    assert_eq!(s["best"]["src"], RICHER);
    assert_eq!(s["lowest_error"]["src"], RICHER);
    let finalists = s["selection"]["finalists"].as_array().unwrap();
    let law = finalists.iter().find(|f| f["id"] == id_of(&s, LAW));
    // The law is either not a finalist (far worse) or not equivalent.
    if let Some(f) = law {
        assert_eq!(f["equivalent"], false, "{f}");
        assert!(f["score"].as_f64().unwrap() > 1.0, "{f}");
    }
    assert!(
        s["best"]["validation_nmse"].as_f64().unwrap() < 1e-12,
        "{}",
        s["best"]
    );
}

#[test]
fn a_steep_exp_is_a_switch_and_a_gentle_one_is_not() {
    let dir = common::scratch("selection", "switch");
    let task = write_task(&dir, "(* 2.5 (exp (* -0.7 x)))", 0.0, "");
    let task = ndvm_search::task::load(&task).unwrap();
    let src = "(+ (* a (exp (* b x))) (/ c (+ 1 (exp (* d (- x 2.5))))))";
    let switches = |d: f64| {
        let mut heap = Heap::new();
        let program = task
            .frontend_named("scheme")
            .unwrap()
            .parse(&mut heap, src)
            .unwrap();
        let params: BTreeMap<String, f64> = [("a", 2.5), ("b", -0.7), ("c", 0.3), ("d", d)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        ndvm_search::select::switches(&task, &mut heap, &program, &params)
    };
    // d = 1.4e5 over x in [0, 5]: the argument spans about 7e5.
    let steep = switches(1.4e5);
    assert_eq!(steep.len(), 1, "{steep:?}");
    assert_eq!(steep[0].function, "exp");
    assert_eq!(steep[0].params, ["d"]);
    assert!(
        (steep[0].spread - 1.4e5 * 5.0).abs() < 1.4e5 * 0.2,
        "{steep:?}"
    );
    // b·x spans 3.5 and d = 2 spans 10: neither is a step.
    assert!(switches(2.0).is_empty());
    // Exactly at the threshold's scale: d = 11 spans about 55 > 50.
    let edge = switches(11.0);
    assert_eq!(edge.len(), 1, "{edge:?}");
}

#[test]
fn the_default_cross_validation_answers_with_the_law_at_any_thread_count() {
    let dir = common::scratch("selection", "cross-validated");
    // The default rule: no `selection:` key.
    let task = write_task(&dir, "(* 2.5 (exp (* -0.7 x)))", 0.05, "");
    let (stderr, s, md) = run(&task, &dir.join("run"));
    assert!(
        stderr.contains("selection: cross-validated (the simplest"),
        "{stderr}"
    );
    let (law, richer) = (id_of(&s, LAW), id_of(&s, RICHER));
    assert_eq!(s["lowest_error"]["src"], RICHER);
    assert_eq!(s["best"]["src"], LAW);
    let sel = &s["selection"];
    assert_eq!(sel["rule"], "cross-validated");
    assert_eq!(
        (sel["chosen"].as_u64(), sel["lowest_error"].as_u64()),
        (Some(law), Some(richer))
    );
    let finalists = sel["finalists"].as_array().unwrap();
    assert_eq!(finalists.len(), 2);
    for f in finalists {
        let cv = f["cross_validated_nmse"].as_f64().unwrap();
        // Noise 0.05 on a target of about 1: an NMSE near the noise's share of the variance.
        assert!(cv > 1e-4 && cv < 0.05, "{f}");
    }
    let reason = sel["reason"].as_str().unwrap();
    assert!(
        reason.contains("cross-validated") && reason.contains(&format!("candidate {law}")),
        "{reason}"
    );
    assert!(md.contains("## Model selection (cross-validated)"), "{md}");
    // The folds and every refit flow from the seed: one thread gives the same choice.
    let one = dir.join("one");
    let (t, o) = (task.to_str().unwrap(), one.to_str().unwrap());
    common::run_ok(&["run", t, "--out", o, "--threads", "1"]);
    assert_eq!(common::summary(&one)["selection"], s["selection"]);
    // Folds: every pooled row in exactly one, sizes within one of each other, fixed by the seed.
    let loaded = ndvm_search::task::load(&task).unwrap();
    let (pooled, fold) = ndvm_search::select::folds(&loaded);
    assert_eq!(pooled.n_rows(), 60);
    assert_eq!(fold.len(), 60);
    let mut sizes = [0; ndvm_search::select::CV_FOLDS];
    for &k in &fold {
        sizes[k] += 1;
    }
    assert_eq!(sizes, [12; 5]);
    assert_eq!(ndvm_search::select::folds(&loaded).1, fold);
    assert_ne!(fold, (0..60).map(|r| r % 5).collect::<Vec<_>>());
}
