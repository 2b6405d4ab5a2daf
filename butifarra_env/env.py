"""PettingZoo AEC adapter over :class:`~butifarra_env.game.Game` (see butifarra_v0 for the docs)."""

from __future__ import annotations

import math
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.utils import wrappers

from butifarra_env.actions import N_ACTIONS
from butifarra_env.cards import N_CARDS, cards_of
from butifarra_env.game import N_SEATS, Game, deal
from butifarra_env.observation import OBS_SIZE, STATE_SIZE, Observer, encode_state
from butifarra_env.options import Options
from butifarra_env.render import render_text

AGENTS = tuple(f"player_{i}" for i in range(N_SEATS))
RENDER_MODES = ("human", "ansi")
RESET_OPTION_KEYS = ("dealer", "hands", "hand_number", "match_scores")
_ZERO_MASK = np.zeros(N_ACTIONS, dtype=np.int8)


def mask_array(legal: int) -> np.ndarray:
    """A 56-bit legal-action integer as the int8 mask array agents receive."""
    return np.unpackbits(
        np.frombuffer(legal.to_bytes(7, "little"), dtype=np.uint8), bitorder="little"
    ).view(np.int8)


def worst_hand_loss(options: Options) -> int:
    """The most a team can lose on one hand under these options (used as the illegal-move
    penalty, so that an illegal move is never better than playing on)."""
    return 36 * options.butifarra_base * (1 << options.max_doubling_level)


def _check_reward_scale(reward_scale: object) -> float:
    if (
        isinstance(reward_scale, bool)
        or not isinstance(reward_scale, (int, float))
        or not math.isfinite(reward_scale)
        or reward_scale <= 0
    ):
        raise ValueError(f"reward_scale must be a finite number > 0, got {reward_scale!r}")
    return float(reward_scale)


def _check_render_mode(render_mode: object) -> None:
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ValueError(f"render_mode must be None, 'human' or 'ansi', got {render_mode!r}")


def parse_deal(dealer: object, hands: object) -> tuple[int, list[int]]:
    """Validate a fixed deal given as a dealer seat and four lists of 12 card ids."""
    if isinstance(dealer, bool) or not isinstance(dealer, (int, np.integer)) or not 0 <= dealer < 4:
        raise ValueError(f"dealer must be a seat 0-3, got {dealer!r}")
    if not isinstance(hands, (list, tuple, np.ndarray)) or len(hands) != N_SEATS:
        raise ValueError("hands must be four lists of 12 card ids (0-47)")
    masks = []
    for seat, cards in enumerate(hands):
        try:
            ids = [int(c) for c in cards]
        except (TypeError, ValueError):
            raise ValueError(f"hands[{seat}] must be a list of card ids, got {cards!r}") from None
        if len(ids) != 12 or any(not 0 <= c < N_CARDS for c in ids) or len(set(ids)) != 12:
            raise ValueError(f"hands[{seat}] must hold 12 distinct card ids 0-47, got {ids}")
        masks.append(sum(1 << c for c in ids))
    if masks[0] | masks[1] | masks[2] | masks[3] != (1 << N_CARDS) - 1:
        raise ValueError("the four hands must hold each of the 48 cards exactly once")
    return int(dealer), masks


class raw_env(AECEnv):  # noqa: N801 - PettingZoo's naming convention for the bare env
    """Butifarra as a PettingZoo AEC environment (documentation: ``butifarra_v0``)."""

    metadata = {
        "render_modes": list(RENDER_MODES),
        "name": "butifarra_v0",
        "is_parallelizable": False,
        "render_fps": 1,
    }

    def __init__(
        self, render_mode: str | None = None, reward_scale: float = 1.0, **options: Any
    ) -> None:
        super().__init__()
        _check_render_mode(render_mode)
        self.render_mode = render_mode
        self.reward_scale = _check_reward_scale(reward_scale)
        self.game_options = Options.from_dict(options)
        self.possible_agents = list(AGENTS)
        self.agent_name_mapping = {a: i for i, a in enumerate(AGENTS)}
        obs_space = spaces.Dict(
            {
                "observation": spaces.Box(0, 255, (OBS_SIZE,), dtype=np.uint8),
                "action_mask": spaces.Box(0, 1, (N_ACTIONS,), dtype=np.int8),
            }
        )
        self.observation_spaces = {a: obs_space for a in AGENTS}
        self.action_spaces = {a: spaces.Discrete(N_ACTIONS) for a in AGENTS}
        self.state_space = spaces.Box(0, 255, (STATE_SIZE,), dtype=np.uint8)
        self._rng: np.random.Generator | None = None
        self._observer = Observer()
        self.game: Game | None = None
        self.match_scores = [0, 0]
        self.hand_results: list[dict[str, Any]] = []
        self._dirty = False
        self._stop_at_hand_end = False  # set by record.replay: a record holds one hand

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    # ------------------------------------------------------------------ episode
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start an episode. ``seed`` fixes the deals and the first dealer.

        ``options`` may fix the first hand: ``{"dealer": seat, "hands": [[12 ids] x 4]}``
        (for duplicate deals and replays), plus ``hand_number`` and ``match_scores`` to
        resume a match position.
        """
        if seed is not None or self._rng is None:
            self._rng = np.random.default_rng(seed)
        options = dict(options or {})
        unknown = set(options) - set(RESET_OPTION_KEYS)
        if unknown:  # PettingZoo's api_test passes arbitrary options: warn, do not fail
            gymnasium.logger.warn(
                f"ignoring unknown reset option(s) {sorted(unknown)}; "
                f"known: {list(RESET_OPTION_KEYS)}"
            )
        self.agents = list(AGENTS)
        self.rewards = dict.fromkeys(AGENTS, 0.0)
        self._cumulative_rewards = dict.fromkeys(AGENTS, 0.0)
        self.terminations = dict.fromkeys(AGENTS, False)
        self.truncations = dict.fromkeys(AGENTS, False)
        self.infos = {a: {} for a in AGENTS}
        self._dirty = False
        self.hand_results = []
        scores = options.get("match_scores", (0, 0))
        if len(scores) != 2 or any(isinstance(s, bool) or int(s) != s or s < 0 for s in scores):
            raise ValueError(f"match_scores must be two ints >= 0, got {scores!r}")
        self.match_scores = [int(scores[0]), int(scores[1])]
        hand_number = options.get("hand_number", 0)
        if isinstance(hand_number, bool) or not isinstance(hand_number, int) or hand_number < 0:
            raise ValueError(f"hand_number must be an int >= 0, got {hand_number!r}")
        if "hands" in options or "dealer" in options:
            if "hands" not in options or "dealer" not in options:
                raise ValueError("a fixed deal needs both 'dealer' and 'hands'")
            dealer, hands = parse_deal(options["dealer"], options["hands"])
        else:
            fixed = self.game_options.first_dealer
            dealer = int(self._rng.integers(N_SEATS)) if fixed is None else fixed
            hands = deal(self._rng.permutation(N_CARDS), dealer)
        self._start_hand(dealer, hands, hand_number)

    def _start_hand(self, dealer: int, hands: list[int], hand_number: int) -> None:
        game = Game(self.game_options, dealer, hands, hand_number, tuple(self.match_scores))
        self.game = game
        self._observer.reset(game)
        self.agent_selection = AGENTS[game.to_move]
        if self.render_mode == "human":
            self.render()

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        seat = self.agent_name_mapping[agent]
        game = self.game
        if game.to_move == seat and not self.terminations[agent]:
            mask = mask_array(game.legal)
        else:
            mask = _ZERO_MASK.copy()
        return {"observation": self._observer.observe(seat), "action_mask": mask}

    def step(self, action: int) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        if self._dirty:
            self._clear_rewards()
            for a in AGENTS:
                self.infos[a] = {}
            self._dirty = False
        game = self.game
        seat = game.to_move
        game.step(action)  # raises IllegalActionError (a ValueError) naming phase and legal set
        self._observer.update(game, seat, int(action))
        self._cumulative_rewards[agent] = 0.0
        if game.is_over:
            self._end_hand(game)
        else:
            self.agent_selection = AGENTS[game.to_move]
        if self.render_mode == "human":
            self.render()

    def _end_hand(self, game: Game) -> None:
        self._dirty = True
        scale = self.reward_scale
        for a, r in zip(AGENTS, game.rewards, strict=True):
            self.rewards[a] = r * scale
        result = game.result()
        result["hand_number"] = game.hand_number
        result["dealer"] = game.dealer
        self.hand_results.append(result)
        for a in AGENTS:
            self.infos[a] = {"hand_result": result}
        self._accumulate_rewards()
        target = self.game_options.target_score
        if target is None or self._stop_at_hand_end:
            self.terminations = dict.fromkeys(AGENTS, True)
            return
        self.match_scores[0] += game.scores[0]
        self.match_scores[1] += game.scores[1]
        if max(self.match_scores) >= target:
            winner = 0 if self.match_scores[0] >= target else 1
            for a in AGENTS:
                self.infos[a]["match_winner_team"] = winner
                self.infos[a]["match_scores"] = list(self.match_scores)
            self.terminations = dict.fromkeys(AGENTS, True)
            return
        next_dealer = (game.dealer + 1) % N_SEATS
        self._start_hand(
            next_dealer, deal(self._rng.permutation(N_CARDS), next_dealer), game.hand_number + 1
        )

    # ------------------------------------------------------------------ extras
    def state(self) -> np.ndarray:
        """Full information (all four hands), for centralised critics."""
        return encode_state(self.game, self._observer.canon)

    def legal_actions(self) -> list[int]:
        return cards_of(self.game.legal)

    def game_record(self) -> dict[str, Any]:
        """The current hand as a JSON-serialisable record (see butifarra_env.record)."""
        from butifarra_env.record import game_record

        return game_record(self.game)

    def render(self) -> str | None:
        if self.render_mode is None:
            gymnasium.logger.warn(
                "You are calling render without a render_mode; pass render_mode='ansi' or 'human'."
            )
            return None
        text = render_text(self.game, None, target_score=self.game_options.target_score)
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        pass


# PettingZoo's wrappers reach every attribute of the bare env through ``__getattr__``, three
# layers deep: about 36 failed lookups per step, more time than the game itself. These
# subclasses keep the wrappers' behaviour and read the hot attributes straight from the bare
# env (read-only, as the wrappers themselves never rebind them).
_HOT_ATTRIBUTES = (
    "agent_selection",
    "agents",
    "rewards",
    "terminations",
    "truncations",
    "infos",
    "_cumulative_rewards",
)


def _direct(name: str, guarded: bool) -> property:
    def get(self: Any) -> Any:
        if guarded and not self._has_reset:
            raise AttributeError(f"{name} cannot be accessed before reset")
        return getattr(self._raw, name)

    return property(get)


def _fast(cls: type, name: str, guarded: bool = False) -> type:
    attrs = {name: _direct(name, guarded) for name in _HOT_ATTRIBUTES}

    def __init__(self: Any, inner: AECEnv, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        cls.__init__(self, inner, *args, **kwargs)
        self._raw = inner.unwrapped

    attrs["__init__"] = __init__
    attrs["__doc__"] = cls.__doc__
    attrs["__module__"] = __name__
    attrs["__qualname__"] = name
    return type(name, (cls,), attrs)


FastTerminateIllegalWrapper = _fast(wrappers.TerminateIllegalWrapper, "FastTerminateIllegalWrapper")
FastAssertOutOfBoundsWrapper = _fast(
    wrappers.AssertOutOfBoundsWrapper, "FastAssertOutOfBoundsWrapper"
)
FastOrderEnforcingWrapper = _fast(
    wrappers.OrderEnforcingWrapper, "FastOrderEnforcingWrapper", guarded=True
)


def env(**kwargs: Any) -> AECEnv:
    """The environment with PettingZoo's standard wrappers: an illegal move ends the episode
    with the mover penalised by the worst possible hand loss (PettingZoo's convention)."""
    base = raw_env(**kwargs)
    penalty = -worst_hand_loss(base.game_options) * base.reward_scale
    wrapped: AECEnv = FastTerminateIllegalWrapper(base, illegal_reward=penalty)
    wrapped = FastAssertOutOfBoundsWrapper(wrapped)
    return FastOrderEnforcingWrapper(wrapped)
