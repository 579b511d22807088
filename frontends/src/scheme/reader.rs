//! The Scheme reader: tokens to heap data with spans, on an explicit stack so nesting depth is unbounded.

use ndvm_core::{Heap, Node, NodeId, Program, SrcSpan};

use super::lexer::{Delim, Lexer, Token, TokenKind};
use crate::error::{ParseError, ParseErrorKind};
use crate::span::Span;

/// The state of the `.` in the list being read.
#[derive(Clone, Copy)]
enum DotState {
    /// No `.` seen yet.
    None,
    /// A `.` at this span, waiting for its tail datum.
    AfterDot(Span),
    /// The tail datum after the `.`; only `)` may follow.
    Tail(NodeId),
}

/// A list being read: its opener and where its elements so far (each with its start byte) begin
/// on the reader's shared item stack.
struct ListFrame {
    delim: Delim,
    open_start: u32,
    first_item: usize,
    dot: DotState,
}

/// An unfinished construct waiting for datums.
enum Frame {
    List(ListFrame),
    /// `'`, `` ` ``, `,` or `,@` waiting for its datum.
    Prefix {
        name: &'static str,
        start: u32,
        end: u32,
    },
    /// `#;` waiting for the datum it discards.
    DatumComment {
        start: u32,
        end: u32,
    },
}

/// Reads every top-level form of `src` onto `heap`.
pub(crate) fn read_program(heap: &mut Heap, src: &str) -> Result<Program, ParseError> {
    // About one cell per source byte at most, for a typical program (capped: a huge source
    // grows the heap as it goes).
    heap.reserve(src.len().min(1 << 16));
    let mut reader = Reader {
        src,
        heap,
        stack: Vec::with_capacity(16),
        items: Vec::with_capacity(64),
        forms: Vec::new(),
    };
    let mut lexer = Lexer::new(src);
    while let Some(token) = lexer.next_token()? {
        reader.token(token)?;
    }
    reader.finish(src.len())
}

struct Reader<'a> {
    src: &'a str,
    heap: &'a mut Heap,
    stack: Vec<Frame>,
    /// The elements of every open list, innermost last (one buffer instead of one per list).
    items: Vec<(NodeId, u32)>,
    forms: Vec<NodeId>,
}

fn pos(offset: usize) -> u32 {
    u32::try_from(offset).unwrap_or(u32::MAX)
}

/// The source spelling of a prefix abbreviation.
fn prefix_text(name: &str) -> &'static str {
    match name {
        "quote" => "'",
        "quasiquote" => "`",
        "unquote" => ",",
        _ => ",@",
    }
}

fn src_span(start: u32, end: u32) -> SrcSpan {
    SrcSpan { start, end }
}

impl Reader<'_> {
    fn token(&mut self, token: Token) -> Result<(), ParseError> {
        let (start, end) = (pos(token.start), pos(token.end));
        match token.kind {
            TokenKind::Open(delim) => {
                self.stack.push(Frame::List(ListFrame {
                    delim,
                    open_start: start,
                    first_item: self.items.len(),
                    dot: DotState::None,
                }));
                Ok(())
            }
            TokenKind::Close(delim) => self.close(delim, token.span()),
            TokenKind::Prefix(name) => {
                self.stack.push(Frame::Prefix { name, start, end });
                Ok(())
            }
            TokenKind::DatumComment => {
                self.stack.push(Frame::DatumComment { start, end });
                Ok(())
            }
            TokenKind::Dot => self.dot(token.span()),
            TokenKind::Num(x) => {
                let id = self.heap.alloc_spanned(Node::Num(x), src_span(start, end));
                self.deliver(id, start, end)
            }
            TokenKind::Bool(b) => {
                self.deliver(if b { Heap::TRUE } else { Heap::FALSE }, start, end)
            }
            TokenKind::Sym => {
                let text = self.src.get(token.start..token.end).unwrap_or("");
                let sym = self.heap.intern(text);
                let id = self
                    .heap
                    .alloc_spanned(Node::Sym(sym), src_span(start, end));
                self.deliver(id, start, end)
            }
        }
    }

    /// Hands a finished datum to the innermost unfinished construct (or the top level).
    #[inline]
    fn deliver(&mut self, node: NodeId, start: u32, end: u32) -> Result<(), ParseError> {
        // The common case: an element of an open list with no `.` yet.
        if let Some(Frame::List(ListFrame {
            dot: DotState::None,
            ..
        })) = self.stack.last()
        {
            self.items.push((node, start));
            return Ok(());
        }
        self.deliver_other(node, start, end)
    }

    /// [`Self::deliver`] to the top level, a prefix, a datum comment or a dotted tail.
    #[inline(never)]
    fn deliver_other(
        &mut self,
        mut node: NodeId,
        mut start: u32,
        end: u32,
    ) -> Result<(), ParseError> {
        loop {
            match self.stack.last_mut() {
                None => {
                    self.forms.push(node);
                    return Ok(());
                }
                Some(Frame::DatumComment { .. }) => {
                    self.stack.pop();
                    return Ok(());
                }
                Some(&mut Frame::Prefix {
                    name,
                    start: prefix_start,
                    end: prefix_end,
                }) => {
                    self.stack.pop();
                    let sym = self.heap.intern(name);
                    let head = self
                        .heap
                        .alloc_spanned(Node::Sym(sym), src_span(prefix_start, prefix_end));
                    let rest = self
                        .heap
                        .alloc_spanned(Node::Pair(node, Heap::NIL), src_span(start, end));
                    start = prefix_start;
                    node = self
                        .heap
                        .alloc_spanned(Node::Pair(head, rest), src_span(start, end));
                }
                Some(Frame::List(list)) => {
                    return match list.dot {
                        DotState::None => {
                            self.items.push((node, start));
                            Ok(())
                        }
                        DotState::AfterDot(_) => {
                            list.dot = DotState::Tail(node);
                            Ok(())
                        }
                        DotState::Tail(_) => Err(ParseError::new(
                            ParseErrorKind::StrayToken,
                            Span { start, end },
                            "only one datum may follow `.` in a dotted list; expected `)`",
                        )),
                    };
                }
            }
        }
    }

    fn dot(&mut self, span: Span) -> Result<(), ParseError> {
        let stray = |message: &str| Err(ParseError::new(ParseErrorKind::StrayToken, span, message));
        match self.stack.last_mut() {
            None => stray("unexpected `.` outside a list"),
            Some(Frame::Prefix { name, .. }) => {
                let message = format!("expected a datum after `{}`, found `.`", prefix_text(name));
                stray(&message)
            }
            Some(Frame::DatumComment { .. }) => stray("expected a datum after `#;`, found `.`"),
            Some(Frame::List(list)) => match (list.delim, list.dot) {
                (Delim::Bracket, _) => stray("`.` is not allowed inside `[...]`"),
                (Delim::Paren, DotState::None) if list.first_item == self.items.len() => {
                    stray("`.` must follow at least one datum in a list")
                }
                (Delim::Paren, DotState::None) => {
                    list.dot = DotState::AfterDot(span);
                    Ok(())
                }
                (Delim::Paren, _) => stray("more than one `.` in a list"),
            },
        }
    }

    fn close(&mut self, delim: Delim, span: Span) -> Result<(), ParseError> {
        let close = delim.close_char();
        let unexpected = |message: String| {
            Err(ParseError::new(
                ParseErrorKind::UnexpectedClose,
                span,
                message,
            ))
        };
        let list = match self.stack.pop() {
            None => {
                return unexpected(format!(
                    "unexpected `{close}`: there is no open list to close"
                ));
            }
            Some(Frame::Prefix { name, .. }) => {
                return unexpected(format!(
                    "expected a datum after `{}`, found `{close}`",
                    prefix_text(name)
                ));
            }
            Some(Frame::DatumComment { .. }) => {
                return unexpected(format!("expected a datum after `#;`, found `{close}`"));
            }
            Some(Frame::List(list)) => list,
        };
        if list.delim != delim {
            return unexpected(format!(
                "mismatched `{close}`: the innermost open list starts with `{}`",
                list.delim.open_char()
            ));
        }
        let end = span.end;
        let mut tail = match list.dot {
            DotState::None => Heap::NIL,
            DotState::Tail(tail) => tail,
            DotState::AfterDot(dot_span) => {
                return Err(ParseError::new(
                    ParseErrorKind::StrayToken,
                    dot_span,
                    format!("expected a datum after `.`, found `{close}`"),
                ));
            }
        };
        while self.items.len() > list.first_item {
            let Some((item, item_start)) = self.items.pop() else {
                break;
            };
            tail = self
                .heap
                .alloc_spanned(Node::Pair(item, tail), src_span(item_start, end));
        }
        if list.delim == Delim::Bracket {
            let sym = self.heap.intern("vec");
            let head = self.heap.alloc_spanned(
                Node::Sym(sym),
                src_span(list.open_start, list.open_start + 1),
            );
            tail = self.heap.cons(head, tail);
        }
        if matches!(self.heap.node(tail), Node::Pair(..)) {
            self.heap.set_span(tail, src_span(list.open_start, end));
        }
        self.deliver(tail, list.open_start, end)
    }

    fn finish(self, src_len: usize) -> Result<Program, ParseError> {
        match self.stack.last() {
            None => {}
            Some(Frame::List(list)) => {
                let open = list.delim.open_char();
                return Err(ParseError::new(
                    ParseErrorKind::UnbalancedOpen,
                    Span {
                        start: list.open_start,
                        end: list.open_start.saturating_add(1),
                    },
                    format!(
                        "unclosed `{open}`: expected `{}` before the end of input",
                        list.delim.close_char()
                    ),
                ));
            }
            Some(&Frame::Prefix { name, start, end }) => {
                return Err(ParseError::new(
                    ParseErrorKind::UnexpectedEof,
                    Span { start, end },
                    format!(
                        "expected a datum after `{}`, found the end of input",
                        prefix_text(name)
                    ),
                ));
            }
            Some(&Frame::DatumComment { start, end }) => {
                return Err(ParseError::new(
                    ParseErrorKind::UnexpectedEof,
                    Span { start, end },
                    "expected a datum after `#;`, found the end of input",
                ));
            }
        }
        if self.forms.is_empty() {
            return Err(ParseError::new(
                ParseErrorKind::EmptyProgram,
                Span::at(src_len),
                "empty program: the source holds no forms",
            ));
        }
        Ok(Program::new(self.heap, self.forms))
    }
}
