"""Trump choice, the doubling chain, scoring and match mode (RULES.md phases 1-2, scoring)."""

from __future__ import annotations

import numpy as np
import pytest

from butifarra_env import butifarra_v0
from butifarra_env.core.actions import BUTIFARRA, DELEGATE, DOUBLE, PASS, TRUMP_BASE
from butifarra_env.core.errors import IllegalActionError
from butifarra_env.core.game import Game
from butifarra_env.core.options import Options
from butifarra_env.core.rules import (
    NO_TRUMP,
    PHASE_CHOOSE_TRUMP,
    PHASE_CHOOSE_TRUMP_DELEGATED,
    PHASE_DOUBLING,
    PHASE_PLAY,
    hand_scores,
    multiplier,
    random_deal,
)

TRUMP_ACTIONS = [48, 49, 50, 51, 52]


def new_game(dealer: int = 0, **options: object) -> Game:
    return Game(Options(**options), dealer, random_deal(np.random.default_rng(7), dealer))


# ------------------------------------------------------------------ phase 1: cantar
def test_dealer_may_choose_suit_butifarra_or_delegate() -> None:
    g = new_game(dealer=2)
    assert g.phase == PHASE_CHOOSE_TRUMP and g.to_move == 2
    assert g.legal_actions() == [*TRUMP_ACTIONS, DELEGATE]


def test_delegation_passes_to_partner_who_cannot_delegate_back() -> None:
    g = new_game(dealer=1)
    g.step(DELEGATE)
    assert g.phase == PHASE_CHOOSE_TRUMP_DELEGATED and g.to_move == 3 and g.delegated
    assert g.legal_actions() == TRUMP_ACTIONS
    with pytest.raises(IllegalActionError, match="delegate"):
        g.step(DELEGATE)


def test_partner_may_choose_butifarra_after_delegation() -> None:
    g = new_game(dealer=1)
    g.step(DELEGATE)
    g.step(BUTIFARRA)
    assert g.trump == NO_TRUMP and g.chooser == 3 and g.declaring_team == 1
    assert g.phase == PHASE_DOUBLING and g.to_move == 0  # defender after the chooser


def test_illegal_action_error_names_action_phase_and_legal_set() -> None:
    g = new_game(dealer=0)
    with pytest.raises(ValueError) as e:
        g.step(5)
    msg = str(e.value)
    assert "play" in msg and "choose_trump" in msg and "52 (butifarra)" in msg


# ------------------------------------------------------------------ phase 2: contrar
def test_first_defender_asked_is_the_one_after_the_chooser_then_partner() -> None:
    g = new_game(dealer=0)
    g.step(TRUMP_BASE + 1)  # seat 0 chooses copas
    assert g.phase == PHASE_DOUBLING and g.to_move == 1
    assert g.legal_actions() == [DOUBLE, PASS]
    g.step(PASS)
    assert g.to_move == 3  # the first defender's partner
    g.step(PASS)
    assert g.phase == PHASE_PLAY and g.to_move == 1 and g.level == 0  # the mano leads


def test_after_delegation_first_defender_follows_the_partner_who_chose() -> None:
    g = new_game(dealer=0)
    g.step(DELEGATE)
    g.step(TRUMP_BASE)  # seat 2 chooses
    assert g.to_move == 3


def test_a_double_passes_the_question_to_the_other_team_after_the_doubler() -> None:
    g = new_game(dealer=0)
    g.step(TRUMP_BASE)  # seat 0 declares
    g.step(PASS)  # seat 1 passes
    g.step(DOUBLE)  # seat 3 contra
    assert g.level == 1 and g.to_move == 0  # declarers asked, starting after seat 3
    g.step(PASS)
    assert g.to_move == 2
    g.step(DOUBLE)  # seat 2 recontra
    assert g.level == 2 and g.to_move == 3
    g.step(DOUBLE)  # seat 3 Sant Vicenç
    assert g.level == 3 and g.to_move == 0
    g.step(DOUBLE)  # seat 0 Verraca: the top, play starts at once
    assert g.level == 4 and g.phase == PHASE_PLAY and g.to_move == 1


def test_chain_ends_when_both_members_of_the_asked_team_pass() -> None:
    g = new_game(dealer=3)
    g.step(TRUMP_BASE + 2)  # seat 3 declares, defenders 0 then 2
    g.step(DOUBLE)  # seat 0 contra
    assert g.to_move == 1
    g.step(PASS)
    g.step(PASS)  # seats 1 and 3 pass
    assert g.phase == PHASE_PLAY and g.level == 1 and g.to_move == 0


@pytest.mark.parametrize("cap", [0, 1, 2, 3, 4])
def test_doubling_is_capped_at_max_doubling_level(cap: int) -> None:
    g = new_game(dealer=0, max_doubling_level=cap)
    g.step(TRUMP_BASE)
    while g.phase == PHASE_DOUBLING:
        g.step(DOUBLE)
    assert g.phase == PHASE_PLAY and g.level == cap


# ------------------------------------------------------------------ scoring
# RULES.md phase 2: levels 0-4 (none, contrar, recontrar, Sant Vicenç, Verraca) on the base;
# a suit's base is x1, butifarra's x2 (x1 with butifarra_base=1).
MULTIPLIERS = {
    "suit": [1, 2, 4, 8, 16],
    "butifarra": [2, 4, 8, 16, 32],
    "butifarra, base 1": [1, 2, 4, 8, 16],
}
CASES = {"suit": (0, 2), "butifarra": (NO_TRUMP, 2), "butifarra, base 1": (NO_TRUMP, 1)}


@pytest.mark.parametrize("case", list(MULTIPLIERS))
def test_multiplier_table(case: str) -> None:
    trump, base = CASES[case]
    assert [multiplier(trump, level, base) for level in range(5)] == MULTIPLIERS[case]
    for suit in (1, 2, 3):  # every suit is x1
        assert multiplier(suit, 3) == 8


def test_multiplier_on_arrays_gives_the_same_table() -> None:
    trump = np.array([0, 3, NO_TRUMP, NO_TRUMP, 2, NO_TRUMP])
    level = np.array([0, 4, 0, 1, 2, 4])
    np.testing.assert_array_equal(multiplier(trump, level), [1, 16, 2, 4, 4, 32])
    np.testing.assert_array_equal(multiplier(trump, level, 1), [1, 16, 1, 2, 4, 16])


@pytest.mark.parametrize(
    ("points", "mult", "scores"),
    [
        ((36, 36), 4, (0, 0)),  # 36-36: nobody scores
        ((37, 35), 1, (1, 0)),
        ((30, 42), 2, (0, 12)),
        ((72, 0), 16, (576, 0)),
        ((0, 72), 32, (0, 1152)),  # butifarra at Verraca, capot
    ],
)
def test_hand_scores(points: tuple[int, int], mult: int, scores: tuple[int, int]) -> None:
    assert hand_scores(points, mult) == scores


def _play_out(game: Game, rng: np.random.Generator) -> None:
    while not game.is_over:
        legal = game.legal_actions()
        game.step(legal[rng.integers(len(legal))])


@pytest.mark.parametrize(("base", "mult", "score"), [(2, 4, 24), (1, 2, 12)])
def test_full_hand_scores_butifarra_with_base(base: int, mult: int, score: int) -> None:
    """Butifarra with contrar (x4, or x2 with base 1); this deal and play give the declaring
    team 42 points to 30, so it scores (42 - 36) x mult."""
    rng = np.random.default_rng(3)
    g = new_game(dealer=0, butifarra_base=base)
    g.step(BUTIFARRA)
    g.step(DOUBLE)  # contrar
    g.step(PASS)
    g.step(PASS)
    _play_out(g, rng)
    assert g.multiplier == mult
    assert g.team_points == [42, 30]
    assert g.scores == (score, 0)
    assert g.rewards == (score, -score, score, -score)


# ------------------------------------------------------------------ match mode
def test_match_to_101_rotates_dealer_and_ends_at_target() -> None:
    env = butifarra_v0.env(target_score=101, max_doubling_level=0)  # several hands
    env.reset(seed=11)
    first_dealer = env.unwrapped.game.dealer
    rng = np.random.default_rng(0)
    totals = {a: 0.0 for a in env.possible_agents}
    for agent in env.agent_iter():
        obs, rew, term, trunc, _ = env.last()
        totals[agent] += rew
        if term or trunc:
            env.step(None)
            continue
        legal = np.flatnonzero(obs["action_mask"])
        env.step(int(legal[rng.integers(len(legal))]))
    results = env.unwrapped.hand_results
    assert len(results) > 1
    assert [r["dealer"] for r in results] == [(first_dealer + i) % 4 for i in range(len(results))]
    assert [r["hand_number"] for r in results] == list(range(len(results)))
    running = [0, 0]
    for r in results[:-1]:
        running[0] += r["scores"][0]
        running[1] += r["scores"][1]
        assert max(running) < 101  # the match goes on only while nobody reached the target
    final = [sum(r["scores"][t] for r in results) for t in (0, 1)]
    assert max(final) >= 101 and min(final) < 101
    # rewards arrive at each hand end: over the match they add up to the score difference
    assert totals["player_0"] == pytest.approx(final[0] - final[1])
    assert totals["player_1"] == pytest.approx(final[1] - final[0])


def test_match_observation_carries_hand_number_and_scores() -> None:
    from butifarra_env.core.observation import decode

    env = butifarra_v0.raw_env(target_score=51)
    env.reset(seed=5)
    rng = np.random.default_rng(1)
    seen_second_hand = False
    while not all(env.terminations.values()):
        agent = env.agent_selection
        d = decode(env.observe(agent)["observation"])
        game = env.unwrapped.game
        mine = env.agent_name_mapping[agent] & 1
        assert d["hand_number"] == game.hand_number
        assert d["match_scores"] == [game.match_scores[mine], game.match_scores[1 - mine]]
        assert d["target_score"] == 51
        seen_second_hand |= game.hand_number >= 1
        legal = env.legal_actions()
        env.step(legal[rng.integers(len(legal))])
    assert seen_second_hand
