//! The `llm` proposer against a real model server (built with the `llm` and `llm-live` features;
//! `.ci/run` starts llama-cpp-python's server with SmolLM2-135M-Instruct through
//! `.ci/llm-server.sh`, which exports `NDVM_LLM_BASE_URL` and `NDVM_LLM_MODEL`): a live co-search
//! of the shipped `tasks/symreg-llm.yaml` (only the URL, model, key, cache and budget changed)
//! records every answer with its provenance and a verdict, gives valid candidates for at least
//! 10 % of the answers and a fitted winner, and `kind: replay` on its cache reproduces its events
//! and summary offline;
//! a server killed mid-run ends the run with an error naming the endpoint, every cache line whole.
//! Without a server every test here fails, loudly. (Fault cases a real server cannot produce on
//! demand stay in `tests/llm.rs`, against the scripted one.)

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{events_without, root, summary_core};
use serde_json::Value;

/// The server `.ci/llm-server.sh` started: its base URL and model alias.
fn server() -> (String, String) {
    let var = |k: &str| {
        std::env::var(k).unwrap_or_else(|_| {
            panic!("{k} is unset: start a model server with `eval \"$(bash .ci/llm-server.sh)\"`")
        })
    };
    (var("NDVM_LLM_BASE_URL"), var("NDVM_LLM_MODEL"))
}

/// `tasks/symreg-llm.yaml` pointed at `base_url`, with no key, `requests` requests two at a time
/// and the cache in `dir`; each `(from, to)` of `edits` replaces a text of the task.
fn live_task(
    dir: &Path,
    base_url: &str,
    model: &str,
    requests: usize,
    edits: &[(&str, &str)],
) -> PathBuf {
    let mut text = std::fs::read_to_string(root().join("tasks/symreg-llm.yaml")).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{from:?} not in the task");
        text = text.replace(from, to);
    }
    let prompt = root().join("bootstrap/prompts/symreg.md");
    let text = text
        .replace("http://127.0.0.1:8000/v1", base_url)
        .replace(
            "model: local-model",
            &format!("model: {model}\n  api_key: \"\""),
        )
        .replace("concurrency: 4", "concurrency: 2")
        .replace("max_requests: 64", &format!("max_requests: {requests}"))
        .replace("../bootstrap/prompts/symreg.md", prompt.to_str().unwrap())
        .replace("../caches/symreg-llm.jsonl", "cache.jsonl");
    assert!(
        text.contains(base_url) && text.contains("cache: cache.jsonl"),
        "{text}"
    );
    let task = dir.join("live.yaml");
    std::fs::write(&task, text).unwrap();
    task
}

fn ndvm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .current_dir(root())
        .args(args)
        .env_remove("SLURM_ARRAY_TASK_ID")
        .output()
        .unwrap()
}

/// `ndvm-search run TASK --out OUT -q`, which must succeed (its stderr shown when it does not).
fn run_ok(task: &Path, out: &Path) -> Output {
    let run = ndvm(&[
        "run",
        task.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    run
}

fn cache_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a torn cache line {l:?}: {e}")))
        .collect()
}

fn events_core(dir: &Path) -> Vec<Value> {
    events_without(dir, &["wall_ms", "finished_s"])
}

#[test]
fn a_live_search_records_every_answer_fits_a_winner_and_replays_offline() {
    let (base_url, model) = server();
    let dir = common::scratch("llm-live", "search");
    // The model alone (`evolve: false`): what its answers are worth.
    let task = live_task(
        &dir,
        &base_url,
        &model,
        24,
        &[
            ("\n  kind: llm\n", "\n  kind: llm\n  evolve: false\n"),
            ("budget: {seconds: 60}", "budget: {seconds: 600}"),
            ("threshold: 0.99}", "threshold: 0.99, stop: true}"),
        ],
    );
    let live = dir.join("live");
    let started = Instant::now();
    run_ok(&task, &live);
    let lines = cache_lines(&dir.join("cache.jsonl"));
    let failed =
        std::fs::read_to_string(live.join("llm-failures.jsonl")).map_or(0, |t| t.lines().count());
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(live.join("summary.json")).unwrap()).unwrap();
    // Every request answered or logged as failed; a success (R² > 0.99) ends the run sooner.
    if summary["stop"] == "success" {
        assert!(lines.len() + failed <= 24, "{} + {failed}", lines.len());
    } else {
        assert_eq!(
            lines.len() + failed,
            24,
            "every request answered or logged as failed"
        );
    }
    assert!(failed <= 4, "{failed} requests failed");
    for l in &lines {
        assert_eq!(l["model"], model.as_str(), "{l}");
        assert!(
            l["prompt_hash"]
                .as_str()
                .is_some_and(|h| h.starts_with("fnv1a64:")),
            "{l}"
        );
        assert_eq!(l["temperature"], 0.8);
        let usage = &l["usage"];
        assert!(
            usage["completion_tokens"].as_u64().is_some_and(|n| n > 0),
            "{l}"
        );
        assert_eq!(
            usage["total_tokens"].as_u64(),
            Some(
                usage["prompt_tokens"].as_u64().unwrap()
                    + usage["completion_tokens"].as_u64().unwrap()
            )
        );
        assert!(l["latency_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{l}");
        assert!(l["finish_reason"].is_string(), "{l}");
        let verdict = l["verdict"].as_str().expect("every answer has a verdict");
        assert!(
            verdict == "valid" || l["reason"].is_string(),
            "a rejection says why: {l}"
        );
    }
    let valid = lines.iter().filter(|l| l["verdict"] == "valid").count();
    eprintln!(
        "live: {} answers, {valid} valid ({} salvaged), {failed} failed, {:.0} s",
        lines.len(),
        lines.iter().filter(|l| l["salvaged"] == true).count(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        valid * 10 >= lines.len(),
        "{valid} valid of {} answers",
        lines.len()
    );
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(live.join("summary.json")).unwrap()).unwrap();
    assert!(
        summary["best"]["params"].is_object(),
        "a fitted winner: {summary}"
    );

    // The same task replaying the cache: the same events and summary, offline.
    let replayed = replays(&task, &live, "kind: replay");
    // Equal but for the proposer's name (`replay` against `llm`) and the `run` section.
    let core =
        |dir: &Path| summary_core(dir).replace("\"proposer\": \"replay\"", "\"proposer\": \"llm\"");
    assert_eq!(core(&replayed), core(&live));
}

#[test]
fn a_server_killed_mid_run_ends_the_run_with_an_error_naming_the_endpoint() {
    server();
    // A server of this test's own (the venv of `.ci/llm-server.sh` reused: seconds to start).
    let dir = common::scratch("llm-live", "killed");
    let state = dir.join("server");
    let up = Command::new("bash")
        .arg(root().join(".ci/llm-server.sh"))
        .env("NDVM_LLM_STATE", &state)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let exports = String::from_utf8(up.stdout).unwrap();
    let value = |k: &str| {
        exports
            .lines()
            .find_map(|l| l.strip_prefix(&format!("export {k}=")))
            .unwrap_or_else(|| panic!("no {k} in {exports}"))
            .to_string()
    };
    let (base_url, model, pid) = (
        value("NDVM_LLM_BASE_URL"),
        value("NDVM_LLM_MODEL"),
        value("NDVM_LLM_PID"),
    );
    // The default (the model seeding evolution), run on until the endpoint's failure ends it.
    let task = live_task(
        &dir,
        &base_url,
        &model,
        64,
        &[("budget: {seconds: 60}", "budget: {seconds: 600}")],
    );
    let run = Command::new(env!("CARGO_BIN_EXE_ndvm-search"))
        .current_dir(root())
        .args([
            "run",
            task.to_str().unwrap(),
            "--out",
            dir.join("run").to_str().unwrap(),
            "-q",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let cache = dir.join("cache.jsonl");
    let waited = Instant::now();
    while std::fs::read_to_string(&cache).map_or(0, |t| t.lines().count()) < 2 {
        assert!(
            waited.elapsed() < Duration::from_secs(300),
            "no answers in 300 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let killed = Command::new("kill").args(["-KILL", &pid]).status().unwrap();
    assert!(killed.success());
    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("{base_url}/chat/completions")),
        "{stderr}"
    );
    let lines = cache_lines(&cache);
    assert!(
        lines.len() >= 2 && lines.len() < 64,
        "{} lines",
        lines.len()
    );
    let _ = Command::new("bash")
        .arg(root().join(".ci/llm-server-stop.sh"))
        .arg("--if-started")
        .env("NDVM_LLM_STATE", &state)
        .status();
}

#[test]
fn by_default_the_model_seeds_evolution_which_leaves_a_winner_and_replays_under_kind_evolve() {
    let (base_url, model) = server();
    let dir = common::scratch("llm-live", "seeds");
    // The shipped task (only the URL, model, key and cache changed) with a budget of 3,000
    // calibrations instead of a minute (tens of seconds: a replay can then end at the same
    // place), so that the model's answers arrive while evolution runs.
    let task = live_task(
        &dir,
        &base_url,
        &model,
        12,
        &[("budget: {seconds: 60}", "budget: {calibrations: 3000}")],
    );
    let live = dir.join("live");
    let out = run_ok(&task, &live);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(live.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["proposer"], "evolve");
    assert!(
        summary["best"]["params"].is_object(),
        "a fitted winner: {summary}"
    );
    let r2 = summary["best"]["validation_r2"].as_f64().unwrap();
    assert!(r2 > 0.9, "evolution fits the law: R² {r2}");
    // The model's part: its answers in the cache, each marked with the request for seeds that
    // took it, counted in `run.llm` with the tokens they cost.
    let lines = cache_lines(&dir.join("cache.jsonl"));
    let llm = &summary["run"]["llm"];
    assert_eq!(llm["answered"].as_u64(), Some(lines.len() as u64), "{llm}");
    // (A model slower than evolution may give none before the run ends: the run still has its
    // winner, which is the point of seeding.)
    let tokens: u64 = lines
        .iter()
        .map(|l| l["usage"]["total_tokens"].as_u64().unwrap())
        .sum();
    let counted = llm["usage"][model.as_str()]["total_tokens"].as_u64();
    assert_eq!(counted.unwrap_or(0), tokens, "{llm}");
    assert!(lines.iter().all(|l| l["ask"].is_u64()), "{lines:?}");
    let usable = llm["usable"].as_u64().unwrap();
    let idle = summary["run"]["calibrator_idle_s"].as_f64().unwrap();
    eprintln!(
        "seeds: {} requests, {} answers, {usable} usable, {} candidates; calibrators idle {idle:.1} \
         of {:.1} thread-seconds; best R² {r2}",
        llm["requests"],
        lines.len(),
        llm["candidates"],
        summary["run"]["elapsed_s"].as_f64().unwrap() * summary["run"]["threads"].as_f64().unwrap()
    );
    if usable < lines.len() as u64 {
        assert!(
            stderr.contains("answers of the model gave a valid candidate"),
            "{stderr}"
        );
    }
    // Offline, `kind: evolve` on the cache: the same run.
    replays(
        &task,
        &live,
        "kind: evolve\n  operators: [exp, sin, cos, log, sqrt]",
    );
}

/// Runs `task` with its proposer replaced by `proposer` (keys of the `proposer:` block) reading
/// the live run's cache, and checks that it gives `live`'s events, offline; returns its folder.
fn replays(task: &Path, live: &Path, proposer: &str) -> PathBuf {
    let dir = task.parent().unwrap();
    let text = std::fs::read_to_string(task).unwrap();
    let (head, _) = text.split_once("proposer:").unwrap();
    let (_, tail) = text.split_once("calibrator:").unwrap();
    let replay_task = dir.join("replay.yaml");
    std::fs::write(
        &replay_task,
        format!(
            "{head}proposer:\n  {proposer}\n  cache: cache.jsonl\n  batch: 4\ncalibrator:{tail}"
        ),
    )
    .unwrap();
    let replayed = dir.join("replay");
    run_ok(&replay_task, &replayed);
    assert_eq!(events_core(&replayed), events_core(live));
    replayed
}
