//! Shared helpers of the ndvm-frontends integration tests: seed-data loading, running a program, closeness.
//!
//! Every test that reads the workspace's `testdata/` goes through [`testdata`], which panics with the
//! path when the file is missing: a missing oracle is a failure, never a silent skip (STYLE 19).
#![allow(dead_code)] // each test binary uses a different subset of these helpers

pub(crate) mod cases;

use std::fmt;
use std::path::{Path, PathBuf};

use ndvm_core::{Dialect, ErrorKind, EvalOptions, Evaluation, Evaluator, Heap, Inputs};
use ndvm_frontends::span::LineIndex;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Absolute path of `testdata/<rel>` under the workspace root; panics loudly when it is missing.
pub(crate) fn testdata(rel: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata")
        .join(rel);
    assert!(
        path.exists(),
        "required test data is missing: {} (see testdata/README.md; tests never skip)",
        path.display()
    );
    path
}

/// Reads a file under `testdata/`, panicking with the path on failure.
pub(crate) fn read_testdata(rel: &str) -> String {
    let path = testdata(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// A shared matrix binding of an oracle program.
#[derive(Clone, Debug)]
pub(crate) struct MatrixInput {
    pub(crate) name: String,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) data: Vec<f64>,
}

/// One program of `seed-data/oracle_refs.json`.
#[derive(Clone, Debug)]
pub(crate) struct OracleProgram {
    pub(crate) name: String,
    pub(crate) src: String,
    /// Every scalar binding (all differentiable), sorted by name.
    pub(crate) scalars: Vec<(String, f64)>,
    pub(crate) matrix: Option<MatrixInput>,
    /// `None` for the one program the oracle failed on (`recursive_define`).
    pub(crate) result: Option<f64>,
    /// Reverse-mode reference derivatives, sorted by name.
    pub(crate) grads: Vec<(String, f64)>,
    /// The oracle's error text, for `recursive_define`.
    pub(crate) error: Option<String>,
}

impl OracleProgram {
    /// All scalars as uniform parameters plus the shared matrix.
    pub(crate) fn inputs(&self) -> Inputs {
        let mut inputs = Inputs::new();
        for (name, v) in &self.scalars {
            inputs = inputs.param(name, *v);
        }
        self.with_matrix(inputs)
    }

    /// Adds the shared matrix (if any) to `inputs`.
    pub(crate) fn with_matrix(&self, inputs: Inputs) -> Inputs {
        match &self.matrix {
            Some(m) => inputs.matrix(&m.name, m.rows, m.cols, m.data.clone()),
            None => inputs,
        }
    }
}

fn json_f64(v: &serde_json::Value, ctx: &str) -> f64 {
    match v {
        serde_json::Value::Number(n) => n
            .as_f64()
            .unwrap_or_else(|| panic!("{ctx}: bad number {n}")),
        serde_json::Value::String(s) if s == "Infinity" => f64::INFINITY,
        other => panic!("{ctx}: expected a number, got {other}"),
    }
}

fn json_pairs(v: &serde_json::Value, ctx: &str) -> Vec<(String, f64)> {
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("{ctx}: expected an object, got {v}"));
    let mut out: Vec<(String, f64)> = obj
        .iter()
        .map(|(k, x)| (k.clone(), json_f64(x, &format!("{ctx}.{k}"))))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// All 34 programs of `oracle_refs.json`. The file's one bare `Infinity` token is rewritten to the
/// string `"Infinity"` before strict parsing and read back as `f64::INFINITY`.
pub(crate) fn oracle_programs() -> Vec<OracleProgram> {
    let text = read_testdata("seed-data/oracle_refs.json");
    assert_eq!(
        text.matches("Infinity").count(),
        1,
        "oracle_refs.json is documented to hold exactly one bare `Infinity` token"
    );
    let text = text.replace("Infinity", "\"Infinity\"");
    let root: serde_json::Value =
        serde_json::from_str(&text).expect("oracle_refs.json parses once `Infinity` is quoted");
    let programs = root["programs"]
        .as_array()
        .expect("oracle_refs.json: `programs` array");
    programs
        .iter()
        .map(|p| {
            let name = p["name"].as_str().expect("program name").to_string();
            let matrix = match &p["matrix"] {
                serde_json::Value::Null => None,
                m => Some(MatrixInput {
                    name: m["name"].as_str().expect("matrix name").to_string(),
                    rows: m["rows"].as_u64().expect("matrix rows") as usize,
                    cols: m["cols"].as_u64().expect("matrix cols") as usize,
                    data: m["data"]
                        .as_array()
                        .expect("matrix data")
                        .iter()
                        .map(|x| json_f64(x, &format!("{name}.matrix")))
                        .collect(),
                }),
            };
            OracleProgram {
                src: p["src"].as_str().expect("program src").to_string(),
                scalars: json_pairs(&p["scalars"], &format!("{name}.scalars")),
                matrix,
                result: p
                    .get("oracle_result")
                    .map(|v| json_f64(v, &format!("{name}.oracle_result"))),
                grads: p
                    .get("grads")
                    .map(|g| json_pairs(g, &format!("{name}.grads")))
                    .unwrap_or_default(),
                error: p.get("error").and_then(|e| e.as_str()).map(str::to_string),
                name,
            }
        })
        .collect()
}

/// One program of `seed-data/fuzz_corpus.jsonl`.
#[derive(Clone, Debug)]
pub(crate) struct FuzzProgram {
    pub(crate) id: usize,
    pub(crate) src: String,
    /// Parameters and their evaluation point, sorted by name (`p0` … `p3`).
    pub(crate) params: Vec<(String, f64)>,
    pub(crate) features: Vec<String>,
}

impl FuzzProgram {
    /// All parameters as uniform differentiable inputs.
    pub(crate) fn inputs(&self) -> Inputs {
        self.params
            .iter()
            .fold(Inputs::new(), |acc, (n, v)| acc.param(n, *v))
    }
}

/// All 200 programs of `fuzz_corpus.jsonl`, in file order.
pub(crate) fn fuzz_corpus() -> Vec<FuzzProgram> {
    let text = read_testdata("seed-data/fuzz_corpus.jsonl");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, line)| {
            let o: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("fuzz_corpus.jsonl line {}: {e}", i + 1));
            let id = o["id"].as_u64().expect("fuzz id") as usize;
            assert_eq!(id, i, "fuzz_corpus.jsonl ids are dense and in order");
            FuzzProgram {
                id,
                src: o["src"].as_str().expect("fuzz src").to_string(),
                params: json_pairs(&o["params"], &format!("fuzz {id}.params")),
                features: o["features"]
                    .as_array()
                    .expect("fuzz features")
                    .iter()
                    .map(|f| f.as_str().expect("feature").to_string())
                    .collect(),
            }
        })
        .collect()
}

/// Why [`run`] produced no evaluation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Failure {
    /// The reader rejected the text.
    Parse(String),
    /// The evaluator returned an error; `at` is `line:col` of the offending node when it has a span.
    Eval {
        kind: ErrorKind,
        message: String,
        at: Option<String>,
    },
}

impl Failure {
    /// The error kind, for evaluator errors.
    pub(crate) fn kind(&self) -> Option<ErrorKind> {
        match self {
            Failure::Eval { kind, .. } => Some(*kind),
            Failure::Parse(_) => None,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Parse(m) => write!(f, "parse error: {m}"),
            Failure::Eval { kind, message, at } => {
                write!(f, "{} {}: {message}", kind.code(), kind.name())?;
                match at {
                    Some(at) => write!(f, " at {at}"),
                    None => write!(f, " (no location)"),
                }
            }
        }
    }
}

/// Options for `n_lanes` lanes in `dialect` with the default budgets.
pub(crate) fn opts(dialect: Dialect, n_lanes: usize) -> EvalOptions {
    EvalOptions::new(n_lanes).with_dialect(dialect)
}

/// Parses `src` as Scheme on a fresh heap and evaluates it (`grad` selects `eval_grad`).
pub(crate) fn run(
    src: &str,
    opts: EvalOptions,
    inputs: &Inputs,
    grad: bool,
) -> Result<Evaluation, Failure> {
    run_in(&ndvm_frontends::scheme::Scheme, src, opts, inputs, grad)
}

/// [`run`] with the program read by `frontend`.
pub(crate) fn run_in(
    frontend: &dyn ndvm_frontends::Frontend,
    src: &str,
    opts: EvalOptions,
    inputs: &Inputs,
    grad: bool,
) -> Result<Evaluation, Failure> {
    let mut heap = Heap::new();
    let program = frontend
        .parse(&mut heap, src)
        .map_err(|e| Failure::Parse(e.to_string()))?;
    let mut ev = Evaluator::new(opts);
    let result = if grad {
        ev.eval_grad(&mut heap, &program, inputs)
    } else {
        ev.eval(&mut heap, &program, inputs)
    };
    result.map_err(|e| {
        let at = e.node.and_then(|n| heap.span(n)).map(|span| {
            let (line, col) = LineIndex::new(src).line_col(span.start);
            format!("{line}:{col}")
        });
        Failure::Eval {
            kind: e.kind,
            message: e.message,
            at,
        }
    })
}

/// True when |actual − expected| ≤ atol + rtol·|expected|; infinities must match exactly, NaN never does.
pub(crate) fn is_close(actual: f64, expected: f64, atol: f64, rtol: f64) -> bool {
    if expected.is_infinite() || actual.is_infinite() {
        return actual == expected;
    }
    (actual - expected).abs() <= atol + rtol * expected.abs()
}

/// Panics with `ctx` unless [`is_close`] holds.
pub(crate) fn assert_close(actual: f64, expected: f64, atol: f64, rtol: f64, ctx: &str) {
    assert!(
        is_close(actual, expected, atol, rtol),
        "{ctx}: got {actual:e}, expected {expected:e} (|diff| {:e} > atol {atol:e} + rtol {rtol:e}·|expected|)",
        (actual - expected).abs()
    );
}

/// The scalar value of lane `lane`, or a description of what came back instead.
pub(crate) fn number(e: &Evaluation, lane: usize) -> Result<f64, String> {
    e.value
        .number(lane)
        .ok_or_else(|| format!("expected a number on lane {lane}, got {:?}", e.value))
}

/// One lane of an evaluation with every number as its bit pattern, for bit-for-bit comparisons.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LaneBits {
    /// The value: bit patterns of the lane's numbers, or the printed structure.
    pub(crate) value: String,
    /// `(name, bits)` of each gradient on this lane, in binding order.
    pub(crate) grads: Vec<(String, u64)>,
    /// The lane's fault flag.
    pub(crate) fault: Option<bool>,
}

fn bits_of(xs: &[f64]) -> String {
    xs.iter()
        .map(|x| format!("{:016x}({x:e})", x.to_bits()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The bits of lane `lane` of `e` (value, gradients, fault flag).
pub(crate) fn lane_bits(e: &Evaluation, lane: usize) -> LaneBits {
    use ndvm_core::Output;
    let value = match &e.value {
        Output::Number(v) => format!("number {}", bits_of(&v[lane..=lane])),
        Output::Bool(v) => format!("bool {}", v[lane]),
        Output::Vector { len, data } => {
            format!("vector {}", bits_of(&data[lane * len..(lane + 1) * len]))
        }
        Output::Matrix { rows, cols, data } => {
            let n = rows * cols;
            format!(
                "matrix {rows}x{cols} {}",
                bits_of(&data[lane * n..(lane + 1) * n])
            )
        }
        Output::Other(s) => format!("other {s}"),
    };
    let grads = e
        .grads
        .iter()
        .map(|g| (g.name.clone(), g.per_lane[lane].to_bits()))
        .collect();
    LaneBits {
        value,
        grads,
        fault: e.faults.get(lane).copied(),
    }
}

/// A random program over parameters `a`, `b` and a data input `x`, with branches, `floor`,
/// `zero?` and a loop whose trip count depends on the parameters: every kind of guard.
pub(crate) fn random_guarded_expr(rng: &mut ChaCha8Rng, depth: u32) -> String {
    let leaf = |rng: &mut ChaCha8Rng| match rng.random_range(0..5) {
        0 => "a".to_string(),
        1 => "b".to_string(),
        2 => "x".to_string(),
        _ => format!("{:.3}", rng.random_range(-2.0..2.0)),
    };
    if depth == 0 {
        return leaf(rng);
    }
    let e = |rng: &mut ChaCha8Rng| random_guarded_expr(rng, depth - 1);
    match rng.random_range(0..12) {
        0..=3 => {
            let op = ["+", "-", "*", "/", "min", "max"][rng.random_range(0..6)];
            format!("({op} {} {})", e(rng), e(rng))
        }
        4..=5 => {
            let op = ["sin", "exp", "log", "sqrt", "abs", "-"][rng.random_range(0..6)];
            format!("({op} {})", e(rng))
        }
        6..=7 => {
            let c = ["<", ">", "<=", ">="][rng.random_range(0..4)];
            format!("(if ({c} {} {}) {} {})", e(rng), e(rng), e(rng), e(rng))
        }
        8 => format!("(if (zero? (floor {})) {} {})", e(rng), e(rng), e(rng)),
        9 => format!("(* {} (floor {}))", e(rng), e(rng)),
        10 => format!(
            "(loop ((i 0) (s {})) (if (or (>= i 4) (> (abs s) 3.0)) s (recur (+ i 1) (+ (* s 1.5) {}))))",
            e(rng),
            e(rng)
        ),
        _ => leaf(rng),
    }
}
