"""Speed of the baseline agents: microseconds per decision in ``act_batch`` and ``act``.

    python benchmarks/bench_agents.py [--hands 60] [--repeats 7] [--seed 0]
                                      [--batch-sizes 64,256,1024,4096]

The observations and masks are those met along random play of ``--hands`` hands (every
phase: bidding, doubling, the 48 cards), collected once; each agent then decides all of
them ``--repeats`` times and the median time per decision is printed (with the min and
max), so one slow run on a busy machine does not move the figure.

The rule-based agent is the PPO training opponent and teacher, so it is also measured in
batches of each ``--batch-sizes`` size (the positions cycled to fill whole batches): its
decisions per second through the scalar loop (``agents.rule_based.decide`` row by row, what
``act_batch`` did before ``agents.rule_batch``) and through the batched path
(``RuleBasedAgent.act_batch``, numpy over the batch), both after ``check_batch``, in the same
run, medians of ``--repeats``. Timing lives here rather than in the tests, where a
wall-clock threshold is flaky.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from agents import Agent, RandomAgent, RuleBasedAgent
from agents.base import check_batch
from agents.rule_based import decide
from butifarra_env.core.actions import bits_from_masks, mask_from_bits
from butifarra_env.core.game import Game
from butifarra_env.core.observation import Observer, pack_bits_batch
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


def rule_scalar_loop(observations: np.ndarray, masks: np.ndarray) -> list[int]:
    """The rule agent's decisions one row at a time (the readable definition)."""
    obs, legal = check_batch(observations, masks)
    rows = zip(pack_bits_batch(obs), bits_from_masks(legal), strict=True)
    return [decide(bits, legal_bits) for bits, legal_bits in rows]


def batches(observations: np.ndarray, masks: np.ndarray, size: int) -> list[tuple[Any, Any]]:
    """The positions cycled into whole batches of ``size`` rows, at least one pass over them."""
    n = len(observations)
    index = np.arange(-(-n // size) * size) % n
    return [(observations[i], masks[i]) for i in index.reshape(-1, size)]


def rule_batch_sizes(
    observations: np.ndarray, masks: np.ndarray, sizes: list[int], repeats: int
) -> None:
    """Decisions per second of the rule agent, scalar loop vs batched path, per batch size."""
    agent = RuleBasedAgent()
    for size in sizes:
        work = batches(observations, masks, size)
        n = len(work) * size
        rates = {}
        for how, decide_all in (("scalar loop", rule_scalar_loop), ("batched", agent.act_batch)):

            def run(
                decide_all: Callable[[Any, Any], object] = decide_all,
                work: list[tuple[Any, Any]] = work,
            ) -> object:
                return [decide_all(o, m) for o, m in work]

            rates[how] = 1e6 / statistics.median(per_decision_us(run, n, repeats))
        print(
            f"rule     batch {size:>5}: scalar loop {rates['scalar loop']:>10,.0f} decisions/s, "
            f"batched {rates['batched']:>10,.0f} decisions/s "
            f"(x{rates['batched'] / rates['scalar loop']:.1f}; medians of {repeats}, "
            f"{n:,} decisions each)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hands", type=int, default=60, help="hands of random play to decide")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs (median reported)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--batch-sizes",
        default="64,256,1024,4096",
        help="comma-separated batch sizes for the rule agent's scalar-vs-batched figures",
    )
    args = parser.parse_args()
    if args.hands < 1 or args.repeats < 1:
        parser.error("--hands and --repeats must be >= 1")
    try:
        sizes = [int(x) for x in args.batch_sizes.split(",")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        parser.error(
            f"--batch-sizes must be integers >= 1 separated by commas, got {args.batch_sizes!r}"
        )
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
    rule_batch_sizes(observations, masks, sizes, args.repeats)


if __name__ == "__main__":
    main()
