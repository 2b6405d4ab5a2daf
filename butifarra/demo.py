"""``butifarra demo``: the README's main job.

It plays and renders one hand (the shipped PPO agent and its partner against two
rule-based players), then measures the agents against each other over duplicate deals
(:func:`agents.evaluation.arena.duel`) and prints the table with 95% confidence intervals.

With the defaults (5,000 duplicate deals per pair, three pairs, two worker processes) it
takes about 35 seconds on a 2-core machine, the README's figure (measured 36 s wall clock,
69 s of CPU, at load 1.4; two to three times that when the cores are busy with other
work). Without torch or the checkpoint only the rule-vs-random pair runs: about 7 seconds.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

import numpy as np

from agents.base import Agent
from agents.evaluation.arena import duel, format_table
from agents.registry import make_agent
from agents.table import Table
from butifarra_env.core.cards import N_CARDS, card_name
from butifarra_env.core.game import Game
from butifarra_env.core.narration import narrate
from butifarra_env.core.options import Options
from butifarra_env.core.render import render_text, trump_text
from butifarra_env.core.rules import N_SEATS, draw_dealer, random_deal
from butifarra_env.core.validate import check_int


def _agents(seed: int, out: TextIO) -> dict[str, Agent]:
    agents: dict[str, Agent] = {
        "random": make_agent("random", seed),
        "rule": make_agent("rule", seed),
    }
    try:
        agents["ppo"] = make_agent("ppo", seed)
    except ValueError as e:  # no checkpoint or no torch: show what we can
        print(f"(PPO agent unavailable: {e}; showing the baselines only)", file=out)
    return agents


def play_one_hand(seat_agents: list[Agent], seed: int, out: TextIO) -> None:
    """Play one hand at the table driver and narrate it trick by trick. The cards are those
    ``butifarra_v0.raw_env().reset(seed=seed)`` deals."""
    rng = np.random.default_rng(seed)
    dealer = draw_dealer(rng, None)
    game = Game(Options(), dealer, random_deal(rng, dealer))
    table = Table(range(N_SEATS))
    table.start(game)
    names = [f"player_{s} ({seat_agents[s].name})" for s in range(N_SEATS)]
    print(render_text(game), file=out)
    print(file=out)
    for seat, action in table.moves(seat_agents):
        if action >= N_CARDS:  # bidding and doubling: cards are shown trick by trick
            print(f"{names[seat]}: {narrate(game, action)}", file=out)
        elif game.cards_in_trick == 0:  # this card closed a trick
            if len(game.tricks) == 1:
                print(f"Trump: {trump_text(game)}, multiplier x{game.multiplier}", file=out)
            leader, cards, winner = game.tricks[-1]
            order = [(leader + i) % N_SEATS for i in range(N_SEATS)]
            played = "  ".join(f"p{s}:{card_name(cards[s]):>3}" for s in order)
            print(f"trick {len(game.tricks):>2}: {played}  -> player_{winner}", file=out)
    res = game.result()
    assert res is not None  # the hand was played to the end
    print(
        f"Points: team A (0+2) {res['team_points'][0]}, team B (1+3) {res['team_points'][1]}; "
        f"scores x{res['multiplier']}: A {res['scores'][0]}, B {res['scores'][1]}",
        file=out,
    )


def run_demo(
    deals: int = 5000, seed: int = 0, workers: int | None = None, out: TextIO = sys.stdout
) -> int:
    """Narrate one hand, then print the duplicate-deal table; returns the exit status 0.

    Each row is ``duel(a, b, deals, seed)`` for that pair: the same numbers the arena gives.
    The arguments are checked before anything is printed (ValueError naming the argument).
    """
    deals = check_int("deals", deals, 1)
    seed = check_int("seed", seed, 0)
    workers = check_int("workers", workers, 1, none_ok=True)
    agents = _agents(seed, out)
    star = agents.get("ppo", agents["rule"])
    print(f"== One hand: {star.name} (seats 0 and 2) vs rule (seats 1 and 3) ==", file=out)
    play_one_hand([star, agents["rule"], star, agents["rule"]], seed, out)
    pairs = [("rule", "random")]
    if "ppo" in agents:
        pairs = [("ppo", "random"), ("ppo", "rule"), ("rule", "random")]
    workers = workers or min(2, os.cpu_count() or 1)
    print(
        f"\n== Duplicate deals: {deals} per pair (each dealt twice, seats swapped), seed {seed} ==",
        file=out,
    )
    rows = []
    for a, b in pairs:
        r = duel(agents[a], agents[b], deals, seed, workers=workers, names=(a, b))
        rows.append(
            [
                a,
                b,
                f"{r.mean:+.2f}",
                f"[{r.ci_low:+.2f}, {r.ci_high:+.2f}]",
                f"{100 * r.win_share:.1f}%",
            ]
        )
    headers = ["agent A", "agent B", "points/hand (A-B)", "95% CI", "hands won by A"]
    print(format_table(headers, rows), file=out)
    print(
        "\nNext: `butifarra play` to play a hand yourself, `butifarra arena --help`, "
        "`python -m train.ppo --help` to train.",
        file=out,
    )
    return 0
