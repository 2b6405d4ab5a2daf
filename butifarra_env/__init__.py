"""butifarra-rl: Butifarra as a reinforcement-learning environment.

The rules are :mod:`butifarra_env.core.rules` (pure functions) and :mod:`butifarra_env.core.game`
(the state machine); ``butifarra_v0`` is the PettingZoo env (``butifarra_v1``: the same env
with the trick history and the variants in the observation), :class:`BatchedEnv` the batched
engine for training, and ``butifarra_env/Butifarra-v0`` (``-v1``) the Gymnasium single-agent
ids (:class:`~butifarra_env.envs.gym_env.SingleAgentEnv`; ``gymnasium.make_vec`` gives
:class:`~butifarra_env.envs.gym_vector.ButifarraVectorEnv`, N hands on the batched engine).

Importing this package is cheap and loads no framework: ``butifarra_v0``, ``butifarra_v1``,
``BatchedEnv`` and ``Options`` are imported on first use, and the Gymnasium ids are registered
as soon as Gymnasium itself is imported (before or after this package).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import re
import sys
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = [
    "BatchedEnv",
    "GYM_ID",
    "GYM_ID_V1",
    "Options",
    "__version__",
    "butifarra_v0",
    "butifarra_v1",
]

GYM_ID = "butifarra_env/Butifarra-v0"
GYM_ID_V1 = "butifarra_env/Butifarra-v1"
"""The Gymnasium id of the same envs with ``obs_version=1`` (the ``butifarra_v1`` observation)."""

if TYPE_CHECKING:
    from butifarra_env import butifarra_v0, butifarra_v1
    from butifarra_env.core.options import Options
    from butifarra_env.envs.batched import BatchedEnv

_LAZY = {
    "butifarra_v0": ("butifarra_env.butifarra_v0", None),
    "butifarra_v1": ("butifarra_env.butifarra_v1", None),
    "BatchedEnv": ("butifarra_env.envs.batched", "BatchedEnv"),
    "Options": ("butifarra_env.core.options", "Options"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'butifarra_env' has no attribute {name!r}")
    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def register_gymnasium_id() -> None:
    """Register :data:`GYM_ID` and :data:`GYM_ID_V1` with Gymnasium (done for you; safe to call
    again).

    ``gymnasium.make(GYM_ID)`` builds :class:`~butifarra_env.envs.gym_env.SingleAgentEnv` and
    returns it as it is: the env checks its own call order (RuntimeError before ``reset()``)
    and is checked by ``gymnasium.utils.env_checker.check_env`` in the tests, so Gymnasium's
    passive checker and order-enforcing wrappers are off, and ``action_masks()`` is on the
    object ``make`` returns (Gymnasium 1.x wrappers do not forward attributes; an outer
    wrapper through ``additional_wrappers`` would do, but ``make_vec`` refuses
    ``vector_entry_point`` mode when a spec has any). ``gymnasium.make_vec(GYM_ID, num_envs=N)``
    builds :class:`~butifarra_env.envs.gym_vector.ButifarraVectorEnv` on the batched engine.
    :data:`GYM_ID_V1` builds the same classes with ``obs_version=1``.
    """
    import gymnasium

    # Gymnasium calls an id "out of date" when a higher version is registered; v0 is not:
    # v1 is a sibling with a longer observation, and the shipped agents read v0.
    warnings.filterwarnings(
        "ignore", message=rf".*{re.escape(GYM_ID)} is out of date", category=DeprecationWarning
    )
    for gym_id, obs_version in ((GYM_ID, 0), (GYM_ID_V1, 1)):
        if gym_id not in gymnasium.registry:
            gymnasium.register(
                gym_id,
                entry_point="butifarra_env.envs.gym_env:SingleAgentEnv",
                vector_entry_point="butifarra_env.envs.gym_vector:ButifarraVectorEnv",
                disable_env_checker=True,
                order_enforce=False,
                kwargs={"obs_version": obs_version} if obs_version else {},
            )


class _RegisterWhenGymnasiumLoads(importlib.abc.MetaPathFinder):
    """Registers the Gymnasium id right after ``import gymnasium`` finishes, so that
    ``import butifarra_env`` need not import Gymnasium itself. It stays installed until the
    module is really executed: a mere ``importlib.util.find_spec("gymnasium")`` (torchrl makes
    one) must not use it up."""

    _looking = False

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "gymnasium" or self._looking:
            return None
        self._looking = True  # the other finders locate the real module
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._looking = False
        loader = None if spec is None else spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module
        finder = self

        def exec_then_register(module: ModuleType) -> None:
            exec_module(module)
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
            register_gymnasium_id()

        loader.exec_module = exec_then_register  # type: ignore[method-assign]
        return spec


if "gymnasium" in sys.modules:
    register_gymnasium_id()
elif not any(isinstance(f, _RegisterWhenGymnasiumLoads) for f in sys.meta_path):
    sys.meta_path.insert(0, _RegisterWhenGymnasiumLoads())
