//! ndvm-frontends: surface languages to heap programs — the `Frontend` trait, its `Registry`, Scheme, infix, and diagnostics.
//!
//! A front end turns source text into [`Program`] data on a [`Heap`], recording a source span for
//! every pair and atom so that errors from the evaluator can point back at the text.
//!
//! ```
//! use ndvm_core::Heap;
//! use ndvm_frontends::{Registry, render_parse_error};
//!
//! let registry = Registry::default();
//! let scheme = registry.by_extension("scm").expect("scheme is registered");
//! let mut heap = Heap::new();
//! let program = scheme.parse(&mut heap, "(define (f x) (* 2 x))\n(f [1 2])").unwrap();
//! assert_eq!(program.forms().len(), 2);
//! assert_eq!(scheme.print(&heap, &program)?, "(define (f x) (* 2.0 x))\n(f (vec 1.0 2.0))");
//!
//! let src = "(f 1.2.3)";
//! let err = scheme.parse(&mut heap, src).unwrap_err();
//! assert_eq!(
//!     render_parse_error("model.scm", src, &err),
//!     "model.scm:1:4: error[P003]: bad number `1.2.3` (numbers look like `42`, `-0.5`, `.5`, `1e-8`, `+inf.0`)\n\
//!      \x20 1 | (f 1.2.3)\n\
//!      \x20   |    ^^^^^",
//! );
//! # Ok::<(), ndvm_core::CoreError>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod error;
pub mod extract;
pub mod infix;
pub mod scheme;
pub mod span;

use std::fmt;
use std::path::Path;

use ndvm_core::{CoreError, Heap, Program, print};

pub use error::{ParseError, ParseErrorKind, Result};
pub use span::{LineIndex, Span};

/// A surface language: text to heap program and back.
pub trait Frontend: Send + Sync {
    /// The language's name, e.g. `scheme`.
    fn name(&self) -> &str;

    /// File extensions (without the dot) this front end reads.
    fn extensions(&self) -> &[&str] {
        &[]
    }

    /// Reads `src` onto `heap` as a program, recording source spans.
    fn parse(&self, heap: &mut Heap, src: &str) -> Result<Program, ParseError>;

    /// Source text that parses back to the same program (by default, s-expressions);
    /// `ErrorKind::ForeignProgram` when the program was read into another heap.
    fn print(&self, heap: &Heap, program: &Program) -> ndvm_core::Result<String> {
        print::program_to_string(heap, program)
    }

    /// The program in a language model's answer, as source text of this notation; `Err` says
    /// why there is none. By default the first code-fenced block that parses, else the whole
    /// answer when it parses.
    fn extract_program(&self, answer: &str) -> Result<String, String> {
        extract::fenced_or_whole(self, answer)
    }

    /// A few lines for a language model's prompt: how programs in this notation look, with an
    /// example in a code fence.
    fn prompt_guide(&self) -> &str;

    /// The numbers and names of `src`, in order, with their byte ranges: what a proposer needs
    /// to turn a model's literal numbers into fitted parameters. `None` when the text does not
    /// lex, or (the default) when the front end does not say.
    fn lexemes(&self, src: &str) -> Option<Vec<Lexeme>> {
        let _ = src;
        None
    }
}

/// A number or a name of a program's text ([`Frontend::lexemes`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lexeme {
    /// A numeric literal (its sign included when the notation writes it as part of the number).
    Number(Span, f64),
    /// A name (a variable, a parameter, a function).
    Name(Span),
}

/// The known front ends, looked up by name or file extension.
pub struct Registry {
    frontends: Vec<Box<dyn Frontend>>,
}

impl Default for Registry {
    /// A registry holding the shipped front ends (Scheme, infix).
    fn default() -> Self {
        let mut registry = Registry::empty();
        registry.register(Box::new(scheme::Scheme));
        registry.register(Box::new(infix::Infix));
        registry
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("names", &self.names())
            .finish()
    }
}

impl Registry {
    /// A registry with no front ends.
    pub fn empty() -> Self {
        Registry {
            frontends: Vec::new(),
        }
    }

    /// Adds a front end, replacing any registered under the same name.
    pub fn register(&mut self, frontend: Box<dyn Frontend>) {
        match self
            .frontends
            .iter_mut()
            .find(|f| f.name() == frontend.name())
        {
            Some(slot) => *slot = frontend,
            None => self.frontends.push(frontend),
        }
    }

    /// The front end called `name`.
    pub fn by_name(&self, name: &str) -> Option<&dyn Frontend> {
        self.frontends
            .iter()
            .find(|f| f.name() == name)
            .map(|f| f.as_ref())
    }

    /// The first registered front end reading files with extension `ext` (`"scm"` or `".scm"`).
    pub fn by_extension(&self, ext: &str) -> Option<&dyn Frontend> {
        let ext = ext.strip_prefix('.').unwrap_or(ext);
        self.frontends
            .iter()
            .find(|f| f.extensions().contains(&ext))
            .map(|f| f.as_ref())
    }

    /// Names of the registered front ends, in registration order.
    pub fn names(&self) -> Vec<&str> {
        self.frontends.iter().map(|f| f.name()).collect()
    }

    /// The front end used when nothing names one: the first registered.
    pub fn fallback(&self) -> Option<&dyn Frontend> {
        self.frontends.first().map(|f| f.as_ref())
    }

    /// The front end for a file: by its extension, or for a JSONL cache (`symreg.infix.jsonl`)
    /// by the extension before `.jsonl`; `None` when no registered front end claims it.
    pub fn by_path(&self, path: &Path) -> Option<&dyn Frontend> {
        let name = path.file_name()?.to_str()?;
        let name = name.strip_suffix(".jsonl").unwrap_or(name);
        let (_, ext) = name.rsplit_once('.')?;
        self.by_extension(ext)
    }

    /// The front end a command uses: the one `name`d (an unknown name is an error listing the
    /// known ones), else the one for `path`'s extension, else [`fallback`](Registry::fallback).
    pub fn choose(&self, name: Option<&str>, path: Option<&Path>) -> Result<&dyn Frontend, String> {
        if let Some(name) = name {
            return self.by_name(name).ok_or_else(|| self.unknown(name));
        }
        path.and_then(|p| self.by_path(p))
            .or_else(|| self.fallback())
            .ok_or_else(|| "no front end is registered".to_string())
    }

    /// The error for an unknown front end name.
    pub fn unknown(&self, name: &str) -> String {
        format!(
            "unknown front end `{name}` (known: {})",
            self.names().join(", ")
        )
    }
}

/// Renders a parse error as `path:line:col: error[CODE]: message`, then the source line and `^`
/// carets under the span.
pub fn render_parse_error(path: &str, src: &str, err: &ParseError) -> String {
    render(path, src, Some(err.span), err.kind.code(), &err.message)
}

/// Renders an evaluator error like [`render_parse_error`], locating it by the span of its node;
/// without a node or span the first line is `path: error[CODE]: message` and nothing follows.
pub fn render_core_error(path: &str, src: &str, heap: &Heap, err: &CoreError) -> String {
    let span = err.node.and_then(|node| heap.span(node)).map(Span::from);
    let message = format!("{}: {}", err.kind.name(), err.message);
    render(path, src, span, err.kind.code(), &message)
}

/// Longest source line shown whole under an error; a longer one (a generated program on one
/// line) is shown as a window of this many characters around the error's column.
const SHOW_CHARS: usize = 120;

/// Characters of a window shown before the error's column.
const SHOW_BEFORE: usize = 40;

fn render(path: &str, src: &str, span: Option<Span>, code: &str, message: &str) -> String {
    let Some(span) = span else {
        return format!("{path}: error[{code}]: {message}");
    };
    let index = LineIndex::new(src);
    let (line, col) = index.line_col(span.start);
    let (end_line, end_col) = index.line_col(span.end);
    let text = index.line_text(line);
    // Carets run to the span's end on the same line, else to the end of the line; at least one.
    let n_chars = text.chars().count();
    let last_col = if end_line == line {
        end_col as usize
    } else {
        n_chars + 1
    };
    let first = col.saturating_sub(1) as usize;
    let (shown, skipped) = line_window(text, n_chars, first);
    let n_carets = last_col
        .saturating_sub(first + 1)
        .min(shown.chars().count().saturating_sub(first - skipped))
        .max(1);
    let indent: String = shown
        .chars()
        .take(first - skipped)
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    let pad = " ".repeat(line.to_string().len());
    let source_line = format!("  {line} | {shown}");
    format!(
        "{path}:{line}:{col}: error[{code}]: {message}\n{}\n  {pad} | {indent}{}",
        source_line.trim_end(),
        "^".repeat(n_carets),
    )
}

/// The part of a source line shown under an error at char `first`: the whole line when it is
/// short, else [`SHOW_CHARS`] chars around `first` with `…` marking the cut ends. Also returns
/// how many chars before `first` the shown text leaves out (the leading `…` stands in for one).
fn line_window(text: &str, n_chars: usize, first: usize) -> (std::borrow::Cow<'_, str>, usize) {
    if n_chars <= SHOW_CHARS {
        return (text.into(), 0);
    }
    let start = first.min(n_chars).saturating_sub(SHOW_BEFORE);
    let end = (start + SHOW_CHARS).min(n_chars);
    let byte = |c: usize| text.char_indices().nth(c).map_or(text.len(), |(b, _)| b);
    let (b0, b1) = (byte(start), byte(end));
    let body = &text[b0..b1];
    let tail = if end < n_chars { "…" } else { "" };
    if start == 0 {
        (format!("{body}{tail}").into(), 0)
    } else {
        // The leading `…` takes the place of one of the chars left out.
        (format!("…{body}{tail}").into(), start - 1)
    }
}

#[cfg(test)]
mod tests {
    use ndvm_core::{CoreError, ErrorKind, Heap};

    use super::*;

    fn parse_err(src: &str) -> ParseError {
        let mut heap = Heap::new();
        match scheme::parse(&mut heap, src) {
            Ok(_) => panic!("{src:?} parsed"),
            Err(err) => err,
        }
    }

    #[test]
    fn renders_parse_errors_with_line_col_and_carets() {
        let src = "(define x 1)\n(f \"str\" y)\n";
        assert_eq!(
            render_parse_error("m.scm", src, &parse_err(src)),
            "m.scm:2:4: error[P004]: string literals are not supported\n\
             \x20 2 | (f \"str\" y)\n\
             \x20   |    ^^^^^"
        );
        // Columns count chars, and tabs in the prefix are kept so carets line up.
        let src = "\t(λ 1.2.3)";
        assert_eq!(
            render_parse_error("m.scm", src, &parse_err(src)),
            "m.scm:1:5: error[P003]: bad number `1.2.3` (numbers look like `42`, `-0.5`, `.5`, `1e-8`, `+inf.0`)\n\
             \x20 1 | \t(λ 1.2.3)\n\
             \x20   | \t   ^^^^^"
        );
        let src = "\n\n\n\n\n\n\n\n\n(a\n";
        assert_eq!(
            render_parse_error("m.scm", src, &parse_err(src)),
            "m.scm:10:1: error[P001]: unclosed `(`: expected `)` before the end of input\n\
             \x20 10 | (a\n\
             \x20    | ^"
        );
    }

    #[test]
    fn long_lines_show_a_window_around_the_error() {
        // A generated program on one 2-million-char line: the error shows 120 chars of it.
        let body = "x ".repeat(1_000_000);
        let src = format!("(+ {body}\"s\" {body})");
        let rendered = render_parse_error("big.scm", &src, &parse_err(&src));
        let lines: Vec<&str> = rendered.lines().collect();
        assert_eq!(lines.len(), 3, "{rendered:.400}");
        assert_eq!(
            lines[0],
            "big.scm:1:2000004: error[P004]: string literals are not supported"
        );
        let shown = format!("…{}\"s\"{} …", "x ".repeat(20), " x".repeat(38));
        assert_eq!(lines[1], format!("  1 | {shown}"));
        // The carets sit under the string literal: `…` plus the 40 chars before it.
        assert_eq!(lines[2], format!("    | {}^^^", " ".repeat(41)));
        // At the start of a long line there is no leading `…`; near the end, no trailing one.
        let src = format!("(\"s\" {body})");
        let rendered = render_parse_error("big.scm", &src, &parse_err(&src));
        assert!(rendered.contains("  1 | (\"s\" x x"), "{rendered:.400}");
        assert!(rendered.ends_with("\n    |  ^^^"), "{rendered:.400}");
        let src = format!("({body}\"s\")");
        let rendered = render_parse_error("big.scm", &src, &parse_err(&src));
        assert!(
            rendered
                .lines()
                .nth(1)
                .is_some_and(|l| l.ends_with("x x \"s\")"))
        );
        assert!(rendered.len() < 400, "{rendered:.400}");
    }

    #[test]
    fn renders_core_errors_by_node_span() {
        let src = "(define y 2)\n(+ 1 (g x))";
        let mut heap = Heap::new();
        let program = scheme::parse(&mut heap, src).unwrap_or_else(|e| panic!("{e:?}"));
        let items = heap.list_items(program.forms()[1]).unwrap_or_default();
        let err = CoreError::new(ErrorKind::Unbound, "`g` is not bound").at(items[2]);
        assert_eq!(
            render_core_error("m.scm", src, &heap, &err),
            "m.scm:2:6: error[E001]: unbound variable: `g` is not bound\n\
             \x20 2 | (+ 1 (g x))\n\
             \x20   |      ^^^^^"
        );
        // A multi-line form gets carets to the end of its first line.
        let src = "(f\n  x)";
        let program = scheme::parse(&mut heap, src).unwrap_or_else(|e| panic!("{e:?}"));
        let err = CoreError::new(ErrorKind::Arity, "expected 2 arguments").at(program.forms()[0]);
        assert_eq!(
            render_core_error("m.scm", src, &heap, &err),
            "m.scm:1:1: error[E002]: wrong number of arguments: expected 2 arguments\n\
             \x20 1 | (f\n\
             \x20   | ^^"
        );
        let err = CoreError::new(ErrorKind::StepBudget, "ran out after 10 steps");
        assert_eq!(
            render_core_error("m.scm", src, &heap, &err),
            "m.scm: error[E007]: work budget exceeded: ran out after 10 steps"
        );
        let err = err.at(Heap::NIL);
        assert_eq!(
            render_core_error("m.scm", src, &heap, &err),
            "m.scm: error[E007]: work budget exceeded: ran out after 10 steps"
        );
    }

    #[test]
    fn registry_finds_scheme_by_name_and_extension() {
        let registry = Registry::default();
        assert_eq!(registry.names(), vec!["scheme", "infix"]);
        assert_eq!(registry.by_name("scheme").map(|f| f.name()), Some("scheme"));
        assert_eq!(
            registry.by_extension("scm").map(|f| f.name()),
            Some("scheme")
        );
        assert_eq!(
            registry.by_extension(".ss").map(|f| f.name()),
            Some("scheme")
        );
        assert!(registry.by_extension("py").is_none());
        let chosen = |name, path: &str| {
            registry
                .choose(name, Some(Path::new(path)))
                .map(|f| f.name().to_string())
        };
        assert_eq!(chosen(None, "m/model.scm"), Ok("scheme".into()));
        assert_eq!(chosen(None, "caches/c.scm.jsonl"), Ok("scheme".into()));
        assert_eq!(chosen(None, "caches/c.jsonl"), Ok("scheme".into()));
        assert_eq!(chosen(None, "model.py"), Ok("scheme".into()));
        assert_eq!(chosen(Some("scheme"), "model.py"), Ok("scheme".into()));
        assert_eq!(
            chosen(Some("cobol"), "model.scm"),
            Err(format!(
                "unknown front end `cobol` (known: {})",
                registry.names().join(", ")
            ))
        );
        assert!(registry.by_path(Path::new("model")).is_none());
        assert_eq!(chosen(None, "m/model.infix"), Ok("infix".into()));
        assert_eq!(chosen(None, "caches/c.infix.jsonl"), Ok("infix".into()));
        assert_eq!(registry.by_name("infix").map(|f| f.name()), Some("infix"));
        assert_eq!(
            registry.by_extension("infix").map(|f| f.name()),
            Some("infix")
        );
        assert!(registry.by_name("stack").is_none());

        struct Upper;
        impl Frontend for Upper {
            fn name(&self) -> &str {
                "scheme"
            }
            fn parse(&self, heap: &mut Heap, src: &str) -> Result<Program, ParseError> {
                scheme::parse(heap, &src.to_uppercase())
            }
            fn prompt_guide(&self) -> &str {
                "UPPER-CASE SCHEME"
            }
        }
        let mut registry = Registry::default();
        registry.register(Box::new(Upper));
        assert_eq!(registry.names(), vec!["scheme", "infix"]);
        assert!(registry.by_extension("scm").is_none());
        let mut heap = Heap::new();
        let frontend = registry
            .by_name("scheme")
            .unwrap_or_else(|| panic!("registered"));
        let program = frontend
            .parse(&mut heap, "(f x)")
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(frontend.print(&heap, &program), Ok("(F X)".to_string()));
        assert_eq!(
            format!("{registry:?}"),
            "Registry { names: [\"scheme\", \"infix\"] }"
        );
        assert!(Registry::empty().names().is_empty());
        assert!(Registry::empty().choose(None, None).is_err());
    }
}
