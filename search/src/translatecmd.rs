//! `ndvm-search translate FILE --to NAME`: a program read by one front end and printed by another.

use std::path::PathBuf;

use ndvm_core::Heap;
use ndvm_frontends::Registry;

use crate::error::{Result, SearchError};
use crate::source::{choose_frontend, parse_program};

/// Everything `translate` needs.
#[derive(Clone, Debug, PartialEq)]
pub struct TranslateArgs {
    /// The program file.
    pub program: PathBuf,
    /// `--from NAME`; when absent the file's extension picks the front end.
    pub from: Option<String>,
    /// `--to NAME`: the front end that prints the program.
    pub to: String,
}

/// Reads the program with its front end and returns it as text of the `--to` front end.
pub fn run(args: &TranslateArgs) -> Result<String> {
    run_with(args, &Registry::default())
}

/// [`run`] with the front ends of `frontends`.
pub fn run_with(args: &TranslateArgs, frontends: &Registry) -> Result<String> {
    let src = std::fs::read_to_string(&args.program).map_err(|source| SearchError::Read {
        path: args.program.clone(),
        source,
    })?;
    let from = choose_frontend(frontends, args.from.as_deref(), &args.program)?;
    let to = frontends
        .by_name(&args.to)
        .ok_or_else(|| SearchError::BadArgument {
            arg: format!("--to {}", args.to),
            message: frontends.unknown(&args.to),
        })?;
    let label = args.program.display().to_string();
    let mut heap = Heap::new();
    let program = parse_program(&mut heap, from, &label, &src)?;
    let mut text = to
        .print(&heap, &program)
        .map_err(|error| SearchError::Eval {
            rendered: ndvm_frontends::render_core_error(&label, &src, &heap, &error),
            error,
        })?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}
