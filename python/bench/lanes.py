"""``Program.evaluate`` at many lanes: seconds per call from Python beside the same run inside
the extension, and beside one numpy copy of the input (what each copy of it costs).

Run from the repository root in a virtual environment that has ``ndvm``; to compare two builds,
run it with each environment's interpreter one after the other (``results/BENCHMARKS.md``):
``python python/bench/lanes.py [--out FILE]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

import ndvm


def _case(program, lanes: int, repeats: int) -> dict:
    x = np.linspace(0.0, 1.0, lanes)
    params, inputs = {"a": 2.0}, {"x": x}
    program.evaluate(params=params, inputs=inputs)  # records the tape once
    calls = max(5, 2_000_000 // lanes)
    python, rust, copy = [], [], []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            program.evaluate(params=params, inputs=inputs)
        python.append((time.perf_counter() - started) / calls)
        rust.append(program._p.time_evaluate(calls, params, inputs))
        started = time.perf_counter()
        for _ in range(calls):
            x.copy()
        copy.append((time.perf_counter() - started) / calls)
    m = statistics.median
    return {"lanes": lanes, "python_s": m(python), "rust_s": m(rust), "numpy_copy_s": m(copy)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    program = ndvm.Program("(* a x)")
    rows = [_case(program, n, a.repeats) for n in (1_000, 100_000, 1_000_000)]
    print("| lanes | Python call | inside Rust | one numpy copy of x |")
    print("|--:|--:|--:|--:|")
    for r in rows:
        print(f"| {r['lanes']} | {r['python_s'] * 1e6:.0f} µs | {r['rust_s'] * 1e6:.0f} µs "
              f"| {r['numpy_copy_s'] * 1e6:.1f} µs |")
    if a.out:
        a.out.write_text(json.dumps({"program": "(* a x)", "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
