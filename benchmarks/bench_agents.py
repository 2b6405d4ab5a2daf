"""Speed of the baseline agents: microseconds per decision in ``act_batch`` and ``act``.

    python benchmarks/bench_agents.py [--hands 60] [--repeats 7] [--seed 0]

The observations and masks are those met along random play of ``--hands`` hands (every
phase: bidding, doubling, the 48 cards), collected once; each agent then decides all of
them ``--repeats`` times and the median time per decision is printed (with the min and
max), so one slow run on a busy machine does not move the figure. The rule-based agent is
meant as a PPO self-play opponent: tens of microseconds per decision on a 2-core machine.
Timing lives here rather than in the tests, where a wall-clock threshold is flaky.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np

from agents import Agent, RandomAgent, RuleBasedAgent
from butifarra_env.core.actions import mask_from_bits
from butifarra_env.core.game import Game
from butifarra_env.core.observation import Observer
from butifarra_env.core.options import Options
from butifarra_env.core.rules import random_deal


def positions(hands: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Observations (N, 491) and masks (N, 56) of every decision of random legal play."""
    rng = np.random.default_rng(seed)
    observations, masks = [], []
    for _ in range(hands):
        dealer = int(rng.integers(4))
        game = Game(Options(), dealer, random_deal(rng, dealer))
        observer = Observer()
        observer.reset(game)
        while not game.is_over:
            seat = game.to_move
            observations.append(observer.observe(seat))
            masks.append(mask_from_bits(game.legal))
            legal = game.legal_actions()
            action = legal[int(rng.integers(len(legal)))]
            game.step(action)
            observer.update(game, seat, action)
    return np.stack(observations), np.stack(masks)


def per_decision_us(run: Callable[[], object], n: int, repeats: int) -> list[float]:
    """Microseconds per decision of ``repeats`` timed calls of ``run`` (after a warm-up)."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) / n * 1e6)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hands", type=int, default=60, help="hands of random play to decide")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs (median reported)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.hands < 1 or args.repeats < 1:
        parser.error("--hands and --repeats must be >= 1")
    observations, masks = positions(args.hands, args.seed)
    n = len(observations)
    print(
        f"machine: {platform.processor() or platform.machine()}, "
        f"python {platform.python_version()}; {n:,} decisions from {args.hands} hands"
    )
    agents: list[Agent] = [RandomAgent(args.seed), RuleBasedAgent()]
    for agent in agents:

        def batch(agent: Agent = agent) -> object:
            return agent.act_batch(observations, masks)

        def single(agent: Agent = agent) -> object:
            return [agent.act(observations[i], masks[i]) for i in range(n)]

        for how, run in (("act_batch", batch), ("act", single)):
            times = per_decision_us(run, n, args.repeats)
            print(
                f"{agent.name:<8} {how:<10} {statistics.median(times):>8.2f} us/decision "
                f"(median of {args.repeats}, min {min(times):.2f}, max {max(times):.2f})"
            )


if __name__ == "__main__":
    main()
