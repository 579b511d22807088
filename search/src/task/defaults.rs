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

/// The defaults chosen from the data of a resolved task: the row screen of a large training
/// table (`data.screen_rows` absent, more than [`AUTO_SCREEN_ABOVE`] rows) and, for an evolving
/// search that names no `factors`, the named factor shapes, started at each input's centre and
/// spread in the training rows.
pub(super) fn chosen(
    screen: Option<&Screen>,
    train: &Table,
    shapes: Option<&[FactorShape]>,
    inputs: &[String],
) -> Vec<ChosenDefault> {
    let mut out = Vec::new();
    if let Some(shapes) = shapes {
        out.push(factors_default(shapes, train, inputs));
    }
    if let Some(s) = screen.filter(|s| s.automatic) {
        out.push(ChosenDefault {
            key: "data.screen_rows".to_string(),
            note: screen_line(s, train),
            value: s.rows().to_string(),
        });
    }
    out
}

/// The default factor shapes, with the centre and spread of each input they start from.
fn factors_default(shapes: &[FactorShape], train: &Table, inputs: &[String]) -> ChosenDefault {
    let names: Vec<&str> = shapes
        .iter()
        .filter_map(|s| {
            FactorShape::ALL
                .iter()
                .find(|(_, k)| k == s)
                .map(|(n, _)| *n)
        })
        .collect();
    let centres: Vec<String> = inputs
        .iter()
        .zip(&train.columns)
        .map(|(name, col)| {
            let (c, s) = spread(col);
            format!("{name} {c:.3} ± {s:.3}")
        })
        .collect();
    ChosenDefault {
        key: "proposer.factors".to_string(),
        note: format!(
            "drawing factors of named shapes ({}), started at each input's centre and spread in \
             the training rows ({}), each shape as often as it improves the population \
             (proposer.factors; [] draws factors with fresh constants)",
            names.join(", "),
            centres.join(", ")
        ),
        value: format!("[{}]", names.join(", ")),
    }
}

/// A column's mean and standard deviation (1 where it is zero or not finite; 0 and 1 for an
/// empty column).
pub(crate) fn spread(column: &[f64]) -> (f64, f64) {
    if column.is_empty() {
        return (0.0, 1.0);
    }
    let n = column.len() as f64;
    let mean = column.iter().sum::<f64>() / n;
    let var = column.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    let sd = var.sqrt();
    match (mean.is_finite(), sd.is_finite() && sd > 0.0) {
        (true, true) => (mean, sd),
        (true, false) => (mean, 1.0),
        _ => (0.0, 1.0),
    }
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
