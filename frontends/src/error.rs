//! `ParseError`: why a front end could not turn source text into a program, with a span and a stable code.

use crate::span::Span;

/// What went wrong while reading, with a stable short code (`P001`…) users can search for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// An opening `(` or `[` is never closed; the span is the opener (P001).
    UnbalancedOpen,
    /// A `)` or `]` closes nothing, or closes the wrong kind of opener (P002).
    UnexpectedClose,
    /// A token that starts like a number is not one, e.g. `1.2.3` or `12abc` (P003).
    BadNumber,
    /// A token that is not allowed where it stands: a misplaced `.`, unknown `#` syntax, a
    /// string literal (P004).
    StrayToken,
    /// The source holds no forms at all (P005).
    EmptyProgram,
    /// The source ends where a datum or a comment end was required, e.g. after `'` (P006).
    UnexpectedEof,
    /// The next token is not what the grammar allows there, e.g. `a +)` or `let x 1`; the
    /// message says what was expected (P007).
    Expected,
    /// Expressions nest deeper than the parser follows (P008).
    TooDeep,
    /// A construct stands where it is not allowed, e.g. `params` inside a block or a chained
    /// comparison `a < b < c` (P009).
    Misplaced,
}

impl ParseErrorKind {
    /// The stable code, e.g. `P001`.
    pub fn code(self) -> &'static str {
        match self {
            ParseErrorKind::UnbalancedOpen => "P001",
            ParseErrorKind::UnexpectedClose => "P002",
            ParseErrorKind::BadNumber => "P003",
            ParseErrorKind::StrayToken => "P004",
            ParseErrorKind::EmptyProgram => "P005",
            ParseErrorKind::UnexpectedEof => "P006",
            ParseErrorKind::Expected => "P007",
            ParseErrorKind::TooDeep => "P008",
            ParseErrorKind::Misplaced => "P009",
        }
    }

    /// A short lowercase name, e.g. `unclosed delimiter`.
    pub fn name(self) -> &'static str {
        match self {
            ParseErrorKind::UnbalancedOpen => "unclosed delimiter",
            ParseErrorKind::UnexpectedClose => "unexpected closing delimiter",
            ParseErrorKind::BadNumber => "bad number",
            ParseErrorKind::StrayToken => "stray token",
            ParseErrorKind::EmptyProgram => "empty program",
            ParseErrorKind::UnexpectedEof => "unexpected end of input",
            ParseErrorKind::Expected => "unexpected token",
            ParseErrorKind::TooDeep => "nesting too deep",
            ParseErrorKind::Misplaced => "misplaced construct",
        }
    }
}

/// A failure to read source text, located by a byte [`Span`] in that text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    /// What kind of failure.
    pub kind: ParseErrorKind,
    /// Where in the source; render it with [`crate::render_parse_error`].
    pub span: Span,
    /// Human-readable detail, lowercase, no trailing period.
    pub message: String,
}

impl ParseError {
    /// A new error of `kind` at `span`.
    pub fn new(kind: ParseErrorKind, span: Span, message: impl Into<String>) -> Self {
        ParseError {
            kind,
            span,
            message: message.into(),
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = ParseError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_error_is_send_sync() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<ParseError>();
        assert_send_sync::<ParseErrorKind>();
    }

    #[test]
    fn codes_are_distinct() {
        let kinds = [
            ParseErrorKind::UnbalancedOpen,
            ParseErrorKind::UnexpectedClose,
            ParseErrorKind::BadNumber,
            ParseErrorKind::StrayToken,
            ParseErrorKind::EmptyProgram,
            ParseErrorKind::UnexpectedEof,
            ParseErrorKind::Expected,
            ParseErrorKind::TooDeep,
            ParseErrorKind::Misplaced,
        ];
        let codes: std::collections::HashSet<_> = kinds.iter().map(|k| k.code()).collect();
        assert_eq!(codes.len(), kinds.len());
        let err = ParseError::new(
            ParseErrorKind::BadNumber,
            Span::new(0, 3),
            "bad number `1.2.3`",
        );
        assert_eq!(err.to_string(), "bad number `1.2.3`");
    }
}
