//! Process isolation (`isolation: process`): each calibration runs in a fresh `ndvm-search worker`
//! process under `ulimit -v` and `ulimit -t`; the parent reads its event back, or records the
//! candidate as `crashed` when the worker dies, so even a native abort costs one candidate only.

use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ndvm_core::Cancel;

use serde::{Deserialize, Serialize};

use crate::engine::{self, Event, Pending};
use crate::error::{Result, SearchError};
use crate::task::{self, Task};

/// What the parent sends a worker on its standard input (one JSON object).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WorkerRequest {
    /// The task file (the worker loads it; loading is deterministic).
    task: PathBuf,
    /// The candidate.
    pending: Pending,
    /// Seconds left of the run's wall-clock budget, if any.
    budget_left_s: Option<f64>,
}

/// Address space a worker may map beyond the evaluator's memory limit (code, stacks, buffers).
const WORKER_SLACK_BYTES: u64 = 512 * 1024 * 1024;

/// Runs one calibration in a worker process and returns its event.
/// A raised `cancel` kills the worker (the caller then discards the event).
pub(crate) fn calibrate_in_process(
    task: &Task,
    p: &Pending,
    deadline: Option<Instant>,
    cancel: Option<&Cancel>,
) -> Event {
    let started = Instant::now();
    let budget_left_s = deadline.map(|d| d.saturating_duration_since(started).as_secs_f64());
    let mut ev = match spawn_and_wait(task, p, budget_left_s, cancel) {
        Ok(ev) => ev,
        Err(message) => {
            let mut ev = engine::blank_event(task, p);
            ev.status = engine::EventStatus::Crashed;
            ev.error_class = Some("crashed".to_string());
            ev.error = Some(message);
            ev
        }
    };
    ev.wall_ms = started.elapsed().as_secs_f64() * 1e3;
    ev
}

fn spawn_and_wait(
    task: &Task,
    p: &Pending,
    budget_left_s: Option<f64>,
    cancel: Option<&Cancel>,
) -> std::result::Result<Event, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find ndvm-search: {e}"))?;
    let memory_kb = (task.calibrate.max_memory.saturating_mul(2) + WORKER_SLACK_BYTES) / 1024;
    let seconds = task.limits.seconds;
    let cpu_s = seconds.ceil() as u64 + 5;
    let request = WorkerRequest {
        task: std::path::absolute(&task.path).unwrap_or_else(|_| task.path.clone()),
        pending: p.clone(),
        budget_left_s,
    };
    let line = serde_json::to_string(&request).map_err(|e| e.to_string())?;
    // `sh` sets the OS limits for the worker alone, with no unsafe code in this process.
    let mut command = Command::new("sh");
    // A process group of its own: Ctrl-C at the terminal interrupts the run, which lets the
    // calibrations in flight finish, rather than killing them as crashes.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command
        .arg("-c")
        .arg(format!(
            "ulimit -v {memory_kb} && ulimit -t {cpu_s} && exec \"$0\" worker"
        ))
        .arg(&exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start a worker process: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(line.as_bytes());
    }
    let mut stdout = child.stdout.take().ok_or("no worker stdout")?;
    let mut stderr = child.stderr.take().ok_or("no worker stderr")?;
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        let mut err = String::new();
        let _ = stderr.read_to_string(&mut err);
        (out, err)
    });
    // The worker enforces its own deadline; this is the backstop for one that stops answering.
    let wall = Duration::from_secs_f64(seconds + 5.0);
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if cancel.is_some_and(Cancel::is_raised) => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = reader.join();
                return Err("cancelled: the worker process was stopped".to_string());
            }
            Ok(None) if started.elapsed() > wall => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = reader.join();
                return Err(format!(
                    "the worker process did not finish within {wall:?} and was killed"
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(format!("waiting for the worker process: {e}")),
        }
    };
    let (out, err) = reader.join().map_err(|_| "the worker reader failed")?;
    if !status.success() {
        let last = err.lines().last().unwrap_or("").trim();
        return Err(format!(
            "the worker process died ({status}){}",
            if last.is_empty() {
                String::new()
            } else {
                format!(": {last}")
            }
        ));
    }
    serde_json::from_str(out.trim()).map_err(|e| format!("unreadable worker answer: {e}"))
}

/// The `worker` command: reads one [`WorkerRequest`] from `input`, calibrates, returns the event
/// as one JSON line.
pub fn serve(input: &str) -> Result<String> {
    let req: WorkerRequest = serde_json::from_str(input).map_err(|e| SearchError::BadArgument {
        arg: "worker request".to_string(),
        message: e.to_string(),
    })?;
    let task = task::load(&req.task)?;
    let deadline = req
        .budget_left_s
        .map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    engine::abort_if_hooked(req.pending.index);
    let ev = engine::calibrate_one(&task, &req.pending, deadline, None);
    serde_json::to_string(&ev).map_err(|e| SearchError::BadArgument {
        arg: "worker answer".to_string(),
        message: e.to_string(),
    })
}
