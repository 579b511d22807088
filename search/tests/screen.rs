//! Row-subsample screening end to end (`data.screen_rows`): a large generated table screens each
//! candidate on a seeded sample of 1,000 training rows, says so, records it in the events and the
//! summary, and still recovers the known constants after the refit on all rows; a small table and
//! `screen_rows: off` fit on all rows as before.

mod common;

use common::root;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// y = 2.5·exp(−0.7x) + N(0, 0.01²) on `n` grid points; candidates: the true form and a line.
fn write_task(dir: &Path, name: &str, n: usize, extra: &str) -> PathBuf {
    std::fs::write(
        dir.join("cache.jsonl"),
        "{\"src\": \"(* a (exp (* b x)))\"}\n{\"src\": \"(+ a (* b x))\"}\n",
    )
    .unwrap();
    let task = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &task,
        format!(
            "name: screen\nseed: 3\ndata:\n  generate: {{formula: \"(* 2.5 (exp (* -0.7 x)))\", from: 0, to: 5, n: {n}, noise: 0.01}}\n{extra}\
             inputs: [x]\ntarget: y\nparams:\n  - {{name: a, init: 1}}\n  - {{name: b, init: -0.1}}\n\
             proposer: {{cache: cache.jsonl}}\ncalibrator: {{starts: 8}}\n"
        ),
    )
    .unwrap();
    task
}

/// Runs `task` into `dir/out` on `threads` threads; returns its stderr, summary and events.
fn run(task: &Path, out: &Path, threads: &str) -> (String, Value, Vec<Value>) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .current_dir(root())
        .env_remove("SLURM_ARRAY_TASK_ID")
        .args([
            "run",
            task.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args(["--threads", threads])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "run failed:\n{stderr}");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let events = common::events_without(out, &["wall_ms", "finished_s"]);
    (stderr, summary, events)
}

#[test]
fn a_large_generated_table_screens_on_the_subsample_and_reports_it() {
    let dir = common::scratch("screen", "large");
    // 70 % of 7,200 rows = 5,040 training rows: more than 2,000, so screened on 1,000.
    let task = write_task(&dir, "auto", 7200, "");
    let (stderr, s, events) = run(&task, &dir.join("t1"), "1");
    assert!(
        stderr.contains(
            "screening each candidate on 1000 of 5040 training rows, the default above 2000 rows"
        ),
        "{stderr}"
    );
    assert_eq!(s["data"]["train"], 5040);
    assert_eq!(s["data"]["screen_rows"], 1000);
    // A setting chosen from the data: printed once, recorded with its key and value.
    assert_eq!(
        stderr.matches("screening each candidate").count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        s["defaults"].as_array().unwrap().len(),
        1,
        "{}",
        s["defaults"]
    );
    assert_eq!(s["defaults"][0]["key"], "data.screen_rows");
    assert_eq!(s["defaults"][0]["value"], "1000");
    assert!(
        s["defaults"][0]["note"]
            .as_str()
            .unwrap()
            .contains("the default above 2000 rows")
    );
    assert_eq!(events.len(), 2);
    for e in &events {
        assert_eq!(e["screen_rows"], 1000, "{e}");
        assert_eq!(e["status"], "ok", "{e}");
    }
    let best = &s["best"];
    assert_eq!(best["src"], "(* a (exp (* b x)))");
    let (a, b) = (
        best["params"]["a"].as_f64().unwrap(),
        best["params"]["b"].as_f64().unwrap(),
    );
    assert!(
        (a - 2.5).abs() < 0.01 && (b + 0.7).abs() < 0.005,
        "a {a}, b {b}"
    );
    assert!(best["validation_r2"].as_f64().unwrap() > 0.99, "{best}");

    // The refit on all rows ends where a fit on all rows does.
    let off = write_task(&dir, "off", 7200, "  screen_rows: off\n");
    let (stderr_off, s_off, events_off) = run(&off, &dir.join("off"), "1");
    assert!(!stderr_off.contains("screening"), "{stderr_off}");
    assert!(
        s_off["data"].get("screen_rows").is_none(),
        "{}",
        s_off["data"]
    );
    assert!(events_off.iter().all(|e| e.get("screen_rows").is_none()));
    let best_off = &s_off["best"];
    for p in ["a", "b"] {
        let (x, y) = (
            best["params"][p].as_f64().unwrap(),
            best_off["params"][p].as_f64().unwrap(),
        );
        assert!(
            (x - y).abs() < 1e-6 * y.abs(),
            "{p}: screened {x}, all rows {y}"
        );
    }
    // Each screened fit made both phases' evaluations, on fewer rows for most of them.
    assert!(events.iter().all(|e| e["n_evals"].as_u64().unwrap() > 0));

    // Thread-count independent.
    let (_, s2, events2) = run(&task, &dir.join("t2"), "2");
    assert_eq!(events, events2, "--threads 1 and --threads 2 differ");
    let core = |mut v: Value| {
        v.as_object_mut().unwrap().remove("run");
        v
    };
    assert_eq!(core(s), core(s2));
}

#[test]
fn a_small_table_is_not_screened() {
    let dir = common::scratch("screen", "small");
    // 70 % of 400 rows = 280 training rows.
    let task = write_task(&dir, "small", 400, "");
    let (stderr, s, events) = run(&task, &dir.join("out"), "1");
    assert!(!stderr.contains("screening"), "{stderr}");
    assert!(s["data"].get("screen_rows").is_none(), "{}", s["data"]);
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(|e| e.get("screen_rows").is_none()));
    // An explicit count below the table's size screens it.
    let task = write_task(&dir, "explicit", 400, "  screen_rows: 100\n");
    let (stderr, s, events) = run(&task, &dir.join("explicit"), "1");
    assert!(
        stderr.contains("screening each candidate on 100 of 280 training rows, then"),
        "{stderr}"
    );
    assert_eq!(s["data"]["screen_rows"], 100);
    // Written in the task: not a default.
    assert!(s.get("defaults").is_none(), "{s}");
    assert!(events.iter().all(|e| e["screen_rows"] == 100));
    assert!(s["best"]["validation_r2"].as_f64().unwrap() > 0.99);
}
