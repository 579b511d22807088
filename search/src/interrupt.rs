//! Stopping a run cleanly: an [`Interrupt`] flag the engine checks before each calibration (and,
//! raised with `cancel_in_flight`, the calibrations in flight at each evaluation),
//! raised by Ctrl-C (SIGINT) or SIGTERM through the `ctrlc` crate, and the hint that tells how to
//! resume the run folder.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Result, SearchError};

/// A shared "stop after the calibrations in flight" flag.
#[derive(Clone, Debug, Default)]
pub struct Interrupt(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    /// How many times it was raised.
    raised: AtomicUsize,
    /// The run folder, once known (for the resume hint).
    dir: Mutex<Option<PathBuf>>,
    /// Raised to stop the calibrations in flight too (see [`Interrupt::cancel_in_flight`]).
    in_flight: ndvm_core::Cancel,
}

impl Interrupt {
    /// A flag nothing raises yet (tests raise it by hand).
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Installs the process's Ctrl-C and SIGTERM handler and returns its flag. The first signal
    /// raises the flag: no new calibration starts, those in flight finish and are logged, and the
    /// summary is written. A second signal ends the process at once (exit code 130) after
    /// printing the resume hint; every finished calibration is already in `events.jsonl`.
    pub fn on_ctrl_c() -> Result<Interrupt> {
        let flag = Interrupt::new();
        let handler_flag = flag.clone();
        ctrlc::set_handler(move || {
            if handler_flag.raise() == 1 {
                eprintln!(
                    "interrupted: finishing the calibrations in flight (press Ctrl-C again to stop now)"
                );
            } else {
                if let Some(hint) = handler_flag.resume_hint() {
                    eprintln!("{hint}");
                }
                std::process::exit(130);
            }
        })
        .map_err(|e| SearchError::BadArgument {
            arg: "Ctrl-C handler".to_string(),
            message: e.to_string(),
        })?;
        Ok(flag)
    }

    /// Raises the flag; returns how many times it has been raised, this time included.
    pub fn raise(&self) -> usize {
        self.0.raised.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Whether the flag was raised.
    pub fn is_raised(&self) -> bool {
        self.0.raised.load(Ordering::SeqCst) > 0
    }

    /// Raises the flag and stops the calibrations in flight as well, at their next evaluation
    /// (rather than letting them finish): a calibration cut this way is left unfinished, not
    /// logged, exactly as a resume expects. For a caller that must answer at once (the Python
    /// binding's Ctrl-C).
    pub fn cancel_in_flight(&self) {
        self.raise();
        self.0.in_flight.raise();
    }

    /// The flag the calibrations in flight watch (raised by [`Interrupt::cancel_in_flight`]).
    pub fn in_flight(&self) -> &ndvm_core::Cancel {
        &self.0.in_flight
    }

    /// Records the run folder the hint names.
    pub fn set_run_dir(&self, dir: &Path) {
        // A poisoned lock only means a thread panicked while holding it; the path is still usable.
        *self.0.dir.lock().unwrap_or_else(|p| p.into_inner()) = Some(dir.to_path_buf());
    }

    /// `interrupted; resume with: ndvm-search run --resume DIR`, once the run folder is known.
    pub fn resume_hint(&self) -> Option<String> {
        let dir = self
            .0
            .dir
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()?;
        Some(resume_hint(&dir))
    }
}

/// `interrupted; resume with: ndvm-search run --resume DIR` (DIR quoted for a shell when needed).
pub fn resume_hint(dir: &Path) -> String {
    let text = dir.display().to_string();
    let plain = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c));
    let arg = if plain && !text.is_empty() {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    };
    format!("interrupted; resume with: ndvm-search run --resume {arg}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_names_the_folder_quoted_for_a_shell() {
        assert_eq!(
            resume_hint(Path::new("results/symreg-20260101-120000")),
            "interrupted; resume with: ndvm-search run --resume results/symreg-20260101-120000"
        );
        assert_eq!(
            resume_hint(Path::new("my runs/it's")),
            r"interrupted; resume with: ndvm-search run --resume 'my runs/it'\''s'"
        );
        let flag = Interrupt::new();
        assert_eq!(flag.resume_hint(), None);
        assert!(!flag.is_raised());
        flag.set_run_dir(Path::new("out"));
        assert_eq!(flag.raise(), 1);
        assert_eq!(flag.clone().raise(), 2);
        assert!(flag.is_raised());
        assert!(!flag.in_flight().is_raised());
        flag.clone().cancel_in_flight();
        assert!(flag.in_flight().is_raised());
        assert_eq!(
            flag.resume_hint().as_deref(),
            Some("interrupted; resume with: ndvm-search run --resume out")
        );
    }
}
