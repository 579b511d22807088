//! Program text on its way in, beneath the task, the self-hosted evaluator and the subcommands:
//! the front end a command reads with, parsing into a rendered `file:line:col` diagnostic, and
//! the hint an unbound name gets.

use std::path::Path;

use ndvm_core::{CoreError, ErrorKind, Heap, Program};
use ndvm_frontends::{Frontend, Registry};

use crate::error::{Result, SearchError};

/// The front end of a command: `--frontend NAME` (an unknown name is a bad argument), else the
/// one for `path`'s extension, else the registry's fallback.
pub fn choose_frontend<'r>(
    frontends: &'r Registry,
    name: Option<&str>,
    path: &Path,
) -> Result<&'r dyn Frontend> {
    frontends
        .choose(name, Some(path))
        .map_err(|message| SearchError::BadArgument {
            arg: format!("--frontend {}", name.unwrap_or_default()),
            message,
        })
}

/// Parses `src` with `frontend`; a failure becomes [`SearchError::Parse`] rendered as
/// `label:line:col: error[…]`.
pub fn parse_program(
    heap: &mut Heap,
    frontend: &dyn Frontend,
    label: &str,
    src: &str,
) -> Result<Program> {
    frontend
        .parse(heap, src)
        .map_err(|error| SearchError::Parse {
            rendered: ndvm_frontends::render_parse_error(label, src, &error),
            error,
        })
}

/// An unbound-variable error with `; {hint}` appended to its message (what the surface binds:
/// the data's columns, the command line's or the request's names); other errors unchanged.
pub(crate) fn hint_unbound(mut error: CoreError, hint: &str) -> CoreError {
    if error.kind == ErrorKind::Unbound && !hint.is_empty() {
        error.message = format!("{}; {hint}", error.message);
    }
    error
}
