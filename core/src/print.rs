//! `Display` of heap data as s-expressions (debugging, cache keys); the only textual form `core` knows.
//!
//! The output reads back as the same data in s-expression notation: numbers use Rust's shortest
//! round-trip form (`1.0`, `1e300`, `-0.5`), with `+inf.0`, `-inf.0` and `+nan.0` for the
//! non-finite values; booleans are `#t`/`#f`; symbols print by name. Printing walks an explicit
//! stack, so arbitrarily deep lists do not overflow the native stack.

use crate::heap::{Heap, Node, NodeId, Program};

/// The s-expression text of the datum at `id`.
pub fn display(heap: &Heap, id: NodeId) -> String {
    let mut out = String::new();
    write_datum(heap, id, &mut out);
    out
}

/// The program's top-level forms, one per line (no trailing newline); `ErrorKind::ForeignProgram`
/// when the program was read into another heap.
pub fn program_to_string(heap: &Heap, program: &Program) -> crate::error::Result<String> {
    program.check_heap(heap)?;
    let mut out = String::new();
    for (form_idx, &form) in program.forms().iter().enumerate() {
        if form_idx > 0 {
            out.push('\n');
        }
        write_datum(heap, form, &mut out);
    }
    Ok(out)
}

/// The text of a number that reads back as the same `f64`.
pub fn number_to_string(x: f64) -> String {
    if x.is_nan() {
        "+nan.0".to_string()
    } else if x == f64::INFINITY {
        "+inf.0".to_string()
    } else if x == f64::NEG_INFINITY {
        "-inf.0".to_string()
    } else {
        // `{:?}` is the shortest representation that round-trips, and always has a `.` or an
        // exponent, so it cannot be mistaken for anything but a number.
        format!("{x:?}")
    }
}

/// Pending work for the printer's explicit stack.
enum Task {
    /// Print a whole datum.
    Datum(NodeId),
    /// Print the rest of a list whose `(` and earlier elements are already written.
    Tail(NodeId),
    /// Close a dotted list after its tail atom.
    Close,
}

/// Appends the text of the datum at `id` to `out`.
fn write_datum(heap: &Heap, id: NodeId, out: &mut String) {
    let mut stack = vec![Task::Datum(id)];
    while let Some(task) = stack.pop() {
        match task {
            Task::Datum(id) => match heap.node(id) {
                Node::Pair(car, cdr) => {
                    out.push('(');
                    stack.push(Task::Tail(cdr));
                    stack.push(Task::Datum(car));
                }
                Node::Nil => out.push_str("()"),
                Node::Bool(true) => out.push_str("#t"),
                Node::Bool(false) => out.push_str("#f"),
                Node::Num(x) => out.push_str(&number_to_string(x)),
                Node::Sym(sym) => out.push_str(heap.symbol_name(sym)),
            },
            Task::Tail(id) => match heap.node(id) {
                Node::Nil => out.push(')'),
                Node::Pair(car, cdr) => {
                    out.push(' ');
                    stack.push(Task::Tail(cdr));
                    stack.push(Task::Datum(car));
                }
                _ => {
                    out.push_str(" . ");
                    stack.push(Task::Close);
                    stack.push(Task::Datum(id));
                }
            },
            Task::Close => out.push(')'),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(build: impl FnOnce(&mut Heap) -> NodeId, expect: &str) {
        let mut heap = Heap::new();
        let id = build(&mut heap);
        assert_eq!(display(&heap, id), expect);
    }

    #[test]
    fn atoms() {
        check(|_| Heap::NIL, "()");
        check(|_| Heap::TRUE, "#t");
        check(|_| Heap::FALSE, "#f");
        check(|h| h.sym("foo-bar?"), "foo-bar?");
        check(|h| h.num(1.0), "1.0");
        check(|h| h.num(-0.5), "-0.5");
        check(|h| h.num(1e300), "1e300");
        check(|h| h.num(1e-8), "1e-8");
        check(|h| h.num(-0.0), "-0.0");
        check(|h| h.num(f64::INFINITY), "+inf.0");
        check(|h| h.num(f64::NEG_INFINITY), "-inf.0");
        check(|h| h.num(f64::NAN), "+nan.0");
    }

    #[test]
    fn lists() {
        check(
            |h| {
                let a = h.sym("a");
                let one = h.num(1.0);
                let inner = h.list(&[one, Heap::TRUE]);
                h.list(&[a, inner, Heap::NIL])
            },
            "(a (1.0 #t) ())",
        );
        check(
            |h| {
                let a = h.sym("a");
                let b = h.sym("b");
                h.cons(a, b)
            },
            "(a . b)",
        );
        check(
            |h| {
                let a = h.sym("a");
                let b = h.sym("b");
                let c = h.num(3.0);
                let tail = h.cons(b, c);
                h.cons(a, tail)
            },
            "(a b . 3.0)",
        );
        check(
            |h| {
                let a = h.sym("a");
                let dotted_nil_car = h.cons(Heap::NIL, Heap::FALSE);
                h.cons(dotted_nil_car, a)
            },
            "((() . #f) . a)",
        );
    }

    #[test]
    fn program_forms_one_per_line() {
        let mut heap = Heap::new();
        let x = heap.sym("x");
        let two = heap.num(2.0);
        let form = heap.list(&[x, two]);
        let program = Program::new(&heap, vec![form, x]);
        assert_eq!(program_to_string(&heap, &program).unwrap(), "(x 2.0)\nx");
        let empty = Program::new(&heap, vec![]);
        assert_eq!(program_to_string(&heap, &empty).unwrap(), "");
        let other = Heap::new();
        let err = program_to_string(&other, &program).unwrap_err();
        assert_eq!(err.kind, crate::ErrorKind::ForeignProgram);
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let depth = 100_000;
        let mut heap = Heap::new();
        let mut id = Heap::NIL;
        for _ in 0..depth {
            id = heap.cons(id, Heap::NIL);
        }
        let text = display(&heap, id);
        assert_eq!(text.len(), 2 * depth + 2);
        assert!(text.starts_with("(((") && text.ends_with(")))"));

        let mut id = heap.num(0.0);
        for _ in 0..depth {
            let a = heap.sym("a");
            id = heap.cons(a, id);
        }
        let text = display(&heap, id);
        assert!(text.ends_with("a a . 0.0)"));
    }
}
