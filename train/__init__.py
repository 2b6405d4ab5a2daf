"""Training: self-play PPO (:mod:`train.ppo`). Above the agents and environments it trains;
only the user-facing programs in ``butifarra/`` import it."""
