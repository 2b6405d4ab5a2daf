"""One wording for every action (butifarra_env.core.narration), used by every program."""

from __future__ import annotations

import io

import numpy as np
import pytest

from agents import RuleBasedAgent
from butifarra.demo import play_one_hand
from butifarra.web.tables import Table as WebTable
from butifarra.web.tables import parse_setup
from butifarra_env.core.actions import BUTIFARRA, DELEGATE, DOUBLE, PASS, TRUMP_BASE
from butifarra_env.core.cards import parse_card
from butifarra_env.core.game import Game
from butifarra_env.core.narration import action_text, narrate
from butifarra_env.core.options import Options
from butifarra_env.core.rules import random_deal


def game(options: Options | None = None, dealer: int = 0) -> Game:
    rng = np.random.default_rng(0)
    return Game(options or Options(), dealer, random_deal(rng, dealer))


def test_cards_trump_delegation_and_pass_in_words() -> None:
    assert action_text(parse_card("9o"), 0, 1) == "plays 9o (manilla de oros)"
    assert action_text(parse_card("12b"), 0, 1) == "plays 12b (rey de bastos)"
    assert action_text(TRUMP_BASE + 2, 0, 1) == "chooses trump espadas"
    assert action_text(DELEGATE, 0, 1) == "delegates to the partner"
    assert action_text(PASS, 1, 2) == "passes (bé)"


@pytest.mark.parametrize("base", [1, 2])
def test_butifarra_is_priced_by_the_options(base: int) -> None:
    g = game(Options(butifarra_base=base))
    g.step(BUTIFARRA)
    assert narrate(g, BUTIFARRA) == f"sings butifarra (no trump, x{base})"


def test_each_doubling_level_by_its_catalan_name() -> None:
    g = game()
    g.step(TRUMP_BASE)  # oros: x1 before doubling
    said = []
    while (g.legal >> DOUBLE) & 1:  # each side raises in turn until the top level
        g.step(DOUBLE)
        said.append(narrate(g, DOUBLE))
    assert said == [
        "says contrar (multiplier x2)",
        "says recontrar (multiplier x4)",
        "says Sant Vicenç (multiplier x8)",
        "says Verraca (multiplier x16)",
    ]


def test_a_bad_action_id_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="action must be an int 0-55"):
        action_text(56, 0, 1)


def test_the_web_log_and_the_demo_use_the_same_words() -> None:
    setup = parse_setup({"seat": 0, "seed": 3}, ["rule"], 0)
    table = WebTable(setup, lambda spec, seed: RuleBasedAgent())
    view = table.view()
    table.act(view["legal"][0], view["n_actions"])
    log = table.view()["log"]
    assert log and all(e["text"] for e in log)
    g = table.hand.game
    for entry, (seat, action) in zip(log, g.actions, strict=False):
        assert entry["seat"] == seat and entry["action"] == action
        if action < 48:
            assert entry["text"] == action_text(action, 0, 1)  # a card's words need no state
    out = io.StringIO()
    play_one_hand([RuleBasedAgent()] * 4, 0, out)
    bids = [line.split(": ", 1)[1] for line in out.getvalue().splitlines() if ": " in line
            and line.startswith("player_")]  # fmt: skip
    assert bids and all(
        b.startswith(("chooses trump ", "sings butifarra", "delegates", "says ", "passes"))
        for b in bids
    )
