//! Scheme tokens: a lazy, never-panicking lexer that skips whitespace and comments and classifies atoms.

use crate::error::{ParseError, ParseErrorKind};
use crate::span::Span;

/// Which bracket pair a delimiter token belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delim {
    /// `(` … `)`.
    Paren,
    /// `[` … `]`, read as `(vec …)`.
    Bracket,
}

impl Delim {
    pub(crate) fn open_char(self) -> char {
        match self {
            Delim::Paren => '(',
            Delim::Bracket => '[',
        }
    }

    pub(crate) fn close_char(self) -> char {
        match self {
            Delim::Paren => ')',
            Delim::Bracket => ']',
        }
    }
}

/// What a token is; symbol text is the token's source slice.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum TokenKind {
    Open(Delim),
    Close(Delim),
    /// `'`, `` ` ``, `,` or `,@`: the symbol it abbreviates.
    Prefix(&'static str),
    /// `#;`: skip the next datum.
    DatumComment,
    /// A lone `.`.
    Dot,
    Num(f64),
    Bool(bool),
    Sym,
}

/// One token and its byte range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Token {
    pub(crate) kind: TokenKind,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

impl Token {
    pub(crate) fn span(&self) -> Span {
        Span::new(self.start, self.end)
    }
}

/// Splits source text into tokens on demand.
pub(crate) struct Lexer<'src> {
    src: &'src str,
    pos: usize,
}

/// True for chars that end a symbol or number token.
const fn is_delimiter(c: char) -> bool {
    c.is_whitespace() || matches!(c, '(' | ')' | '[' | ']' | '"' | ';' | '\'' | '`' | ',')
}

/// The ASCII whitespace bytes (`char::is_whitespace` below 128; false for every byte above).
const ASCII_SPACE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 128 {
        t[b] = (b as u8 as char).is_whitespace();
        b += 1;
    }
    t
};

/// Where a byte-wise run scan stops: an ASCII delimiter, or any non-ASCII byte (which the char-wise
/// scan then judges).
const RUN_STOP: [bool; 256] = {
    let mut t = [true; 256];
    let mut b = 0;
    while b < 128 {
        t[b] = is_delimiter(b as u8 as char);
        b += 1;
    }
    t
};

/// [`is_delimiter`] for each ASCII byte.
const ASCII_DELIMITER: [bool; 128] = {
    let mut t = [false; 128];
    let mut b = 0;
    while b < 128 {
        t[b] = is_delimiter(b as u8 as char);
        b += 1;
    }
    t
};

impl<'src> Lexer<'src> {
    pub(crate) fn new(src: &'src str) -> Self {
        Lexer { src, pos: 0 }
    }

    fn rest(&self) -> &'src str {
        self.src.get(self.pos..).unwrap_or("")
    }

    fn peek(&self) -> Option<char> {
        match self.src.as_bytes().get(self.pos) {
            Some(&b) if b.is_ascii() => Some(char::from(b)),
            _ => self.rest().chars().next(),
        }
    }

    /// Byte offset just past the run of non-delimiter chars starting at `from` (bytes for ASCII,
    /// whole chars otherwise, so non-ASCII whitespace still ends a run).
    #[inline]
    fn scan_run(&self, from: usize) -> usize {
        let bytes = self.src.as_bytes();
        let mut pos = from;
        while let Some(&b) = bytes.get(pos) {
            if RUN_STOP[usize::from(b)] {
                return if b.is_ascii() {
                    pos
                } else {
                    self.scan_run_unicode(pos)
                };
            }
            pos += 1;
        }
        pos
    }

    /// [`Self::scan_run`] from a non-ASCII byte on, char by char.
    #[cold]
    fn scan_run_unicode(&self, from: usize) -> usize {
        let bytes = self.src.as_bytes();
        let mut pos = from;
        while let Some(&b) = bytes.get(pos) {
            if b.is_ascii() {
                if ASCII_DELIMITER[usize::from(b)] {
                    return pos;
                }
                pos += 1;
            } else {
                let Some(c) = self.src.get(pos..).and_then(|r| r.chars().next()) else {
                    return pos;
                };
                if is_delimiter(c) {
                    return pos;
                }
                pos += c.len_utf8();
            }
        }
        pos
    }

    /// The next token, `Ok(None)` at the end of input.
    #[inline]
    pub(crate) fn next_token(&mut self) -> Result<Option<Token>, ParseError> {
        // ASCII whitespace byte by byte; comments and other whitespace on the slow path.
        let bytes = self.src.as_bytes();
        while bytes
            .get(self.pos)
            .is_some_and(|&b| ASCII_SPACE[usize::from(b)])
        {
            self.pos += 1;
        }
        let c = match bytes.get(self.pos) {
            Some(&b) if b.is_ascii() && b != b';' && b != b'#' => char::from(b),
            None => return Ok(None),
            Some(_) => {
                self.skip_atmosphere()?;
                match self.peek() {
                    Some(c) => c,
                    None => return Ok(None),
                }
            }
        };
        let start = self.pos;
        let one = |kind| (kind, start + 1);
        let (kind, end) = match c {
            '(' => one(TokenKind::Open(Delim::Paren)),
            '[' => one(TokenKind::Open(Delim::Bracket)),
            ')' => one(TokenKind::Close(Delim::Paren)),
            ']' => one(TokenKind::Close(Delim::Bracket)),
            '\'' => one(TokenKind::Prefix("quote")),
            '`' => one(TokenKind::Prefix("quasiquote")),
            ',' if self.rest().starts_with(",@") => {
                (TokenKind::Prefix("unquote-splicing"), start + 2)
            }
            ',' => one(TokenKind::Prefix("unquote")),
            '"' => return Err(self.string_error(start)),
            // A symbol: no number, `.` or `+inf.0`-like word starts this way.
            _ if c.is_ascii() && !matches!(c, '0'..='9' | '+' | '-' | '.' | '#') => {
                (TokenKind::Sym, self.scan_run(start))
            }
            '#' if self.rest().starts_with("#;") => (TokenKind::DatumComment, start + 2),
            '#' => self.hash_token(start)?,
            _ => {
                let end = self.scan_run(start);
                let text = self.src.get(start..end).unwrap_or("");
                (classify_atom(text, Span::new(start, end))?, end)
            }
        };
        self.pos = end;
        Ok(Some(Token { kind, start, end }))
    }

    /// Skips whitespace, `;` line comments and nestable `#| … |#` block comments.
    #[cold]
    fn skip_atmosphere(&mut self) -> Result<(), ParseError> {
        loop {
            // ASCII whitespace, byte by byte.
            let bytes = self.src.as_bytes();
            while bytes
                .get(self.pos)
                .is_some_and(|&b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c'))
            {
                self.pos += 1;
            }
            let rest = self.rest();
            let Some(c) = rest.chars().next() else {
                return Ok(());
            };
            if c.is_whitespace() {
                self.pos += c.len_utf8();
            } else if c == ';' {
                self.pos += rest.find('\n').unwrap_or(rest.len());
            } else if rest.starts_with("#|") {
                self.skip_block_comment()?;
            } else {
                return Ok(());
            }
        }
    }

    fn skip_block_comment(&mut self) -> Result<(), ParseError> {
        let start = self.pos;
        let bytes = self.src.as_bytes();
        let mut pos = start + 2;
        let mut depth = 1usize;
        while depth > 0 {
            let Some(rest) = bytes.get(pos..).filter(|rest| !rest.is_empty()) else {
                return Err(ParseError::new(
                    ParseErrorKind::UnexpectedEof,
                    Span::new(start, start + 2),
                    "unterminated block comment: `#|` has no matching `|#`",
                ));
            };
            if rest.starts_with(b"|#") {
                depth -= 1;
                pos += 2;
            } else if rest.starts_with(b"#|") {
                depth += 1;
                pos += 2;
            } else {
                pos += 1;
            }
        }
        // `|#` is ASCII, so `pos` is on a char boundary here.
        self.pos = pos;
        Ok(())
    }

    /// `#t`, `#f`, `#true`, `#false`; anything else after `#` is an error.
    #[cold]
    fn hash_token(&self, start: usize) -> Result<(TokenKind, usize), ParseError> {
        let end = self.scan_run(start + 1);
        let text = self.src.get(start..end).unwrap_or("#");
        match text {
            "#t" | "#true" => Ok((TokenKind::Bool(true), end)),
            "#f" | "#false" => Ok((TokenKind::Bool(false), end)),
            "#" if self
                .src
                .get(end..)
                .is_some_and(|rest| rest.starts_with('(')) =>
            {
                Err(ParseError::new(
                    ParseErrorKind::StrayToken,
                    Span::new(start, end + 1),
                    "vector literals `#(...)` are not supported; write `[a b c]` or `(vec a b c)`",
                ))
            }
            "#" => Err(ParseError::new(
                ParseErrorKind::StrayToken,
                Span::new(start, end),
                "unexpected `#`",
            )),
            _ => Err(ParseError::new(
                ParseErrorKind::StrayToken,
                Span::new(start, end),
                format!(
                    "unknown `#` syntax `{text}` (only `#t`, `#f`, `#true`, `#false`, `#;` and `#| |#` are supported)"
                ),
            )),
        }
    }

    /// Strings are not part of the language; the error spans the literal.
    #[cold]
    fn string_error(&self, start: usize) -> ParseError {
        let bytes = self.src.as_bytes();
        let mut pos = start + 1;
        let mut end = self.src.len();
        while let Some(&b) = bytes.get(pos) {
            match b {
                b'\\' => pos += 2,
                b'"' => {
                    end = pos + 1;
                    break;
                }
                _ => pos += 1,
            }
        }
        ParseError::new(
            ParseErrorKind::StrayToken,
            Span::new(start, end.min(self.src.len())),
            "string literals are not supported",
        )
    }
}

/// A symbol, `.`, or a number; a token that starts like a number must be one.
fn classify_atom(text: &str, span: Span) -> Result<TokenKind, ParseError> {
    // A leading digit: a number or a bad one (no special word starts with a digit).
    if text.as_bytes().first().is_some_and(u8::is_ascii_digit)
        && let Some(x) = short_decimal(text)
    {
        return Ok(TokenKind::Num(x));
    }
    match text {
        "." => return Ok(TokenKind::Dot),
        "+inf.0" => return Ok(TokenKind::Num(f64::INFINITY)),
        "-inf.0" => return Ok(TokenKind::Num(f64::NEG_INFINITY)),
        "+nan.0" | "-nan.0" => return Ok(TokenKind::Num(f64::NAN)),
        _ => {}
    }
    if !is_number_attempt(text) {
        return Ok(TokenKind::Sym);
    }
    if let Some(x) = short_decimal(text) {
        return Ok(TokenKind::Num(x));
    }
    if is_decimal(text)
        && let Ok(x) = text.parse::<f64>()
    {
        return Ok(TokenKind::Num(x));
    }
    Err(ParseError::new(
        ParseErrorKind::BadNumber,
        span,
        format!("bad number `{text}` (numbers look like `42`, `-0.5`, `.5`, `1e-8`, `+inf.0`)"),
    ))
}

/// Exact powers of ten (`10^k` is exact in f64 up to `k = 22`).
const POW10: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// `[+-]? digits [. digits?]` or `[+-]? . digits`, at most 15 digits, no exponent: the value is
/// `m / 10^k` with `m < 2^53` and `10^k` exact, so the one correctly rounded division gives the
/// bits `str::parse` gives (Clinger's fast path). `None` for any other text.
fn short_decimal(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    let (neg, body) = match b.first() {
        Some(b'-') => (true, b.get(1..)?),
        Some(b'+') => (false, b.get(1..)?),
        _ => (false, b),
    };
    let mut m: u64 = 0;
    let mut n_digits = 0usize;
    let mut n_frac: Option<usize> = None;
    for &c in body {
        match c {
            b'0'..=b'9' => {
                m = m * 10 + u64::from(c - b'0');
                n_digits += 1;
                if n_digits > 15 {
                    return None;
                }
                if let Some(k) = n_frac.as_mut() {
                    *k += 1;
                }
            }
            b'.' if n_frac.is_none() => n_frac = Some(0),
            _ => return None,
        }
    }
    if n_digits == 0 {
        return None;
    }
    let x = m as f64 / POW10[n_frac.unwrap_or(0)];
    Some(if neg { -x } else { x })
}

/// Starts with a digit, or with `+`, `-` or `.` followed by a digit, or with `+.`/`-.` and a digit.
fn is_number_attempt(text: &str) -> bool {
    let b = text.as_bytes();
    let digit_at = |idx: usize| b.get(idx).is_some_and(u8::is_ascii_digit);
    match b.first() {
        Some(c) if c.is_ascii_digit() => true,
        Some(b'.') => digit_at(1),
        Some(b'+' | b'-') => digit_at(1) || (b.get(1) == Some(&b'.') && digit_at(2)),
        _ => false,
    }
}

/// `[+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?`, the whole text.
fn is_decimal(text: &str) -> bool {
    let b = text.as_bytes();
    let mut idx = 0;
    let count_digits = |idx: &mut usize| {
        let from = *idx;
        while b.get(*idx).is_some_and(u8::is_ascii_digit) {
            *idx += 1;
        }
        *idx - from
    };
    if matches!(b.first(), Some(b'+' | b'-')) {
        idx += 1;
    }
    let mut n_mantissa = count_digits(&mut idx);
    if b.get(idx) == Some(&b'.') {
        idx += 1;
        n_mantissa += count_digits(&mut idx);
    }
    if n_mantissa == 0 {
        return false;
    }
    if matches!(b.get(idx), Some(b'e' | b'E')) {
        idx += 1;
        if matches!(b.get(idx), Some(b'+' | b'-')) {
            idx += 1;
        }
        if count_digits(&mut idx) == 0 {
            return false;
        }
    }
    idx == b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Result<Vec<TokenKind>, ParseErrorKind> {
        let mut lexer = Lexer::new(src);
        let mut out = Vec::new();
        loop {
            match lexer.next_token() {
                Ok(Some(token)) => out.push(token.kind),
                Ok(None) => return Ok(out),
                Err(err) => return Err(err.kind),
            }
        }
    }

    fn num(src: &str) -> f64 {
        match kinds(src) {
            Ok(k) => match k.as_slice() {
                [TokenKind::Num(x)] => *x,
                other => panic!("{src}: {other:?}"),
            },
            Err(e) => panic!("{src}: {e:?}"),
        }
    }

    #[test]
    fn numbers() {
        assert_eq!(num("42"), 42.0);
        assert_eq!(num(".5"), 0.5);
        assert_eq!(num("5."), 5.0);
        assert_eq!(num("-0.25"), -0.25);
        assert_eq!(num("+3"), 3.0);
        assert_eq!(num("+.5"), 0.5);
        assert_eq!(num("-.5"), -0.5);
        assert_eq!(num("1e-8"), 1e-8);
        assert_eq!(num("2.5E+3"), 2500.0);
        assert_eq!(num("5.e3"), 5000.0);
        assert_eq!(num("+inf.0"), f64::INFINITY);
        assert_eq!(num("-inf.0"), f64::NEG_INFINITY);
        assert!(num("+nan.0").is_nan());
        assert_eq!(num("1e400"), f64::INFINITY);
    }

    #[test]
    fn short_decimals_are_the_bits_parse_gives() {
        // Oracle: `str::parse`, on every short decimal shape and on seeded random digits.
        let mut texts: Vec<String> = [
            "0",
            "-0",
            "+0",
            "0.0",
            "-0.0",
            ".5",
            "-.5",
            "+.5",
            "5.",
            "-1.205",
            "0.1",
            "0.2",
            "0.3",
            "123456789012345",
            "1234567.89012345",
            ".000000000000001",
            "999999999999999.",
            "0.30000000000000004",
            "9007199254740993",
            "1.7976931348623157",
        ]
        .iter()
        .map(|t| t.to_string())
        .collect();
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(15);
        for _ in 0..20_000 {
            let n = rng.random_range(1..=15);
            let digits: String = (0..n)
                .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
                .collect();
            let dot = rng.random_range(0..=n);
            let sign = ["", "-", "+"][rng.random_range(0..3)];
            texts.push(format!("{sign}{}.{}", &digits[..dot], &digits[dot..]));
        }
        for t in &texts {
            let want: f64 = t.parse().expect("a decimal");
            match short_decimal(t) {
                Some(x) => assert_eq!(x.to_bits(), want.to_bits(), "{t}"),
                None => assert!(t.bytes().filter(u8::is_ascii_digit).count() > 15, "{t}"),
            }
            assert_eq!(num(t).to_bits(), want.to_bits(), "{t}");
        }
        for t in ["1e5", "1.2.3", ".", "-", "1x", "0x1", "1234567890123456"] {
            assert_eq!(short_decimal(t), None, "{t}");
        }
    }

    #[test]
    fn bad_numbers() {
        for src in [
            "1.2.3", "12abc", "-3x", "1e", "1e+", "1+", ".5.", "1/2", "0x10", "1_000", "+5e",
        ] {
            assert_eq!(kinds(src), Err(ParseErrorKind::BadNumber), "{src}");
        }
    }

    #[test]
    fn symbols_that_look_numeric() {
        for src in [
            "+", "-", "...", "->x", "-x", "+inf", "inf", "nan", ".a", "+.", "e5", "a1.2.3",
        ] {
            assert_eq!(kinds(src), Ok(vec![TokenKind::Sym]), "{src}");
        }
    }

    #[test]
    fn punctuation_and_comments() {
        use TokenKind::*;
        assert_eq!(
            kinds("('a `b ,c ,@d . #t #false) ; x\n #| a #| nested |# b |# [e]"),
            Ok(vec![
                Open(Delim::Paren),
                Prefix("quote"),
                Sym,
                Prefix("quasiquote"),
                Sym,
                Prefix("unquote"),
                Sym,
                Prefix("unquote-splicing"),
                Sym,
                Dot,
                Bool(true),
                Bool(false),
                Close(Delim::Paren),
                Open(Delim::Bracket),
                Sym,
                Close(Delim::Bracket),
            ])
        );
        assert_eq!(kinds("#;x"), Ok(vec![DatumComment, Sym]));
        assert_eq!(kinds("a'b"), Ok(vec![Sym, Prefix("quote"), Sym]));
    }

    #[test]
    fn non_ascii_text_and_whitespace() {
        // The byte-wise scan: non-ASCII letters stay in a symbol, non-ASCII whitespace (NBSP,
        // U+2003) ends one and is skipped, with byte spans.
        let src = "(λx\u{a0}y\u{2003}1.5)";
        let mut lexer = Lexer::new(src);
        let mut spans = Vec::new();
        while let Ok(Some(t)) = lexer.next_token() {
            spans.push((t.kind, &src[t.start..t.end]));
        }
        assert_eq!(
            spans,
            vec![
                (TokenKind::Open(Delim::Paren), "("),
                (TokenKind::Sym, "λx"),
                (TokenKind::Sym, "y"),
                (TokenKind::Num(1.5), "1.5"),
                (TokenKind::Close(Delim::Paren), ")"),
            ]
        );
        assert_eq!(kinds("a\x0bb\x0cc"), Ok(vec![TokenKind::Sym; 3]));
    }

    #[test]
    fn lexical_errors() {
        assert_eq!(kinds("\"str\""), Err(ParseErrorKind::StrayToken));
        assert_eq!(kinds("\"unterminated \\"), Err(ParseErrorKind::StrayToken));
        assert_eq!(kinds("#x1F"), Err(ParseErrorKind::StrayToken));
        assert_eq!(kinds("#(1 2)"), Err(ParseErrorKind::StrayToken));
        assert_eq!(kinds("#"), Err(ParseErrorKind::StrayToken));
        assert_eq!(
            kinds("#| open #| nested |#"),
            Err(ParseErrorKind::UnexpectedEof)
        );
    }
}
