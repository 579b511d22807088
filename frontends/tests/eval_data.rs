//! Data-driven evaluation tests: one runner walks `tests/data/eval/*.scm`, so a new file cannot be
//! forgotten. Each file states in leading `;;` header lines how to run it and what it must give
//! (known answers worked out by hand in the file's comment):
//!
//! ```text
//! ;; dialect: reference          optional; default dialect otherwise
//! ;; bind: x=1.5 a=2             differentiable parameters
//! ;; input: n=5                  non-differentiated inputs
//! ;; expect: 4.0                 a number, #t / #f, or a vector [3 5]
//! ;; grad: a=1.5 x=2             required for every bound parameter when `expect` is given
//! ;; error: E001 3:5             instead of expect/grad: error code and line:column
//! ```
//!
//! Other `;;` lines are free comments. Values must agree within 1e-12 (absolute + relative); every
//! file runs again in `f32` lanes, where they must agree within 1e-5 (a few single-precision
//! roundings of hand-sized numbers), and errors must be the same.

mod common;

use std::path::{Path, PathBuf};

use common::{Failure, assert_close, opts, run};
use ndvm_core::{Dialect, Inputs, Output, Precision};

const TOL: f64 = 1e-12;
/// The tolerance of the `f32` pass: a few roundings of 6e-8 on numbers of order 1–100.
const TOL_F32: f64 = 1e-5;
const KEYS: &[&str] = &["dialect", "bind", "input", "expect", "grad", "error"];

/// The header of one data file.
#[derive(Default)]
struct Header {
    dialect: Option<String>,
    bind: Vec<(String, f64)>,
    input: Vec<(String, f64)>,
    expect: Option<String>,
    grad: Vec<(String, f64)>,
    error: Option<String>,
}

fn pairs(s: &str, ctx: &str) -> Vec<(String, f64)> {
    s.split_whitespace()
        .map(|kv| {
            let (k, v) = kv
                .split_once('=')
                .unwrap_or_else(|| panic!("{ctx}: `{kv}` is not name=value"));
            (
                k.to_string(),
                v.parse().unwrap_or_else(|e| panic!("{ctx}: `{v}`: {e}")),
            )
        })
        .collect()
}

fn header(src: &str, ctx: &str) -> Header {
    let mut h = Header::default();
    for line in src.lines().map_while(|l| l.strip_prefix(";;")) {
        let Some((key, rest)) = line.trim().split_once(':') else {
            continue;
        };
        let rest = rest.trim();
        match key {
            "dialect" => h.dialect = Some(rest.to_string()),
            "bind" => h.bind = pairs(rest, ctx),
            "input" => h.input = pairs(rest, ctx),
            "expect" => h.expect = Some(rest.to_string()),
            "grad" => h.grad = pairs(rest, ctx),
            "error" => h.error = Some(rest.to_string()),
            k if !k.contains(' ') && k.chars().all(|c| c.is_ascii_lowercase()) => {
                panic!("{ctx}: unknown header key `{k}` (known: {KEYS:?})")
            }
            _ => {}
        }
    }
    h
}

/// Runs one data file and checks its header's expectations, in `precision` within `TOL`.
fn check_file(path: &Path, precision: Precision, tol: f64) {
    let ctx = path.file_name().unwrap().to_string_lossy().to_string();
    let src = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{ctx}: {e}"));
    let h = header(&src, &ctx);
    let dialect = match h.dialect.as_deref() {
        None | Some("default") => Dialect::Default,
        Some("reference") => Dialect::Reference,
        Some(other) => panic!("{ctx}: unknown dialect {other}"),
    };
    let mut inputs = Inputs::new();
    for (n, v) in &h.bind {
        inputs = inputs.param(n, *v);
    }
    for (n, v) in &h.input {
        inputs = inputs.input(n, *v);
    }
    let result = run(
        &src,
        opts(dialect, 1).with_precision(precision),
        &inputs,
        true,
    );
    let ctx = format!("{ctx} ({})", precision.name());
    match (&h.expect, &h.error) {
        (Some(expect), None) => {
            let e = result.unwrap_or_else(|f| panic!("{ctx}: {f}"));
            match (expect.as_str(), &e.value) {
                ("#t", v) => assert_eq!(v, &Output::Bool(vec![true]), "{ctx}"),
                ("#f", v) => assert_eq!(v, &Output::Bool(vec![false]), "{ctx}"),
                (s, Output::Vector { len, data }) if s.starts_with('[') => {
                    let want: Vec<f64> = s
                        .trim_matches(['[', ']'])
                        .split_whitespace()
                        .map(|x| x.parse().unwrap_or_else(|e| panic!("{ctx}: `{x}`: {e}")))
                        .collect();
                    assert_eq!(*len, want.len(), "{ctx}: vector length");
                    for (i, (got, w)) in data.iter().zip(&want).enumerate() {
                        assert_close(*got, *w, tol, tol, &format!("{ctx} element {i}"));
                    }
                }
                (s, v) => {
                    let want: f64 = s
                        .parse()
                        .unwrap_or_else(|err| panic!("{ctx}: expect `{s}`: {err}"));
                    let got = v
                        .number(0)
                        .unwrap_or_else(|| panic!("{ctx}: expected {want}, got {v:?}"));
                    assert_close(got, want, tol, tol, &ctx);
                }
            }
            let mut want_names: Vec<&str> = h.grad.iter().map(|(n, _)| n.as_str()).collect();
            let mut bound: Vec<&str> = h.bind.iter().map(|(n, _)| n.as_str()).collect();
            want_names.sort_unstable();
            bound.sort_unstable();
            assert_eq!(
                want_names, bound,
                "{ctx}: `grad:` must list every bound parameter"
            );
            for (name, g) in &h.grad {
                let got = e
                    .grad(name)
                    .unwrap_or_else(|| panic!("{ctx}: no gradient for {name}"))[0];
                assert_close(got, *g, tol, tol, &format!("{ctx} d/d{name}"));
            }
        }
        (None, Some(error)) => {
            let (code, at) = error
                .split_once(' ')
                .unwrap_or_else(|| panic!("{ctx}: `error: CODE line:col`"));
            match result {
                Err(Failure::Eval {
                    kind,
                    at: got_at,
                    message,
                }) => {
                    assert_eq!(kind.code(), code, "{ctx}: error code ({message})");
                    assert_eq!(
                        got_at.as_deref(),
                        Some(at),
                        "{ctx}: error location ({message})"
                    );
                }
                other => panic!("{ctx}: expected {code} at {at}, got {other:?}"),
            }
        }
        _ => panic!("{ctx}: needs exactly one of `;; expect:` and `;; error:`"),
    }
}

fn data_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/eval");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "scm"))
        .collect();
    files.sort();
    files
}

#[test]
fn eval_data_files() {
    let files = data_files();
    assert!(
        files.len() >= 25,
        "expected the eval data set, found {} files",
        files.len()
    );
    let runs = [(Precision::F64, TOL), (Precision::F32, TOL_F32)];
    let failures: Vec<String> = files
        .iter()
        .flat_map(|f| runs.map(|r| (f, r)))
        .filter_map(|(f, (precision, tol))| {
            std::panic::catch_unwind(|| check_file(f, precision, tol))
                .err()
                .map(|p| {
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| format!("{}: panicked", f.display()))
                })
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} data files failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}
