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
    /// A CSV data file is malformed.
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Csv {
        /// The file.
        path: PathBuf,
        /// One-based number of the offending line; `None` when the whole file is at fault.
        line: Option<usize>,
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
    /// A task spec is malformed: unknown key, bad value, or inconsistent settings.
    #[error("{}:{line}:{column}: {message}", path.display())]
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
    /// A proposer could not produce candidates (no API key, the cache cannot be written, …).
    #[error("{proposer} proposer: {message}")]
    Proposer {
        /// The proposer (`llm`).
        proposer: &'static str,
        /// What is wrong.
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

/// Result alias for this crate.
pub type Result<T, E = SearchError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    #[test]
    fn search_error_is_send_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<super::SearchError>();
    }
}
