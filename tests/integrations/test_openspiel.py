"""The OpenSpiel game ``python_butifarra``: OpenSpiel's own checks, move-for-move agreement
with ``butifarra_v0``, the consistent resampler and an ISMCTS bot that plays and wins.

Tests that need OpenSpiel skip without it (``pip install open_spiel``); the hidden-card
sampling functions are framework-free and always run.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from butifarra_env.core.cards import N_CARDS, SUIT_MASK, cards_of
from butifarra_env.core.errors import IllegalActionError
from butifarra_env.core.game import Game
from butifarra_env.core.options import Options
from butifarra_env.core.rules import DEAL_ORDER, random_deal
from butifarra_env.core.sampling import deal_consistent, known_absent
from tests.extras import need

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = {"obligada": True, "linear_doubling": True, "butifarra_max_doubling_level": 2}
"""Every regional variant of docs/RULES.md on, as OpenSpiel parameters."""


def _openspiel() -> tuple[Any, ModuleType]:
    """pyspiel and the integration module (the test skips without OpenSpiel)."""
    pyspiel = need("pyspiel")
    from butifarra_env.integrations import openspiel

    return pyspiel, openspiel


def _chance_outcomes(dealer: int, hands: list[int], random_dealer: bool) -> list[int]:
    """The chance actions that deal ``hands`` with ``dealer`` (written from rules.DEAL_ORDER:
    the r-th player after the dealer receives the deck positions DEAL_ORDER[r])."""
    deck = [-1] * N_CARDS
    for r, positions in enumerate(DEAL_ORDER):
        for p, c in zip(positions, cards_of(hands[(dealer + 1 + r) % 4]), strict=True):
            deck[p] = c
    return ([dealer] if random_dealer else []) + deck


def _random_position(game: Any, seed: int, player_moves: int) -> Any:
    """A state after a random deal and ``player_moves`` random player actions."""
    rng = np.random.default_rng(seed)
    state = game.new_initial_state()
    while state.is_chance_node():
        outcomes = state.chance_outcomes()
        state.apply_action(outcomes[int(rng.integers(len(outcomes)))][0])
    for _ in range(player_moves):
        if state.is_terminal():
            break
        legal = state.legal_actions()
        state.apply_action(legal[int(rng.integers(len(legal)))])
    return state


# --------------------------------------------------------------------------- registration
def test_the_package_does_not_import_openspiel() -> None:
    probe = "import butifarra_env.integrations, sys; print('pyspiel' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_import_registers_the_game_once() -> None:
    pyspiel, openspiel = _openspiel()
    openspiel.register()  # again: harmless
    assert pyspiel.registered_names().count("python_butifarra") == 1
    game = pyspiel.load_game("python_butifarra")
    assert game.num_players() == 4
    assert game.num_distinct_actions() == 56
    assert game.observation_tensor_shape() == [491]
    assert game.max_chance_outcomes() == 48
    assert game.max_game_length() == 2 + 2 * 4 + 48
    assert (game.min_utility(), game.max_utility()) == (-36 * 2 * 16, 36 * 2 * 16)
    t = game.get_type()
    assert t.provides_information_state_string and not t.provides_information_state_tensor


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"max_doubling_level": 5}, "max_doubling_level"),
        ({"butifarra_base": 3}, "butifarra_base"),
        ({"first_dealer": 4}, "first_dealer"),
        ({"reward_scale": 0.0}, "reward_scale"),
        ({"butifarra_max_doubling_level": 5}, "butifarra_max_doubling_level must be an int 0-4"),
        ({"butifarra_max_doubling_level": -2}, "or -1 for the same as max_doubling_level"),
        (
            {"max_doubling_level": 2, "butifarra_max_doubling_level": 3},
            "cannot be above max_doubling_level=2",
        ),
    ],
)
def test_bad_parameters_are_named(params: dict[str, Any], words: str) -> None:
    pyspiel, _ = _openspiel()
    with pytest.raises(ValueError, match=words):
        pyspiel.load_game("python_butifarra", params)


def test_variant_parameters_and_their_utility_bounds() -> None:
    pyspiel, _ = _openspiel()
    with pytest.raises(pyspiel.SpielError, match="obligada"):  # OpenSpiel checks the type
        pyspiel.load_game("python_butifarra", {"obligada": "yes"})
    game = pyspiel.load_game("python_butifarra", VARIANTS)
    assert game.options.obligada and game.options.linear_doubling
    assert game.options.butifarra_max_doubling_level == 2
    # a butifarra recontrada (x2 x 3) beats a suit at Verraca (x5): 36 x 6
    assert (game.min_utility(), game.max_utility()) == (-216, 216)
    same = pyspiel.load_game("python_butifarra", {"butifarra_max_doubling_level": -1})
    assert same.options.butifarra_max_doubling_level is None
    assert same.max_utility() == 36 * 2 * 16


# --------------------------------------------------------------------------- OpenSpiel's tests
@pytest.mark.parametrize(
    "params",
    [
        {},
        {"max_doubling_level": 0, "butifarra_base": 1, "first_dealer": 2, "reward_scale": 0.25},
        {"obligada": True, "linear_doubling": True, "butifarra_max_doubling_level": 2},
    ],
)
def test_openspiel_random_simulation_test(params: dict[str, Any]) -> None:
    pyspiel, _ = _openspiel()
    game = pyspiel.load_game("python_butifarra", params)
    pyspiel.random_sim_test(game, num_sims=8, serialize=True, verbose=False)


def test_rl_environment_plays_a_hand_on_the_observation_tensor() -> None:
    _openspiel()
    from open_spiel.python import rl_environment

    env = rl_environment.Environment(
        "python_butifarra", chance_event_sampler=rl_environment.ChanceEventSampler(seed=3)
    )
    assert env.observation_spec()["info_state"] == (491,)
    step = env.reset()
    rng = np.random.default_rng(0)
    while not step.last():
        player = step.observations["current_player"]
        legal = step.observations["legal_actions"][player]
        step = env.step([legal[int(rng.integers(len(legal)))]])
    assert sum(step.rewards) == 0 and step.rewards[0] == step.rewards[2] == -step.rewards[1]


# --------------------------------------------------------------------------- vs butifarra_v0
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"max_doubling_level": 0, "butifarra_base": 1},
        {"max_doubling_level": 2, "first_dealer": 3, "reward_scale": 0.5},
        {"obligada": True, "linear_doubling": True, "butifarra_max_doubling_level": 2},
        {"obligada": True, "linear_doubling": True, "butifarra_max_doubling_level": 0},
    ],
    ids=["default", "no-doubling-base1", "lvl2-dealer3-scale", "variants", "variants-cap0"],
)
def test_move_for_move_against_butifarra_v0(options: dict[str, Any]) -> None:
    pyspiel, _ = _openspiel()
    from butifarra_env import butifarra_v0

    params = {**options}
    if "first_dealer" not in params:
        params["first_dealer"] = -1
    game = pyspiel.load_game("python_butifarra", params)
    env = butifarra_v0.raw_env(**options)
    rng = np.random.default_rng(42)
    for seed in range(25):
        env.reset(seed=seed)
        outcomes = _chance_outcomes(
            env.game.dealer, list(env.game.initial_hands), "first_dealer" not in options
        )
        state = game.new_initial_state()
        for a in outcomes:
            assert state.is_chance_node()
            state.apply_action(a)
        steps = 0
        while True:
            for seat, agent in enumerate(env.possible_agents):
                assert np.array_equal(
                    state.observation_tensor(seat), env.observe(agent)["observation"]
                )
            if state.is_terminal():
                break
            agent = env.agent_selection
            assert state.current_player() == env.agent_name_mapping[agent]
            assert state.legal_actions() == env.legal_actions()
            action = env.legal_actions()[int(rng.integers(len(env.legal_actions())))]
            state.apply_action(action)
            env.step(action)
            steps += 1
        assert all(env.terminations.values())
        assert state.returns() == [env.rewards[a] for a in env.possible_agents]
        assert steps == len(env.game.actions)


def test_a_clone_shares_nothing_with_its_original() -> None:
    pyspiel, _ = _openspiel()
    state = _random_position(pyspiel.load_game("python_butifarra"), 4, 10)
    before = (str(state), state.history(), state.observation_tensor(0))
    clone = state.clone()
    assert str(clone) == before[0] and clone.history() == before[1]
    rng = np.random.default_rng(0)
    while not clone.is_terminal():
        legal = clone.legal_actions()
        clone.apply_action(legal[int(rng.integers(len(legal)))])
    assert (str(state), state.history(), state.observation_tensor(0)) == before
    assert not state.is_terminal()


def test_illegal_actions_are_refused() -> None:
    pyspiel, _ = _openspiel()
    state = _random_position(pyspiel.load_game("python_butifarra"), 0, 0)
    illegal = next(a for a in range(56) if a not in state.legal_actions())
    with pytest.raises((pyspiel.SpielError, IllegalActionError)):
        state.apply_action_with_legality_check(illegal)
    with pytest.raises(IllegalActionError, match="illegal action"):
        state.apply_action(illegal)


def test_dealing_observation_and_information_state() -> None:
    pyspiel, _ = _openspiel()
    from butifarra_env.core.observation import decode

    game = pyspiel.load_game("python_butifarra", {"first_dealer": 1})
    state = game.new_initial_state()
    for card in (5, 17, 30, 41, 2):  # positions 0-3 go to seat 2, position 4 to seat 3
        state.apply_action(card)
    seen = decode(np.asarray(state.observation_tensor(2), np.uint8))
    assert seen["hand"] == [5, 17, 30, 41]
    assert seen["dealer"] == 3  # seat 1 is three seats after seat 2
    assert decode(np.asarray(state.observation_tensor(3), np.uint8))["hand"] == [2]
    assert state.information_state_string(2) != state.information_state_string(0)
    # the same own cards with others' cards changed: the same information state
    other = game.new_initial_state()
    for card in (5, 17, 30, 41, 9):
        other.apply_action(card)
    assert other.information_state_string(2) == state.information_state_string(2)
    assert other.information_state_string(3) != state.information_state_string(3)


def test_information_state_keeps_the_order_of_play() -> None:
    pyspiel, _ = _openspiel()
    game = pyspiel.load_game("python_butifarra", {"max_doubling_level": 0})
    base = _random_position(game, 5, 1)  # trump chosen, play starts
    seat = base.current_player()
    first, second = base.legal_actions()[:2]
    a, b = base.clone(), base.clone()
    a.apply_action(first)
    b.apply_action(second)
    assert a.information_state_string(seat) != b.information_state_string(seat)
    assert a.information_state_string((seat + 2) % 4) != b.information_state_string((seat + 2) % 4)


# --------------------------------------------------------------------------- the resampler
def _check_resampled(original: Any, resampled: Any, player: int) -> None:
    """The resampled state keeps what ``player`` saw, and every hidden hand avoids what the
    plays so far rule out (with obligada, also the cards below a forced lowest card)."""
    g, r = original.game_state, resampled.game_state
    assert resampled.information_state_string(player) == original.information_state_string(player)
    assert r.actions == g.actions and r.played == g.played and r.dealer == g.dealer
    assert r.initial_hands[player] == g.initial_hands[player]
    assert r.hands[player] == g.hands[player]
    absent = known_absent(g.actions, g.options.obligada)
    for seat in range(4):
        assert r.hands[seat].bit_count() == g.hands[seat].bit_count()
        assert r.initial_hands[seat] & g.played[seat] == g.played[seat]
        for suit in range(4):
            if (g.voids[seat] >> suit) & 1:
                assert r.hands[seat] & SUIT_MASK[suit] == 0
        assert r.hands[seat] & absent[seat] == 0
    assert r.hands[0] | r.hands[1] | r.hands[2] | r.hands[3] == (
        g.hands[0] | g.hands[1] | g.hands[2] | g.hands[3]
    )


@pytest.mark.parametrize("params", [{}, VARIANTS], ids=["default", "variants"])
def test_resample_is_consistent_with_what_the_player_has_seen(params: dict[str, Any]) -> None:
    """Every resample replays the hand's actions on the new deal (an illegal one would
    raise), under the game's own rules: obligada's forced plays stay forced."""
    pyspiel, _ = _openspiel()
    game = pyspiel.load_game("python_butifarra", params)
    rng = np.random.default_rng(7)
    changed = voids_seen = 0
    for seed, moves in itertools.product(range(6), (0, 3, 14, 27, 40, 60)):
        state = _random_position(game, seed, moves)
        g = state.game_state
        voids_seen += sum(v != 0 for v in g.voids)
        for player in range(4):
            resampled = state.resample_from_infostate(player, rng.random)
            _check_resampled(state, resampled, player)
            changed += resampled.game_state.initial_hands != g.initial_hands
            assert resampled.is_terminal() == state.is_terminal()
    assert voids_seen > 20  # the positions did show voids to respect
    assert changed > 100  # and the hidden hands were dealt anew (144 resamples)


def test_resample_is_reproducible_with_a_seeded_sampler() -> None:
    pyspiel, _ = _openspiel()
    state = _random_position(pyspiel.load_game("python_butifarra"), 3, 20)
    player = state.current_player()

    def draw(seed: int) -> list[int]:
        sampler = pyspiel.UniformProbabilitySampler(seed, 0.0, 1.0)
        return state.resample_from_infostate(player, sampler).history()

    assert draw(1) == draw(1)
    assert len({tuple(draw(s)) for s in range(5)}) == 5


def test_resample_during_the_deal() -> None:
    pyspiel, _ = _openspiel()
    game = pyspiel.load_game("python_butifarra")
    state = game.new_initial_state()
    for a in [2, *range(10, 40)]:  # dealer 2, then 30 cards
        state.apply_action(a)
    resampled = state.resample_from_infostate(0, np.random.default_rng(0).random)
    assert resampled.dealer == 2 and resampled.is_chance_node()
    assert resampled.information_state_string(0) == state.information_state_string(0)
    assert resampled.history() != state.history()
    assert sorted(resampled.history()[1:]) != sorted(state.history()[1:])


def test_resample_checks_the_player() -> None:
    pyspiel, _ = _openspiel()
    state = _random_position(pyspiel.load_game("python_butifarra"), 0, 5)
    with pytest.raises(ValueError, match="player_id"):
        state.resample_from_infostate(4, np.random.default_rng(0).random)


# --------------------------------------------------------------------------- pure sampling
def test_deal_consistent_is_uniform_over_exactly_the_consistent_deals() -> None:
    cards = sum(1 << c for c in (0, 1, 2, 12, 13, 24, 25))
    sizes = [3, 2, 2]
    forbidden = [1 << 12 | 1 << 13, SUIT_MASK[2], 1 << 0]
    consistent = set()
    for owner in itertools.product(range(3), repeat=7):
        hands = [0, 0, 0]
        for c, o in zip(cards_of(cards), owner, strict=True):
            hands[o] |= 1 << c
        if [h.bit_count() for h in hands] == sizes and all(
            h & f == 0 for h, f in zip(hands, forbidden, strict=True)
        ):
            consistent.add(tuple(hands))
    assert len(consistent) > 5
    rng = np.random.default_rng(0)
    n = 400 * len(consistent)
    seen = Counter(tuple(deal_consistent(cards, sizes, forbidden, rng.random)) for _ in range(n))
    assert set(seen) == consistent
    assert max(seen.values()) < 1.25 * 400 and min(seen.values()) > 0.75 * 400


def test_deal_consistent_refuses_impossible_constraints() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="no deal"):  # three cards of suit 0, one hand open
        deal_consistent(0b111, [1, 2], [0, SUIT_MASK[0]], rng.random)
    with pytest.raises(ValueError, match="every hand"):
        deal_consistent(0b1, [1], [0b1], rng.random)
    with pytest.raises(ValueError, match="add up"):
        deal_consistent(0b11, [1, 2], [0, 0], rng.random)


def _replays(
    options: Options, dealer: int, hands: list[int], actions: list[tuple[int, int]]
) -> bool:
    """Are ``actions`` all legal with these hands? (the rules core decides)"""
    game = Game(options, dealer, hands)
    try:
        for _, a in actions:
            game.step(a)
    except IllegalActionError:
        return False
    return True


@pytest.mark.parametrize("obligada", [False, True], ids=["lliure", "obligada"])
def test_known_absent_is_exactly_what_makes_past_plays_legal(obligada: bool) -> None:
    """A re-deal of the hidden cards replays legally if and only if it avoids known_absent
    (with obligada, that includes the cards below each forced lowest card)."""
    options = Options(max_doubling_level=0, obligada=obligada)
    rng = np.random.default_rng(3)
    outcomes: Counter[bool] = Counter()
    for seed in range(40):
        deal_rng = np.random.default_rng(seed)
        dealer = int(deal_rng.integers(4))
        game = Game(options, dealer, random_deal(deal_rng, dealer))
        for _ in range(int(deal_rng.integers(2, 14))):  # the trump choice and some cards
            game.step(cards_of(game.legal)[int(deal_rng.integers(game.legal.bit_count()))])
        absent = known_absent(game.actions, obligada)
        hidden = [h for h in game.hands]
        unseen = hidden[0] | hidden[1] | hidden[2] | hidden[3]
        for _ in range(25):
            shuffled = [int(c) for c in rng.permutation(cards_of(unseen))]
            new = []
            for h in hidden:
                k = h.bit_count()
                new.append(sum(1 << c for c in shuffled[:k]))
                shuffled = shuffled[k:]
            initial = [n | p for n, p in zip(new, game.played, strict=True)]
            legal = _replays(options, dealer, initial, game.actions)
            avoids = all(n & a == 0 for n, a in zip(new, absent, strict=True))
            assert legal == avoids
            outcomes[legal] += 1
    assert outcomes[True] > 50 and outcomes[False] > 50  # both sides of the claim were tested


# --------------------------------------------------------------------------- ISMCTS
def test_ismcts_plays_legally_and_beats_random_on_duplicate_deals() -> None:
    """ISMCTS (25 simulations, one random rollout each) against uniform random on 10 deals,
    each played twice with the teams swapped: it must win at least 8 of them (a coin would
    do so 5.5% of the time; this bot won 23 of 24 deals when the test was written)."""
    pyspiel, _ = _openspiel()
    from open_spiel.python.algorithms import ismcts, mcts

    game = pyspiel.load_game("python_butifarra", {"max_doubling_level": 0})

    def play(deal: list[int], bot_team: int, seed: int) -> float:
        random_state = np.random.RandomState(seed)
        evaluator = mcts.RandomRolloutEvaluator(1, random_state)
        # uct_c in the unit of the returns: raw points, up to 72 in this game
        bot = ismcts.ISMCTSBot(game, evaluator, 72.0, 25, random_state=random_state)
        sampler = np.random.default_rng(seed).random
        bot.set_resampler(lambda state, player: state.resample_from_infostate(player, sampler))
        rng = np.random.default_rng(seed + 1000)
        state = game.new_initial_state()
        for a in deal:
            state.apply_action(a)
        while not state.is_terminal():
            legal = state.legal_actions()
            if state.current_player() % 2 == bot_team:
                action = int(bot.step(state))
            else:
                action = legal[int(rng.integers(len(legal)))]
            assert action in legal
            state.apply_action(action)
        return float(state.returns()[bot_team])

    margins = []
    for d in range(10):
        deal_rng = np.random.default_rng(100 + d)
        dealer = int(deal_rng.integers(4))
        deal = _chance_outcomes(dealer, random_deal(deal_rng, dealer), True)
        margins.append(play(deal, 0, 2 * d) + play(deal, 1, 2 * d + 1))
    assert sum(m > 0 for m in margins) >= 8, margins
    assert np.mean(margins) > 0, margins
