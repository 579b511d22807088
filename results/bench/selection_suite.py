#!/usr/bin/env python3
"""The model-selection suite: ground-truth problems a user might bring, run with the task a user
writes (inputs, target, ten parameters, the default proposer), and the run's answer compared with
the lowest-error model of the same run (`selection: lowest-error`) side by side.

Each problem x noise (0 and 1 % of the target's RMS) x seed is one `ndvm-search` run. Its
`summary.json` holds both answers (`best`: the rule's choice, `lowest_error`: the old one) with
their test scores, and the refitted finalists with theirs, so alternative rules are re-applied
after the fact on the same finalists. Test tables: `test_id` (in range, noisy), `test_ood` (past
the data's range, noisy) and `truth` (noise-free, in and out of range; a model is *recovered*
when its NMSE there is below RECOVERED).

    python3 results/bench/selection_suite.py --bin target/release/ndvm-search \
        --seconds 20 --threads 2 --seeds 1 2 3 --out results/selection

Plain Python (no numpy); data from random.Random(seed), written as CSV beside each task.
"""

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time

RECOVERED = 1e-5

# name: (inputs, formula, range per input, out-of-range per input)
PROBLEMS = {
    "damped-oscillation": (
        ["x"],
        lambda x: math.exp(-0.3 * x) * math.cos(2.0 * x),
        [(0.1, 6.0)],
        [(6.0, 8.0)],
    ),
    "enzyme-inhibition": (
        ["S", "I"],
        lambda S, I: 2.5 * S / (1.2 * (1.0 + I / 0.8) + S),
        [(0.1, 5.0), (0.0, 2.0)],
        [(5.0, 10.0), (2.0, 3.0)],
    ),
    "arrhenius": (
        ["T"],
        lambda T: 3.0 * math.exp(-2.0 / T),
        [(0.5, 3.0)],
        [(3.0, 5.0)],
    ),
    "logistic-growth": (
        ["t"],
        lambda t: 5.0 / (1.0 + math.exp(-1.2 * (t - 3.0))),
        [(0.0, 5.0)],
        [(5.0, 8.0)],
    ),
    "power-law": (
        ["x"],
        lambda x: 1.7 * x**1.5,
        [(0.5, 4.0)],
        [(4.0, 6.0)],
    ),
    "cubic": (
        ["x"],
        lambda x: 0.5 * x**3 - 1.2 * x**2 + 0.8 * x,
        [(-1.0, 2.0)],
        [(2.0, 3.0)],
    ),
    "gravity": (
        ["m1", "m2", "r"],
        lambda m1, m2, r: 1.5 * m1 * m2 / (r * r),
        [(1.0, 3.0), (1.0, 3.0), (1.0, 2.0)],
        [(3.0, 4.0), (3.0, 4.0), (2.0, 3.0)],
    ),
}

TRAIN_ROWS = 200
TEST_ROWS = 100


def rows(rng, f, box, n):
    out = []
    for _ in range(n):
        xs = [rng.uniform(lo, hi) for lo, hi in box]
        out.append((xs, f(*xs)))
    return out


def write_csv(path, inputs, target, data):
    with open(path, "w") as fh:
        fh.write(",".join(inputs + [target]) + "\n")
        for xs, y in data:
            fh.write(",".join(repr(v) for v in xs + [y]) + "\n")


def make_task(folder, name, noise, seed, seconds):
    inputs, f, box, ood = PROBLEMS[name]
    rng = random.Random(f"{name}/{noise}")
    train = rows(rng, f, box, TRAIN_ROWS)
    test_id = rows(rng, f, box, TEST_ROWS)
    test_ood = rows(rng, f, ood, TEST_ROWS)
    truth = rows(rng, f, box, TEST_ROWS) + rows(rng, f, ood, TEST_ROWS)
    rms = math.sqrt(sum(y * y for _, y in train) / len(train))
    sd = noise * rms

    def noisy(data):
        return [(xs, y + rng.gauss(0.0, sd) if sd > 0 else y) for xs, y in data]

    stem = f"{name}-n{noise:g}".replace(".", "p")
    os.makedirs(folder, exist_ok=True)
    for tag, data in [("train", noisy(train)), ("test_id", noisy(test_id)),
                      ("test_ood", noisy(test_ood)), ("truth", truth)]:
        write_csv(os.path.join(folder, f"{stem}-{tag}.csv"), inputs, "y", data)
    task = os.path.join(folder, f"{stem}-s{seed}.yaml")
    params = "\n".join(f"  - {{name: p{i}}}" for i in range(10))
    with open(task, "w") as fh:
        fh.write(
            f"name: {stem}-s{seed}\nseed: {seed}\ndata:\n  csv: {stem}-train.csv\n  tests:\n"
            f"    - {{name: test_id, csv: {stem}-test_id.csv}}\n"
            f"    - {{name: test_ood, csv: {stem}-test_ood.csv}}\n"
            f"    - {{name: truth, csv: {stem}-truth.csv}}\n"
            f"inputs: [{', '.join(inputs)}]\ntarget: y\nparams:\n{params}\n"
            f"proposer: {{kind: evolve}}\nbudget: {{seconds: {seconds}}}\n"
        )
    return task


def nmse(entry, table):
    t = (entry or {}).get("test") or {}
    v = (t.get(table) or {}).get("nmse")
    return math.inf if v is None else v


# Alternative rules, re-applied on the refitted finalists (simplest first).
def rule_tolerance(tol, se, switch_first=True):
    def pick(fins):
        best = min(fins, key=lambda f: f["validation_nmse"])
        b = best["validation_nmse"]
        ok = [f for f in fins
              if f["validation_nmse"] <= b * (1 + tol) or (se > 0 and f["z"] <= se)]
        key = (lambda f: (bool(f.get("switches")), f["complexity"])) if switch_first else \
            (lambda f: f["complexity"])
        return min(ok, key=key)
    return pick


def rule_knee(fins):
    """PySR's default: within 1.5x the best loss, the steepest drop in log-loss per complexity."""
    best = min(f["validation_nmse"] for f in fins)
    ok = [f for f in fins if f["validation_nmse"] <= 1.5 * best]
    chosen, top, prev = ok[0], -math.inf, None
    for f in fins:
        if prev is not None and f in ok and f["complexity"] > prev["complexity"]:
            drop = -(math.log(max(f["validation_nmse"], 1e-300))
                     - math.log(max(prev["validation_nmse"], 1e-300)))
            drop /= f["complexity"] - prev["complexity"]
            if drop > top:
                top, chosen = drop, f
        prev = f
    return chosen


def rule_bic(n):
    def pick(fins):
        return min(fins, key=lambda f: n * math.log(max(f["validation_nmse"], 1e-300))
                   + len(f["params"]) * math.log(n))
    return pick


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/ndvm-search")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.01])
    ap.add_argument("--problems", nargs="+", default=list(PROBLEMS))
    ap.add_argument("--work", default="/tmp/ndvm-selection-suite")
    ap.add_argument("--out", default="results/selection")
    ap.add_argument("--reuse", action="store_true", help="read finished runs, do not rerun them")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    runs = []
    for name in a.problems:
        for noise in a.noise:
            for seed in a.seeds:
                task = make_task(a.work, name, noise, seed, a.seconds)
                out = task[:-5] + "-run"
                if not (a.reuse and os.path.exists(os.path.join(out, "summary.json"))):
                    subprocess.run(["rm", "-rf", out], check=True)
                    t0 = time.time()
                    subprocess.run([binary, "run", task, "--threads", str(a.threads), "--out",
                                    out, "--quiet"], check=True)
                    print(f"{name} noise {noise} seed {seed}: {time.time() - t0:.1f} s",
                          file=sys.stderr)
                with open(os.path.join(out, "summary.json")) as fh:
                    s = json.load(fh)
                runs.append({"problem": name, "noise": noise, "seed": seed, "summary": s})
    report(runs, a)


def report(runs, a):
    val_rows = runs[0]["summary"]["data"]["validation"]
    rules = {
        "lowest-error": None,
        "simplest-equivalent (shipped)": "chosen",
        "simplest within 25 % (issue baseline, refit)": rule_tolerance(0.25, 0, False),
        "within 10 %, switch-free first": rule_tolerance(0.10, 0),
        "within 25 %, switch-free first": rule_tolerance(0.25, 0),
        "within 50 %, switch-free first": rule_tolerance(0.50, 0),
        "1 SE only, switch-free first": rule_tolerance(0.0, 1.0),
        "PySR knee (1.5x)": rule_knee,
        "BIC on validation": rule_bic(val_rows),
    }
    table = {}
    for r in runs:
        s = r["summary"]
        fins = (s.get("selection") or {}).get("finalists") or []
        for rule, pick in rules.items():
            if pick is None:
                e = s.get("lowest_error")
            elif pick == "chosen" or not fins:
                e = s.get("best")
            else:
                e = pick(fins)
            key = (r["problem"], r["noise"], rule)
            table.setdefault(key, []).append({
                "id": nmse(e, "test_id"), "ood": nmse(e, "test_ood"),
                "truth": nmse(e, "truth"), "complexity": (e or {}).get("complexity"),
            })
    os.makedirs(a.out, exist_ok=True)
    rows_out = []
    for (problem, noise, rule), xs in sorted(table.items()):
        rows_out.append({
            "problem": problem, "noise": noise, "rule": rule,
            "median_test_id_nmse": statistics.median(x["id"] for x in xs),
            "median_test_ood_nmse": statistics.median(x["ood"] for x in xs),
            "median_truth_nmse": statistics.median(x["truth"] for x in xs),
            "recovered": sum(x["truth"] < RECOVERED for x in xs),
            "runs": len(xs),
            "median_complexity": statistics.median(x["complexity"] or 0 for x in xs),
        })
    with open(os.path.join(a.out, "selection.json"), "w") as fh:
        json.dump({"seconds": a.seconds, "threads": a.threads, "seeds": a.seeds,
                   "recovered_below": RECOVERED, "rows": rows_out,
                   "runs": [{k: r[k] for k in ("problem", "noise", "seed")} |
                            {"best": r["summary"].get("best"),
                             "lowest_error": r["summary"].get("lowest_error"),
                             "selection": r["summary"].get("selection")} for r in runs]},
                  fh, indent=1)
    lines = ["| problem | noise | rule | test_id NMSE | test_ood NMSE | truth NMSE | recovered | complexity |",
             "|---|---|---|---|---|---|---|---|"]
    for x in rows_out:
        lines.append(
            f"| {x['problem']} | {x['noise']:g} | {x['rule']} | {x['median_test_id_nmse']:.3g} | "
            f"{x['median_test_ood_nmse']:.3g} | {x['median_truth_nmse']:.3g} | "
            f"{x['recovered']}/{x['runs']} | {x['median_complexity']:g} |")
    # Totals per rule: recoveries; problems whose ood median is no worse than lowest-error's.
    # "No worse": at most 5 % above lowest-error's median, or both numerically exact (< 1e-12).
    def no_worse(a, b):
        return a <= b * 1.05 or a < 1e-12

    lines += ["", "| rule | recovered | ood no worse than lowest-error | id no worse than lowest-error |",
              "|---|---|---|---|"]
    cells = sorted({(x["problem"], x["noise"]) for x in rows_out})
    by = {(x["problem"], x["noise"], x["rule"]): x for x in rows_out}
    for rule in rules:
        rec = sum(by[c + (rule,)]["recovered"] for c in cells)
        total = sum(by[c + (rule,)]["runs"] for c in cells)
        ood = sum(no_worse(by[c + (rule,)]["median_test_ood_nmse"],
                           by[c + ("lowest-error",)]["median_test_ood_nmse"]) for c in cells)
        idd = sum(no_worse(by[c + (rule,)]["median_test_id_nmse"],
                           by[c + ("lowest-error",)]["median_test_id_nmse"]) for c in cells)
        lines.append(f"| {rule} | {rec}/{total} | {ood}/{len(cells)} | {idd}/{len(cells)} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "tables.md"), "w") as fh:
        fh.write(text)
    print(text)


if __name__ == "__main__":
    main()
