//! The run folder `results/<task>-<timestamp>/`: `task.yaml` (copy), `run.json` (what resume and
//! merge need), `data.csv` (generated data with its split), `events.jsonl`, `summary.json`,
//! `summary.md` (which links the `plot-*.svg`/`.png` files that `plots` writes beside it). The
//! summary's `run` section holds every wall-clock and machine-dependent field; the rest is a pure
//! function of the task and the events, byte-identical across thread counts, runs, resumes and
//! shard merges.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::engine::{self, Event, Outcome, Shard};
use crate::error::{Result, SearchError};
use crate::task::{MetricName, Task};

/// What `run.json` records: enough to resume or merge.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// The task file as given (resolved against the working directory at start).
    pub task_path: PathBuf,
    /// Its text when the run started (resume and merge refuse a changed task).
    pub task_text: String,
    /// The shard this folder holds.
    pub shard: Shard,
    /// Budget override in seconds (`--budget-seconds`).
    pub budget_seconds: Option<f64>,
    /// Budget override in calibrations (`--budget-calibrations`).
    pub budget_calibrations: Option<usize>,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SearchError + '_ {
    move |source| SearchError::Read {
        path: path.to_path_buf(),
        source,
    }
}

fn folder_err(path: &Path, message: impl Into<String>) -> SearchError {
    SearchError::RunFolder {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// `parent/<name>-<YYYYMMDD-HHMMSS>` in UTC (with `-2`, `-3`, … when taken).
pub fn new_run_dir(parent: &Path, name: &str) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let stamp = format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    );
    let mut dir = parent.join(format!("{name}-{stamp}"));
    let mut k = 2;
    while dir.exists() {
        dir = parent.join(format!("{name}-{stamp}-{k}"));
        k += 1;
    }
    dir
}

/// Days since 1970-01-01 to (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Creates a fresh run folder with `task.yaml`, `run.json` and (for generated data) `data.csv`.
pub fn prepare(dir: &Path, task: &Task, meta: &RunMeta) -> Result<()> {
    if dir.join("run.json").exists() {
        return Err(folder_err(
            dir,
            "already holds a run; use --resume to continue it",
        ));
    }
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    write(&dir.join("task.yaml"), &task.text)?;
    write(&dir.join("run.json"), &(to_json(meta)? + "\n"))?;
    if let Some((table, labels)) = &task.generated {
        let mut csv = String::new();
        let _ = writeln!(csv, "{},y,split", task.inputs.join(","));
        for (r, label) in labels.iter().enumerate() {
            let cols: Vec<String> = table.columns.iter().map(|c| c[r].to_string()).collect();
            let _ = writeln!(csv, "{},{},{label}", cols.join(","), table.target[r]);
        }
        write(&dir.join("data.csv"), &csv)?;
    }
    Ok(())
}

/// Writes `text` to `path` atomically: a sibling temporary file renamed over it, so a kill leaves
/// either the old or the new contents, never a mix.
fn write(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|source| SearchError::Write { source })
}

fn to_json<T: Serialize>(v: &T) -> Result<String> {
    serde_json::to_string_pretty(v).map_err(|e| folder_err(Path::new("."), e.to_string()))
}

/// Reads `run.json`.
pub fn load_meta(dir: &Path) -> Result<RunMeta> {
    let path = dir.join("run.json");
    let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    serde_json::from_str(&text).map_err(|e| folder_err(&path, e.to_string()))
}

/// Reads `events.jsonl`. A truncated last line (a run killed mid-write) is cut from the file so
/// that appending continues cleanly; its calibration is redone.
pub fn read_events(dir: &Path, repair: bool) -> Result<Vec<Event>> {
    let path = dir.join("events.jsonl");
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    let mut events = Vec::new();
    let mut good_len = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let complete = line.ends_with('\n');
        match serde_json::from_str::<Event>(line.trim_end()) {
            Ok(e) if complete => {
                events.push(e);
                good_len += line.len();
            }
            Ok(_) | Err(_) if !complete => break,
            Err(e) => {
                return Err(folder_err(&path, format!("line {}: {e}", i + 1)));
            }
            Ok(_) => unreachable!(),
        }
    }
    if repair && good_len < text.len() {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(io_err(&path))?;
        f.set_len(good_len as u64).map_err(io_err(&path))?;
    }
    Ok(events)
}

/// Known results by index, checking that overlapping folders agree.
pub fn index_events(events: Vec<Event>, source: &Path) -> Result<HashMap<u64, Event>> {
    let mut known: HashMap<u64, Event> = HashMap::new();
    for e in events {
        if let Some(old) = known.get(&e.index) {
            let same = Event {
                wall_ms: old.wall_ms,
                ..e.clone()
            };
            if &same != old {
                return Err(folder_err(
                    source,
                    format!("two different results for candidate index {}", e.index),
                ));
            }
            continue;
        }
        known.insert(e.index, e);
    }
    Ok(known)
}

fn entry(task: &Task, e: &Event, with_tests: bool) -> Value {
    let mut v = json!({
        "id": e.id,
        "index": e.index,
        "src": e.src,
        "skeleton": e.skeleton,
        "complexity": e.complexity,
        "params": e.params,
        "train_loss": e.train_loss,
        "validation_r2": e.validation_r2,
        "validation_nmse": e.validation_nmse,
    });
    if with_tests && !task.tests.is_empty() {
        let tests: BTreeMap<String, Value> = engine::test_scores(task, e)
            .into_iter()
            .map(|(k, (r2, nmse))| (k, json!({"r2": r2, "nmse": nmse})))
            .collect();
        v["test"] = json!(tests);
    }
    v
}

/// How many leaderboard entries the summary keeps (each with its test scores).
pub const LEADERBOARD: usize = 10;

/// Builds `summary.json` (as a value) and `summary.md`.
pub fn summary(task: &Task, outcome: &Outcome, run: Value) -> (Value, String) {
    let metric = task.metric;
    let mut ranked: Vec<&Event> = outcome
        .events
        .iter()
        .filter(|e| e.score(metric).is_some())
        .collect();
    ranked.sort_by(|a, b| {
        let (sa, sb) = (
            a.score(metric).unwrap_or(f64::NAN),
            b.score(metric).unwrap_or(f64::NAN),
        );
        sb.total_cmp(&sa).then(a.index.cmp(&b.index))
    });
    let leaderboard: Vec<Value> = ranked
        .iter()
        .take(LEADERBOARD)
        .map(|e| entry(task, e, true))
        .collect();
    // Pareto front: by complexity, keep those with strictly lower error than every simpler one.
    let mut by_cx = ranked.clone();
    by_cx.sort_by(|a, b| a.complexity.cmp(&b.complexity).then(a.index.cmp(&b.index)));
    let mut pareto = Vec::new();
    let mut best_err = f64::INFINITY;
    for e in by_cx {
        let score = e.score(metric).unwrap_or(f64::NAN);
        let err = match metric {
            MetricName::R2 => 1.0 - score,
            MetricName::Loss => -score,
        };
        if err < best_err {
            best_err = err;
            pareto
                .push(json!({"id": e.id, "complexity": e.complexity, "error": err, "src": e.src}));
        }
    }
    let statuses: BTreeMap<String, u64> =
        outcome.events.iter().fold(BTreeMap::new(), |mut m, e| {
            *m.entry(e.status.clone()).or_insert(0) += 1;
            m
        });
    let failures: BTreeMap<String, u64> =
        outcome
            .events
            .iter()
            .fold(BTreeMap::new(), |mut m, e| match &e.error_class {
                Some(c) => {
                    *m.entry(c.clone()).or_insert(0) += 1;
                    m
                }
                None => m,
            });
    let first = outcome.first_success.map(|i| {
        let e = outcome.events.iter().find(|e| e.index == i);
        json!({"index": i, "id": e.map(|e| e.id), "calibrations": i + 1})
    });
    let metric_name = match metric {
        MetricName::R2 => "validation R²",
        MetricName::Loss => "training loss",
    };
    let v = json!({
        "task": task.name,
        "seed": task.seed,
        "proposer": outcome.proposer,
        "settings": {
            "metric": metric,
            "threshold": task.threshold,
            "stop_on_success": task.stop_on_success,
            "batch": task.batch,
            "budget_calibrations": task.budget_calibrations,
            "budget_seconds": task.budget_seconds,
            "starts": task.calibrate.n_starts,
            "optimizer": format!("{:?}", task.calibrate.optimizer).to_lowercase(),
            "calibrator_seed": task.calibrate.seed,
        },
        "data": {
            "train": task.train.n_rows(),
            "validation": task.validation.n_rows(),
            "tests": task.tests.iter().map(|(n, t)| (n.clone(), t.n_rows())).collect::<BTreeMap<_, _>>(),
        },
        "stream": outcome.stream,
        "calibrations": outcome.events.len(),
        "statuses": statuses,
        "failures": failures,
        "stop": outcome.stop,
        "first_success": first,
        "best": leaderboard.first().cloned(),
        "leaderboard": leaderboard,
        "pareto": pareto,
        "warnings": outcome.warnings,
        "run": run,
    });
    let md = markdown(task, &v, metric_name);
    (v, md)
}

fn fmt_opt(v: &Value) -> String {
    match v.as_f64() {
        Some(x) => format!("{x:.6}"),
        None => "–".to_string(),
    }
}

fn markdown(task: &Task, v: &Value, metric_name: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Run of task `{}`\n", task.name);
    let _ = writeln!(
        s,
        "Proposer `{}`, seed {}, stop: `{}`, {} calibrations ({} proposed, {} duplicates, {} rejected).\n",
        v["proposer"].as_str().unwrap_or(""),
        task.seed,
        v["stop"].as_str().unwrap_or(""),
        v["calibrations"],
        v["stream"]["proposed"],
        v["stream"]["duplicates"],
        v["stream"]["rejected"]
            .as_object()
            .map_or(0, |m| m.values().filter_map(Value::as_u64).sum::<u64>()),
    );
    if let Some(f) = v["failures"].as_object().filter(|f| !f.is_empty()) {
        let parts: Vec<String> = f.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let _ = writeln!(s, "Failed calibrations by class: {}.\n", parts.join(", "));
    }
    match v["first_success"].as_object() {
        Some(f) => {
            let _ = writeln!(
                s,
                "First success ({metric_name} beyond {}): candidate {} after {} calibrations, {} s.\n",
                task.threshold,
                f["id"],
                f["calibrations"],
                fmt_opt(&v["run"]["time_to_first_success_s"])
            );
        }
        None => {
            let _ = writeln!(
                s,
                "No candidate reached the threshold ({metric_name} beyond {}).\n",
                task.threshold
            );
        }
    }
    if let Some(best) = v["best"].as_object() {
        let _ = writeln!(
            s,
            "## Winner\n\n```scheme\n{}\n```\n",
            best["src"].as_str().unwrap_or("")
        );
        let _ = writeln!(s, "| constant | value |\n|---|---|");
        if let Some(p) = best["params"].as_object() {
            for (k, x) in p {
                let _ = writeln!(s, "| `{k}` | {} |", x);
            }
        }
        let _ = writeln!(
            s,
            "\nTraining loss {}, validation R² {}, validation NMSE {}.",
            fmt_opt(&best["train_loss"]),
            fmt_opt(&best["validation_r2"]),
            fmt_opt(&best["validation_nmse"])
        );
        if let Some(t) = best.get("test").and_then(Value::as_object) {
            for (name, m) in t {
                let _ = writeln!(
                    s,
                    "Test `{name}`: R² {}, NMSE {}.",
                    fmt_opt(&m["r2"]),
                    fmt_opt(&m["nmse"])
                );
            }
        }
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "## Leaderboard\n\n| # | id | complexity | train loss | validation R² | program |\n|---|---|---|---|---|---|"
    );
    if let Some(rows) = v["leaderboard"].as_array() {
        for (i, r) in rows.iter().enumerate() {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | `{}` |",
                i + 1,
                r["id"],
                r["complexity"],
                fmt_opt(&r["train_loss"]),
                fmt_opt(&r["validation_r2"]),
                r["src"].as_str().unwrap_or("")
            );
        }
    }
    let _ = writeln!(
        s,
        "\n## Pareto front (complexity vs error)\n\n| complexity | error | program |\n|---|---|---|"
    );
    if let Some(rows) = v["pareto"].as_array() {
        for r in rows {
            let _ = writeln!(
                s,
                "| {} | {} | `{}` |",
                r["complexity"],
                fmt_opt(&r["error"]),
                r["src"].as_str().unwrap_or("")
            );
        }
    }
    let _ = writeln!(
        s,
        "\n## Plots\n\n| plot | files |\n|---|---|\n\
         | best fit vs data | [plot-fit.svg](plot-fit.svg), [plot-fit.png](plot-fit.png) |\n\
         | best score over calibrations and time | [plot-progress.svg](plot-progress.svg), [plot-progress.png](plot-progress.png) |\n\
         | complexity / error Pareto front | [plot-pareto.svg](plot-pareto.svg), [plot-pareto.png](plot-pareto.png) |\n\n\
         ![best fit](plot-fit.svg)"
    );
    let r = &v["run"];
    let _ = writeln!(
        s,
        "\n## Run\n\n{} s wall clock, {} calibrations/s, {} threads, shard {}, ndvm-search {}.",
        fmt_opt(&r["elapsed_s"]),
        fmt_opt(&r["calibrations_per_second"]),
        r["threads"],
        r["shard"].as_str().unwrap_or("0/1"),
        r["version"].as_str().unwrap_or("")
    );
    s
}

/// The machine-dependent `run` section.
pub fn run_section(outcome: &Outcome, threads: usize, shard: Shard) -> Value {
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "threads": threads,
        "shard": format!("{}/{}", shard.index, shard.count),
        "elapsed_s": outcome.elapsed,
        "time_to_first_success_s": outcome.time_to_first_success,
        "fresh_calibrations": outcome.n_fresh,
        "calibrations_per_second": if outcome.elapsed > 0.0 { outcome.n_fresh as f64 / outcome.elapsed } else { 0.0 },
        "host": std::env::var("HOSTNAME").ok(),
    })
}

/// Writes `summary.json` and `summary.md`.
pub fn write_summary(dir: &Path, summary: &Value, md: &str) -> Result<()> {
    write(&dir.join("summary.json"), &(to_json(summary)? + "\n"))?;
    write(&dir.join("summary.md"), md)
}

/// Writes every event (merge output).
pub fn write_events(dir: &Path, events: &[Event]) -> Result<()> {
    let mut s = String::new();
    for e in events {
        s.push_str(&serde_json::to_string(e).map_err(|err| folder_err(dir, err.to_string()))?);
        s.push('\n');
    }
    write(&dir.join("events.jsonl"), &s)
}

/// One line of `begun.jsonl`: a process started (`session`) or a calibration began (`begin`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "kebab-case")]
pub enum BeginRecord {
    /// A process started calibrating in this folder; the `begin` lines after it are its own.
    Session {
        /// The process id (for people reading the file).
        pid: u32,
    },
    /// A calibration began.
    Begin {
        /// Candidate index.
        index: u64,
        /// Candidate id.
        id: u64,
    },
    /// A calibration returned (its event may still be on its way to `events.jsonl`).
    End {
        /// Candidate index.
        index: u64,
    },
}

/// `begun.jsonl`: a `begin` line is written (and flushed to the OS) before each calibration, so a
/// process that dies mid-candidate leaves the candidates it was running named on disk.
#[derive(Debug)]
pub struct BeginLog {
    file: std::sync::Mutex<std::fs::File>,
}

impl BeginLog {
    /// Opens `dir/begun.jsonl` for appending and writes this process's `session` line.
    pub fn open(dir: &Path) -> Result<BeginLog> {
        let path = dir.join("begun.jsonl");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io_err(&path))?;
        let log = BeginLog {
            file: std::sync::Mutex::new(file),
        };
        log.write(&BeginRecord::Session {
            pid: std::process::id(),
        })
        .map_err(|source| SearchError::Write { source })?;
        Ok(log)
    }

    /// Records that candidate `index` (id `id`) is about to be calibrated. A failed write is
    /// ignored: the record is a safety net, and the calibration itself is still logged.
    pub fn begin(&self, index: u64, id: u64) {
        let _ = self.write(&BeginRecord::Begin { index, id });
    }

    /// Records that candidate `index` returned, so its death cannot be blamed on it.
    pub fn end(&self, index: u64) {
        let _ = self.write(&BeginRecord::End { index });
    }

    fn write(&self, r: &BeginRecord) -> std::io::Result<()> {
        use std::io::Write as _;
        let mut line = serde_json::to_string(r).map_err(std::io::Error::other)?;
        line.push('\n');
        // A poisoned lock only means another thread panicked mid-write; the file is still usable.
        let mut f = self.file.lock().unwrap_or_else(|p| p.into_inner());
        f.write_all(line.as_bytes())?;
        f.flush()
    }
}

/// What `begun.jsonl` and the finished events say about earlier processes that died.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CrashReport {
    /// Candidates that were running when two processes died: not retried.
    pub crashed: std::collections::HashSet<u64>,
    /// Candidates that were running when one process died (a kill, or a crash): retried one at
    /// a time, so a culprit dies alone and is `crashed` after the next resume.
    pub suspects: std::collections::HashSet<u64>,
}

/// Reads `dir/begun.jsonl` against the indices that have an event. A candidate left unfinished
/// by one dead process is a suspect (a kill by the user looks the same as a crash); left
/// unfinished by two, it is `crashed`. Suspects are retried alone, so an innocent one finishes
/// and a culprit takes only itself down.
pub fn read_crashes(dir: &Path, finished: &HashMap<u64, Event>) -> Result<CrashReport> {
    let path = dir.join("begun.jsonl");
    if !path.exists() {
        return Ok(CrashReport::default());
    }
    let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    let mut sessions: Vec<Vec<u64>> = Vec::new();
    for line in text.lines() {
        // A line cut by the kill is skipped: its calibration had not started.
        match serde_json::from_str::<BeginRecord>(line) {
            Ok(BeginRecord::Session { .. }) => sessions.push(Vec::new()),
            Ok(BeginRecord::Begin { index, .. }) => {
                if sessions.is_empty() {
                    sessions.push(Vec::new());
                }
                if let Some(s) = sessions.last_mut() {
                    s.push(index);
                }
            }
            Ok(BeginRecord::End { index }) => {
                if let Some(s) = sessions.last_mut() {
                    s.retain(|&i| i != index);
                }
            }
            Err(_) => {}
        }
    }
    let mut deaths: HashMap<u64, u32> = HashMap::new();
    for begun in sessions {
        let mut unfinished: Vec<u64> = begun
            .into_iter()
            .filter(|i| !finished.contains_key(i))
            .collect();
        unfinished.sort_unstable();
        unfinished.dedup();
        for i in unfinished {
            *deaths.entry(i).or_insert(0) += 1;
        }
    }
    let mut report = CrashReport::default();
    for (i, n) in deaths {
        if n >= 2 {
            report.crashed.insert(i);
        } else {
            report.suspects.insert(i);
        }
    }
    Ok(report)
}
