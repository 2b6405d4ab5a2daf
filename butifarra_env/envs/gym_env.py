"""Gymnasium single-agent view: the learner plays one seat, given policies play the others.

The observation is the AEC env's dict (``observation`` + ``action_mask``); the learner's mask
is also in ``info["action_mask"]`` (from ``reset`` and every ``step``) and returned by
:meth:`SingleAgentEnv.action_masks`, which is what sb3-contrib's MaskablePPO calls. The reward
of a step is everything the learner's seat received since its previous decision (non-zero
when a hand ends).

``gymnasium.make("butifarra_env/Butifarra-v0")`` returns this class itself, unwrapped (the
registration turns off Gymnasium's passive checker and order-enforcing wrappers, whose checks
this env makes itself: every method raises a RuntimeError naming ``reset()`` before the first
reset), so ``action_masks()`` is reachable on what ``make`` returns. Under wrappers a user
adds, ``env.get_wrapper_attr("action_masks")()`` reaches it, as SB3 and sb3-contrib do.
``"butifarra_env/Butifarra-v1"`` is the same class with ``obs_version=1``: the learner gets the
``butifarra_v1`` observation (638 values), its opponents still the v0 one (the shipped agents
read v0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium
import numpy as np

from butifarra_env.core.actions import N_ACTIONS, random_legal_actions
from butifarra_env.core.game import Game
from butifarra_env.core.observation import OBS_SIZE, layout
from butifarra_env.core.policy import Policy, PolicyFn, is_policy, seat_policies
from butifarra_env.core.render import render_text
from butifarra_env.core.validate import (
    RENDER_MODES,
    check_action,
    check_obs_format,
    check_render_mode,
    check_reset_options,
    check_seat,
    check_seed,
)
from butifarra_env.envs.aec import AGENTS, raw_env, seat_observation_space

ILLEGAL_ACTION_MODES = ("penalize", "raise")


class SingleAgentEnv(gymnasium.Env):
    """Butifarra for one learner; ``seat`` is the learner's seat (0-3).

    ``opponents``: None (uniform random legal moves, seeded from ``reset``), one policy for the
    three other seats, a sequence of three (the other seats in ascending order), or a mapping
    seat -> policy. ``illegal_action``: "penalize" (default: the episode ends and the learner
    gets minus the worst possible hand loss, as in ``butifarra_v0.env()``) or "raise".
    ``obs_format``: "uint8" (default) or "float32" (each entry times
    ``observation.scale_vector()``, in [0, 1]; the space says so). ``reward_scale``: rewards
    are raw points by default; ``1/36`` puts a typical hand near +-1 (the extremes at +-32),
    the scale external learners expect (see ``butifarra_v0``). ``render_mode``:
    "human"/"ansi" (text) or "rgb_array" (an image); both show the learner's hand only, or all
    four with ``render_all_hands=True``. ``obs_version``: the learner's observation layout, 0
    (``butifarra_v0``, default) or 1 (``butifarra_v1``: the trick history and the variants).
    Opponent policies always get the v0 ``uint8`` observation (491 values: the first 491 of
    a v1 one), which is what the shipped agents read. Other keyword arguments are the game
    options of ``butifarra_v0``.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 2}

    def __init__(
        self,
        seat: int = 0,
        opponents: Policy | PolicyFn | Sequence[Any] | Mapping[int, Any] | None = None,
        *,
        illegal_action: str = "penalize",
        render_mode: str | None = None,
        render_all_hands: bool = False,
        reward_scale: float = 1.0,
        obs_format: str = "uint8",
        obs_version: int = 0,
        **options: Any,
    ) -> None:
        seat = check_seat(seat)
        if illegal_action not in ILLEGAL_ACTION_MODES:
            raise ValueError(
                f"illegal_action must be one of {ILLEGAL_ACTION_MODES}, got {illegal_action!r}"
            )
        if not isinstance(render_all_hands, bool):
            raise ValueError(f"render_all_hands must be True or False, got {render_all_hands!r}")
        self._aec = raw_env(
            render_mode=None, reward_scale=reward_scale, obs_version=obs_version, **options
        )
        self.obs_version = self._aec.obs_version
        self.obs_format = check_obs_format(obs_format)
        self._float = self.obs_format == "float32"  # the learner's; opponents always get uint8
        self._obs_scale = layout(self.obs_version).scale_vector()
        self.render_mode = check_render_mode(render_mode)
        self.render_all_hands = render_all_hands
        self.seat = seat
        self.agent = AGENTS[seat]
        self.illegal_action = illegal_action
        self._illegal_reward = -float(self._aec.game_options.worst_hand_loss) * reward_scale
        self._policies: dict[int, Policy | PolicyFn | None] = seat_policies(
            opponents, seat, is_policy, "act(observation, action_mask) or be callable"
        )
        self._interrupted: str | None = None  # why the hand stopped between two decisions
        self.observation_space = seat_observation_space(self.obs_format, self.obs_version)
        self.action_space = gymnasium.spaces.Discrete(N_ACTIONS)

    @property
    def game(self) -> Game:
        """The underlying :class:`~butifarra_env.core.game.Game` (the current hand)."""
        return self._aec.game

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        seed = check_seed(seed)
        options = check_reset_options(options)
        super().reset(seed=seed)
        if seed is not None:
            for k, p in enumerate(self._policies.values()):
                if p is not None and hasattr(p, "reset"):
                    p.reset(seed=seed + 1 + k)
        self._aec.reset(seed=seed, options=options)
        self._interrupted = None
        reward = self._play_others()
        obs = self._observe()
        info: dict[str, Any] = {"skipped_reward": reward} if reward else {}
        info["action_mask"] = obs["action_mask"].copy()
        return obs, info

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Play the learner's ``action`` (an int id 0-55; anything else raises
        IllegalActionError), then the other seats until the learner's next turn or the end."""
        aec = self._aec
        self._check_learner_to_move("step()")
        action = check_action(action)
        if not (aec.game.legal >> action) & 1:
            if self.illegal_action == "raise":
                aec.step(action)  # raises IllegalActionError naming phase and legal actions
            obs = self._observe()
            obs["action_mask"][:] = 0
            aec.terminations = dict.fromkeys(AGENTS, True)
            why = {"illegal_action": action, "action_mask": obs["action_mask"].copy()}
            return obs, self._illegal_reward, True, False, why
        aec.step(action)
        reward = float(aec.rewards[self.agent]) + self._play_others()
        terminated = bool(aec.terminations[self.agent])
        info: dict[str, Any] = {}
        if "hand_result" in aec.infos[self.agent]:
            info = {k: v for k, v in aec.infos[self.agent].items() if k != "action_mask"}
        obs = self._observe()
        info["action_mask"] = obs["action_mask"].copy()
        if self.render_mode == "human":
            self.render()
        return obs, reward, terminated, False, info

    def _observe(self) -> dict[str, np.ndarray]:
        """The learner's observation, in its ``obs_format``."""
        obs = self._aec.observe(self.agent)
        if self._float:
            obs["observation"] = obs["observation"] * self._obs_scale
        return obs

    def _check_learner_to_move(self, what: str) -> None:
        """Refuse to act for the learner unless it really is the learner's turn."""
        aec = self._aec
        if aec._game is None:
            raise RuntimeError(f"call reset() before {what}")
        if self._interrupted is not None:
            raise RuntimeError(
                f"{self._interrupted}; the hand cannot go on from there: call reset()"
            )
        if aec.terminations[self.agent]:
            raise RuntimeError(f"the episode is over: call reset() before {what}")

    def _play_others(self) -> float:
        """Let the other seats move until the learner's turn or the end; their moves may end
        a hand, so the learner's share of those rewards is summed and returned. A policy that
        raises or answers an illegal action leaves the hand unfinished: it is reported, and
        every later step refuses until reset()."""
        aec = self._aec
        reward = 0.0
        while not aec.terminations[self.agent] and aec.agent_selection != self.agent:
            who = aec.agent_selection
            seat = aec.agent_name_mapping[who]
            obs = aec.observe(who)
            if self.obs_version:  # opponents read v0: its 491 values start every v1 vector
                obs["observation"] = obs["observation"][:OBS_SIZE]
            policy = self._policies[seat]
            try:
                if policy is None:
                    action = random_legal_actions(obs["action_mask"][None], self.np_random)[0]
                elif isinstance(policy, Policy):
                    action = policy.act(obs["observation"], obs["action_mask"])
                else:
                    action = policy(obs["observation"], obs["action_mask"])
                aec.step(action)
            except Exception as e:
                self._interrupted = f"the opponent policy at seat {seat} ({policy!r}) failed: {e}"
                raise
            reward += float(aec.rewards[self.agent])
        return reward

    def action_masks(self) -> np.ndarray:
        """Legal actions of the learner now, as a bool (56,) array (sb3-contrib MaskablePPO);
        all False once the episode is over."""
        if self._aec._game is None:
            raise RuntimeError("call reset() before action_masks()")
        return self._aec.observe(self.agent)["action_mask"].astype(bool)

    def render(self) -> str | np.ndarray | None:  # type: ignore[override]
        """The learner's view (or the whole table with ``render_all_hands``): text for "human"
        (printed) and "ansi", an RGB ``uint8`` (720, 960, 3) image for "rgb_array"."""
        if self.render_mode is None:
            gymnasium.logger.warn(
                "render() called without a render_mode ('ansi', 'human' or 'rgb_array')"
            )
            return None
        if self._aec._game is None:
            raise RuntimeError("call reset() before render()")
        target = self._aec.game_options.target_score
        if self.render_mode == "rgb_array":
            from butifarra_env.envs.render_image import render_table  # Pillow: loaded on first use

            return render_table(
                self._aec.game, self.seat, reveal=self.render_all_hands, target_score=target
            )
        text = render_text(self._aec.game, None if self.render_all_hands else self.seat, target)
        if self.render_mode == "human":
            print(text)
            return None
        return text
