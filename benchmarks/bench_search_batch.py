"""The search agent in the arena: batched rollouts (``SearchAgent.act_batch``) against the
same agent searching row by row (``act`` per row, the code path before the batching), on
the same deals, timed in alternation, with the protocol's other panel members beside it.

    python benchmarks/bench_search_batch.py [--deals 64] [--repeats 3] [--agent ppo]
        [--search search:samples=4,endgame=2,bidding=ppo-r1] [--panel]

Each repeat plays ``--deals`` duplicate deals of ``test_v1`` between ``--agent`` and the
search spec (one process, one torch thread), once each way; both ways must give the same
hands (checked: the batching changes the speed, never a decision). Prints the median ms per
deal of each way, their ratio and the load average. ``--panel`` also times the other panel
members (random, rule, ppo, ppo-r1) against ``--agent`` on the same deals, so that the
protocol's time per deal follows: the sum over the panel.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from agents.evaluation.arena import duel
from agents.evaluation.deal_sets import load_deal_set
from agents.evaluation.protocol import PANEL_SEARCH
from agents.registry import make_agent
from agents.search_agent import SearchAgent


def row_by_row(agent: SearchAgent) -> SearchAgent:
    """The agent with ``act_batch`` replaced by ``act`` per row (the old path)."""

    def act_batch(obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        return np.array([agent.act(obs[i], masks[i]) for i in range(len(obs))], dtype=np.int64)

    setattr(agent, "act_batch", act_batch)  # noqa: B010 (an instance attribute shadows the method)
    return agent


def timed(agent: str, other: object, deals: list, n: int) -> tuple[float, dict]:
    start = time.perf_counter()
    result = duel(make_agent(agent, seed=0), other, n, seed=0, deals=deals)  # type: ignore[arg-type]
    return 1000 * (time.perf_counter() - start) / n, result.hands


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--deals", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--agent", default="ppo")
    p.add_argument("--search", default=PANEL_SEARCH)
    p.add_argument("--panel", action="store_true", help="time the other panel members too")
    args = p.parse_args()
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    deals = load_deal_set("test")
    load = [os.getloadavg()[0]]
    times: dict[str, list[float]] = {"batched": [], "row by row": []}
    others = ("random", "rule", "ppo", "ppo-r1") if args.panel else ()
    for name in others:
        times[name] = []
    for _ in range(args.repeats):
        hands = []
        for way in ("batched", "row by row"):
            search = make_agent(args.search, seed=0)
            assert isinstance(search, SearchAgent)
            ms, played = timed(
                args.agent, search if way == "batched" else row_by_row(search), deals, args.deals
            )
            times[way].append(ms)
            hands.append(played)
        for key in hands[0]:
            if not np.array_equal(hands[0][key], hands[1][key]):
                raise SystemExit(f"the two ways played different hands ({key}): a bug")
        for name in others:
            times[name].append(timed(args.agent, make_agent(name, seed=0), deals, args.deals)[0])
        load.append(os.getloadavg()[0])
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{args.agent} vs {args.search}, {args.deals} deals of test_v1, {args.repeats} repeats")
    for k, v in med.items():
        print(
            f"  {k:>12}: {v:8.1f} ms/deal (median; runs {', '.join(f'{x:.1f}' for x in times[k])})"
        )
    print(f"  ratio row by row / batched: {med['row by row'] / med['batched']:.2f}x (same hands)")
    if others:
        rest = sum(med[k] for k in others)
        before, after = rest + med["row by row"], rest + med["batched"]
        print(
            f"  protocol, ms per deal over the panel: {before:.1f} row by row, {after:.1f} "
            f"batched: {before / after:.2f}x shorter"
        )
    print(f"  load average (1 min) during the runs: {min(load):.2f} to {max(load):.2f}")


if __name__ == "__main__":
    main()
