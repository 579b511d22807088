//! The plugin point, proven: a third front end, a stack notation, written in this one file and
//! registered with one line, runs through `eval` (value and exact gradients), `calibrate`,
//! `translate` and a co-search without a change anywhere else.
//!
//! The notation: one instruction per line (or several, separated by whitespace), `#` comments.
//! `push 2.5` pushes a number, `load x` a variable; `add` `sub` `mul` `div` pop two values and
//! push the result; `call NAME N` pops N values and pushes `NAME` applied to them (any runtime
//! primitive: `call exp 1`, `call expt 2`). The one value left is the program's value.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ndvm_core::{ErrorKind, Heap, Node, NodeId, Program, SrcSpan, print};
use ndvm_frontends::{Frontend, ParseError, ParseErrorKind, Registry, Span};
use ndvm_search::calibratecmd::{self, CalibrateArgs};
use ndvm_search::engine::{EventStatus, RunOptions};
use ndvm_search::evalcmd::{self, Binding, EvalArgs};
use ndvm_search::observe::Nothing;
use ndvm_search::translatecmd::{self, TranslateArgs};

/// The stack front end.
struct Stack;

/// The binary operators and the runtime primitive each stands for.
const BINARY: [(&str, &str); 4] = [("add", "+"), ("sub", "-"), ("mul", "*"), ("div", "/")];

/// Longest `call NAME N` argument list (bounds what one instruction may pop).
const MAX_ARGS: usize = 64;

impl Frontend for Stack {
    fn name(&self) -> &str {
        "stack"
    }

    fn extensions(&self) -> &[&str] {
        &["stack"]
    }

    fn parse(&self, heap: &mut Heap, src: &str) -> Result<Program, ParseError> {
        let words = words(src);
        let mut stack: Vec<NodeId> = Vec::new();
        let mut i = 0;
        while i < words.len() {
            let (op, span) = words[i];
            let operand = |k: usize| {
                words.get(i + k).copied().ok_or_else(|| {
                    ParseError::new(
                        ParseErrorKind::UnexpectedEof,
                        span,
                        format!("`{op}` needs {k} operand(s)"),
                    )
                })
            };
            let node = match op {
                "push" => {
                    let (text, at) = operand(1)?;
                    let x: f64 = text.parse().map_err(|_| {
                        ParseError::new(
                            ParseErrorKind::BadNumber,
                            at,
                            format!("bad number `{text}`"),
                        )
                    })?;
                    i += 1;
                    heap.num(x)
                }
                "load" => {
                    let (name, _) = operand(1)?;
                    i += 1;
                    heap.sym(name)
                }
                "call" => {
                    let (name, _) = operand(1)?;
                    let (count, at) = operand(2)?;
                    let n = count
                        .parse::<usize>()
                        .ok()
                        .filter(|n| *n <= MAX_ARGS)
                        .ok_or_else(|| {
                            let m = format!(
                                "`call` takes an argument count of 0 to {MAX_ARGS}, not `{count}`"
                            );
                            ParseError::new(ParseErrorKind::BadNumber, at, m)
                        })?;
                    i += 2;
                    apply(heap, &mut stack, name, n, span)?
                }
                _ => match BINARY.iter().find(|(word, _)| *word == op) {
                    Some((_, prim)) => apply(heap, &mut stack, prim, 2, span)?,
                    None => {
                        let m = format!(
                            "unknown instruction `{op}` (push, load, add, sub, mul, div, call)"
                        );
                        return Err(ParseError::new(ParseErrorKind::StrayToken, span, m));
                    }
                },
            };
            heap.set_span(node, SrcSpan::from(span));
            stack.push(node);
            i += 1;
        }
        match stack.as_slice() {
            [one] => Ok(Program::new(heap, vec![*one])),
            [] => Err(ParseError::new(
                ParseErrorKind::EmptyProgram,
                Span::at(src.len()),
                "no instructions",
            )),
            _ => Err(ParseError::new(
                ParseErrorKind::StrayToken,
                Span::at(src.len()),
                format!(
                    "{} values are left on the stack; a program leaves one",
                    stack.len()
                ),
            )),
        }
    }

    fn print(&self, heap: &Heap, program: &Program) -> ndvm_core::Result<String> {
        program.check_heap(heap)?;
        let mut out = Vec::new();
        for &form in program.forms() {
            print_form(heap, form, &mut out)?;
        }
        Ok(out.join("\n"))
    }

    fn prompt_guide(&self) -> &str {
        "Write the model as stack instructions, one per line: `push 2.5`, `load x`, `add`, `sub`, \
         `mul`, `div`, `call exp 1`. The one value left is the model's value."
    }
}

/// The words of `src` with their spans, `#` comments skipped.
fn words(src: &str) -> Vec<(&str, Span)> {
    let mut out = Vec::new();
    let mut offset = 0;
    for line in src.split_inclusive('\n') {
        let code = line.split('#').next().unwrap_or_default();
        let mut rest = code;
        while let Some(start) = rest.find(|c: char| !c.is_whitespace()) {
            let len = rest[start..]
                .find(char::is_whitespace)
                .unwrap_or(rest.len() - start);
            let begin = offset + (code.len() - rest.len()) + start;
            out.push((&rest[start..start + len], Span::new(begin, begin + len)));
            rest = &rest[start + len..];
        }
        offset += line.len();
    }
    out
}

/// Pops `n` values and returns `(name v1 … vn)`.
fn apply(
    heap: &mut Heap,
    stack: &mut Vec<NodeId>,
    name: &str,
    n: usize,
    span: Span,
) -> Result<NodeId, ParseError> {
    if stack.len() < n {
        let m = format!(
            "`{name}` needs {n} values on the stack, and there are {}",
            stack.len()
        );
        return Err(ParseError::new(ParseErrorKind::StrayToken, span, m));
    }
    let mut items = vec![heap.sym(name)];
    items.extend(stack.drain(stack.len() - n..));
    Ok(heap.list(&items))
}

/// Appends the instructions computing `form` (numbers, symbols and calls only), in post-order,
/// on an explicit stack.
fn print_form(heap: &Heap, form: NodeId, out: &mut Vec<String>) -> ndvm_core::Result<()> {
    enum Step {
        Visit(NodeId),
        Emit(String),
    }
    let mut todo = vec![Step::Visit(form)];
    while let Some(step) = todo.pop() {
        let id = match step {
            Step::Emit(line) => {
                out.push(line);
                continue;
            }
            Step::Visit(id) => id,
        };
        match heap.node(id) {
            Node::Num(x) => out.push(format!("push {}", print::number_to_string(x))),
            Node::Sym(s) => out.push(format!("load {}", heap.symbol_name(s))),
            Node::Pair(head, _) => {
                let items = heap.list_items(id).unwrap_or_default();
                let Node::Sym(s) = heap.node(head) else {
                    return Err(unprintable(heap, id));
                };
                let name = heap.symbol_name(s);
                let args = &items[1..];
                let line = match BINARY.iter().find(|(_, prim)| *prim == name) {
                    Some((word, _)) if args.len() == 2 => word.to_string(),
                    _ => format!("call {name} {}", args.len()),
                };
                todo.push(Step::Emit(line));
                todo.extend(args.iter().rev().map(|&a| Step::Visit(a)));
            }
            _ => return Err(unprintable(heap, id)),
        }
    }
    Ok(())
}

fn unprintable(heap: &Heap, id: NodeId) -> ndvm_core::CoreError {
    ndvm_core::CoreError::new(
        ErrorKind::Syntax,
        format!(
            "the stack notation has no form for `{}`",
            print::display(heap, id)
        ),
    )
    .at(id)
}

/// The shipped front ends and the stack one: the registry line a new front end needs.
fn registry() -> Registry {
    let mut registry = Registry::default();
    registry.register(Box::new(Stack));
    registry
}

/// `a·exp(−b·x)` in the stack notation.
const DECAY: &str = "# a * exp(-b * x)\nload a\npush 0 load b load x mul sub\ncall exp 1\nmul\n";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn the_stack_notation_reads_and_prints_the_same_program() {
    let mut heap = Heap::new();
    let program = Stack.parse(&mut heap, DECAY).unwrap();
    assert_eq!(
        print::program_to_string(&heap, &program).unwrap(),
        "(* a (exp (- 0.0 (* b x))))"
    );
    let text = Stack.print(&heap, &program).unwrap();
    let mut again = Heap::new();
    let reread = Stack.parse(&mut again, &text).unwrap();
    assert_eq!(
        print::program_to_string(&again, &reread).unwrap(),
        "(* a (exp (- 0.0 (* b x))))"
    );
    for (src, code, col) in [
        ("load a add", "P004", 8),
        ("push 1.x", "P003", 6),
        ("push 1 push 2", "P004", 14),
        ("jump 3", "P004", 1),
        ("# nothing", "P005", 10),
        ("push", "P006", 1),
    ] {
        let err = Stack.parse(&mut heap, src).unwrap_err();
        let rendered = ndvm_frontends::render_parse_error("m.stack", src, &err);
        assert!(
            rendered.starts_with(&format!("m.stack:1:{col}: error[{code}]")),
            "{rendered}"
        );
    }
}

#[test]
fn eval_with_exact_gradients_runs_the_stack_notation() {
    let dir = common::scratch("plugin", "eval");
    let program = write(&dir, "decay.stack", DECAY);
    let (a, b, x) = (2.0_f64, 0.5_f64, 1.5_f64);
    let report = evalcmd::run_with(
        &EvalArgs {
            program,
            frontend: None,
            bindings: vec![
                Binding::parse_param("a=2").unwrap(),
                Binding::parse_param("b=0.5").unwrap(),
                Binding::parse_input("x=1.5").unwrap(),
            ],
            data: vec![],
            n_lanes: None,
            grad: true,
            dialect: ndvm_core::Dialect::Default,
            precision: ndvm_core::Precision::F64,
            limits: Default::default(),
            selfhost: Default::default(),
        },
        &registry(),
    )
    .unwrap();
    let value = (-b * x).exp();
    let json = report.to_json();
    let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
    let lane = |key: &str| {
        parsed
            .pointer(key)
            .and_then(|v| v.as_f64())
            .unwrap_or(f64::NAN)
    };
    let close = |got: f64, want: f64| (got - want).abs() <= 1e-14 * want.abs();
    assert!(close(lane("/value"), a * value), "{json}");
    assert!(close(lane("/grads/a"), value), "{json}");
    assert!(close(lane("/grads/b"), -a * x * value), "{json}");
}

#[test]
fn calibrate_and_translate_run_the_stack_notation() {
    let dir = common::scratch("plugin", "calibrate");
    let program = write(&dir, "decay.stack", DECAY);
    let mut csv = String::from("x,y\n");
    for i in 0..20 {
        let x = f64::from(i) * 0.25;
        csv.push_str(&format!("{x},{}\n", 3.0 * (-0.7 * x).exp()));
    }
    let data = write(&dir, "decay.csv", &csv);
    let report = calibratecmd::run_with(
        &CalibrateArgs {
            program: program.clone(),
            frontend: None,
            data,
            target: "y".into(),
            weights: None,
            params: calibratecmd::ParamArg::parse_list("a:positive=1,b:positive=1").unwrap(),
            n_starts: Some(8),
            optimizer: None,
            polish: None,
            seed: Some(1),
            max_iters: None,
            race: None,
            dialect: ndvm_core::Dialect::Default,
            precision: ndvm_core::Precision::F64,
            limits: Default::default(),
            selfhost: Default::default(),
        },
        &registry(),
    )
    .unwrap();
    let fitted = |name: &str| {
        let i = report
            .calibration
            .names
            .iter()
            .position(|n| n == name)
            .unwrap();
        report.calibration.params[i]
    };
    assert!(
        (fitted("a") - 3.0).abs() < 1e-6 && (fitted("b") - 0.7).abs() < 1e-6,
        "{report:?}"
    );

    let args = |to: &str| TranslateArgs {
        program: program.clone(),
        from: None,
        to: to.into(),
    };
    let scheme = translatecmd::run_with(&args("scheme"), &registry()).unwrap();
    assert_eq!(scheme, "(* a (exp (- 0.0 (* b x))))\n");
    let back = write(&dir, "decay.scm", &scheme);
    let stack = translatecmd::run_with(
        &TranslateArgs {
            program: back,
            from: None,
            to: "stack".into(),
        },
        &registry(),
    )
    .unwrap();
    assert_eq!(
        stack,
        "load a\npush 0.0\nload b\nload x\nmul\nsub\ncall exp 1\nmul\n"
    );
    let e = translatecmd::run_with(&args("cobol"), &registry())
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown front end `cobol`"), "{e}");
}

#[test]
fn a_co_search_replays_a_cache_in_the_stack_notation() {
    let dir = common::scratch("plugin", "cosearch");
    let mut csv = String::from("x,y\n");
    for i in 0..40 {
        let x = f64::from(i) * 0.1;
        csv.push_str(&format!("{x},{}\n", 2.0 * (-1.3 * x).exp()));
    }
    write(&dir, "data.csv", &csv);
    let line = |src: &str| serde_json::json!({ "src": src }).to_string();
    let cache = [
        line("load a load x mul"),
        line(DECAY),
        line("load a load x call sin 1 mul"),
    ]
    .join("\n");
    write(&dir, "models.stack.jsonl", &(cache + "\n"));
    let task = write(
        &dir,
        "task.yaml",
        "name: stacked\nseed: 1\ndata: {csv: data.csv}\ninputs: [x]\ntarget: y\n\
         split: {train: 0.5, validation: 0.5}\n\
         params: [{name: a, kind: positive, init: 1.0}, {name: b, kind: positive, init: 1.0}]\n\
         proposer: {cache: models.stack.jsonl}\nbudget: {calibrations: 10}\n",
    );
    let task = ndvm_search::task::load_with(&task, Arc::new(registry())).unwrap();
    assert_eq!(
        task.frontend, "stack",
        "the cache's name picks the front end"
    );
    let outcome = ndvm_search::engine::run(&task, &RunOptions::new(1), &mut Nothing).unwrap();
    let events = outcome.events;
    assert_eq!(events.len(), 3);
    let best = events
        .iter()
        .filter(|e| e.status == EventStatus::Ok)
        .max_by(|p, q| {
            p.validation_r2
                .unwrap_or(-1.0)
                .total_cmp(&q.validation_r2.unwrap_or(-1.0))
        })
        .unwrap();
    assert_eq!(best.src, DECAY);
    assert_eq!(best.frontend, "stack");
    assert!(best.validation_r2.unwrap() > 0.999_999, "{best:?}");
    assert!((best.params["b"] - 1.3).abs() < 1e-6, "{best:?}");
}
