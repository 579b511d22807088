//! Round trips for the Scheme reader and the core printer: random data print then parse back equal,
//! parsing arbitrary text never panics, and print→parse→print is a fixpoint on every success file.

use std::fs;
use std::path::Path;

use ndvm_core::{Heap, Node, NodeId, print};
use ndvm_frontends::{render_parse_error, scheme};
use proptest::prelude::*;

/// A datum built outside any heap, so proptest can shrink it.
#[derive(Clone, Debug)]
enum Datum {
    Nil,
    Bool(bool),
    Num(f64),
    Sym(String),
    Pair(Box<Datum>, Box<Datum>),
}

/// Builds `datum` on `heap` (proptest keeps the depth small, so recursion is fine here).
fn build(heap: &mut Heap, datum: &Datum) -> NodeId {
    match datum {
        Datum::Nil => Heap::NIL,
        Datum::Bool(b) => {
            if *b {
                Heap::TRUE
            } else {
                Heap::FALSE
            }
        }
        Datum::Num(x) => heap.num(*x),
        Datum::Sym(name) => heap.sym(name),
        Datum::Pair(car, cdr) => {
            let car = build(heap, car);
            let cdr = build(heap, cdr);
            heap.cons(car, cdr)
        }
    }
}

/// Structural equality of two data on two heaps; numbers compare by bits, except any NaN equals
/// any NaN. Walks an explicit stack.
fn same_datum(ha: &Heap, a: NodeId, hb: &Heap, b: NodeId) -> bool {
    let mut stack = vec![(a, b)];
    while let Some((a, b)) = stack.pop() {
        let same = match (ha.node(a), hb.node(b)) {
            (Node::Nil, Node::Nil) => true,
            (Node::Bool(x), Node::Bool(y)) => x == y,
            (Node::Num(x), Node::Num(y)) => {
                (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits()
            }
            (Node::Sym(x), Node::Sym(y)) => ha.symbol_name(x) == hb.symbol_name(y),
            (Node::Pair(a1, d1), Node::Pair(a2, d2)) => {
                stack.push((d1, d2));
                stack.push((a1, a2));
                true
            }
            _ => false,
        };
        if !same {
            return false;
        }
    }
    true
}

fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        (-1000i32..1000).prop_map(f64::from),
        (-1000i32..1000, -30i32..30).prop_map(|(m, e)| f64::from(m) * 10f64.powi(e)),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::NAN),
        Just(-0.0),
        Just(1e300),
        Just(5e-324),
    ]
}

fn symbol() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z!$%&*/:<=>?^_~λ][a-zA-Z0-9!$%&*/:<=>?^_~+.@#|{}λ-]{0,8}",
        Just("+".to_string()),
        Just("-".to_string()),
        Just("...".to_string()),
        Just("->x".to_string()),
        Just("quote".to_string()),
        Just("vec".to_string()),
    ]
}

fn datum() -> impl Strategy<Value = Datum> {
    let leaf = prop_oneof![
        Just(Datum::Nil),
        any::<bool>().prop_map(Datum::Bool),
        number().prop_map(Datum::Num),
        symbol().prop_map(Datum::Sym),
    ];
    leaf.prop_recursive(8, 128, 6, |inner| {
        prop_oneof![
            // Proper lists.
            prop::collection::vec(inner.clone(), 0..6).prop_map(|items| {
                items.into_iter().rev().fold(Datum::Nil, |tail, item| {
                    Datum::Pair(Box::new(item), Box::new(tail))
                })
            }),
            // Arbitrary pairs, so dotted tails appear.
            (inner.clone(), inner).prop_map(|(a, d)| Datum::Pair(Box::new(a), Box::new(d))),
        ]
    })
}

/// Text that is heavy on the characters the reader treats specially.
fn scheme_noise() -> impl Strategy<Value = String> {
    let special = prop::sample::select(vec![
        '(', ')', '[', ']', '\'', '`', ',', '@', '#', '|', ';', '.', '"', '\\', ' ', '\n', '\t',
        '0', '1', '9', '+', '-', 'e', 'E', 't', 'f', 'x', 'a', 'λ', '\r',
    ]);
    let ch = prop_oneof![4 => special, 1 => any::<char>()];
    prop::collection::vec(ch, 0..64).prop_map(|chars| chars.into_iter().collect())
}

/// Parses `src`; on success the program must print and parse back to the same data, on failure
/// the span must lie inside the source and render without panicking.
fn check_reads_consistently(src: &str) -> Result<(), TestCaseError> {
    let mut heap = Heap::new();
    match scheme::parse(&mut heap, src) {
        Ok(program) => {
            let printed = print::program_to_string(&heap, &program)
                .map_err(|e| TestCaseError::fail(format!("{src:?}: {e}")))?;
            let mut heap2 = Heap::new();
            let reread = scheme::parse(&mut heap2, &printed)
                .map_err(|e| TestCaseError::fail(format!("{printed:?} does not reparse: {e:?}")))?;
            prop_assert_eq!(program.forms().len(), reread.forms().len());
            for (&a, &b) in program.forms().iter().zip(reread.forms()) {
                prop_assert!(
                    same_datum(&heap, a, &heap2, b),
                    "{:?} -> {:?}",
                    src,
                    printed
                );
            }
        }
        Err(err) => {
            prop_assert!(err.span.start <= err.span.end && err.span.end as usize <= src.len());
            prop_assert!(!err.message.is_empty());
            let rendered = render_parse_error("fuzz.scm", src, &err);
            prop_assert!(rendered.starts_with("fuzz.scm:"));
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn printed_data_reads_back_equal(data in prop::collection::vec(datum(), 1..4)) {
        let mut heap = Heap::new();
        let forms: Vec<NodeId> = data.iter().map(|d| build(&mut heap, d)).collect();
        let program = ndvm_core::Program::new(&heap, forms);
        let printed = print::program_to_string(&heap, &program)
            .map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let mut heap2 = Heap::new();
        let reread = scheme::parse(&mut heap2, &printed)
            .map_err(|e| TestCaseError::fail(format!("{printed:?}: {e:?}")))?;
        prop_assert_eq!(program.forms().len(), reread.forms().len());
        for (&a, &b) in program.forms().iter().zip(reread.forms()) {
            prop_assert!(same_datum(&heap, a, &heap2, b), "{}", printed);
        }
        prop_assert_eq!(print::program_to_string(&heap2, &reread), Ok(printed));
    }

    #[test]
    fn parse_never_panics_on_scheme_like_noise(src in scheme_noise()) {
        check_reads_consistently(&src)?;
    }

    #[test]
    fn parse_never_panics_on_arbitrary_strings(src in any::<String>()) {
        check_reads_consistently(&src)?;
    }

    #[test]
    fn parse_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        check_reads_consistently(&String::from_utf8_lossy(&bytes))?;
    }
}

#[test]
fn print_parse_print_is_a_fixpoint_on_success_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/scheme/success");
    let mut n_files = 0;
    for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
        if path.extension().is_none_or(|ext| ext != "scm") {
            continue;
        }
        n_files += 1;
        let src = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut heap = Heap::new();
        let program =
            scheme::parse(&mut heap, &src).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let once = print::program_to_string(&heap, &program)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut heap2 = Heap::new();
        let reread =
            scheme::parse(&mut heap2, &once).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let twice = print::program_to_string(&heap2, &reread)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(once, twice, "{}", path.display());
        assert!(
            program
                .forms()
                .iter()
                .zip(reread.forms())
                .all(|(&a, &b)| same_datum(&heap, a, &heap2, b)),
            "{}",
            path.display()
        );
    }
    assert!(
        n_files >= 12,
        "expected at least 12 success files, found {n_files}"
    );
}
