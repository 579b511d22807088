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

/// Extracts one program from an answer: a code-fenced block holding an s-expression (the first
/// such block, taken whole, so a program of several forms survives), else the whole answer when
/// it is a program, else the largest parenthesised span in the prose that the Scheme reader
/// accepts. `Err` says why there is none.
pub fn extract_program(answer: &str) -> Result<String, String> {
    let text = answer.trim();
    if text.is_empty() {
        return Err("empty answer".into());
    }
    for block in crate::extract::fenced_blocks(text) {
        let b = block.trim();
        if b.starts_with('(') || b.starts_with(';') {
            return Ok(b.to_string());
        }
    }
    if text.starts_with('(') && text.ends_with(')') && crate::extract::parses(&Scheme, text) {
        return Ok(text.to_string());
    }
    let mut best: Option<&str> = None;
    for (s, e) in balanced_spans(text) {
        let span = &text[s..e];
        // `()` or a bare parenthetical word is prose, not a program.
        let inner = span[1..span.len() - 1].trim();
        if inner.is_empty() || !inner.contains(char::is_whitespace) {
            continue;
        }
        if crate::extract::parses(&Scheme, span) && best.is_none_or(|b| span.len() > b.len()) {
            best = Some(span);
        }
    }
    match best {
        Some(b) => Ok(b.to_string()),
        None if text.contains('(') => Err("no balanced s-expression the reader accepts".into()),
        None => Err("no s-expression in the answer".into()),
    }
}

/// Top-level parenthesised spans of `text` (byte ranges), skipping string literals.
fn balanced_spans(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if in_string {
            if c == b'\\' {
                i += 1;
            } else if c == b'"' {
                in_string = false;
            }
        } else if depth > 0 && c == b'"' {
            in_string = true;
        } else if c == b'(' {
            if depth == 0 {
                start = i;
            }
            depth += 1;
        } else if c == b')' && depth > 0 {
            depth -= 1;
            if depth == 0 {
                spans.push((start, i + 1));
            }
        }
        i += 1;
    }
    spans
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

    fn extract_program(&self, answer: &str) -> Result<String, String> {
        extract_program(answer)
    }

    fn prompt_guide(&self) -> &str {
        PROMPT_GUIDE
    }

    /// A number at the head of a list (`(-0.3 * x)`, infix read as Scheme) is not reported: it
    /// is no constant, and a name in its place would make a call of a parameter read as valid.
    fn lexemes(&self, src: &str) -> Option<Vec<crate::Lexeme>> {
        let mut lexer = lexer::Lexer::new(src);
        let mut out = Vec::new();
        let mut after_open = false;
        while let Some(token) = lexer.next_token().ok()? {
            match token.kind {
                lexer::TokenKind::Num(v) if !after_open => {
                    out.push(crate::Lexeme::Number(token.span(), v))
                }
                lexer::TokenKind::Sym => out.push(crate::Lexeme::Name(token.span())),
                _ => {}
            }
            after_open = matches!(token.kind, lexer::TokenKind::Open(_));
        }
        Some(out)
    }
}

/// How Scheme programs look, for a language model's prompt.
const PROMPT_GUIDE: &str = "\
Write the model as a Scheme program: s-expressions in prefix notation, `+ - * /` take any number \
of arguments, `(define (f y) ...)` defines a function, `(let ((u (* b x))) ...)` binds names, \
`(if test then else)` branches, `(loop ((k 0) (s 0)) (if (= k 10) s (recur (+ k 1) (+ s k))))` \
iterates, `[a b c]` is a vector. The last form is the program's value. Example:
```scheme
(let ((u (* b x)))
  (+ (/ (* a u) (+ 1 u)) (* c (sqrt x))))
```";

#[cfg(test)]
mod tests {
    use ndvm_core::{Heap, Node, SrcSpan, print};

    #[test]
    fn the_prompt_guides_examples_parse_and_are_not_the_shipped_tasks_law() {
        use crate::Frontend;
        for f in [&super::Scheme as &dyn Frontend, &crate::infix::Infix] {
            let example = f.extract_program(f.prompt_guide()).unwrap();
            let mut heap = Heap::new();
            assert!(f.parse(&mut heap, &example).is_ok(), "{example}");
            // Not the damped oscillation of tasks/symreg*.yaml: a model copying it finds nothing.
            assert!(!example.contains("cos"), "{example}");
        }
    }

    use super::{extract_program, parse};
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
    fn extracts_plain_fenced_and_prose_programs() {
        assert_eq!(extract_program("  (* a x)\n").unwrap(), "(* a x)");
        let fenced = "Here you go:\n```scheme\n(* (exp (* a x)) (cos (* b x)))\n```\nEnjoy.";
        assert_eq!(
            extract_program(fenced).unwrap(),
            "(* (exp (* a x)) (cos (* b x)))"
        );
        let prose = "The model (a damped wave) is (* a (exp (* b x))) which fits well.";
        assert_eq!(extract_program(prose).unwrap(), "(* a (exp (* b x)))");
        let truncated = "```lisp\n(+ (* a x) b)";
        assert_eq!(extract_program(truncated).unwrap(), "(+ (* a x) b)");
        let e = extract_program("I cannot help with that.").unwrap_err();
        assert!(e.contains("no s-expression"), "{e}");
        assert!(extract_program("   ").unwrap_err().contains("empty"));
        assert!(extract_program("(((").is_err());
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
