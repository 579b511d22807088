//! Hostile programs (`tests/data/hostile/*.scm`): each must end in its classified error (or its
//! value) quickly, never a stack overflow, an allocation abort or a hang, in `f64` and in `f32`
//! lanes alike.
//!
//! Header lines (`;; key: value`) say how to run a file and what it must give:
//!
//! ```text
//! ;; expect: E013            an error code, alternatives as E007|E013, or `ok`, `#t`, `#f`, a number
//! ;; lanes: 1408             lane count (differentiable parameters then vary per lane)
//! ;; grad: a=0.5             differentiable parameters (the run records a tape)
//! ;; max_steps: 1000         work budget instead of the default
//! ;; deadline_ms: 1000       deadline instead of the default (60 s, a guard against hangs: a
//!                            case's speed is not tested here, its bounded work is)
//! ;; max_ms: 3000            the most the case may take, for a case about the deadline itself
//! ;; output_len: 100002      length of the printed (non-numeric) result
//! ;; generate: nested-plus N the program is N nested `(+ …)` around 1, built by the runner
//! ```
//!
//! The cases run one after another in one test, so the process's peak resident memory is the
//! largest case's, and it is checked at the end.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ndvm_core::{EvalOptions, Evaluator, Heap, Inputs, Output, Precision};

const KEYS: &[&str] = &[
    "expect",
    "lanes",
    "grad",
    "max_steps",
    "deadline_ms",
    "max_ms",
    "output_len",
    "generate",
];

#[derive(Default)]
struct Header {
    expect: String,
    lanes: usize,
    grad: Vec<(String, f64)>,
    max_steps: Option<u64>,
    deadline_ms: u64,
    max_ms: Option<u64>,
    output_len: Option<usize>,
    generate: Option<(String, usize)>,
}

fn header(src: &str, file: &str) -> Header {
    let mut h = Header {
        lanes: 1,
        deadline_ms: 60_000,
        ..Header::default()
    };
    for line in src.lines().take_while(|l| l.starts_with(";;")) {
        let Some((k, v)) = line[2..].split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if !KEYS.contains(&k) {
            continue;
        }
        let num = |v: &str| -> u64 {
            v.parse()
                .unwrap_or_else(|_| panic!("{file}: bad number `{v}` for `{k}`"))
        };
        match k {
            "expect" => h.expect = v.to_string(),
            "lanes" => h.lanes = num(v) as usize,
            "grad" => {
                for kv in v.split_whitespace() {
                    let (name, x) = kv
                        .split_once('=')
                        .unwrap_or_else(|| panic!("{file}: bad grad `{kv}`"));
                    let x: f64 = x
                        .parse()
                        .unwrap_or_else(|_| panic!("{file}: bad value in `{kv}`"));
                    h.grad.push((name.to_string(), x));
                }
            }
            "max_steps" => h.max_steps = Some(num(v)),
            "deadline_ms" => h.deadline_ms = num(v),
            "max_ms" => h.max_ms = Some(num(v)),
            "output_len" => h.output_len = Some(num(v) as usize),
            "generate" => {
                let (what, n) = v
                    .split_once(' ')
                    .unwrap_or_else(|| panic!("{file}: bad generate `{v}`"));
                h.generate = Some((what.to_string(), num(n.trim()) as usize));
            }
            _ => unreachable!(),
        }
    }
    assert!(!h.expect.is_empty(), "{file}: no `;; expect:` line");
    h
}

fn generate(what: &str, n: usize) -> String {
    match what {
        "nested-plus" => {
            let mut s = "(+ ".repeat(n);
            s.push('1');
            s.push_str(&")".repeat(n));
            s
        }
        other => panic!("unknown generator `{other}`"),
    }
}

fn files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hostile");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/data/hostile exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "scm"))
        .collect();
    v.sort();
    v
}

/// Peak resident set of this process in bytes (Linux), when known.
fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Runs one case in `precision`; returns a line for the report.
fn run_case(path: &Path, precision: Precision) -> String {
    let file = path.file_name().unwrap().to_string_lossy().to_string();
    let file = format!("{file} ({})", precision.name());
    let text = std::fs::read_to_string(path).expect("readable case");
    let h = header(&text, &file);
    let src = match &h.generate {
        Some((what, n)) => generate(what, *n),
        None => text.clone(),
    };
    let mut heap = Heap::new();
    let program = ndvm_frontends::scheme::parse(&mut heap, &src)
        .unwrap_or_else(|e| panic!("{file}: does not parse: {e}"));
    let mut opts = EvalOptions::new(h.lanes).with_precision(precision);
    if let Some(m) = h.max_steps {
        opts = opts.with_max_steps(m);
    }
    let mut inputs = Inputs::new();
    for (name, x) in &h.grad {
        if h.lanes > 1 {
            let xs = (0..h.lanes).map(|l| x + l as f64 * 1e-3).collect();
            inputs = inputs.param_lanes(name, xs);
        } else {
            inputs = inputs.param(name, *x);
        }
    }
    let start = Instant::now();
    let mut ev =
        Evaluator::new(opts.with_deadline(Some(start + Duration::from_millis(h.deadline_ms))));
    let res = if h.grad.is_empty() {
        ev.eval(&mut heap, &program, &inputs)
    } else {
        ev.eval_grad(&mut heap, &program, &inputs)
    };
    let elapsed = start.elapsed();
    let outcome = match &res {
        Ok(e) => match &e.value {
            Output::Number(v) => format!("value {}", v[0]),
            Output::Bool(v) => format!("value {}", if v[0] { "#t" } else { "#f" }),
            Output::Other(s) => format!("value of {} chars", s.len()),
            other => format!("value {other:?}"),
        },
        Err(e) => format!("{} ({})", e.kind.code(), e.message),
    };
    let line = format!("{file}: {outcome} in {} ms", elapsed.as_millis());
    if let Some(max) = h.max_ms {
        assert!(
            elapsed <= Duration::from_millis(max),
            "{line}: took longer than {max} ms"
        );
    }
    let expect = h.expect.as_str();
    if expect.starts_with('E') {
        let err = res
            .as_ref()
            .err()
            .unwrap_or_else(|| panic!("{line}: expected {expect}"));
        assert!(
            expect.split('|').any(|c| c == err.kind.code()),
            "{line}: expected {expect}"
        );
        assert!(
            err.kind.is_limit() || !["E007", "E008", "E013", "E014"].contains(&err.kind.code()),
            "{line}: limit codes are limits"
        );
        // After a limit, the evaluator keeps only a modest amount of its arenas.
        assert!(
            ev.memory_in_use() <= EvalOptions::DEFAULT_MAX_MEMORY,
            "{line}: {} bytes still held",
            ev.memory_in_use()
        );
    } else {
        let e = res.as_ref().unwrap_or_else(|err| panic!("{line}: {err}"));
        match (expect, &e.value) {
            ("ok", _) => {}
            ("#t", Output::Bool(v)) => assert!(v.iter().all(|&b| b), "{line}"),
            ("#f", Output::Bool(v)) => assert!(v.iter().all(|&b| !b), "{line}"),
            (x, Output::Number(v)) => {
                let x: f64 = x.parse().unwrap_or_else(|_| panic!("{file}: bad expect"));
                assert!(v.iter().all(|&y| y == x), "{line}: expected {x}");
            }
            (x, v) => panic!("{line}: expected {x}, got {v:?}"),
        }
        if let Some(n) = h.output_len {
            let Output::Other(s) = &e.value else {
                panic!("{line}: expected a printed result");
            };
            assert_eq!(s.len(), n, "{line}");
        }
    }
    line
}

#[test]
fn hostile_programs_end_in_classified_errors_quickly() {
    let files = files();
    assert!(files.len() >= 14, "the hostile cases are missing");
    let mut report = Vec::new();
    for path in &files {
        for precision in [Precision::F64, Precision::F32] {
            report.push(run_case(path, precision));
        }
    }
    for line in &report {
        eprintln!("{line}");
    }
    // Every case together: the peak resident memory stays near one evaluation's limit (the
    // arenas grow by doubling), far below what the programs asked for.
    if let Some(peak) = peak_rss() {
        assert!(
            peak < 3 * EvalOptions::DEFAULT_MAX_MEMORY,
            "peak resident memory {peak} bytes"
        );
    }
}
