//! Observers: what the engine reports to as it goes (`on_event` for each fresh calibration,
//! `on_round` after each round). The event log appends `events.jsonl`; the log-line observer
//! prints one progress line per round to a sink (stderr in the binary).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::engine::{Event, StreamStats};
use crate::error::{Result, SearchError};
use crate::task::Task;

/// Receives the engine's progress.
pub trait Observer {
    /// A calibration finished (fresh, not reused from a previous run).
    fn on_event(&mut self, event: &Event) -> Result<()>;

    /// A round finished; `events` are all of this shard's events so far.
    fn on_round(&mut self, task: &Task, events: &[Event], stream: &StreamStats, elapsed_s: f64) {
        let _ = (task, events, stream, elapsed_s);
    }
}

/// Appends each event as one JSON line and flushes it.
#[derive(Debug)]
pub struct EventLog {
    path: PathBuf,
    file: File,
}

impl EventLog {
    /// Opens `path` for appending (creating it).
    pub fn append(path: &Path) -> Result<EventLog> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| SearchError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(EventLog {
            path: path.to_path_buf(),
            file,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Observer for EventLog {
    fn on_event(&mut self, event: &Event) -> Result<()> {
        let mut line = serde_json::to_string(event).map_err(|e| SearchError::RunFolder {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|source| SearchError::Write { source })
    }
}

/// Plain progress lines: calibrations done, best score so far, elapsed time.
pub struct LogLines<'a> {
    sink: &'a mut dyn FnMut(&str),
}

impl<'a> LogLines<'a> {
    /// Lines go to `sink`.
    pub fn new(sink: &'a mut dyn FnMut(&str)) -> Self {
        LogLines { sink }
    }
}

impl Observer for LogLines<'_> {
    fn on_event(&mut self, _event: &Event) -> Result<()> {
        Ok(())
    }

    fn on_round(&mut self, task: &Task, events: &[Event], stream: &StreamStats, elapsed_s: f64) {
        let best = events
            .iter()
            .filter_map(|e| e.score(task.metric).map(|s| (s, e.id)))
            .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
        let best = best.map_or("-".to_string(), |(s, id)| {
            format!("{s:.6} (candidate {id})")
        });
        (self.sink)(&format!(
            "[{elapsed_s:7.1}s] {} calibrated, {} proposed, best {}",
            events.len(),
            stream.proposed,
            best
        ));
    }
}

/// Forwards to several observers.
pub struct Fanout<'a>(pub Vec<&'a mut dyn Observer>);

impl Observer for Fanout<'_> {
    fn on_event(&mut self, event: &Event) -> Result<()> {
        for o in &mut self.0 {
            o.on_event(event)?;
        }
        Ok(())
    }

    fn on_round(&mut self, task: &Task, events: &[Event], stream: &StreamStats, elapsed_s: f64) {
        for o in &mut self.0 {
            o.on_round(task, events, stream, elapsed_s);
        }
    }
}
