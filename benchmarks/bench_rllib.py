"""Decisions per second of PPO on Ray RLlib, learning included, for each sampling path.

Paths (``train.rllib_ppo.PATHS``): ``pettingzoo`` (one ``butifarra_v0`` hand per env on
RLlib's ``MultiAgentEnvRunner``: the naive path), ``batched`` (``BatchedHandsEnv``, many hands
per env, same runner) and ``fast`` (the same env with
``train.rllib_sampler.BatchedHandsEnvRunner``, bulk bookkeeping), each with 0 (sampling in
the driver), 1 and 2 env runners. Every measurement is a whole ``algo.train()`` iteration
(sampling, episode transfer, learner connectors, PPO epochs, weight sync) with the same PPO
settings; a decision is one agent step of any seat.
The table gives the median over the timed iterations (after warm-up) and the driver's
sampling and learning wall time per iteration (``train.rllib_ppo.PhaseTimer``).

    python benchmarks/bench_rllib.py                                  # all paths, 0/1/2 runners
    python benchmarks/bench_rllib.py --paths fast --runners 2 --repeats 5
    python benchmarks/bench_rllib.py --json bench_rllib.json          # also save the rows

Self-play only by default (no snapshot or rule agent in the loop; ``--league`` uses the
training command's mix), so the paths differ in RLlib's machinery alone. Starts the
trainer's local Ray (``train.local_ray``: loopback only) and stops it at the end.
Timings depend on the machine and its load: note both with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from train.local_ray import local_cluster  # noqa: E402
from train.rllib_ppo import PATHS, PhaseTimer, Settings, build_config, decisions_sampled  # noqa: E402


def measure(s: Settings, warmup: int, repeats: int) -> dict[str, Any]:
    """Build the algorithm of ``s``, run ``warmup`` then ``repeats`` timed iterations."""
    algo = build_config(s).build_algo()
    timer = PhaseTimer(algo)
    try:
        for _ in range(warmup):
            algo.train()
        timer.take()
        rates, batches, sample_s, learn_s = [], [], [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            result = algo.train()
            dt = time.perf_counter() - t0
            n = decisions_sampled(result)
            rates.append(n / dt)
            batches.append(n)
            phases = timer.take()  # this iteration's wall times (RLlib's are averages)
            sample_s.append(phases["sample_s"])
            learn_s.append(phases["learn_s"])
    finally:
        algo.stop()
    return {
        "path": s.env_path,
        "runners": s.num_env_runners,
        "decisions_per_s": statistics.median(rates),
        "all_rates": [round(r) for r in rates],
        "batch": statistics.median(batches),
        "sample_s": statistics.median(sample_s),
        "learn_s": statistics.median(learn_s),
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'path':<11} {'runners':>7} {'decisions/s':>12} {'batch':>7} "
        f"{'sample s':>9} {'learn s':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['path']:<11} {r['runners']:>7} {r['decisions_per_s']:>12,.0f} "
            f"{r['batch']:>7,.0f} {r['sample_s']:>9.2f} {r['learn_s']:>8.2f}"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--paths", default=",".join(PATHS[::-1]), help="comma-separated paths")
    p.add_argument("--runners", default="0,1,2", help="comma-separated env runner counts")
    p.add_argument("--repeats", type=int, default=3, help="timed iterations per setting")
    p.add_argument("--warmup", type=int, default=1, help="untimed iterations first")
    p.add_argument("--train-batch", type=int, default=8192)
    p.add_argument("--minibatch", type=int, default=2048)
    p.add_argument("--update-epochs", type=int, default=2, help="passes over each batch")
    p.add_argument("--num-hands", type=int, default=64)
    p.add_argument(
        "--league", action="store_true", help="the CLI's opponent mix (default: self-play only)"
    )
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--json", default=None, help="also write the rows here")
    args = p.parse_args()
    paths = [x for x in args.paths.split(",") if x]
    unknown = sorted(set(paths) - set(PATHS))
    if unknown:
        p.error(f"unknown path(s) {unknown}; paths: {', '.join(PATHS)}")
    runner_counts = [int(x) for x in args.runners.split(",")]
    torch.set_num_threads(args.torch_threads)
    rows = []
    with local_cluster(max(os.cpu_count() or 1, max(runner_counts)), 512 * 2**20):
        for path in paths:
            for runners in runner_counts:
                s = Settings(
                    env_path=path,
                    num_env_runners=runners,
                    train_batch=args.train_batch,
                    minibatch=args.minibatch,
                    update_epochs=args.update_epochs,
                    num_hands=args.num_hands,
                    **(
                        {}
                        if args.league
                        else {
                            "opp_self": 1.0,
                            "opp_snapshot": 0.0,
                            "opp_rule": 0.0,
                            "opp_random": 0.0,
                        }
                    ),
                    torch_threads=args.torch_threads,
                    eval_every=0,
                    # the recipe's central critic, belief head and teacher need the fast
                    # sampler's extra columns; the other paths time the plain network
                    **(
                        {}
                        if path == "fast"
                        else {"central_value": False, "belief": False, "teacher": None}
                    ),
                )
                s.validate()
                row = measure(s, args.warmup, args.repeats)
                rows.append(row)
                print(f"{path} runners={runners}: {row['decisions_per_s']:,.0f} decisions/s "
                      f"({row['all_rates']})", file=sys.stderr, flush=True)  # fmt: skip
    load = os.getloadavg()
    print(f"\nPPO on RLlib, learning included; {os.cpu_count()} CPUs, load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; batch {args.train_batch}, minibatch "
          f"{args.minibatch}, {args.update_epochs} epochs, {args.num_hands} hands per env "
          f"(batched paths), torch threads {args.torch_threads}\n")  # fmt: skip
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
