"""Outside policies as arena players: :func:`as_agent` turns a function, a policy object or a
Stable-Baselines3 model into an :class:`~agents.base.Agent`.

The arena (:mod:`agents.evaluation.arena`) and the environments speak :class:`~agents.base.Agent`:
``uint8`` (N, 491) observations and ``int8`` (N, 56) masks in, action ids out. A policy
trained in another framework sees the same game through its own observation format, so
this module converts once, here, instead of in every notebook:

* a callable ``(observation, action_mask) -> action`` is asked one decision at a time;
* an object with ``act(observation, action_mask)`` and/or ``act_batch(observations,
  action_masks)`` (:class:`butifarra_env.core.policy.Policy` / ``BatchPolicy``) is asked in
  batches when it has ``act_batch``; its ``reset(seed)`` and ``action_probs_batch`` are used
  when present;
* a model with ``predict(observation, action_masks=..., deterministic=True)`` (sb3-contrib's
  ``MaskablePPO``, or anything with that signature) is asked once per batch, greedily, with
  the observation in the format of its own ``observation_space``: the env's dict
  (``{"observation": (N, 491), "action_mask": (N, 56)}``, ``uint8`` or the ``float32``
  ``obs_format`` scaled into [0, 1]), RLlib's ``"observations"`` key, or the bare (N, 491)
  vector (e.g. after ``FilterObservation`` + ``FlattenObservation``).

Nothing here imports a framework. With ``workers > 1`` the arena sends agents to worker
processes, so the wrapped object must then be picklable (a lambda is not).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from agents.base import Agent, check_batch
from butifarra_env.core.actions import N_ACTIONS
from butifarra_env.core.observation import OBS_SIZE, scale_vector

__all__ = ["MASK_KEY", "VECTOR_KEYS", "PolicyAgent", "PredictAgent", "as_agent"]

VECTOR_KEYS = ("observation", "observations")
"""Dict keys a model's observation space may use for the 491-value vector: ours
(PettingZoo, Gymnasium, SB3) and RLlib's (:mod:`butifarra_env.integrations.rllib`)."""
MASK_KEY = "action_mask"
"""The legal-action mask's key in a model's dict observation."""
_SCALE = scale_vector()

ObservationBuilder = Callable[[np.ndarray, np.ndarray], Any]
"""``(uint8 (N, 491), int8 (N, 56)) -> what the model's predict() takes``."""


def as_agent(obj: object, name: str | None = None) -> Agent:
    """``obj`` as an :class:`~agents.base.Agent` the arena can seat (see the module docs).

    ``name`` labels it in results (default: the object's ``name``, its function name, or
    its class name). An Agent comes back as it is (renamed through a thin wrapper when
    ``name`` differs). Anything that is none of the accepted kinds, a ``predict`` without
    ``action_masks``, or a model whose observation space is not Butifarra's, is a ValueError
    that says what is missing.
    """
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"name must be a non-empty string or None, got {name!r}")
    if isinstance(obj, Agent):
        return obj if name is None or name == obj.name else PolicyAgent(obj, name)
    if isinstance(obj, type):
        raise ValueError(
            f"as_agent got the class {obj.__name__}, not an object: pass an instance, "
            f"e.g. {obj.__name__}()"
        )
    if _method(obj, "act") or _method(obj, "act_batch"):
        return PolicyAgent(obj, name)
    if _method(obj, "predict"):
        return PredictAgent(obj, name)
    if callable(obj):
        return PolicyAgent(obj, name)
    raise ValueError(
        f"as_agent cannot use {type(obj).__name__} {_short(obj)}: it needs one of "
        "act(observation, action_mask) -> action, act_batch(observations, action_masks) -> "
        "actions, predict(observation, action_masks=..., deterministic=True) (a Stable-Baselines3 "
        "masking model such as sb3-contrib's MaskablePPO), or to be a callable "
        "(observation, action_mask) -> action"
    )


class PolicyAgent(Agent):
    """A callable or an ``act``/``act_batch`` object (or another Agent, renamed), asked in
    batches when it has ``act_batch``; ``reset(seed)`` and ``action_probs_batch`` are passed
    on when it has them."""

    def __init__(self, policy: Any, name: str | None = None) -> None:
        self.policy = policy
        self.name = name or _default_name(policy)
        self._act_batch = _method(policy, "act_batch")
        self._act = _method(policy, "act") or (policy if callable(policy) else None)
        if self._act_batch is None and self._act is None:
            raise ValueError(
                f"policy {_short(policy)} has neither act(observation, action_mask), "
                "act_batch(observations, action_masks) nor is it callable"
            )

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        if self._act is None:
            return _one_row(self, observation, action_mask)
        return int(self._act(observation, action_mask))

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        if self._act_batch is None:
            return super().act_batch(observations, action_masks)  # one act() per row
        obs, masks = check_batch(observations, action_masks)
        return np.asarray(self._act_batch(obs, masks))

    def action_probs_batch(
        self, observations: np.ndarray, action_masks: np.ndarray
    ) -> np.ndarray | None:
        probs = _method(self.policy, "action_probs_batch")
        return None if probs is None else probs(observations, action_masks)

    def reset(self, seed: int | None = None) -> None:
        reset = _method(self.policy, "reset")
        if reset is not None:
            reset(seed=seed)


class PredictAgent(Agent):
    """A model with ``predict(observation, action_masks=..., deterministic=True)`` (SB3's
    signature, returning ``(actions, state)``), fed whole batches in the format of its
    ``observation_space`` and played greedily."""

    def __init__(self, model: Any, name: str | None = None) -> None:
        predict = _method(model, "predict")
        if predict is None:
            raise ValueError(f"{_short(model)} has no predict() method")
        if not _accepts(predict, "action_masks"):
            raise ValueError(
                f"{type(model).__name__}.predict() takes no action_masks argument, so it "
                "cannot be told the legal actions; train a masking model (sb3-contrib's "
                "MaskablePPO) or wrap your policy as a callable (observation, action_mask) -> "
                "action"
            )
        self.model = model
        self.name = name or _default_name(model)
        self._predict = predict
        self._build = observation_builder(getattr(model, "observation_space", None))

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        obs, masks = check_batch(observations, action_masks)
        actions, _ = self._predict(
            self._build(obs, masks), action_masks=masks != 0, deterministic=True
        )
        return np.asarray(actions).reshape(len(obs))

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        return _one_row(self, observation, action_mask)


def _one_row(agent: Agent, observation: np.ndarray, action_mask: np.ndarray) -> int:
    """One decision through the agent's batch path."""
    return int(agent.act_batch(np.asarray(observation)[None], np.asarray(action_mask)[None])[0])


def observation_builder(space: object) -> ObservationBuilder:
    """How to turn the arena's ``uint8`` observations and ``int8`` masks into what a model
    with observation space ``space`` was trained on (see the module docs); ValueError for a
    space that is not a Butifarra observation."""
    import gymnasium  # only for outside models, which come with Gymnasium spaces

    if isinstance(space, gymnasium.spaces.Box):
        vector = _vector_converter(space, "observation_space")
        return lambda obs, masks: vector(obs)
    if not isinstance(space, gymnasium.spaces.Dict):
        raise ValueError(
            f"the model's observation_space must be a Box of shape ({OBS_SIZE},) or a Dict "
            f"with one of the keys {list(VECTOR_KEYS)} (and optionally {MASK_KEY!r}), "
            f"got {space!r}"
        )
    keys = list(space.spaces)
    found = [k for k in keys if k in VECTOR_KEYS]
    extra = [k for k in keys if k not in VECTOR_KEYS and k != MASK_KEY]
    if len(found) != 1 or extra:
        raise ValueError(
            f"the model's observation_space must be a Dict with exactly one of the keys "
            f"{list(VECTOR_KEYS)} and optionally {MASK_KEY!r}, got the keys {keys}"
        )
    key = found[0]
    vector = _vector_converter(space[key], f"observation_space[{key!r}]")
    if MASK_KEY not in keys:
        return lambda obs, masks: {key: vector(obs)}
    mask_space = space[MASK_KEY]
    if mask_space.shape != (N_ACTIONS,):
        raise ValueError(
            f"observation_space[{MASK_KEY!r}] must have shape ({N_ACTIONS},), "
            f"got {mask_space.shape}"
        )
    mask_dtype = mask_space.dtype
    return lambda obs, masks: {key: vector(obs), MASK_KEY: masks.astype(mask_dtype, copy=False)}


def _vector_converter(space: object, what: str) -> Callable[[np.ndarray], np.ndarray]:
    """uint8 stays uint8; a float space bounded by 1 gets the ``obs_format="float32"``
    values (times :func:`~butifarra_env.core.observation.scale_vector`); any other dtype gets
    the raw values cast (RLlib's float32 counts)."""
    import gymnasium

    if not isinstance(space, gymnasium.spaces.Box) or space.shape != (OBS_SIZE,):
        raise ValueError(f"{what} must be a Box of shape ({OBS_SIZE},), got {space!r}")
    dtype = space.dtype
    if dtype == np.uint8:
        return lambda obs: obs.astype(np.uint8, copy=False)
    if np.issubdtype(dtype, np.floating) and bool(np.all(space.high <= 1.0)):
        return lambda obs: (obs * _SCALE).astype(dtype, copy=False)
    return lambda obs: obs.astype(dtype, copy=False)


def _method(obj: object, name: str) -> Callable[..., Any] | None:
    method = getattr(obj, name, None)
    return method if callable(method) else None


def _accepts(function: Callable[..., Any], keyword: str) -> bool:
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): let the call decide
        return True
    return any(p.name == keyword or p.kind is p.VAR_KEYWORD for p in params)


def _default_name(obj: object) -> str:
    name = getattr(obj, "name", None)
    if isinstance(name, str) and name:
        return name
    name = getattr(obj, "__name__", None)
    if isinstance(name, str) and name:
        return "lambda" if name == "<lambda>" else name
    return type(obj).__name__


def _short(obj: object, limit: int = 60) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[: limit - 3] + "..."
