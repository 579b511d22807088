"""The Python binding's call overhead, measured side by side with the same work inside Rust.

- ``Program.evaluate`` on ``examples/decay.scm`` (forward + gradient, the evaluator reused) at B = 1
  and B = 256 lanes: seconds per call from Python against seconds per run of the same request in
  a loop inside the extension (``time_evaluate``, the same ``run_eval`` path without the Python
  conversions).
- ``ndvm.calibrate`` on ``examples/mm.scm`` and ``examples/rates.csv`` with the default
  calibration: seconds per call from Python against the same calibration run in a loop inside
  the extension (``time_calibrate``: the declarations, the settings, ``Calibrator::new`` and the
  fit, as a Rust program calling the library does).

Each figure is the median of ``--repeats`` passes. Writes a JSON file and prints a table.
Run from the repository root in the virtual environment that has ``ndvm``:
``python python/bench/overhead.py --out results/bench/python-overhead.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np

import ndvm

ROOT = Path(__file__).resolve().parents[2]


def _row(case: str, python: list, rust: list) -> dict:
    """One table row: the medians of the passes, and the overhead of the Python call."""
    py_s, rs_s = statistics.median(python), statistics.median(rust)
    return {
        "case": case,
        "python_s": py_s,
        "rust_s": rs_s,
        "overhead_s": py_s - rs_s,
        "overhead_pct": 100.0 * (py_s - rs_s) / rs_s,
    }


def _evaluate_case(lanes: int, calls: int, repeats: int) -> dict:
    program = ndvm.Program.from_file(ROOT / "examples" / "decay.scm")
    k = np.linspace(0.1, 1.0, lanes) if lanes > 1 else 0.5
    params = {"a": 2.0, "k": k}
    inputs = {"t": 1.0}
    program.evaluate(params=params, inputs=inputs)  # records the tape once
    python, rust = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            program.evaluate(params=params, inputs=inputs)
        python.append((time.perf_counter() - started) / calls)
        rust.append(program._p.time_evaluate(calls, params, inputs))
    return _row(f"evaluate decay.scm, B = {lanes}", python, rust)


def _calibrate_case(calls: int, repeats: int, points: int | None = None) -> dict:
    program = ndvm.Program.from_file(ROOT / "examples" / "mm.scm")
    if points is None:
        table = np.loadtxt(ROOT / "examples" / "rates.csv", delimiter=",", skiprows=1, ndmin=2)
        S, y = np.ascontiguousarray(table[:, 0]), np.ascontiguousarray(table[:, 1])
        what = "rates.csv"
    else:
        S = np.linspace(0.1, 20.0, points)
        y = 10.0 * S / (2.5 + S) + 0.05 * np.sin(7.0 * S)
        what = f"{points} points"
    python, rust = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            ndvm.calibrate(program, {"S": S}, y)
        python.append((time.perf_counter() - started) / calls)
        rust.append(ndvm._ndvm.time_calibrate(program._p, [("S", S)], y, calls))
    return _row(f"calibrate mm.scm on {what} (defaults: 32 starts, portfolio)", python, rust)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    rows = [
        _evaluate_case(1, a.calls, a.repeats),
        _evaluate_case(256, a.calls // 4, a.repeats),
        _calibrate_case(max(1, a.calls // 100), a.repeats),
        _calibrate_case(max(1, a.calls // 400), a.repeats, points=200),
    ]
    report = {
        "machine": platform.machine(),
        "python": platform.python_version(),
        "ndvm": ndvm.__version__,
        "repeats": a.repeats,
        "rows": rows,
    }
    print("| case | Python call | inside Rust | overhead |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['case']} | {r['python_s'] * 1e6:.1f} µs | {r['rust_s'] * 1e6:.1f} µs "
            f"| {r['overhead_s'] * 1e6:.1f} µs ({r['overhead_pct']:.1f} %) |"
        )
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
