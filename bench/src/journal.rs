//! The suite's run journal, `<out>/suite-runs.jsonl`: one line per finished run, appended and
//! synced the moment the run ends, so a killed suite loses at most the run in progress, and a
//! rerun into the same `<out>` reuses every run whose [`RunKey`] matches instead of spending its
//! minutes again.
//!
//! A key names the run (tool, problem, noise, seed, seconds, threads, calibration cap), a digest
//! of what the tool reads (pyoperon: the CSV files; this project: those and the task file, so a
//! `--task-keys` change reruns only this project; pyoperon: also its script) and the code that
//! ran: pyoperon's versions line, or this project's version, build profile and a digest of the
//! committed sources it is built from (`suite::ndvm_code`). A run from sources with uncommitted
//! changes has no code identity and is never reused. A line that does not parse (the torn end of a killed
//! write) is skipped and counted.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::search::Tool;
use crate::suite::SuiteRun;
use ndvm_search::{Result, SearchError};

/// The journal's file name under `<out>`.
pub const JOURNAL_FILE: &str = "suite-runs.jsonl";

/// What identifies one run: a journaled run with an equal key is reused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunKey {
    /// The tool.
    pub tool: Tool,
    /// The problem's name.
    pub problem: String,
    /// The noise level as the table shows it (`0`, `0.01`, `data`).
    pub noise: String,
    /// The seed.
    pub seed: u64,
    /// Wall-clock seconds of the run.
    pub seconds: f64,
    /// Threads of the run.
    pub threads: usize,
    /// The calibration cap of this project's run (smoke runs).
    pub calibrations: Option<usize>,
    /// FNV-1a (hex) of the bytes the tool reads.
    pub inputs: String,
    /// The code that ran; absent: not reusable (uncommitted changes, or no checkout).
    pub code: Option<String>,
}

/// One journaled run: its key and its result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Entry {
    #[serde(flatten)]
    key: RunKey,
    result: SuiteRun,
}

/// The journal of one `<out>` folder: the runs read at open, and the file new runs go to.
pub struct Journal {
    path: PathBuf,
    entries: Vec<Entry>,
    file: File,
    /// Lines that did not parse when it was opened.
    pub skipped: usize,
}

fn write_error(source: std::io::Error) -> SearchError {
    SearchError::Write { source }
}

impl Journal {
    /// Opens (or creates) `<out_dir>/suite-runs.jsonl` and reads the runs it holds.
    pub fn open(out_dir: &Path) -> Result<Journal> {
        std::fs::create_dir_all(out_dir).map_err(write_error)?;
        let path = out_dir.join(JOURNAL_FILE);
        let text = match std::fs::read(&path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(source) => {
                return Err(SearchError::Read { path, source });
            }
        };
        let mut entries = Vec::new();
        let mut skipped = 0;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<Entry>(line) {
                Ok(e) => entries.push(e),
                Err(_) => skipped += 1,
            }
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(write_error)?;
        // A torn last line (a kill mid-write) must not glue itself to the next entry.
        if !text.is_empty() && !text.ends_with('\n') {
            file.write_all(b"\n").map_err(write_error)?;
        }
        Ok(Journal {
            path,
            entries,
            file,
            skipped,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs read at open.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it held no run at open.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The latest journaled result of `key`, when the key has a code identity.
    pub fn find(&self, key: &RunKey) -> Option<SuiteRun> {
        key.code.as_ref()?;
        self.entries
            .iter()
            .rev()
            .find(|e| e.key == *key)
            .map(|e| e.result.clone())
    }

    /// Appends `key` and `result` as one line and syncs it to disk.
    pub fn record(&mut self, key: RunKey, result: SuiteRun) -> Result<()> {
        let entry = Entry { key, result };
        let mut line = serde_json::to_string(&entry).map_err(|e| SearchError::BadArgument {
            arg: self.path.display().to_string(),
            message: format!("cannot write a journal line: {e}"),
        })?;
        line.push('\n');
        self.file.write_all(line.as_bytes()).map_err(write_error)?;
        self.file.sync_data().map_err(write_error)?;
        self.entries.push(entry);
        Ok(())
    }
}

/// FNV-1a (hex) of the files' bytes, each preceded by its length.
pub fn digest(files: &[&Path]) -> Result<String> {
    let mut all = Vec::new();
    for path in files {
        let bytes = std::fs::read(path).map_err(|source| SearchError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        all.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        all.extend_from_slice(&bytes);
    }
    Ok(format!("{:016x}", crate::suite::fnv1a(&all)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::{SeedRun, Tables};

    fn key(seed: u64, code: Option<&str>) -> RunKey {
        RunKey {
            tool: Tool::Pyoperon,
            problem: "cubic".into(),
            noise: "0.01".into(),
            seed,
            seconds: 60.0,
            threads: 2,
            calibrations: None,
            inputs: "00000000deadbeef".into(),
            code: code.map(String::from),
        }
    }

    fn result(seed: u64, nmse: f64) -> SuiteRun {
        let mut run = SeedRun::failed(seed, 1.5, &["test_id", "truth"], String::new());
        run.error = None;
        run.nmse = Tables::from_names(&["test_id", "truth"], |_| Some(nmse));
        run.model = Some("x*x".into());
        SuiteRun {
            run,
            size: Some(3),
            recovered: Some(nmse < 1e-5),
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ndvm-journal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_recorded_run_is_found_after_reopening_and_a_changed_key_is_not() {
        let dir = scratch("reopen");
        let mut j = Journal::open(&dir).unwrap();
        assert!(j.is_empty());
        j.record(key(1, Some("pyoperon 0.5.0")), result(1, 0.25))
            .unwrap();
        j.record(key(2, Some("pyoperon 0.5.0")), result(2, 1e-7))
            .unwrap();
        drop(j);
        let j = Journal::open(&dir).unwrap();
        assert_eq!((j.len(), j.skipped), (2, 0));
        assert_eq!(
            j.find(&key(1, Some("pyoperon 0.5.0"))),
            Some(result(1, 0.25))
        );
        assert_eq!(
            j.find(&key(2, Some("pyoperon 0.5.0"))),
            Some(result(2, 1e-7))
        );
        assert_eq!(j.find(&key(3, Some("pyoperon 0.5.0"))), None);
        assert_eq!(j.find(&key(1, Some("pyoperon 0.6.0"))), None);
        let mut longer = key(1, Some("pyoperon 0.5.0"));
        longer.seconds = 20.0;
        assert_eq!(j.find(&longer), None);
        let mut other_data = key(1, Some("pyoperon 0.5.0"));
        other_data.inputs = "00000000deadbeee".into();
        assert_eq!(j.find(&other_data), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_run_without_code_identity_is_never_reused() {
        let dir = scratch("dirty");
        let mut j = Journal::open(&dir).unwrap();
        j.record(key(1, None), result(1, 0.5)).unwrap();
        assert_eq!(j.find(&key(1, None)), None);
        drop(j);
        assert_eq!(Journal::open(&dir).unwrap().find(&key(1, None)), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_the_next_run_starts_a_fresh_line() {
        let dir = scratch("torn");
        let mut j = Journal::open(&dir).unwrap();
        j.record(key(1, Some("v")), result(1, 0.5)).unwrap();
        drop(j);
        let path = dir.join(JOURNAL_FILE);
        let mut text = std::fs::read_to_string(&path).unwrap();
        let whole = text.clone();
        text.push_str(&whole[..whole.len() / 2]);
        std::fs::write(&path, &text).unwrap();
        let mut j = Journal::open(&dir).unwrap();
        assert_eq!((j.len(), j.skipped), (1, 1));
        j.record(key(2, Some("v")), result(2, 0.125)).unwrap();
        drop(j);
        let j = Journal::open(&dir).unwrap();
        assert_eq!((j.len(), j.skipped), (2, 1));
        assert_eq!(j.find(&key(2, Some("v"))), Some(result(2, 0.125)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_digest_covers_every_byte_and_the_file_boundaries() {
        let dir = scratch("digest");
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::write(&a, "x,f\n1,2\n").unwrap();
        std::fs::write(&b, "3\n").unwrap();
        let one = digest(&[&a, &b]).unwrap();
        assert_eq!(one.len(), 16);
        assert_eq!(one, digest(&[&a, &b]).unwrap());
        assert_ne!(one, digest(&[&b, &a]).unwrap());
        // The same bytes split differently between the files.
        std::fs::write(&a, "x,f\n1,2\n3").unwrap();
        std::fs::write(&b, "\n").unwrap();
        assert_ne!(one, digest(&[&a, &b]).unwrap());
        assert!(digest(&[&dir.join("missing")]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
