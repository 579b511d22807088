//! The fuzzer's one error type: reading and writing regression files.

use std::path::{Path, PathBuf};

/// A failure of the fuzzer itself (never a finding about the runtime).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FuzzError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A regression file is malformed.
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl FuzzError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        FuzzError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn format(path: &Path, message: impl Into<String>) -> Self {
        FuzzError::Format {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

/// Results of the fuzzer's file handling.
pub type Result<T> = std::result::Result<T, FuzzError>;

#[cfg(test)]
mod tests {
    #[test]
    fn error_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<super::FuzzError>();
    }
}
