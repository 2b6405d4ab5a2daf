"""butifarra-rl: Butifarra as a reinforcement-learning environment.

The rules live in :mod:`butifarra_env.game`; ``butifarra_v0`` is the PettingZoo env,
:class:`BatchedEnv` the batched engine for training, and ``butifarra_env/Butifarra-v0`` the
Gymnasium single-agent id (:class:`~butifarra_env.gym_wrapper.SingleAgentEnv`).
"""

import gymnasium as _gymnasium

from butifarra_env import butifarra_v0
from butifarra_env.batched import BatchedEnv
from butifarra_env.options import Options

__version__ = "0.1.0"
__all__ = ["BatchedEnv", "butifarra_v0", "Options", "__version__"]

if "butifarra_env/Butifarra-v0" not in _gymnasium.registry:
    _gymnasium.register(
        "butifarra_env/Butifarra-v0", entry_point="butifarra_env.gym_wrapper:SingleAgentEnv"
    )
