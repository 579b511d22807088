//! `begun.jsonl`, the crash log of a run folder: a `begin` line is written (and flushed) before
//! each calibration and an `end` line after it, so a process that dies mid-candidate leaves the
//! candidates it was running named on disk. Beneath the engine, which writes it;
//! `results::read_crashes` reads it back.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Result, SearchError};

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
            .map_err(|source| SearchError::Read { path, source })?;
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
