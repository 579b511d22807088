//! The settings a task left out that were chosen for it from its data, in one place: each is
//! recorded here when the task is resolved, printed once when the run starts and written to
//! `summary.json` (`defaults`), so a user sees every choice and can override it by writing the
//! key. (The rule-based defaults that depend on nothing, `CalibrateConfig::recommended()` and the
//! proposer's, are documented in `tasks/README.md`.)

use super::*;

/// One setting chosen from the data (fields in alphabetical order, the summary's key order).
#[derive(Clone, Debug, PartialEq, serde::Serialize, Deserialize)]
pub struct ChosenDefault {
    /// The task key it stands for, as written in a task file (`data.screen_rows`).
    pub key: String,
    /// The line the run prints: what was chosen and why.
    pub note: String,
    /// The value chosen, as it would be written.
    pub value: String,
}

/// The defaults chosen from the data of a resolved task: today the row screen of a large
/// training table (`data.screen_rows` absent, more than [`AUTO_SCREEN_ABOVE`] rows).
pub(super) fn chosen(screen: Option<&Screen>, train: &Table) -> Vec<ChosenDefault> {
    let mut out = Vec::new();
    if let Some(s) = screen.filter(|s| s.automatic) {
        out.push(ChosenDefault {
            key: "data.screen_rows".to_string(),
            note: screen_line(s, train),
            value: s.rows().to_string(),
        });
    }
    out
}

/// The line a run prints when it screens candidates on a row sample.
pub(super) fn screen_line(s: &Screen, train: &Table) -> String {
    format!(
        "screening each candidate on {} of {} training rows{}, then refitting it on all of them (data.screen_rows; 'off' fits on all rows)",
        s.rows(),
        train.n_rows(),
        if s.automatic {
            format!(", the default above {AUTO_SCREEN_ABOVE} rows")
        } else {
            String::new()
        },
    )
}
