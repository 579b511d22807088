//! The Scheme front end: s-expression text to heap data, with a span on every pair and atom.
//!
//! Syntax: `;` line comments, nestable `#| … |#` block comments, `#;` datum comments; `( )` lists
//! with dotted pairs `(a . b)`; `[a b c]` reads as `(vec a b c)`; `'x`, `` `x ``, `,x` and `,@x`
//! abbreviate `quote`, `quasiquote`, `unquote` and `unquote-splicing`; `#t #f #true #false`;
//! numbers (`42`, `.5`, `5.`, `-0.25`, `1e-8`, `2.5E+3`, `+inf.0`, `-inf.0`, `+nan.0`), all read
//! as `f64`; any other run of non-delimiter chars is a symbol. A token that starts with a digit,
//! or with `+`, `-` or `.` and then a digit, must be a number. Strings are not supported.
//!
//! The reader never panics and keeps its own stack, so nesting depth is bounded only by memory.

mod lexer;
mod reader;

use ndvm_core::{Heap, Program};

use crate::Frontend;
use crate::error::ParseError;

/// Reads every top-level form of `src` onto `heap`; a source with no forms is an error.
///
/// Each list's first pair carries the span from its opener to its closer, each later pair the
/// span from its element to the closer, and each number and symbol its token's span.
pub fn parse(heap: &mut Heap, src: &str) -> Result<Program, ParseError> {
    reader::read_program(heap, src)
}

/// The Scheme front end (`.scm`, `.ss`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Scheme;

impl Frontend for Scheme {
    fn name(&self) -> &str {
        "scheme"
    }

    fn extensions(&self) -> &[&str] {
        &["scm", "ss"]
    }

    fn parse(&self, heap: &mut Heap, src: &str) -> Result<Program, ParseError> {
        parse(heap, src)
    }
}

#[cfg(test)]
mod tests {
    use ndvm_core::{Heap, Node, SrcSpan, print};

    use super::parse;
    use crate::error::ParseErrorKind;

    fn check(src: &str, expect: &str) {
        let mut heap = Heap::new();
        let program = parse(&mut heap, src).unwrap_or_else(|e| panic!("{src:?}: {e:?}"));
        assert_eq!(
            print::program_to_string(&heap, &program),
            Ok(expect.to_string()),
            "{src:?}"
        );
    }

    fn check_err(src: &str, kind: ParseErrorKind, span: (u32, u32)) {
        let mut heap = Heap::new();
        match parse(&mut heap, src) {
            Ok(p) => panic!("{src:?} parsed: {:?}", print::program_to_string(&heap, &p)),
            Err(e) => {
                assert_eq!(e.kind, kind, "{src:?}: {e:?}");
                assert_eq!((e.span.start, e.span.end), span, "{src:?}: {e:?}");
            }
        }
    }

    #[test]
    fn reads_forms() {
        check("(a b . c)", "(a b . c)");
        check("(a . (b c))", "(a b c)");
        check(
            "'x `(a ,b ,@c)",
            "(quote x)\n(quasiquote (a (unquote b) (unquote-splicing c)))",
        );
        check("[1 2 [3]] []", "(vec 1.0 2.0 (vec 3.0))\n(vec)");
        check("() #t #false", "()\n#t\n#f");
        check("(a #;(b c) d #;e) #;f g", "(a d)\ng");
        check("(a . #;b c)", "(a . c)");
        check("#;#;a b c", "c");
        check("'#;a b", "(quote b)");
        check("''a", "(quote (quote a))");
    }

    #[test]
    fn errors_and_spans() {
        use ParseErrorKind::*;
        check_err("(a (b)", UnbalancedOpen, (0, 1));
        check_err("(a [b", UnbalancedOpen, (3, 4));
        check_err("a)", UnexpectedClose, (1, 2));
        check_err("(a]", UnexpectedClose, (2, 3));
        check_err("(')", UnexpectedClose, (2, 3));
        check_err("(#;)", UnexpectedClose, (3, 4));
        check_err(".", StrayToken, (0, 1));
        check_err("(a . )", StrayToken, (3, 4));
        check_err("( . a)", StrayToken, (2, 3));
        check_err("(a . b c)", StrayToken, (7, 8));
        check_err("(a . . b)", StrayToken, (5, 6));
        check_err("[a . b]", StrayToken, (3, 4));
        check_err("'.", StrayToken, (1, 2));
        check_err("'", UnexpectedEof, (0, 1));
        check_err("#;", UnexpectedEof, (0, 2));
        check_err("", EmptyProgram, (0, 0));
        check_err(" ; only a comment\n", EmptyProgram, (18, 18));
        check_err("#;a", EmptyProgram, (3, 3));
        check_err("(f 1.2.3)", BadNumber, (3, 8));
        check_err("(f \"s\")", StrayToken, (3, 6));
    }

    #[test]
    fn spans_cover_forms() {
        let src = "(f 1 (g x))\n'y [z]";
        let mut heap = Heap::new();
        let program = parse(&mut heap, src).unwrap_or_else(|e| panic!("{e:?}"));
        let text = |id| {
            heap.span(id)
                .map(|SrcSpan { start, end }| &src[start as usize..end as usize])
        };
        assert_eq!(text(program.forms()[0]), Some("(f 1 (g x))"));
        assert_eq!(text(program.forms()[1]), Some("'y"));
        assert_eq!(text(program.forms()[2]), Some("[z]"));
        let items = heap.list_items(program.forms()[0]).unwrap_or_default();
        assert_eq!(text(items[0]), Some("f"));
        assert_eq!(text(items[1]), Some("1"));
        assert_eq!(text(items[2]), Some("(g x)"));
        let Node::Pair(_, second) = heap.node(program.forms()[0]) else {
            panic!("not a pair")
        };
        assert_eq!(text(second), Some("1 (g x))"));
    }

    #[test]
    fn million_deep_nesting_does_not_overflow() {
        let depth = 1_000_000;
        let src = format!("{}{}", "(".repeat(depth), ")".repeat(depth));
        let mut heap = Heap::new();
        let program = parse(&mut heap, &src).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(program.forms().len(), 1);
        assert_eq!(print::display(&heap, program.forms()[0]).len(), 2 * depth);
        let unclosed = "(".repeat(depth);
        let err = parse(&mut heap, &unclosed)
            .err()
            .map(|e| (e.kind, e.span.start));
        assert_eq!(
            err,
            Some((ParseErrorKind::UnbalancedOpen, depth as u32 - 1))
        );
    }
}
