"""``ndvm``: NDVM from Python, backed by the Rust crates.

``Program`` evaluates a model program for B lanes at once, with exact per-lane gradients.
``calibrate`` fits a program's constants. ``search`` and ``NdvmRegressor`` run the co-search on
arrays, and ``run_task`` runs a task file as ``ndvm-search TASK.yaml`` does.

    >>> import numpy as np, ndvm
    >>> p = ndvm.Program("(* a (exp (- (* k t))))")
    >>> r = p.evaluate(params={"a": 2.0, "k": np.array([0.1, 0.5, 1.0])}, inputs={"t": 1.0})
    >>> float(r.value[0]), float(r.grads["k"][0])
    (1.809674836071919, -1.809674836071919)

This layer only converts arguments (to float64 arrays and dicts) and wraps results. Values,
gradients, fits and search results all come from ``ndvm._ndvm`` (see python/src/lib.rs).
"""

from __future__ import annotations

import functools
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from . import _ndvm
from .errors import (
    CalibrationError,
    EvalError,
    InternalError,
    LimitError,
    NdvmError,
    ParseError,
    TaskError,
    UsageError,
)

__version__ = _ndvm.__version__

__all__ = [
    "Program",
    "Evaluation",
    "calibrate",
    "CalibrationResult",
    "search",
    "SearchResult",
    "run_task",
    "RunResult",
    "to_sympy",
    "NdvmRegressor",
    "NdvmError",
    "ParseError",
    "EvalError",
    "LimitError",
    "CalibrationError",
    "TaskError",
    "UsageError",
    "InternalError",
]

_FRONTEND_BY_SUFFIX = {".scm": "scheme", ".ss": "scheme", ".infix": "infix"}


def _value(name, v):
    """A number stays a float. Anything array-like becomes a C-contiguous float64 array (the
    only array type the extension reads)."""
    if isinstance(v, (bool, int, float, np.floating, np.integer)):
        return float(v)
    a = np.ascontiguousarray(v, dtype=np.float64)
    if a.ndim == 0:
        return float(a)
    if a.ndim > 2:
        raise UsageError(f"`{name}`: arrays of {a.ndim} dimensions cannot be bound")
    return a


def _values(d):
    return None if d is None else {str(k): _value(k, v) for k, v in d.items()}


# ---------------------------------------------------------------------------------- Program


@dataclass(frozen=True)
class Evaluation:
    """What one run produced.

    ``value`` has shape (B,) for numbers or booleans, (B, len) for vectors and (B, rows, cols)
    for matrices; any other value is its printed text. ``grads`` maps each parameter to the
    per-lane derivative of the value (of the sum of its elements for tensors). ``faults[lane]`` is
    True when that lane's value or a gradient is not finite; it never affects other lanes.
    """

    value: Any
    grads: dict
    faults: np.ndarray


class Program:
    """A model program read once (Scheme by default, or ``frontend="infix"``).

    Evaluations reuse one evaluator while the lane count, dialect and precision stay the same,
    so repeated calls with new parameter values replay the recorded tape. Results are
    bit-identical to a fresh evaluator and to ``ndvm-search eval``.
    """

    def __init__(self, src: str, frontend: str = "scheme", *, name: str = "<program>"):
        self._name = name
        self._p = _ndvm.Program(src, frontend, name)

    @classmethod
    def from_file(cls, path, frontend: str | None = None) -> "Program":
        path = Path(path)
        frontend = frontend or _FRONTEND_BY_SUFFIX.get(path.suffix, "scheme")
        return cls(path.read_text(encoding="utf-8"), frontend, name=str(path))

    @property
    def src(self) -> str:
        return self._p.src

    @property
    def frontend(self) -> str:
        return self._p.frontend

    def __repr__(self):
        return f"Program({self.src!r}, frontend={self.frontend!r})"

    def __reduce__(self):
        return (_program, (self.src, self.frontend, self._name))

    def evaluate(
        self,
        params: Mapping[str, Any] | None = None,
        inputs: Mapping[str, Any] | None = None,
        *,
        vectors: Mapping[str, Any] | None = None,
        lanes: int | None = None,
        grad: bool = True,
        dialect: str = "default",
        precision: str = "f64",
        max_work: int | None = None,
        max_memory_mb: int | None = None,
        max_depth: int | None = None,
        timeout: float | None = None,
    ) -> Evaluation:
        """Evaluates for B lanes.

        ``params`` are differentiable: a number (the same on every lane) or a 1-D array (one
        value per lane). ``inputs`` are not differentiated: a number, a 1-D array per lane, or a
        2-D array (a matrix shared by every lane, read with ``ref``). ``vectors`` are shared 1-D
        vectors. B is ``lanes``, or else the length of the per-lane arrays (all equal), or else 1.
        The limits are the governor's: work units (E007), MiB held (E013), non-tail depth (E008)
        and seconds (E014, 60 by default), each a ``LimitError``.
        """
        vecs = None
        if vectors is not None:
            vecs = {str(k): np.ascontiguousarray(v, dtype=np.float64).reshape(-1) for k, v in vectors.items()}
        out = self._p.evaluate(
            params=_values(params),
            inputs=_values(inputs),
            vectors=vecs,
            lanes=lanes,
            grad=grad,
            dialect=dialect,
            precision=precision,
            max_work=max_work,
            max_memory_mb=max_memory_mb,
            max_depth=max_depth,
            timeout=timeout,
        )
        return Evaluation(out["value"], dict(out["grads"]), out["faults"])

    def declared_params(self) -> dict:
        """The program's ``(params …)`` declarations: name → dict(kind, init, lo, hi)."""
        return {
            name: {"kind": kind, "init": init, "lo": lo, "hi": hi}
            for name, kind, init, lo, hi in self._p.declared_params()
        }

    def sexpr(self) -> str:
        """The program as s-expression text."""
        return self._p.sexpr()

    def to_source(self, frontend: str | None = None) -> str:
        """The program printed by a front end (``"scheme"``, ``"infix"``; default its own)."""
        return self._p.to_source(frontend)

    def sympy(self, params: Mapping[str, float] | None = None):
        """The program as a sympy expression (needs the ``sympy`` extra); fitted ``params`` are
        substituted when given. Only closed-form programs convert (no ``define``, ``let``,
        loops or tensors)."""
        return to_sympy(self.sexpr(), params)

    def latex(self, params: Mapping[str, float] | None = None) -> str:
        import sympy

        return sympy.latex(self.sympy(params))


def _program(src, frontend, name):
    return Program(src, frontend, name=name)


def _as_program(program) -> Program:
    """A ``Program`` as it is, a ``pathlib.Path`` read as a program file, any other text as
    Scheme source."""
    if isinstance(program, Program):
        return program
    if isinstance(program, Path):
        return Program.from_file(program)
    return Program(str(program))


# ---------------------------------------------------------------------------------- sympy

_TOKEN = re.compile(r"\s*(?:(;[^\n]*)|([()])|([^\s()]+))")


def _read_sexprs(text: str) -> list:
    """The top-level forms of s-expression text as nested lists of atom strings. It uses an
    explicit stack (no recursion), so deep programs convert too."""
    stack: list[list] = [[]]
    for comment, paren, atom in _TOKEN.findall(text):
        if comment:
            continue
        if paren == "(":
            stack.append([])
        elif paren == ")":
            if len(stack) == 1:
                raise ValueError("unbalanced `)` in the program text")
            done = stack.pop()
            stack[-1].append(done)
        elif atom:
            if atom.startswith("'"):
                raise ValueError("quoted data has no sympy form")
            stack[-1].append(atom)
    if len(stack) != 1:
        raise ValueError("unclosed `(` in the program text")
    return stack[0]


def _sympy_ops(sp):
    def minus(*a):
        return -a[0] if len(a) == 1 else a[0] - sp.Add(*a[1:])

    def divide(*a):
        return 1 / a[0] if len(a) == 1 else a[0] / sp.Mul(*a[1:])

    unary = {
        "exp": sp.exp, "log": sp.log, "sqrt": sp.sqrt, "abs": sp.Abs,
        "sin": sp.sin, "cos": sp.cos, "tan": sp.tan,
        "asin": sp.asin, "acos": sp.acos, "atan": sp.atan,
        "sinh": sp.sinh, "cosh": sp.cosh, "tanh": sp.tanh,
        "floor": sp.floor, "ceiling": sp.ceiling,
    }
    ops = dict(unary)
    ops.update({
        "+": lambda *a: sp.Add(*a),
        "*": lambda *a: sp.Mul(*a),
        "-": minus,
        "/": divide,
        "pow": lambda a, b: a**b,
        "expt": lambda a, b: a**b,
        "square": lambda a: a**2,
        "sigmoid": lambda a: 1 / (1 + sp.exp(-a)),
        "min": lambda *a: sp.Min(*a),
        "max": lambda *a: sp.Max(*a),
        "atan2": lambda a, b: sp.atan2(a, b),
    })
    return ops


def to_sympy(text: str, params: Mapping[str, float] | None = None):
    """The sympy expression of a closed-form program given as s-expression text
    (``Program.sexpr()``). ``(params …)`` declarations are skipped. The last form is the
    expression, and fitted ``params`` are substituted when given."""
    import sympy as sp

    forms = [f for f in _read_sexprs(text) if not (isinstance(f, list) and f[:1] == ["params"])]
    if not forms:
        raise ValueError("the program has no expression")
    ops = _sympy_ops(sp)
    values = dict(params or {})

    def atom(tok):
        try:
            x = float(tok)
        except ValueError:
            if tok in ("#t", "#f"):
                raise ValueError("booleans have no sympy form") from None
            return sp.Float(values[tok]) if tok in values else sp.Symbol(tok)
        return sp.Integer(int(x)) if x.is_integer() and abs(x) < 2**53 else sp.Float(x)

    # Post-order walk with an explicit stack: children first, then the operator on them.
    stack, out = [(forms[-1], False)], []
    while stack:
        node, ready = stack.pop()
        if not isinstance(node, list):
            out.append(atom(node))
            continue
        if not node or isinstance(node[0], list) or node[0] not in ops:
            head = node[0] if node and not isinstance(node[0], list) else "(…)"
            raise ValueError(f"`{head}` has no sympy form (only closed-form arithmetic converts)")
        if not ready:
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(node[1:]))
            continue
        n = len(node) - 1
        args = out[len(out) - n:] if n else []
        del out[len(out) - n:]
        out.append(ops[node[0]](*args))
    return out[0]


# ---------------------------------------------------------------------------------- progress


def _progress(verbose, total=None, desc="ndvm"):
    """A callback for the extension's progress notes, and a function that closes it. With
    ``verbose=0`` there is no callback (nothing is printed). Otherwise a tqdm bar is used when
    tqdm is installed, and plain lines on stderr when it is not."""
    if not verbose:
        return None, lambda: None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        tqdm = None
    if tqdm is None:
        def plain(kind, *args):
            if kind == "line":
                print(args[0], file=sys.stderr)
            else:
                done, best, elapsed = args
                print(f"{done} calibrations, best {best}, {elapsed:.1f} s", file=sys.stderr)

        return plain, lambda: None
    bar = tqdm(total=total, desc=desc, unit="cal", leave=verbose > 1)

    def update(kind, *args):
        if kind == "line":
            bar.write(args[0])
            return
        done, best, _elapsed = args
        bar.n = done
        bar.set_postfix(best=None if best is None else f"{best:.6g}", refresh=False)
        bar.refresh()

    return update, bar.close


# ---------------------------------------------------------------------------------- calibrate


@dataclass(frozen=True)
class CalibrationResult:
    """A calibration: the best start's fitted constants and what each start did.

    ``params`` maps each fitted name to its value, in the calibrator's order: the declared
    parameters first, then the added ones. ``stop_reason`` is one of converged, max-iters,
    target-loss, time-limit, non-finite or all-starts-non-finite. ``starts`` lists each start's
    init, params, loss, grad_norm, iters, n_evals, polished and status (rows made on first use
    from ``start_table``, the same as columns: ``init`` and ``params`` of shape (starts, params),
    one array or list per other field, itself made on first use).
    """

    program: Program
    params: dict
    loss: float
    r2: float | None
    grad: dict
    grad_norm: float
    stop_reason: str
    best_start: int | None
    _starts: Any = field(repr=False, compare=False)
    n_evals: int
    n_grad_evals: int
    n_replayed: int
    wall_s: float
    choices: list
    inputs: list = field(default_factory=list)

    @classmethod
    def _from_raw(cls, program: Program, raw: dict, inputs: list) -> CalibrationResult:
        """From the extension's dict (plain floats, lists and the StartTable), filled in one
        step rather than field by field through the frozen dataclass's ``__init__``."""
        names = raw["names"]
        result = object.__new__(cls)
        result.__dict__.update(
            program=program,
            params=dict(zip(names, raw["params"])),
            loss=raw["loss"],
            r2=raw["r2"],
            grad=dict(zip(names, raw["grad"])),
            grad_norm=raw["grad_norm"],
            stop_reason=raw["stop_reason"],
            best_start=raw["best_start"],
            _starts=raw["starts"],
            n_evals=raw["n_evals"],
            n_grad_evals=raw["n_grad_evals"],
            n_replayed=raw["n_replayed"],
            wall_s=raw["wall_s"],
            choices=raw["choices"],
            inputs=inputs,
        )
        return result

    @functools.cached_property
    def start_table(self) -> dict:
        # The extension's StartTable until first use (a pickled result holds the dict itself).
        return self._starts if isinstance(self._starts, dict) else self._starts.columns()

    @property
    def starts(self) -> list:
        return _start_rows(self.start_table, list(self.params))

    def predict(self, X=None, **evaluate_options) -> np.ndarray:
        """The program at the fitted constants, one lane per row of ``X``."""
        columns = _columns(X, self.inputs or None)
        inputs = dict(columns)
        inputs.update(self.params)
        n = len(columns[0][1]) if columns else 1
        out = self.program.evaluate(inputs=inputs, lanes=n, grad=False, **evaluate_options)
        return np.asarray(out.value, dtype=np.float64)


def _columns(X, names=None) -> list:
    """``[(name, float64 1-D array)]`` from a DataFrame (its column names, in order), a mapping of
    name to array, a 2-D array (``names`` or x0, x1, …), a 1-D array (one column) or None."""
    if X is None:
        return []
    if type(X) is dict:  # the common case first: no ABC check
        return [(str(k), np.ascontiguousarray(v, dtype=np.float64).reshape(-1)) for k, v in X.items()]
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):  # pandas (or similar) data frame
        return [(str(c), np.ascontiguousarray(X[c].to_numpy(), dtype=np.float64)) for c in X.columns]
    if isinstance(X, Mapping):
        return [(str(k), np.ascontiguousarray(v, dtype=np.float64).reshape(-1)) for k, v in X.items()]
    a = np.asarray(X, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise UsageError(f"X must be 1-D or 2-D, not {a.ndim}-D")
    names = list(names) if names is not None else [f"x{j}" for j in range(a.shape[1])]
    if len(names) != a.shape[1]:
        raise UsageError(f"{len(names)} input names for {a.shape[1]} columns")
    return [(n, np.ascontiguousarray(a[:, j])) for j, n in enumerate(names)]


def _param_tuples(params) -> list:
    """``(name, kind, init, lo, hi)`` tuples. Each value may be a name only (in a list), an init
    (float), a ``(kind, init)`` pair, or a dict with kind/init/lo/hi."""
    if params is None:
        return []
    if not isinstance(params, Mapping):
        return [(str(n), None, None, None, None) for n in params]
    out = []
    for name, spec in params.items():
        if spec is None:
            out.append((str(name), None, None, None, None))
        elif isinstance(spec, (int, float)):
            out.append((str(name), None, float(spec), None, None))
        elif isinstance(spec, Mapping):
            get = spec.get
            init = None if get("init") is None else float(get("init"))
            lo = None if get("lo") is None else float(get("lo"))
            hi = None if get("hi") is None else float(get("hi"))
            out.append((str(name), get("kind"), init, lo, hi))
        else:
            kind, init = spec
            out.append((str(name), kind, None if init is None else float(init), None, None))
    return out


def _start_rows(columns: dict, names: list) -> list:
    """Each start's init, params (name → value), loss, grad_norm, iters, n_evals, polished,
    status and picks, from the columns the extension returns."""
    keys = ("loss", "grad_norm", "iters", "n_evals", "polished", "status", "picks")
    return [
        {
            "init": dict(zip(names, map(float, columns["init"][i]))),
            "params": dict(zip(names, map(float, columns["params"][i]))),
            **{k: (columns[k][i].item() if hasattr(columns[k][i], "item") else columns[k][i])
               for k in keys},
        }
        for i in range(len(columns["loss"]))
    ]


def calibrate(
    program,
    X=None,
    y=None,
    *,
    params=None,
    inputs=None,
    weights=None,
    shared: Mapping[str, Any] | None = None,
    starts: int | None = None,
    optimizer: str | None = None,
    polish: str | None = None,
    seed: int | None = None,
    max_iters: int | None = None,
    loss: str | None = None,
    dialect: str = "default",
    precision: str = "f64",
    max_work: int | None = None,
    max_memory_mb: int | None = None,
    max_depth: int | None = None,
    timeout: float | None = None,
    **calibrator,
) -> CalibrationResult:
    """Fits the program's constants to data, as ``ndvm-search calibrate`` does.

    ``X`` is a DataFrame (its column names bind the program's inputs), a mapping of name to
    column, or an array (names from ``inputs``, else x0, x1, …). ``y`` is the target; leave it
    out for ``loss="program"``, where the program returns its own loss. ``params`` may name, type
    and start the parameters, e.g. ``{"Vmax": ("positive", 10.0), "k": {"kind": "bounded",
    "lo": 0, "hi": 1}}``; the program's own ``(params …)`` are fitted too. ``shared`` binds
    numbers, vectors and matrices that are the same at every point (the Kalman filter's ``obs``).
    Other calibrator settings (``screen_iters``, ``n_polish``, ``learning_rate``,
    ``target_loss``) go through ``**calibrator``. ``timeout`` bounds the whole calibration.
    """
    program = _as_program(program)
    columns = _columns(X, inputs)
    target = None if y is None else np.ascontiguousarray(y, dtype=np.float64).reshape(-1)
    w = None if weights is None else np.ascontiguousarray(weights, dtype=np.float64).reshape(-1)
    options = dict(
        starts=starts, optimizer=optimizer, polish=polish, seed=seed, max_iters=max_iters,
        loss=loss, dialect=dialect, precision=precision, max_work=max_work,
        max_memory_mb=max_memory_mb, max_depth=max_depth, timeout=timeout, **calibrator,
    )
    raw = _ndvm.calibrate(
        program._p, columns, target, w, _values(shared), _param_tuples(params), options
    )
    return CalibrationResult._from_raw(program, raw, [name for name, _ in columns])


# ---------------------------------------------------------------------------------- search


@dataclass(frozen=True)
class SearchResult:
    """A co-search's outcome. ``summary`` is ``summary.json`` as a dict; ``best`` is its answer
    (the selection rule of the CLI); ``pareto`` the complexity/error front; ``events`` one dict per
    calibration (``events.jsonl``); ``stop`` why it stopped (``interrupted`` after Ctrl-C)."""

    summary: dict | None
    events: list
    stop: str

    @property
    def best(self) -> dict | None:
        return None if self.summary is None else self.summary.get("best")

    @property
    def pareto(self) -> list:
        return [] if self.summary is None else list(self.summary.get("pareto", []))


def _interrupted(result) -> KeyboardInterrupt:
    exc = KeyboardInterrupt(
        "interrupted: the calibrations in flight were stopped; what finished is kept"
    )
    exc.result = result
    return exc


def _run_columns(task: dict, columns, threads=1, known_events=None, verbose=0):
    """Runs the task of ``task`` (a task file's keys) on ``columns`` held in memory; returns the
    ``SearchResult`` and whether Ctrl-C stopped it."""
    budget = task.get("budget") or {}
    progress, close = _progress(verbose, total=budget.get("calibrations"), desc="ndvm search")
    try:
        columns = [(str(n), np.ascontiguousarray(c, dtype=np.float64)) for n, c in columns]
        raw = _ndvm.run_columns(json.dumps(task), columns, threads, known_events, progress)
    finally:
        close()
    summary = None if raw["summary"] is None else json.loads(raw["summary"])
    return SearchResult(summary, json.loads(raw["events"]), raw["stop"]), raw["interrupted"]


def search(
    X,
    y,
    *,
    params,
    inputs=None,
    target: str = "y",
    threads: int = 1,
    verbose: int = 1,
    **task,
) -> SearchResult:
    """The co-search on arrays held in memory: the task a file with the same keys would be
    (``tasks/README.md``), with ``X``'s columns as its inputs and ``y`` as its target, and no run
    folder. ``params`` lists the constants candidates may fit: names, or mappings as in a task
    file (``{"name": "k", "kind": "positive", "init": 1.0}``). Any other task key goes through
    ``**task`` as it is written in a file, e.g. ``proposer={"kind": "evolve"}``,
    ``budget={"seconds": 60}``, ``seed=3``. Ctrl-C stops the calibrations in flight at their
    next evaluation and raises ``KeyboardInterrupt`` at once; its ``.result`` holds what
    finished."""
    columns = _columns(X, inputs)
    y = np.ascontiguousarray(np.asarray(y, dtype=np.float64).reshape(-1))
    spec = {"name": "python", "data": {}}
    spec.update(task)
    spec["inputs"] = [name for name, _ in columns]
    spec["target"] = target
    spec["params"] = [p if isinstance(p, Mapping) else {"name": str(p)} for p in params]
    result, interrupted = _run_columns(spec, columns + [(target, y)], threads, None, verbose)
    if interrupted:
        raise _interrupted(result)
    return result


@dataclass(frozen=True)
class RunResult:
    """A task file's run: its folder (``task.yaml``, ``events.jsonl``, ``summary.json``, plots),
    the summary's markdown and JSON, the events and why it stopped."""

    dir: Path
    markdown: str
    summary: dict
    events: list
    stop: str


def run_task(
    path,
    *,
    out=None,
    threads: int | None = None,
    budget_seconds: float | None = None,
    budget_calibrations: int | None = None,
    verbose: int = 1,
) -> RunResult:
    """Runs a task file exactly as ``ndvm-search TASK.yaml`` does (same run folder, same summary).
    Progress lines are shown unless ``verbose=0``. Ctrl-C stops the calibrations in flight (left
    unfinished, for ``ndvm-search run --resume``): the folder is complete, and
    ``KeyboardInterrupt.result`` holds the ``RunResult``."""
    progress, close = _progress(verbose, desc=Path(path).stem)
    try:
        raw = _ndvm.run_task(
            str(path), None if out is None else str(out), threads, budget_seconds,
            budget_calibrations, progress,
        )
    finally:
        close()
    folder = Path(raw["dir"])
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    result = RunResult(folder, raw["markdown"], summary, json.loads(raw["events"]), raw["stop"])
    if raw["interrupted"]:
        raise _interrupted(result)
    return result


def __getattr__(name):
    # scikit-learn is an optional extra: the regressor is imported on first use.
    if name == "NdvmRegressor":
        from .regressor import NdvmRegressor

        return NdvmRegressor
    raise AttributeError(f"module 'ndvm' has no attribute {name!r}")

