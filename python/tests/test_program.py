"""The runtime and the calibrator from Python.

What this file checks:

- bit-for-bit agreement with the README's examples, and with ``ndvm-search`` when a built
  binary is there;
- the PyTorch oracle for the Kalman filter;
- Kalman calibration parity with a task run;
- errors carrying their stable code and line:col;
- hostile programs ending in ``NdvmError`` subclasses, and a Rust panic in ``InternalError``;
- other Python threads running while NDVM works;
- contiguous arrays lent to the evaluator (read in place) giving the same bits as copies.

Reference values are the README's, printed by the CLI in the shortest form that reads back to the
same float, so ``==`` on floats is intended.
"""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import ndvm

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ROOT / "frontends" / "tests" / "data" / "hostile"


def _cli():
    """The built ``ndvm-search`` binary (``cargo build -p ndvm-search``; ``.ci/run`` runs the
    cargo tests first, which build it). Its absence fails the parity tests loudly."""
    for profile in ("debug", "release"):
        path = ROOT / "target" / profile / "ndvm-search"
        if path.exists():
            return path
    found = shutil.which("ndvm-search")
    if found is None:
        pytest.fail("no ndvm-search binary to compare with: run `cargo build -p ndvm-search`")
    return Path(found)


def _csv(rel):
    return np.loadtxt(ROOT / rel, delimiter=",", skiprows=1, ndmin=2)


# ----------------------------------------------------------------------------- README examples


def test_readme_five_line_example():
    p = ndvm.Program("(* a (exp (- (* k t))))")
    r = p.evaluate(params={"a": 2.0, "k": np.array([0.1, 0.5, 1.0])}, inputs={"t": 1.0})
    assert r.value.shape == (3,)
    assert r.grads["k"][0] == -1.809674836071919


def test_decay_lanes_and_gradients_equal_the_readme():
    p = ndvm.Program.from_file(ROOT / "examples" / "decay.scm")
    r = p.evaluate(params={"a": 2.0, "k": [0.1, 0.5, 1.0]}, inputs={"t": 1.0}, grad=True)
    assert r.value.tolist() == [1.809674836071919, 1.2130613194252668, 0.7357588823428847]
    assert r.grads["a"].tolist() == [0.9048374180359595, 0.6065306597126334, 0.36787944117144233]
    assert r.grads["k"].tolist() == [-1.809674836071919, -1.2130613194252668, -0.7357588823428847]
    assert list(r.grads) == ["a", "k"]  # binding order
    assert r.faults.tolist() == [False, False, False]


def test_a_matrix_input_equals_the_readme():
    data = _csv("examples/line.csv")
    p = ndvm.Program.from_file(ROOT / "examples" / "line.scm")
    r = p.evaluate(params={"a": 2.0, "b": 1.0}, inputs={"data": data})
    assert r.value.tolist() == [0.01999999999999995]
    assert r.grads["a"].tolist() == [-0.1999999999999984]
    assert r.grads["b"].tolist() == [8.881784197001252e-16]


def test_repeated_calls_replay_and_equal_a_fresh_program():
    src = (ROOT / "examples" / "decay.scm").read_text()
    warm = ndvm.Program(src)
    for k in (0.1, 0.2, 0.3):
        warm.evaluate(params={"a": 2.0, "k": k}, inputs={"t": 1.0})
    again = warm.evaluate(params={"a": 2.0, "k": 0.7}, inputs={"t": 1.0})
    fresh = ndvm.Program(src).evaluate(params={"a": 2.0, "k": 0.7}, inputs={"t": 1.0})
    assert again.value.tobytes() == fresh.value.tobytes()
    assert again.grads["k"].tobytes() == fresh.grads["k"].tobytes()


def test_contiguous_arrays_are_read_in_place_and_equal_copies():
    # A C-contiguous float64 array of several values is lent to the evaluator (no copy; the
    # wrapper makes other layouts and dtypes contiguous float64 first, and the extension copies
    # any array it cannot lend). Lent arrays give the bits of independent copies on the walk and
    # the replays, and a lent array changed in place between calls is seen (a replay compares).
    src = "(if (< x 0.5) (* a (exp (* k x))) (/ a (+ k x)))"
    x = np.linspace(0.0, 1.0, 201)
    k = np.linspace(0.5, 2.0, 201)
    params, inputs = {"a": 2.0, "k": k}, {"x": x}
    assert ndvm._ndvm._lent_for_tests(params, inputs) == ["k", "x"]
    strided = np.linspace(0.0, 1.0, 402)[::2]  # not contiguous: copied
    assert ndvm._ndvm._lent_for_tests(None, {"x": strided, "t": np.array([3.0])}) == []
    m, v = np.eye(3), np.arange(4.0)
    assert ndvm._ndvm._lent_for_tests(None, {"m": m, "n": m.T}, {"v": v, "w": v[::2]}) == ["v", "m"]
    lent, copied = ndvm.Program(src), ndvm.Program(src)
    for step in range(4):
        if step == 2:
            x *= 0.75  # in place: the same array object, new values
            k += 0.125
        got = lent.evaluate(params=params, inputs=inputs)
        want = copied.evaluate(params={"a": 2.0, "k": k.copy()}, inputs={"x": x.copy()})
        assert got.value.tobytes() == want.value.tobytes(), step
        assert got.grads["k"].tobytes() == want.grads["k"].tobytes(), step
        assert got.grads["a"].tobytes() == want.grads["a"].tobytes(), step
    fresh = ndvm.Program(src).evaluate(params={"a": 2.0, "k": list(k)}, inputs={"x": list(x)})
    assert got.value.tobytes() == fresh.value.tobytes()
    # Matrices and vectors (shared by every lane) are lent too; a change in place is seen.
    shared = ndvm.Program("(+ (trace m) (* a (vsum v)))")
    m, v = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1.0, 2.0, 3.0])
    first = shared.evaluate(params={"a": 2.0}, inputs={"m": m}, vectors={"v": v})
    m[1, 1], v[0] = 10.0, 0.0
    second = shared.evaluate(params={"a": 2.0}, inputs={"m": m}, vectors={"v": v})
    assert (first.value[0], second.value[0]) == (17.0, 21.0)
    assert (first.grads["a"][0], second.grads["a"][0]) == (6.0, 5.0)


def test_decay_equals_the_cli_bit_for_bit():
    out = subprocess.run(
        [str(_cli()), "eval", "examples/decay.scm", "--bind", "a=2", "--bind", "k=0.1,0.5,1",
         "--input", "t=1", "--grad", "--json"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    cli = json.loads(out)
    p = ndvm.Program.from_file(ROOT / "examples" / "decay.scm")
    r = p.evaluate(params={"a": 2.0, "k": [0.1, 0.5, 1.0]}, inputs={"t": 1.0})
    assert r.value.tolist() == cli["value"]
    assert {k: v.tolist() for k, v in r.grads.items()} == cli["grads"]


# ----------------------------------------------------------------------------- Kalman


def _kalman_oracle():
    text = (ROOT / "testdata" / "seed-data" / "oracle_refs.json").read_text()
    refs = json.loads(text.replace("Infinity", "null"))  # one bare Infinity token in the file
    return next(p for p in refs["programs"] if p["name"] == "kalman2d_T80")


def test_kalman_matches_the_pytorch_oracle():
    # The artifact's tolerances (search/tests/cli_eval.rs): value atol 1e-2 / rtol 2e-3,
    # gradients atol 5 / rtol 2e-2.
    k = _kalman_oracle()
    m = k["matrix"]
    obs = np.asarray(m["data"], dtype=np.float64).reshape(-1, m["cols"])
    r = ndvm.Program(k["src"]).evaluate(
        params=k["scalars"], inputs={m["name"]: obs}, dialect="reference"
    )
    assert np.isclose(r.value[0], k["oracle_result"], atol=1e-2, rtol=2e-3)
    for name in ("q", "r"):
        assert np.isclose(r.grads[name][0], k["grads"][name], atol=5, rtol=2e-2)


def test_kalman_infix_equals_the_cli_bit_for_bit():
    out = subprocess.run(
        [str(_cli()), "eval", "examples/kalman.infix", "--data", "obs=tasks/data/kalman-obs.csv",
         "--bind", "q=0.05", "--bind", "r=0.1", "--grad", "--json"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    cli = json.loads(out)
    p = ndvm.Program.from_file(ROOT / "examples" / "kalman.infix")
    r = p.evaluate(params={"q": 0.05, "r": 0.1}, inputs={"obs": _csv("tasks/data/kalman-obs.csv")})
    assert r.value[0] == cli["value"]
    assert {k: float(v[0]) for k, v in r.grads.items()} == cli["grads"]


def test_kalman_calibration_equals_the_task_runs(tmp_path):
    # tasks/kalman.yaml calibrates its first cache candidate with 8 starts, seed 5, the
    # program-loss and the shared matrix `obs`: calibrate() must give the same constants.
    run = ndvm.run_task(ROOT / "tasks" / "kalman.yaml", out=tmp_path / "run",
                        budget_calibrations=1, verbose=0)
    first = run.events[0]
    fit = ndvm.calibrate(
        ndvm.Program(first["src"], first["frontend"]),
        shared={"obs": _csv("tasks/data/kalman-obs.csv")},
        loss="program",
        params={"q": ("positive", 0.1), "r": ("positive", 0.1)},
        starts=8,
        seed=5,
        timeout=60.0,
    )
    assert fit.params == first["params"]
    assert fit.loss == first["train_loss"]


# ----------------------------------------------------------------------------- calibrate


@pytest.mark.parametrize("path", ["examples/mm.scm", "examples/mm.infix"])
def test_michaelis_menten_fit_equals_the_readme(path):
    table = _csv("examples/rates.csv")
    fit = ndvm.calibrate(ndvm.Program.from_file(ROOT / path), {"S": table[:, 0]}, table[:, 1])
    assert fit.params == {"Vmax": 9.999944586152985, "Km": 2.5000093683074076}
    assert fit.loss == 4.658053785805334e-10
    assert fit.r2 == 0.9999999999248549
    assert fit.grad_norm == 1.2022423938469368e-13
    assert fit.stop_reason == "converged"
    assert (fit.n_evals, fit.n_grad_evals, fit.n_replayed) == (3241, 3240, 3208)
    assert (len(fit.starts), fit.best_start) == (32, 18)
    best = fit.starts[fit.best_start]
    assert best["params"] == fit.params and best["loss"] == fit.loss
    assert best["status"] == "Converged" and isinstance(best["iters"], int)
    assert np.allclose(fit.predict({"S": table[:, 0]}), table[:, 1], rtol=1e-3)
    # The start table stays in Rust until asked for; a pickled result carries it as columns.
    again = pickle.loads(pickle.dumps(fit))
    assert again.starts == fit.starts and again.params == fit.params
    assert again.start_table["loss"].tobytes() == fit.start_table["loss"].tobytes()


def test_a_dataframe_binds_inputs_by_column_name():
    import pandas as pd
    table = _csv("examples/rates.csv")
    frame = pd.DataFrame({"S": table[:, 0]})
    fit = ndvm.calibrate(ndvm.Program.from_file(ROOT / "examples" / "mm.scm"), frame, table[:, 1])
    assert fit.params["Vmax"] == 9.999944586152985


def test_calibration_errors_are_classified():
    p = ndvm.Program("(* a x)")
    with pytest.raises(ndvm.CalibrationError) as e:
        ndvm.calibrate(p, {"x": [1.0, 2.0]}, [1.0, 2.0])  # nothing to fit
    assert e.value.kind == "no-parameters"
    with pytest.raises(ndvm.CalibrationError) as e:
        ndvm.calibrate(p, {"x": [1.0, 2.0]}, [1.0, 2.0], params=["a"], starts=0)
    assert e.value.kind == "config"


# ----------------------------------------------------------------------------- errors


def test_an_unbound_variable_has_its_code_and_place():
    p = ndvm.Program("(+ a\n   y)")
    with pytest.raises(ndvm.EvalError) as e:
        p.evaluate(params={"a": 1.0})
    err = e.value
    assert (err.code, err.kind, err.line, err.col) == ("E001", "unbound", 2, 4)
    assert err.rendered.startswith("<program>:2:4: error[E001]: unbound variable")
    assert pickle.loads(pickle.dumps(err)).code == "E001"


def test_a_parse_error_has_its_code_and_place():
    with pytest.raises(ndvm.ParseError) as e:
        ndvm.Program("(f 1.2.3)")
    assert (e.value.code, e.value.line, e.value.col) == ("P003", 1, 4)
    assert isinstance(e.value, ValueError)


def test_limits_are_keyword_arguments():
    endless = ndvm.Program("(loop ((i 0)) (recur (+ i 1)))")
    t = time.monotonic()
    with pytest.raises(ndvm.LimitError) as e:
        endless.evaluate(timeout=0.5, max_work=10**15)
    assert (e.value.code, e.value.kind) == ("E014", "deadline")
    assert time.monotonic() - t < 2.0
    with pytest.raises(ndvm.LimitError) as e:
        endless.evaluate(max_work=1000)
    assert e.value.code == "E007"


def test_lane_counts_must_agree():
    p = ndvm.Program("(* a k)")
    with pytest.raises(ndvm.UsageError):
        p.evaluate(params={"a": [1.0, 2.0, 3.0], "k": [1.0, 2.0]})


def test_unknown_front_end_is_a_usage_error():
    with pytest.raises(ndvm.UsageError, match="known: scheme, infix"):
        ndvm.Program("x", frontend="fortran")


def _header(text):
    keys = {}
    for line in text.splitlines():
        if line.startswith(";; ") and ":" in line:
            k, _, v = line[3:].partition(":")
            keys[k.strip()] = v.strip()
    return keys


@pytest.mark.parametrize("path", sorted(HOSTILE.glob("*.scm")), ids=lambda p: p.stem)
def test_hostile_programs_end_in_their_class_never_a_crash(path):
    # The cases and header keys of frontends/tests/hostile.rs, run through the Python API.
    h = _header(path.read_text())
    src = path.read_text()
    if "generate" in h:
        what, n = h["generate"].split()
        assert what == "nested-plus"
        src = "(+ " * int(n) + "1" + ")" * int(n)
    lanes = int(h.get("lanes", 1))
    params = {}
    for kv in h.get("grad", "").split():
        name, x = kv.split("=")
        params[name] = float(x) + np.arange(lanes) * 1e-3 if lanes > 1 else float(x)
    timeout = int(h.get("deadline_ms", 60_000)) / 1000
    max_work = int(h["max_steps"]) if "max_steps" in h else None
    expect = h["expect"]
    try:
        r = ndvm.Program(src).evaluate(
            params=params or None, lanes=lanes, grad=bool(params),
            timeout=timeout, max_work=max_work,
        )
    except ndvm.NdvmError as e:
        assert expect.startswith("E") and e.code in expect.split("|"), (expect, e.code, str(e))
        return
    assert not expect.startswith("E"), f"expected {expect}, got a value"


@pytest.mark.parametrize("polled", [False, True])
def test_a_rust_panic_is_an_internal_error_never_a_crash(polled):
    # The test hook panics inside the guard every entry point uses, or unguarded on the thread a
    # search runs on; either way Python gets InternalError (an ordinary Exception), not PyO3's
    # PanicException (a BaseException that slips past `except Exception`).
    with pytest.raises(ndvm.InternalError, match="ndvm panicked: boom 7") as e:
        ndvm._ndvm._panic_for_tests("boom 7", polled=polled)
    assert isinstance(e.value, ndvm.NdvmError) and isinstance(e.value, Exception)
    # The interpreter goes on: the next call works.
    assert ndvm.Program("(+ 1 2)").evaluate().value.tolist() == [3.0]


# ----------------------------------------------------------------------------- the interpreter


def test_other_threads_run_while_an_evaluation_works():
    busy = ndvm.Program("(loop ((i 0)) (recur (+ i 1)))")
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    t = threading.Thread(target=tick)
    t.start()
    try:
        with pytest.raises(ndvm.LimitError):
            busy.evaluate(timeout=1.0, max_work=10**15)
    finally:
        stop.set()
        t.join()
    assert len(ticks) > 30  # ~100 expected in 1 s; with the GIL held there would be ~1


def test_programs_pickle_by_source():
    p = ndvm.Program("a * exp(-(k * t))", frontend="infix")
    q = pickle.loads(pickle.dumps(p))
    assert (q.src, q.frontend) == (p.src, p.frontend)
    args = dict(params={"a": 2.0, "k": 0.5}, inputs={"t": 1.0})
    assert q.evaluate(**args).value.tobytes() == p.evaluate(**args).value.tobytes()


def test_sympy_and_latex_forms():
    import sympy as sp
    p = ndvm.Program.from_file(ROOT / "examples" / "mm.scm")
    vmax, km, s = sp.symbols("Vmax Km S")
    assert sp.simplify(p.sympy() - vmax * s / (km + s)) == 0
    assert sp.simplify(p.sympy({"Vmax": 10.0, "Km": 2.5}) - 10.0 * s / (2.5 + s)) == 0
    assert "frac" in p.latex()
    with pytest.raises(ValueError, match="no sympy form"):
        ndvm.Program("(loop ((i 0)) (if (= i 3) i (recur (+ i 1))))").sympy()
