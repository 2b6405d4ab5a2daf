"""What calling the rules core's trick fold costs the two hottest loops, the reason they keep
an inlined copy of it (held to the function by ``tests/test_rules_trick.py``).

    python benchmarks/bench_trick.py [--tricks 20000] [--repeats 9] [--seed 0]

``rules.add_to_trick`` is the one trick fold of the project; ``Game._play_card`` (the bare
engine) and ``Solver._search`` (the double-dummy solver) inline it. This times, in
alternation and in CPU seconds (so other processes on a busy machine matter less), one card
folded into a trick by a call to the function and by the inlined form those loops use, and
the cost of one step of each loop on its own: a solver node (one card folded per node) and a
``Game.step`` on a card. It prints the extra cost of the call per card and that cost as a
share of a solver node and of an engine step (medians of the repeats).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable

import numpy as np
from bench_search import endgame  # same directory: the solver's benchmark positions

from agents.double_dummy import Solver
from butifarra_env.core.cards import SUIT, cards_of
from butifarra_env.core.game import Game
from butifarra_env.core.options import Options
from butifarra_env.core.rules import NO_SUIT, WINNERS, add_to_trick, random_deal

Tricks = list[tuple[int, list[tuple[int, int]]]]


def random_tricks(n: int, seed: int) -> Tricks:
    """``n`` tricks of four distinct random cards, random leader and trump (butifarra too)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        leader = rng.randrange(4)
        cards = rng.sample(range(48), 4)
        out.append((rng.randrange(5), [((leader + k) & 3, c) for k, c in enumerate(cards)]))
    return out


def fold_by_call(tricks: Tricks) -> int:
    """Every trick folded card by card with ``rules.add_to_trick``."""
    total = 0
    for trump, plays in tricks:
        led, win, win_seat = NO_SUIT, -1, -1
        for seat, card in plays:
            led, win, win_seat = add_to_trick((led, win, win_seat), seat, card, trump)
        total += win_seat
    return total


def fold_inlined(tricks: Tricks) -> int:
    """The same fold in the inlined form of ``Solver._search`` / ``Game._play_card``."""
    total = 0
    for trump, plays in tricks:
        beat = WINNERS[trump]
        led, win, win_seat = NO_SUIT, -1, -1
        for n, (seat, card) in enumerate(plays):
            if n == 0:
                led, win, win_seat = SUIT[card], card, seat
            elif (beat[win] >> card) & 1:
                led, win, win_seat = led, card, seat
            else:
                led, win, win_seat = led, win, win_seat
        total += win_seat
    return total


def solver_run(positions: list[tuple[Game, list[tuple[int, int]]]]) -> Callable[[], int]:
    def run() -> int:
        nodes = 0
        for game, trick in positions:
            solver = Solver(game.trump)
            solver.solve(game.hands, game.to_move, trick)
            nodes += solver.nodes
        return nodes

    return run


def engine_run(hands: int, seed: int) -> Callable[[], int]:
    """Replays of random hands (the actions chosen beforehand): only ``Game.step`` is timed."""
    rng = np.random.default_rng(seed)
    pick = random.Random(seed).randrange
    options = Options()
    games = []
    for h in range(hands):
        deal = random_deal(rng, h % 4)
        game = Game(options, h % 4, deal)
        while not game.is_over:
            legal = cards_of(game.legal)
            game.step(legal[pick(len(legal))])
        games.append((h % 4, deal, [a for _, a in game.actions]))

    def run() -> int:
        steps = 0
        for dealer, deal, actions in games:
            game = Game(options, dealer, deal)
            step = game.step
            for a in actions:
                step(a)
            steps += len(actions)
        return steps

    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tricks", type=int, default=20000, help="random tricks per fold timing")
    p.add_argument("--repeats", type=int, default=9, help="alternating rounds (medians)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.tricks < 1 or args.repeats < 1:
        p.error("--tricks and --repeats must be >= 1")

    tricks = random_tricks(args.tricks, args.seed)
    assert fold_by_call(tricks) == fold_inlined(tricks)  # the same fold, two forms
    solver = solver_run([endgame(args.seed + i, 5) for i in range(12)])
    engine = engine_run(60, args.seed)
    cards = 4 * len(tricks)
    per_card: dict[str, list[float]] = {"call": [], "inlined": []}
    per_node, per_step = [], []
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for r in range(args.repeats):
        for name in ("call", "inlined") if r % 2 == 0 else ("inlined", "call"):
            fold = fold_by_call if name == "call" else fold_inlined
            t = time.process_time()
            fold(tricks)
            per_card[name].append((time.process_time() - t) / cards)
        t = time.process_time()
        nodes = solver()
        per_node.append((time.process_time() - t) / nodes)
        t = time.process_time()
        steps = engine()
        per_step.append((time.process_time() - t) / steps)
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    call = statistics.median(per_card["call"])
    inlined = statistics.median(per_card["inlined"])
    extra = statistics.median(
        a - b for a, b in zip(per_card["call"], per_card["inlined"], strict=True)
    )
    node, step = statistics.median(per_node), statistics.median(per_step)
    ns = 1e9
    print(
        f"one card folded: rules.add_to_trick {call * ns:.0f} ns, inlined {inlined * ns:.0f} ns, "
        f"the call costs {extra * ns:.0f} ns more (median of {args.repeats})"
    )
    print(
        f"solver node {node * ns:.0f} ns: the call would add {100 * extra / node:.1f}%; "
        f"Game.step {step * ns:.0f} ns (cards and bids): about {100 * extra / step:.1f}% "
        f"per card play"
    )


if __name__ == "__main__":
    main()
