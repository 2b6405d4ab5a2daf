"""The search agent in the arena: batched rollouts (``SearchAgent.act_batch``) against the
same agent searching row by row (``act`` per row, the code path before the batching), on
the same deals, timed in alternation, with the protocol's other panel members beside it.

    python benchmarks/bench_search_batch.py [--deals 64] [--repeats 3] [--agent ppo]
        [--search search:samples=4,endgame=2,bidding=ppo-r1] [--panel]
    python benchmarks/bench_search_batch.py --crossover [--repeats 5]

Each repeat plays ``--deals`` duplicate deals of ``test_v1`` between ``--agent`` and the
search spec (one process, one torch thread), once each way; both ways must give the same
hands (checked: the batching changes the speed, never a decision). Prints the median ms per
deal of each way, their ratio and the load average. ``--panel`` also times the protocol's other
panel members (random, rule, and its ``ppo``, which is ``ppo-r1``) against ``--agent`` on
the same deals, so that the protocol's time per deal follows: the sum over the panel.

``--crossover`` times ``rollout_values`` against the Python rollouts on the same positions
(random hands played at random to every depth, a legal card of the seat to move), for 8 to
512 rollouts at ``endgame`` 0 to 4: where the batch starts to pay is
``search_agent.BATCH_ROLLOUTS_MIN``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from agents.double_dummy import Solver
from agents.evaluation.arena import duel
from agents.evaluation.deal_sets import load_deal_set
from agents.evaluation.protocol import PANEL, PANEL_SEARCH
from agents.registry import make_agent
from agents.search_agent import SearchAgent, _rollout_value
from agents.search_rollouts import rollout_values
from butifarra_env.core.cards import POINTS, cards_of
from butifarra_env.core.rules import legal_cards, partner_winning, random_deal, trick_state


def row_by_row(agent: SearchAgent) -> SearchAgent:
    """The agent deciding row by row with the Python rollouts (the path before batching)."""

    def act_batch(obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        rows = [agent._act_alone(obs[i], masks[i]) for i in range(len(obs))]
        return np.array(rows, dtype=np.int64)

    setattr(agent, "act_batch", act_batch)  # noqa: B010 (an instance attribute shadows the method)
    return agent


def timed(agent: str, other: object, deals: list, n: int) -> tuple[float, dict]:
    start = time.perf_counter()
    result = duel(make_agent(agent, seed=0), other, n, seed=0, deals=deals)  # type: ignore[arg-type]
    return 1000 * (time.perf_counter() - start) / n, result.hands


def crossover(repeats: int) -> None:
    """Batched against Python rollouts by number of rollouts and ``endgame``."""
    rng = np.random.default_rng(0)
    positions = []
    for _ in range(512):
        hands, trump, seat = random_deal(rng, 0), int(rng.integers(0, 5)), 0
        trick: list[tuple[int, int]] = []
        for _ in range(int(rng.integers(0, 44))):
            if len(trick) == 4:
                seat, trick = trick_state(trick, trump)[2], []
            led, win, ws = trick_state(trick, trump)
            legal = legal_cards(hands[seat], led, win, partner_winning(ws, seat), trump)
            card = int(rng.choice(cards_of(legal)))
            hands[seat] ^= 1 << card
            trick.append((seat, card))
            seat = (seat + 1) & 3
        if len(trick) == 4:
            seat, trick = trick_state(trick, trump)[2], []
        rel = [hands[(seat + s) & 3] for s in range(4)]
        rel_trick = [((s - seat) & 3, c) for s, c in trick]
        led, win, ws = trick_state(rel_trick, trump)
        card = int(
            rng.choice(cards_of(legal_cards(rel[0], led, win, partner_winning(ws, 0), trump)))
        )
        positions.append((rel, rel_trick, card, trump))
    print("rollouts  endgame  python ms  batched ms  python / batched  (medians)")
    for endgame in range(5):
        for m in (8, 16, 32, 64, 128, 256, 512):
            pos = positions[:m]
            held = np.array([[h[0] ^ (1 << c), *h[1:]] for h, _, c, _ in pos], dtype=np.uint64)
            cols = []
            for _, t, c, trump in pos:
                after = [*t, (0, c)]
                cols.append(
                    (
                        *trick_state(after, trump),
                        len(after),
                        sum(POINTS[x] for _, x in after),
                        trump,
                    )
                )
            led, win, ws, n, pts, trumps = np.array(cols).T
            py, nb = [], []
            for _ in range(repeats):
                start = time.perf_counter()
                solvers: dict[int, Solver] = {}
                for h, t, c, trump in pos:
                    solver = solvers.setdefault(trump, Solver(trump))
                    _rollout_value(list(h), list(t), c, trump, endgame, solver)
                py.append(time.perf_counter() - start)
                start = time.perf_counter()
                rollout_values(held, led, win, ws, n, pts, trumps, endgame)
                nb.append(time.perf_counter() - start)
            a, b = statistics.median(py), statistics.median(nb)
            print(f"{m:8d}  {endgame:7d}  {1000 * a:9.2f}  {1000 * b:10.2f}  {a / b:16.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--deals", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--agent", default="ppo")
    p.add_argument("--search", default=PANEL_SEARCH)
    p.add_argument("--panel", action="store_true", help="time the other panel members too")
    p.add_argument("--crossover", action="store_true", help="rollouts alone, by batch size")
    args = p.parse_args()
    if args.crossover:
        crossover(args.repeats)
        print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
        return
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    deals = load_deal_set("test")
    load = [os.getloadavg()[0]]
    times: dict[str, list[float]] = {"batched": [], "row by row": []}
    others = tuple(spec for spec in PANEL.values() if spec != PANEL_SEARCH) if args.panel else ()
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
