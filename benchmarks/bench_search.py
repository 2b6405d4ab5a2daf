"""Speed of the search agent's parts: the double-dummy solver on endgames and the agent's
time per card decision at a few settings. Medians over many positions.

    python benchmarks/bench_search.py [--positions 60] [--tricks 6] [--seed 0] [--best-moves]

Target (search-agent issue): the last 6 tricks solved in at most 10 ms median on one core.
``--best-moves`` times what the agent does once ``endgame`` tricks or fewer are left (every
legal card solved, :meth:`Solver.best_moves`) and prints the worst node count: the
measurement behind ``search_agent.ENDGAME_MAX`` (``--tricks 5 --positions 300 --seed 5000``,
then ``--tricks 6``; ``--tricks 7 --positions 30``). The last row, a 50 ms budget with up to
1000 samples, shows the decision time staying near the budget.
Positions: random hands played at random down to ``--tricks`` tricks left, every trump
(butifarra included), with 0-3 cards of the current trick already on the table.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from agents.double_dummy import Solver
from agents.search_agent import SearchConfig, SearchStats, choose_card
from butifarra_env.core.game import Game
from butifarra_env.core.observation import View, encode, pack_bits
from butifarra_env.core.options import Options
from butifarra_env.core.rules import random_deal


def endgame(seed: int, tricks_left: int) -> tuple[Game, list[tuple[int, int]]]:
    rng = np.random.default_rng(seed)
    game = Game(Options(max_doubling_level=0), seed % 4, random_deal(rng, seed % 4))
    game.step(48 + seed % 5)
    while len(game.tricks) < 12 - tricks_left:
        legal = game.legal_actions()
        game.step(legal[rng.integers(len(legal))])
    trick = []
    for _ in range(seed % 4):
        seat, legal = game.to_move, game.legal_actions()
        card = legal[rng.integers(len(legal))]
        game.step(card)
        trick.append((seat, card))
    return game, trick


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--positions", type=int, default=60)
    p.add_argument("--tricks", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--best-moves", action="store_true", help="solve every legal card (agent)")
    args = p.parse_args()

    times, nodes = [], []
    for i in range(args.positions):
        game, trick = endgame(args.seed + i, args.tricks)
        solver = Solver(game.trump)
        t = time.perf_counter()
        if args.best_moves:
            solver.best_moves(game.hands, game.to_move, trick)
        else:
            solver.solve(game.hands, game.to_move, trick)
        times.append(time.perf_counter() - t)
        nodes.append(solver.nodes)
    ms = sorted(1000 * t for t in times)
    what = "best moves" if args.best_moves else "solve"
    print(
        f"double-dummy {what}, last {args.tricks} tricks, {args.positions} positions: "
        f"median {statistics.median(ms):.2f} ms, 90th percentile {ms[int(0.9 * len(ms))]:.2f} ms, "
        f"worst {ms[-1]:.1f} ms, median nodes {statistics.median(nodes):.0f}, "
        f"worst nodes {max(nodes)}"
    )

    for label, cfg in (
        ("panel", SearchConfig(samples=4, endgame=2)),
        ("default", SearchConfig()),  # samples=12, endgame=3
        ("strong", SearchConfig(samples=32, endgame=4)),
        ("50 ms", SearchConfig(samples=1000, endgame=3, budget=0.05)),
    ):
        per: list[float] = []
        for i in range(args.positions // 3):
            game, _ = endgame(1000 + args.seed + i, 12 - (i % 11))
            view = View(pack_bits(encode(game, game.to_move)))
            stats = SearchStats()
            choose_card(view, game.legal, cfg, np.random.default_rng(i), stats=stats)
            per.append(stats.seconds)
        per.sort()
        print(
            f"search agent {label:<8} ({cfg.samples} samples, endgame {cfg.endgame}): "
            f"median {1000 * statistics.median(per):.1f} ms/decision, worst {1000 * per[-1]:.1f} ms"
        )


if __name__ == "__main__":
    main()
