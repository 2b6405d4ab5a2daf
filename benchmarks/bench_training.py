"""Training throughput of train/ppo.py: engine steps and learner decisions trained per second.

    python benchmarks/bench_training.py [--updates 12] [--repeats 3] [--seed 0]
        [--rev HEAD] [--config NAME ...] [--torch-threads 1] [--this-tree-flags=FLAGS]
        [--devices numpy torch-cpu torch-cuda]

Runs ``python -m train.ppo`` for ``--updates`` PPO updates per configuration, ``--torch-threads``
torch threads (one: the figures are per core), no evaluation, ``--repeats`` times with the
configurations in alternation (so a busy machine slows them alike), and prints for each the
median over runs of the median per-update rates (rollout + update; the first two updates are
left out as warm-up):

* **engine steps/s**: every engine step, all four seats (``steps_per_second`` in metrics.csv);
* **learner decisions/s**: the learner's decisions trained by the update (the PPO batch,
  ``batch_transitions``, over the update's wall time: ``batch_transitions x
  steps_per_second / (num_envs x num_steps)``, so a revision without the column is measured
  alike).

With ``--rev REV`` (e.g. ``HEAD``: the committed code) the same configurations also run from a
temporary ``git worktree`` of that revision, in alternation with this tree's (the pattern of
:mod:`benchmarks.compare_revisions`), and the table gains the ratio this tree / REV: the median
of the per-repeat ratios, both rates. ``--this-tree-flags`` adds flags to this tree's runs only
(``--this-tree-flags=--update-bf16``, or ``--this-tree-flags "--torch-threads 2"`` for both
cores of a run that runs alone), to time an option against REV's defaults. The
configurations:

* ``r1``: the settings the first shipped policy was trained with (15% self-play, 5%
  snapshots, 70% rule-based, 10% random; no teacher, no belief head);
* ``now, teacher on``: today's defaults while the rule-based teacher still counts (the
  first quarter of a run: the teacher is asked at every learner decision);
* ``now, teacher off``: today's defaults afterwards (the teacher is asked at bids only).

``--devices`` times each configuration on each engine and device (:data:`DEVICES`):
``numpy`` (the numpy engine, networks on CPU: the default and the shipped recipe),
``torch-cpu`` and ``torch-cuda`` (``--engine torch``: TorchBatchedEnv, rollout and update on
that device; docs/accelerator.md). ``torch-cuda`` is refused where torch sees no CUDA device.

The training code is run, not imported (single-file algorithms are imported by nobody).
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS: dict[str, list[str]] = {
    "r1": [
        "--hidden", "256", "--no-anneal-lr", "--no-belief", "--teacher", "None",
        "--opp-self", "0.15", "--opp-snapshot", "0.05", "--opp-rule", "0.7", "--opp-random", "0.1",
    ],
    "now, teacher on": ["--teacher-until", "1.0"],
    "now, teacher off": ["--teacher-until", "0"],
    "release 5's width": ["--hidden", "256", "--teacher-until", "1.0"],
}  # fmt: skip
"""Configuration name -> train.ppo flags on top of today's defaults."""
DEVICES: dict[str, list[str]] = {
    "numpy": ["--engine", "numpy", "--device", "cpu"],
    "torch-cpu": ["--engine", "torch", "--device", "cpu"],
    "torch-cuda": ["--engine", "torch", "--device", "cuda", "--no-deterministic"],
}
"""``--devices`` name -> train.ppo flags: the engine and the device it trains on."""
WARMUP_UPDATES = 2
NUM_ENVS, NUM_STEPS = 256, 64
"""The engine steps of one update at the default ``--num-envs`` and ``--num-steps`` (the
configurations keep them)."""


def run_once(
    tree: Path, flags: list[str], updates: int, seed: int, threads: int, folder: Path, name: str
) -> tuple[float, float]:
    """Median engine steps/s and learner decisions/s of one run's updates after the warm-up."""
    cmd = [
        sys.executable, "-m", "train.ppo", "--seed", str(seed), "--total-updates", str(updates),
        "--total-minutes", "0", "--torch-threads", str(threads), "--eval-every", "0",
        "--checkpoint-every", str(updates), "--no-tensorboard", "--no-progress",
        "--milestone-minutes", "--run-dir", str(folder), "--run-name", name, *flags,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(tree)}
    subprocess.run(cmd, cwd=tree, env=env, check=True, capture_output=True, timeout=3600)
    with open(folder / name / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))[WARMUP_UPDATES:]
    steps = [float(r["steps_per_second"]) for r in rows]
    learner = [
        float(r["batch_transitions"] or 0) * s / (NUM_ENVS * NUM_STEPS)
        for r, s in zip(rows, steps, strict=True)
    ]
    return statistics.median(steps), statistics.median(learner)


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--updates", type=int, default=12, help="PPO updates per run (> 2)")
    p.add_argument("--repeats", type=int, default=3, help="runs per configuration")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rev", help="also time this git revision (e.g. HEAD), in alternation")
    p.add_argument(
        "--config", action="append", choices=tuple(CONFIGS),
        help="time only this configuration (repeatable; default: all)",
    )  # fmt: skip
    p.add_argument("--torch-threads", type=int, default=1, help="torch threads per run")
    p.add_argument(
        "--this-tree-flags", default="", metavar="FLAGS",
        help='train.ppo flags for this tree\'s runs only, e.g. "--update-bf16"',
    )  # fmt: skip
    p.add_argument(
        "--devices", nargs="+", choices=tuple(DEVICES), default=None,
        help="engines/devices to time each configuration on (default: the numpy engine only)",
    )  # fmt: skip
    args = p.parse_args()
    if args.updates <= WARMUP_UPDATES or args.repeats < 1 or args.torch_threads < 1:
        p.error(f"--updates must be > {WARMUP_UPDATES}, --repeats and --torch-threads >= 1")
    configs = {k: CONFIGS[k] for k in (args.config or CONFIGS)}
    if args.devices:
        if "torch-cuda" in args.devices and not cuda_available():
            p.error("--devices torch-cuda: this torch sees no CUDA device (allowed here: "
                    "numpy, torch-cpu)")  # fmt: skip
        configs = {
            f"{name} @ {dev}": flags + DEVICES[dev]
            for name, flags in configs.items()
            for dev in dict.fromkeys(args.devices)
        }
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this tree": ROOT}
        if args.rev:
            trees[args.rev] = Path(tmp) / "rev"
            subprocess.run(
                ["git", "worktree", "add", "-q", "--detach", str(trees[args.rev]), args.rev],
                cwd=ROOT, check=True,
            )  # fmt: skip
        try:
            rates = run_all(trees, configs, args, Path(tmp))
        finally:
            if args.rev:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(trees[args.rev])], cwd=ROOT
                )
    report(rates, configs, args)
    return 0


def cuda_available() -> bool:
    """Whether this Python's torch sees a CUDA device (False without torch)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


Rates = dict[tuple[str, str], list[tuple[float, float]]]
"""(tree, configuration) -> (engine steps/s, learner decisions/s) of each repeat."""


def run_all(
    trees: dict[str, Path], configs: dict[str, list[str]], args: argparse.Namespace, tmp: Path
) -> Rates:
    rates: Rates = {(t, c): [] for c in configs for t in trees}
    for r in range(args.repeats):
        for i, (name, flags) in enumerate(configs.items()):
            for j, (tree_name, tree) in enumerate(trees.items()):
                extra = shlex.split(args.this_tree_flags) if tree == ROOT else []
                run = (args.updates, args.seed, args.torch_threads, tmp, f"{r}_{i}_{j}")
                rates[tree_name, name].append(run_once(tree, flags + extra, *run))
    return rates


def report(rates: Rates, configs: dict[str, list[str]], args: argparse.Namespace) -> None:
    machine = platform.processor() or platform.machine()
    threads = "one torch thread" if args.torch_threads == 1 else f"{args.torch_threads} threads"
    print(f"{machine}, {os.cpu_count()} CPUs, Python {platform.python_version()}, ")
    print(f"{args.updates} updates x {args.repeats} runs per configuration, {threads}")
    if args.this_tree_flags:
        print(f"this tree's runs also with: {args.this_tree_flags}")
    print()
    trees = list(dict.fromkeys(t for t, _ in rates))
    base = ("this tree", "r1") if "r1" in configs else None
    head = "| configuration | tree | engine steps/s | learner decisions/s | engine steps/s, runs |"
    head += " vs r1 |" if base else ""
    print(head)
    print("|---|---|---:|---:|---|" + ("---:|" if base else ""))
    for name in configs:
        for tree in trees:
            runs = rates[tree, name]
            steps = statistics.median(s for s, _ in runs)
            learner = statistics.median(d for _, d in runs)
            each = ", ".join(f"{s:,.0f}" for s, _ in runs)
            row = f"| {name} | {tree} | {steps:,.0f} | {learner:,.0f} | {each} |"
            if base:
                ref = statistics.median(s for s, _ in rates[base])
                row += f" {steps / ref:.2f}x |"
            print(row)
    if len(trees) == 2:
        new, old = trees
        print(f"\nthis tree / {old} (median of the per-repeat ratios):\n")
        print("| configuration | engine steps/s | learner decisions/s |")
        print("|---|---:|---:|")
        for name in configs:
            pairs = list(zip(rates[new, name], rates[old, name], strict=True))
            steps = statistics.median(a[0] / b[0] for a, b in pairs)
            learner = statistics.median(a[1] / b[1] for a, b in pairs if b[1] > 0)
            print(f"| {name} | {steps:.2f}x | {learner:.2f}x |")


if __name__ == "__main__":
    raise SystemExit(main())
