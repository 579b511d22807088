//! `SearchError`: every failure of the search layer (files, bindings, data, program diagnostics).

use std::io;
use std::path::PathBuf;

use ndvm_core::CoreError;
use ndvm_frontends::ParseError;

/// A failure of the search layer. Program problems arrive already rendered as
/// `file:line:col: error[CODE]: message` diagnostics.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// A file could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },
    /// A file is larger than the limit on what is read of it.
    #[error("{}: larger than the limit of {limit} bytes; {raise}", path.display())]
    FileTooLarge {
        /// The file.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
        /// How to raise the limit, lowercase.
        raise: String,
    },
    /// A text file holds bytes that are not UTF-8.
    #[error("{}: not UTF-8 (invalid byte at offset {offset})", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// Output could not be written (a closed pipe shows up here as `BrokenPipe`).
    #[error("cannot write output")]
    Write {
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },
    /// A result file (summary, report, run folder file) could not be written.
    #[error("cannot write {}", path.display())]
    WriteFile {
        /// The file.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },
    /// A CSV data file is malformed.
    #[error("{}{}: {problem}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Csv {
        /// The file.
        path: PathBuf,
        /// One-based number of the offending line; `None` when the whole file is at fault.
        line: Option<usize>,
        /// What is wrong, with the row and column where one is at fault.
        problem: CsvProblem,
    },
    /// A line of a candidate cache (JSONL) is malformed.
    #[error("{}:{line}: {message}", path.display())]
    CacheLine {
        /// The cache file.
        path: PathBuf,
        /// One-based line number.
        line: usize,
        /// What is wrong, lowercase.
        message: String,
    },
    /// A command-line argument such as `--bind q=0.05` or `--lanes 0` is malformed.
    #[error("bad argument `{arg}`: {message}")]
    BadArgument {
        /// The argument as given.
        arg: String,
        /// What is wrong, lowercase.
        message: String,
    },
    /// `calibrate` found nothing to fit: the program declares no `(params …)` and `--params` is
    /// absent.
    #[error(
        "{}: no parameters to fit: declare them in the program with `(params (name kind init) …)` or name them with `--params NAME[,NAME…]`",
        program.display()
    )]
    NoParameters {
        /// The program file.
        program: PathBuf,
    },
    /// The same name was bound twice (by `--bind`, `--input` or `--data`).
    #[error("`{name}` is bound more than once")]
    DuplicateBinding {
        /// The name.
        name: String,
    },
    /// A per-lane binding has a value count different from the lane count.
    #[error("`{name}` has {found} values but there are {n_lanes} lanes")]
    LaneCount {
        /// The binding name.
        name: String,
        /// How many values it has.
        found: usize,
        /// How many lanes the run has.
        n_lanes: usize,
    },
    /// The program text does not parse; `rendered` is the full diagnostic with file, line and column.
    #[error("{rendered}")]
    Parse {
        /// The front end's error.
        error: ParseError,
        /// The rendered diagnostic.
        rendered: String,
    },
    /// The calibrator rejected the settings or the data.
    #[error("{error}")]
    Calibrate {
        /// The calibrator's error.
        error: ndvm_optimizers::CalibrateError,
    },
    /// A task spec is malformed: unknown key, bad value, or inconsistent settings (`file: …`
    /// without a place, for a task built in code or a whole-task problem).
    #[error("{}{}: {message}", path.display(), line_col(*line, *column))]
    Task {
        /// The task file.
        path: PathBuf,
        /// One-based line (0 when unknown).
        line: u64,
        /// One-based column (0 when unknown).
        column: u64,
        /// What is wrong.
        message: String,
    },
    /// A run folder (events, summary, checkpoint) is unusable or inconsistent with the task.
    #[error("{}: {message}", path.display())]
    RunFolder {
        /// The folder or file.
        path: PathBuf,
        /// What is wrong, lowercase.
        message: String,
    },
    /// A scheduler client (`sbatch`, `squeue`, `scancel`) failed or could not be run.
    #[error("{command}: {message}")]
    Scheduler {
        /// The command line as run.
        command: String,
        /// Its error output, or why it could not start.
        message: String,
    },
    /// A proposer could not produce candidates (no API key, the cache cannot be written, …).
    #[error("{proposer} proposer: {message}")]
    Proposer {
        /// The proposer (`llm`).
        proposer: &'static str,
        /// What is wrong.
        message: String,
    },
    /// No registered front end has this name.
    #[error("{message}")]
    UnknownFrontend {
        /// The name and the known names.
        message: String,
    },
    /// The evaluator rejected the program; `rendered` is the full diagnostic with file, line and column.
    #[error("{rendered}")]
    Eval {
        /// The evaluator's error.
        error: CoreError,
        /// The rendered diagnostic.
        rendered: String,
    },
}

/// What is wrong with a CSV table (the detail of [`SearchError::Csv`]). Columns are one-based
/// numbers where the header may be missing, names where the table has one.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CsvProblem {
    /// A row has a different number of fields than the first row (or the header).
    #[error("expected {expected} fields, found {found}")]
    FieldCount {
        /// Fields of the first row.
        expected: usize,
        /// Fields of this row.
        found: usize,
    },
    /// A field is empty.
    #[error("column {column}: empty field")]
    EmptyField {
        /// One-based column number.
        column: usize,
    },
    /// A field is not a number.
    #[error("column {column}: `{field}` is not a number")]
    NotANumber {
        /// One-based column number.
        column: usize,
        /// The field as written.
        field: String,
    },
    /// A value the table needs is NaN or infinite.
    #[error(
        "column `{column}` of data row {row} is {value}, not a finite number (set `data.drop_nonfinite: true` to drop such rows)"
    )]
    NonFinite {
        /// The column's name.
        column: String,
        /// One-based data row (header not counted).
        row: usize,
        /// The value.
        value: f64,
    },
    /// Every row has a non-finite value in a column the table needs.
    #[error("every row has a non-finite input or target")]
    AllNonFinite,
    /// The file holds no data rows.
    #[error("no data rows")]
    NoRows,
    /// The table needs a header line naming its columns and has none.
    #[error("the first line must name the columns")]
    NoHeader,
    /// A column name appears twice in the header.
    #[error("column `{name}` appears twice")]
    DuplicateColumn {
        /// The name.
        name: String,
    },
    /// A column the command or task names is not in the header.
    #[error("no {role} column `{name}` (the columns are {})", columns.join(", "))]
    MissingColumn {
        /// What the column is for: `input`, `target` or `weight`.
        role: &'static str,
        /// The name looked for.
        name: String,
        /// The header.
        columns: Vec<String>,
    },
    /// The CSV reader rejected the text.
    #[error("{message}")]
    Malformed {
        /// The reader's message.
        message: String,
    },
}

/// Result alias for this crate.
pub type Result<T, E = SearchError> = std::result::Result<T, E>;

/// How a binary ends on an error whose chain (the error, then its causes) is `chain`: the line to
/// print on stderr (redacted; `None` for a closed pipe, which is a quiet success) and the exit
/// status: 2 for a usage error (a bad argument, lane count, binding or calibrator setting), 1
/// otherwise, 0 for a closed pipe. A rendered program diagnostic (`file:line:col: error[CODE]`
/// with its excerpt) is printed as it is, anything else after `error: `.
pub fn exit_report<'a>(
    chain: impl IntoIterator<Item = &'a (dyn std::error::Error + 'static)>,
) -> (Option<String>, u8) {
    let chain: Vec<&(dyn std::error::Error + 'static)> = chain.into_iter().collect();
    let broken_pipe = chain.iter().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    });
    if broken_pipe {
        return (None, 0);
    }
    let text = chain
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(": ");
    let top = chain.first().and_then(|e| e.downcast_ref::<SearchError>());
    let diagnostic = matches!(
        top,
        Some(SearchError::Parse { .. } | SearchError::Eval { .. })
    );
    let usage = matches!(
        top,
        Some(
            SearchError::BadArgument { .. }
                | SearchError::LaneCount { .. }
                | SearchError::DuplicateBinding { .. }
                | SearchError::NoParameters { .. }
                | SearchError::Calibrate {
                    error: ndvm_optimizers::CalibrateError::InvalidConfig { .. }
                }
        )
    );
    let text = crate::secret::redacted(&text);
    let line = if diagnostic {
        text
    } else {
        format!("error: {text}")
    };
    (Some(line), if usage { 2 } else { 1 })
}

/// `:line:col`, or nothing when the place is unknown (line 0).
fn line_col(line: u64, column: u64) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(":{line}:{column}")
    }
}

/// `e`'s message followed by each of its causes (`cannot read data.csv: No such file or
/// directory (os error 2)`), for messages that carry an error as text.
pub fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_report_maps_errors_to_lines_and_statuses() {
        let bad = SearchError::BadArgument {
            arg: "--x".into(),
            message: "no".into(),
        };
        assert_eq!(
            exit_report([&bad as &(dyn std::error::Error + 'static)]),
            (Some("error: bad argument `--x`: no".to_string()), 2)
        );
        let read = SearchError::Read {
            path: "d.csv".into(),
            source: io::Error::new(io::ErrorKind::NotFound, "gone"),
        };
        let chain: Vec<&(dyn std::error::Error + 'static)> =
            vec![&read, std::error::Error::source(&read).unwrap()];
        assert_eq!(
            exit_report(chain),
            (Some("error: cannot read d.csv: gone".to_string()), 1)
        );
        let pipe = io::Error::new(io::ErrorKind::BrokenPipe, "closed");
        assert_eq!(
            exit_report([&pipe as &(dyn std::error::Error + 'static)]),
            (None, 0)
        );
        crate::secret::register("sk-exit-report-canary");
        let leak = SearchError::BadArgument {
            arg: "key".into(),
            message: "sk-exit-report-canary".into(),
        };
        let (line, _) = exit_report([&leak as &(dyn std::error::Error + 'static)]);
        assert!(!line.unwrap().contains("canary"));
    }

    #[test]
    fn search_error_is_send_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<super::SearchError>();
        assert_send_sync::<super::CsvProblem>();
    }
}
