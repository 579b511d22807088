//! Smoke test of `ndvm-bench --quick`: the binary runs every suite into a scratch folder and
//! writes JSON with the expected keys and positive numbers. No speed is asserted.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// A scratch folder under the system temp dir, removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn positive(v: &Value, what: &str) -> f64 {
    let x = v
        .as_f64()
        .unwrap_or_else(|| panic!("{what} is not a number: {v}"));
    assert!(x > 0.0 && x.is_finite(), "{what} = {x}");
    x
}

fn check_timing(t: &Value, what: &str) {
    positive(&t["median_us"], &format!("{what}.median_us"));
    positive(&t["reps_per_sample"], &format!("{what}.reps_per_sample"));
    let samples = t["samples_us"].as_array().expect("samples_us");
    assert!(!samples.is_empty(), "{what} has no samples");
    for s in samples {
        positive(s, &format!("{what} sample"));
    }
}

fn check_machine(m: &Value) {
    positive(&m["nproc"], "machine.nproc");
    for key in [
        "cpu_model",
        "os",
        "profile",
        "rustc",
        "git_commit",
        "date_utc",
    ] {
        assert!(m.get(key).is_some(), "machine has no `{key}`: {m}");
    }
}

#[test]
fn quick_bench_writes_both_reports() {
    let dir = Scratch(std::env::temp_dir().join(format!(
        "ndvm-bench-smoke-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )));
    let out = Command::new(env!("CARGO_BIN_EXE_ndvm-bench"))
        .args(["all", "--quick", "--out"])
        .arg(&dir.0)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bench failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("ratio") && stdout.contains("efficiency"),
        "{stdout}"
    );

    let kalman = read_json(&dir.0.join("kalman.json"));
    assert_eq!(kalman["suite"], "kalman");
    assert_eq!(kalman["quick"], true);
    check_machine(&kalman["machine"]);
    let rows = kalman["rows"].as_array().expect("rows");
    let lanes: Vec<u64> = rows
        .iter()
        .map(|r| r["n_lanes"].as_u64().unwrap())
        .collect();
    assert_eq!(lanes, [1, 8, 64, 256, 1024]);
    for row in rows {
        for key in [
            "interp_grad_us",
            "interp_grad_walk_us",
            "ceiling_grad_us",
            "ratio_grad",
            "ratio_grad_walk",
            "interp_fwd_us",
            "ceiling_fwd_us",
            "ratio_fwd",
            "lanes_grad_us",
            "lanes_fwd_us",
            "lanes_f32_grad_us",
            "lanes_f32_fwd_us",
            "ratio_grad_lanes",
            "ratio_grad_walk_lanes",
            "ratio_fwd_lanes",
            "lanes_f32_over_f64_grad",
        ] {
            positive(&row[key], key);
        }
        assert!(row["max_rel_diff"].as_f64().unwrap() <= 1e-9);
        assert!(row["max_rel_diff_lanes"].as_f64().unwrap() <= 1e-9);
        assert!(row["max_rel_diff_lanes_f32"].as_f64().unwrap() <= 1e-4);
        for key in [
            "interp_grad",
            "interp_grad_walk",
            "ceiling_grad",
            "interp_fwd",
            "ceiling_fwd",
            "lanes_grad",
            "lanes_fwd",
            "lanes_f32_grad",
            "lanes_f32_fwd",
        ] {
            check_timing(&row[key], key);
        }
    }
    assert!(
        kalman["ceiling_lanes"]
            .as_str()
            .is_some_and(|s| s.contains("lanes per block")),
        "{kalman}"
    );

    let first = read_json(&dir.0.join("firsteval.json"));
    assert_eq!(first["suite"], "firsteval");
    check_machine(&first["machine"]);
    let report = &first["report"];
    assert_eq!(
        report["n_programs"], 200,
        "every corpus program reads and runs"
    );
    for key in [
        "first_eval_us",
        "parse_us",
        "replay_us",
        "first_over_replay",
    ] {
        positive(&report[key], key);
    }
    assert_eq!(report["per_program_us"].as_array().map(Vec::len), Some(200));

    let multicore = read_json(&dir.0.join("multicore.json"));
    assert_eq!(multicore["suite"], "multicore");
    check_machine(&multicore["machine"]);
    let scaling = &multicore["scaling"];
    assert_eq!(scaling["identical_results"], true);
    let rows = scaling["rows"].as_array().expect("rows");
    assert_eq!(
        rows.len() as u64,
        multicore["machine"]["nproc"].as_u64().unwrap(),
        "one row per thread count"
    );
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["n_threads"].as_u64().unwrap(), i as u64 + 1);
        for key in ["candidates_per_s", "speedup", "efficiency"] {
            positive(&row[key], key);
        }
        check_timing(&row["pass"], "pass");
    }

    let calibration = read_json(&dir.0.join("calibration.json"));
    assert_eq!(calibration["suite"], "calibration");
    check_machine(&calibration["machine"]);
    let rows = calibration["rows"].as_array().expect("rows");
    let settings: Vec<(String, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["stream"].as_str().unwrap().to_string(),
                r["n_starts"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = ["symreg", "recurrence"]
        .iter()
        .flat_map(|s| [(s.to_string(), 1), (s.to_string(), 8)])
        .collect();
    assert_eq!(settings, want);
    for row in rows {
        positive(&row["calibrations_per_s"], "calibrations_per_s");
        assert!(row["n_candidates"].as_u64().unwrap() >= 5, "{row}");
        // The fits are real (the quick run's first 12 symreg candidates fit less well).
        let floor = if row["stream"] == "recurrence" {
            0.99
        } else {
            0.3
        };
        assert!(row["best_r2"].as_f64().unwrap() > floor, "{row}");
    }
}

/// Issue 11: without `--out`, `bench` wrote into the committed `results/bench/`; it now writes a
/// fresh, git-ignored `results/bench-<timestamp>/` under the working directory.
#[test]
fn issue_11_default_out_is_a_fresh_ignored_folder() {
    let dir = Scratch(
        std::env::temp_dir().join(format!("ndvm-bench-default-out-{}", std::process::id())),
    );
    std::fs::create_dir_all(&dir.0).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ndvm-bench"))
        .args(["kalman", "--quick"])
        .current_dir(&dir.0)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bench failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: Vec<String> = std::fs::read_dir(dir.0.join("results"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(written.len(), 1, "{written:?}");
    let name = &written[0];
    assert!(
        name.starts_with("bench-") && name.len() == "bench-20260101-120000".len(),
        "{name}"
    );
    let report = Path::new("results").join(name).join("kalman.json");
    assert!(dir.0.join(&report).is_file());
    assert!(
        stdout.contains(&format!("wrote {}", report.display())),
        "{stdout}"
    );
    // Git ignores everything under results/ but README.md, BENCHMARKS.md, bench/, history/ and
    // selection/.
    let gitignore =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.gitignore"))
            .unwrap();
    assert!(gitignore.lines().any(|l| l == "/results/*"), "{gitignore}");
}

#[test]
fn unknown_suite_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_ndvm-bench"))
        .args(["fast", "--quick"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("kalman, multicore, calibration, cosearch, firsteval, all"),
        "{stderr}"
    );
}

#[test]
fn missing_seed_data_names_the_data_flag() {
    let dir =
        Scratch(std::env::temp_dir().join(format!("ndvm-bench-no-data-{}", std::process::id())));
    let data = dir.0.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let out_dir = dir.0.join("out");
    let run = |expected: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_ndvm-bench"))
            .args(["kalman", "--quick", "--data"])
            .arg(&data)
            .arg("--out")
            .arg(&out_dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("--data {}", data.display()))
                && stderr.contains(&format!("no {expected} in this folder; pass --data DIR")),
            "{stderr}"
        );
        // Nothing was measured or written.
        assert!(!out_dir.exists());
    };
    run("oracle_refs.json");
    // A folder with only the oracle file still lacks the candidate stream.
    std::fs::write(data.join("oracle_refs.json"), "{}").unwrap();
    run("cosearch_candidates_valid.jsonl");
}
