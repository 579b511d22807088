//! Infix tokens: numbers, names (plain, keyword or backquoted), operators and brackets, each with a
//! flag saying whether a line break came before it; never panics.

use crate::error::{ParseError, ParseErrorKind};
use crate::span::Span;

/// The reserved words of the notation; a variable with one of these names is written backquoted.
pub(crate) const KEYWORDS: &[&str] = &[
    "params", "let", "in", "fn", "if", "then", "elif", "else", "and", "or", "not", "loop", "until",
    "next", "true", "false", "inf", "nan",
];

/// What a token is; a name's text is its source slice (without backquotes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Tok {
    Num(f64),
    /// A plain name, e.g. `x` or `zero?`.
    Name,
    /// A backquoted name such as `` `list-ref` `` (never a keyword).
    Quoted,
    /// A reserved word (its text is the source slice).
    Keyword,
    /// Punctuation or an operator: `+ - * / ^ == != < <= > >= = , : ; ( ) [ ] { }`.
    Punct(&'static str),
}

/// One token, its byte range and whether a line break separates it from the previous token.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Token {
    pub(crate) tok: Tok,
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) newline_before: bool,
}

impl Token {
    pub(crate) fn span(&self) -> Span {
        Span::new(self.start, self.end)
    }
}

const PUNCT: &[&str] = &[
    "==", "!=", "<=", ">=", "+", "-", "*", "/", "^", "<", ">", "=", ",", ":", ";", "(", ")", "[",
    "]", "{", "}",
];

fn is_name_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Splits `src` into tokens; the first bad character or number is an error.
pub(crate) fn tokenize(src: &str) -> Result<Vec<Token>, ParseError> {
    let mut tokens = Vec::new();
    let mut pos = 0;
    let mut newline = false;
    while let Some(c) = src.get(pos..).and_then(|r| r.chars().next()) {
        let start = pos;
        if c == '\n' {
            newline = true;
            pos += 1;
            continue;
        }
        if c.is_whitespace() {
            pos += c.len_utf8();
            continue;
        }
        if c == '#' {
            pos = src[pos..].find('\n').map_or(src.len(), |n| pos + n);
            continue;
        }
        let tok = if c.is_ascii_digit()
            || (c == '.' && src[pos + 1..].starts_with(|d: char| d.is_ascii_digit()))
        {
            pos = number_end(src, pos);
            let text = &src[start..pos];
            let rest = &src[pos..];
            if rest.starts_with(|c: char| is_name_char(c) || c == '.') {
                let end = start
                    + src[start..]
                        .find(|c: char| !(is_name_char(c) || c == '.'))
                        .unwrap_or(src.len() - start);
                return Err(bad_number(start, end, &src[start..end]));
            }
            match text.parse::<f64>() {
                Ok(x) => Tok::Num(x),
                Err(_) => return Err(bad_number(start, pos, text)),
            }
        } else if is_name_start(c) {
            pos += src[pos..]
                .find(|c: char| !is_name_char(c))
                .unwrap_or(src.len() - pos);
            if src[pos..].starts_with('?') {
                pos += 1;
            }
            if KEYWORDS.contains(&&src[start..pos]) {
                Tok::Keyword
            } else {
                Tok::Name
            }
        } else if c == '`' {
            let body = &src[pos + 1..];
            match body.find(['`', '\n']) {
                Some(n) if body[n..].starts_with('`') && n > 0 => {
                    pos += n + 2;
                    Tok::Quoted
                }
                Some(0) => {
                    return Err(ParseError::new(
                        ParseErrorKind::StrayToken,
                        Span::new(start, start + 2),
                        "empty backquoted name: write a name between the backquotes, e.g. `list-ref`",
                    ));
                }
                _ => {
                    return Err(ParseError::new(
                        ParseErrorKind::UnbalancedOpen,
                        Span::new(start, start + 1),
                        "unclosed backquote: expected a closing ` on the same line",
                    ));
                }
            }
        } else if let Some(p) = PUNCT.iter().find(|p| src[pos..].starts_with(**p)) {
            pos += p.len();
            Tok::Punct(p)
        } else {
            return Err(stray(src, start, c));
        };
        tokens.push(Token {
            tok,
            start,
            end: pos,
            newline_before: std::mem::take(&mut newline),
        });
    }
    Ok(tokens)
}

/// The end of the number starting at `pos`: digits, an optional fraction, an optional exponent.
fn number_end(src: &str, mut pos: usize) -> usize {
    let bytes = src.as_bytes();
    let digits = |mut p: usize| {
        while p < bytes.len() && bytes[p].is_ascii_digit() {
            p += 1;
        }
        p
    };
    pos = digits(pos);
    if bytes.get(pos) == Some(&b'.') {
        pos = digits(pos + 1);
    }
    if matches!(bytes.get(pos), Some(b'e' | b'E')) {
        let mut p = pos + 1;
        if matches!(bytes.get(p), Some(b'+' | b'-')) {
            p += 1;
        }
        if bytes.get(p).is_some_and(u8::is_ascii_digit) {
            pos = digits(p);
        }
    }
    pos
}

fn bad_number(start: usize, end: usize, text: &str) -> ParseError {
    ParseError::new(
        ParseErrorKind::BadNumber,
        Span::new(start, end),
        format!("bad number `{text}` (numbers look like `42`, `0.5`, `.5`, `1e-8`)"),
    )
}

fn stray(src: &str, start: usize, c: char) -> ParseError {
    let (end, message) = match c {
        '"' | '\'' => (
            src[start + 1..]
                .find([c, '\n'])
                .map_or(src.len(), |n| start + n + 2)
                .min(src.len()),
            "string literals are not supported".to_string(),
        ),
        '!' => (
            start + 1,
            "unexpected `!`: write `not x` for negation and `!=` for inequality".to_string(),
        ),
        '&' | '|' => (
            start + 1,
            format!("unexpected `{c}`: write `and` / `or` for logic"),
        ),
        _ => (start + c.len_utf8(), format!("unexpected character `{c}`")),
    };
    ParseError::new(ParseErrorKind::StrayToken, Span::new(start, end), message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<(Tok, &str, bool)> {
        tokenize(src)
            .unwrap_or_else(|e| panic!("{src:?}: {e:?}"))
            .into_iter()
            .map(|t| (t.tok, &src[t.start..t.end], t.newline_before))
            .collect()
    }

    #[test]
    fn splits_numbers_names_and_operators() {
        assert_eq!(
            kinds("a<=-1.5e3 # c\n`list-ref`(zero?, .5)"),
            vec![
                (Tok::Name, "a", false),
                (Tok::Punct("<="), "<=", false),
                (Tok::Punct("-"), "-", false),
                (Tok::Num(1500.0), "1.5e3", false),
                (Tok::Quoted, "`list-ref`", true),
                (Tok::Punct("("), "(", false),
                (Tok::Name, "zero?", false),
                (Tok::Punct(","), ",", false),
                (Tok::Num(0.5), ".5", false),
                (Tok::Punct(")"), ")", false),
            ]
        );
        assert_eq!(kinds("if x")[0].0, Tok::Keyword);
    }

    #[test]
    fn reports_bad_input() {
        let err = |src: &str| tokenize(src).map(|_| ()).unwrap_err();
        assert_eq!(err("1.2.3").kind, ParseErrorKind::BadNumber);
        assert_eq!(err("2x").span, Span::new(0, 2));
        assert_eq!(err("1e").span, Span::new(0, 2));
        assert_eq!(err("\"s\" + 1").span, Span::new(0, 3));
        assert_eq!(err("a $ b").kind, ParseErrorKind::StrayToken);
        assert_eq!(err("`ab").kind, ParseErrorKind::UnbalancedOpen);
        assert_eq!(err("``").kind, ParseErrorKind::StrayToken);
        assert!(err("!x").message.contains("not x"));
    }
}
