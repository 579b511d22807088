"""The pyoperon side of `ndvm-bench search`: one symbolic-regression run of pyoperon 0.5.0
on a CSV table, printed as one JSON line on stdout (NMSE on the training file and each test file,
and the model's size `length`, the nodes of its tree). `ndvm-bench suite` runs it too.

Run by `ndvm-bench search` in its own virtual environment (results/bench/.venv-pyoperon,
created on first use); by hand:

    results/bench/.venv-pyoperon/bin/python results/bench/pyoperon_search.py \
        --train tasks/data/llmsr/oscillator1/train.csv --inputs x,v --target a \
        --test test_id=tasks/data/llmsr/oscillator1/test_id.csv \
        --test test_ood=tasks/data/llmsr/oscillator1/test_ood.csv \
        --seconds 60 --threads 2 --seed 0

Settings: pyoperon.sklearn.SymbolicRegressor with the extended symbol set below, `max_time` =
--seconds, `n_threads` = --threads, `random_state` = --seed, generation and evaluation limits
raised so the time limit is what stops it, 10 Levenberg-Marquardt coefficient iterations per
local search (the default of 0 fits no coefficients but the final linear scaling), and the model
pyoperon returns (with its default single objective, R², the best one, linearly scaled). NMSE =
MSE / variance of the target (population variance), on every row of each file.
"""

import argparse
import csv
import json
import sys
import time

import numpy as np
from pyoperon.sklearn import SymbolicRegressor

SYMBOLS = "add,sub,mul,div,constant,variable,exp,log,sin,cos,sqrt,square,pow,tanh"
OPTIMIZER_ITERATIONS = 10


def read_table(path, inputs, target):
    """The input columns (rows × inputs) and the target column of a headed CSV file."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], [r for r in rows[1:] if r]
    missing = [c for c in inputs + [target] if c not in header]
    if missing:
        raise SystemExit(f"{path}: no column {', '.join(missing)} (header: {','.join(header)})")
    cols = [header.index(c) for c in inputs]
    t = header.index(target)
    # Column-major: pyoperon 0.5.0's Dataset reads a C-ordered array as if it were column-major
    # (its fit converts, its predict does not), so a C-ordered X gives wrong predictions.
    x = np.asfortranarray([[float(r[c]) for c in cols] for r in body], dtype=np.float64)
    y = np.array([float(r[t]) for r in body], dtype=np.float64)
    return x, y


def nmse(pred, y):
    """MSE / variance of y; None when a prediction is not finite."""
    pred = np.asarray(pred, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(pred)):
        return None
    return float(np.mean((pred - y) ** 2) / np.var(y))


def model_length(reg):
    """Nodes of the model's tree (pyoperon 0.5.0: `reg.model_.Length`, a weighted variable
    `c*x` one node); None when this pyoperon has no such attribute."""
    length = getattr(reg.model_, "Length", None)
    return None if length is None else int(length)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", required=True)
    p.add_argument("--test", action="append", default=[], metavar="NAME=FILE")
    p.add_argument("--inputs", required=True, help="comma-separated input columns")
    p.add_argument("--target", required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--seed", type=int, required=True)
    a = p.parse_args()
    inputs = a.inputs.split(",")
    x, y = read_table(a.train, inputs, a.target)
    tests = []
    for spec in a.test:
        name, _, path = spec.partition("=")
        tests.append((name, read_table(path, inputs, a.target)))

    reg = SymbolicRegressor(
        allowed_symbols=SYMBOLS,
        optimizer_iterations=OPTIMIZER_ITERATIONS,
        generations=10**9,
        max_evaluations=10**15,
        max_time=max(1, int(round(a.seconds))),
        n_threads=a.threads,
        random_state=a.seed,
    )
    started = time.monotonic()
    reg.fit(x, y)
    wall = time.monotonic() - started
    out = {
        "seed": a.seed,
        "wall_s": wall,
        "model": reg.get_model_string(reg.model_, 6, inputs),
        "rows": {"train": int(len(y)), **{n: int(len(t[1])) for n, t in tests}},
        "nmse": {"train": nmse(reg.predict(x), y), **{n: nmse(reg.predict(t[0]), t[1]) for n, t in tests}},
        "length": model_length(reg),
        "generations": int(reg.stats_["generations"]),
        "evaluations": int(reg.stats_["evaluation_count"]),
        "settings": {
            "allowed_symbols": SYMBOLS,
            "optimizer_iterations": OPTIMIZER_ITERATIONS,
            "max_time": max(1, int(round(a.seconds))),
            "n_threads": a.threads,
            "model_selection_criterion": reg.model_selection_criterion,
        },
    }
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
