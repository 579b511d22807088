//! `ndvm._ndvm`, the PyO3 extension module of the `ndvm` Python package (python/README.md).
//! It holds no numerics of its own. `Program` reads with a front end and evaluates with
//! `ndvm_core::Evaluator`; `calibrate` runs `ndvm_optimizers::Calibrator`; `run_columns` builds a
//! task from its keys and a table in memory (`ndvm_search::task::build`) and runs `ndvm_search::engine::run`; `run_task` is
//! `ndvm_search::runcmd::run`. Long work runs detached from the interpreter (`Python::detach`), a
//! Rust panic becomes `ndvm.errors.InternalError`, and Ctrl-C is polled with
//! `Python::check_signals` (the extension installs no signal handler).
#![forbid(unsafe_code)]
// A `Failure` is built once per failed call and raised in Python at once: its size on the
// error path costs nothing measurable, and boxing it would only add noise to every signature.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use numpy::{
    PyArray, PyArray1, PyArrayDyn, PyArrayMethods, PyReadonlyArray, PyReadonlyArray1,
    PyReadonlyArray2, PyUntypedArrayMethods,
};
use pyo3::conversion::FromPyObjectOwned;
use pyo3::exceptions::{PyKeyboardInterrupt, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use ndvm_core::{
    CoreError, EvalOptions, Evaluation, Evaluator, Heap, InputValue, Inputs, Lent, Output,
    ParamDecl, ParamKind, Precision, Program, ValueSource,
};
use ndvm_frontends::{LineIndex, ParseError, Registry, render_core_error, render_parse_error};
use ndvm_optimizers::{
    CalibrateConfig, CalibrateError, Calibration, Calibrator, Dataset, Loss, Optimizer, ParamSpec,
    Polish,
};
use ndvm_search::SearchError;
use ndvm_search::calibratecmd::{self, ParamArg};
use ndvm_search::engine::{self, RunOptions, Shard};
use ndvm_search::evalcmd::{self, LimitArgs};
use ndvm_search::events::{Event, StreamStats};
use ndvm_search::interrupt::Interrupt;
use ndvm_search::observe::{Observer, ProgressMode};
use ndvm_search::runcmd::{self, RunArgs};
use ndvm_search::summary::{RunSection, Summary};
use ndvm_search::task::{self, Columns, Task};

// ------------------------------------------------------------------ errors

/// Why a call failed: an exception class of `ndvm.errors` and its fields. Built where the work
/// ran (detached, maybe on another thread) and raised once the caller is attached again.
struct Failure {
    class: &'static str,
    message: String,
    code: Option<&'static str>,
    kind: Option<&'static str>,
    line: Option<u64>,
    col: Option<u64>,
    rendered: Option<String>,
}

impl Failure {
    fn new(class: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            class,
            message: message.into(),
            code: None,
            kind: None,
            line: None,
            col: None,
            rendered: None,
        }
    }

    /// A bad argument from Python (raised as `UsageError`, a `ValueError`).
    fn usage(message: impl Into<String>) -> Failure {
        Failure::new("UsageError", message)
    }

    /// A Rust panic, caught before it reaches Python.
    fn panic(payload: &(dyn std::any::Any + Send)) -> Failure {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string());
        Failure::new(
            "InternalError",
            format!("internal error: ndvm panicked: {what}"),
        )
    }

    /// A front end's error: stable code `P0xx`, 1-based line and column (in chars) of its span.
    fn parse(label: &str, src: &str, e: &ParseError) -> Failure {
        let (line, col) = LineIndex::new(src).line_col(e.span.start);
        Failure {
            code: Some(e.kind.code()),
            kind: Some(e.kind.name()),
            line: Some(line.into()),
            col: Some(col.into()),
            rendered: Some(render_parse_error(label, src, e)),
            ..Failure::new("ParseError", e.message.clone())
        }
    }

    /// The evaluator's error: stable code `E0xx`, its class, located by its node's span.
    fn core(label: &str, src: &str, heap: &Heap, e: &CoreError) -> Failure {
        let at = e
            .node
            .and_then(|n| heap.span(n))
            .map(|s| LineIndex::new(src).line_col(s.start));
        Failure {
            code: Some(e.kind.code()),
            kind: Some(e.kind.class()),
            line: at.map(|(l, _)| l.into()),
            col: at.map(|(_, c)| c.into()),
            rendered: Some(render_core_error(label, src, heap, e)),
            ..Failure::new(core_class(e), e.to_string())
        }
    }

    /// The calibrator's error: an evaluator error keeps its code and place; the rest is a
    /// `CalibrationError` with the calibrator's stable class (`config`, `data`, …).
    fn calibrate(label: &str, src: &str, heap: &Heap, e: CalibrateError) -> Failure {
        match e {
            CalibrateError::Eval { error } => Failure::core(label, src, heap, &error),
            // The library's message names `CalibrateConfig::params`; Python's argument is `params`.
            other if other.class() == "no-parameters" => Failure {
                kind: Some(other.class()),
                ..Failure::new(
                    "CalibrationError",
                    "no parameters to fit: declare them with (params (name kind init) …) in the \
                     program or name them with params=[…]",
                )
            },
            other => Failure {
                kind: Some(other.class()),
                ..Failure::new("CalibrationError", other.to_string())
            },
        }
    }

    /// The search layer's error, by what it is about.
    fn search(e: &SearchError) -> Failure {
        let text = ndvm_search::error::with_causes(e);
        match e {
            SearchError::Parse { error, rendered } => Failure {
                code: Some(error.kind.code()),
                kind: Some(error.kind.name()),
                rendered: Some(rendered.clone()),
                ..Failure::new("ParseError", error.message.clone())
            },
            SearchError::Eval { error, rendered } => Failure {
                code: Some(error.kind.code()),
                kind: Some(error.kind.class()),
                rendered: Some(rendered.clone()),
                ..Failure::new(core_class(error), error.to_string())
            },
            SearchError::Task { line, column, .. } => Failure {
                line: (*line > 0).then_some(*line),
                col: (*line > 0).then_some(*column),
                ..Failure::new("TaskError", text)
            },
            SearchError::Csv { line, .. } => Failure {
                line: line.map(|l| l as u64),
                ..Failure::new("TaskError", text)
            },
            SearchError::BadArgument { .. }
            | SearchError::LaneCount { .. }
            | SearchError::DuplicateBinding { .. }
            | SearchError::NoParameters { .. } => Failure::usage(text),
            SearchError::Calibrate { error } => Failure {
                kind: Some(error.class()),
                ..Failure::new("CalibrationError", text)
            },
            _ => Failure::new("NdvmError", text),
        }
    }

    /// The Python exception: `ndvm.errors.<class>(message, code=…, kind=…, line=…, col=…,
    /// rendered=…)`. If even that fails, the failure to build it is raised.
    fn into_pyerr(self, py: Python<'_>) -> PyErr {
        let made = (|| -> PyResult<PyErr> {
            let class = py.import("ndvm.errors")?.getattr(self.class)?;
            let kwargs = PyDict::new(py);
            kwargs.set_item("code", self.code)?;
            kwargs.set_item("kind", self.kind)?;
            kwargs.set_item("line", self.line)?;
            kwargs.set_item("col", self.col)?;
            kwargs.set_item("rendered", self.rendered.as_deref())?;
            let err = class.call((self.message.as_str(),), Some(&kwargs))?;
            Ok(PyErr::from_value(err))
        })();
        made.unwrap_or_else(|e| e)
    }
}

/// `LimitError` for the resource limits (E007, E008, E013, E014), `EvalError` otherwise.
fn core_class(e: &CoreError) -> &'static str {
    if e.kind.is_limit() {
        "LimitError"
    } else {
        "EvalError"
    }
}

/// Runs `f`; a panic inside becomes an `InternalError` failure (a Rust panic never reaches
/// Python, where PyO3 would raise `PanicException`, a `BaseException`).
fn guarded<T>(f: impl FnOnce() -> Result<T, Failure>) -> Result<T, Failure> {
    panic::catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|payload| Err(Failure::panic(&*payload)))
}

// ------------------------------------------------------------------ arguments

/// The shipped front ends (Scheme, infix), built once.
fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::default)
}

/// A value from Python after the wrapper made it float64: a number, a 1-D or a 2-D array.
enum Value {
    Scalar(f64),
    /// A 1-D array of more than one value, C-contiguous: lent, read in place.
    Lent(Lent),
    /// A 1-D array of another layout (or of one value), copied.
    Array(Vec<f64>),
    /// A 2-D array: a matrix shared by every lane, lent when C-contiguous, else copied.
    Matrix(InputValue),
}

/// Reads one value. With `lend`, C-contiguous arrays are lent ([`NumpyValues`]: no copy), 1-D
/// ones of more than one value; any other array is copied while attached.
fn read_value(name: &str, value: &Bound<'_, PyAny>, lend: bool) -> PyResult<Value> {
    if let Ok(x) = value.extract::<f64>() {
        return Ok(Value::Scalar(x));
    }
    if let Ok(a) = value.extract::<PyReadonlyArray1<'_, f64>>() {
        if lend && a.len() > 1 && a.is_c_contiguous() {
            return Ok(Value::Lent(NumpyValues::lend(&a)));
        }
        return Ok(Value::Array(a.as_array().to_vec()));
    }
    if let Ok(m) = value.extract::<PyReadonlyArray2<'_, f64>>() {
        let (rows, cols) = m.as_array().dim();
        // C order only: `as_slice` also takes a Fortran-ordered array, whose slice is by column.
        if lend && m.is_c_contiguous() {
            let data = NumpyValues::lend(&m);
            return Ok(Value::Matrix(InputValue::LentMatrix { rows, cols, data }));
        }
        let data = m.as_array().iter().copied().collect();
        return Ok(Value::Matrix(InputValue::Matrix { rows, cols, data }));
    }
    Err(PyTypeError::new_err(format!(
        "`{name}`: expected a number or a float64 array of 1 or 2 dimensions"
    )))
}

/// A C-contiguous float64 numpy array lent to the evaluator (`ndvm_core::ValueSource`): its
/// memory is read in place, and only while attached to the interpreter (a run binding its inputs,
/// a replay comparing them), so no other Python thread writes it during a read even though the
/// evaluation itself runs detached. The array object is kept alive by the reference held here.
struct NumpyValues {
    array: Py<PyArrayDyn<f64>>,
    count: usize,
}

impl NumpyValues {
    /// Lends `array` (C-contiguous).
    fn lend<D: numpy::ndarray::Dimension>(array: &PyReadonlyArray<'_, f64, D>) -> Lent {
        let bound: &Bound<'_, PyArray<f64, D>> = array;
        Lent::new(NumpyValues {
            array: bound.to_dyn().clone().unbind(),
            count: bound.len(),
        })
    }
}

impl ValueSource for NumpyValues {
    fn count(&self) -> usize {
        self.count
    }

    fn read(&self, f: &mut dyn FnMut(&[f64])) {
        Python::attach(|py| {
            // Another extension holding the array writable: nothing is read (a length error).
            let Ok(array) = self.array.bind(py).try_readonly() else {
                return f(&[]);
            };
            match array.as_slice() {
                Ok(xs) if array.is_c_contiguous() => f(xs),
                // Its layout changed in place since it was lent: read it in row-major order.
                _ => f(&array.as_array().iter().copied().collect::<Vec<f64>>()),
            }
        })
    }
}

/// `d[key]` extracted, `None` when absent or `None`.
fn opt<'py, T: FromPyObjectOwned<'py>>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<T>> {
    match d.get_item(key)? {
        Some(v) if !v.is_none() => v.extract::<T>().map(Some).map_err(Into::into),
        _ => Ok(None),
    }
}

/// A name Python gave that must be one of `known` (a `UsageError` listing them otherwise).
fn named<T: Copy>(what: &str, name: &str, known: &[(&str, T)]) -> Result<T, Failure> {
    known
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = known.iter().map(|(n, _)| *n).collect();
            Failure::usage(format!(
                "unknown {what} `{name}` (expected {})",
                names.join(", ")
            ))
        })
}

/// `d[key]`, a name that must be one of `known`; `None` when absent.
fn pick_named<'py, T: Copy>(
    py: Python<'py>,
    d: &Bound<'py, PyDict>,
    key: &str,
    what: &str,
    known: &[(&str, T)],
) -> PyResult<Option<T>> {
    opt::<String>(d, key)?
        .map(|n| named(what, &n, known))
        .transpose()
        .map_err(|f| f.into_pyerr(py))
}

fn dialect_named(name: &str) -> Result<ndvm_core::Dialect, Failure> {
    evalcmd::parse_dialect(name).ok_or_else(|| {
        Failure::usage(format!(
            "unknown dialect `{name}` (expected default or reference)"
        ))
    })
}

fn precision_named(name: &str) -> Result<Precision, Failure> {
    Precision::from_name(name)
        .ok_or_else(|| Failure::usage(format!("unknown precision `{name}` (expected f64 or f32)")))
}

/// `(name, kind, init, lo, hi)` of a declared parameter, as Python gets it.
type DeclaredParam = (String, &'static str, f64, Option<f64>, Option<f64>);

/// `(name, kind, init, lo, hi)`: one parameter to fit, as Python passes it.
type ParamTuple = (
    String,
    Option<String>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
);

fn kind_named(name: &str, lo: Option<f64>, hi: Option<f64>) -> Result<ParamKind, Failure> {
    match (name, lo, hi) {
        ("bounded", Some(lo), Some(hi)) => Ok(ParamKind::Bounded { lo, hi }),
        ("bounded", _, _) => Err(Failure::usage("a bounded parameter needs lo and hi")),
        _ => named(
            "parameter kind",
            name,
            &[
                ("free", ParamKind::Free),
                ("positive", ParamKind::Positive),
                ("unit", ParamKind::Unit),
            ],
        ),
    }
}

/// `(kind, lo, hi)` of a declared kind, for Python.
fn kind_parts(kind: ParamKind) -> (&'static str, Option<f64>, Option<f64>) {
    match kind {
        ParamKind::Free => ("free", None, None),
        ParamKind::Positive => ("positive", None, None),
        ParamKind::Unit => ("unit", None, None),
        ParamKind::Bounded { lo, hi } => ("bounded", Some(lo), Some(hi)),
    }
}

// ------------------------------------------------------------------ Program

/// A program read once onto its own heap, and the evaluator of its last run: reused while the
/// lane count, dialect and precision stay the same, so repeated calls replay the recorded tape
/// (bit-identical to a fresh evaluator, `frontends/tests/reuse.rs`).
struct Parsed {
    heap: Heap,
    program: Program,
    evaluator: Option<Evaluator>,
}

/// `ndvm._ndvm.Program(src, frontend="scheme", label="<program>")`.
#[pyclass(name = "Program", module = "ndvm._ndvm", frozen)]
struct PyProgram {
    src: String,
    frontend: String,
    label: String,
    parsed: Mutex<Parsed>,
}

/// What one `evaluate` binds and how it runs, checked, with its `Inputs` built once (arrays lent
/// where their layout allows), so it crosses `detach` as it is.
struct EvalRequest {
    inputs: Inputs,
    n_lanes: usize,
    grad: bool,
    dialect: ndvm_core::Dialect,
    precision: Precision,
    limits: LimitArgs,
}

impl EvalRequest {
    /// The CLI's checks in its order (limits, lane count, a name bound twice), then the `Inputs`
    /// in the order Python gave them: parameters, inputs, vectors, matrices.
    fn new(
        read: ReadBindings,
        lanes: Option<usize>,
        grad: bool,
        dialect: ndvm_core::Dialect,
        precision: Precision,
        limits: LimitArgs,
    ) -> Result<EvalRequest, Failure> {
        limits.check().map_err(|e| Failure::search(&e))?;
        let lens = read.bindings.iter().map(|(name, v, _)| {
            let len = match v {
                Value::Lent(l) => l.count(),
                Value::Array(xs) => xs.len(),
                _ => 1,
            };
            (name.as_str(), len)
        });
        let n_lanes = evalcmd::lane_count_of(lens, lanes).map_err(|e| Failure::search(&e))?;
        let mut inputs = Inputs::new();
        for (name, value, grad) in read.bindings {
            let value = match value {
                Value::Scalar(x) => InputValue::Uniform(x),
                Value::Lent(l) => InputValue::Lent(l),
                Value::Array(xs) if xs.len() == 1 => InputValue::Uniform(xs[0]),
                Value::Array(xs) => InputValue::Lanes(xs),
                Value::Matrix(_) => unreachable!("read_bindings keeps matrices apart"),
            };
            inputs.push(&name, value, grad);
        }
        for (name, value) in read.shared {
            inputs.push(&name, value, false);
        }
        let mut seen = std::collections::HashSet::new();
        for input in &inputs.entries {
            if !seen.insert(input.name.as_str()) {
                let name = input.name.clone();
                return Err(Failure::search(&SearchError::DuplicateBinding { name }));
            }
        }
        Ok(EvalRequest {
            inputs,
            n_lanes,
            grad,
            dialect,
            precision,
            limits,
        })
    }
}

/// The evaluator in `slot` when it fits `opts` (else a new one), armed with `opts`' limits and
/// deadline, as `Calibrator::evaluator` re-arms its pooled evaluators.
fn armed(slot: &mut Option<Evaluator>, opts: EvalOptions) -> &mut Evaluator {
    let fits = slot.as_ref().is_some_and(|e| {
        let o = e.options();
        (o.n_lanes, o.dialect, o.precision) == (opts.n_lanes, opts.dialect, opts.precision)
    });
    if !fits {
        *slot = None;
    }
    let (steps, depth, memory, deadline) = (
        opts.max_steps,
        opts.max_depth,
        opts.max_memory,
        opts.deadline,
    );
    let ev = slot.get_or_insert_with(|| Evaluator::new(opts));
    ev.set_limits(steps, depth, memory);
    ev.set_deadline(deadline);
    ev
}

impl PyProgram {
    /// The parsed program. After a panic mid-run the lock is poisoned: the cached evaluator's
    /// state is then unknown, so it is dropped (the heap and program stay valid: cells are
    /// immutable once allocated).
    fn lock(&self) -> MutexGuard<'_, Parsed> {
        match self.parsed.lock() {
            Ok(guard) => guard,
            Err(poisoned) => {
                let mut guard = poisoned.into_inner();
                guard.evaluator = None;
                self.parsed.clear_poison();
                guard
            }
        }
    }

    fn core_failure(&self, heap: &Heap, e: &CoreError) -> Failure {
        Failure::core(&self.label, &self.src, heap, e)
    }

    /// One evaluation, as `evalcmd::run_with` makes it: the CLI's lane rules, limits and default
    /// 60 s deadline. Returns the evaluation and its lane count.
    fn run_eval(&self, req: &EvalRequest) -> Result<(Evaluation, usize), Failure> {
        let (n_lanes, inputs) = (req.n_lanes, &req.inputs);
        let opts = req
            .limits
            .eval_options(EvalOptions::new(n_lanes).with_dialect(req.dialect))
            .with_precision(req.precision);
        let mut guard = self.lock();
        let Parsed {
            heap,
            program,
            evaluator,
        } = &mut *guard;
        let ev = armed(evaluator, opts);
        let res = if req.grad {
            ev.eval_grad(heap, program, inputs)
        } else {
            ev.eval(heap, program, inputs)
        };
        match res {
            Ok(evaluation) => Ok((evaluation, n_lanes)),
            Err(e) => Err(self.core_failure(heap, &e)),
        }
    }

    /// One calibration, as `calibratecmd::run_with` assembles it.
    fn run_calibration(
        &self,
        data: &Dataset,
        params: &[ParamTuple],
        settings: &CalSettings,
    ) -> Result<Calibration, Failure> {
        settings.limits.check().map_err(|e| Failure::search(&e))?;
        let mut guard = self.lock();
        let Parsed { heap, program, .. } = &mut *guard;
        let declared = ndvm_core::params::declarations(heap, program)
            .map_err(|e| self.core_failure(heap, &e))?;
        let mut config = settings.config(data.weights.is_some());
        config.params = merged_params(params, &declared)?;
        settings.limits.apply(&mut config);
        let fitted = Calibrator::new(config).and_then(|mut c| c.calibrate(heap, program, data));
        fitted.map_err(|e| Failure::calibrate(&self.label, &self.src, heap, e))
    }
}

/// The parameters to fit by the command line's rule (`calibratecmd::merge_params`).
fn merged_params(params: &[ParamTuple], declared: &[ParamDecl]) -> Result<Vec<ParamSpec>, Failure> {
    let mut entries = Vec::new();
    for (name, kind, init, lo, hi) in params {
        let kind = kind
            .as_deref()
            .map(|k| kind_named(k, *lo, *hi))
            .transpose()?;
        entries.push(ParamArg {
            name: name.clone(),
            kind,
            init: *init,
        });
    }
    Ok(calibratecmd::merge_params(&entries, declared, false))
}

/// What `evaluate` read from Python: each binding (name, a number or a 1-D array, whether it is
/// differentiated), then the values shared by every lane: the vectors, then the matrices.
struct ReadBindings {
    bindings: Vec<(String, Value, bool)>,
    shared: Vec<(String, InputValue)>,
}

/// Reads `params` (differentiable), `inputs` and `vectors`: numbers, 1-D arrays (one value per
/// lane, or one for all) and, among inputs, 2-D arrays (shared matrices). Contiguous arrays are
/// lent.
fn read_bindings(
    params: Option<&Bound<'_, PyDict>>,
    inputs: Option<&Bound<'_, PyDict>>,
    vectors: Option<&Bound<'_, PyDict>>,
) -> PyResult<ReadBindings> {
    let (mut bindings, mut vecs, mut matrices) = (Vec::new(), Vec::new(), Vec::new());
    for (dict, grad) in [(params, true), (inputs, false)] {
        let Some(dict) = dict else { continue };
        for (key, value) in dict.iter() {
            let name: String = key.extract()?;
            match read_value(&name, &value, true)? {
                Value::Matrix(_) if grad => {
                    return Err(PyTypeError::new_err(format!(
                        "`{name}`: only numbers can be differentiated (give matrices as inputs)"
                    )));
                }
                Value::Matrix(m) => matrices.push((name, m)),
                value => bindings.push((name, value, grad)),
            }
        }
    }
    if let Some(dict) = vectors {
        for (key, value) in dict.iter() {
            let name: String = key.extract()?;
            let data: PyReadonlyArray1<'_, f64> = value.extract()?;
            let value = if data.is_c_contiguous() {
                InputValue::LentVector(NumpyValues::lend(&data))
            } else {
                InputValue::Vector(data.as_array().to_vec())
            };
            vecs.push((name, value));
        }
    }
    vecs.extend(matrices);
    Ok(ReadBindings {
        bindings,
        shared: vecs,
    })
}

/// `{"value": …, "grads": {name: (B,)}, "faults": (B,) bool}`; vectors are (B, len), matrices
/// (B, rows, cols). The vectors move into numpy without a copy.
fn evaluation_to_py(py: Python<'_>, e: Evaluation, n: usize) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    match e.value {
        Output::Number(v) => out.set_item("value", PyArray1::from_vec(py, v))?,
        Output::Bool(v) => out.set_item("value", PyArray1::from_vec(py, v))?,
        Output::Vector { len, data } => {
            out.set_item("value", PyArray1::from_vec(py, data).reshape([n, len])?)?
        }
        Output::Matrix { rows, cols, data } => out.set_item(
            "value",
            PyArray1::from_vec(py, data).reshape([n, rows, cols])?,
        )?,
        Output::Other(text) => out.set_item("value", text)?,
    }
    let grads = PyDict::new(py);
    for g in e.grads {
        grads.set_item(g.name, PyArray1::from_vec(py, g.per_lane))?;
    }
    out.set_item("grads", grads)?;
    out.set_item("faults", PyArray1::from_vec(py, e.faults))?;
    Ok(out)
}

#[pymethods]
impl PyProgram {
    #[new]
    #[pyo3(signature = (src, frontend = "scheme", label = "<program>".to_string()))]
    fn new(py: Python<'_>, src: String, frontend: &str, label: String) -> PyResult<Self> {
        let reader = registry()
            .by_name(frontend)
            .ok_or_else(|| Failure::usage(registry().unknown(frontend)).into_pyerr(py))?;
        let mut heap = Heap::new();
        let program = guarded(|| {
            reader
                .parse(&mut heap, &src)
                .map_err(|e| Failure::parse(&label, &src, &e))
        })
        .map_err(|f| f.into_pyerr(py))?;
        Ok(PyProgram {
            frontend: reader.name().to_string(),
            src,
            label,
            parsed: Mutex::new(Parsed {
                heap,
                program,
                evaluator: None,
            }),
        })
    }

    #[getter]
    fn src(&self) -> &str {
        &self.src
    }

    #[getter]
    fn frontend(&self) -> &str {
        &self.frontend
    }

    /// The program's `(params (name kind init [lo hi]) …)` declarations:
    /// `[(name, kind, init, lo, hi)]`.
    fn declared_params(&self, py: Python<'_>) -> PyResult<Vec<DeclaredParam>> {
        let guard = self.lock();
        let decls = ndvm_core::params::declarations(&guard.heap, &guard.program)
            .map_err(|e| self.core_failure(&guard.heap, &e).into_pyerr(py))?;
        Ok(decls
            .iter()
            .map(|d| {
                let (kind, lo, hi) = kind_parts(d.kind);
                (d.name.clone(), kind, d.init, lo, hi)
            })
            .collect())
    }

    /// The program as s-expression text (`ndvm_core::print`), the input of `ndvm.to_sympy`.
    fn sexpr(&self, py: Python<'_>) -> PyResult<String> {
        let guard = self.lock();
        ndvm_core::print::program_to_string(&guard.heap, &guard.program)
            .map_err(|e| self.core_failure(&guard.heap, &e).into_pyerr(py))
    }

    /// The program printed by a front end (default: its own).
    #[pyo3(signature = (frontend = None))]
    fn to_source(&self, py: Python<'_>, frontend: Option<&str>) -> PyResult<String> {
        let name = frontend.unwrap_or(&self.frontend);
        let printer = registry()
            .by_name(name)
            .ok_or_else(|| Failure::usage(registry().unknown(name)).into_pyerr(py))?;
        let guard = self.lock();
        printer
            .print(&guard.heap, &guard.program)
            .map_err(|e| self.core_failure(&guard.heap, &e).into_pyerr(py))
    }

    /// Evaluates for B lanes, with per-lane gradients for every parameter when `grad`.
    #[pyo3(signature = (params = None, inputs = None, vectors = None, lanes = None, grad = true,
        dialect = "default", precision = "f64", max_work = None, max_memory_mb = None,
        max_depth = None, timeout = None))]
    #[allow(clippy::too_many_arguments)]
    fn evaluate<'py>(
        &self,
        py: Python<'py>,
        params: Option<&Bound<'py, PyDict>>,
        inputs: Option<&Bound<'py, PyDict>>,
        vectors: Option<&Bound<'py, PyDict>>,
        lanes: Option<usize>,
        grad: bool,
        dialect: &str,
        precision: &str,
        max_work: Option<u64>,
        max_memory_mb: Option<u64>,
        max_depth: Option<u32>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let read = read_bindings(params, inputs, vectors)?;
        let request = EvalRequest::new(
            read,
            lanes,
            grad,
            dialect_named(dialect).map_err(|f| f.into_pyerr(py))?,
            precision_named(precision).map_err(|f| f.into_pyerr(py))?,
            LimitArgs {
                max_work,
                max_memory_mb,
                max_depth,
                timeout,
            },
        )
        .map_err(|f| f.into_pyerr(py))?;
        // Detached: other Python threads run meanwhile. `&self` crosses because PyProgram is
        // Sync (a Mutex around what is Send).
        let (evaluation, n) = py
            .detach(|| guarded(|| self.run_eval(&request)))
            .map_err(|f| f.into_pyerr(py))?;
        evaluation_to_py(py, evaluation, n)
    }

    /// The Rust side of `python/bench/overhead.py`: `repeats` runs of the request `evaluate`
    /// would make from these arguments, through the same `run_eval` (the evaluator reused, its
    /// tape replayed), timed inside Rust; returns the seconds per run. The difference to a timed
    /// `evaluate` call is the Python binding's overhead.
    #[pyo3(signature = (repeats, params = None, inputs = None, lanes = None, grad = true))]
    fn time_evaluate<'py>(
        &self,
        py: Python<'py>,
        repeats: usize,
        params: Option<&Bound<'py, PyDict>>,
        inputs: Option<&Bound<'py, PyDict>>,
        lanes: Option<usize>,
        grad: bool,
    ) -> PyResult<f64> {
        let request = EvalRequest::new(
            read_bindings(params, inputs, None)?,
            lanes,
            grad,
            ndvm_core::Dialect::default(),
            Precision::F64,
            LimitArgs::default(),
        )
        .map_err(|f| f.into_pyerr(py))?;
        let repeats = repeats.max(1);
        py.detach(|| {
            guarded(|| {
                let started = std::time::Instant::now();
                for _ in 0..repeats {
                    std::hint::black_box(self.run_eval(&request)?);
                }
                Ok(started.elapsed().as_secs_f64() / repeats as f64)
            })
        })
        .map_err(|f| f.into_pyerr(py))
    }
}

// ------------------------------------------------------------------ calibrate

/// The calibrator settings Python may set (`options` of `calibrate`); the rest stay at
/// `CalibrateConfig::recommended()`.
struct CalSettings {
    starts: Option<usize>,
    optimizer: Option<Optimizer>,
    polish: Option<Polish>,
    seed: Option<u64>,
    max_iters: Option<usize>,
    screen_iters: Option<usize>,
    n_polish: Option<usize>,
    learning_rate: Option<f64>,
    target_loss: Option<f64>,
    loss: Option<Loss>,
    dialect: ndvm_core::Dialect,
    precision: Precision,
    limits: LimitArgs,
}

impl CalSettings {
    fn read<'py>(py: Python<'py>, d: Option<&Bound<'py, PyDict>>) -> PyResult<CalSettings> {
        let empty = PyDict::new(py);
        let d = d.unwrap_or(&empty);
        let name = |key: &str| opt::<String>(d, key);
        let failure = |f: Failure| f.into_pyerr(py);
        let optimizers = [
            ("portfolio", Optimizer::Portfolio),
            ("adam", Optimizer::Adam),
            ("lbfgs", Optimizer::Lbfgs),
            ("lm", Optimizer::Lm),
        ];
        let losses = [
            ("mse", Loss::Mse),
            ("weighted-mse", Loss::WeightedMse),
            ("gaussian-nll", Loss::GaussianNll),
            ("program", Loss::ProgramLoss),
        ];
        let polishes = [("lbfgs", Polish::Lbfgs), ("lm", Polish::Lm)];
        Ok(CalSettings {
            starts: opt(d, "starts")?,
            optimizer: pick_named(py, d, "optimizer", "optimizer", &optimizers)?,
            polish: pick_named(py, d, "polish", "polish method", &polishes)?,
            seed: opt(d, "seed")?,
            max_iters: opt(d, "max_iters")?,
            screen_iters: opt(d, "screen_iters")?,
            n_polish: opt(d, "n_polish")?,
            learning_rate: opt(d, "learning_rate")?,
            target_loss: opt(d, "target_loss")?,
            loss: pick_named(py, d, "loss", "loss", &losses)?,
            dialect: dialect_named(&name("dialect")?.unwrap_or_else(|| "default".into()))
                .map_err(failure)?,
            precision: precision_named(&name("precision")?.unwrap_or_else(|| "f64".into()))
                .map_err(failure)?,
            limits: LimitArgs {
                max_work: opt(d, "max_work")?,
                max_memory_mb: opt(d, "max_memory_mb")?,
                max_depth: opt(d, "max_depth")?,
                timeout: opt(d, "timeout")?,
            },
        })
    }

    /// `recommended()` with these settings, in the order `calibratecmd::run_with` applies them
    /// (weights switch the loss to the weighted MSE unless a loss is named).
    fn config(&self, weighted: bool) -> CalibrateConfig {
        let mut c = CalibrateConfig::recommended();
        c.dialect = self.dialect;
        c.precision = self.precision;
        if weighted {
            c.loss = Loss::WeightedMse;
        }
        if let Some(loss) = self.loss {
            c.loss = loss;
        }
        if let Some(k) = self.starts {
            c.n_starts = k;
        }
        if let Some(o) = self.optimizer {
            c.optimizer = o;
        }
        if let Some(p) = self.polish {
            c.polish = p;
        }
        if let Some(s) = self.seed {
            c.seed = s;
        }
        if let Some(m) = self.max_iters {
            c.max_iters = m;
        }
        if let Some(s) = self.screen_iters {
            c.screen_iters = s;
        }
        if let Some(n) = self.n_polish {
            c.n_polish = n;
        }
        if let Some(lr) = self.learning_rate {
            c.learning_rate = lr;
        }
        c.target_loss = self.target_loss.or(c.target_loss);
        c
    }
}

/// The data set: per-point columns (in the order given: a DataFrame's column order), the target,
/// the weights, and shared values (a number, a vector or a matrix).
fn dataset(
    columns: &[(String, PyReadonlyArray1<'_, f64>)],
    target: Option<PyReadonlyArray1<'_, f64>>,
    weights: Option<PyReadonlyArray1<'_, f64>>,
    shared: Option<&Bound<'_, PyDict>>,
) -> PyResult<Dataset> {
    let mut d = Dataset::new();
    for (name, col) in columns {
        d = d.column(name, col.as_array().to_vec());
    }
    if let Some(t) = target {
        d = d.target(t.as_array().to_vec());
    }
    if let Some(w) = weights {
        d = d.weights(w.as_array().to_vec());
    }
    if let Some(shared) = shared {
        for (key, value) in shared.iter() {
            let name: String = key.extract()?;
            d = match read_value(&name, &value, false)? {
                Value::Scalar(x) => d.scalar(&name, x),
                Value::Array(v) => d.vector(&name, v),
                Value::Matrix(InputValue::Matrix { rows, cols, data }) => {
                    d.matrix(&name, rows, cols, data)
                }
                Value::Lent(_) | Value::Matrix(_) => {
                    unreachable!("read_value lends only when asked")
                }
            };
        }
    }
    Ok(d)
}

/// A calibration's starts, kept as Rust values until Python asks for them (most callers never
/// do, and converting 32 starts costs more than the rest of the result): `columns()` gives them
/// as columns, one array or list per field and a row per start; a pickle holds those columns.
#[pyclass(name = "StartTable", module = "ndvm._ndvm", frozen)]
struct StartTable {
    width: usize,
    starts: Vec<ndvm_optimizers::StartResult>,
}

#[pymethods]
impl StartTable {
    /// `{"init": (k, n), "params": (k, n), "loss": (k,), "grad_norm": (k,), "iters": (k,),
    /// "n_evals": (k,), "polished": (k,), "status": [str], "picks": [[int]]}`.
    fn columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.starts;
        let starts = PyDict::new(py);
        let rows = |f: &dyn Fn(&ndvm_optimizers::StartResult) -> &[f64]| -> Vec<f64> {
            s.iter().flat_map(|s| f(s).iter().copied()).collect()
        };
        let matrix = |data: Vec<f64>| PyArray1::from_vec(py, data).reshape([s.len(), self.width]);
        starts.set_item("init", matrix(rows(&|s| &s.init))?)?;
        starts.set_item("params", matrix(rows(&|s| &s.params))?)?;
        let column = |f: &dyn Fn(&ndvm_optimizers::StartResult) -> f64| -> Vec<f64> {
            s.iter().map(f).collect()
        };
        starts.set_item("loss", PyArray1::from_vec(py, column(&|s| s.loss)))?;
        starts.set_item(
            "grad_norm",
            PyArray1::from_vec(py, column(&|s| s.grad_norm)),
        )?;
        let iters: Vec<u64> = s.iter().map(|s| s.iters as u64).collect();
        let n_evals: Vec<u64> = s.iter().map(|s| s.n_evals).collect();
        let polished: Vec<bool> = s.iter().map(|s| s.polished).collect();
        let status: Vec<&str> = s.iter().map(|s| s.status.name()).collect();
        let picks: Vec<Vec<usize>> = s.iter().map(|s| s.picks.clone()).collect();
        starts.set_item("iters", PyArray1::from_vec(py, iters))?;
        starts.set_item("n_evals", PyArray1::from_vec(py, n_evals))?;
        starts.set_item("polished", PyArray1::from_vec(py, polished))?;
        starts.set_item("status", status)?;
        starts.set_item("picks", picks)?;
        Ok(starts)
    }

    fn __len__(&self) -> usize {
        self.starts.len()
    }

    /// Pickles as its columns (a plain dict).
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyDict>,))> {
        let dict = py.get_type::<PyDict>().into_any();
        Ok((dict, (self.columns(py)?,)))
    }
}

/// `Calibration` as a dict of numbers, arrays and lists (read by `ndvm.CalibrationResult`).
fn calibration_to_py<'py>(py: Python<'py>, mut c: Calibration) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("names", c.names.clone())?;
    d.set_item("params", &c.params)?;
    d.set_item("loss", c.loss)?;
    d.set_item("grad", &c.grad)?;
    d.set_item("grad_norm", c.grad_norm)?;
    d.set_item("r2", c.r2)?;
    d.set_item("best_start", c.best_start)?;
    // The starts stay in Rust until Python asks for them (`CalibrationResult.start_table`).
    let table = StartTable {
        width: c.names.len(),
        starts: std::mem::take(&mut c.starts),
    };
    d.set_item("starts", Bound::new(py, table)?)?;
    d.set_item("n_evals", c.n_evals)?;
    d.set_item("n_grad_evals", c.n_grad_evals)?;
    d.set_item("n_replayed", c.n_replayed)?;
    d.set_item("wall_s", c.wall_time.as_secs_f64())?;
    d.set_item("stop_reason", c.stop_reason.as_str())?;
    let choices = PyList::empty(py);
    for ch in &c.choices {
        let cd = PyDict::new(py);
        cd.set_item("site", ch.site)?;
        cd.set_item("index", ch.index)?;
        cd.set_item("option", ch.option.clone())?;
        cd.set_item("n_options", ch.n_options)?;
        cd.set_item("weights", ch.weights.clone())?;
        choices.append(cd)?;
    }
    d.set_item("choices", choices)?;
    Ok(d)
}

/// `calibrate(program, columns, target=None, weights=None, shared=None, params=None,
/// options=None)`: fits the program's constants (`ndvm.calibrate` wraps it).
#[pyfunction]
#[pyo3(signature = (program, columns, target = None, weights = None, shared = None,
    params = None, options = None))]
#[allow(clippy::too_many_arguments)]
fn calibrate<'py>(
    py: Python<'py>,
    program: &Bound<'py, PyProgram>,
    columns: Vec<(String, PyReadonlyArray1<'py, f64>)>,
    target: Option<PyReadonlyArray1<'py, f64>>,
    weights: Option<PyReadonlyArray1<'py, f64>>,
    shared: Option<&Bound<'py, PyDict>>,
    params: Option<Vec<ParamTuple>>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let data = dataset(&columns, target, weights, shared)?;
    let settings = CalSettings::read(py, options)?;
    let params = params.unwrap_or_default();
    let program = program.get();
    // Only this (the main) thread can look at Python's signals, so cutting one calibration short
    // at Ctrl-C would mean running it on another thread, which costs more than a whole
    // calibration of a small data set: it runs detached on this thread, and a Ctrl-C meanwhile
    // is raised by Python as soon as the call returns. (A search's calibrations are cut.)
    let calibration = py
        .detach(|| guarded(|| program.run_calibration(&data, &params, &settings)))
        .map_err(|f| f.into_pyerr(py))?;
    calibration_to_py(py, calibration)
}

/// The Rust side of `python/bench/overhead.py`: `repeats` calibrations with the default
/// settings, each as `calibrate` runs it (`run_calibration`: declarations, settings,
/// `Calibrator::new`, the fit), timed inside Rust; returns the seconds per calibration.
#[pyfunction]
fn time_calibrate<'py>(
    py: Python<'py>,
    program: &Bound<'py, PyProgram>,
    columns: Vec<(String, PyReadonlyArray1<'py, f64>)>,
    target: PyReadonlyArray1<'py, f64>,
    repeats: usize,
) -> PyResult<f64> {
    let data = dataset(&columns, Some(target), None, None)?;
    let settings = CalSettings::read(py, None)?;
    let program = program.get();
    let repeats = repeats.max(1);
    py.detach(|| {
        guarded(|| {
            let started = std::time::Instant::now();
            for _ in 0..repeats {
                std::hint::black_box(program.run_calibration(&data, &[], &settings)?);
            }
            Ok(started.elapsed().as_secs_f64() / repeats as f64)
        })
    })
    .map_err(|f| f.into_pyerr(py))
}

// ------------------------------------------------------------------ runs

/// Progress on its way to Python.
enum Note {
    /// `done` calibrations put in order, the best score so far (higher is better: R², or minus
    /// the loss), seconds since the run started.
    Round {
        done: usize,
        best: Option<f64>,
        elapsed: f64,
    },
    /// A plain progress line of `run_task` (the CLI's `LogLines`).
    Line(String),
}

/// How often the waiting thread looks at Python's signal flag and the progress channel.
const POLL: Duration = Duration::from_millis(100);

/// Forwards the engine's rounds to the waiting thread.
struct Forward {
    tx: Sender<Note>,
}

impl Observer for Forward {
    fn on_event(&mut self, _event: &Event) -> ndvm_search::Result<()> {
        Ok(())
    }

    fn on_round(&mut self, task: &Task, events: &[Event], _stream: &StreamStats, elapsed_s: f64) {
        let best = events
            .iter()
            .filter_map(|e| e.score(task.metric))
            .reduce(f64::max);
        // The waiting side may be gone (its callback raised): nothing to tell then.
        let _ = self.tx.send(Note::Round {
            done: events.len(),
            best,
            elapsed: elapsed_s,
        });
    }
}

fn call_progress(cb: &Bound<'_, PyAny>, note: Note) -> PyResult<()> {
    match note {
        Note::Round {
            done,
            best,
            elapsed,
        } => cb.call1(("round", done, best, elapsed))?,
        Note::Line(line) => cb.call1(("line", line))?,
    };
    Ok(())
}

/// Runs `work` on a scoped thread while this thread waits detached from the interpreter. Every
/// [`POLL`] it attaches to pass progress notes to `progress` and to look at Python's signal flag
/// (`check_signals` runs Python's own SIGINT handler, which raises `KeyboardInterrupt`); on the
/// first exception it raises `interrupt` with `cancel_in_flight` (no new calibration starts and
/// those in flight stop at their next evaluation, left unfinished) and waits for the work to end. Returns the work's result (a panic in it is a failure) and that exception.
fn run_polled<'py, T: Send>(
    py: Python<'py>,
    interrupt: Option<&Interrupt>,
    progress: Option<&Bound<'py, PyAny>>,
    work: impl FnOnce(Sender<Note>) -> T + Send,
) -> (Result<T, Failure>, Option<PyErr>) {
    let (tx, mut rx) = mpsc::channel::<Note>();
    std::thread::scope(|scope| {
        let handle = scope.spawn(move || work(tx));
        let mut stop: Option<PyErr> = None;
        loop {
            // `&Receiver` is not Send: the receiver goes into the detached closure and back.
            let (back, got) = py.detach(move || {
                let got = rx.recv_timeout(POLL);
                (rx, got)
            });
            rx = back;
            match got {
                Ok(note) => {
                    // After an exception the callback is not called again.
                    if stop.is_none()
                        && let Some(cb) = progress
                        && let Err(e) = call_progress(cb, note)
                    {
                        stop = Some(e);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                // The work ended (its sender is dropped with it, also when it panicked).
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if stop.is_none()
                && let Err(e) = py.check_signals()
            {
                stop = Some(e);
            }
            if stop.is_some()
                && let Some(i) = interrupt
                && !i.in_flight().is_raised()
            {
                i.cancel_in_flight();
            }
        }
        let joined = py.detach(move || handle.join());
        (joined.map_err(|payload| Failure::panic(&*payload)), stop)
    })
}

/// Whether `stop` is Ctrl-C: the caller then returns what finished, flagged, and the Python
/// wrapper stores it and raises `KeyboardInterrupt`. Any other exception (the progress callback
/// raised) is the call's error.
fn interrupted_by_ctrl_c(py: Python<'_>, stop: Option<PyErr>) -> PyResult<bool> {
    match stop {
        None => Ok(false),
        Some(e) if e.is_instance_of::<PyKeyboardInterrupt>(py) => Ok(true),
        Some(e) => Err(e),
    }
}

fn json_text(py: Python<'_>, r: serde_json::Result<String>) -> PyResult<String> {
    r.map_err(|e| Failure::new("InternalError", format!("cannot serialise: {e}")).into_pyerr(py))
}

/// `{"events": JSON, "summary": JSON | None, "stop": str, "interrupted": bool}`.
fn run_result<'py>(
    py: Python<'py>,
    events: &[Event],
    summary: Option<&Summary>,
    stop: &str,
    interrupted: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("events", json_text(py, serde_json::to_string(events))?)?;
    let summary = summary
        .map(|s| json_text(py, serde_json::to_string(s)))
        .transpose()?;
    d.set_item("summary", summary)?;
    d.set_item("stop", stop)?;
    d.set_item("interrupted", interrupted)?;
    Ok(d)
}

/// The task of `task_text` (a task file's keys as YAML or JSON: `ndvm.search` and `NdvmRegressor`
/// send JSON), with its main table held in memory: read and checked exactly as a task file with
/// the same keys and a CSV table with these columns would be (`task::parse_spec`, `task::build`).
fn task_in_memory(task_text: &str, table: Vec<(String, Vec<f64>)>) -> Result<Task, Failure> {
    let label = Path::new("<task>");
    let mut spec = task::parse_spec(label, task_text).map_err(|e| Failure::search(&e))?;
    spec.data.columns = Some(Columns::new(table));
    task::build(spec).map_err(|e| Failure::search(&e))
}

/// Earlier events by index (`RunOptions::known`): a warm start continues the same stream, as
/// `run --resume` does, so known calibrations are reused and not redone.
fn known_by_index(text: &str) -> Result<HashMap<u64, Event>, Failure> {
    let events: Vec<Event> = serde_json::from_str(text)
        .map_err(|e| Failure::usage(format!("the known events do not read: {e}")))?;
    Ok(events.into_iter().map(|e| (e.index, e)).collect())
}

/// `run_columns(task, columns, threads=1, known_events=None, progress=None)`: the co-search of
/// the task text `task` on a table held in memory (inputs and target among `columns`), without a
/// run folder (what search/tests/task_in_code.rs does): `task::build`, `engine::run`,
/// `Summary::new`.
#[pyfunction]
#[pyo3(signature = (task, columns, threads = 1, known_events = None, progress = None))]
fn run_columns<'py>(
    py: Python<'py>,
    task: &str,
    columns: Vec<(String, PyReadonlyArray1<'py, f64>)>,
    threads: usize,
    known_events: Option<String>,
    progress: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let table: Vec<(String, Vec<f64>)> = columns
        .iter()
        .map(|(n, c)| (n.clone(), c.as_array().to_vec()))
        .collect();
    let known = match known_events {
        Some(text) => known_by_index(&text).map_err(|f| f.into_pyerr(py))?,
        None => HashMap::new(),
    };
    let task = guarded(|| task_in_memory(task, table)).map_err(|f| f.into_pyerr(py))?;
    let interrupt = Interrupt::new();
    let mut opts = RunOptions::new(threads.max(1));
    opts.known = known;
    opts.interrupt = Some(interrupt.clone());
    let (task_ref, opts_ref, threads) = (&task, &opts, opts.threads);
    let (result, stop) = run_polled(py, Some(&interrupt), progress.as_ref(), move |tx| {
        guarded(move || {
            let mut forward = Forward { tx };
            let outcome =
                engine::run(task_ref, opts_ref, &mut forward).map_err(|e| Failure::search(&e))?;
            let run = RunSection::new(&outcome, threads, Shard::ALL);
            let summary = Summary::new(task_ref, &outcome, run);
            Ok((outcome, summary))
        })
    });
    let interrupted = interrupted_by_ctrl_c(py, stop)?;
    let (outcome, summary) = result.and_then(|r| r).map_err(|f| f.into_pyerr(py))?;
    run_result(
        py,
        &outcome.events,
        Some(&summary),
        outcome.stop.as_str(),
        interrupted,
    )
}

/// `run_task(path, out=None, threads=None, budget_seconds=None, budget_calibrations=None,
/// progress=None)`: `ndvm-search TASK.yaml` itself (`runcmd::run`), run folder and all; the
/// progress callback gets the CLI's plain lines.
#[pyfunction]
#[pyo3(signature = (path, out = None, threads = None, budget_seconds = None,
    budget_calibrations = None, progress = None))]
fn run_task<'py>(
    py: Python<'py>,
    path: PathBuf,
    out: Option<PathBuf>,
    threads: Option<usize>,
    budget_seconds: Option<f64>,
    budget_calibrations: Option<usize>,
    progress: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let interrupt = Interrupt::new();
    let args = RunArgs {
        task: Some(path),
        resume: None,
        out,
        threads,
        shard: None,
        budget_seconds,
        budget_calibrations,
        progress: if progress.is_some() {
            ProgressMode::Lines
        } else {
            ProgressMode::Quiet
        },
        interrupt: Some(interrupt.clone()),
    };
    let args_ref = &args;
    let (result, stop) = run_polled(py, Some(&interrupt), progress.as_ref(), move |tx| {
        guarded(move || {
            let mut log = |line: &str| {
                let _ = tx.send(Note::Line(line.to_string()));
            };
            runcmd::run(args_ref, &mut log).map_err(|e| Failure::search(&e))
        })
    });
    let interrupted = interrupted_by_ctrl_c(py, stop)?;
    let report = result.and_then(|r| r).map_err(|f| f.into_pyerr(py))?;
    let d = run_result(
        py,
        &report.outcome.events,
        None,
        report.outcome.stop.as_str(),
        interrupted,
    )?;
    d.set_item("dir", report.dir)?;
    d.set_item("markdown", report.markdown)?;
    Ok(d)
}

/// A test hook (python/tests/test_program.py): panics with `message` inside the guard every
/// entry point uses (`guarded`), or, with `polled`, unguarded on the worker thread of
/// `run_polled`, to show that either way Python gets `InternalError`, never a crash or
/// PyO3's `PanicException`. Nothing else calls it.
#[pyfunction]
#[pyo3(signature = (message, polled = false))]
fn _panic_for_tests(py: Python<'_>, message: &str, polled: bool) -> PyResult<()> {
    let fail = || -> Result<(), Failure> { panic!("{message}") };
    let res = if polled {
        let (res, stop) = run_polled(py, None, None, |_tx| fail());
        if let Some(e) = stop {
            return Err(e);
        }
        res.and_then(|r| r)
    } else {
        py.detach(|| guarded(fail))
    };
    res.map_err(|f| f.into_pyerr(py))
}

/// For the tests: the names among `params`, `inputs` and `vectors` (as `evaluate` takes them) whose arrays
/// `evaluate` lends to the evaluator, read in place, rather than copies. Nothing else calls it.
#[pyfunction]
#[pyo3(signature = (params = None, inputs = None, vectors = None))]
fn _lent_for_tests(
    params: Option<&Bound<'_, PyDict>>,
    inputs: Option<&Bound<'_, PyDict>>,
    vectors: Option<&Bound<'_, PyDict>>,
) -> PyResult<Vec<String>> {
    let read = read_bindings(params, inputs, vectors)?;
    Ok(read
        .bindings
        .into_iter()
        .filter(|(_, v, _)| matches!(v, Value::Lent(_)))
        .map(|(name, _, _)| name)
        .chain(read.shared.into_iter().filter_map(|(name, v)| {
            matches!(v, InputValue::LentVector(_) | InputValue::LentMatrix { .. }).then_some(name)
        }))
        .collect())
}

/// The module `ndvm._ndvm`.
#[pymodule]
fn _ndvm(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyProgram>()?;
    m.add_class::<StartTable>()?;
    m.add_function(wrap_pyfunction!(calibrate, m)?)?;
    m.add_function(wrap_pyfunction!(time_calibrate, m)?)?;
    m.add_function(wrap_pyfunction!(run_columns, m)?)?;
    m.add_function(wrap_pyfunction!(run_task, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_tests, m)?)?;
    m.add_function(wrap_pyfunction!(_lent_for_tests, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
