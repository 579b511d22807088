//! The run folder `results/<task>-<timestamp>/`: `task.yaml` (copy), `run.json` (what resume and
//! merge need), `data.csv` (generated data with its split), `events.jsonl`, `begun.jsonl`,
//! `summary.json` and `summary.md` (built in `summary`; the markdown links the `plot-*.svg`/`.png`
//! files that `plots` writes beside it). Every whole-file write is atomic and synced.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::begun::{BeginLog, BeginRecord};
use crate::error::{Result, SearchError};
use crate::events::{Event, Shard};
use crate::summary::Summary;
use crate::task::Task;
use crate::textfile;

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
    let stamp = jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S");
    let mut dir = parent.join(format!("{name}-{stamp}"));
    let mut k = 2;
    while dir.exists() {
        dir = parent.join(format!("{name}-{stamp}-{k}"));
        k += 1;
    }
    dir
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
    write(
        &dir.join("task.yaml"),
        &crate::secret::task_text(&task.text),
    )?;
    write(&dir.join("run.json"), &(to_json(meta)? + "\n"))?;
    if let Some((table, labels)) = &task.generated {
        let path = dir.join("data.csv");
        write(
            &path,
            &generated_csv(task, table, labels).map_err(|e| folder_err(&path, e))?,
        )?;
    }
    Ok(())
}

/// The generated table as CSV: the inputs, `y` and each row's `split` label.
fn generated_csv(
    task: &Task,
    table: &crate::task::Table,
    labels: &[&str],
) -> std::result::Result<String, String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let header = task.inputs.iter().map(String::as_str).chain(["y", "split"]);
    w.write_record(header).map_err(|e| e.to_string())?;
    for (r, label) in labels.iter().enumerate() {
        let mut row: Vec<String> = table.columns.iter().map(|c| c[r].to_string()).collect();
        row.push(table.target[r].to_string());
        row.push(label.to_string());
        w.write_record(&row).map_err(|e| e.to_string())?;
    }
    let bytes = w.into_inner().map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|e| e.to_string())
}

/// Writes a run-folder file atomically (see [`textfile::write_atomic`]), redacted: no secret
/// reaches a run folder (see [`crate::secret`]).
fn write(path: &Path, text: &str) -> Result<()> {
    let text = &*crate::secret::redact(text);
    textfile::write_atomic(path, text.as_bytes())
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
                finished_s: old.finished_s,
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

/// Writes `summary.json` and `summary.md` (each atomically); returns the markdown.
pub fn write_summary(dir: &Path, summary: &Summary) -> Result<String> {
    let md = summary.markdown();
    write(&dir.join("summary.json"), &(to_json(summary)? + "\n"))?;
    write(&dir.join("summary.md"), &md)?;
    Ok(md)
}

/// Reads `summary.json` back.
pub fn read_summary(dir: &Path) -> Result<Summary> {
    let path = dir.join("summary.json");
    let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    serde_json::from_str(&text).map_err(|e| folder_err(&path, e.to_string()))
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
