"""Gymnasium vector env over the batched engine: one learner seat in each of N hands.

::

    envs = gymnasium.make_vec("butifarra_env/Butifarra-v0", num_envs=256,
                              vectorization_mode="vector_entry_point", seat=0, opponents=None)

Sub-env ``i`` is the learner's seat in hand ``i`` of a
:class:`~butifarra_env.envs.batched.BatchedEnv`;
the other three seats are played by batched opponent policies until it is the learner's turn
again, exactly as :class:`~butifarra_env.envs.gym_env.SingleAgentEnv` does for one hand. Each
sub-env therefore behaves like one ``SingleAgentEnv``: the same observation dict
(``observation`` (491,) in ``obs_format`` + ``action_mask`` (56,) ``int8``), the same rewards
(the learner team's score difference at each hand end, times ``reward_scale``, also when an
opponent's card ends the hand), ``terminated`` at the episode's end (the hand, or the match
with ``target_score``), never truncated. ``tests/test_gym_vector.py`` holds it to N
``SingleAgentEnv`` fed the same deals. ``obs_version=1`` (``gymnasium.make_vec(
"butifarra_env/Butifarra-v1", ...)``) gives the learner the ``butifarra_v1`` observation
(638 values, the engine's ``BatchedEnv(..., obs_version=1)`` rows), as the single env does.

Masks: ``obs["action_mask"]``, ``info["action_mask"]`` (N, 56) ``int8`` and
:meth:`ButifarraVectorEnv.action_masks` (N, 56) ``bool``; every row has a legal action, so a
masked sampler can act on every row. In NEXT_STEP mode a sub-env showing its terminal
observation offers only :data:`RESET_STEP_ACTION` (pass, 55): its next action is ignored
and the new episode starts (the single env's terminal mask is all zeros; here the row must
still be sampled). ``call``, ``get_attr`` and ``set_attr`` work as in Gymnasium's vector envs
(``envs.call("action_masks")`` gives each sub-env's row, as SB3's ``env_method`` asks). Infos
hold the masks only (no per-hand ``hand_result``; ``SingleAgentEnv`` or game records have it).

Speed: a step lasts until the learner is to move in every hand, so it costs as many engine
steps as the longest run of opponent decisions among the N hands (about 8 at N=256, bidding
included); each is one batched step of all N hands.

Autoreset (``metadata["autoreset_mode"]``): ``NEXT_STEP`` (Gymnasium's default): the step that
ends an episode returns its terminal observation; the next step ignores that sub-env's action
and returns the first observation of a new episode, reward 0. ``SAME_STEP``
(``autoreset_mode=AutoresetMode.SAME_STEP``): the ending step already returns the new
episode's first observation, with the terminal one in ``info["final_obs"]`` (an object array,
``info["_final_obs"]`` marking the sub-envs that ended) and its info in ``info["final_info"]``.

Opponents: None (uniformly random legal moves from the env's generator, seeded by ``reset``),
one policy for the three other seats, three (the other seats in ascending order) or a mapping
seat -> policy; a policy is an object with ``act_batch(observations, action_masks)`` (any
:class:`agents.base.Agent`) or a callable on batches, ``(uint8 (k, 491), int8 (k, 56)) ->
(k,) ints``. Opponents always get ``uint8`` v0 observations, whatever the learner's
``obs_format`` and ``obs_version`` (the first 491 values of a v1 row: the shipped agents read
v0). Seeding: ``reset(seed=s)`` fixes every deal and every random opponent move
(one int: one generator drives all N hands; opponents with a ``reset(seed)`` method get
``s + 1 + k``). An illegal learner action raises ValueError naming the sub-env and leaves
everything as it was (no "penalize" mode here). No rendering (``render_mode`` must be None):
render a ``SingleAgentEnv`` to watch a hand.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from butifarra_env.core.actions import N_ACTIONS, PASS, random_legal_actions
from butifarra_env.core.observation import OBS_SIZE, layout
from butifarra_env.core.policy import BatchPolicy, seat_policies
from butifarra_env.core.rules import N_SEATS
from butifarra_env.core.validate import (
    check_int,
    check_obs_format,
    check_reset_options,
    check_reward_scale,
    check_seat,
)
from butifarra_env.envs.aec import seat_observation_space
from butifarra_env.envs.batched import BatchedEnv

__all__ = ["RESET_STEP_ACTION", "ButifarraVectorEnv"]

_MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP)
_RESET_OPTION_KEYS = ("dealers", "hands")
_MAX_OPPONENT_ROUNDS = 64  # consecutive opponent decisions before the learner's turn: < 16

RESET_STEP_ACTION = PASS
"""The one action a NEXT_STEP sub-env showing its terminal observation offers (its mask has
this bit only, so a masked sampler always has a legal action); the action is ignored and the
sub-env's next episode starts."""
_RESET_STEP_MASK = np.zeros(N_ACTIONS, np.int8)
_RESET_STEP_MASK[RESET_STEP_ACTION] = 1
_SHARED_ATTRS = {
    "seat": "seat",
    "reward_scale": "reward_scale",
    "obs_format": "obs_format",
    "obs_version": "obs_version",
    "autoreset_mode": "autoreset_mode",
    "options": "options",
    "metadata": "metadata",
    "render_mode": "render_mode",
    "spec": "spec",
    "observation_space": "single_observation_space",
    "action_space": "single_action_space",
}


class ButifarraVectorEnv(gymnasium.vector.VectorEnv):
    """``num_envs`` learner seats, one per hand of a batched engine (see the module docs).

    ``seat`` (0-3) is the learner's seat in every hand; ``options`` are the game options of
    ``butifarra_v0`` (``target_score``, ``max_doubling_level``, the variants ``obligada``,
    ``linear_doubling``, ``butifarra_max_doubling_level``...); ``obs_version`` 0 or 1 is the
    learner's observation layout (``butifarra_v0`` or ``butifarra_v1``). The engine is
    :attr:`engine` (for fixed deals: ``engine.set_deal_fn``; ``engine.current_deals()``).
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(
        self,
        num_envs: int = 1,
        seat: int = 0,
        opponents: Any = None,
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        reward_scale: float = 1.0,
        obs_format: str = "uint8",
        obs_version: int = 0,
        render_mode: str | None = None,
        **options: Any,
    ) -> None:
        self.num_envs = check_int("num_envs", num_envs, 1)
        self.seat = check_seat(seat)
        try:
            mode = AutoresetMode(autoreset_mode)
        except ValueError:
            mode = None
        if mode is None or mode not in _MODES:
            raise ValueError(
                f"autoreset_mode must be AutoresetMode.NEXT_STEP or SAME_STEP, "
                f"got {autoreset_mode!r} (the engine deals again as soon as a hand ends)"
            )
        if render_mode is not None:
            raise ValueError(
                f"render_mode must be None (the vector env does not render; render a "
                f"SingleAgentEnv to watch a hand), got {render_mode!r}"
            )
        self.autoreset_mode: AutoresetMode = mode
        self.metadata = {**type(self).metadata, "autoreset_mode": mode}
        self.reward_scale = check_reward_scale(reward_scale)
        self.obs_format = check_obs_format(obs_format)
        self._policies = seat_policies(
            opponents,
            self.seat,
            _is_batch_policy,
            "act_batch(observations, action_masks) or be callable on batches",
        )
        self._groups = _groups(self._policies)
        # Raw integer rewards from the engine, scaled here in float64: the single env's values.
        self.engine = BatchedEnv(
            self.num_envs, keep_final_obs=True, obs_version=obs_version, **options
        )
        self.obs_version: int = self.engine.obs_version
        size = self.engine.observation_size
        self._obs_scale = layout(self.obs_version).scale_vector()
        self.options: dict[str, Any] = self.engine.options.to_dict()
        self.render_mode = None
        self.single_observation_space = seat_observation_space(self.obs_format, self.obs_version)
        self.single_action_space = gymnasium.spaces.Discrete(N_ACTIONS)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        n = self.num_envs
        self._obs = np.zeros((n, size), np.uint8)  # the engine's current decision
        self._mask = np.zeros((n, N_ACTIONS), np.int8)
        self._seat = np.zeros(n, np.int64)
        self._shown_mask = self._mask  # the masks of the observations last returned
        self._autoreset = np.zeros(n, dtype=bool)  # NEXT_STEP: ended on the previous step
        self._started = False
        self._broken: str | None = None
        self._user_attrs: dict[str, list[Any]] = {}

    # ------------------------------------------------------------------ Gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """New episodes in every sub-env. ``seed``: one int (or None) for all of them.
        ``options``: ``{"dealers": (N,), "hands": (N, 4, 12)}`` fix the first deals."""
        if isinstance(seed, (list, tuple, np.ndarray)):
            raise ValueError(
                f"seed must be None or one int >= 0 (one generator drives all {self.num_envs} "
                f"hands), got a sequence {seed!r}"
            )
        seed = check_int("seed", seed, 0, none_ok=True)
        options = check_reset_options(options)
        unknown = set(options) - set(_RESET_OPTION_KEYS)
        if unknown:
            raise ValueError(
                f"unknown reset option(s) {sorted(unknown)}; known: {list(_RESET_OPTION_KEYS)}"
            )
        self._obs, self._mask, self._seat = self.engine.reset(
            seed, dealers=options.get("dealers"), hands=options.get("hands")
        )
        if seed is not None:
            opponent_seed = np.random.SeedSequence(seed).spawn(1)[0]
            self._np_random, self._np_random_seed = np.random.default_rng(opponent_seed), seed
            for k, policy in enumerate(_unique(self._policies.values())):
                if policy is not None and hasattr(policy, "reset"):
                    policy.reset(seed=seed + 1 + k)
        self._started = True
        self._broken = None
        self._autoreset[:] = False
        n = self.num_envs
        self._play_opponents(np.zeros(n), np.zeros(n, bool), self._final_buffer())
        self._shown_mask = self._mask
        return self._observation(self._obs, self._mask), self._mask_info(self._mask)

    def step(
        self, actions: Any
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The learner's action in every sub-env (those awaiting their NEXT_STEP reset are
        ignored), then the opponents until the learner's next turn everywhere."""
        if not self._started:
            raise RuntimeError("call reset() before step()")
        if self._broken is not None:
            raise RuntimeError(f"{self._broken}; the hands cannot go on from there: call reset()")
        n = self.num_envs
        raw = np.zeros(n)
        ended = np.zeros(n, dtype=bool)
        final = self._final_buffer()
        moving = ~self._autoreset
        if moving.any():  # ValueError here (bad shape, dtype, illegal id) changes nothing
            out = self.engine.step(actions, active=None if moving.all() else moving)
            self._absorb(out, raw, ended, final)
        self._play_opponents(raw, ended, final)
        rewards = raw * self.reward_scale  # float64, as the single env's
        obs, mask = self._obs, self._mask
        info: dict[str, Any] = {}
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            if ended.any():
                obs = np.where(ended[:, None], final, obs)
                mask = np.where(ended[:, None], _RESET_STEP_MASK, mask)
            self._autoreset = ended
        elif ended.any():  # SAME_STEP
            info = self._final_info(ended, final)
        self._shown_mask = mask
        info.update(self._mask_info(mask))
        truncated = np.zeros(n, dtype=bool)
        return self._observation(obs, mask), rewards, ended, truncated, info

    def action_masks(self) -> np.ndarray:
        """The learner's legal actions in every sub-env, (N, 56) ``bool`` (a NEXT_STEP
        sub-env showing its terminal observation offers :data:`RESET_STEP_ACTION` only)."""
        if not self._started:
            raise RuntimeError("call reset() before action_masks()")
        return self._shown_mask.astype(bool)

    # ------------------------------------------------------------------ per-sub-env access
    def get_attr(self, name: str) -> tuple[Any, ...]:
        """``name`` of every sub-env, as Gymnasium's vector envs give it: ``action_masks``
        (a method: each sub-env's own row), the settings all hands share (``seat``,
        ``reward_scale``, ``obs_format``, ``autoreset_mode``, ``options``, ``metadata``,
        ``render_mode``, ``spec``, ``observation_space``, ``action_space``: the single
        spaces) or a value :meth:`set_attr` stored. AttributeError lists them otherwise."""
        return tuple(self._sub_attr(i, name) for i in range(self.num_envs))

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call ``name`` on every sub-env (an attribute that is not callable is returned)."""
        out = []
        for value in self.get_attr(name):
            out.append(value(*args, **kwargs) if callable(value) else value)
        return tuple(out)

    def set_attr(self, name: str, values: Any) -> None:
        """Set ``name`` in every sub-env: one value for all, or a list/tuple of ``num_envs``.
        The env's own settings are shared by the N hands of one engine and cannot be changed
        here (ValueError says so); other names are stored per sub-env for :meth:`get_attr`."""
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            raise ValueError(f"an attribute name must be a public identifier, got {name!r}")
        if name in _SHARED_ATTRS or name == "action_masks":
            raise ValueError(
                f"{name!r} is shared by the {self.num_envs} hands of one batched engine and "
                "cannot be set per sub-env; build a new env with the setting you want"
            )
        if isinstance(values, (list, tuple)):
            if len(values) != self.num_envs:
                raise ValueError(
                    f"set_attr({name!r}, ...) needs one value or {self.num_envs} of them, "
                    f"got {len(values)}"
                )
            per_env = list(values)
        else:
            per_env = [values] * self.num_envs
        self._user_attrs[name] = per_env

    def _sub_attr(self, i: int, name: str) -> Any:
        if name == "action_masks":
            return lambda: self.action_masks()[i]
        if name in _SHARED_ATTRS:
            return getattr(self, _SHARED_ATTRS[name])
        if name in self._user_attrs:
            return self._user_attrs[name][i]
        known = sorted({"action_masks", *_SHARED_ATTRS, *self._user_attrs})
        raise AttributeError(f"the sub-envs have no attribute {name!r}; they have {known}")

    # ------------------------------------------------------------------ internals
    def _play_opponents(self, raw: np.ndarray, ended: np.ndarray, final: np.ndarray) -> None:
        """Let the opponents move, in every hand where one is to move, until the learner's
        turn everywhere; their moves may end episodes (recorded into ``raw``, ``ended`` and
        ``final``). A policy that fails stops the env until reset()."""
        for _ in range(_MAX_OPPONENT_ROUNDS):
            waiting = self._seat != self.seat
            if not waiting.any():
                return
            actions = np.zeros(self.num_envs, dtype=np.int64)
            for policy, seats, plays in self._groups:
                rows = np.flatnonzero(plays[self._seat])
                if rows.size:
                    actions[rows] = self._act(policy, seats, rows)
            try:
                out = self.engine.step(actions, active=None if waiting.all() else waiting)
            except ValueError as e:
                self._broken = f"an opponent policy answered an illegal action: {e}"
                raise
            self._absorb(out, raw, ended, final)
        raise RuntimeError(f"the opponents made {_MAX_OPPONENT_ROUNDS} moves in a row")

    def _act(self, policy: Any, seats: tuple[int, ...], rows: np.ndarray) -> np.ndarray:
        obs, masks = self._obs[rows, :OBS_SIZE], self._mask[rows]  # opponents read v0
        try:
            if policy is None:
                return random_legal_actions(masks, self.np_random)
            if isinstance(policy, BatchPolicy):
                out = policy.act_batch(obs, masks)
            else:
                out = policy(obs, masks)
            actions = np.asarray(out)
            if actions.shape != rows.shape or actions.dtype.kind not in "iu":
                raise ValueError(
                    f"expected {rows.size} int actions of shape {rows.shape}, got "
                    f"{actions.dtype} {actions.shape}"
                )
            return actions
        except Exception as e:
            self._broken = f"the opponent policy of seats {list(seats)} ({policy!r}) failed: {e}"
            raise

    def _absorb(
        self, out: tuple[Any, ...], raw: np.ndarray, ended: np.ndarray, final: np.ndarray
    ) -> None:
        """Take one engine step's outputs: the new position, the learner's rewards and the
        terminal observations of the episodes that ended."""
        self._obs, self._mask, self._seat, rewards, done = out
        raw += rewards[:, self.seat]
        if done.any():
            ids, views = self.engine.final_observations()
            final[ids] = views[:, self.seat]
            ended |= done

    def _observation(self, obs: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        vec = obs * self._obs_scale if self.obs_format == "float32" else obs.copy()
        return {"observation": vec, "action_mask": mask.copy()}

    def _final_buffer(self) -> np.ndarray:
        """Room for the terminal observations of one step, one row per sub-env."""
        return np.zeros_like(self._obs)

    def _mask_info(self, mask: np.ndarray) -> dict[str, Any]:
        return {"action_mask": mask.copy(), "_action_mask": np.ones(self.num_envs, dtype=bool)}

    def _final_info(self, ended: np.ndarray, final: np.ndarray) -> dict[str, Any]:
        """SAME_STEP: the terminal observations and infos, as Gymnasium's vector envs batch
        them (an object array of observations; infos key by key, with ``_key`` masks)."""
        final_obs = np.full(self.num_envs, None, dtype=object)
        zero = np.zeros(N_ACTIONS, np.int8)
        for i in np.flatnonzero(ended):
            vec = final[i] * self._obs_scale if self.obs_format == "float32" else final[i].copy()
            final_obs[i] = {"observation": vec, "action_mask": zero.copy()}
        masks = np.zeros((self.num_envs, N_ACTIONS), np.int8)
        return {
            "final_obs": final_obs,
            "_final_obs": ended.copy(),
            "final_info": {"action_mask": masks, "_action_mask": ended.copy()},
            "_final_info": ended.copy(),
        }


def _is_batch_policy(obj: object) -> bool:
    return isinstance(obj, BatchPolicy) or callable(obj)


def _unique(policies: Any) -> list[Any]:
    """Each distinct policy once, in seat order."""
    seen: list[Any] = []
    for p in policies:
        if not any(p is q for q in seen):
            seen.append(p)
    return seen


def _groups(policies: dict[int, Any]) -> list[tuple[Any, tuple[int, ...], np.ndarray]]:
    """Each policy with the seats it plays, as a tuple and as a seat -> bool table: one call
    per policy per round."""
    out = []
    for p in _unique(policies.values()):
        seats = tuple(s for s, q in policies.items() if q is p)
        out.append((p, seats, np.isin(np.arange(N_SEATS), seats)))
    return out
