"""``NdvmRegressor`` as a scikit-learn estimator.

What this file checks:

- scikit-learn's own checks (``parametrize_with_checks``), on small budgets;
- pickling;
- the same result at any ``n_jobs``;
- warm starts;
- Ctrl-C during ``fit`` (``KeyboardInterrupt`` within a second, partial results kept), also
  with a long calibration in flight;
- other threads running meanwhile;
- the CLI's winner on the symreg task.

Budgets are counted in calibrations, never seconds, so every fit is deterministic. Issue 31 asks
for all of scikit-learn's checks together to take under 2 minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from sklearn.utils.estimator_checks import parametrize_with_checks

import ndvm
from ndvm import NdvmRegressor

ROOT = Path(__file__).resolve().parents[2]

# Calibrations per fit in scikit-learn's checks: enough for the engine's whole path (proposer,
# calibration, scoring, selection), small enough for ~100 fits in the time limit. To be tuned on
# the 2-core machine (DESIGN.md section 8, item 6).
CHECK_BUDGET = 24


def _small(**kw):
    args = dict(time_budget=None, max_calibrations=CHECK_BUDGET, random_state=0, verbose=0)
    args.update(kw)
    return NdvmRegressor(**args)


def _expected_failed_checks(estimator):
    # Every other check passes. This one is skipped by scikit-learn itself unless the estimator
    # declares array-API support (it raises SkipTest when SCIPY_ARRAY_API is unset): NDVM reads
    # numpy float64 arrays only, so it is named here with its reason instead of skipping silently.
    return {
        "check_array_api_input": "NDVM converts its inputs to numpy float64; the array API "
        "(torch, cupy, array-api-strict inputs) is not supported",
    }


@parametrize_with_checks([_small()], expected_failed_checks=_expected_failed_checks)
def test_scikit_learn_checks(estimator, check):
    check(estimator)


def _data(n=60, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.1, 3.0, size=(n, 2))
    y = 2.0 * np.exp(-0.7 * X[:, 0]) + 0.5 * X[:, 1]
    return X, y


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler for the test. A process started with SIGINT ignored (a
    background job of a shell without job control, `nohup`) keeps it ignored, so a test's
    SIGINT would never arrive and its fit would run on."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _without_times(events):
    return [{k: v for k, v in e.items() if k not in ("wall_ms", "finished_s")} for e in events]


def test_fitted_attributes():
    X, y = _data()
    est = _small(max_calibrations=48).fit(X, y)
    assert set(est.best_) >= {"program", "frontend", "params", "complexity", "validation_r2"}
    assert est.input_names_ == ["x0", "x1"]
    assert est.n_features_in_ == 2
    assert len(est.pareto_front_) >= 1 and all("params" in p for p in est.pareto_front_)
    assert len(est.events_) == 48 or est.stop_ != "budget-calibrations"
    assert est.predict(X).shape == (60,)
    assert np.isfinite(est.score(X, y))
    table = est.equations_
    columns = table.columns if hasattr(table, "columns") else table[0].keys()
    assert {"program", "complexity", "params", "sympy"} <= set(columns)


def test_dataframe_columns_name_the_inputs():
    import pandas as pd
    X, y = _data()
    frame = pd.DataFrame({"t": X[:, 0], "u": X[:, 1]})
    est = _small().fit(frame, y)
    assert est.input_names_ == ["t", "u"]
    assert list(est.feature_names_in_) == ["t", "u"]
    assert "x0" not in est.best_["program"]


def test_a_fitted_estimator_pickles_with_identical_predictions():
    X, y = _data()
    est = _small().fit(X, y)
    again = pickle.loads(pickle.dumps(est))
    assert again.predict(X).tobytes() == est.predict(X).tobytes()
    assert again.best_ == est.best_


def test_the_result_does_not_depend_on_n_jobs():
    X, y = _data()
    one = _small(n_jobs=1).fit(X, y)
    two = _small(n_jobs=2).fit(X, y)
    assert _without_times(one.events_) == _without_times(two.events_)
    assert one.best_ == two.best_
    assert one.predict(X).tobytes() == two.predict(X).tobytes()


def test_a_warm_start_continues_the_same_search():
    X, y = _data()
    est = _small(max_calibrations=16, warm_start=True).fit(X, y)
    first = _without_times(est.events_)
    est.set_params(max_calibrations=32)
    est.fit(X, y)
    cold = _small(max_calibrations=32).fit(X, y)
    assert _without_times(est.events_)[:16] == first
    assert _without_times(est.events_) == _without_times(cold.events_)
    assert est.best_ == cold.best_


def test_a_constant_target_predicts_the_constant():
    X, _ = _data()
    est = _small().fit(X, np.full(len(X), 3.25))
    assert est.stop_ == "constant-target"
    assert np.allclose(est.predict(X), 3.25)


def test_ctrl_c_during_fit_raises_within_a_second_and_keeps_what_finished(python_sigint):
    X, y = _data(n=400)
    # The budget only bounds a failure: the SIGINT comes after 2 s.
    est = NdvmRegressor(time_budget=120.0, max_calibrations=10**6, random_state=0)
    sent = []

    def interrupt():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(2.0, interrupt)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt) as e:
            est.fit(X, y)
    finally:
        timer.cancel()
    raised = time.monotonic()
    assert sent and raised - sent[0] < 1.0, f"took {raised - sent[0]:.2f} s after SIGINT"
    assert est.stop_ == "interrupted"
    assert len(est.events_) > 0
    assert e.value.result.stop == "interrupted"


def test_ctrl_c_cuts_a_long_calibration_in_flight(tmp_path, python_sigint):
    # Candidate 0 fits at once; candidate 1 walks a 400 000-step loop through its parameter, so
    # its first evaluation alone takes seconds (6 s here uncut, one start to stay within the
    # memory limit): Ctrl-C must cut it.
    slow = "(loop ((i 0) (s 0.0)) (if (= i 400000) (+ s (* a x)) (recur (+ i 1) (+ s (* a 1e-9)))))"
    cache = tmp_path / "cache.jsonl"
    cache.write_text("".join(json.dumps({"src": s}) + "\n" for s in ["(* a x)", slow, "(+ a x)"]))
    X = np.linspace(0.0, 3.5, 8).reshape(-1, 1)
    y = 3.0 * X[:, 0]
    sent = []

    def interrupt():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(1.0, interrupt)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt) as e:
            ndvm.search(
                X, y, params=["a"], inputs=["x"], verbose=0,
                proposer={"cache": str(cache), "batch": 1}, calibrator={"starts": 1},
            )
    finally:
        timer.cancel()
    raised = time.monotonic()
    assert sent, f"the search ended after {raised - started:.2f} s, before the SIGINT"
    assert raised - sent[0] < 1.0, f"took {raised - sent[0]:.2f} s after SIGINT"
    result = e.value.result
    assert result.stop == "interrupted"
    assert [ev["index"] for ev in result.events] == [0]
    assert abs(result.events[0]["params"]["a"] - 3.0) < 1e-6


def test_other_threads_run_while_fit_works():
    X, y = _data(n=200)
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    t = threading.Thread(target=tick)
    t.start()
    started = time.monotonic()
    try:
        _small(max_calibrations=64).fit(X, y)
    finally:
        stop.set()
        t.join()
    elapsed = time.monotonic() - started
    # The fit waits detached from the interpreter; the ticking thread gets ~100 turns a second.
    assert len(ticks) > 0.5 * 100 * elapsed


def test_symreg_gives_the_clis_winner(tmp_path):
    # The CLI's run of tasks/symreg.yaml, and the regressor with the same keys on the data that
    # run generated (data.csv: x, y, split, in generation order).
    import pandas as pd
    run = ndvm.run_task(ROOT / "tasks" / "symreg.yaml", out=tmp_path / "symreg", verbose=0)
    data = pd.read_csv(run.dir / "data.csv")
    est = NdvmRegressor(
        proposer="grammar",
        operators=["exp", "sin", "cos", "log", "sqrt"],
        max_terms=2,
        batch=8,
        constants=[{"name": n, "init": 0.5} for n in "abcdef"],
        starts=32,
        split=(44, 10),
        threshold=0.99,
        stop_on_success=True,
        time_budget=300.0,
        max_calibrations=2000,
        random_state=7,
    ).fit(data[["x"]], data["y"])
    assert est.best_["program"] == run.summary["best"]["src"]
    assert est.best_["params"] == run.summary["best"]["params"]


def test_search_takes_the_keys_of_a_task_file_and_names_a_wrong_one():
    X, y = _data()
    r = ndvm.search(X, y, params=["c0", "c1", "c2"], budget={"calibrations": 16}, verbose=0)
    assert len(r.events) == 16
    assert r.best is not None and r.best["src"] == r.summary["best"]["src"]
    assert r.stop == "budget-calibrations"
    with pytest.raises(ndvm.TaskError, match="budgett") as e:
        ndvm.search(X, y, params=["c0"], budgett={"calibrations": 16}, verbose=0)
    assert e.value.line is not None
