//! The fuzzer's own s-expressions: the generated programs, their Scheme text, and a small reader
//! for the regression files. Shares no code with the runtime or the front ends.

use std::fmt::Write as _;

/// One s-expression of a generated program.
#[derive(Clone, Debug, PartialEq)]
pub enum Sx {
    /// A number literal.
    Num(f64),
    /// `#t` / `#f`.
    Bool(bool),
    /// A symbol.
    Sym(String),
    /// A proper list (`'x` is `(quote x)`).
    List(Vec<Sx>),
}

/// Deepest nesting the reader accepts (generated programs are far shallower).
pub const MAX_READ_DEPTH: usize = 200;

impl Sx {
    /// A symbol.
    pub fn sym(name: &str) -> Sx {
        Sx::Sym(name.to_string())
    }

    /// A list headed by the symbol `head`.
    pub fn call(head: &str, args: Vec<Sx>) -> Sx {
        let mut items = Vec::with_capacity(args.len() + 1);
        items.push(Sx::sym(head));
        items.extend(args);
        Sx::List(items)
    }

    /// The head symbol of a list, if any.
    pub fn head(&self) -> Option<&str> {
        match self {
            Sx::List(items) => match items.first() {
                Some(Sx::Sym(s)) => Some(s),
                _ => None,
            },
            _ => None,
        }
    }

    /// Scheme text (numbers in Rust's shortest round-trip form, always with a point or exponent).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        // Explicit stack: (node, next child index); depth is bounded by construction anyway.
        enum Step<'a> {
            Open(&'a Sx),
            Close,
            Space,
        }
        let mut stack = vec![Step::Open(self)];
        while let Some(step) = stack.pop() {
            match step {
                Step::Close => out.push(')'),
                Step::Space => out.push(' '),
                Step::Open(Sx::Num(x)) => out.push_str(&number_text(*x)),
                Step::Open(Sx::Bool(b)) => out.push_str(if *b { "#t" } else { "#f" }),
                Step::Open(Sx::Sym(s)) => out.push_str(s),
                Step::Open(Sx::List(items)) => {
                    out.push('(');
                    stack.push(Step::Close);
                    for (i, item) in items.iter().enumerate().rev() {
                        stack.push(Step::Open(item));
                        if i > 0 {
                            stack.push(Step::Space);
                        }
                    }
                }
            }
        }
        out
    }

    /// Every list head in the tree with its count (coverage), visited on an explicit stack.
    pub fn for_each_head(&self, mut f: impl FnMut(&str)) {
        let mut stack = vec![self];
        while let Some(sx) = stack.pop() {
            if let Sx::List(items) = sx {
                if let Some(Sx::Sym(h)) = items.first() {
                    f(h);
                }
                stack.extend(items.iter());
            }
        }
    }

    /// The tree with every call `(head x)` outside a `quote` wrapped as `(+ (head x) name)`, a
    /// fresh name per call site (`prefix0`, `prefix1`, …), and the names: with each name bound
    /// to 0, the program computes the same, and its gradient in a name is the adjoint of that
    /// site's results (summed over the site's visits). Built on an explicit stack.
    pub fn mark_calls(&self, head: &str, prefix: &str) -> (Sx, Vec<String>) {
        enum Work<'a> {
            Enter(&'a Sx),
            /// Build a list of the last `n` outputs, wrapped when `mark`.
            Exit {
                n: usize,
                mark: bool,
            },
        }
        let mut names = Vec::new();
        let mut out: Vec<Sx> = Vec::new();
        let mut work = vec![Work::Enter(self)];
        while let Some(w) = work.pop() {
            match w {
                Work::Enter(sx) => match sx {
                    Sx::List(items) if sx.head() != Some("quote") => {
                        let mark = sx.head() == Some(head) && items.len() == 2;
                        work.push(Work::Exit {
                            n: items.len(),
                            mark,
                        });
                        work.extend(items.iter().rev().map(Work::Enter));
                    }
                    _ => out.push(sx.clone()),
                },
                Work::Exit { n, mark } => {
                    let items = out.split_off(out.len() - n);
                    let list = Sx::List(items);
                    out.push(if mark {
                        let name = format!("{prefix}{}", names.len());
                        let wrapped = Sx::call("+", vec![list, Sx::sym(&name)]);
                        names.push(name);
                        wrapped
                    } else {
                        list
                    });
                }
            }
        }
        (out.pop().expect("one tree in, one out"), names)
    }

    /// Number of nodes (atoms and lists).
    pub fn size(&self) -> usize {
        let mut n = 0;
        let mut stack = vec![self];
        while let Some(sx) = stack.pop() {
            n += 1;
            if let Sx::List(items) = sx {
                stack.extend(items.iter());
            }
        }
        n
    }
}

/// A number as text that reads back as the same f64.
pub fn number_text(x: f64) -> String {
    let mut s = String::new();
    if x.is_finite() && x == x.trunc() && x.abs() < 1e15 {
        let _ = write!(s, "{x:.1}");
    } else {
        let _ = write!(s, "{x:?}");
    }
    s
}

/// Reads one s-expression (the subset [`Sx::to_text`] writes, plus `;` comments and `'x`).
pub fn read(src: &str) -> Result<Sx, String> {
    let mut stack: Vec<Vec<Sx>> = vec![Vec::new()];
    // How many quote wrappers wait for the next datum at each level.
    let mut quotes: Vec<usize> = vec![0];
    let mut chars = src.char_indices().peekable();
    while let Some(&(i, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        if c == ';' {
            while chars.next_if(|&(_, c)| c != '\n').is_some() {}
            continue;
        }
        let datum = match c {
            '(' => {
                chars.next();
                if stack.len() > MAX_READ_DEPTH {
                    return Err("nesting too deep".into());
                }
                stack.push(Vec::new());
                quotes.push(0);
                continue;
            }
            '\'' => {
                chars.next();
                if let Some(q) = quotes.last_mut() {
                    *q += 1;
                }
                continue;
            }
            ')' => {
                chars.next();
                if stack.len() < 2 {
                    return Err(format!("unexpected ) at byte {i}"));
                }
                let items = stack.pop().unwrap_or_default();
                quotes.pop();
                Sx::List(items)
            }
            _ => {
                let start = i;
                let mut end = src.len();
                while let Some(&(j, c)) = chars.peek() {
                    if c.is_whitespace() || c == '(' || c == ')' || c == ';' {
                        end = j;
                        break;
                    }
                    chars.next();
                }
                atom(&src[start..end])
            }
        };
        let mut datum = datum;
        if let Some(q) = quotes.last_mut() {
            for _ in 0..*q {
                datum = Sx::List(vec![Sx::sym("quote"), datum]);
            }
            *q = 0;
        }
        if let Some(top) = stack.last_mut() {
            top.push(datum);
        }
    }
    if stack.len() != 1 {
        return Err("unclosed (".into());
    }
    let mut top = stack.pop().unwrap_or_default();
    match top.len() {
        1 => Ok(top.remove(0)),
        0 => Err("no expression".into()),
        n => Err(format!("{n} top-level expressions, expected one")),
    }
}

fn atom(text: &str) -> Sx {
    match text {
        "#t" => Sx::Bool(true),
        "#f" => Sx::Bool(false),
        _ => match text.parse::<f64>() {
            Ok(x) if !text.starts_with(['+', '-']) || text.len() > 1 => Sx::Num(x),
            _ => Sx::Sym(text.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mark_calls_wraps_each_site_outside_quote() {
        let sx = read("(+ (det (mat a)) (let ((d (det m))) (quote (det q))) (det))").unwrap();
        let (marked, names) = sx.mark_calls("det", "e");
        assert_eq!(names, vec!["e0", "e1"]);
        assert_eq!(
            marked.to_text(),
            "(+ (+ (det (mat a)) e0) (let ((d (+ (det m) e1))) (quote (det q))) (det))"
        );
        // Nested sites: inner first.
        let (nested, names) = read("(det (det x))").unwrap().mark_calls("det", "e");
        assert_eq!(names.len(), 2);
        assert_eq!(nested.to_text(), "(+ (det (+ (det x) e0)) e1)");
    }

    #[test]
    fn text_reads_back() {
        let sx = Sx::call(
            "+",
            vec![
                Sx::Num(0.1),
                Sx::Num(-2.0),
                Sx::List(vec![Sx::sym("quote"), Sx::sym("p0")]),
                Sx::Bool(true),
            ],
        );
        let text = sx.to_text();
        assert_eq!(text, "(+ 0.1 -2.0 (quote p0) #t)");
        assert_eq!(read(&text), Ok(sx));
        assert_eq!(
            read("; c\n('a -)"),
            Ok(Sx::List(vec![
                Sx::List(vec![Sx::sym("quote"), Sx::sym("a")]),
                Sx::sym("-")
            ]))
        );
        assert!(read("(").is_err() && read(")").is_err() && read("1 2").is_err());
    }
}
