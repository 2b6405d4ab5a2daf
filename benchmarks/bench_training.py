"""Training throughput of train/ppo.py: engine steps (decisions of any seat) per second.

    python benchmarks/bench_training.py [--updates 12] [--repeats 3] [--seed 0]

Runs ``python -m train.ppo`` for ``--updates`` PPO updates per configuration, one torch
thread, no evaluation, ``--repeats`` times with the configurations in alternation (so a
busy machine slows them alike), and prints for each the median over runs of the median
``steps_per_second`` of its updates (rollout + update; the first two updates are left out
as warm-up), and its ratio to ``r1``. The configurations:

* ``r1``: the settings the first shipped policy was trained with (15% self-play, 5%
  snapshots, 70% rule-based, 10% random; no teacher, no belief head);
* ``now, teacher on``: today's defaults while the rule-based teacher still counts (the
  first quarter of a run: the teacher is asked at every learner decision);
* ``now, teacher off``: today's defaults afterwards.

"Decisions" counts every engine step (all four seats), as ``steps_per_second`` in
``metrics.csv`` does; only the learner's decisions enter the PPO batch. The training code is
run, not imported (single-file algorithms are imported by nobody).
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS: dict[str, list[str]] = {
    "r1": [
        "--no-anneal-lr", "--no-belief", "--teacher", "None", "--opp-self", "0.15",
        "--opp-snapshot", "0.05", "--opp-rule", "0.7", "--opp-random", "0.1",
    ],
    "now, teacher on": ["--teacher-until", "1.0"],
    "now, teacher off": ["--teacher", "None"],
}  # fmt: skip
"""Configuration name -> train.ppo flags on top of today's defaults."""
WARMUP_UPDATES = 2


def run_once(flags: list[str], updates: int, seed: int, folder: Path, name: str) -> float:
    """Median steps/s of one run's updates after the warm-up."""
    cmd = [
        sys.executable, "-m", "train.ppo", "--seed", str(seed), "--total-updates", str(updates),
        "--total-minutes", "0", "--torch-threads", "1", "--eval-every", "0",
        "--checkpoint-every", str(updates), "--no-tensorboard", "--no-progress",
        "--milestone-minutes", "--run-dir", str(folder), "--run-name", name, *flags,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True, timeout=3600)
    with open(folder / name / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))[WARMUP_UPDATES:]
    return statistics.median(float(r["steps_per_second"]) for r in rows)


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--updates", type=int, default=12, help="PPO updates per run (> 2)")
    p.add_argument("--repeats", type=int, default=3, help="runs per configuration")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.updates <= WARMUP_UPDATES or args.repeats < 1:
        p.error(f"--updates must be > {WARMUP_UPDATES} and --repeats >= 1")
    speeds: dict[str, list[float]] = {name: [] for name in CONFIGS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for i, (name, flags) in enumerate(CONFIGS.items()):
                speed = run_once(flags, args.updates, args.seed, Path(tmp), f"{r}_{i}")
                speeds[name].append(speed)
    machine = platform.processor() or platform.machine()
    print(f"{machine}, Python {platform.python_version()}, {args.updates} updates x")
    print(f"{args.repeats} runs per configuration, one torch thread")
    base = statistics.median(speeds["r1"])
    print(f"{'configuration':<18} {'decisions/s (median)':>21} {'runs':>28} {'vs r1':>7}")
    for name, values in speeds.items():
        med = statistics.median(values)
        runs = ", ".join(f"{v:,.0f}" for v in values)
        print(f"{name:<18} {med:>21,.0f} {runs:>28} {med / base:>6.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
