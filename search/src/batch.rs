//! `eval --jsonl`: one program per input line (`{"src", "params", "inputs", "dialect"}`), one result
//! line per input line in the same order (`{"value", "grads"}` or `{"error"}`); a bad line never
//! stops the batch.

use std::io::{BufRead, Read, Write};
use std::panic::{self, AssertUnwindSafe};

use indexmap::IndexMap;
use ndvm_core::{Dialect, EvalOptions, Evaluation, Heap, InputValue, Inputs, Precision};
use serde::{Deserialize, Serialize};

use ndvm_frontends::Registry;

use crate::error::{Result, SearchError};
use crate::evalcmd;
use crate::report::{self, JsonNumber, LaneJson, lane_value};

/// How a batch went: lines read and lines answered with an error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchSummary {
    /// Input lines read (each got one output line).
    pub n_lines: usize,
    /// Output lines that are `{"error": …}`.
    pub n_errors: usize,
}

/// Reads JSONL requests from `input` and writes one result line per input line to `output`,
/// flushing after each line so a driver process can stream requests. `dialect` applies to lines
/// without a `"dialect"` key. Only reading or writing failures are errors.
pub fn run(input: impl BufRead, output: impl Write, dialect: Dialect) -> Result<BatchSummary> {
    let frontends = Registry::default();
    run_with(input, output, &BatchSettings::new(dialect, &frontends))
}

/// How a batch reads and evaluates its lines.
#[derive(Debug)]
pub struct BatchSettings<'a> {
    /// The dialect of lines without a `"dialect"` key.
    pub dialect: Dialect,
    /// Resource limits of every line (each line's deadline starts when it does).
    pub limits: evalcmd::LimitArgs,
    /// The front ends a line's `"frontend"` key may name.
    pub frontends: &'a Registry,
    /// The front end of lines without a `"frontend"` key (default: the registry's fallback).
    pub frontend: Option<String>,
    /// The lanes' element type of every line.
    pub precision: Precision,
}

impl<'a> BatchSettings<'a> {
    /// `dialect`, default limits, the fallback front end of `frontends`.
    pub fn new(dialect: Dialect, frontends: &'a Registry) -> Self {
        BatchSettings {
            dialect,
            limits: evalcmd::LimitArgs::default(),
            frontends,
            frontend: None,
            precision: Precision::F64,
        }
    }
}

/// The longest request line read; a longer one gets an error line and is skipped unread.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// [`run`] with the dialect, limits and front ends of `settings`.
pub fn run_with(
    mut input: impl BufRead,
    mut output: impl Write,
    settings: &BatchSettings<'_>,
) -> Result<BatchSummary> {
    settings.limits.check()?;
    if let Some(name) = &settings.frontend {
        settings
            .frontends
            .choose(Some(name), None)
            .map_err(|message| SearchError::BadArgument {
                arg: format!("--frontend {name}"),
                message,
            })?;
    }
    let mut summary = BatchSummary::default();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let read_err = |source| SearchError::Read {
            path: "<jsonl input>".into(),
            source,
        };
        let n = Read::take(&mut input, MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(read_err)?;
        if n == 0 {
            break;
        }
        let too_long = buf.len() > MAX_LINE_BYTES && buf.last() != Some(&b'\n');
        if too_long {
            // Skip the rest of the line without holding it.
            let mut rest = Vec::new();
            loop {
                rest.clear();
                let m = Read::take(&mut input, 1 << 16)
                    .read_until(b'\n', &mut rest)
                    .map_err(read_err)?;
                if m == 0 || rest.last() == Some(&b'\n') {
                    break;
                }
            }
        }
        let res = match std::str::from_utf8(&buf) {
            _ if too_long => Err(format!(
                "the line is longer than {MAX_LINE_BYTES} bytes (the most one request may hold)"
            )),
            Ok(line) => eval_line_result(line, settings),
            Err(_) => Err("the line is not valid UTF-8".to_string()),
        };
        summary.n_lines += 1;
        if res.is_err() {
            summary.n_errors += 1;
        }
        let mut text = res.unwrap_or_else(|message| error_line(&message));
        text.push('\n');
        output
            .write_all(text.as_bytes())
            .and_then(|()| output.flush())
            .map_err(|source| SearchError::Write { source })?;
    }
    Ok(summary)
}

/// Evaluates one JSONL request and returns its result line (without the newline).
///
/// `{"src": "(* p 2)", "params": {"p": 3}}` gives `{"value":6.0,"grads":{"p":2.0}}`.
pub fn eval_line(line: &str, dialect: Dialect) -> String {
    let frontends = Registry::default();
    eval_line_result(line, &BatchSettings::new(dialect, &frontends))
        .unwrap_or_else(|message| error_line(&message))
}

/// `{"error": …}`.
#[derive(Serialize)]
struct ErrorLine<'a> {
    error: &'a str,
}

/// `{"value": …, "grads": {…}}`, with `"fault": true` when the lane faulted.
#[derive(Serialize)]
struct ResultLine<'a> {
    value: LaneJson<'a>,
    grads: IndexMap<&'a str, JsonNumber>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    fault: bool,
}

fn error_line(message: &str) -> String {
    report::json_line(&ErrorLine { error: message })
}

/// One input line. `params` and `inputs` keep their document order (the order of the gradients
/// in the answer); a key repeated inside one of them keeps its last value, as in any JSON map.
#[derive(Deserialize)]
struct Request {
    src: String,
    #[serde(default)]
    params: IndexMap<String, f64>,
    #[serde(default)]
    inputs: IndexMap<String, serde_json::Value>,
    #[serde(default)]
    dialect: Option<String>,
    #[serde(default)]
    frontend: Option<String>,
}

/// The result line, or the message of an error line.
fn eval_line_result(
    line: &str,
    settings: &BatchSettings<'_>,
) -> std::result::Result<String, String> {
    let (default_dialect, limits) = (settings.dialect, &settings.limits);
    let line = line.trim_end_matches(['\n', '\r']);
    if line.trim().is_empty() {
        return Err("empty line".to_string());
    }
    let req: Request = serde_json::from_str(line).map_err(|e| format!("invalid request: {e}"))?;
    let dialect = match req.dialect.as_deref() {
        None => default_dialect,
        Some(name) => evalcmd::parse_dialect(name).ok_or_else(|| {
            format!("unknown dialect `{name}` (expected `default` or `reference`)")
        })?,
    };
    let inputs = build_inputs(&req)?;
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        let mut heap = Heap::new();
        let name = req.frontend.as_deref().or(settings.frontend.as_deref());
        let frontend = settings
            .frontends
            .choose(name, None)
            .map_err(|message| SearchError::UnknownFrontend { message })?;
        let program = crate::source::parse_program(&mut heap, frontend, "src", &req.src)?;
        let opts = limits.eval_options(EvalOptions::new(1).with_dialect(dialect));
        let opts = opts.with_precision(settings.precision);
        evalcmd::evaluate(
            &mut heap,
            &program,
            &inputs,
            opts,
            true,
            &crate::selfhost::Sources::single("src", &req.src),
            &request_binds(&inputs),
        )
    }));
    let evaluation = match caught {
        Ok(Ok(evaluation)) => evaluation,
        Ok(Err(err)) => return Err(first_line(&err)),
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            return Err(format!("internal error: the evaluator panicked: {what}"));
        }
    };
    Ok(result_line(&req, &evaluation))
}

/// What a request binds, for an unbound-variable error: `the request binds a, t`.
fn request_binds(inputs: &Inputs) -> String {
    if inputs.entries.is_empty() {
        return "the request binds nothing (give names in `params` or `inputs`)".to_string();
    }
    let names: Vec<&str> = inputs.entries.iter().map(|i| i.name.as_str()).collect();
    format!("the request binds {}", names.join(", "))
}

/// The first line of a rendered diagnostic (`src:2:4: error[E001]: …`), without the source excerpt.
fn first_line(err: &SearchError) -> String {
    let text = err.to_string();
    text.lines().next().unwrap_or_default().to_string()
}

fn build_inputs(req: &Request) -> std::result::Result<Inputs, String> {
    let mut seen = std::collections::HashSet::new();
    let names = req.params.keys().chain(req.inputs.keys());
    for name in names {
        if !seen.insert(name.as_str()) {
            return Err(format!("`{name}` is bound more than once"));
        }
    }
    let mut inputs = Inputs::new();
    for (name, x) in &req.params {
        inputs.push(name, InputValue::Uniform(*x), true);
    }
    for (name, value) in &req.inputs {
        inputs.push(name, input_value(name, value)?, false);
    }
    Ok(inputs)
}

/// A number is a uniform input, an array of numbers a vector, an array of equal-length arrays of
/// numbers a row-major matrix.
fn input_value(name: &str, value: &serde_json::Value) -> std::result::Result<InputValue, String> {
    use serde_json::Value;
    let bad = || {
        format!(
            "input `{name}`: expected a number, an array of numbers, or an array of equal-length arrays of numbers"
        )
    };
    let numbers = |items: &[Value]| {
        items
            .iter()
            .map(Value::as_f64)
            .collect::<Option<Vec<f64>>>()
    };
    match value {
        Value::Number(n) => n.as_f64().map(InputValue::Uniform).ok_or_else(bad),
        Value::Array(items) if items.iter().all(Value::is_array) && !items.is_empty() => {
            let mut data = Vec::new();
            let mut cols = None;
            for row in items {
                let row = numbers(row.as_array().map(Vec::as_slice).unwrap_or_default())
                    .ok_or_else(bad)?;
                if *cols.get_or_insert(row.len()) != row.len() {
                    return Err(format!("input `{name}`: matrix rows differ in length"));
                }
                data.extend(row);
            }
            Ok(InputValue::Matrix {
                rows: items.len(),
                cols: cols.unwrap_or(0),
                data,
            })
        }
        Value::Array(items) => numbers(items).map(InputValue::Vector).ok_or_else(bad),
        _ => Err(bad()),
    }
}

fn result_line(req: &Request, evaluation: &Evaluation) -> String {
    let grad = |name: &str| {
        let g = evaluation.grad(name).and_then(|g| g.first().copied());
        JsonNumber(g.unwrap_or(f64::NAN))
    };
    report::json_line(&ResultLine {
        value: lane_value(&evaluation.value, 0).into(),
        grads: req.params.keys().map(|n| (n.as_str(), grad(n))).collect(),
        fault: evaluation.faults.first().copied().unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_request(line: &str) -> std::result::Result<String, String> {
        let req: Request = serde_json::from_str(line).map_err(|e| e.to_string())?;
        let inputs = build_inputs(&req)?;
        Ok(format!(
            "{:?}",
            inputs
                .entries
                .iter()
                .map(|i| (&i.name, &i.value, i.grad))
                .collect::<Vec<_>>()
        ))
    }

    #[test]
    fn requests_keep_order_and_shapes() {
        assert_eq!(
            check_request(r#"{"src": "x", "params": {"b": 1, "a": 2.5}, "inputs": {"x": 3, "v": [1, 2], "m": [[1, 2], [3, 4]]}}"#).unwrap(),
            "[(\"b\", Uniform(1.0), true), (\"a\", Uniform(2.5), true), (\"x\", Uniform(3.0), false), \
             (\"v\", Vector([1.0, 2.0]), false), (\"m\", Matrix { rows: 2, cols: 2, data: [1.0, 2.0, 3.0, 4.0] }, false)]"
        );
    }

    #[test]
    fn bad_requests_are_error_lines() {
        assert_eq!(
            check_request(r#"{"src": "x", "inputs": {"m": [[1, 2], [3]]}}"#).unwrap_err(),
            "input `m`: matrix rows differ in length"
        );
        assert_eq!(
            check_request(r#"{"src": "x", "params": {"a": 1}, "inputs": {"a": 2}}"#).unwrap_err(),
            "`a` is bound more than once"
        );
        assert!(
            check_request(r#"{"src": "x", "inputs": {"s": "text"}}"#)
                .unwrap_err()
                .starts_with("input `s`: expected")
        );
        assert_eq!(eval_line("", Dialect::Default), r#"{"error":"empty line"}"#);
        assert!(
            eval_line("{\"src\": ", Dialect::Default)
                .starts_with(r#"{"error":"invalid request: EOF"#)
        );
        assert!(eval_line(r#"{"params": {}}"#, Dialect::Default).contains("missing field `src`"));
        assert!(
            eval_line(r#"{"src": "1", "dialect": "r7rs"}"#, Dialect::Default)
                .contains("unknown dialect `r7rs`")
        );
    }

    #[test]
    fn io_counts_lines() {
        let input = b"{\"src\": \"1\", \"dialect\": \"x\"}\nnot json\n\xff\n";
        let mut out = Vec::new();
        let summary = run(&input[..], &mut out, Dialect::Default).unwrap();
        assert_eq!(
            summary,
            BatchSummary {
                n_lines: 3,
                n_errors: 3
            }
        );
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 3);
        assert!(text.lines().nth(2).unwrap().contains("not valid UTF-8"));
    }
}
