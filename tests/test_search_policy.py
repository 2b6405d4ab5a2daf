"""The search agent's ``policy`` option: the bidding agent's card probabilities as a prior
added to the search's mean values (``search:policy=W``, points per nat)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from agents import make_agent
from agents.base import Agent
from agents.search_agent import SearchAgent, SearchConfig, card_groups, policy_bonus
from butifarra_env.core.actions import N_ACTIONS
from butifarra_env.core.observation import View, encode, pack_bits
from butifarra_env.core.rules import PHASE_PLAY
from tests.helpers import endgame


class Favourite(Agent):
    """A bidder whose card policy puts 0.9 on one legal card, the highest id (the rest spread
    evenly): what the search must play when the prior outweighs its values."""

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        return int(np.flatnonzero(action_mask)[-1])

    def action_probs_batch(self, observations: np.ndarray, masks: np.ndarray) -> np.ndarray:
        out = np.zeros((len(masks), N_ACTIONS))
        for i, m in enumerate(masks):
            legal = np.flatnonzero(m)
            out[i, legal] = 0.1 / max(len(legal) - 1, 1)
            out[i, legal[-1]] = 0.9 if len(legal) > 1 else 1.0
        return out


def positions(n: int) -> list[tuple[np.ndarray, np.ndarray, int]]:
    """Card decisions with several groups of cards to choose from (obs, mask, legal)."""
    out = []
    seed = 0
    while len(out) < n:
        game, _ = endgame(300 + seed, 4 + seed % 8)
        seed += 1
        view = View(pack_bits(encode(game, game.to_move)))
        if view.phase != PHASE_PLAY or len(card_groups(game.legal, view.unseen | view.hand)) < 2:
            continue
        obs = encode(game, game.to_move)
        mask = np.array([(game.legal >> a) & 1 for a in range(N_ACTIONS)], dtype=np.int8)
        out.append((obs, mask, game.legal))
    return out


def test_a_heavy_prior_plays_the_policys_card_and_none_leaves_the_search_alone() -> None:
    rows = positions(12)
    heavy = SearchAgent(SearchConfig(samples=4, endgame=2, policy=100), Favourite(), seed=0)
    plain = SearchAgent(SearchConfig(samples=4, endgame=2), Favourite(), seed=0)
    differ = 0
    for obs, mask, legal in rows:
        favourite = legal.bit_length() - 1
        view = View(pack_bits(obs))
        group = next(g for g in card_groups(legal, view.unseen | view.hand) if favourite in g)
        card = heavy.act(obs, mask)
        assert card == min(group)  # the favourite's group, played by its lowest card
        differ += plain.act(obs, mask) not in group
    assert differ >= 3  # the search alone often prefers another card


def test_batched_and_row_by_row_decisions_agree_with_the_prior() -> None:
    rows = positions(10)
    obs = np.stack([r[0] for r in rows])
    masks = np.stack([r[1] for r in rows])
    for weight in (0.0, 2.0):
        config = SearchConfig(samples=6, endgame=2, policy=weight)
        batched = SearchAgent(config, make_agent("ppo"), seed=3).act_batch(obs, masks)
        alone = SearchAgent(config, make_agent("ppo"), seed=3)
        assert batched.tolist() == [alone._act_alone(o, m) for o, m in zip(obs, masks, strict=True)]


def test_policy_bonus_is_the_weighted_log_of_each_groups_mass() -> None:
    probs = np.zeros(N_ACTIONS)
    probs[[3, 4, 20]] = [0.25, 0.25, 0.5]
    bonus = policy_bonus(probs, [[3, 4], [20]], 2.0)
    assert bonus == {3: 2.0 * math.log(0.5), 20: 2.0 * math.log(0.5)}
    assert policy_bonus(probs, [[7]], 1.0)[7] == math.log(1e-12)  # no mass: a floor, not -inf


def test_the_option_parses_and_needs_a_bidder_with_probabilities() -> None:
    agent = make_agent("search:samples=4,endgame=2,policy=2.5", seed=0)
    assert isinstance(agent, SearchAgent) and agent.config.policy == 2.5
    with pytest.warns(
        UserWarning, match=r"policy=3 .* bidding agent 'rule' has none: using policy=0"
    ):
        rule = make_agent("search:policy=3,bidding=rule", seed=0)
    assert isinstance(rule, SearchAgent) and rule.config.policy == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert SearchConfig.parse("").policy is None  # unset: resolved against the bidder
        quiet = make_agent("search:bidding=rule", seed=0)  # no weight set: no warning
    assert isinstance(quiet, SearchAgent) and quiet.config.policy == 0.0


def test_the_default_bidder_is_the_default_prior_and_a_named_bidder_has_none() -> None:
    """``search`` bids with release 12 and adds its card policy at weight
    :data:`DEFAULT_POLICY` (what measured better); naming a bidder, even the same one, turns
    the prior off unless ``policy`` is set, so the earlier figures' specs mean what they did.
    Under a variant release 12 cannot play, the rule-based fallback bids and the prior is off
    without a warning; back in the default game, both return."""
    from agents.search_agent import DEFAULT_POLICY
    from butifarra_env.core.options import Options

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        default = make_agent("search", seed=0)
        named = make_agent("search:bidding=ppo", seed=0)
        kept = make_agent("search:bidding=ppo-r6", seed=0)
        off = make_agent("search:policy=0", seed=0)
        assert isinstance(default, SearchAgent) and default.config.policy == DEFAULT_POLICY == 1
        assert isinstance(named, SearchAgent) and named.config.policy == 0.0
        assert isinstance(kept, SearchAgent) and kept.config.policy == 0.0
        assert isinstance(off, SearchAgent) and off.config.policy == 0.0
        default.set_options(Options(obligada=True))
        assert default.bidding is default.fallback and default.config.policy == 0.0
        default.set_options(Options())
        assert default.bidding is default.preferred and default.config.policy == DEFAULT_POLICY
    with pytest.raises(ValueError, match=r"policy=-1: must be a number from 0 \(off\) to 100"):
        SearchAgent(SearchConfig(), Favourite(), default_policy=-1)


def test_an_unset_weight_takes_the_agents_default_and_plays_like_it() -> None:
    """``default_policy`` is what an unset ``policy`` means: the same cards as setting it."""
    rows = positions(6)
    obs = np.stack([r[0] for r in rows])
    masks = np.stack([r[1] for r in rows])
    unset = SearchAgent(SearchConfig(samples=4, endgame=2), Favourite(), 5, default_policy=100)
    assert unset.config.policy == 100.0
    heavy = SearchAgent(SearchConfig(samples=4, endgame=2, policy=100), Favourite(), 5)
    plain = SearchAgent(SearchConfig(samples=4, endgame=2), Favourite(), 5)
    assert plain.config.policy == 0.0  # made directly, no default: no prior
    picks = unset.act_batch(obs, masks).tolist()
    assert picks == heavy.act_batch(obs, masks).tolist()
    assert picks != plain.act_batch(obs, masks).tolist()
