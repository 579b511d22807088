//! `--prelude FILE` and `--via FILE` of `eval` and `calibrate`: Scheme files read onto the
//! program's heap (a prelude put before the program; a self-hosted evaluator that runs the program
//! as quoted data, `ndvm_core::selfhost`), and diagnostics located in whichever file holds the node.

use std::ops::Range;
use std::path::{Path, PathBuf};

use ndvm_core::{CoreError, Heap, Program};

use crate::error::{Result, SearchError};

/// The extra Scheme files of one command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SelfHost {
    /// `--prelude FILE`: definitions put before the program (e.g. `bootstrap/prelude.scm`).
    pub prelude: Option<PathBuf>,
    /// `--via FILE`: an evaluator written in the language (e.g. `bootstrap/evaluator.scm`) that
    /// runs the program, passed to it as quoted data.
    pub via: Option<PathBuf>,
}

/// One source text and the heap cells read from it.
#[derive(Clone, Debug)]
struct Source {
    label: String,
    src: String,
    cells: Range<u32>,
}

/// The source texts of a prepared program, to render an error in the file its node came from.
#[derive(Clone, Debug)]
pub struct Sources {
    main_label: String,
    main_src: String,
    extra: Vec<Source>,
}

impl Sources {
    /// The sources of a program read from one text.
    pub fn single(label: &str, src: &str) -> Self {
        Sources {
            main_label: label.to_string(),
            main_src: src.to_string(),
            extra: Vec::new(),
        }
    }

    /// `error` as `file:line:col: error[…]`, located in the file its node was read from.
    pub fn render(&self, heap: &Heap, error: &CoreError) -> String {
        let node = error.node.map(|n| n.0);
        let (label, src) = self
            .extra
            .iter()
            .find(|s| node.is_some_and(|n| s.cells.contains(&n)))
            .map_or((&self.main_label, &self.main_src), |s| (&s.label, &s.src));
        ndvm_frontends::render_core_error(label, src, heap, error)
    }

    /// The [`SearchError::Eval`] of `error`, rendered.
    pub fn error(&self, heap: &Heap, error: CoreError) -> SearchError {
        SearchError::Eval {
            rendered: self.render(heap, &error),
            error,
        }
    }
}

/// Reads a Scheme file onto `heap`; the cells it added are recorded for error locations.
fn load(heap: &mut Heap, path: &Path, (what, flag): (&str, &str)) -> Result<(Program, Source)> {
    let src = std::fs::read_to_string(path).map_err(|source| SearchError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let label = path.display().to_string();
    let first = heap.len() as u32;
    let program = crate::source::parse_program(heap, &ndvm_frontends::scheme::Scheme, &label, &src)
        .map_err(|e| match e {
            SearchError::Parse { rendered, error } => SearchError::Parse {
                rendered: format!("{rendered}\n(in the {what} given by --{flag})"),
                error,
            },
            other => other,
        })?;
    let cells = first..heap.len() as u32;
    Ok((program, Source { label, src, cells }))
}

/// `program` (read from `label`/`src`) with the prelude put before it and run through the `via`
/// evaluator, which receives the inputs `names` as values. Without either file the program is
/// unchanged.
pub fn prepare(
    heap: &mut Heap,
    program: Program,
    (label, src): (&str, &str),
    files: &SelfHost,
    names: &[&str],
) -> Result<(Program, Sources)> {
    let mut sources = Sources::single(label, src);
    let mut program = program;
    if let Some(path) = &files.prelude {
        let (prelude, source) = load(heap, path, ("prelude", "prelude"))?;
        sources.extra.push(source);
        program = ndvm_core::selfhost::with_prelude(heap, &prelude, &program)
            .map_err(|e| sources.error(heap, e))?;
    }
    if let Some(path) = &files.via {
        let (evaluator, source) = load(heap, path, ("evaluator", "via"))?;
        let label = source.label.clone();
        sources.extra.push(source);
        program = ndvm_core::selfhost::via(heap, &evaluator, &program, names).map_err(|error| {
            SearchError::Eval {
                rendered: format!("{label}: error[{}]: {}", error.kind.code(), error.message),
                error,
            }
        })?;
    }
    Ok((program, sources))
}
