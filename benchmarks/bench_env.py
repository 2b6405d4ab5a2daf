"""Speed of random legal play: through ``butifarra_v0.env()`` (with observations and masks,
PettingZoo wrappers included) and through the bare engine. Prints medians of repeated runs.

    python benchmarks/bench_env.py [--hands 300] [--repeats 7] [--seed 0] [--no-peers]

Target (issue 2): at least 50,000 decisions/s through env() on a 2-core machine. When the
``bench`` extra is installed (OpenSpiel, RLCard), the peers of ``bench_batched.py`` are
timed in alternation with ``env()`` in the same process and our speed is printed as a ratio
(median of the per-repeat ratios), which holds on a busy machine.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time

import numpy as np
from bench_batched import PEERS, open_spiel_peer  # same directory: peers measured alike

from butifarra_env import butifarra_v0
from butifarra_env.core.cards import cards_of
from butifarra_env.core.game import Game
from butifarra_env.core.options import Options
from butifarra_env.core.rules import random_deal


def run_env(hands: int, seed: int) -> tuple[int, float]:
    """Random legal play through the wrapped AEC env: last() (observation + mask), step()."""
    env = butifarra_v0.env()
    pick = random.Random(seed).randrange
    decisions = 0
    start = time.perf_counter()
    for h in range(hands):
        env.reset(seed=seed + h)
        for _agent in env.agent_iter():
            obs, _reward, term, trunc, _info = env.last()
            if term or trunc:
                env.step(None)
                continue
            legal = np.flatnonzero(obs["action_mask"])
            env.step(int(legal[pick(len(legal))]))
            decisions += 1
    return decisions, time.perf_counter() - start


def run_engine(hands: int, seed: int) -> tuple[int, float]:
    """The rules alone: Game.step on bitmask hands, no observation."""
    rng = np.random.default_rng(seed)
    pick = random.Random(seed).randrange
    options = Options()
    decisions = 0
    start = time.perf_counter()
    for h in range(hands):
        game = Game(options, h % 4, random_deal(rng, h % 4))
        while not game.is_over:
            legal = cards_of(game.legal)
            game.step(legal[pick(len(legal))])
            decisions += 1
    return decisions, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hands", type=int, default=300, help="hands per timed run")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs (median reported)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-peers", action="store_true", help="skip OpenSpiel/RLCard peers")
    args = parser.parse_args()
    if args.hands < 1 or args.repeats < 1:
        parser.error("--hands and --repeats must be >= 1")
    print(
        f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}"
    )
    for name, fn, hands in (
        ("env() + obs + mask", run_env, args.hands),
        ("bare engine", run_engine, args.hands * 5),
    ):
        fn(max(1, hands // 10), args.seed)  # warm-up
        dps, hps = [], []
        for r in range(args.repeats):
            n, dt = fn(hands, args.seed + 1000 * r)
            dps.append(n / dt)
            hps.append(hands / dt)
        print(
            f"{name:<28} {statistics.median(dps):>12,.0f} decisions/s  "
            f"{statistics.median(hps):>10,.0f} hands/s  (median of {args.repeats}, "
            f"min {min(dps):,.0f}, max {max(dps):,.0f})"
        )

    if args.no_peers:
        return
    peers = dict(PEERS)
    peers["open_spiel spades, list obs"] = lambda: open_spiel_peer("spades", True)
    for name, make in peers.items():
        measure = make()
        if measure is None:
            print(f"{name:<28} not installed (pip install -e '.[bench]')")
            continue
        ratios, rates = [], []
        for r in range(args.repeats):
            n, dt = run_env(args.hands // 3, args.seed + 7 * r)
            rate = measure(dt)  # the peer for as long as ours just ran
            rates.append(rate)
            ratios.append((n / dt) / rate)
        print(
            f"{name:<28} {statistics.median(rates):>12,.0f} decisions/s  "
            f"env() / peer = {statistics.median(ratios):.2f}x (median of {args.repeats})"
        )


if __name__ == "__main__":
    main()
