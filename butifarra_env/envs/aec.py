"""PettingZoo AEC adapter over :class:`~butifarra_env.core.game.Game` (see butifarra_v0 for the
docs). One code path serves both env versions: ``obs_version`` picks the observation layout
(0: ``butifarra_v0``, 1: ``butifarra_v1``, which passes it); everything else is shared."""

from __future__ import annotations

import operator
from typing import Any, cast

import gymnasium
import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.utils import wrappers

from butifarra_env.core.actions import N_ACTIONS, mask_from_bits
from butifarra_env.core.cards import cards_of
from butifarra_env.core.game import Game
from butifarra_env.core.observation import (
    STATE_SIZE,
    check_version,
    encode_state,
    layout,
    make_observer,
    state_scale_vector,
)
from butifarra_env.core.options import Options
from butifarra_env.core.render import render_text
from butifarra_env.core.rules import N_SEATS, Match, draw_dealer, random_deal
from butifarra_env.core.validate import (
    RENDER_MODES,
    check_action,
    check_deal,
    check_match_position,
    check_obs_format,
    check_render_mode,
    check_reset_options,
    check_reward_scale,
    check_seed,
)
from butifarra_env.records.format import game_record

AGENTS = tuple(f"player_{i}" for i in range(N_SEATS))
RESET_OPTION_KEYS = ("dealer", "hands", "hand_number", "match_scores", "one_hand")
_ZERO_MASK = np.zeros(N_ACTIONS, dtype=np.int8)
_STATE_SCALE = state_scale_vector()


def seat_observation_space(obs_format: str = "uint8", obs_version: int = 0) -> spaces.Dict:
    """The observation space of one seat: the ``obs_version`` vector (``uint8`` counts, or
    ``float32`` in [0, 1]) and the ``int8`` legal-action mask."""
    return spaces.Dict(
        {
            "observation": vector_space(layout(obs_version).size, obs_format),
            "action_mask": spaces.Box(0, 1, (N_ACTIONS,), dtype=np.int8),
        }
    )


def vector_space(size: int, obs_format: str) -> spaces.Box:
    """The space of an observation or state vector of ``size`` entries in ``obs_format``."""
    if obs_format == "float32":
        return spaces.Box(0.0, 1.0, (size,), dtype=np.float32)
    return spaces.Box(0, 255, (size,), dtype=np.uint8)


class raw_env(AECEnv):  # noqa: N801 - PettingZoo's naming convention for the bare env
    """Butifarra as a PettingZoo AEC environment (documentation: ``butifarra_v0``).

    ``obs_version`` (keyword only; ``butifarra_v1`` passes 1) selects the observation layout
    and the env's name (``metadata["name"]``); options, rewards, actions and ``state()`` do
    not depend on it."""

    metadata = {
        "render_modes": list(RENDER_MODES),
        "name": "butifarra_v0",
        "is_parallelizable": False,
        "render_fps": 1,
    }

    def __init__(
        self,
        render_mode: str | None = None,
        reward_scale: float = 1.0,
        obs_format: str = "uint8",
        *,
        obs_version: int = 0,
        **options: Any,
    ) -> None:
        super().__init__()
        self.obs_version = check_version(obs_version)
        self.metadata = {**raw_env.metadata, "name": f"butifarra_v{self.obs_version}"}
        self._name = self.metadata["name"]  # the prefix of the env's error messages
        self.render_mode = check_render_mode(render_mode)
        self.reward_scale = check_reward_scale(reward_scale)
        self.obs_format = check_obs_format(obs_format)
        self.game_options = Options.from_dict(options)
        self.possible_agents = list(AGENTS)
        self.agent_name_mapping = {a: i for i, a in enumerate(AGENTS)}
        obs_space = seat_observation_space(self.obs_format, self.obs_version)
        self.observation_spaces: dict[str, spaces.Space] = {a: obs_space for a in AGENTS}
        self.action_spaces: dict[str, spaces.Space] = {
            a: spaces.Discrete(N_ACTIONS) for a in AGENTS
        }
        self.state_space = vector_space(STATE_SIZE, self.obs_format)
        self._float = self.obs_format == "float32"
        self._obs_scale = layout(self.obs_version).scale_vector()
        self._rng = np.random.default_rng()
        self._observer = make_observer(self.obs_version)
        self._game: Game | None = None
        self._match: Match | None = None
        self.hand_results: list[dict[str, Any]] = []
        self._dirty = False
        self._mask_bits = -1  # the legal set self._mask was built from
        self._mask = _ZERO_MASK

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    # ------------------------------------------------------------------ episode
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start an episode. ``seed`` fixes the deals and the first dealer.

        ``options`` may fix the first hand: ``{"dealer": seat, "hands": [[12 ids] x 4]}``
        (for duplicate deals and replays), plus ``hand_number`` and ``match_scores`` to
        resume a match position, and ``one_hand=True`` to end the episode after this hand
        even in match mode (a record replays one hand). Everything is checked before the
        episode changes.
        """
        seed = check_seed(seed)
        options = check_reset_options(options)
        unknown = set(options) - set(RESET_OPTION_KEYS)
        if unknown:  # PettingZoo's api_test passes arbitrary options: warn, do not fail
            gymnasium.logger.warn(
                f"ignoring unknown reset option(s) {sorted(unknown)}; "
                f"known: {list(RESET_OPTION_KEYS)}"
            )
        one_hand = options.get("one_hand", False)
        if not isinstance(one_hand, bool):
            raise ValueError(f"one_hand must be True or False, got {one_hand!r}")
        hand_number, scores = check_match_position(
            options.get("hand_number", 0),
            options.get("match_scores", (0, 0)),
            None if one_hand else self.game_options.target_score,
        )
        fixed_deal = None
        if "hands" in options or "dealer" in options:
            if "hands" not in options or "dealer" not in options:
                raise ValueError("a fixed deal needs both 'dealer' and 'hands'")
            fixed_deal = check_deal(options["dealer"], options["hands"])
        if seed is not None or self._game is None:
            self._rng = np.random.default_rng(seed)
        if fixed_deal is None:
            dealer = draw_dealer(self._rng, self.game_options.first_dealer)
            hands = random_deal(self._rng, dealer)
        else:
            dealer, hands = fixed_deal
        self.agents = list(AGENTS)
        self.rewards = dict.fromkeys(AGENTS, 0.0)
        self._cumulative_rewards = dict.fromkeys(AGENTS, 0.0)
        self.terminations = dict.fromkeys(AGENTS, False)
        self.truncations = dict.fromkeys(AGENTS, False)
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in AGENTS}
        self._dirty = False
        self.hand_results = []
        target = None if one_hand else self.game_options.target_score
        self._match = Match(target, dealer, hand_number, scores)
        self._start_hand(hands)

    @property
    def game(self) -> Game:
        """The hand being played (:class:`~butifarra_env.core.game.Game`)."""
        if self._game is None:
            raise RuntimeError(f"{self._name}: call reset() before using the environment")
        return self._game

    @property
    def match(self) -> Match:
        """Where the match stands: scores before this hand, hand number, dealer."""
        if self._match is None:
            raise RuntimeError(f"{self._name}: call reset() before using the environment")
        return self._match

    @property
    def match_scores(self) -> list[int]:
        """Team scores of the match before the current hand (A, B)."""
        return list(self.match.scores)

    def _start_hand(self, hands: list[int]) -> None:
        m = self.match
        game = Game(self.game_options, m.dealer, hands, m.hand_number, m.scores)
        self._game = game
        self._observer.reset(game)
        self.agent_selection = AGENTS[game.to_move]
        self.infos[self.agent_selection]["action_mask"] = self._legal_mask(game.legal).copy()
        if self.render_mode == "human":
            self.render()

    def _legal_mask(self, legal: int) -> np.ndarray:
        """The ``int8`` mask of the legal set ``legal``, built once per position and kept
        private: the mover's info and its observations each get a copy."""
        if legal != self._mask_bits:
            self._mask = mask_from_bits(legal)
            self._mask_bits = legal
        return self._mask

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        game = self._game
        if game is None:
            raise RuntimeError(f"{self._name}: call reset() before observe()")
        seat = self.agent_name_mapping.get(agent)
        if seat is None:
            raise ValueError(f"unknown agent {agent!r}; agents: {list(AGENTS)}")
        if game.to_move == seat and not self.terminations.get(agent, True):
            legal = game.legal
            mask = (self._mask if legal == self._mask_bits else self._legal_mask(legal)).copy()
        else:
            mask = _ZERO_MASK.copy()
        obs = self._observer.observe(seat)
        if self._float:
            obs = obs * self._obs_scale
        return {"observation": obs, "action_mask": mask}

    def step(self, action: int) -> None:
        game = self._game
        if game is None:
            raise RuntimeError(f"{self._name}: call reset() before step()")
        if not self.agents:
            raise RuntimeError(f"{self._name}: the episode is over (every agent is done): reset()")
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        if self._dirty:
            self._clear_rewards()
            for a in AGENTS:
                self.infos[a] = {}
            self._dirty = False
        seat = game.to_move
        if type(action) is not int or not 0 <= action < N_ACTIONS:  # the common case: no call
            action = check_action(action)  # an int id 0-55, or IllegalActionError naming it
        game.step(action)  # raises IllegalActionError (a ValueError) naming phase and legal set
        self._observer.update(game, seat, action)
        self._cumulative_rewards[agent] = 0.0
        if game.is_over:
            self._end_hand(game)
        else:
            nxt = AGENTS[game.to_move]
            self.agent_selection = nxt
            infos = self.infos
            infos[agent].pop("action_mask", None)  # only the agent to move has one
            mask = mask_from_bits(game.legal)  # a new position: its mask, built once
            self._mask, self._mask_bits = mask, game.legal
            infos[nxt]["action_mask"] = mask.copy()
        if self.render_mode == "human":
            self.render()

    def _end_hand(self, game: Game) -> None:
        self._dirty = True
        scale = self.reward_scale
        for a, r in zip(AGENTS, cast(tuple[int, ...], game.rewards), strict=True):
            self.rewards[a] = r * scale
        result = cast(dict[str, Any], game.result())  # set: the hand is over
        result["hand_number"] = game.hand_number
        result["dealer"] = game.dealer
        self.hand_results.append(result)
        for a in AGENTS:
            self.infos[a] = {"hand_result": result}
        self._accumulate_rewards()
        match = self.match
        if match.add_hand(cast(tuple[int, int], game.scores)):
            self._start_hand(random_deal(self._rng, match.dealer))
            return
        if match.winner is not None:
            for a in AGENTS:
                self.infos[a]["match_winner_team"] = match.winner
                self.infos[a]["match_scores"] = list(match.scores)
        self.terminations = dict.fromkeys(AGENTS, True)

    def last(self, observe: bool = True) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self._game is None:
            raise RuntimeError(f"{self._name}: call reset() before last()")
        if not self.agents:
            raise RuntimeError(f"{self._name}: the episode is over (every agent is done): reset()")
        return super().last(observe)

    # ------------------------------------------------------------------ extras
    def state(self) -> np.ndarray:
        """Full information (all four hands), for centralised critics; in ``obs_format``."""
        state = encode_state(self.game, self._observer.canon)
        return state * _STATE_SCALE if self._float else state

    def legal_actions(self) -> list[int]:
        return cards_of(self.game.legal)

    def game_record(self) -> dict[str, Any]:
        """The current hand as a JSON-serialisable record (see butifarra_env.records.files)."""
        return game_record(self.game)

    def render(self) -> str | np.ndarray | None:
        """The whole table (all four hands): text for "human" (printed) and "ansi", an RGB
        ``uint8`` (720, 960, 3) image for "rgb_array"."""
        if self.render_mode is None:
            gymnasium.logger.warn(
                "You are calling render without a render_mode; "
                "pass render_mode='ansi', 'human' or 'rgb_array'."
            )
            return None
        if self.render_mode == "rgb_array":
            from butifarra_env.envs.render_image import render_table  # Pillow: loaded on first use

            return render_table(self.game, None, target_score=self.game_options.target_score)
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
# env (read-only, as the wrappers themselves never rebind them), each through a C-level
# ``attrgetter`` instead of a Python getter: about 20 reads a decision, 5 % of a random-play
# step through ``env()``.
_HOT_ATTRIBUTES = (
    "agent_selection",
    "agents",
    "rewards",
    "terminations",
    "truncations",
    "infos",
    "_cumulative_rewards",
)


class _BeforeReset:
    """What a guarded wrapper reads its hot attributes from until its first ``reset()``: an
    AttributeError, so Python falls back to the wrappers' ``__getattr__`` and the user sees
    OrderEnforcingWrapper's own "cannot be accessed before reset"."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"{name} cannot be accessed before reset")


_BEFORE_RESET = _BeforeReset()


def _fast(cls: type, name: str, guarded: bool = False) -> type:
    """``cls`` reading the hot attributes from the bare env (``_target``: for a guarded
    wrapper, :data:`_BEFORE_RESET` until its first ``reset()``, as OrderEnforcingWrapper's
    ``_has_reset``, which is set at the same moment)."""
    attrs: dict[str, Any] = {
        attr: property(operator.attrgetter(f"_target.{attr}")) for attr in _HOT_ATTRIBUTES
    }
    base_init = cls.__init__  # type: ignore[misc]
    base_reset = cls.reset  # type: ignore[attr-defined]

    def __init__(self: Any, inner: AECEnv, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        base_init(self, inner, *args, **kwargs)
        self._raw = inner.unwrapped
        self._target = _BEFORE_RESET if guarded else self._raw

    def reset(self: Any, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self._target = self._raw
        base_reset(self, seed=seed, options=options)

    attrs["__init__"] = __init__
    if guarded:
        attrs["reset"] = reset
    attrs["__doc__"] = cls.__doc__
    attrs["__module__"] = __name__
    attrs["__qualname__"] = name
    return type(name, (cls,), attrs)


class CheckActionWrapper(wrappers.BaseWrapper):
    """PettingZoo's AssertOutOfBoundsWrapper with a real check: an action that is not an int id
    0-55 raises IllegalActionError naming it (an ``assert`` would vanish under ``python -O``).
    Agents that are done must step ``None``, as PettingZoo requires."""

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if not (self.terminations[agent] or self.truncations[agent]):
            action = check_action(action)
        super().step(action)


FastTerminateIllegalWrapper = _fast(wrappers.TerminateIllegalWrapper, "FastTerminateIllegalWrapper")
FastCheckActionWrapper = _fast(CheckActionWrapper, "FastCheckActionWrapper")
FastOrderEnforcingWrapper = _fast(
    wrappers.OrderEnforcingWrapper, "FastOrderEnforcingWrapper", guarded=True
)


def env(**kwargs: Any) -> AECEnv:
    """The environment with PettingZoo's standard wrappers: an illegal move ends the episode
    with the mover penalised by the worst possible hand loss (PettingZoo's convention)."""
    return wrap(raw_env(**kwargs))


def wrap(base: raw_env) -> AECEnv:
    """``base`` inside the standard wrappers of :func:`env`."""
    penalty = -base.game_options.worst_hand_loss * base.reward_scale
    wrapped: AECEnv = FastTerminateIllegalWrapper(base, illegal_reward=penalty)
    wrapped = FastCheckActionWrapper(wrapped)
    return FastOrderEnforcingWrapper(wrapped)
