"""Butifarra as an OpenSpiel game: ``pyspiel.load_game("python_butifarra")``.

Importing this module registers the game (once; importing again is harmless). The state is
the project's own :class:`~butifarra_env.core.game.Game` driven through OpenSpiel's API, so the
rules, action ids (:mod:`butifarra_env.core.actions`), the 491-value observation
(:mod:`butifarra_env.core.observation`) and the rewards are exactly those of ``butifarra_v0``.

One OpenSpiel game is one hand. Chance deals it the way the table does, one chance node at a
time so that every chance outcome is enumerable: first the dealer (outcomes 0-3, uniform;
skipped when ``first_dealer`` is set), then the 48 deck positions in order (outcome = the
card id, uniform over the cards not dealt yet), shared out by :func:`butifarra_env.core.rules.deal`
(four at a time from the player after the dealer). The deal is therefore distributed exactly
as in ``butifarra_v0``.

Parameters: ``max_doubling_level`` (0-4, default 4), ``butifarra_base`` (1 or 2, default 2),
``first_dealer`` (-1: drawn by chance, the default; or a seat 0-3), ``reward_scale``
(returns are the hand's rewards of RULES.md times this; default 1.0, raw points), and the
variants of RULES.md: ``obligada`` and ``linear_doubling`` (bools, default False),
``butifarra_max_doubling_level`` (-1: the same as ``max_doubling_level``, the default; or
0 up to ``max_doubling_level``). OpenSpiel parameters cannot be None, hence the -1s.
``obs_version`` (0, the default, or 1) picks the observation tensor: the ``butifarra_v0``
vector (491 values) or the ``butifarra_v1`` one (638: v0's, then the trick history and the
variants); it is checked like the envs' (``observation.check_version``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pyspiel  # type: ignore[import-not-found,unused-ignore]

from butifarra_env.core.actions import N_ACTIONS, action_name
from butifarra_env.core.cards import (
    ALL_CARDS,
    N_CARDS,
    N_TRICKS,
    card_name,
    cards_of,
    sort_key,
)
from butifarra_env.core.game import Game
from butifarra_env.core.observation import (
    OBS_SIZE,
    V1_FIELDS,
    Observer,
    check_version,
    decode,
    encode,
    field_slice,
    layout,
    make_observer,
)
from butifarra_env.core.options import MAX_DOUBLING_LEVEL, Options
from butifarra_env.core.render import trump_text
from butifarra_env.core.rules import (
    DEAL_ORDER,
    N_SEATS,
    TRUMP_UNSET,
    deal,
    random_deal,
)
from butifarra_env.core.sampling import deal_consistent, known_absent
from butifarra_env.core.validate import check_int, check_reward_scale

__all__ = ["GAME_NAME", "ButifarraGame", "ButifarraObserver", "ButifarraState", "register"]

GAME_NAME = "python_butifarra"
RANDOM_DEALER = -1
"""``first_dealer`` value meaning: the dealer is drawn by chance."""
SAME_AS_MAX = -1
"""``butifarra_max_doubling_level`` value meaning: the same as ``max_doubling_level``."""

_PARAMETERS: dict[str, Any] = {
    "max_doubling_level": MAX_DOUBLING_LEVEL,
    "butifarra_base": 2,
    "first_dealer": RANDOM_DEALER,
    "reward_scale": 1.0,
    "obligada": False,
    "linear_doubling": False,
    "butifarra_max_doubling_level": SAME_AS_MAX,
    "obs_version": 0,
}

_GAME_TYPE = pyspiel.GameType(
    short_name=GAME_NAME,
    long_name="Python Butifarra (butifarra-rl, one hand)",
    dynamics=pyspiel.GameType.Dynamics.SEQUENTIAL,
    chance_mode=pyspiel.GameType.ChanceMode.EXPLICIT_STOCHASTIC,
    information=pyspiel.GameType.Information.IMPERFECT_INFORMATION,
    utility=pyspiel.GameType.Utility.ZERO_SUM,
    reward_model=pyspiel.GameType.RewardModel.TERMINAL,
    max_num_players=N_SEATS,
    min_num_players=N_SEATS,
    provides_information_state_string=True,
    provides_information_state_tensor=False,
    provides_observation_string=True,
    provides_observation_tensor=True,
    parameter_specification=_PARAMETERS,
)

_RECEIVER = [0] * N_CARDS
"""Deck position -> how many seats after the dealer sits the player who receives it."""
for _r, _positions in enumerate(DEAL_ORDER):
    for _p in _positions:
        _RECEIVER[_p] = _r

_TOKEN = tuple(card_name(a) if a < N_CARDS else action_name(a) for a in range(N_ACTIONS))
"""How an action appears in the history of the information-state string."""


def _receiver(dealer: int, position: int) -> int:
    return (dealer + 1 + _RECEIVER[position]) % N_SEATS


class ButifarraGame(pyspiel.Game):
    """The OpenSpiel game: its parameters are checked like ``butifarra_v0``'s options."""

    def __init__(self, params: dict[str, Any] | None = None) -> None:
        params = {**_PARAMETERS, **(params or {})}
        unknown = set(params) - set(_PARAMETERS)
        if unknown:
            raise ValueError(f"unknown parameter(s) {sorted(unknown)}; known: {list(_PARAMETERS)}")
        first_dealer = params["first_dealer"]
        if first_dealer != RANDOM_DEALER:
            try:
                check_int("first_dealer", first_dealer, 0, N_SEATS - 1)
            except ValueError as e:
                raise ValueError(f"{e}; or -1 to draw the dealer by chance") from None
        butifarra_cap = params["butifarra_max_doubling_level"]
        try:
            self.options = Options(
                max_doubling_level=params["max_doubling_level"],
                butifarra_base=params["butifarra_base"],
                first_dealer=None if first_dealer == RANDOM_DEALER else first_dealer,
                obligada=params["obligada"],
                linear_doubling=params["linear_doubling"],
                butifarra_max_doubling_level=(
                    None if butifarra_cap == SAME_AS_MAX else butifarra_cap
                ),
            )
        except ValueError as e:
            if "butifarra_max_doubling_level" in str(e):
                raise ValueError(f"{e}; or -1 for the same as max_doubling_level") from None
            raise
        self.reward_scale = check_reward_scale(params["reward_scale"])
        self.obs_version = check_version(params["obs_version"])
        self.dealing_template = _dealing_template(self.options, self.obs_version)
        o = self.options
        worst = o.worst_hand_loss * self.reward_scale
        info = pyspiel.GameInfo(
            num_distinct_actions=N_ACTIONS,
            max_chance_outcomes=N_CARDS,
            num_players=N_SEATS,
            min_utility=-worst,
            max_utility=worst,
            utility_sum=0.0,
            # choose or delegate then choose; at most two answers per doubling level; 48 cards
            max_game_length=2 + 2 * o.max_doubling_level + N_CARDS,
        )
        super().__init__(_GAME_TYPE, info, params)

    def new_initial_state(self) -> ButifarraState:
        return ButifarraState(self)

    def max_chance_nodes_in_history(self) -> int:
        return N_CARDS + (self.options.first_dealer is None)

    def make_py_observer(
        self, iig_obs_type: Any = None, params: dict[str, Any] | None = None
    ) -> ButifarraObserver:
        return ButifarraObserver(
            iig_obs_type or pyspiel.IIGObservationType(perfect_recall=False),
            params,
            self.obs_version,
        )


class _Hand:
    """Everything a state holds, in one object that copies fast (OpenSpiel's ``clone()``
    deep-copies each attribute of a Python state; MCTS clones at every simulation)."""

    __slots__ = (
        "options",
        "scale",
        "version",
        "template",
        "dealer",
        "deal",
        "dealt",
        "game",
        "observer",
        "log",
    )

    def __init__(self, options: Options, scale: float, version: int, template: np.ndarray) -> None:
        self.options = options
        self.scale = scale
        self.version = version  # of the observation
        self.template = template  # the observation while dealing (shared, never written)
        self.dealer = RANDOM_DEALER if options.first_dealer is None else options.first_dealer
        self.deal: list[int] = []  # card ids in deck order, as chance dealt them
        self.dealt = 0  # the same as a bitmask
        self.game: Game | None = None  # once the 48 cards are out
        self.observer: Observer | None = None
        self.log: list[str] = []  # "seat:action" of every player action, for info states

    def __deepcopy__(self, memo: dict[int, Any]) -> _Hand:
        new = _Hand.__new__(_Hand)
        new.options, new.scale, new.dealer = self.options, self.scale, self.dealer
        new.version, new.template = self.version, self.template
        new.deal, new.dealt, new.log = self.deal.copy(), self.dealt, self.log.copy()
        new.game = None if self.game is None else _copy_game(self.game)
        new.observer = None
        if self.observer is not None:
            new.observer = make_observer(self.version)
            new.observer.canon = self.observer.canon.copy()
        return new

    def dealt_to(self, seat: int) -> int:
        """The cards ``seat`` has received so far (bitmask)."""
        if self.game is not None:
            return self.game.initial_hands[seat]
        mask = 0
        for p, c in enumerate(self.deal):
            if _receiver(self.dealer, p) == seat:
                mask |= 1 << c
        return mask


_IMMUTABLE = (int, float, str, tuple, type(None), Options)


def _copy_game(game: Game) -> Game:
    """A copy of ``game`` that shares nothing mutable, ten times faster than ``deepcopy``:
    its mutable attributes are lists of ints or tuples, copied flat; anything else that is
    not immutable is deep-copied."""
    new = Game.__new__(Game)
    for name in Game.__slots__:
        value = getattr(game, name)
        if isinstance(value, list):
            value = value.copy()
        elif not isinstance(value, _IMMUTABLE):
            value = copy.deepcopy(value)
        setattr(new, name, value)
    return new


class ButifarraState(pyspiel.State):
    """One hand: chance deals it, then the four players bid, double and play."""

    def __init__(self, game: ButifarraGame) -> None:
        super().__init__(game)
        self._hand = _Hand(game.options, game.reward_scale, game.obs_version, game.dealing_template)

    # ------------------------------------------------------------------ OpenSpiel API
    def current_player(self) -> int:
        g = self._hand.game
        if g is None:
            return int(pyspiel.PlayerId.CHANCE)
        if g.is_over:
            return int(pyspiel.PlayerId.TERMINAL)
        return g.to_move

    def _legal_actions(self, player: int) -> list[int]:
        return cards_of(cast(Game, self._hand.game).legal)

    def chance_outcomes(self) -> list[tuple[int, float]]:
        h = self._hand
        if h.dealer == RANDOM_DEALER:
            return [(s, 1.0 / N_SEATS) for s in range(N_SEATS)]
        left = cards_of(ALL_CARDS & ~h.dealt)
        p = 1.0 / len(left)
        return [(c, p) for c in left]

    def _apply_action(self, action: int) -> None:
        h = self._hand
        g = h.game
        if g is not None:
            seat = g.to_move
            g.step(action)  # IllegalActionError (a ValueError) names phase and legal actions
            cast(Observer, h.observer).update(g, seat, action)
            h.log.append(f"{seat}:{_TOKEN[action]}")
        elif h.dealer == RANDOM_DEALER:
            h.dealer = int(action)
        else:
            h.deal.append(int(action))
            h.dealt |= 1 << int(action)
            if len(h.deal) == N_CARDS:
                h.game = Game(h.options, h.dealer, deal(h.deal, h.dealer))
                h.observer = make_observer(h.version)
                h.observer.reset(h.game)

    def _action_to_string(self, player: int, action: int) -> str:
        if player == pyspiel.PlayerId.CHANCE:
            if self._hand.dealer == RANDOM_DEALER:
                return f"dealer {action}"
            return f"deal {card_name(action)}"
        return action_name(action)

    def is_terminal(self) -> bool:
        return self._hand.game is not None and self._hand.game.is_over

    def returns(self) -> list[float]:
        g = self._hand.game
        if g is None or g.rewards is None:
            return [0.0] * N_SEATS
        return [r * self._hand.scale for r in g.rewards]

    def __str__(self) -> str:
        h = self._hand
        lines = [f"dealer {h.dealer}"]
        g = h.game
        if g is None:
            lines.append("dealt " + " ".join(card_name(c) for c in h.deal))
            return "\n".join(lines)
        for s in range(N_SEATS):
            held = " ".join(card_name(c) for c in sorted(cards_of(g.hands[s]), key=sort_key))
            lines.append(f"seat {s}: {held}")
        lines.append(f"trump: {trump_text(g)}; doubling level {g.level}")
        lines.append("history: " + " ".join(h.log))
        if g.rewards is not None:
            lines.append(f"rewards: {list(g.rewards)}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ extras
    @property
    def game_state(self) -> Game | None:
        """The hand as the project's :class:`~butifarra_env.core.game.Game` (None while dealing)."""
        return self._hand.game

    @property
    def dealer(self) -> int:
        """The dealer's seat (-1 until chance has drawn it)."""
        return self._hand.dealer

    def observation_vector(self, player: int) -> np.ndarray:
        """``player``'s observation as ``butifarra_v0`` gives it (``uint8``, 491 values), or
        ``butifarra_v1`` with ``obs_version=1`` (638 values).

        While chance is dealing it holds the cards received so far, the dealer once drawn,
        trump unset, doubling level 0 and the options; the phase one-hot is all zeros. A v1
        vector then has no trick history and its variant fields.
        """
        h = self._hand
        if h.observer is not None:
            return h.observer.observe(player)
        v = h.template.copy()
        for c in cards_of(h.dealt_to(player)):
            v[_HAND_SLICE.start + c] = 1
        if h.dealer != RANDOM_DEALER:
            v[_DEALER_SLICE.start + (h.dealer - player) % N_SEATS] = 1
        return v

    def information_state_text(self, player: int, private: bool = True, public: bool = True) -> str:
        """Everything ``player`` knows: its own cards as dealt (private), the dealer, how far
        the deal has gone and every action of the hand in order (public: all actions are)."""
        h = self._hand
        pieces = [f"p{player}"]
        if private:
            mine = sorted(cards_of(h.dealt_to(player)), key=sort_key)
            pieces.append("hand " + " ".join(card_name(c) for c in mine))
        if public:
            pieces.append(f"dealer {h.dealer} dealt {len(h.deal)} | " + " ".join(h.log))
        return " ".join(pieces)

    def resample_from_infostate(
        self, player_id: int, probability_sampler: Callable[[], float]
    ) -> ButifarraState:
        """A state ``player_id`` cannot tell from this one: same dealer, same own cards, same
        actions, the other hands dealt anew, uniformly among the deals that make every play
        so far legal (voids shown, cards that would have beaten an opponent's, hand sizes).

        ``probability_sampler`` (floats in [0, 1), e.g. ``pyspiel.UniformProbabilitySampler``)
        is the only randomness: a seeded one reproduces the state. Used by ``ISMCTSBot``.
        """
        player = check_int("player_id", player_id, 0, N_SEATS - 1)
        h = self._hand
        mine = h.dealt_to(player)
        others = [s for s in range(N_SEATS) if s != player]
        g = h.game
        if g is None:  # mid-deal: what the others got so far is anything player has not got
            counts = [sum(_receiver(h.dealer, p) == s for p in range(len(h.deal))) for s in others]
            sizes = [*counts, N_CARDS - mine.bit_count() - sum(counts)]
            hidden = deal_consistent(ALL_CARDS & ~mine, sizes, [0] * 4, probability_sampler)
            dealt = {s: hidden[i] for i, s in enumerate(others)}
        else:
            played = g.played[0] | g.played[1] | g.played[2] | g.played[3]
            absent = known_absent(g.actions, g.options.obligada)
            hidden = deal_consistent(
                ALL_CARDS & ~(mine | played),
                [N_TRICKS - g.played[s].bit_count() for s in others],
                [absent[s] for s in others],
                probability_sampler,
            )
            dealt = {s: hidden[i] | g.played[s] for i, s in enumerate(others)}
        queue = {s: cards_of(m) for s, m in dealt.items()}
        new = cast(ButifarraState, self.get_game().new_initial_state())
        if h.options.first_dealer is None and h.dealer != RANDOM_DEALER:
            new.apply_action(h.dealer)
        for p, card in enumerate(h.deal):
            seat = _receiver(h.dealer, p)
            new.apply_action(card if seat == player else queue[seat].pop())
        for _seat, action in [] if g is None else g.actions:
            new.apply_action(action)
        return new


_HAND_SLICE = field_slice("hand")
_DEALER_SLICE = field_slice("dealer")


def _dealing_template(options: Options, version: int) -> np.ndarray:
    """The observation while dealing, before any card or dealer is written in. Past v0's
    values a version holds what it holds at the start of any hand under ``options`` (in v1:
    no trick history, the variants), read from the reference encoder."""
    v = np.zeros(layout(version).size, dtype=np.uint8)
    v[field_slice("trump").start + TRUMP_UNSET] = 1
    v[field_slice("doubling_level").start] = 1
    if version:
        start = Game(options, 0, random_deal(np.random.default_rng(0), 0))
        v[OBS_SIZE:] = encode(start, 0, version)[OBS_SIZE:]
    return v


class ButifarraObserver:
    """OpenSpiel's PyObserver for this game (``make_py_observer``).

    Without perfect recall (the default observation): the ``butifarra_v0`` observation (the
    ``butifarra_v1`` one with ``obs_version=1``) as ``float32``, one named piece per field of
    the version's layout (``hand`` is the private part, every other field is public; the
    v1 ``trick_led`` and ``trick_won`` are (4, 12): one row per relative seat). With perfect
    recall (the information state): a string only, the player's cards as dealt plus the whole
    public history; there is no information-state tensor.
    """

    def __init__(
        self, iig_obs_type: Any, params: dict[str, Any] | None, obs_version: int = 0
    ) -> None:
        if params:
            raise ValueError(f"observation parameters are not supported, got {params}")
        private = iig_obs_type.private_info
        if private == pyspiel.PrivateInfoType.ALL_PLAYERS:
            raise ValueError("observations of all players' private cards are not supported")
        self._private = private == pyspiel.PrivateInfoType.SINGLE_PLAYER
        self._public = bool(iig_obs_type.public_info)
        self._recall = bool(iig_obs_type.perfect_recall)
        self.dict: dict[str, np.ndarray] = {}
        if self._recall:
            self.tensor: np.ndarray | None = None
            return
        lay = layout(obs_version)
        names = [
            (name, size)
            for name, size, kind in lay.fields
            if (self._private if kind == "hand" else self._public)
        ]
        self._index = np.concatenate(
            [np.arange(lay.size)[lay.field_slice(name)] for name, _ in names] or [np.zeros(0, int)]
        )
        self._all = len(self._index) == lay.size
        self.tensor = np.zeros(len(self._index), np.float32)
        start = 0
        for name, size in names:
            view = self.tensor[start : start + size]
            if size % N_CARDS == 0 and size > N_CARDS:
                view = view.reshape(size // N_CARDS, N_CARDS)  # one row per relative seat
            elif name in _TRICK_BLOCKS:
                view = view.reshape(N_SEATS, N_TRICKS)
            self.dict[name] = view
            start += size

    def set_from(self, state: ButifarraState, player: int) -> None:
        if self.tensor is None:
            return
        obs = state.observation_vector(player)
        self.tensor[:] = obs if self._all else obs[self._index]

    def string_from(self, state: ButifarraState, player: int) -> str:
        if self._recall:
            return state.information_state_text(player, self._private, self._public)
        fields = decode(state.observation_vector(player))
        parts = [f"p{player}"]
        for name, value in fields.items():
            if self._private if name == "hand" else self._public:
                parts.append(f"{name}:{_text(name, value)}")
        return " ".join(parts)


_TRICK_BLOCKS = {name for name, _, kind in V1_FIELDS if kind == "seat"}
"""The v1 fields with one block of 12 tricks per relative seat."""


def _text(name: str, value: Any) -> str:
    """One decoded observation field, with card ids as card names."""
    if name == "hand":
        return " ".join(card_name(c) for c in value) or "-"
    if name == "played":
        return "/".join(" ".join(card_name(c) for c in row) or "-" for row in value)
    if name == "trick":
        return "/".join("-" if c is None else card_name(c) for c in value)
    if name == "voids":
        return "/".join("".join(str(s) for s in row) or "-" for row in value)
    return str(value).replace(" ", "")


def register() -> None:
    """Register ``python_butifarra`` with OpenSpiel (done on import; safe to call again)."""
    if GAME_NAME not in pyspiel.registered_names():
        pyspiel.register_game(_GAME_TYPE, ButifarraGame)


register()
