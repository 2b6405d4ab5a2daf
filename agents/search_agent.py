"""A search agent: Perfect-Information Monte Carlo (PIMC) card play over sampled deals.

For each card decision it deals the hidden cards many times, consistently with everything
its seat has seen (:mod:`butifarra_env.core.sampling`: cards played and by whom, voids shown,
hand sizes), and scores each legal card on every sampled deal: a fast full-information
rollout to the endgame, then the exact result of the last tricks from the double-dummy
solver (:mod:`agents.double_dummy`); near the end of the hand the solver decides from the
card itself. The card with the best mean wins. Because the score difference of a hand is
``(my team's points - 36) x multiplier`` either way, maximising expected points is
maximising expected score.

Bidding (trump choice, delegation, doubling) is left to another agent (release 12 of the
PPO policy, shipped as ``ppo``, when torch is installed, else the rule-based player):
:attr:`SearchConfig.bidding`. By default that policy is also the card play's prior
(:attr:`SearchConfig.policy`): with it the search scores +1.84 points per hand more than with
release 6 bidding and no prior, the default before, and +1.16 more at
``samples=32,endgame=4`` (paired, both intervals above 0; docs/search.md). A spec that names
its bidder keeps the prior off unless it sets one, so earlier figures repeat as measured:
``bidding=ppo-r6`` (the default bidder before) and ``bidding=ppo-r1`` (the one before it).

Variants (RULES.md): told the game's options (:meth:`SearchAgent.set_options`), the search
simulates obligada play in its rollouts, the solver and the sampler (a seat that followed
under an opponent's card without beating it played its lowest card of the suit); linear
doubling and the butifarra cap change what a hand is worth, not which card play is best
(the score is ``(points - 36) x multiplier`` either way), so they reach the bidding agent,
which is told them too. A bidding agent that cannot play them (a PPO checkpoint trained
without them) makes the search agent refuse, except under ``bidding=auto``, which then bids
with the rule-based player.

The work per decision is a number of sampled deals (``samples``: deterministic for a
seed) and, optionally, a time budget in seconds (``budget``): sampling stops at whichever
comes first (a budget makes results depend on the machine's speed; its clock starts before
any deal is drawn). :class:`SearchConfig` bounds every option (:data:`SAMPLES_MAX`,
:data:`ENDGAME_MAX`, :data:`INFER_MAX`, :data:`BUDGET_MAX`), so no spec can hang or ask
for unbounded memory.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from numbers import Integral, Real
from typing import NoReturn

import numpy as np

from agents.base import Agent, UnsupportedVariant, check_batch
from agents.double_dummy import Solver
from agents.search_rollouts import CHEAP, CHEAP_WINNER, LOAD, RICH, rollout_values
from butifarra_env.core.actions import DELEGATE, TRUMP_BASE, bits_from_mask, mask_from_bits
from butifarra_env.core.cards import BELOW, POINTS, STRENGTH, SUIT, SUIT_MASK, cards_of
from butifarra_env.core.game import Game
from butifarra_env.core.observation import View, encode, field, field_slice, pack_bits
from butifarra_env.core.options import Options
from butifarra_env.core.rules import (
    EMPTY_TRICK,
    NO_SUIT,
    PHASE_PLAY,
    TRUMP_UNSET,
    TrickState,
    add_to_trick,
    card_bits_array,
    legal_cards,
    partner_winning,
    trick_state,
)
from butifarra_env.core.rules import WINNERS as _WINNERS
from butifarra_env.core.sampling import REJECTION_TRIES, HiddenDeal, known_absent

SAMPLES_MAX = 1000
"""The most ``samples``: without a budget, 1000 deals take seconds per decision (25 s measured
with ``endgame=5`` from 5 tricks left; the strong setting's 32 take 74 ms median,
docs/search.md), and the deals of one decision are held in memory at once."""
INFER_MAX = 16
"""The most ``infer``: a pool of at most 16 x 1000 deals, weighed in one bidding-policy batch
(about 110 MB more peak memory with the PPO bidder, measured)."""
ENDGAME_MAX = 5
"""The most ``endgame``: solving every legal card (what the agent does once ``endgame`` tricks
are left, and about what each sample's rollouts cost) took at worst 0.3 s (20,000 nodes) from
5 tricks left over 300 random positions, 2.6 s (176,000 nodes) from 6 over the same number,
and 11 s (1.1 million nodes) from 7 over 30, on this project's shared 2-core machine
(``benchmarks/bench_search.py --best-moves``); an exhaustive solve from 12 tricks does not
finish. See docs/search.md."""
BUDGET_MAX = 60.0
"""The longest ``budget`` in seconds (longer is taken for a mistake: milliseconds typed as
seconds are well below it, an hour per card is not a setting)."""
DEFAULT_INFER = 4
"""``infer`` when it is not given and the bidding agent has action probabilities (else 1)."""
DEFAULT_POLICY = 1.0
"""``policy`` when it is not given and the bidding agent is the registry's default one
(``bidding=auto``, release 12) with action probabilities (else 0): the weight measured with
release 12 (docs/search.md)."""
POLICY_MAX = 100.0
"""The largest ``policy`` weight (points per nat): at 100 a card the policy gives a tenth of
another's probability starts 230 points behind it, far more than a hand holds."""

BATCH_ROLLOUTS_MIN = (192, 144, 112, 256)
"""By ``endgame`` (0-3): the fewest rollouts in one call (a decision's samples x candidate
cards, summed over a batch's rows) that :func:`agents.search_rollouts.rollout_values` scores
faster than Python does one by one (``benchmarks/bench_search_batch.py --crossover``);
fewer are scored in Python. From ``endgame=4`` the solver is most of the time either way,
and they always are. The values, and so the decisions, are the same both ways."""

_RANGES = {
    "samples": f"an integer from 1 to {SAMPLES_MAX}",
    "endgame": f"an integer from 0 to {ENDGAME_MAX} (tricks)",
    "infer": f"an integer from 0 to {INFER_MAX}",
    "budget": f"a number of seconds from 0 (no limit) to {BUDGET_MAX:g}",
    "policy": f"a number from 0 (off) to {POLICY_MAX:g} (points per nat)",
    "bidding": "an agent spec (not search)",
}


@dataclass(frozen=True)
class SearchConfig:
    """The knobs of :class:`SearchAgent` (each one a ``key=value`` of the agent spec).

    Every value is checked when the config is made (:meth:`parse` or the constructor): a
    ValueError names the option, the value and the allowed range (:data:`SAMPLES_MAX`,
    :data:`ENDGAME_MAX`, :data:`INFER_MAX`, :data:`BUDGET_MAX`).
    """

    samples: int = 12
    """Sampled deals per card decision (the most; fewer when ``budget`` runs out first),
    1 to :data:`SAMPLES_MAX`."""
    budget: float = 0.0
    """Seconds per decision, finite, up to :data:`BUDGET_MAX`; 0 = no time limit (only
    ``samples``). Deals are drawn as the search goes, so the budget covers sampling too."""
    endgame: int = 3
    """Solve exactly once this many tricks (or fewer) are left; roll out before that. 0 to
    :data:`ENDGAME_MAX`."""
    bidding: str = "auto"
    """Agent spec for trump choice and doubling: "auto" (release 12 of the PPO policy, shipped
    as ``ppo``, if torch is there; else ``rule``), also the card prior by default
    (:attr:`policy`). Before: release 6 (``bidding=ppo-r6``) and, before it,
    release 1 (``bidding=ppo-r1``), the bidders of the figures measured then."""
    infer: int | None = None
    """Bidding inference: draw ``infer`` x ``samples`` deals and keep ``samples`` of them,
    favouring the deals under which the bidding agent's policy would have chosen trump (and
    delegated) as the hidden seats did; 0 or 1 = uniform deals. Unset (None):
    :data:`DEFAULT_INFER` when the bidding agent has action probabilities (PPO), else 1. It
    needs those probabilities: with a bidding agent that has none (the rule-based player)
    the agent uses 1 and warns when a larger value was set (:meth:`infer_for`)."""
    policy: float | None = None
    """The bidding agent's card policy as a prior, in points per nat: each legal card is
    ranked by its mean value over the samples plus ``policy`` x the log of the probability
    the bidding agent's policy gives it (the sum over its group of interchangeable cards).
    0 ranks by the search alone. Unset (None): the agent's ``default_policy`` if the bidding
    agent has action probabilities, else 0; that is :data:`DEFAULT_POLICY` for the registry's
    default bidder (``bidding=auto``) and 0 otherwise, so a spec that names its bidder
    repeats the figures measured without a prior. Like ``infer`` it needs a bidding agent
    with action probabilities (else 0, with a warning when set: :meth:`policy_for`); 0 to
    :data:`POLICY_MAX`."""

    def __post_init__(self) -> None:
        for key in ("samples", "endgame", "infer"):
            value = getattr(self, key)
            if key == "infer" and value is None:
                continue
            top = {"samples": SAMPLES_MAX, "endgame": ENDGAME_MAX, "infer": INFER_MAX}[key]
            low = 1 if key == "samples" else 0
            if isinstance(value, bool) or not isinstance(value, Integral):
                _refuse(key, value)
            number = int(value)  # numpy integers become ints
            if not low <= number <= top:
                _refuse(key, value)
            object.__setattr__(self, key, number)
        for key, most in (("budget", BUDGET_MAX), ("policy", POLICY_MAX)):
            real: float | None = getattr(self, key)
            if key == "policy" and real is None:
                continue
            if (
                isinstance(real, bool)
                or not isinstance(real, Real)
                or not math.isfinite(real)
                or not 0 <= real <= most
            ):
                _refuse(key, real)
            object.__setattr__(self, key, float(real))
        if not isinstance(self.bidding, str) or not self.bidding.strip():
            _refuse("bidding", self.bidding)
        if self.bidding.split(":", 1)[0].strip().lower() == "search":
            _refuse("bidding", self.bidding)

    @classmethod
    def parse(cls, text: str | None) -> SearchConfig:
        """``"samples=32,budget=0.2"`` -> a config; ValueError naming a bad key or value."""
        values: dict[str, object] = {}
        known = [f.name for f in fields(cls)]
        for item in (text or "").split(","):
            if not item.strip():
                continue
            key, sep, raw = item.partition("=")
            key = key.strip()
            if not sep or key not in known:
                raise ValueError(
                    f"search agent option {_shown(item.strip())}: use key=value with keys {known}"
                )
            raw = raw.strip()
            if key == "bidding":
                values[key] = raw
                continue
            try:
                values[key] = float(raw) if key in ("budget", "policy") else int(raw)
            except ValueError:
                _refuse(key, raw)
        return cls(**values)  # type: ignore[arg-type]

    def infer_for(self, bidding: Agent | None) -> int:
        """The ``infer`` the agent uses with this bidding agent: as set, or
        :data:`DEFAULT_INFER` when unset, if the bidding agent has action probabilities;
        else 1 (uniform deals: there is nothing to weigh them by), with a warning when a
        larger value was set explicitly."""
        if has_action_probs(bidding):
            return DEFAULT_INFER if self.infer is None else self.infer
        if self.infer is not None and self.infer > 1:
            name = getattr(bidding, "name", None) if bidding is not None else None
            warnings.warn(
                f"search agent option infer={self.infer} weighs deals by the bidding agent's "
                f"action probabilities, and the bidding agent {name!r} has none: using "
                "infer=1 (uniform deals)",
                UserWarning,
                stacklevel=4,
            )
        return 1 if self.infer is None or self.infer > 1 else self.infer

    def policy_for(self, bidding: Agent | None, default: float = 0.0) -> float:
        """The ``policy`` weight the agent uses with this bidding agent: as set if it has
        action probabilities, else 0 (with a warning when a weight was set); unset,
        ``default`` if it has them, else 0."""
        if self.policy is None:
            return default if has_action_probs(bidding) else 0.0
        if has_action_probs(bidding) or not self.policy:
            return self.policy
        name = getattr(bidding, "name", None) if bidding is not None else None
        warnings.warn(
            f"search agent option policy={self.policy:g} adds the bidding agent's card "
            f"probabilities, and the bidding agent {name!r} has none: using policy=0",
            UserWarning,
            stacklevel=4,
        )
        return 0.0

    def resolved(self, bidding: Agent | None, default_policy: float = 0.0) -> SearchConfig:
        """This config with ``infer`` and ``policy`` as the agent uses them with
        ``bidding`` (:meth:`infer_for`, :meth:`policy_for` with ``default_policy``)."""
        policy = self.policy_for(bidding, default_policy)
        return replace(self, infer=self.infer_for(bidding), policy=policy)


def has_action_probs(agent: Agent | None) -> bool:
    """Whether ``agent`` gives action probabilities (overrides
    :meth:`~agents.base.Agent.action_probs_batch`, whose default returns None)."""
    if agent is None:
        return False
    method = getattr(type(agent), "action_probs_batch", None)
    return method is not None and method is not Agent.action_probs_batch


def _refuse(key: str, value: object) -> NoReturn:
    raise ValueError(f"search agent option {key}={_shown(value)}: must be {_RANGES[key]}")


def _shown(value: object, limit: int = 40) -> str:
    """A value as typed, cut short; quoted with its control characters escaped when it has
    any (a message stays one readable line)."""
    try:
        text = value if isinstance(value, str) and value.isprintable() else repr(value)
    except ValueError:  # an int too long to print (Python's 4300-digit limit)
        text = f"<a {value.bit_length()}-bit integer>" if isinstance(value, int) else "<?>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class SearchAgent(Agent):
    """PIMC card play with a double-dummy endgame; bidding by another agent.

    ``config.infer`` is resolved against the bidding agent when the agent is made
    (:meth:`SearchConfig.infer_for`): :attr:`config` holds the value used. ``clock``
    (seconds, :func:`time.perf_counter` by default) is what the time budget is measured
    with; tests pass a fake one. :attr:`stats` describes the last searched card decision.
    ``fallback`` (optional) bids instead of ``bidding`` in a game whose options ``bidding``
    cannot play (:meth:`set_options`; the registry's ``bidding=auto`` passes the rule-based
    player). ``default_policy`` is the prior's weight when the config leaves ``policy`` unset
    (:meth:`SearchConfig.policy_for`): 0 unless given (the registry's ``bidding=auto`` gives
    :data:`DEFAULT_POLICY`).
    """

    name = "search"

    def __init__(
        self,
        config: SearchConfig | None = None,
        bidding: Agent | None = None,
        seed: int | None = None,
        clock: Callable[[], float] = time.perf_counter,
        fallback: Agent | None = None,
        default_policy: float = 0.0,
    ) -> None:
        config = config or SearchConfig()
        self.given = config
        """The config as given (``infer`` and ``policy`` unresolved), kept to resolve it again
        when the bidding agent changes (:meth:`set_options`)."""
        self.default_policy = SearchConfig(policy=default_policy).policy or 0.0  # checked
        self.config = config.resolved(bidding, self.default_policy)
        self.bidding = bidding
        self.preferred = bidding
        """The bidding agent asked for; :attr:`bidding` is :attr:`fallback` while the
        options are ones it cannot play."""
        self.fallback = fallback
        self.rng = np.random.default_rng(seed)
        self.clock = clock
        self.stats = SearchStats()
        self._bids: dict[tuple[object, ...], list[tuple[int, int, np.ndarray, np.ndarray]]] = {}
        """:class:`BiddingPrior`'s cache of rebuilt bidding decisions."""

    def reset(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)
        for bidder in (self.preferred, self.fallback):
            if bidder is not None:
                bidder.reset(seed)

    def set_options(self, options: Options) -> None:
        """Play the game of ``options``: its variants are simulated in the search (obligada
        play: :attr:`obligada`) and passed to the bidding agent. When the bidding agent
        refuses them (:class:`~agents.base.UnsupportedVariant`), :attr:`fallback` bids
        instead if there is one, else this agent refuses too, naming its bidding agent;
        nothing changes on a refusal."""
        if not isinstance(options, Options):
            super().set_options(options)  # the TypeError naming what was passed
        bidder = self.preferred
        if bidder is not None:
            try:
                bidder.set_options(options)
            except UnsupportedVariant as e:
                if self.fallback is None:
                    raise UnsupportedVariant(
                        self.name,
                        e.variants,
                        f"agent {self.name!r} cannot play these options: its bidding agent "
                        f"refuses them ({e}); choose one that can, e.g. "
                        "search:bidding=rule",
                    ) from e
                self.fallback.set_options(options)
                bidder = self.fallback
        super().set_options(options)
        if bidder is not self.bidding:
            self.config = self.given.resolved(bidder, self.default_policy)
            self.bidding = bidder

    @property
    def obligada(self) -> bool:
        """Whether the game the agent was told about (:meth:`set_options`) is played with
        obligada: the rollouts, the solver and the sampler then follow it."""
        return self.options is not None and self.options.obligada

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        if self.config.budget:
            return self._act_alone(observation, action_mask)
        return int(self._act_rows(np.asarray(observation)[None], np.asarray(action_mask)[None])[0])

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        """:meth:`act` row by row, the same actions, with the rollouts of every searched
        row scored together (:func:`agents.search_rollouts.rollout_values`) when there are
        enough of them to pay (:data:`BATCH_ROLLOUTS_MIN`).

        Rollouts use no random numbers, so each row's deals are drawn first, in row order
        exactly as :meth:`act` draws them one call at a time, and the rollouts of all rows
        follow. With a time ``budget`` (whose clock is read between rollouts) the rows are
        searched one by one. :attr:`stats` describes the last searched row; its ``seconds``
        are the batch's search time shared equally by the searched rows."""
        obs, masks = check_batch(observations, action_masks)
        if self.config.budget:
            return np.fromiter(
                (self._act_alone(obs[i], masks[i]) for i in range(len(obs))),
                dtype=np.int64,
                count=len(obs),
            )
        return self._act_rows(obs, masks)

    def _act_alone(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        """One decision, its rollouts in Python (:func:`choose_card`): what a time budget
        needs, and the reference the batched rollouts are tested against."""
        legal = bits_from_mask(action_mask)
        if not legal:
            raise ValueError("no legal action in the mask")
        view = View(pack_bits(observation))
        if view.phase != PHASE_PLAY:
            if self.bidding is None:
                raise ValueError("the search agent needs a bidding agent for this phase")
            return int(self.bidding.act(observation, action_mask))
        if not legal & (legal - 1):
            return legal.bit_length() - 1
        prior = self._prior(observation, view)
        self.stats = SearchStats()
        probs = self._policy_probs(observation[None], action_mask[None])
        return choose_card(
            view,
            legal,
            self.config,
            self.rng,
            clock=self.clock,
            stats=self.stats,
            prior=prior,
            obligada=self.obligada,
            policy_probs=None if probs is None else probs[0],
        )

    def _prior(
        self, observation: np.ndarray, view: View
    ) -> Callable[[Sequence[dict[int, int]]], np.ndarray | None] | None:
        """The bidding inference's deal weights for this decision (None: uniform deals)."""
        if self.bidding is None or (self.config.infer or 0) <= 1:
            return None
        return BiddingPrior(self.bidding, observation, view, self.options, self._bids).weights

    def _policy_probs(self, obs: np.ndarray, masks: np.ndarray) -> np.ndarray | None:
        """The bidding agent's action probabilities for these rows when ``policy`` asks for
        them (None: no prior)."""
        if not self.config.policy or self.bidding is None:
            return None
        return self.bidding.action_probs_batch(obs, masks)

    def _act_rows(self, obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """Decisions without a time budget: every row's deals drawn in turn, then their
        rollouts scored, together when there are enough of them."""
        start = self.clock()
        out = np.zeros(len(obs), dtype=np.int64)
        rows: list[_Searched] = []
        infer = DEFAULT_INFER if self.config.infer is None else self.config.infer
        for i in range(len(obs)):
            legal = bits_from_mask(masks[i])
            view = View(pack_bits(obs[i]))
            if not legal or view.phase != PHASE_PLAY or not legal & (legal - 1):
                out[i] = self._act_alone(obs[i], masks[i])  # bidding, one legal card, an error
                continue
            hidden, trick, groups = _setup(view, legal, self.obligada)
            drawn = [0]
            prior = self._prior(obs[i], view)
            deals = _draw_deals(hidden, self.config.samples, infer, self.rng, prior, drawn)
            rows.append(_Searched(i, view, trick, groups, deals, drawn[0]))
        if not rows:
            return out
        bonus: dict[int, dict[int, float]] = {}  # by row index: the policy prior
        at = [r.index for r in rows]
        weight = self.config.policy or 0.0  # resolved: a number
        probs = self._policy_probs(obs[at], masks[at]) if weight else None
        if probs is not None:
            for p, r in zip(probs, rows, strict=True):
                bonus[r.index] = policy_bonus(p, r.groups, weight)
        endgame = self.config.endgame
        rolled = [r for r in rows if r.view.hand.bit_count() > endgame]
        n_rollouts = sum(len(r.deals) * len(r.groups) for r in rolled)
        if endgame < len(BATCH_ROLLOUTS_MIN) and n_rollouts >= BATCH_ROLLOUTS_MIN[endgame]:
            values = _batch_values(rolled, endgame, self.obligada)
            for r, v in zip(rolled, values, strict=True):
                totals = dict(zip(r.candidates, v.sum(axis=0).tolist(), strict=True))
                out[r.index] = _best(r.groups, totals, len(r.deals), bonus.get(r.index))
            alone = [r for r in rows if r.view.hand.bit_count() <= endgame]
        else:
            alone = rows
        for r in alone:  # one row at a time, in Python
            totals = dict.fromkeys(r.candidates, 0)
            for dealt in r.deals:
                hands = [r.view.hand, dealt[1], dealt[2], dealt[3]]
                values1 = deal_values(
                    hands, r.trick, r.candidates, r.view.trump, endgame, self.obligada
                )
                assert values1 is not None  # no stop: every candidate is scored
                for c in r.candidates:
                    totals[c] += values1[c]
            out[r.index] = _best(r.groups, totals, len(r.deals), bonus.get(r.index))
        last = rows[-1]
        self.stats = SearchStats(
            samples=len(last.deals),
            seconds=(self.clock() - start) / len(rows),
            candidates=len(last.candidates),
            drawn=last.drawn,
        )
        return out


# --------------------------------------------------------------------------- card play


@dataclass
class SearchStats:
    """What the last card decision did (for tests and benchmarks)."""

    samples: int = 0
    """Deals searched (every candidate card scored on each)."""
    seconds: float = 0.0
    """Time of the decision by its clock, sampling included."""
    candidates: int = 0
    """Cards scored (one per group of equivalent cards)."""
    drawn: int = 0
    """Deals drawn from the sampler (the bidding inference's pools included)."""


DEAL_CHUNK_MAX = 8
"""With a time budget, deals are drawn in chunks of 1, 2, 4, then this many samples (each
chunk's bidding-inference pool weighed at once), the clock read between samples and cards."""


def choose_card(
    view: View,
    legal: int,
    config: SearchConfig,
    rng: np.random.Generator,
    clock: Callable[[], float] = time.perf_counter,
    stats: SearchStats | None = None,
    prior: Callable[[Sequence[dict[int, int]]], np.ndarray | None] | None = None,
    obligada: bool = False,
    policy_probs: np.ndarray | None = None,
) -> int:
    """The legal card with the best mean result over sampled deals (relative seats: 0 me).

    Equivalent cards (same suit and points, nothing still out between them) are scored once.
    ``clock`` is injectable so the time budget can be tested without real time. ``prior``
    (optional) weighs a pool of ``config.infer`` x ``samples`` consistent deals
    (:class:`BiddingPrior`); ``samples`` of them are then drawn, without replacement, in
    proportion to the weights.

    Without a budget every deal is drawn up front (deterministic for the seed). With one, the
    clock starts before sampling: deals are drawn a chunk at a time (:data:`DEAL_CHUNK_MAX`)
    and the search stops once 90% of the budget is spent, read after every sample and before
    every further card; a sample cut short is dropped, and the first sample is always
    finished (so there is always a choice). ``obligada``: the game is played with obligada
    (RULES.md, Variants), in the deals sampled and in the play simulated on them.
    ``policy_probs`` (a policy's 56 action probabilities here) add ``config.policy`` x their
    log to each card's mean (:func:`policy_bonus`).
    """
    start = clock()
    hidden, trick, groups = _setup(view, legal, obligada)
    candidates = [g[0] for g in groups]
    totals = dict.fromkeys(candidates, 0)
    infer = DEFAULT_INFER if config.infer is None else config.infer
    drawn = [0]
    limit = config.budget * 0.9

    def spent() -> bool:
        return bool(config.budget) and clock() - start >= limit

    deals: Iterator[dict[int, int]]
    if config.budget:
        deals = _deal_chunks(hidden, config.samples, infer, rng, prior, drawn)
    else:
        deals = iter(_draw_deals(hidden, config.samples, infer, rng, prior, drawn))
    done = 0
    for dealt in deals:
        hands = [view.hand, dealt[1], dealt[2], dealt[3]]
        values = deal_values(
            hands, trick, candidates, view.trump, config.endgame, obligada, spent if done else None
        )
        if values is None:
            break  # out of time within a sample: drop it
        for c in candidates:
            totals[c] += values[c]
        done += 1
        if spent():
            break
    if stats is not None:
        stats.samples, stats.seconds, stats.candidates = done, clock() - start, len(candidates)
        stats.drawn = drawn[0]
    if policy_probs is None or not config.policy:
        return _best(groups, totals)
    return _best(groups, totals, done, policy_bonus(policy_probs, groups, config.policy))


def _setup(
    view: View, legal: int, obligada: bool
) -> tuple[HiddenDeal, list[tuple[int, int]], list[list[int]]]:
    """What a card decision searches over: the hidden hands to sample, the trick on the
    table, and the legal cards in groups of interchangeable ones (the first of each is
    scored)."""
    trick = table_trick(view)
    # What the current trick proves: a seat that let an opponent's card stand holds nothing
    # that beats it (nor, under obligada, a weaker card of the suit than the one it played);
    # earlier tricks are not in the observation, their voids are.
    absent = known_absent([(0, TRUMP_BASE + view.trump), *trick], obligada)
    hidden = HiddenDeal(view.unseen, (1, 2, 3), view.sizes[1:], view.voids[1:], absent[1:])
    in_play = view.unseen | view.hand | sum(1 << c for _, c in trick)
    return hidden, trick, card_groups(legal, in_play)


def _best(
    groups: Sequence[Sequence[int]],
    totals: dict[int, int],
    samples: int = 1,
    bonus: dict[int, float] | None = None,
) -> int:
    """The card of the group with the best total (ties: fewer points, then the lower id),
    the lowest card of that group. With ``bonus`` (the policy prior, by group), the best
    mean over the ``samples`` plus its bonus."""
    if bonus is None:
        best = max(totals, key=lambda c: (totals[c], -POINTS[c], -c))
    else:
        best = max(totals, key=lambda c: (totals[c] / samples + bonus[c], -POINTS[c], -c))
    return min(next(g for g in groups if g[0] == best))


def policy_bonus(
    probs: np.ndarray, groups: Sequence[Sequence[int]], weight: float
) -> dict[int, float]:
    """``weight`` x the log of each group's probability under a policy's action
    probabilities ``probs`` (56 wide), by the group's first card: the ``policy`` prior."""
    out = {}
    for g in groups:
        mass = float(sum(probs[c] for c in g))
        out[g[0]] = weight * math.log(max(mass, 1e-12))
    return out


@dataclass
class _Searched:
    """One row of :meth:`SearchAgent.act_batch` to search, its deals drawn."""

    index: int
    view: View
    trick: list[tuple[int, int]]
    groups: list[list[int]]
    deals: list[dict[int, int]]
    drawn: int

    @property
    def candidates(self) -> list[int]:
        return [g[0] for g in self.groups]


def _batch_values(rows: Sequence[_Searched], endgame: int, obligada: bool) -> list[np.ndarray]:
    """Each row's rollout values, (deals, candidates) per row: every rollout of every row
    in one :func:`~agents.search_rollouts.rollout_values` call."""
    hands: list[list[int]] = []
    state: list[tuple[int, int, int, int, int, int]] = []  # led, win, win seat, n, points, trump
    for r in rows:
        trump = r.view.trump
        before = trick_state(r.trick, trump)
        points = sum(POINTS[c] for _, c in r.trick)
        after = []
        for c in r.candidates:
            led, win, win_seat = add_to_trick(before, 0, c, trump)
            after.append(
                (
                    r.view.hand ^ (1 << c),
                    (led, win, win_seat, len(r.trick) + 1, points + POINTS[c], trump),
                )
            )
        for dealt in r.deals:
            for mine, st in after:
                hands.append([mine, dealt[1], dealt[2], dealt[3]])
                state.append(st)
    cols = np.array(state, dtype=np.int64).reshape(-1, 6)
    led, win, win_seat, n, points, trump = cols.T
    values = rollout_values(
        np.array(hands, dtype=np.uint64).reshape(-1, 4),
        led,
        win,
        win_seat,
        n,
        points,
        trump,
        endgame,
        obligada,
    )
    out = []
    at = 0
    for r in rows:
        size = len(r.deals) * len(r.groups)
        out.append(values[at : at + size].reshape(len(r.deals), len(r.groups)))
        at += size
    return out


def table_trick(view: View) -> list[tuple[int, int]]:
    """The current trick as (relative seat, card) in the order the cards were played."""
    return [((view.leader + k) & 3, view.trick[(view.leader + k) & 3]) for k in range(view.n_trick)]


def deal_values(
    hands: Sequence[int],
    trick: Sequence[tuple[int, int]],
    candidates: Sequence[int],
    trump: int,
    endgame: int,
    obligada: bool = False,
    stop: Callable[[], bool] | None = None,
) -> dict[int, int] | None:
    """My team's points from now after each of ``candidates`` on one full deal (relative
    seats, 0 me, to move; ``trick``: (seat, card) so far): the exact double-dummy value once
    ``endgame`` tricks or fewer are left (every legal card), else a greedy full-information
    rollout to the endgame, then the exact value. ``stop`` (optional) is asked before every
    candidate but the first; when it says so, None (the deal is dropped)."""
    solver = Solver(trump, obligada)
    if hands[0].bit_count() <= endgame:  # my cards = tricks still to finish, this one included
        return solver.best_moves(hands, 0, trick)
    values = {}
    for k, c in enumerate(candidates):
        if k and stop is not None and stop():
            return None
        values[c] = _rollout_value(list(hands), list(trick), c, trump, endgame, solver, obligada)
    return values


def best_cards_on_deal(
    view: View, legal: int, hidden: Sequence[int], endgame: int, obligada: bool = False
) -> int:
    """The legal cards (a bitmask) with the highest :func:`deal_values` when the hidden hands
    are ``hidden`` (next, partner, previous seat): what the search would play if the deal it
    sampled were this one. Cards of an interchangeable group (:func:`card_groups`) share its
    value. On the real deal of a position this is one draw of the search's per-deal vote from
    the exact posterior, the target of search distillation (``train.ppo --distill-coef``)."""
    trick = table_trick(view)
    groups = card_groups(legal, view.unseen | view.hand | sum(1 << c for _, c in trick))
    hands = [view.hand, *hidden]
    values = deal_values(hands, trick, [g[0] for g in groups], view.trump, endgame, obligada)
    assert values is not None  # no stop: every candidate is scored
    top = max(values[g[0]] for g in groups)
    return sum(1 << c for g in groups if values[g[0]] == top for c in g)


def _draw_deals(
    hidden: HiddenDeal,
    samples: int,
    infer: int,
    rng: np.random.Generator,
    prior: Callable[[Sequence[dict[int, int]]], np.ndarray | None] | None,
    drawn: list[int],
    max_fruitless: int | None = None,
) -> list[dict[int, int]]:
    """``samples`` deals to search: uniform, or chosen by ``prior`` from a pool of ``infer``
    x ``samples`` (``drawn[0]`` counts the deals drawn; ``max_fruitless``: the sampler's
    bound on rejected draws in a row, :meth:`HiddenDeal.sample_many`)."""
    if prior is None or infer <= 1:
        drawn[0] += samples
        return hidden.sample_many(rng, samples, max_fruitless)
    pool = hidden.sample_many(rng, samples * infer, max_fruitless)
    drawn[0] += len(pool)
    weights = prior(pool)
    if weights is None:
        return pool[:samples]
    keep = rng.choice(len(pool), size=samples, replace=False, p=weights / weights.sum())
    return [pool[i] for i in keep]


def _deal_chunks(
    hidden: HiddenDeal,
    samples: int,
    infer: int,
    rng: np.random.Generator,
    prior: Callable[[Sequence[dict[int, int]]], np.ndarray | None] | None,
    drawn: list[int],
) -> Iterator[dict[int, int]]:
    """The deals of :func:`_draw_deals`, drawn a chunk at a time as they are asked for (the
    budgeted search stops asking when its time is spent). Chunks are small, so the sampler
    is told to switch to counting after :data:`REJECTION_TRIES` rejected draws in a row,
    as one-deal sampling does: under a tight constraint a chunk would otherwise draw
    round after round, past any budget."""
    given, chunk = 0, 1
    while given < samples:
        n = min(chunk, samples - given)
        yield from _draw_deals(hidden, n, infer, rng, prior, drawn, REJECTION_TRIES)
        given += n
        chunk = min(2 * chunk, DEAL_CHUNK_MAX)


class BiddingPrior:
    """How likely a policy makes the bidding the table saw, deal by deal.

    A hidden seat that chose trump (or, as dealer, delegated) told the table something about
    its cards. For each sampled deal we rebuild that seat's observation at its bidding
    decision (its sampled hand plus the cards it has played since) and ask the policy how
    likely the action it took was; the product over those decisions (plus a floor
    :attr:`FLOOR`, so that no consistent deal is ruled out by a model of the others) is the
    deal's weight. Observations come from :func:`~butifarra_env.core.observation.encode` of one
    rebuilt game, with only the ``hand`` field replaced per deal; its variants are those of
    ``options`` (what the agent was told; the observation does not carry them).
    """

    FLOOR = 0.02
    CACHE_SIZE = 256
    """The most hands whose bidding decisions a :attr:`cache` keeps (then it starts over)."""

    def __init__(
        self,
        policy: Agent,
        observation: np.ndarray,
        view: View,
        options: Options | None = None,
        cache: dict[tuple[object, ...], list[tuple[int, int, np.ndarray, np.ndarray]]]
        | None = None,
    ) -> None:
        self.policy = policy
        self.observation = observation
        self.view = view
        self.options = options
        self.cache = cache
        """Rebuilt bidding decisions by hand, shared between the decisions of one agent
        (:meth:`_decisions`); None: rebuilt every time."""

    def weights(self, deals: Sequence[dict[int, int]]) -> np.ndarray | None:
        view = self.view
        if view.dealer < 0 or view.chooser < 0 or view.trump == TRUMP_UNSET:
            return None
        delegated = bool(field(self.observation, "delegated")[0])
        steps = [(view.dealer, DELEGATE)] if delegated else []
        steps.append((view.chooser, TRUMP_BASE + view.trump))
        if all(seat == 0 for seat, _ in steps):
            return None  # only my own bidding: nothing to infer
        initial = [
            [(deal.get(s, view.hand) if s else view.hand) | view.played[s] for s in range(4)]
            for deal in deals
        ]
        weights = np.ones(len(deals))
        for seat, action, obs1, mask1 in self._decisions(steps, initial[0]):
            obs = np.repeat(obs1[None], len(deals), axis=0)
            hands = np.array([h[seat] for h in initial], dtype=np.uint64)
            obs[:, field_slice("hand")] = card_bits_array(hands)
            masks = np.repeat(mask1[None], len(deals), axis=0)
            probs = self.policy.action_probs_batch(obs, masks)
            if probs is None:
                return None
            weights *= probs[:, action] + self.FLOOR
        return weights

    def _decisions(
        self, steps: list[tuple[int, int]], hands: list[int]
    ) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
        """The hidden seats' bidding decisions: (seat, action taken, its observation with
        some hand in the ``hand`` field, its legal mask). The same for every card decision
        of a hand, so kept in :attr:`cache` (when given) under what they depend on."""
        view = self.view
        scores = field(self.observation, "match_scores")
        options = _options(self.observation, self.options)
        number = int(field(self.observation, "hand_number")[0])
        key = (tuple(steps), view.dealer, number, int(scores[0]), int(scores[1]), options)
        if self.cache is not None and key in self.cache:
            return self.cache[key]
        game = Game(options, view.dealer, list(hands), number, (int(scores[0]), int(scores[1])))
        out = []
        for seat, action in steps:
            if seat != 0:
                out.append((seat, action, encode(game, seat), mask_from_bits(game.legal)))
            game.step(action)
        if self.cache is not None:
            if len(self.cache) >= self.CACHE_SIZE:
                self.cache.clear()
            self.cache[key] = out
        return out


def _options(observation: np.ndarray, told: Options | None = None) -> Options:
    """The game options an observation shows (what bidding observations carry), with the
    variants of ``told`` (the options the agent was told: the observation has no variant)."""
    target = int(field(observation, "target_score")[0])
    top = int(field(observation, "max_doubling_level")[0])
    cap = None if told is None else told.butifarra_max_doubling_level
    return Options(
        target_score=target or None,
        max_doubling_level=top,
        butifarra_base=int(field(observation, "butifarra_base")[0]),
        obligada=told is not None and told.obligada,
        linear_doubling=told is not None and told.linear_doubling,
        butifarra_max_doubling_level=None if cap is None else min(cap, top),
    )


def card_groups(legal: int, in_play: int) -> list[list[int]]:
    """Legal cards grouped when interchangeable: same suit, same points, and no card still in
    play (``in_play``: held by anyone or on the table) between them in strength."""
    groups: list[list[int]] = []
    for card in sorted(cards_of(legal), key=lambda c: (SUIT[c], STRENGTH[c])):
        if groups:
            prev = groups[-1][-1]
            between = BELOW[card] & ~BELOW[prev] & ~(1 << prev)
            if SUIT[prev] == SUIT[card] and POINTS[prev] == POINTS[card] and not between & in_play:
                groups[-1].append(card)
                continue
        groups.append([card])
    return groups


def _rollout_value(
    hands: list[int],
    trick: list[tuple[int, int]],
    card: int,
    trump: int,
    endgame: int,
    solver: Solver,
    obligada: bool = False,
) -> int:
    """My team's points from now if I play ``card``: heuristic full-information play until
    ``endgame`` tricks are left, then the exact double-dummy result (``obligada``: the
    variant's legal cards, as the solver's)."""
    h = list(hands)
    h[0] ^= 1 << card
    trick = [*trick, (0, card)]
    state = trick_state(trick, trump)  # kept card by card below (rules.add_to_trick)
    n, pts = len(trick), sum(POINTS[c] for _, c in trick)
    seat = 1
    gained = 0
    beat = _WINNERS[trump]
    while True:
        if n == 4:
            seat = state[2]
            if not seat & 1:
                gained += pts + 1
            state, n, pts = EMPTY_TRICK, 0, 0
            if (h[0] | h[1] | h[2] | h[3]).bit_count() <= 4 * endgame:
                return gained + solver.solve(h, seat)
        c = _greedy_play(h, seat, n, state, trump, beat, obligada)
        h[seat] ^= 1 << c
        state = add_to_trick(state, seat, c, trump)
        n, pts = n + 1, pts + POINTS[c]
        seat = (seat + 1) & 3


def _greedy_card(
    h: list[int],
    seat: int,
    trick: list[tuple[int, int]],
    trump: int,
    beat: Sequence[int],
    obligada: bool = False,
) -> int:
    """A quick full-information heuristic: take the trick cheaply when the card will hold,
    load points on a partner's sure trick, otherwise play the cheapest card (among the legal
    cards, obligada's when ``obligada``)."""
    return _greedy_play(h, seat, len(trick), trick_state(trick, trump), trump, beat, obligada)


def _greedy_play(
    h: list[int],
    seat: int,
    n: int,
    state: TrickState,
    trump: int,
    beat: Sequence[int],
    obligada: bool = False,
) -> int:
    """:func:`_greedy_card` on a trick of ``n`` cards given by its state (the rollouts keep
    the state card by card instead of folding the trick again for every card)."""
    led, win, win_seat = state
    partner_wins = partner_winning(win_seat, seat)
    legal = legal_cards(h[seat], led, win, partner_wins, trump, obligada)
    if not legal & (legal - 1):
        return legal.bit_length() - 1
    n_left = 3 - n  # players after me in this trick
    opponents = [(seat + k) & 3 for k in (1, 3) if k <= n_left]
    if partner_wins and _holds(h, beat[win], led, opponents):
        return _pick(legal, LOAD)
    if win < 0:  # leading: a card nobody can beat, richest first; else the cheapest
        sure = 0
        rest = legal
        while rest:
            c = (rest & -rest).bit_length() - 1
            rest &= rest - 1
            if _holds(h, beat[c], SUIT[c], opponents):
                sure |= 1 << c
        return _pick(sure, RICH) if sure else _pick(legal, CHEAP)
    winning = legal & beat[win]
    holding = 0
    while winning:
        c = (winning & -winning).bit_length() - 1
        winning &= winning - 1
        if _holds(h, beat[c], led, opponents):
            holding |= 1 << c
    if holding:
        return _pick(holding, CHEAP_WINNER[trump])
    return _pick(legal, CHEAP)


def _holds(h: list[int], beaten_by: int, led: int, opponents: list[int]) -> bool:
    """Can none of ``opponents`` (still to play) take the trick from a card that the cards
    ``beaten_by`` beat, with a card they may legally play?"""
    for s in opponents:
        hand = h[s]
        pool = (hand & SUIT_MASK[led]) if led != NO_SUIT else 0
        if (pool or hand) & beaten_by:
            return False
    return True


def _pick(cards: int, order: Sequence[int]) -> int:
    """The card of ``cards`` that comes first in ``order`` (a key per card: lowest wins)."""
    best, best_key = -1, 1 << 30
    while cards:
        c = (cards & -cards).bit_length() - 1
        cards &= cards - 1
        if order[c] < best_key:
            best, best_key = c, order[c]
    return best
