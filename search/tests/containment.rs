//! Containment end to end: hostile candidates replayed between two good ones end in their own
//! classified errors while the run finishes within its memory and time limits, and a process that
//! dies mid-candidate (a test-only abort hook) is resumed with that candidate marked `crashed`.

mod common;

use common::root;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;

/// A fresh scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    common::scratch("containment", name)
}

#[derive(Deserialize)]
struct Case {
    src: String,
    classes: Vec<String>,
    why: String,
    eval_ok: bool,
}

fn cases() -> Vec<Case> {
    std::fs::read_to_string(root().join("search/tests/data/hostile-candidates/cases.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The stable error code of an evaluator error class (`None` for calibrator classes).
fn code_of(class: &str) -> Option<&'static str> {
    match class {
        "type" => Some("E003"),
        "syntax" => Some("E005"),
        "not-procedure" => Some("E006"),
        "work" => Some("E007"),
        "depth" => Some("E008"),
        "memory" => Some("E013"),
        "deadline" => Some("E014"),
        _ => None,
    }
}

/// Checks one `eval` outcome (`error` is the error text, if any) against its case.
fn check_eval_outcome(case: &Case, error: Option<&str>, how: &str) {
    match error {
        None => assert!(
            case.eval_ok,
            "{how}: {}: gave a value, expected an error",
            case.why
        ),
        Some(text) => {
            let codes: Vec<&str> = case.classes.iter().filter_map(|c| code_of(c)).collect();
            if !case.eval_ok && !codes.is_empty() {
                assert!(
                    codes.iter().any(|c| text.contains(c)),
                    "{how}: {}: expected one of {codes:?} in {text}",
                    case.why
                );
            }
            assert!(text.contains("error"), "{how}: {}: {text}", case.why);
        }
    }
}

#[test]
fn hostile_programs_end_in_classified_errors_under_eval() {
    let dir = scratch("eval");
    for (i, case) in cases().iter().enumerate() {
        let file = dir.join(format!("case{i}.scm"));
        std::fs::write(&file, &case.src).unwrap();
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
            .arg("eval")
            .arg(&file)
            .args(["--bind", "a=0.5", "--input", "x=1", "--grad", "--timeout"])
            .arg(SECONDS.to_string())
            .output()
            .unwrap();
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs_f64(SECONDS + 1.0),
            "eval: {}: took {took:?}",
            case.why
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "eval: {}: exit {:?} (a crash?)\n{stderr}",
            case.why,
            out.status
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
        let error = (out.status.code() == Some(1)).then_some(stderr.as_ref());
        check_eval_outcome(case, error, "eval");
    }
}

#[test]
fn hostile_lines_do_not_stop_an_eval_batch() {
    let dir = scratch("jsonl");
    let cases = cases();
    let mut input = String::new();
    let good = serde_json::json!({"src": "(* a x)", "params": {"a": 0.5}, "inputs": {"x": 2}});
    input.push_str(&format!("{good}\n"));
    for case in &cases {
        let line = serde_json::json!({"src": case.src, "params": {"a": 0.5}, "inputs": {"x": 1}});
        input.push_str(&format!("{line}\n"));
    }
    input.push_str(&format!("{good}\n"));
    let path = dir.join("batch.jsonl");
    std::fs::write(&path, input).unwrap();
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .args(["eval", "--jsonl"])
        .arg(&path)
        .args(["--timeout"])
        .arg(SECONDS.to_string())
        .output()
        .unwrap();
    let took = started.elapsed();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), cases.len() + 2, "one result line per request");
    for l in [&lines[0], &lines[cases.len() + 1]] {
        assert_eq!(l["value"], 1.0, "{l}");
        assert_eq!(l["grads"]["a"], 2.0, "{l}");
    }
    for (case, l) in cases.iter().zip(&lines[1..]) {
        check_eval_outcome(case, l["error"].as_str(), "eval --jsonl");
    }
    let bound = Duration::from_secs_f64((SECONDS + 1.0) * cases.len() as f64);
    assert!(took < bound, "the batch took {took:?}");
}

const GOOD: [&str; 2] = ["(* a (exp (* b x)))", "(+ a (* b x))"];

/// Seconds one calibration may take (`limits.seconds`).
const SECONDS: f64 = 3.0;

/// The documented total at `--threads 2`: 1 GiB per calibration thread plus 256 MiB.
const MAX_RSS_KB: u64 = 2 * 1024 * 1024 + 256 * 1024;

fn task(dir: &Path, cache: &Path, extra: &str) -> PathBuf {
    let path = dir.join("task.yaml");
    let text = format!(
        "name: hostile\nseed: 3\ndata:\n  generate: {{formula: \"(* 2 (exp (* -0.5 x)))\", input: x, from: 0.1, to: 4, n: 64}}\n\
         inputs: [x]\ntarget: y\nsplit: {{train: 44, validation: 10}}\nparams: [{{name: a}}, {{name: b}}]\n\
         proposer: {{kind: replay, cache: {}, batch: 4}}\nlimits: {{seconds: {SECONDS}}}\n{extra}",
        cache.display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn write_cache(path: &Path, srcs: &[String]) {
    let lines: Vec<String> = srcs
        .iter()
        .map(|s| serde_json::json!({ "src": s }).to_string() + "\n")
        .collect();
    std::fs::write(path, lines.concat()).unwrap();
}

/// The peak resident set (VmHWM, KiB) of a running process, polled until it exits.
fn run_measuring_rss(mut cmd: Command) -> (std::process::ExitStatus, u64, String) {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    let status = loop {
        if let Ok(text) = std::fs::read_to_string(&status_path)
            && let Some(kb) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak = peak.max(kb);
        }
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut stderr = String::new();
    use std::io::Read as _;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status, peak, stderr)
}

fn events(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn hostile_candidates_cost_only_themselves() {
    let cases = cases();
    assert!(cases.len() >= 9);
    let dir = scratch("hostile");
    let mut srcs = vec![GOOD[0].to_string()];
    srcs.extend(cases.iter().map(|c| c.src.clone()));
    srcs.push(GOOD[1].to_string());
    let cache = dir.join("cache.jsonl");
    write_cache(&cache, &srcs);
    let task = task(&dir, &cache, "");
    let out = dir.join("run");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ndvm-search"));
    cmd.arg(&task)
        .args(["-q", "--threads", "2", "--out"])
        .arg(&out);
    let started = Instant::now();
    let (status, peak_kb, stderr) = run_measuring_rss(cmd);
    let elapsed = started.elapsed();
    assert!(status.success(), "the run failed: {status:?}\n{stderr}");
    assert!(
        peak_kb < MAX_RSS_KB,
        "peak RSS {peak_kb} KiB is over the documented {MAX_RSS_KB} KiB"
    );
    eprintln!("hostile replay: peak RSS {peak_kb} KiB, {elapsed:?}");
    let evs = events(&out);
    assert_eq!(evs.len(), srcs.len(), "one event per candidate");
    for ev in &evs {
        let src = ev["src"].as_str().unwrap();
        let wall = ev["wall_ms"].as_f64().unwrap();
        assert!(
            wall < (SECONDS + 1.0) * 1e3,
            "{src}: took {wall} ms, over its limit plus a second"
        );
        if let Some(good) = GOOD.iter().find(|g| **g == src) {
            assert_eq!(ev["status"], "ok", "{good}: {ev}");
            assert!(ev["validation_r2"].as_f64().is_some(), "{good} is scored");
            continue;
        }
        let case = cases.iter().find(|c| c.src == src).unwrap();
        if case.classes == ["ok"] {
            assert_eq!(ev["status"], "ok", "{}: {ev}", case.why);
            eprintln!("{:<60} ok           {wall:>8.0} ms", case.why);
            continue;
        }
        assert_eq!(ev["status"], "error", "{}: {ev}", case.why);
        let class = ev["error_class"].as_str().unwrap_or("");
        assert!(
            case.classes.iter().any(|c| c == class),
            "{}: class `{class}` not in {:?}: {ev}",
            case.why,
            case.classes
        );
        if ["work", "memory", "depth", "deadline"].contains(&class) {
            assert!(
                ev["limit"].as_str().is_some(),
                "{}: names its limit",
                case.why
            );
        }
        eprintln!("{:<60} {class:<12} {wall:>8.0} ms", case.why);
    }
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let failed: u64 = summary["failures"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    let contained = cases.iter().filter(|c| c.classes == ["ok"]).count() as u64;
    assert_eq!(
        failed,
        cases.len() as u64 - contained,
        "{}",
        summary["failures"]
    );
    assert_eq!(summary["statuses"]["ok"], 2 + contained);
}

#[test]
fn a_process_that_dies_mid_candidate_is_resumed_with_it_crashed() {
    let dir = scratch("abort");
    let srcs: Vec<String> = [
        "(* a (exp (* b x)))",
        "(+ a (* b x))",
        "(* a (sin (* b x)))",
        "(+ a (exp (* b x)))",
        "(* a (cos (* b x)))",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let cache = dir.join("cache.jsonl");
    write_cache(&cache, &srcs);
    let task = task(&dir, &cache, "");
    let out = dir.join("run");
    let ndvm = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ndvm-search"));
        c.env(ndvm_search::engine::TEST_ABORT_HOOK, "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    };
    let first = ndvm()
        .arg(&task)
        .args(["-q", "--threads", "2", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(!first.status.success(), "the hook aborts the first run");
    assert_ne!(first.status.code(), Some(0));
    let mut deaths = 1;
    let mut last = first;
    for _ in 0..3 {
        last = ndvm().args(["run", "--resume"]).arg(&out).output().unwrap();
        if last.status.success() {
            break;
        }
        deaths += 1;
    }
    assert!(
        last.status.success(),
        "resume never completed: {}",
        String::from_utf8_lossy(&last.stderr)
    );
    // Candidate 1 dies once among others, then once alone; the second resume skips it.
    assert_eq!(deaths, 2, "the culprit takes exactly two processes down");
    let evs = events(&out);
    assert_eq!(evs.len(), srcs.len());
    for ev in &evs {
        if ev["index"] == 1 {
            assert_eq!(ev["status"], "crashed", "{ev}");
            assert_eq!(ev["error_class"], "crashed");
        } else {
            assert_eq!(ev["status"], "ok", "{ev}");
        }
    }
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["failures"]["crashed"], 1);
    assert_eq!(summary["statuses"]["ok"], 4);
}

#[test]
fn process_isolation_loses_only_the_candidate_that_aborts() {
    let dir = scratch("isolated");
    let srcs: Vec<String> = [
        "(* a (exp (* b x)))",
        "(+ a (* b x))",
        "(* a (sin (* b x)))",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let cache = dir.join("cache.jsonl");
    write_cache(&cache, &srcs);
    let task = task(&dir, &cache, "isolation: process\n");
    let out = dir.join("run");
    let run = Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .env(ndvm_search::engine::TEST_ABORT_HOOK, "1")
        .arg(&task)
        .args(["-q", "--threads", "2", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let evs = events(&out);
    assert_eq!(evs.len(), 3);
    for ev in &evs {
        if ev["index"] == 1 {
            assert_eq!(ev["status"], "crashed", "{ev}");
            assert!(
                ev["error"]
                    .as_str()
                    .unwrap()
                    .contains("worker process died"),
                "{ev}"
            );
        } else {
            assert_eq!(ev["status"], "ok", "{ev}");
        }
    }
    // The same task in threads gives the same fits for the candidates that finished.
    let threaded = dir.join("threaded");
    let task2 = dir.join("task-thread.yaml");
    std::fs::write(
        &task2,
        std::fs::read_to_string(&task)
            .unwrap()
            .replace("isolation: process\n", ""),
    )
    .unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .arg(&task2)
        .args(["-q", "--threads", "2", "--out"])
        .arg(&threaded)
        .output()
        .unwrap();
    assert!(run.status.success());
    for (a, b) in evs.iter().zip(events(&threaded)) {
        if a["status"] == "ok" {
            assert_eq!(
                a["params"], b["params"],
                "process and thread fits agree bit for bit"
            );
            assert_eq!(a["validation_r2"], b["validation_r2"]);
        }
    }
}

/// A 10 MB `+` form, 5 million operands: `eval` across 1,408 lanes ends at the memory limit
/// (its decoded program alone holds about 500 MB) with a short message, `eval --jsonl` gives an
/// error line between two good ones, and the co-search rejects it as too large before parsing.
#[test]
fn a_ten_megabyte_form_is_contained_three_ways() {
    let dir = scratch("ten-mb");
    let src = format!("(+ a {})", "a ".repeat(5_000_000));
    assert!(src.len() > 10_000_000);
    let file = dir.join("big.scm");
    std::fs::write(&file, &src).unwrap();
    let lanes: Vec<String> = (0..1408)
        .map(|l| format!("{}", 1.0 + l as f64 * 1e-3))
        .collect();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ndvm-search"));
    cmd.arg("eval")
        .arg(&file)
        .args(["--grad", "--timeout", "3", "--bind"])
        .arg(format!("a={}", lanes.join(",")));
    let started = Instant::now();
    let (status, peak_kb, stderr) = run_measuring_rss(cmd);
    let took = started.elapsed();
    eprintln!("10 MB form, 1,408 lanes: peak RSS {peak_kb} KiB, {took:?}");
    assert_eq!(status.code(), Some(1), "{stderr:.2000}");
    // Memory, or on a loaded machine the deadline first: a classified limit either way.
    assert!(
        stderr.contains("error[E013]") || stderr.contains("error[E014]"),
        "{stderr:.2000}"
    );
    // The source line is shown as a window, not 10 MB of text.
    assert!(stderr.len() < 1000, "{} bytes of error text", stderr.len());
    assert!(
        peak_kb < 1024 * 1024,
        "peak RSS {peak_kb} KiB (1 GiB per evaluation)"
    );
    // Before the fold charged its operations this ran 81 s and held 22 GB.
    assert!(took < Duration::from_secs(30), "took {took:?}");

    let good = serde_json::json!({"src": "(* a x)", "params": {"a": 0.5}, "inputs": {"x": 2}});
    let bad = serde_json::json!({"src": src, "params": {"a": 0.5}});
    let batch = dir.join("batch.jsonl");
    std::fs::write(&batch, format!("{good}\n{bad}\n{good}\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .args(["eval", "--jsonl"])
        .arg(&batch)
        .args(["--timeout", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["value"], 1.0);
    assert_eq!(lines[2]["value"], 1.0);
    let error = lines[1]["error"].as_str().unwrap();
    assert!(
        ["E013", "E007", "E014"].iter().any(|c| error.contains(c)),
        "{error:.500}"
    );
    assert!(error.len() < 1000, "{} bytes of error text", error.len());

    let cache = dir.join("cache.jsonl");
    write_cache(&cache, &[GOOD[0].to_string(), src, GOOD[1].to_string()]);
    let task = task(&dir, &cache, "");
    let run = dir.join("run");
    let out = Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .arg(&task)
        .args(["-q", "--threads", "2", "--out"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let evs = events(&run);
    assert_eq!(evs.len(), 2, "both good candidates are calibrated");
    assert!(evs.iter().all(|e| e["status"] == "ok"));
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        summary["stream"]["rejected"]["too-large"], 1,
        "{}",
        summary["stream"]
    );
}
