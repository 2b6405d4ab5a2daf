"""Speed of the rule-based player in batches: numpy vs torch on CPU vs torch on CUDA.

    python benchmarks/bench_rule_torch.py [--sizes 1024,4096,16384,65536] [--repeats 7]
                                          [--hands 2000] [--seed 0] [--threads N]
                                          [--devices cpu,cuda]

Prints decisions per second of :func:`agents.rule_batch.decide_batch` (numpy arrays) and of
:func:`agents.rule_torch.decide_batch_torch` (tensors already on the device, the unchecked
hot path) at each batch size, medians of ``--repeats`` timed calls after a warm-up (with the
min and max), on the same positions: those met in ``--hands`` hands of the batched engine,
each move the rule agent's or the random agent's (half and half), cycled to fill each batch.
On CUDA every timed call is bracketed by ``torch.cuda.synchronize`` so the figure includes
the kernels, not only their launch. The decisions of the three are compared once per size (a
mismatch stops the run). ``--threads`` sets torch's CPU threads (numpy is single-threaded
here); CUDA columns appear only where ``torch.cuda.is_available()``. Timing lives here, not
in the tests, where a wall-clock threshold is flaky.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from functools import partial

import numpy as np
import torch

from agents import RandomAgent, RuleBasedAgent
from agents.rule_batch import decide_batch
from agents.rule_torch import decide_batch_torch
from butifarra_env.envs.batched import BatchedEnv


def positions(hands: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Observations and masks of every decision of about ``hands`` hands of the batched
    engine (64 tables at a time), half the moves the rule agent's, half the random agent's."""
    num_envs = min(64, hands)
    env = BatchedEnv(num_envs, seed=seed)
    obs, mask, _ = env.reset()
    rule, rand = RuleBasedAgent(), RandomAgent(seed)
    rng = np.random.default_rng(seed)
    all_obs, all_masks = [], []
    steps = -(-hands * 52 // num_envs)  # about 52 decisions a hand (bids, doubling, 48 cards)
    for _ in range(steps):
        all_obs.append(obs)
        all_masks.append(mask)
        mix = rng.random(num_envs) < 0.5
        actions = np.where(mix, rand.act_batch(obs, mask), rule.act_batch(obs, mask))
        obs, mask, *_ = env.step(actions)
    return np.concatenate(all_obs), np.concatenate(all_masks)


def timed(run: Callable[[], object], repeats: int, sync: Callable[[], None]) -> list[float]:
    """Seconds of ``repeats`` calls of ``run`` after one warm-up, each bracketed by ``sync``."""
    run()
    sync()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1024,4096,16384,65536", help="batch sizes")
    parser.add_argument("--repeats", type=int, default=7, help="timed calls (median reported)")
    parser.add_argument("--hands", type=int, default=2000, help="hands to collect positions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    parser.add_argument("--devices", default="cpu,cuda", help="torch devices to measure")
    args = parser.parse_args()
    try:
        sizes = [int(x) for x in args.sizes.split(",")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        parser.error(f"--sizes must be integers >= 1 separated by commas, got {args.sizes!r}")
    if args.repeats < 1 or args.hands < 1 or args.threads < 0:
        parser.error("--repeats and --hands must be >= 1, --threads >= 0")
    devices = [d for d in args.devices.split(",") if d]
    unknown = set(devices) - {"cpu", "cuda"}
    if unknown:
        parser.error(f"--devices: cpu and/or cuda, got {sorted(unknown)}")
    if "cuda" in devices and not torch.cuda.is_available():
        print("no CUDA device: the cuda column is left out")
        devices.remove("cuda")
    if args.threads:
        torch.set_num_threads(args.threads)

    observations, masks = positions(args.hands, args.seed)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(
        f"machine: {platform.processor() or platform.machine()}, python "
        f"{platform.python_version()}, torch {torch.__version__} "
        f"({torch.get_num_threads()} CPU threads)"
        + (f", CUDA {torch.cuda.get_device_name()}" if "cuda" in devices else "")
        + (f"; load average {load[0]:.2f}" if load else "")
        + f"; {len(observations):,} positions from {args.hands} hands"
    )

    def no_sync() -> None:
        pass

    for size in sizes:
        index = np.arange(size) % len(observations)
        obs, mask = observations[index], masks[index]
        expected = decide_batch(obs, mask)
        columns = {"numpy": timed(partial(decide_batch, obs, mask), args.repeats, no_sync)}
        for device in devices:
            o = torch.from_numpy(obs).to(device)
            m = torch.from_numpy(mask).to(device)
            got = decide_batch_torch(o, m).cpu().numpy()
            if not np.array_equal(got, expected):
                bad = int(np.flatnonzero(got != expected)[0])
                raise SystemExit(f"torch on {device} differs from numpy at row {bad}")
            sync = torch.cuda.synchronize if device == "cuda" else no_sync
            columns[f"torch {device}"] = timed(
                partial(decide_batch_torch, o, m), args.repeats, sync
            )
        figures = ", ".join(
            f"{name} {size / statistics.median(t):>11,.0f}/s "
            f"[{size / max(t):,.0f}-{size / min(t):,.0f}]"
            for name, t in columns.items()
        )
        print(f"batch {size:>6}: {figures} (decisions/s, medians of {args.repeats})")


if __name__ == "__main__":
    main()
