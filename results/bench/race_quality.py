#!/usr/bin/env python3
"""Racing screens on the co-search replay task: speed and fit quality against the full screen.

For each calibrator seed, runs `search/tests/data/tasks/replay.yaml` (192 distinct candidates,
1 thread) with the default calibrator and with each schedule given, and compares every
candidate's training loss with the full screen's at the same seed (paired): how many end worse or
better by more than 1e-3 / 1e-2 / 0.1 relative, how many candidates with held-out R2 > 0.5 end
worse by more than 1e-2, the median speed-up in calibrations/s, calibrations to the first success
and the best held-out R2. A different seed alone is the yardstick: it moves about as many fits
up as down.

Usage (from the repository root, after `cargo build --release -p ndvm-search`):
    python3 results/bench/race_quality.py seed+1 "race: [{at: 50, keep: 8}]" ...
Each argument is the inside of a `calibrator: {...}` flow map (without `seed`), or `seed+1`: no
racing, the next seed (the yardstick); SEEDS=7,8,9,10 and
BIN=target/release/ndvm-search override the defaults.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("BIN", os.path.join(ROOT, "target/release/ndvm-search"))
SEEDS = [int(x) for x in os.environ.get("SEEDS", "7,8,9,10").split(",")]
TASK = open(os.path.join(ROOT, "search/tests/data/tasks/replay.yaml")).read().replace(
    "cache: ../../../../testdata", "cache: " + os.path.join(ROOT, "testdata")
)
WORK = tempfile.mkdtemp(prefix="ndvm-race-quality-")


def run(name, calibrator):
    path = os.path.join(WORK, name + ".yaml")
    with open(path, "w") as f:
        f.write(TASK + "calibrator: {" + calibrator + "}\n")
    out = os.path.join(WORK, "out-" + name)
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([BIN, "run", path, "--out", out, "--threads", "1"], check=True, capture_output=True)
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(out, "events.jsonl")) as f:
        events = {e["index"]: e for e in map(json.loads, f)}
    return summary, events


def main():
    refs = {seed: run(f"ref{seed}", f"seed: {seed}") for seed in SEEDS}
    for schedule in sys.argv[1:]:
        worse = {1e-3: 0, 1e-2: 0, 1e-1: 0}
        better = dict.fromkeys(worse, 0)
        good_worse, speed, first, best = 0, [], [], []
        for seed in SEEDS:
            if schedule == "seed+1":
                summary, events = run("x", f"seed: {seed + 1}")
            else:
                summary, events = run("x", f"seed: {seed}, " + schedule)
            ref_summary, ref_events = refs[seed]
            speed.append(
                summary["run"]["calibrations_per_second"]
                / ref_summary["run"]["calibrations_per_second"]
            )
            first.append(summary["first_success"] and summary["first_success"]["calibrations"])
            best.append(round(summary["best"]["validation_r2"], 4))
            for i, b in ref_events.items():
                e = events[i]
                if b["status"] != "ok" or e["status"] != "ok":
                    continue
                d = (e["train_loss"] - b["train_loss"]) / abs(b["train_loss"])
                for t in worse:
                    worse[t] += d > t
                    better[t] += d < -t
                if b["validation_r2"] and b["validation_r2"] > 0.5 and d > 1e-2:
                    good_worse += 1
        cells = "  ".join(f">{t:g} {worse[t]}/{better[t]}" for t in worse)
        print(
            f"{schedule:60} worse/better {cells}  R2>0.5 worse>1e-2: {good_worse}  "
            f"speed x{sorted(speed)[len(speed) // 2]:.2f}  first success {first}  best {best}"
        )
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
