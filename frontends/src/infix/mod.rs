//! The infix front end (`.infix` files): a notation a scientist or a language model writes
//! without thinking, lowered to exactly the heap forms a Scheme author would write.
//!
//! ```text
//! params a: positive = 1.0, b = 0.1, c      # (params (a positive 1.0) (b free 0.1) (c free 1.0))
//! let u = b * x                              # (let ((u (* b x))) …the lines below…)
//! a * exp(-u) * cos(c * x) + x^2 / 3         # (+ (* a (exp (- u)) (cos (* c x))) (/ (expt x 2) 3))
//! ```
//!
//! Statements are separated by new lines or `;`; an expression continues across lines inside
//! `( )` and `[ ]` and after a binary operator. The last statement is the program's value. See
//! `docs/infix.md` for the whole notation; [`lexer`], [`parser`] and [`printer`] hold the parts.

mod lexer;
pub mod parser;
pub mod printer;

use ndvm_core::{Heap, Program};

use crate::Frontend;
use crate::error::ParseError;

pub use parser::MAX_DEPTH;
pub use printer::MAX_PRINT_DEPTH;

/// Reads an infix program onto `heap`, with a span on every pair and atom it builds.
pub fn parse(heap: &mut Heap, src: &str) -> Result<Program, ParseError> {
    parser::parse_program(heap, src)
}

/// The program as infix text; `ErrorKind::Syntax` naming the first form the notation cannot
/// spell (a one-binding `let*`, `letrec`, `when`, `quote`, a dotted list, …).
pub fn print(heap: &Heap, program: &Program) -> ndvm_core::Result<String> {
    printer::print_program(heap, program)
}

/// Extracts an infix program from a language model's answer: the first code-fenced block that
/// reads, else the whole answer, else the last line of prose that reads on its own.
pub fn extract_program(answer: &str) -> Result<String, String> {
    let first = crate::extract::fenced_or_whole(&Infix, answer);
    if first.is_ok() {
        return first;
    }
    answer
        .lines()
        .rev()
        .map(str::trim)
        .filter(|l| !l.is_empty() && l.contains(|c: char| "+-*/^(".contains(c)))
        .find(|l| crate::extract::parses(&Infix, l))
        .map(str::to_string)
        .ok_or_else(|| first.err().unwrap_or_default())
}

/// The infix front end (`.infix`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Infix;

impl Frontend for Infix {
    fn name(&self) -> &str {
        "infix"
    }

    fn extensions(&self) -> &[&str] {
        &["infix"]
    }

    fn parse(&self, heap: &mut Heap, src: &str) -> Result<Program, ParseError> {
        parse(heap, src)
    }

    fn print(&self, heap: &Heap, program: &Program) -> ndvm_core::Result<String> {
        print(heap, program)
    }

    fn extract_program(&self, answer: &str) -> Result<String, String> {
        extract_program(answer)
    }

    fn prompt_guide(&self) -> &str {
        PROMPT_GUIDE
    }

    fn lexemes(&self, src: &str) -> Option<Vec<crate::Lexeme>> {
        let tokens = lexer::tokenize(src).ok()?;
        let lexemes = tokens.iter().filter_map(|t| match t.tok {
            lexer::Tok::Num(v) => Some(crate::Lexeme::Number(t.span(), v)),
            lexer::Tok::Name => Some(crate::Lexeme::Name(t.span())),
            _ => None,
        });
        Some(lexemes.collect())
    }
}

/// How infix programs look, for a language model's prompt.
const PROMPT_GUIDE: &str = "\
Write the model in infix notation: `+ - * / ^`, comparisons `== != < <= > >=`, `and or not`, \
calls `exp(x)`, `if c then a else b`, `let u = b * x` on its own line (or `let u = … in …`), \
`fn f(y) = …` for functions, `[a, b]` vectors, `[[1, 0], [0, 1]]` matrices, `v[i]` indexing, \
`# comments`. One statement per line; the last line is the model's value. Iterate with \
`loop k = 0, s = 0 until k == 10 then s { next(k + 1, s + k) }`. Example:
```infix
let u = b * x
a * u / (1 + u) + c * sqrt(x)
```";

#[cfg(test)]
mod tests {
    use ndvm_core::{Heap, print as sexpr};

    use super::*;

    fn lower(src: &str) -> String {
        let mut heap = Heap::new();
        let program = parse(&mut heap, src).unwrap_or_else(|e| panic!("{src:?}: {e:?}"));
        sexpr::program_to_string(&heap, &program).unwrap_or_else(|e| panic!("{e:?}"))
    }

    #[test]
    fn the_issue_example_lowers_to_scheme_forms() {
        let src = "params a: positive = 1.0, b = 0.1, c      # kinds and initial values\n\
                   let u = b * x                              # bindings\n\
                   a * exp(-u) * cos(c * x) + x^2 / 3         # the value\n";
        assert_eq!(
            lower(src),
            "(params (a positive 1.0) (b free 0.1) (c free 1.0))\n\
             (let ((u (* b x))) (+ (* a (exp (- u)) (cos (* c x))) (/ (expt x 2.0) 3.0)))"
        );
    }

    #[test]
    fn extracts_fenced_whole_and_prose_programs() {
        assert_eq!(extract_program("a * x + b").unwrap(), "a * x + b");
        let fenced = "Try this:\n```infix\nlet u = b * x\na * exp(-u)\n```\nGood luck.";
        assert_eq!(
            extract_program(fenced).unwrap(),
            "let u = b * x\na * exp(-u)"
        );
        let prose = "The curve decays, so I propose\na * exp(-b * x) + c";
        assert_eq!(extract_program(prose).unwrap(), "a * exp(-b * x) + c");
        assert!(extract_program("no idea.").is_err());
        assert!(extract_program("  ").unwrap_err().contains("empty"));
    }

    #[test]
    fn the_guide_example_reads() {
        let block = crate::extract::fenced_blocks(PROMPT_GUIDE)[0];
        assert!(crate::extract::parses(&Infix, block), "{block}");
        let iterate = "loop k = 0, s = 0 until k == 10 then s { next(k + 1, s + k) }";
        assert!(PROMPT_GUIDE.contains(iterate));
        assert_eq!(
            lower(iterate),
            "(loop ((k 0.0) (s 0.0)) (if (= k 10.0) s (recur (+ k 1.0) (+ s k))))"
        );
    }
}
