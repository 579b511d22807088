//! Observers: what the engine reports to as it goes (`on_start`, `on_event` for each fresh
//! calibration, `on_round` after each `batch` of events put in order, `on_requests` while a proposer waits for a service,
//! `on_finish`). The event log appends `events.jsonl`; progress goes to stderr as an indicatif bar
//! on a terminal, as plain log lines otherwise (`Progress`), or nowhere (`-q`); with the `llm`
//! proposer both show the requests sent, in flight, failed and retried.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::error::{Result, SearchError};
use crate::events::{Event, Outcome, StreamStats};
use crate::propose::RequestStats;
use crate::task::{MetricName, Task};

/// Receives the engine's progress.
pub trait Observer {
    /// The run starts; `known` results (resume, merge) will be reused, not recalibrated.
    fn on_start(&mut self, task: &Task, known: usize) {
        let _ = (task, known);
    }

    /// A calibration finished (fresh, not reused from a previous run).
    fn on_event(&mut self, event: &Event) -> Result<()>;

    /// Another `batch` of events was put in index order; `events` are all of this shard's
    /// events so far, in index order.
    fn on_round(&mut self, task: &Task, events: &[Event], stream: &StreamStats, elapsed_s: f64) {
        let _ = (task, events, stream, elapsed_s);
    }

    /// The proposer's requests to a service (the `llm` proposer) changed, or it is still waiting
    /// (then the same counts come about once a second).
    fn on_requests(&mut self, task: &Task, requests: &RequestStats, elapsed_s: f64) {
        let _ = (task, requests, elapsed_s);
    }

    /// The run stopped (not called when it fails).
    fn on_finish(&mut self, task: &Task, outcome: &Outcome) {
        let _ = (task, outcome);
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
        let line = crate::secret::redact(&line);
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|source| SearchError::Write { source })
    }
}

/// The best score so far as text: `validation R² 0.993412 (candidate 17)`, or `-`.
fn best_text(task: &Task, events: &[Event]) -> String {
    let best = events
        .iter()
        .filter_map(|e| e.score(task.metric).map(|s| (s, e.id)))
        .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
    match (best, task.metric) {
        (None, _) => "-".to_string(),
        (Some((s, id)), MetricName::R2) => format!("validation R² {s:.6} (candidate {id})"),
        (Some((s, id)), MetricName::Loss) => format!("training loss {:.6} (candidate {id})", -s),
    }
}

/// The best score so far, short enough for a bar line: `R² 0.993412 (#17)`, or `-`.
fn short_best(task: &Task, events: &[Event]) -> String {
    best_text(task, events)
        .replace("validation ", "")
        .replace("training ", "")
        .replace("candidate ", "#")
}

/// `done/budget calibrations` or `done calibrations` without a calibration budget.
fn done_text(task: &Task, done: usize) -> String {
    match task.budget_calibrations {
        Some(b) => format!("{done}/{b} calibrations"),
        None => format!("{done} calibrations"),
    }
}

/// `llm requests: 8 sent, 4 in flight, 1 failed, 2 retried`.
fn requests_text(r: &RequestStats) -> String {
    format!(
        "llm requests: {} sent, {} in flight, {} failed, {} retried",
        r.sent, r.in_flight, r.failed, r.retried
    )
}

/// Plain progress lines (calibrations done / budget, best score so far, elapsed time, and the
/// llm requests when there are any) for a log or a pipe: the first round, then at most one line
/// per `every` when something changed, and a closing line.
pub struct LogLines<'a> {
    sink: &'a mut dyn FnMut(&str),
    every: Duration,
    last: Option<Instant>,
    /// Calibrations counted in the last line printed.
    printed: Option<usize>,
    /// The latest request counts, and those in the last line printed.
    requests: Option<RequestStats>,
    printed_requests: Option<RequestStats>,
    /// The latest round's calibrations, candidates proposed and best score, for lines printed
    /// while the proposer waits.
    round: (usize, u64, String),
}

impl<'a> LogLines<'a> {
    /// Lines go to `sink`, at most one per second (plus the closing line).
    pub fn new(sink: &'a mut dyn FnMut(&str)) -> Self {
        LogLines::every(sink, Duration::from_secs(1))
    }

    /// Lines go to `sink`, at most one per `every` (zero: one per round).
    pub fn every(sink: &'a mut dyn FnMut(&str), every: Duration) -> Self {
        LogLines {
            sink,
            every,
            last: None,
            printed: None,
            requests: None,
            printed_requests: None,
            round: (0, 0, "-".to_string()),
        }
    }

    fn line(&mut self, task: &Task, elapsed_s: f64) {
        let (done, proposed, best) = &self.round;
        let mut text = format!(
            "[{elapsed_s:7.1}s] {}, {proposed} proposed, best {best}",
            done_text(task, *done)
        );
        if let Some(r) = &self.requests {
            text.push_str(", ");
            text.push_str(&requests_text(r));
        }
        self.printed = Some(*done);
        self.printed_requests = self.requests;
        self.last = Some(Instant::now());
        (self.sink)(&text);
    }

    fn throttled(&self) -> bool {
        self.last.is_some_and(|t| t.elapsed() < self.every)
    }
}

impl Observer for LogLines<'_> {
    fn on_event(&mut self, _event: &Event) -> Result<()> {
        Ok(())
    }

    fn on_round(&mut self, task: &Task, events: &[Event], stream: &StreamStats, elapsed_s: f64) {
        self.round = (events.len(), stream.proposed, best_text(task, events));
        if !self.throttled() {
            self.line(task, elapsed_s);
        }
    }

    fn on_requests(&mut self, task: &Task, requests: &RequestStats, elapsed_s: f64) {
        self.requests = Some(*requests);
        if self.printed_requests != self.requests && !self.throttled() {
            self.line(task, elapsed_s);
        }
    }

    fn on_finish(&mut self, task: &Task, outcome: &Outcome) {
        self.round = (
            outcome.events.len(),
            outcome.stream.proposed,
            best_text(task, &outcome.events),
        );
        if self.printed != Some(outcome.events.len()) || self.printed_requests != self.requests {
            self.line(task, outcome.elapsed);
        }
        (self.sink)(&format!(
            "stopped: {}",
            serde_json::to_value(outcome.stop)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        ));
    }
}

/// An indicatif progress bar on stderr: calibrations done / budget (a spinner without a
/// calibration budget), the best score so far, the elapsed time, and the llm requests in flight
/// and failed when there are any.
pub struct Bar {
    bar: ProgressBar,
    /// The best score shown, and the latest request counts.
    best: String,
    requests: Option<RequestStats>,
}

impl Bar {
    /// A bar drawing to stderr (hidden by indicatif when stderr is not a terminal).
    pub fn stderr() -> Bar {
        Bar::with_target(ProgressDrawTarget::stderr())
    }

    /// A bar drawing to `target`.
    pub fn with_target(target: ProgressDrawTarget) -> Bar {
        let bar = ProgressBar::with_draw_target(None, target);
        Bar {
            bar,
            best: "-".to_string(),
            requests: None,
        }
    }

    fn show(&mut self) {
        let mut msg = self.best.clone();
        if let Some(r) = &self.requests {
            msg.push_str(&format!(
                " | llm {} in flight, {} failed, {} retried",
                r.in_flight, r.failed, r.retried
            ));
        }
        self.bar.set_message(msg);
    }
}

impl Observer for Bar {
    fn on_start(&mut self, task: &Task, known: usize) {
        let style = match task.budget_calibrations {
            Some(b) => {
                self.bar.set_length(b as u64);
                ProgressStyle::with_template(
                    "{spinner} {elapsed_precise} [{wide_bar:.cyan/blue}] {pos}/{len} calibrations, best {msg}",
                )
            }
            None => ProgressStyle::with_template(
                "{spinner} {elapsed_precise} {pos} calibrations, best {msg}",
            ),
        };
        if let Ok(style) = style {
            self.bar.set_style(style.progress_chars("=> "));
        }
        self.bar.set_position(known as u64);
        self.bar.set_message("-");
        self.bar.enable_steady_tick(Duration::from_millis(200));
    }

    fn on_event(&mut self, _event: &Event) -> Result<()> {
        Ok(())
    }

    fn on_round(&mut self, task: &Task, events: &[Event], _stream: &StreamStats, _elapsed_s: f64) {
        self.bar.set_position(events.len() as u64);
        self.best = short_best(task, events);
        self.show();
    }

    fn on_requests(&mut self, _task: &Task, requests: &RequestStats, _elapsed_s: f64) {
        if self.requests.as_ref() != Some(requests) {
            self.requests = Some(*requests);
            self.show();
        }
    }

    fn on_finish(&mut self, task: &Task, outcome: &Outcome) {
        self.bar.set_position(outcome.events.len() as u64);
        self.best = short_best(task, &outcome.events);
        self.show();
        // `abandon` keeps the last state on screen (`finish` would fill the bar to its length).
        self.bar.abandon();
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if !self.bar.is_finished() {
            self.bar.abandon();
        }
    }
}

/// How a run shows its progress on stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProgressMode {
    /// A bar when stderr is a terminal, plain lines otherwise.
    #[default]
    Auto,
    /// Plain lines.
    Lines,
    /// Nothing (`-q`).
    Quiet,
}

/// The progress observer for `mode`; lines go to `sink`.
pub fn progress<'a>(mode: ProgressMode, sink: &'a mut dyn FnMut(&str)) -> Box<dyn Observer + 'a> {
    match mode {
        ProgressMode::Quiet => Box::new(Nothing),
        ProgressMode::Auto if std::io::stderr().is_terminal() => Box::new(Bar::stderr()),
        ProgressMode::Auto | ProgressMode::Lines => Box::new(LogLines::new(sink)),
    }
}

/// Observes nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Nothing;

impl Observer for Nothing {
    fn on_event(&mut self, _event: &Event) -> Result<()> {
        Ok(())
    }
}

/// Forwards to several observers.
pub struct Fanout<'a>(pub Vec<&'a mut dyn Observer>);

impl Observer for Fanout<'_> {
    fn on_start(&mut self, task: &Task, known: usize) {
        for o in &mut self.0 {
            o.on_start(task, known);
        }
    }

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

    fn on_requests(&mut self, task: &Task, requests: &RequestStats, elapsed_s: f64) {
        for o in &mut self.0 {
            o.on_requests(task, requests, elapsed_s);
        }
    }

    fn on_finish(&mut self, task: &Task, outcome: &Outcome) {
        for o in &mut self.0 {
            o.on_finish(task, outcome);
        }
    }
}
