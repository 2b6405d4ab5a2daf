"""The batched rule-based player (agents.rule_batch) decides exactly as the scalar one.

``agents.rule_based.decide`` is the readable definition, one observation at a time, tested on
hand-built positions in tests/test_agents.py; ``decide_batch`` (what ``act_batch`` runs) must
return the same action on every row. The positions come from many hands of the batched engine
under several option sets, played by the rule agent, the random agent or a mix, so that every
phase and branch is met: bidding and delegating, every doubling level, leading and following
(loading the partner, taking, playing low). Counts per phase and per kind of decision are
asserted, so the comparison cannot pass on an empty or one-sided sample.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from agents import RandomAgent, RuleBasedAgent
from agents.rule_based import decide
from agents.rule_batch import decide_batch
from butifarra_env.core.actions import (
    BUTIFARRA,
    DELEGATE,
    DOUBLE,
    N_ACTIONS,
    PASS,
    TRUMP_BASE,
    bits_from_masks,
)
from butifarra_env.core.cards import N_CARDS
from butifarra_env.core.observation import OBS_SIZE, field, pack_bits_batch, scale_vector
from butifarra_env.core.rules import (
    PHASE_CHOOSE_TRUMP,
    PHASE_CHOOSE_TRUMP_DELEGATED,
    PHASE_DOUBLING,
    PHASE_HAND_OVER,
    PHASE_PLAY,
)
from butifarra_env.envs.batched import BatchedEnv

CONFIGS = (
    # (options, share of random moves): random play reaches every doubling level and odd
    # positions; rule-vs-rule play the positions the agent meets in training.
    ({"max_doubling_level": 4, "butifarra_base": 2}, 1.0),
    ({"max_doubling_level": 0, "butifarra_base": 1}, 0.0),
    ({"max_doubling_level": 2, "target_score": 60}, 0.3),
    ({"max_doubling_level": 3, "butifarra_base": 1, "target_score": 101}, 0.6),
    ({"max_doubling_level": 1}, 0.1),
)


def collect(
    options: dict[str, Any], random_share: float, num_envs: int, steps: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Every decision met in ``steps`` steps of ``num_envs`` hands of the batched engine,
    each move the random agent's with probability ``random_share``, else the rule agent's."""
    env = BatchedEnv(num_envs, seed=seed, **options)
    obs, mask, _ = env.reset()
    rule, rand = RuleBasedAgent(), RandomAgent(seed)
    rng = np.random.default_rng(seed)
    all_obs, all_masks = [], []
    for _ in range(steps):
        all_obs.append(obs)
        all_masks.append(mask)
        actions = rand.act_batch(obs, mask)
        if random_share < 1.0:
            actions = np.where(
                rng.random(num_envs) < random_share, actions, rule.act_batch(obs, mask)
            )
        obs, mask, *_ = env.step(actions)
    return np.concatenate(all_obs), np.concatenate(all_masks)


def positions(num_envs: int, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`collect` over every config, plus the first moves of many fresh deals (bidding
    and doubling are a few moves per hand)."""
    parts = [
        collect(options, share, num_envs, steps, seed + i)
        for i, (options, share) in enumerate(CONFIGS)
    ]
    for i, (options, share) in enumerate(CONFIGS):
        parts.append(collect(options, share, 4 * num_envs, 4, seed + 100 + i))
    return np.concatenate([o for o, _ in parts]), np.concatenate([m for _, m in parts])


@pytest.fixture(scope="module")
def few() -> tuple[np.ndarray, np.ndarray]:
    """About 10,000 positions of every phase, for the edge-case tests."""
    return positions(num_envs=24, steps=64, seed=5)


def scalar(obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """The reference: ``decide`` row by row."""
    rows = zip(pack_bits_batch(obs), bits_from_masks(masks), strict=True)
    return np.array([decide(bits, legal) for bits, legal in rows], dtype=np.int64)


def phases(obs: np.ndarray) -> np.ndarray:
    return field(obs, "phase").argmax(axis=1)


def assert_same(obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """decide_batch equals decide on every row (the first differing rows shown); returns the
    decisions."""
    expected = scalar(obs, masks)
    got = decide_batch(obs, masks)
    bad = np.flatnonzero(got != expected)
    assert not len(bad), (
        f"{len(bad)} of {len(obs)} rows differ, e.g. rows {bad[:5].tolist()}: batch "
        f"{got[bad[:5]].tolist()} vs decide {expected[bad[:5]].tolist()} (phases "
        f"{phases(obs[bad[:5]]).tolist()})"
    )
    return expected


def check_coverage(obs: np.ndarray, actions: np.ndarray, scale: int) -> None:
    """The sample meets every phase and kind of decision ``scale`` times over."""
    ph = phases(obs)
    play = ph == PHASE_PLAY
    on_table = (field(obs, "trick") != 0).sum(axis=1)
    assert play.sum() >= 45 * scale
    assert (play & (on_table == 0)).sum() >= 8 * scale  # leads
    for n in (1, 2, 3):
        assert (play & (on_table == n)).sum() >= 8 * scale  # second, third, fourth hand
    dealer = actions[ph == PHASE_CHOOSE_TRUMP]
    partner = actions[ph == PHASE_CHOOSE_TRUMP_DELEGATED]
    doubling = ph == PHASE_DOUBLING
    assert len(dealer) + len(partner) + doubling.sum() >= 2 * scale
    assert len(dealer) >= scale // 2 and len(partner) >= scale // 5 and doubling.sum() >= scale
    for a in (BUTIFARRA, DELEGATE, *range(TRUMP_BASE, TRUMP_BASE + 4)):
        assert (dealer == a).sum() >= scale // 100, f"dealer's {a} too rare"
    assert (partner >= TRUMP_BASE).all() and (partner <= BUTIFARRA).all()
    assert (actions[doubling] == DOUBLE).sum() >= scale // 20
    assert (actions[doubling] == PASS).sum() >= scale // 2
    levels = field(obs[doubling], "doubling_level").argmax(axis=1)
    assert set(levels.tolist()) == {0, 1, 2, 3}  # contrar .. Sant Vicenç still to answer


def test_batch_decides_like_the_scalar_rules_in_every_phase() -> None:
    obs, masks = positions(num_envs=160, steps=64, seed=11)
    assert len(obs) >= 50_000
    check_coverage(obs, assert_same(obs, masks), scale=1000)


def test_batch_decides_like_the_scalar_rules_on_many_hands() -> None:
    """The same comparison on ten times the positions (slow tier)."""
    obs, masks = positions(num_envs=800, steps=128, seed=2026)
    assert len(obs) >= 500_000
    check_coverage(obs, assert_same(obs, masks), scale=10_000)


def test_restricted_masks_and_the_first_legal_fallback(
    few: tuple[np.ndarray, np.ndarray],
) -> None:
    """Any non-empty subset of the legal actions, down to a single one: the scalar and batch
    paths agree, a single legal action is always played, and a heuristic choice outside the
    mask falls back to the first legal id."""
    obs, masks = few
    rng = np.random.default_rng(5)
    keep = (rng.random(masks.shape) < 0.5) & (masks != 0)
    single = rng.random(len(masks)) < 0.25  # a quarter of the rows keep one random action
    for i in np.flatnonzero(single):
        keep[i] = False
        keep[i, rng.choice(np.flatnonzero(masks[i]))] = True
    empty = ~keep.any(axis=1)
    keep[empty] = masks[empty] != 0
    sub = keep.astype(np.int8)
    got = assert_same(obs, sub)
    assert sub[np.arange(len(sub)), got].all()
    ones = sub.sum(axis=1) == 1
    assert ones.sum() >= 1000
    assert (got[ones] == sub[ones].argmax(axis=1)).all()
    # Bidding rows whose unrestricted choice was removed: the first legal id instead. (The
    # dealer's choice depends on the mask only through DELEGATE: rows that keep it.)
    free = decide_batch(obs, masks)
    ph = phases(obs)
    bidding = (ph == PHASE_DOUBLING) | (ph == PHASE_CHOOSE_TRUMP_DELEGATED)
    bidding |= (ph == PHASE_CHOOSE_TRUMP) & (sub[:, DELEGATE] == 1)
    fallback = bidding & (sub[np.arange(len(sub)), free] == 0)
    assert fallback.sum() >= 200
    assert (got[fallback] == sub[fallback].argmax(axis=1)).all()
    assert (got[bidding & ~fallback] == free[bidding & ~fallback]).all()


def test_rows_outside_the_deciding_phases_take_the_first_legal_id(
    few: tuple[np.ndarray, np.ndarray],
) -> None:
    weird = few[0][:40].copy()
    phase = field(weird, "phase")
    phase[:] = 0
    phase[:20, PHASE_HAND_OVER] = 1  # and rows 20-39 have no phase at all
    mask = np.zeros((40, N_ACTIONS), dtype=np.int8)
    mask[np.arange(40), np.arange(40) % N_ACTIONS] = 1
    mask[::3, PASS] = 1
    got = assert_same(weird, mask)
    assert (got == mask.argmax(axis=1)).all()


def test_act_batch_uses_the_batch_path_and_keeps_the_checks(
    few: tuple[np.ndarray, np.ndarray],
) -> None:
    obs, masks = few[0][:3000], few[1][:3000]
    agent = RuleBasedAgent()
    out = agent.act_batch(obs, masks)
    assert out.dtype == np.int64 and out.shape == (len(obs),)
    assert np.array_equal(out, scalar(obs, masks))
    # the float32 observation format decides the same
    as_float = obs.astype(np.float32) * scale_vector()
    assert np.array_equal(agent.act_batch(as_float, masks), out)
    assert agent.act_batch(obs[:0], masks[:0]).shape == (0,)
    no_legal = masks[:5].copy()
    no_legal[3] = 0
    with pytest.raises(ValueError, match="row 3 of the action mask has no legal action"):
        agent.act_batch(obs[:5], no_legal)
    with pytest.raises(ValueError, match="row 3 of the action mask has no legal action"):
        decide_batch(obs[:5], no_legal)
    with pytest.raises(ValueError, match=f"shape \\(N, {OBS_SIZE}\\)"):
        agent.act_batch(obs[:, :N_CARDS], masks)
    with pytest.raises(ValueError, match="expected observations"):
        decide_batch(obs[:, :N_CARDS], masks)
