"""Invariants over thousands of random hands (hypothesis draws the seeds and options)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from butifarra_env import butifarra_v0
from butifarra_env.core.cards import N_CARDS
from butifarra_env.core.game import Game
from butifarra_env.core.observation import Observer, canonical, encode
from butifarra_env.core.options import Options
from butifarra_env.core.rules import random_deal
from butifarra_env.envs.replay import iter_replay

options_st = st.builds(
    Options,
    max_doubling_level=st.integers(0, 4),
    butifarra_base=st.sampled_from([1, 2]),
)


@settings(max_examples=2500, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), options=options_st)
def test_random_hand_invariants(seed: int, options: Options) -> None:
    rng = np.random.default_rng(seed)
    dealer = int(rng.integers(4))
    g = Game(options, dealer, random_deal(rng, dealer))
    seen = 0
    while not g.is_over:
        legal = g.legal_actions()
        assert legal, "the seat to move always has a legal action"
        a = legal[rng.integers(len(legal))]
        if a < N_CARDS:
            assert (g.hands[g.to_move] >> a) & 1  # only cards in hand
            assert not (seen >> a) & 1
            seen |= 1 << a
        g.step(a)
    assert seen == (1 << N_CARDS) - 1  # each card played exactly once
    assert sum(g.team_points) == 72 and sum(g.team_tricks) == 12
    assert sum(g.rewards) == 0 and g.rewards[0] == g.rewards[2] == -g.rewards[1]
    assert min(g.scores) == 0
    winners = [t for t in (0, 1) if g.team_points[t] > 36]
    assert bool(winners) == (max(g.scores) > 0)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), options=options_st)
def test_env_masks_zero_sum_and_replay_reproduces_every_observation(
    seed: int, options: Options
) -> None:
    env = butifarra_v0.raw_env(**options.to_dict())
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    logged = []
    while not all(env.terminations.values()):
        acting = env.agent_selection
        views = {a: env.observe(a) for a in env.agents}
        for a, v in views.items():
            assert v["action_mask"].any() == (a == acting)  # non-empty only for the mover
        logged.append({a: v["observation"] for a, v in views.items()})
        legal = np.flatnonzero(views[acting]["action_mask"])
        env.step(int(legal[rng.integers(len(legal))]))
    assert sum(env.rewards.values()) == 0
    for v in (env.observe(a) for a in env.agents):
        assert not v["action_mask"].any()  # terminal: no legal actions for anyone
    record = env.game_record()
    replayed = iter_replay(record)
    for i, step_env in enumerate(replayed):
        if i == len(logged):
            break
        for a, expected in logged[i].items():
            np.testing.assert_array_equal(step_env.observe(a)["observation"], expected)
    final = step_env  # after the last action
    assert final.game.team_points == env.game.team_points
    assert final.game.result() == env.game.result()


@settings(max_examples=200, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), options=options_st)
def test_incremental_observer_equals_reference_encoding(seed: int, options: Options) -> None:
    rng = np.random.default_rng(seed)
    g = Game(options, int(rng.integers(4)), random_deal(rng, 0))
    obs = Observer()
    obs.reset(g)
    while True:
        np.testing.assert_array_equal(obs.canon, canonical(g))
        for s in range(4):
            np.testing.assert_array_equal(obs.observe(s), encode(g, s))
        if g.is_over:
            break
        seat, legal = g.to_move, g.legal_actions()
        a = legal[rng.integers(len(legal))]
        g.step(a)
        obs.update(g, seat, a)
