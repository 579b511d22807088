"""``NdvmRegressor``: the co-search as a scikit-learn regressor.

Follows the scikit-learn conventions of 1.6 and later (1.9.1 is current):

- ``__init__`` stores its arguments unchanged and validates nothing.
- ``fit`` and ``predict`` call ``sklearn.utils.validation.validate_data``, which sets and checks
  ``n_features_in_`` and ``feature_names_in_``.
- Fitted attributes end in ``_``.
- Tags come from ``__sklearn_tags__``.
- Mixins come before ``BaseEstimator`` (scikit-learn's ``check_mixin_order``).

The search itself is ``ndvm._ndvm.run_columns``. It is the task a file with the same keys would
be, with X and y held in memory, run by the same engine and selection rule as
``ndvm-search TASK.yaml``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from . import Program, _interrupted, _run_columns, calibrate
from .errors import NdvmError, TaskError

__all__ = ["NdvmRegressor"]

# Fewer rows than this is an error (validate_data: "Found array with 1 sample(s) … a minimum of 5
# is required"). With fewer there is no validation part to score on.
_MIN_SAMPLES = 5

# A variable name that both front ends read (DataFrame column names are used when they are one).
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class NdvmRegressor(RegressorMixin, BaseEstimator):
    """Symbolic regression by NDVM's program co-search.

    Parameters
    ----------
    frontend : {"scheme", "infix"}, default="scheme"
        The notation of the programs (``equations_``, ``best_``).
    proposer : {"evolve", "grammar"}, default="evolve"
        Where candidates come from (the task's ``proposer.kind``).
    operators, binary_operators, factors : list of str, default=None
        Unary operators (``exp``, ``log``, ``sin``, …), two-argument ones (``+ - * / pow``) and
        named factor shapes (``saturating``, ``bell``, …). None lets the search choose (the task
        defaults, chosen from the data and printed in ``summary_["defaults"]``).
    max_terms, max_depth, max_size, population, islands, batch : int, default=None
        Shape of the program grammar and of the evolving population; None keeps the defaults.
    constants : int or list, default=10
        The fitted constants candidates may use: that many (named c0, c1, …), or these names,
        or task-file entries (``{"name": "k", "kind": "positive", "init": 1.0}``).
    starts, optimizer, polish : default=None
        Calibrator settings (starts per candidate; ``portfolio``, ``adam``, ``lbfgs`` or ``lm``;
        ``lbfgs`` or ``lm``). None keeps the search's quick calibrator.
    selection : {"cross-validated", "simplest-equivalent", "lowest-error"}, default=None
        How the answer is chosen among the calibrated models (None: the task default,
        ``cross-validated``).
    split : (train, validation) or None, default=None
        Row counts (>= 1) or fractions (< 1) of the seeded train/validation split of the rows
        given to ``fit``. None means 70 % / 30 %.
    threshold, stop_on_success : default None, False
        Validation R² that counts as success, and whether the search stops at the first success.
    time_budget : float or None, default=60.0
        Seconds for the search. If the budget runs out, the result depends on the machine's
        speed; use ``max_calibrations`` for reproducible fits.
    max_calibrations : int or None, default=None
        Calibrations for the search.
    calibration_seconds : float or None, default=None
        Wall-clock limit of one candidate's calibration (the task's ``limits.seconds``).
    n_jobs : int or None, default=None
        Calibration threads (None: 1, -1: every core). The result is the same for any value.
    random_state : int, RandomState or None, default=None
        The task's master seed (split, proposer, calibrator starts). None means seed 0, so an
        unseeded fit is still reproducible.
    warm_start : bool, default=False
        When True and ``fit`` gets the same data and settings again, the search continues the same
        candidate stream: earlier calibrations are reused, as ``ndvm-search run --resume`` does.
        Raise ``max_calibrations`` or ``time_budget`` to search further. Otherwise fit starts
        afresh.
    verbose : int, default=0
        0: silent. 1: a progress bar (tqdm when installed). 2: the bar is kept afterwards.

    Attributes
    ----------
    best_ : dict
        The answer: ``program`` (text), ``frontend``, ``params`` (fitted constants),
        ``complexity``, ``train_loss``, ``validation_r2``, ``validation_nmse``.
    equations_ : pandas.DataFrame or list of dict
        The Pareto front (complexity against error): program, complexity, error, losses,
        fitted constants and sympy form (None when sympy is missing or the program has no
        closed form).
    pareto_front_ : list of dict
        The summary's Pareto points, each with its fitted ``params``.
    events_ : list of dict
        Every calibration (one line of ``events.jsonl`` each).
    summary_ : dict
        ``summary.json`` of the run.
    stop_ : str
        Why the search stopped: ``budget-calibrations``, ``budget-seconds``, ``success``,
        ``exhausted``, ``interrupted`` or ``constant-target``.
    input_names_, constant_names_ : list of str
        The variable names X's columns and the constants have in the programs.
    n_features_in_, feature_names_in_
        Set by ``validate_data``.

    Ctrl-C during ``fit`` stops the search, the calibrations in flight included (at their next
    evaluation). The estimator then holds what finished, and ``KeyboardInterrupt`` is raised.
    """

    def __init__(
        self,
        *,
        frontend="scheme",
        proposer="evolve",
        operators=None,
        binary_operators=None,
        factors=None,
        max_terms=None,
        max_depth=None,
        max_size=None,
        population=None,
        islands=None,
        batch=None,
        constants=10,
        starts=None,
        optimizer=None,
        polish=None,
        selection=None,
        split=None,
        threshold=None,
        stop_on_success=False,
        time_budget=60.0,
        max_calibrations=None,
        calibration_seconds=None,
        n_jobs=None,
        random_state=None,
        warm_start=False,
        verbose=0,
    ):
        self.frontend = frontend
        self.proposer = proposer
        self.operators = operators
        self.binary_operators = binary_operators
        self.factors = factors
        self.max_terms = max_terms
        self.max_depth = max_depth
        self.max_size = max_size
        self.population = population
        self.islands = islands
        self.batch = batch
        self.constants = constants
        self.starts = starts
        self.optimizer = optimizer
        self.polish = polish
        self.selection = selection
        self.split = split
        self.threshold = threshold
        self.stop_on_success = stop_on_success
        self.time_budget = time_budget
        self.max_calibrations = max_calibrations
        self.calibration_seconds = calibration_seconds
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.warm_start = warm_start
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.non_deterministic = False
        return tags

    # ------------------------------------------------------------------ fit

    def fit(self, X, y):
        """Searches for the program and constants that best predict ``y`` from ``X``."""
        X, y = validate_data(
            self, X, y, y_numeric=True, dtype=np.float64, ensure_min_samples=_MIN_SAMPLES
        )
        if self.time_budget is None and self.max_calibrations is None:
            raise ValueError(
                "give time_budget or max_calibrations: an evolving search never runs out of "
                "candidates"
            )
        names = self._input_names(X.shape[1])
        constants = self._constants(names)
        self.input_names_ = names
        self.constant_names_ = [c.get("name") for c in constants]
        columns = [(n, np.ascontiguousarray(X[:, j])) for j, n in enumerate(names)]
        if np.ptp(y) == 0:
            return self._fit_constant(columns, y)
        target = "y" if "y" not in names else "_target"
        task = self._task(names, target, constants)
        fingerprint = _fingerprint(X, y, task)
        known = None
        if self.warm_start and getattr(self, "fingerprint_", None) == fingerprint:
            known = json.dumps(self.events_)
        result, interrupted = self._search(task, columns + [(target, y)], known)
        self._store(result, fingerprint)
        if interrupted:
            raise _interrupted(result)
        if self.best_ is None:
            raise NdvmError(
                f"no candidate could be calibrated and scored (stop: {result.stop}); see events_"
            )
        return self

    def _search(self, task, columns, known):
        threads = self._threads()
        try:
            return _run_columns(task, columns, threads, known, self.verbose)
        except TaskError as e:
            # A tiny or coarse target can leave a validation part of under 2 rows, or one whose
            # target is constant: the task layer refuses R² on it and offers ranking by the
            # training loss instead, which the estimator takes.
            if "validation part" not in str(e) or task.get("success", {}).get("metric") == "loss":
                raise
            success = {k: v for k, v in task.get("success", {}).items() if k != "threshold"}
            fallback = {**task, "success": {**success, "metric": "loss"}}
            return _run_columns(fallback, columns, threads, known, self.verbose)

    def _fit_constant(self, columns, y):
        """A constant target: no score is defined (the task refuses it), and the answer is the
        constant itself, fitted by the calibrator on the one-constant program."""
        c = self.constant_names_[0]
        fit = calibrate(Program(c, self.frontend), dict(columns), y, params=[c], seed=self._seed())
        self.best_ = {
            "program": c,
            "frontend": self.frontend,
            "params": dict(fit.params),
            "complexity": 1,
            "train_loss": fit.loss,
            "validation_r2": None,
            "validation_nmse": None,
        }
        self.events_, self.summary_, self.stop_ = [], None, "constant-target"
        self.fingerprint_ = None
        self.pareto_front_ = [dict(self.best_, src=c, error=fit.loss)]
        self.equations_ = _table(self.pareto_front_)
        return self

    def _store(self, result, fingerprint):
        self.events_ = result.events
        self.summary_ = result.summary
        self.stop_ = result.stop
        self.fingerprint_ = fingerprint
        by_id = {e["id"]: e for e in result.events}
        best = result.best
        self.best_ = None if best is None else {
            "program": best["src"],
            "frontend": best.get("frontend", self.frontend),
            "params": dict(best["params"]),
            "complexity": best["complexity"],
            "train_loss": best.get("train_loss"),
            "validation_r2": best.get("validation_r2"),
            "validation_nmse": best.get("validation_nmse"),
        }
        front = []
        for point in result.pareto:
            event = by_id.get(point["id"], {})
            front.append(dict(
                point,
                frontend=event.get("frontend", self.frontend),
                params=dict(event.get("params", {})),
                train_loss=event.get("train_loss"),
                validation_r2=event.get("validation_r2"),
            ))
        self.pareto_front_ = front
        self.equations_ = _table(front)

    # ------------------------------------------------------------------ settings

    def _input_names(self, n_features):
        given = getattr(self, "feature_names_in_", None)
        if given is not None:
            names = [str(n) for n in given]
            if all(_NAME.match(n) for n in names) and len(set(names)) == len(names):
                return names
        return [f"x{j}" for j in range(n_features)]

    def _constants(self, inputs):
        """The task's ``params`` entries: ``constants`` of them named c0, c1, …, or the names
        (or task-file mappings such as ``{"name": "k", "kind": "positive"}``) given."""
        if isinstance(self.constants, (int, np.integer)):
            if self.constants < 1:
                raise ValueError(f"constants must be at least 1, not {self.constants}")
            entries = [{"name": f"c{i}"} for i in range(int(self.constants))]
        else:
            entries = [dict(c) if isinstance(c, Mapping) else {"name": str(c)}
                       for c in self.constants]
        clash = sorted({e.get("name") for e in entries} & set(inputs))
        if clash:
            raise ValueError(f"constant names {clash} are also input names; rename one")
        return entries

    def _seed(self):
        rs = self.random_state
        if rs is None:
            return 0
        if isinstance(rs, (int, np.integer)):
            return int(rs)
        return int(check_random_state(rs).randint(0, 2**31 - 1))

    def _threads(self):
        n = self.n_jobs
        cores = os.cpu_count() or 1
        if n is None:
            return 1
        if n < 0:
            return max(1, cores + 1 + n)
        return max(1, int(n))

    def _task(self, inputs, target, constants):
        """The task file's keys of this estimator's settings (a key left out keeps the task
        default, exactly as in a file)."""
        proposer = {"kind": self.proposer}
        lists = (("operators", self.operators), ("binary", self.binary_operators),
                 ("factors", self.factors))
        proposer.update({k: [str(x) for x in v] for k, v in lists if v is not None})
        sizes = (("max_terms", self.max_terms), ("max_depth", self.max_depth),
                 ("max_size", self.max_size), ("population", self.population),
                 ("islands", self.islands), ("batch", self.batch))
        proposer.update({k: int(v) for k, v in sizes if v is not None})
        task = {
            "name": "ndvm-regressor",
            "seed": self._seed(),
            "data": {},
            "inputs": list(inputs),
            "target": target,
            "params": constants,
            "proposer": proposer,
        }
        if self.frontend is not None:
            task["frontend"] = self.frontend
        calibrator = {k: v for k, v in (("starts", self.starts), ("optimizer", self.optimizer),
                                        ("polish_method", self.polish)) if v is not None}
        if calibrator:
            task["calibrator"] = calibrator
        budget = {k: v for k, v in (("seconds", self.time_budget),
                                    ("calibrations", self.max_calibrations)) if v is not None}
        task["budget"] = budget
        if self.threshold is not None or self.stop_on_success:
            success = {"stop": bool(self.stop_on_success)}
            if self.threshold is not None:
                success["threshold"] = float(self.threshold)
            task["success"] = success
        if self.selection is not None:
            task["selection"] = self.selection
        if self.calibration_seconds is not None:
            task["limits"] = {"seconds": float(self.calibration_seconds)}
        if self.split is not None:
            train, validation = self.split
            task["split"] = {"train": float(train), "validation": float(validation)}
        return task

    # ------------------------------------------------------------------ predict

    def predict(self, X):
        """The answer's predictions: its program at its fitted constants, one lane per row."""
        check_is_fitted(self, "best_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        inputs = {n: np.ascontiguousarray(X[:, j]) for j, n in enumerate(self.input_names_)}
        inputs.update({k: float(v) for k, v in self.best_["params"].items()})
        program = Program(self.best_["program"], self.best_["frontend"])
        out = program.evaluate(inputs=inputs, lanes=X.shape[0], grad=False)
        return np.asarray(out.value, dtype=np.float64).reshape(X.shape[0])

    def sympy(self, index=None):
        """The answer (or row ``index`` of ``equations_``) as a sympy expression."""
        check_is_fitted(self, "best_")
        row = self.best_ if index is None else self.pareto_front_[index]
        src = row.get("program", row.get("src"))
        return Program(src, row["frontend"]).sympy(row["params"])

    def latex(self, index=None):
        import sympy

        return sympy.latex(self.sympy(index))


def _fingerprint(X, y, task):
    """A digest of the data and of every setting but the budget: a warm start continues only
    the same search."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(X).tobytes())
    h.update(np.ascontiguousarray(y).tobytes())
    kept = {k: v for k, v in task.items() if k != "budget"}
    h.update(json.dumps(kept, sort_keys=True, default=str).encode())
    return h.hexdigest()


def _sympy_text(row):
    try:
        src = row.get("program", row.get("src"))
        return str(Program(src, row["frontend"]).sympy(row["params"]))
    except (ImportError, ValueError, NdvmError):
        return None


def _table(front):
    rows = [
        {
            "program": p.get("program", p.get("src")),
            "complexity": p.get("complexity"),
            "error": p.get("error"),
            "train_loss": p.get("train_loss"),
            "validation_r2": p.get("validation_r2"),
            "params": p.get("params"),
            "sympy": _sympy_text(p),
        }
        for p in front
    ]
    try:
        import pandas as pd
    except ImportError:
        return rows
    return pd.DataFrame(rows)
