"""The batched rollouts are the search agent's rollouts: the same value for every rollout,
and the same actions from ``SearchAgent.act_batch`` and ``act`` as from the Python
rollouts row by row (``_act_alone``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest

from agents import search_agent, search_rollouts
from agents.double_dummy import Solver
from agents.evaluation.arena import duel
from agents.registry import make_agent
from agents.search_agent import SearchAgent, SearchConfig, _rollout_value
from agents.search_rollouts import _solve_small, rollout_values
from butifarra_env.core.actions import mask_from_bits
from butifarra_env.core.cards import POINTS
from butifarra_env.core.observation import encode
from butifarra_env.core.options import Options
from butifarra_env.core.rules import legal_cards, partner_winning, random_deal, trick_state
from tests.helpers import endgame

Position = tuple[list[int], list[tuple[int, int]], int, int]
"""Hands (relative seats, 0 to move), the trick so far, a legal card of seat 0, trump."""


def positions(seed: int, k: int, obligada: bool) -> list[Position]:
    """``k`` positions reached by random legal play from random deals, at every depth."""
    rng = np.random.default_rng(seed)
    out: list[Position] = []
    while len(out) < k:
        h = random_deal(rng, 0)
        trump = int(rng.integers(0, 5))
        seat, trick = int(rng.integers(0, 4)), list[tuple[int, int]]()
        for _ in range(int(rng.integers(0, 44))):
            if len(trick) == 4:
                seat, trick = trick_state(trick, trump)[2], []
            led, win, ws = trick_state(trick, trump)
            legal = legal_cards(h[seat], led, win, partner_winning(ws, seat), trump, obligada)
            card = int(rng.choice([c for c in range(48) if legal >> c & 1]))
            h[seat] ^= 1 << card
            trick.append((seat, card))
            seat = (seat + 1) & 3
        if len(trick) == 4:
            seat, trick = trick_state(trick, trump)[2], []
        hands = [h[(seat + s) & 3] for s in range(4)]
        rel = [((s - seat) & 3, c) for s, c in trick]
        led, win, ws = trick_state(rel, trump)
        legal = legal_cards(hands[0], led, win, partner_winning(ws, 0), trump, obligada)
        out.append((hands, rel, int(rng.choice([c for c in range(48) if legal >> c & 1])), trump))
    return out


def batched(pos: list[Position], endgame: int, obligada: bool) -> np.ndarray:
    hands = np.zeros((len(pos), 4), dtype=np.uint64)
    cols = []
    for i, (h, trick, card, trump) in enumerate(pos):
        hands[i] = [h[0] ^ (1 << card), *h[1:]]
        after = [*trick, (0, card)]
        cols.append((*trick_state(after, trump), len(after), sum(POINTS[c] for _, c in after)))
    led, win, ws, n, pts = np.array(cols).T
    trumps = np.array([p[3] for p in pos])
    return rollout_values(hands, led, win, ws, n, pts, trumps, endgame, obligada)


@pytest.mark.parametrize("obligada", [False, True])
@pytest.mark.parametrize("endgame", [0, 1, 2, 3])
def test_rollout_values_equal_the_python_rollouts(endgame: int, obligada: bool) -> None:
    pos = positions(10 * endgame + obligada, 400, obligada)
    want = [
        _rollout_value(list(h), list(t), c, trump, endgame, Solver(trump, obligada), obligada)
        for h, t, c, trump in pos
    ]
    got = batched(pos, endgame, obligada)
    assert got.tolist() == want
    assert len(set(want)) > 20  # the positions are varied, not one value


@pytest.mark.parametrize("obligada", [False, True])
@pytest.mark.parametrize("tricks", [1, 2])
def test_the_enumerated_endgame_is_the_double_dummy_value(tricks: int, obligada: bool) -> None:
    rng = np.random.default_rng(tricks + 2 * obligada)
    rows, leaders, trumps, want = [], [], [], []
    for _ in range(300):
        cards = rng.permutation(48)[: 4 * tricks]
        hands = [sum(1 << int(c) for c in cards[s::4]) for s in range(4)]
        leader, trump = int(rng.integers(0, 4)), int(rng.integers(0, 5))
        rows.append(hands)
        leaders.append(leader)
        trumps.append(trump)
        want.append(Solver(trump, obligada).solve(hands, leader))
    got = _solve_small(
        np.array(rows, dtype=np.uint64), np.array(leaders), tricks, np.array(trumps), obligada
    )
    assert got.tolist() == want
    assert len(set(want)) > 5


@pytest.fixture
def always_batched(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batch every rollout, however few (the agent batches only where it pays)."""
    monkeypatch.setattr(search_agent, "BATCH_ROLLOUTS_MIN", (1, 1, 1, 1))


def _row_by_row(agent: SearchAgent) -> SearchAgent:
    """The agent deciding one row at a time with the Python rollouts (the reference)."""

    def act_batch(obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        rows = [agent._act_alone(obs[i], masks[i]) for i in range(len(obs))]
        return np.array(rows, dtype=np.int64)

    setattr(agent, "act_batch", act_batch)  # noqa: B010 (an instance attribute shadows the method)
    return agent


@pytest.mark.parametrize(
    ("spec", "options"),
    [
        ("search:samples=3,endgame=2,bidding=rule", None),
        ("search:samples=2,endgame=0,bidding=rule", Options(obligada=True)),
        ("search:samples=2,endgame=3,bidding=rule", None),
    ],
)
@pytest.mark.usefixtures("always_batched")
def test_act_batch_plays_what_act_plays(spec: str, options: Options | None) -> None:
    results = []
    for by_row in (False, True):
        agent = make_agent(spec, seed=5)
        assert isinstance(agent, SearchAgent)
        player = _row_by_row(agent) if by_row else agent
        results.append(duel(player, "rule", 6, seed=3, options=options))
    fast, slow = results
    for key, column in slow.hands.items():
        assert np.array_equal(fast.hands[key], column), key
    assert len(set(slow.hands["diff_a"].tolist())) > 3  # hands were played out, not one value


@pytest.mark.usefixtures("always_batched")
def test_act_batch_with_the_bidding_prior_plays_what_act_plays() -> None:
    pytest.importorskip("torch")
    results = []
    for by_row in (False, True):
        agent = make_agent("search:samples=2,endgame=2,bidding=ppo-r1", seed=1)
        assert isinstance(agent, SearchAgent) and agent.config.infer == 4
        results.append(duel(_row_by_row(agent) if by_row else agent, "rule", 4, seed=8))
    for key, column in results[1].hands.items():
        assert np.array_equal(results[0].hands[key], column), key


def _clock(ticks: Iterator[int]) -> Callable[[], float]:
    return lambda: float(next(ticks))


@pytest.mark.usefixtures("always_batched")
@pytest.mark.parametrize("endgame_tricks", [0, 2, 3])
def test_act_on_one_observation_plays_what_the_python_rollouts_play(endgame_tricks: int) -> None:
    """Several decisions in a row from one agent each way: the cards and the random
    numbers used (the next decision's deals depend on them) stay the same."""
    config = SearchConfig(samples=6, endgame=endgame_tricks, bidding="rule")
    batched_agent, python_agent = SearchAgent(config, seed=4), SearchAgent(config, seed=4)
    for seed in range(12):
        game, _ = endgame(seed, 5 + seed % 7)
        obs, mask = encode(game, game.to_move), mask_from_bits(game.legal)
        assert batched_agent.act(obs, mask) == python_agent._act_alone(obs, mask)
        assert batched_agent.stats.samples == python_agent.stats.samples == 6
        assert batched_agent.stats.candidates == python_agent.stats.candidates


def test_act_batch_with_a_budget_searches_row_by_row() -> None:
    """A budget's clock is read between rollouts, so the batch goes row by row through
    ``act``, as many readings of a fake clock as searching the rows one at a time takes."""
    rows = [endgame(seed, 6) for seed in range(4)]
    obs = np.stack([encode(game, game.to_move) for game, _ in rows])
    masks = np.stack([mask_from_bits(game.legal) for game, _ in rows])
    readings = []
    for by_row in (False, True):
        ticks = iter(range(10**6))
        agent = SearchAgent(SearchConfig(samples=40, budget=30.0, bidding="rule"), seed=2)
        agent.clock = _clock(ticks)  # each reading a second later
        if by_row:
            _row_by_row(agent)
        actions = agent.act_batch(obs, masks)
        readings.append((actions.tolist(), next(ticks), agent.stats.samples))
    assert readings[0] == readings[1]
    assert 0 < readings[0][2] < 40  # the budget, not the sample count, ended the search


def test_many_rollouts_are_played_in_chunks_with_the_same_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pos = positions(77, 200, False)
    whole = batched(pos, 2, False)
    monkeypatch.setattr(search_rollouts, "ROLLOUT_CHUNK", 7)  # 29 chunks, the last of 4
    assert batched(pos, 2, False).tolist() == whole.tolist()


# Recorded with the code before the batched rollouts and the faster sampler (91aab89): the
# first 24 deals of test_v1, release 6 (shipped as ppo then, ppo-r6 now) against the panel's
# search member, seed 0.
PANEL_POINTS_A = [
    23, 39, 50, 26, 32, 10, 19, 72, 11, 41, 49, 38, 32, 41, 41, 32, 33, 40, 34, 38, 29, 43, 29, 47,
    26, 43, 13, 62, 46, 22, 43, 24, 35, 43, 37, 35, 56, 16, 40, 23, 38, 43, 37, 29, 29, 40, 42, 30,
]  # fmt: skip
PANEL_DIFF_A = [
    -13, 6, 28, -10, -8, -26, -17, 36, -50, 10, 13, 2, -4, 5, 5, -4, -3, 4, -2, 4, -7, 7, -14,
    11, -10, 7, -23, 52, 10, -14, 7, -12, -1, 7, 1, -1, 40, -20, 8, -26, 2, 7, 1, -7, -14, 4, 6,
    -6,
]  # fmt: skip


def test_the_panel_search_member_plays_the_hands_protocol_1_recorded() -> None:
    """Protocol 1's cards stay reproducible: the panel member, batched as the arena calls
    it, plays these hands card for card as the code of the published cards did."""
    pytest.importorskip("torch")
    from agents.evaluation.deal_sets import load_deal_set
    from agents.evaluation.protocol import PANEL_SEARCH

    search = make_agent(PANEL_SEARCH, seed=0)
    result = duel(make_agent("ppo-r6", seed=0), search, 24, seed=0, deals=load_deal_set("test"))
    assert result.hands["points_a"].tolist() == PANEL_POINTS_A
    assert result.hands["diff_a"].tolist() == PANEL_DIFF_A
