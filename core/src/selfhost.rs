//! Programs about programs, as heap data: a prelude's forms put before a program, and a program
//! handed as quoted data to an evaluator written in the language (`bootstrap/evaluator.scm`).

use crate::error::{CoreError, ErrorKind, Result};
use crate::heap::{Heap, Node, NodeId, Program};

/// The procedure a self-hosted evaluator must define: `(ENTRY (quote FORMS) (quote NAMES) (list
/// NAME ...))` runs the program FORMS with the input NAMES bound to their values.
pub const VIA_ENTRY: &str = "mc-run";

/// `prelude`'s forms followed by `program`'s, as one program on their common heap.
pub fn with_prelude(heap: &Heap, prelude: &Program, program: &Program) -> Result<Program> {
    prelude.check_heap(heap)?;
    program.check_heap(heap)?;
    let forms = prelude.forms().iter().chain(program.forms()).copied();
    Ok(Program::new(heap, forms.collect()))
}

/// `evaluator`'s forms followed by `(mc-run (quote FORMS) (quote (NAME …)) (list NAME …))`: the
/// program run by the evaluator, with the inputs `names` passed in as values (so their gradients
/// flow through it). The evaluator must define [`VIA_ENTRY`], and no input may carry a name the
/// evaluator defines at top level (it would hide the input).
pub fn via(
    heap: &mut Heap,
    evaluator: &Program,
    program: &Program,
    names: &[&str],
) -> Result<Program> {
    evaluator.check_heap(heap)?;
    program.check_heap(heap)?;
    let defined = defined_names(heap, evaluator);
    if !defined.iter().any(|n| n == VIA_ENTRY) {
        return Err(CoreError::new(
            ErrorKind::Input,
            format!("the evaluator defines no `{VIA_ENTRY}` procedure"),
        ));
    }
    if let Some(name) = names.iter().find(|n| defined.iter().any(|d| d == *n)) {
        return Err(CoreError::new(
            ErrorKind::Input,
            format!("the input `{name}` has the name of one of the evaluator's definitions"),
        ));
    }
    let quote = heap.sym("quote");
    let forms = heap.list(program.forms());
    let quoted_forms = heap.list(&[quote, forms]);
    let syms: Vec<NodeId> = names.iter().map(|n| heap.sym(n)).collect();
    let name_list = heap.list(&syms);
    let quoted_names = heap.list(&[quote, name_list]);
    let mut values = vec![heap.sym("list")];
    values.extend(&syms);
    let values = heap.list(&values);
    let entry = heap.sym(VIA_ENTRY);
    let call = heap.list(&[entry, quoted_forms, quoted_names, values]);
    let mut all = evaluator.forms().to_vec();
    all.push(call);
    Ok(Program::new(heap, all))
}

/// The names `program` defines at top level: `(define NAME …)` and `(define (NAME …) …)`.
fn defined_names(heap: &Heap, program: &Program) -> Vec<String> {
    let sym_name = |id: NodeId| match heap.node(id) {
        Node::Sym(s) => Some(heap.symbol_name(s).to_string()),
        _ => None,
    };
    let mut out = Vec::new();
    for &form in program.forms() {
        let Node::Pair(head, rest) = heap.node(form) else {
            continue;
        };
        if sym_name(head).as_deref() != Some("define") {
            continue;
        }
        let Node::Pair(target, _) = heap.node(rest) else {
            continue;
        };
        let name = match heap.node(target) {
            Node::Pair(name, _) => sym_name(name),
            _ => sym_name(target),
        };
        out.extend(name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(heap: &mut Heap, forms: &[&[&str]]) -> Program {
        let ids: Vec<NodeId> = forms
            .iter()
            .map(|f| {
                let items: Vec<NodeId> = f.iter().map(|s| heap.sym(s)).collect();
                heap.list(&items)
            })
            .collect();
        Program::new(heap, ids)
    }

    #[test]
    fn via_wraps_the_program_as_quoted_data() {
        let mut heap = Heap::new();
        let ev = read(&mut heap, &[&["define", "mc-run", "x"]]);
        let prog = read(&mut heap, &[&["+", "a", "b"]]);
        let p = via(&mut heap, &ev, &prog, &["a", "b"]).unwrap();
        assert_eq!(p.forms().len(), 2);
        let text = crate::print::display(&heap, p.forms()[1]);
        assert_eq!(text, "(mc-run (quote ((+ a b))) (quote (a b)) (list a b))");
    }

    #[test]
    fn via_refuses_a_missing_entry_and_a_hidden_input() {
        let mut heap = Heap::new();
        let ev = read(&mut heap, &[&["define", "mc-helper", "x"]]);
        let prog = read(&mut heap, &[&["+", "a"]]);
        let e = via(&mut heap, &ev, &prog, &["a"]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Input);
        assert!(e.message.contains("no `mc-run`"), "{}", e.message);
        let ev = read(
            &mut heap,
            &[&["define", "mc-run", "x"], &["define", "a", "x"]],
        );
        let e = via(&mut heap, &ev, &prog, &["a"]).unwrap_err();
        assert!(e.message.contains("input `a`"), "{}", e.message);
    }

    #[test]
    fn with_prelude_puts_the_prelude_first() {
        let mut heap = Heap::new();
        let pre = read(&mut heap, &[&["define", "f", "x"]]);
        let prog = read(&mut heap, &[&["f"]]);
        let p = with_prelude(&heap, &pre, &prog).unwrap();
        assert_eq!(p.forms(), &[pre.forms()[0], prog.forms()[0]]);
        let other = Heap::new();
        assert_eq!(
            with_prelude(&other, &pre, &prog).unwrap_err().kind,
            ErrorKind::ForeignProgram
        );
    }
}
